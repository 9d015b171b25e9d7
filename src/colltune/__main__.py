"""``python -m colltune``: the command line (what ``mpiexec -n P python -m colltune probe`` runs)."""

from colltune.cli import main

main()
