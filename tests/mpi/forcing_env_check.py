"""Under Open MPI's mpirun, with the environment of
:func:`colltune.tune.forcing.openmpi_forcing_environment` for the choices given as JSON: read each
coll/tuned variable back through MPI_T and check that Open MPI took the value the environment
set (a misspelt variable would be left at its default, and the algorithm would not be forced).
Usage: python -m mpi4py forcing_env_check.py '{"scatter": ["binomial", {}], ...}'
"""

import json
import os
import sys

from mpi4py import MPI

from colltune.tune.forcing import forcer_for, openmpi_forcing_environment

choices = {c: (name, params) for c, (name, params) in json.loads(sys.argv[1]).items()}
mpit = forcer_for("openmpi", MPI.Get_library_version()).mpit
for key, value in openmpi_forcing_environment(choices).items():
    variable = key.removeprefix("OMPI_MCA_")
    if os.environ.get(key) != value:
        raise AssertionError(f"{key} is not set to {value} in this job")
    got = mpit.read_bool(variable) if variable == "coll_tuned_use_dynamic_rules" else mpit.read_int(variable)
    if int(got) != int(value):
        raise AssertionError(f"{variable}: Open MPI has {got}, the environment set {value}")
print(f"forcing environment check passed: {len(choices)} collectives", flush=True)
