"""The validators of knob values (:mod:`collscope.vocab.knobs`): each takes the text of a value and returns it
normalised, or raises :class:`InvalidValue` saying what is wrong; the knob adds its name and its valid values.
Facts: ``reference/nccl-facts.md`` section 2 (NCCL variables, NCCL 2.30.7) and section 8 (Open MPI).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from collscope.errors import ConfigError
from collscope.units import parse_size
from collscope.vocab.nccl import PATH_LEVELS, SelectionError, format_selection, parse_selection
from collscope.vocab.ompi import OMPI_VERSION, ompi_algorithm_id, ompi_algorithm_name

__all__ = [
    "InvalidValue", "int_range", "choice", "selection", "PATH_LEVELS", "path_level", "positive_bytes",
    "nonnegative_bytes", "ib_hca",
    "ib_hca_permits", "ib_hca_exact_names", "ib_hca_listed_names",
    "interfaces", "IF_VALID", "split_mask", "TRUE", "FALSE", "ompi_bool", "ompi_algo", "describe_ompi", "no_cache",
    "subsys",
]  # fmt: skip

class InvalidValue(ConfigError):
    """Raised by a validator; :meth:`Knob.validate` adds the knob name, the value and the valid values."""


def _int(text: str) -> int:
    t = text.strip()
    if not re.fullmatch(r"[+-]?[0-9]+", t):
        raise InvalidValue("not an integer")
    return int(t)


def int_range(lo: int, hi: int, multiple: int = 1) -> Callable[[str], str]:
    def check(text: str) -> str:
        n = _int(text)
        if not lo <= n <= hi or n % multiple:
            raise InvalidValue(f"{n} is out of range")
        return str(n)
    return check


def choice(*values: str) -> Callable[[str], str]:
    canon = {v.lower(): v for v in values}

    def check(text: str) -> str:
        t = text.strip().lower()
        if t not in canon:
            raise InvalidValue("unknown value")
        return canon[t]
    return check


def selection(vocabulary: tuple[str, ...], env: str) -> Callable[[str], str]:
    def check(text: str) -> str:
        try:
            return format_selection(parse_selection(text, vocabulary, env))
        except SelectionError as exc:
            raise InvalidValue(exc.problem) from None
    return check


def path_level(text: str) -> str:
    """A path type name as NCCL reads it (exact upper case) or an old integer level. NCCL matches the names with
    strcmp (src/graph/paths.cc ``ncclGetLevel``), so another case is not a spelling NCCL takes: a job that set it ran
    at NCCL's default, and a sweep must not run a value other than the one written."""
    t = text.strip()
    if re.fullmatch(r"[0-9]+", t):
        return str(int(t))
    if t in PATH_LEVELS:
        return t
    if t.upper() in PATH_LEVELS:
        raise InvalidValue(f"NCCL matches the level names exactly (src/graph/paths.cc ncclGetLevel), so it ignores "
                           f"{t!r} and keeps its default; write {t.upper()}, or leave the variable out to describe a "
                           "job that set it so")
    raise InvalidValue("unknown path level")


def nonnegative_bytes(text: str) -> str:
    """A size in bytes, 0 allowed (NCCL_P2P_LL_THRESHOLD=0 turns point-to-point LL off), as an integer NCCL reads
    (``4K`` becomes ``4096``: NCCL itself would read ``4``)."""
    try:
        n = parse_size(text)
    except ValueError:
        raise InvalidValue("not a size in bytes") from None
    if n < 0:
        raise InvalidValue("must be 0 or more")
    return str(n)


def positive_bytes(text: str) -> str:
    try:
        n = parse_size(text)
    except ValueError:
        raise InvalidValue("not a size in bytes") from None
    if n <= 0:
        raise InvalidValue("must be positive")
    return str(n)


_HCA_NAME = re.compile(r"[A-Za-z0-9_.\-]+")


def ib_hca(text: str) -> str:
    t = text.strip()
    prefix = ""
    if t.startswith("^"):
        prefix, t = "^", t[1:]
    if t.startswith("="):
        prefix, t = prefix + "=", t[1:]
    items = t.split(",")
    if len(items) > 32:
        raise InvalidValue(f"{len(items)} HCAs, NCCL takes at most 32")
    out = []
    for item in items:
        fields = item.strip().split(":")
        if not _HCA_NAME.fullmatch(fields[0]) or len(fields) > 4:
            raise InvalidValue(f"bad HCA entry {item!r}")
        if any(f and not (f.isascii() and f.isdigit()) for f in fields[1:]):
            raise InvalidValue(f"bad port/rail/plane in {item!r}")
        out.append(":".join(fields))
    return prefix + ",".join(out)


def ib_hca_permits(spec: str, device: str) -> bool:
    """Whether NCCL_IB_HCA ``spec`` lets NCCL use ``device`` (``name`` or ``name:port``): a comma list of
    ``name[:port]``, matched as a name prefix, exactly with a leading ``=``, and excluded with a leading ``^``
    (NCCL 2.30 src/misc/utils.cc ``parseStringList``/``matchIfList``, read by src/transport/net_ib/init.cc)."""
    exclude = spec.startswith("^")
    body = spec[1:] if exclude else spec
    exact = body.startswith("=")
    body = body[1:] if exact else body
    name, _, port = device.partition(":")
    hit = False
    for item in filter(None, (i.strip() for i in body.split(","))):
        want_name, _, want_port = item.partition(":")
        name_ok = name == want_name if exact else name.startswith(want_name)
        if name_ok and (not want_port or want_port == port):
            hit = True
            break
    return not hit if exclude else hit


