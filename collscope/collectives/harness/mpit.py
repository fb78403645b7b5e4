"""Open MPI control variables through the MPI tool interface (MPI_T), called with ctypes.

mpi4py does not wrap MPI_T, so this module calls the MPI library that mpi4py loaded (found in
``/proc/self/maps``, so it is the same library, never a second copy) through ctypes:
``MPI_T_init_thread``, ``MPI_T_cvar_get_index``, ``MPI_T_cvar_get_info``, ``MPI_T_cvar_handle_alloc``,
``MPI_T_cvar_read`` and ``MPI_T_cvar_write``. Only integer variables not bound to an object are handled (the
``coll_tuned_<coll>_algorithm`` family); anything else is a :class:`MpiTError` naming the variable.

Why it matters: Open MPI's ``coll tuned`` component reads a forced algorithm
(``coll_tuned_allreduce_algorithm``, with ``coll_tuned_use_dynamic_rules`` set before ``MPI_Init``) when a
communicator is created. Writing the variable and then creating a communicator (``COMM_WORLD.Dup()``) switches
the algorithm inside a running job, which is what persistent sweep workers do between points.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from collscope.errors import CollscopeError

__all__ = ["MpiTError", "MpiT", "Cvar", "find_libmpi", "ompi_cvar_name"]

_MPI_THREAD_SINGLE = 0
_BIND_NO_OBJECT = 0
_SCOPE_NAMES = ("constant", "readonly", "local", "group", "group_eq", "all", "all_eq")
_WRITABLE_SCOPES = frozenset({2, 3, 4, 5, 6})


class MpiTError(CollscopeError):
    """The MPI tool interface refused a call, or a variable cannot be used (the message says which and why)."""


def ompi_cvar_name(env_name: str) -> str:
    """``OMPI_MCA_coll_tuned_allreduce_algorithm`` -> ``coll_tuned_allreduce_algorithm`` (MPI_T's name)."""
    prefix = "OMPI_MCA_"
    if not env_name.startswith(prefix):
        raise MpiTError(f"{env_name!r} is not an Open MPI MCA variable (expected the prefix {prefix})")
    return env_name[len(prefix):]


def find_libmpi(maps_path: str = "/proc/self/maps") -> str:
    """The path of the ``libmpi.so`` this process has loaded (import ``mpi4py.MPI`` first)."""
    try:
        with open(maps_path) as fh:
            for line in fh:
                path = line.rstrip("\n").split(maxsplit=5)[-1]
                name = path.rsplit("/", 1)[-1]
                if name.startswith("libmpi.so"):
                    return path
    except OSError as exc:
        raise MpiTError(f"cannot read {maps_path} to find the MPI library: {exc}") from None
    raise MpiTError("no libmpi.so is loaded in this process (import mpi4py.MPI first; MPI_T needs Open MPI's "
                    "libmpi, which mpi4py loads)")


@dataclass(frozen=True, slots=True)
class Cvar:
    """One integer control variable with an allocated handle."""

    name: str
    index: int
    scope: str
    handle: Any
    """The ``MPI_T_cvar_handle`` (a ctypes pointer)."""


class MpiT:
    """The MPI tool interface of the MPI library ``mpi`` (``mpi4py.MPI``, already initialised)."""

    def __init__(self, mpi: Any, library: str | None = None) -> None:
        self._mpi = mpi
        path = library or find_libmpi()
        try:
            self._lib = ctypes.CDLL(path)
        except OSError as exc:
            raise MpiTError(f"cannot load the MPI library {path}: {exc}") from None
        if not hasattr(self._lib, "MPI_T_cvar_write"):
            raise MpiTError(f"{path} has no MPI_T_cvar_write: the MPI tool interface is missing from this library")
        provided = ctypes.c_int()
        self._check(self._lib.MPI_T_init_thread(_MPI_THREAD_SINGLE, ctypes.byref(provided)), "MPI_T_init_thread")
        self._int_handle = int(mpi.INT.handle)
        self._cvars: dict[str, Cvar] = {}

    def _check(self, code: int, call: str, name: str | None = None) -> None:
        if code == 0:
            return
        try:
            text = str(self._mpi.Get_error_string(code))
        except Exception:  # an MPI_T error class has no MPI error string in every library
            text = "unknown error"
        what = f" for {name!r}" if name else ""
        raise MpiTError(f"{call}{what} failed with code {code} ({text})")

    def cvar(self, name: str) -> Cvar:
        """The control variable ``name`` (MPI_T's spelling: ``coll_tuned_allreduce_algorithm``), checked to be a
        writable integer not bound to an object; MpiTError otherwise (an unknown name says how to list them)."""
        found = self._cvars.get(name)
        if found is not None:
            return found
        index = ctypes.c_int()
        code = self._lib.MPI_T_cvar_get_index(name.encode(), ctypes.byref(index))
        if code != 0:
            raise MpiTError(f"Open MPI has no control variable {name!r} (MPI_T_cvar_get_index code {code}); "
                            "`ompi_info --param coll tuned --level 9` lists them (coll tuned's variables also "
                            "need OMPI_MCA_coll_tuned_use_dynamic_rules=1 before MPI_Init)")
        name_buf, desc_buf = ctypes.create_string_buffer(256), ctypes.create_string_buffer(1024)
        name_len, desc_len = ctypes.c_int(256), ctypes.c_int(1024)
        verbosity, bind, scope = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        datatype, enumtype = ctypes.c_void_p(), ctypes.c_void_p()
        self._check(self._lib.MPI_T_cvar_get_info(index, name_buf, ctypes.byref(name_len), ctypes.byref(verbosity),
                                                  ctypes.byref(datatype), ctypes.byref(enumtype), desc_buf,
                                                  ctypes.byref(desc_len), ctypes.byref(bind), ctypes.byref(scope)),
                    "MPI_T_cvar_get_info", name)
        scope_name = _SCOPE_NAMES[scope.value] if 0 <= scope.value < len(_SCOPE_NAMES) else str(scope.value)
        if (datatype.value or 0) != self._int_handle:
            raise MpiTError(f"control variable {name!r} is not an MPI_INT; only integer variables are supported")
        if bind.value != _BIND_NO_OBJECT:
            raise MpiTError(f"control variable {name!r} is bound to an MPI object (bind {bind.value}); only "
                            "process-wide variables are supported")
        if scope.value not in _WRITABLE_SCOPES:
            raise MpiTError(f"control variable {name!r} has scope {scope_name}: it cannot be changed after MPI_Init")
        handle, count = ctypes.c_void_p(), ctypes.c_int()
        self._check(self._lib.MPI_T_cvar_handle_alloc(index, None, ctypes.byref(handle), ctypes.byref(count)),
                    "MPI_T_cvar_handle_alloc", name)
        if count.value != 1:
            raise MpiTError(f"control variable {name!r} holds {count.value} values; only single integers are "
                            "supported")
        found = Cvar(name=name, index=index.value, scope=scope_name, handle=handle)
        self._cvars[name] = found
        return found

    def read(self, name: str) -> int:
        """The current value of the integer variable ``name``."""
        var = self.cvar(name)
        value = ctypes.c_int()
        self._check(self._lib.MPI_T_cvar_read(var.handle, ctypes.byref(value)), "MPI_T_cvar_read", name)
        return int(value.value)

    def write(self, name: str, value: int) -> None:
        """Set ``name`` to ``value`` and read it back; MpiTError when the library refuses or ignores the value."""
        var = self.cvar(name)
        self._check(self._lib.MPI_T_cvar_write(var.handle, ctypes.byref(ctypes.c_int(int(value)))),
                    "MPI_T_cvar_write", name)
        now = self.read(name)
        if now != int(value):
            raise MpiTError(f"control variable {name!r} reads {now} after writing {value}: the write did not apply")
