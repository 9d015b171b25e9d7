"""Reading and writing an MPI library's control variables through the MPI tool interface (MPI_T).

mpi4py does not wrap MPI_T, so this calls the library mpi4py loaded through :mod:`ctypes`.
:class:`ControlVariables` writes a set of variables and puts back what they held: the forcers of
:mod:`colltune.tune.forcing` decide what to write for one of the library's algorithms, and the jobs
of :mod:`colltune.tune.spawn` write what the tuning job decided without importing the catalogue
that decides it (this module imports nothing of colltune's but its errors).
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from colltune.errors import ColltuneError

#: MPI_T's return code for success.
_SUCCESS = 0


class ForcingError(ColltuneError, RuntimeError):
    """The library cannot be forced to run an algorithm; the message says which variable and why."""


def _loaded_libmpi() -> str:
    """The path of the MPI library this process has loaded (mpi4py's), from ``/proc/self/maps``."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        maps = ""
    for line in maps.splitlines():
        path = line.split()[-1] if len(line.split()) >= 6 else ""
        if re.fullmatch(r"libmpi(_abi)?\.so(\.\d+)*", Path(path).name):
            return path
    return "libmpi.so.12"


class MpiT:
    """The few MPI_T calls needed to read and write integer and string control variables."""

    def __init__(self) -> None:
        try:
            self.lib = ctypes.CDLL(_loaded_libmpi())
        except OSError as exc:
            raise ForcingError(f"cannot load the MPI library for MPI_T: {exc}") from None
        provided = ctypes.c_int()
        rc = self.lib.MPI_T_init_thread(3, ctypes.byref(provided))  # MPI_THREAD_MULTIPLE
        if rc != _SUCCESS:
            raise ForcingError(f"MPI_T_init_thread failed (error {rc})")
        self._index: dict[str, int] = {}

    def close(self) -> None:
        self.lib.MPI_T_finalize()

    def index(self, name: str) -> int:
        if name not in self._index:
            i = ctypes.c_int()
            rc = self.lib.MPI_T_cvar_get_index(name.encode(), ctypes.byref(i))
            if rc != _SUCCESS:
                raise ForcingError(f"{name}: this MPI library has no such control variable (MPI_T error {rc})")
            self._index[name] = i.value
        return self._index[name]

    def description(self, name: str) -> str:
        text = ctypes.create_string_buffer(16384)
        length = ctypes.c_int(len(text))
        out = [ctypes.create_string_buffer(256), ctypes.c_int(256), ctypes.c_int(), ctypes.c_int64(),
               ctypes.c_void_p()]
        bind, scope = ctypes.c_int(), ctypes.c_int()
        rc = self.lib.MPI_T_cvar_get_info(self.index(name), out[0], ctypes.byref(out[1]), ctypes.byref(out[2]),
                                          ctypes.byref(out[3]), ctypes.byref(out[4]), text, ctypes.byref(length),
                                          ctypes.byref(bind), ctypes.byref(scope))
        if rc != _SUCCESS:
            raise ForcingError(f"{name}: MPI_T_cvar_get_info failed (error {rc})")
        return text.value.decode(errors="replace")

    @contextmanager
    def _handle(self, name: str) -> Iterator[tuple[ctypes.c_void_p, int]]:
        handle, count = ctypes.c_void_p(), ctypes.c_int()
        rc = self.lib.MPI_T_cvar_handle_alloc(self.index(name), None, ctypes.byref(handle), ctypes.byref(count))
        if rc != _SUCCESS:
            raise ForcingError(f"{name}: MPI_T_cvar_handle_alloc failed (error {rc})")
        try:
            yield handle, count.value
        finally:
            self.lib.MPI_T_cvar_handle_free(ctypes.byref(handle))

    def _read(self, name: str, value: Any, sized: bool = False) -> Any:
        """Read ``name`` into the ctypes object ``value`` (a string buffer of the variable's count
        plus one where ``sized``) and return it."""
        with self._handle(name) as (handle, count):
            if sized:
                value = ctypes.create_string_buffer(max(count, 1) + 1)
            rc = self.lib.MPI_T_cvar_read(handle, value if sized else ctypes.byref(value))
        if rc != _SUCCESS:
            raise ForcingError(f"{name}: MPI_T_cvar_read failed (error {rc})")
        return value

    def read_int(self, name: str) -> int:
        return int(self._read(name, ctypes.c_int()).value)

    def read_bool(self, name: str) -> bool:
        return bool(self._read(name, ctypes.c_bool()).value)

    def read_text(self, name: str) -> str:
        return str(self._read(name, None, sized=True).value.decode(errors="replace"))

    def write_int(self, name: str, value: int) -> None:
        self._write(name, ctypes.c_int(value), value)

    def write_bool(self, name: str, value: bool) -> None:
        self._write(name, ctypes.c_bool(value), value)

    def _write(self, name: str, value: Any, shown: object) -> None:
        with self._handle(name) as (handle, _):
            rc = self.lib.MPI_T_cvar_write(handle, ctypes.byref(value))
        if rc != _SUCCESS:
            raise ForcingError(f"{name}: cannot be set to {shown} at run time (MPI_T error {rc})")


class ControlVariables:
    """Writes integer and boolean control variables (:meth:`apply`) and puts back the values they
    had before the first write (:meth:`restore`); :meth:`close` also ends the MPI_T session.
    ``fresh_communicator``: the library reads the variables when a communicator is created (Open
    MPI's coll/tuned), so a call must run on a communicator made after :meth:`apply`; else it reads
    them on every call (MPICH)."""

    def __init__(self, fresh_communicator: bool = False) -> None:
        self.fresh_communicator = fresh_communicator
        self.mpit = MpiT()
        self._saved: dict[str, int | bool] = {}

    def apply(self, settings: Mapping[str, int | bool]) -> None:
        """Write each variable of ``settings`` (a bool as an MPI boolean, else an int), in order."""
        for name, value in settings.items():
            if name not in self._saved:
                self._saved[name] = self.mpit.read_bool(name) if isinstance(value, bool) else self.mpit.read_int(name)
            self._put(name, value)

    def restore(self) -> None:
        """Write back every variable's value from before its first write."""
        for name, value in self._saved.items():
            self._put(name, value)
        self._saved.clear()

    def _put(self, name: str, value: int | bool) -> None:
        if isinstance(value, bool):
            self.mpit.write_bool(name, value)
        else:
            self.mpit.write_int(name, value)

    def close(self) -> None:
        """Restore every variable written and end the MPI_T session."""
        self.restore()
        self.mpit.close()


__all__ = ["ControlVariables", "ForcingError", "MpiT"]