def ib_hca_exact_names(spec: str) -> tuple[str, ...] | None:
    """The device names an NCCL_IB_HCA ``spec`` names exactly (``=mlx5_0,mlx5_3``), each once; None for a prefix
    list or an exclusion, whose matches only a node's own NIC names tell."""
    if spec.startswith("^") or not spec.startswith("="):
        return None
    return tuple(dict.fromkeys(item.strip().partition(":")[0] for item in spec[1:].split(",") if item.strip()))


_DEVICE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*_[A-Za-z]*[0-9]+")
"""A whole RDMA device name (``mlx5_0``, ``bnxt_re3``), not a family prefix (``mlx5``)."""


def ib_hca_listed_names(spec: str) -> tuple[str, ...] | None:
    """The device names a prefix list ``mlx5_0,mlx5_1:1`` spells out whole, each once; None for an exact list
    (:func:`ib_hca_exact_names`), an exclusion, or an item that is a family prefix (``mlx5``). NCCL still matches
    them as prefixes (``mlx5_1`` also takes ``mlx5_10``), so a count from them assumes no such longer name."""
    if spec.startswith(("^", "=")):
        return None
    names = [item.strip().partition(":")[0] for item in spec.split(",") if item.strip()]
    if not names or not all(_DEVICE_NAME.fullmatch(n) for n in names):
        return None
    return tuple(dict.fromkeys(names))


_IFNAME = re.compile(r"[A-Za-z0-9_.:@\-]{1,15}")
_CIDR = re.compile(r"[0-9]{1,3}(\.[0-9]{1,3}){3}/[0-9]{1,2}")


def interfaces(*, subnets: bool) -> Callable[[str], str]:
    """A comma list of network interface names (Linux: at most 15 characters), or with ``subnets`` also IPv4
    subnets ``a.b.c.d/n`` (Open MPI's ``*_if_include`` takes both)."""
    def check(text: str) -> str:
        items = [item.strip() for item in text.split(",")]
        for item in items:
            if subnets and _CIDR.fullmatch(item):
                if not all(int(x) <= 255 for x in item.split("/")[0].split(".")) or int(item.split("/")[1]) > 32:
                    raise InvalidValue(f"bad subnet {item!r}")
                continue
            if not _IFNAME.fullmatch(item):
                raise InvalidValue(f"bad interface name {item!r}")
        return ",".join(items)
    return check


IF_VALID = "a comma list of interface names (cl0, eth1; letters, digits, _ . : @ -, at most 15 characters)"


def split_mask(text: str) -> str:
    # nccl-tests reads the mask with strtoul(s, NULL, 16): "10" would mean 0x10. Normalise to 0x form.
    t = text.strip().lower()
    if re.fullmatch(r"0x[0-9a-f]+", t):
        n = int(t, 16)
    elif re.fullmatch(r"[0-9]", t):
        n = int(t)
    elif re.fullmatch(r"[0-9]+", t):
        raise InvalidValue(f"ambiguous: nccl-tests reads this variable as hex, so {t} would mean 0x{t}; "
                       f"write 0x{int(t):x} for decimal {t} or 0x{t} for hex")
    else:
        raise InvalidValue("not a mask")
    if n >= 1 << 32:
        raise InvalidValue("mask wider than 32 bits")
    return f"0x{n:x}"


TRUE = ("1", "t", "true", "enabled", "yes", "y")
FALSE = ("0", "f", "false", "disabled", "no", "n")


def ompi_bool(text: str) -> str:
    t = text.strip().lower()
    if t in TRUE:
        return "1"
    if t in FALSE:
        return "0"
    raise InvalidValue("not a boolean")


def ompi_algo(coll: str) -> Callable[[str], str]:
    def check(text: str) -> str:
        found = ompi_algorithm_id(coll, text)
        if found is None:
            raise InvalidValue(f"no such {coll} algorithm in Open MPI {OMPI_VERSION}")
        return str(found)
    return check


def describe_ompi(coll: str) -> Callable[[str], str]:
    def text(value: str) -> str:
        algo_id = int(value)
        return f"{coll} algorithm {algo_id} ({ompi_algorithm_name(coll, algo_id).replace('_', ' ')})"
    return text



def no_cache(text: str) -> str:
    # NCCL src/param/param.cc: a ',' list of parameter keys, or ALL (exact, upper case)
    items = [item.strip() for item in text.split(",")]
    for item in items:
        if item != "ALL" and not re.fullmatch(r"NCCL_[A-Z0-9_]+", item):
            raise InvalidValue(f"{item!r} is neither ALL nor an NCCL variable name")
    return ",".join(items)


_SUBSYS = ("INIT", "COLL", "P2P", "SHM", "NET", "GRAPH", "TUNING", "ENV", "ALLOC", "ALLOC_HOST", "CALL", "PROXY",
           "NVLS", "BOOTSTRAP", "REG", "PROFILE", "RAS", "DESTROY", "ALL")


def subsys(text: str) -> str:
    t = text.strip()
    neg = t.startswith("^")
    items = [s.strip().upper() for s in (t[1:] if neg else t).split(",")]
    bad = [s for s in items if s not in _SUBSYS]
    if bad:
        raise InvalidValue(f"unknown subsystem {bad[0]!r}")
    return ("^" if neg else "") + ",".join(items)
