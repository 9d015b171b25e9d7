"""A helper of the MPI test programs (importable from them: their folder is on sys.path)."""

from colltune.errors import ParameterError


def messages_of(comm, call):
    """Run ``call`` on every rank of ``comm``; every rank's ParameterError message, None for a rank
    that did not raise, gathered on every rank."""
    try:
        call()
    except ParameterError as exc:
        message = str(exc)
    else:
        message = None
    return comm.allgather(message)
