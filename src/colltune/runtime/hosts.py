"""Which ranks of a communicator share a host: what the hierarchical algorithms read.

MPI says it: ``MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`` groups the ranks that can share
memory, that is, the ranks of one node.  :envvar:`COLLTUNE_HOSTS` overrides it with hosts
made up from ``MPI_COMM_WORLD`` ranks, so that one machine can stand for a cluster in tests and
experiments: ``block:K`` puts world ranks ``K h .. K h + K - 1`` on host h (the last host may
have fewer), ``cyclic:N`` puts world rank r on host ``r mod N``.
"""

from __future__ import annotations

import os

from mpi4py import MPI

from colltune.errors import ParameterError

#: Environment variable: made-up hosts (``block:K`` or ``cyclic:N``) instead of MPI's nodes.
HOSTS_ENV = "COLLTUNE_HOSTS"


def made_up_host(spec: str, world_rank: int) -> int:
    """The host of ``world_rank`` under :envvar:`COLLTUNE_HOSTS` = ``spec``; a
    :class:`ParameterError` naming the variable and value if it is not ``block:K`` or ``cyclic:N``
    with a whole number >= 1."""
    kind, _, number = spec.strip().partition(":")
    try:
        count = int(number)
    except ValueError:
        count = 0
    if kind not in ("block", "cyclic") or count < 1:
        raise ParameterError(f"{HOSTS_ENV}={spec!r}: give block:K (K ranks per host) or cyclic:N "
                             f"(rank r on host r mod N), K and N whole numbers >= 1")
    return world_rank // count if kind == "block" else world_rank % count


def host_labels(comm: MPI.Comm) -> tuple[int, ...]:
    """The host label of every rank of ``comm`` (collective): equal for ranks of one host, from
    :envvar:`COLLTUNE_HOSTS` if set, else from ``MPI_Comm_split_type``.  A bad setting raises the
    same error on every rank."""
    spec = os.environ.get(HOSTS_ENV)
    error, label = None, -1
    if spec:
        try:
            label = made_up_host(spec, MPI.COMM_WORLD.Get_rank())
        except ParameterError as exc:
            error = str(exc)
    else:
        node = comm.Split_type(MPI.COMM_TYPE_SHARED)
        label = node.allreduce(comm.Get_rank(), op=MPI.MIN)
        node.Free()
    labels = comm.allgather((error, label))
    bad = next((e for e, _ in labels if e), None)
    if bad:
        raise ParameterError(bad)
    return tuple(int(lab) for _, lab in labels)
