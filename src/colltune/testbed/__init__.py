"""An emulated cluster on one machine (needs root): see :mod:`colltune.testbed.net`."""

from colltune.testbed.net import TestbedError, down, mpiexec_command, status, topology_file, up

__all__ = ["TestbedError", "down", "mpiexec_command", "status", "topology_file", "up"]
