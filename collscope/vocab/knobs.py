"""The registry of knobs a sweep may set: NCCL and nccl-tests environment variables and Open MPI's
``coll tuned`` algorithm parameters, each with a validator that returns the normalised value.

The CPU twin of NCCL's NIC choice (``NCCL_IB_HCA``) is the network interface: Open MPI's TCP transport takes
``OMPI_MCA_btl_tcp_if_include`` (and its runtime ``OMPI_MCA_oob_tcp_if_include``), torch's gloo backend
``GLOO_SOCKET_IFNAME``; a rail of a CPU cluster is one interface name on every node.

Values are data: they are validated as text and handed to a process environment as they are, never to a
shell. Newlines, NUL and other control characters are rejected everywhere. Facts: ``reference/nccl-facts.md``
sections 2 (NCCL variables, NCCL 2.30.7) and 8 (Open MPI, here re-read on the installed Open MPI, see
:mod:`collscope.vocab.ompi`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from collscope.errors import ConfigError
from collscope.units import parse_size
from collscope.vocab.configs import DEFAULT
from collscope.vocab.nccl import ALGORITHMS, FUNCTIONS, PROTOCOLS, SelectionError, format_selection, parse_selection
from collscope.vocab.ompi import (
    DYNAMIC_RULES,
    OMPI_ALGORITHMS,
    OMPI_COLL_OP,
    OMPI_VERSION,
    ompi_algorithm_id,
    ompi_algorithm_knob,
    ompi_algorithm_name,
)

__all__ = [
    "Knob", "KnobFamily", "KNOBS", "DYNAMIC_RULES", "validate_setting", "validate_settings", "validate_env",
    "requires", "describe", "knob", "ompi_algorithm_knob",
]

KnobFamily = Literal["nccl", "ompi", "nccl-tests", "gloo"]
_MAX_LEN = 4096
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Invalid(ConfigError):
    """Raised by a validator; :meth:`Knob.validate` adds the knob name, the value and the valid values."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Knob:
    """One settable variable."""

    name: str
    """The environment variable, e.g. ``NCCL_ALGO``."""
    family: KnobFamily
    """Who reads it: ``nccl`` (the NCCL library), ``ompi`` (Open MPI), ``nccl-tests`` (the test binaries) or
    ``gloo`` (torch's gloo backend)."""
    doc: str
    """One line: what it does."""
    validator: Callable[[str], str]
    """Text -> normalised text; raises ConfigError for an invalid value."""
    valid: str
    """The valid values in words (for messages)."""
    collective: str | None = None
    """The collscope op the knob is specific to (Open MPI algorithm knobs), None when it applies to all."""
    inter_node: bool = False
    """True when the knob only changes traffic between nodes (PXN, NIC choice, rails)."""
    describer: Callable[[str], str] | None = None

    def validate(self, value: str) -> str:
        try:
            return self.validator(value)
        except _Invalid as exc:
            raise ConfigError(f"{self.name}={value!r} is invalid: {exc}; valid: {self.valid}") from None

    def describe(self, value: str) -> str:
        if value == DEFAULT:
            return f"{self.name} unset (library default)"
        return self.describer(value) if self.describer else f"{self.name}={value}"


# ---- validators ------------------------------------------------------------------------------------------
def _int(text: str) -> int:
    t = text.strip()
    if not re.fullmatch(r"[+-]?[0-9]+", t):
        raise _Invalid("not an integer")
    return int(t)


def _int_range(lo: int, hi: int, multiple: int = 1) -> Callable[[str], str]:
    def check(text: str) -> str:
        n = _int(text)
        if not lo <= n <= hi or n % multiple:
            raise _Invalid(f"{n} is out of range")
        return str(n)
    return check


def _choice(*values: str) -> Callable[[str], str]:
    canon = {v.lower(): v for v in values}

    def check(text: str) -> str:
        t = text.strip().lower()
        if t not in canon:
            raise _Invalid("unknown value")
        return canon[t]
    return check


def _selection(vocabulary: tuple[str, ...], env: str) -> Callable[[str], str]:
    def check(text: str) -> str:
        try:
            return format_selection(parse_selection(text, vocabulary, env))
        except SelectionError as exc:
            raise _Invalid(exc.problem) from None
    return check


_PATH_LEVELS = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS")


def _path_level(text: str) -> str:
    t = text.strip()
    if re.fullmatch(r"[0-9]+", t):
        return str(int(t))
    if t.upper() in _PATH_LEVELS:
        return t.upper()
    raise _Invalid("unknown path level")


def _positive_bytes(text: str) -> str:
    try:
        n = parse_size(text)
    except ValueError:
        raise _Invalid("not a size in bytes") from None
    if n <= 0:
        raise _Invalid("must be positive")
    return str(n)


_HCA_NAME = re.compile(r"[A-Za-z0-9_.\-]+")


def _ib_hca(text: str) -> str:
    t = text.strip()
    prefix = ""
    if t.startswith("^"):
        prefix, t = "^", t[1:]
    if t.startswith("="):
        prefix, t = prefix + "=", t[1:]
    items = t.split(",")
    if len(items) > 32:
        raise _Invalid(f"{len(items)} HCAs, NCCL takes at most 32")
    out = []
    for item in items:
        fields = item.strip().split(":")
        if not _HCA_NAME.fullmatch(fields[0]) or len(fields) > 4:
            raise _Invalid(f"bad HCA entry {item!r}")
        if any(f and not (f.isascii() and f.isdigit()) for f in fields[1:]):
            raise _Invalid(f"bad port/rail/plane in {item!r}")
        out.append(":".join(fields))
    return prefix + ",".join(out)


_IFNAME = re.compile(r"[A-Za-z0-9_.:@\-]{1,15}")
_CIDR = re.compile(r"[0-9]{1,3}(\.[0-9]{1,3}){3}/[0-9]{1,2}")


def _interfaces(*, subnets: bool) -> Callable[[str], str]:
    """A comma list of network interface names (Linux: at most 15 characters), or with ``subnets`` also IPv4
    subnets ``a.b.c.d/n`` (Open MPI's ``*_if_include`` takes both)."""
    def check(text: str) -> str:
        items = [item.strip() for item in text.split(",")]
        for item in items:
            if subnets and _CIDR.fullmatch(item):
                if not all(int(x) <= 255 for x in item.split("/")[0].split(".")) or int(item.split("/")[1]) > 32:
                    raise _Invalid(f"bad subnet {item!r}")
                continue
            if not _IFNAME.fullmatch(item):
                raise _Invalid(f"bad interface name {item!r}")
        return ",".join(items)
    return check


_IF_VALID = "a comma list of interface names (cl0, eth1; letters, digits, _ . : @ -, at most 15 characters)"


def _split_mask(text: str) -> str:
    # nccl-tests reads the mask with strtoul(s, NULL, 16): "10" would mean 0x10. Normalise to 0x form.
    t = text.strip().lower()
    if re.fullmatch(r"0x[0-9a-f]+", t):
        n = int(t, 16)
    elif re.fullmatch(r"[0-9]", t):
        n = int(t)
    elif re.fullmatch(r"[0-9]+", t):
        raise _Invalid(f"ambiguous: nccl-tests reads this variable as hex, so {t} would mean 0x{t}; "
                       f"write 0x{int(t):x} for decimal {t} or 0x{t} for hex")
    else:
        raise _Invalid("not a mask")
    if n >= 1 << 32:
        raise _Invalid("mask wider than 32 bits")
    return f"0x{n:x}"


_TRUE = ("1", "t", "true", "enabled", "yes", "y")
_FALSE = ("0", "f", "false", "disabled", "no", "n")


def _ompi_bool(text: str) -> str:
    t = text.strip().lower()
    if t in _TRUE:
        return "1"
    if t in _FALSE:
        return "0"
    raise _Invalid("not a boolean")


def _ompi_algo(coll: str) -> Callable[[str], str]:
    def check(text: str) -> str:
        found = ompi_algorithm_id(coll, text)
        if found is None:
            raise _Invalid(f"no such {coll} algorithm in Open MPI {OMPI_VERSION}")
        return str(found)
    return check


def _describe_ompi(coll: str) -> Callable[[str], str]:
    def text(value: str) -> str:
        algo_id = int(value)
        return f"{coll} algorithm {algo_id} ({ompi_algorithm_name(coll, algo_id).replace('_', ' ')})"
    return text


# ---- the registry -----------------------------------------------------------------------------------------
def _nccl(name: str, doc: str, validator: Callable[[str], str], valid: str, *, inter_node: bool = False,
          describer: Callable[[str], str] | None = None) -> Knob:
    return Knob(name=name, family="nccl", doc=doc, validator=validator, valid=valid, inter_node=inter_node,
                describer=describer)


_SEL_VALID = f"'func:list;func:list' per function (NCCL 2.24+), funcs {', '.join(FUNCTIONS)}"
_LEVELS = f"{', '.join(_PATH_LEVELS)} or a legacy integer (0..4, larger = SYS)"


def _build() -> dict[str, Knob]:
    knobs = [
        _nccl("NCCL_ALGO", "algorithms NCCL may use", _selection(ALGORITHMS, "NCCL_ALGO"),
              f"{', '.join(ALGORITHMS)}; '^' excludes; {_SEL_VALID}",
              describer=lambda v: f"NCCL algorithms {v}"),
        _nccl("NCCL_PROTO", "protocols NCCL may use", _selection(PROTOCOLS, "NCCL_PROTO"),
              f"{', '.join(PROTOCOLS)}; '^' excludes; {_SEL_VALID}", describer=lambda v: f"NCCL protocols {v}"),
        _nccl("NCCL_PXN_DISABLE", "1 disables PXN (inter-node traffic through an NVLink peer's NIC)",
              _choice("0", "1"), "0, 1", inter_node=True,
              describer=lambda v: "PXN disabled" if v == "1" else "PXN enabled"),
        _nccl("NCCL_P2P_PXN_LEVEL", "when send/recv uses PXN: 0 never, 1 if no PCI path, 2 always",
              _choice("0", "1", "2"), "0, 1, 2", inter_node=True),
        _nccl("NCCL_CROSS_NIC", "0 same NIC per ring/tree (rail-optimised), 1 allow different NICs, 2 prefer same",
              _choice("0", "1", "2"), "0, 1, 2", inter_node=True, describer=lambda v: f"cross-NIC mode {v}"),
        _nccl("NCCL_IB_HCA", "which InfiniBand HCAs NCCL uses", _ib_hca,
              "'[^][=]name[:port[:rail[:plane]]],...' with at most 32 HCAs, names of letters, digits, _ . -",
              inter_node=True, describer=lambda v: f"HCAs {v}"),
        _nccl("NCCL_MIN_NCHANNELS", "lower bound on channels (deprecated in favour of NCCL_MIN_CTAS)",
              _int_range(1, 64), "integer 1..64"),
        _nccl("NCCL_MAX_NCHANNELS", "upper bound on channels (deprecated in favour of NCCL_MAX_CTAS)",
              _int_range(1, 64), "integer 1..64"),
        _nccl("NCCL_MIN_CTAS", "lower bound on CTAs (channels), NCCL 2.17+", _int_range(1, 64),
              "integer 1..64 (1..32 before NCCL 2.25)"),
        _nccl("NCCL_MAX_CTAS", "upper bound on CTAs (channels), NCCL 2.17+", _int_range(1, 64),
              "integer 1..64 (1..32 before NCCL 2.25)"),
        _nccl("NCCL_NVLS_ENABLE", "NVLink SHARP: 0 off, 1 on (fail without resources), 2 auto",
              _choice("0", "1", "2"), "0, 1, 2"),
        _nccl("NCCL_COLLNET_ENABLE", "1 enables CollNet (SHARP) through a plugin", _choice("0", "1"), "0, 1"),
        _nccl("NCCL_BUFFSIZE", "Simple protocol buffer in bytes", _positive_bytes,
              "a positive size in bytes ('4194304' or '4M'; a power of 2 is recommended)"),
        _nccl("NCCL_NTHREADS", "CUDA threads per CTA", _int_range(64, 512, 32), "a multiple of 32 in 64..512"),
        _nccl("NCCL_IB_QPS_PER_CONNECTION", "queue pairs per IB connection", _int_range(1, 128), "integer 1..128",
              inter_node=True),
        _nccl("NCCL_NET_GDR_LEVEL", "max GPU-NIC path class for GPUDirect RDMA", _path_level, _LEVELS),
        _nccl("NCCL_P2P_LEVEL", "max GPU-GPU path class for P2P", _path_level, _LEVELS),
        _nccl("NCCL_SHM_DISABLE", "1 disables the shared-memory transport", _choice("0", "1"), "0, 1"),
        _nccl("NCCL_P2P_DISABLE", "1 disables the P2P transport", _choice("0", "1"), "0, 1"),
        _nccl("NCCL_NO_CACHE", "variables NCCL reads again at every use instead of once per process (NCCL 2.30.3+)",
              _no_cache, "ALL, or a comma list of NCCL variable names (NCCL_MIN_CTAS,NCCL_BUFFSIZE)"),
        _nccl("NCCL_DEBUG", "log level", _choice("VERSION", "WARN", "INFO", "TRACE"), "VERSION, WARN, INFO, TRACE"),
        _nccl("NCCL_DEBUG_SUBSYS", "log subsystems", _subsys,
              "comma list of INIT, COLL, P2P, SHM, NET, GRAPH, TUNING, ENV, ALLOC, ALLOC_HOST, CALL, PROXY, NVLS, "
              "BOOTSTRAP, REG, PROFILE, RAS, DESTROY, ALL; leading '^' excludes"),
        Knob(name="NCCL_TESTS_SPLIT_MASK", family="nccl-tests", validator=_split_mask, inter_node=True,
             doc="nccl-tests splits ranks into communicators by rank & mask (rail-isolated runs)",
             valid="a mask '0x..' (hex, as nccl-tests reads it) or a single decimal digit",
             describer=lambda v: f"communicators split by rank & {v}"),
        Knob(name="OMPI_MCA_btl_tcp_if_include", family="ompi", validator=_interfaces(subnets=True),
             inter_node=True, doc="Open MPI: the interfaces (or subnets) its TCP transport sends over: the rail",
             valid=_IF_VALID + " or subnets a.b.c.d/n", describer=lambda v: f"Open MPI TCP over {v}"),
        Knob(name="OMPI_MCA_oob_tcp_if_include", family="ompi", validator=_interfaces(subnets=True),
             inter_node=True, doc="Open MPI: the interfaces (or subnets) of its runtime's control traffic",
             valid=_IF_VALID + " or subnets a.b.c.d/n", describer=lambda v: f"Open MPI runtime over {v}"),
        Knob(name="GLOO_SOCKET_IFNAME", family="gloo", validator=_interfaces(subnets=False), inter_node=True,
             doc="torch gloo: the interfaces its sockets use (several: one device each): the rail",
             valid=_IF_VALID, describer=lambda v: f"gloo over {v}"),
        Knob(name=DYNAMIC_RULES, family="ompi", validator=_ompi_bool,
             doc="Open MPI: allow forcing coll tuned algorithms", valid=f"{', '.join(_TRUE)} / {', '.join(_FALSE)}",
             describer=lambda v: "Open MPI dynamic rules " + ("on" if v == "1" else "off")),
    ]
    for coll, names in OMPI_ALGORITHMS.items():
        knobs.append(Knob(
            name=ompi_algorithm_knob(coll), family="ompi", validator=_ompi_algo(coll), collective=OMPI_COLL_OP[coll],
            doc=f"Open MPI {coll} algorithm (needs {DYNAMIC_RULES}=1)", describer=_describe_ompi(coll),
            valid=f"an id or a name of Open MPI {OMPI_VERSION}: " + ", ".join(f"{i} {n}" for i, n in enumerate(names))))
    return {k.name: k for k in knobs}


def _no_cache(text: str) -> str:
    # NCCL src/param/param.cc: a ',' list of parameter keys, or ALL (exact, upper case)
    items = [item.strip() for item in text.split(",")]
    for item in items:
        if item != "ALL" and not re.fullmatch(r"NCCL_[A-Z0-9_]+", item):
            raise _Invalid(f"{item!r} is neither ALL nor an NCCL variable name")
    return ",".join(items)


_SUBSYS = ("INIT", "COLL", "P2P", "SHM", "NET", "GRAPH", "TUNING", "ENV", "ALLOC", "ALLOC_HOST", "CALL", "PROXY",
           "NVLS", "BOOTSTRAP", "REG", "PROFILE", "RAS", "DESTROY", "ALL")


def _subsys(text: str) -> str:
    t = text.strip()
    neg = t.startswith("^")
    items = [s.strip().upper() for s in (t[1:] if neg else t).split(",")]
    bad = [s for s in items if s not in _SUBSYS]
    if bad:
        raise _Invalid(f"unknown subsystem {bad[0]!r}")
    return ("^" if neg else "") + ",".join(items)


KNOBS: dict[str, Knob] = _build()
"""Every knob a sweep may set, by environment variable name."""


# ---- public functions -------------------------------------------------------------------------------------
def knob(name: str) -> Knob:
    """The knob called ``name``; ConfigError with a suggestion and the valid names when unknown."""
    found = KNOBS.get(name) if isinstance(name, str) else None
    if found is not None:
        return found
    hint = difflib.get_close_matches(str(name), list(KNOBS), n=1, cutoff=0.6)
    maybe = f"did you mean {hint[0]}? " if hint else ""
    raise ConfigError(f"unknown knob {name!r}; {maybe}valid knobs: {', '.join(sorted(KNOBS))}")


def _as_text(name: str, value: object) -> str:
    if value is None:
        return DEFAULT
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if not isinstance(value, str):
        raise ConfigError(f"{name}: value {value!r} is a {type(value).__name__}; expected text or an integer")
    if _CONTROL.search(value):
        raise ConfigError(f"{name}={value!r}: control characters (newline, NUL, ...) are not allowed in a value")
    if len(value) > _MAX_LEN:
        raise ConfigError(f"{name}: value of {len(value)} characters is longer than {_MAX_LEN}")
    return value


def validate_setting(name: str, value: object) -> str:
    """The normalised value of one knob. ``None`` and ``""`` (:data:`DEFAULT`) mean unset and return DEFAULT."""
    k = knob(name)
    text = _as_text(name, value)
    return DEFAULT if text == DEFAULT else k.validate(text)


def validate_settings(settings: Mapping[str, object]) -> dict[str, str]:
    """Validate every knob of ``settings``; unset values (None, ``""``) are dropped from the result."""
    out = {}
    for name, value in settings.items():
        v = validate_setting(name, value)
        if v != DEFAULT:
            out[name] = v
    return out


def validate_env(env: Mapping[str, object]) -> dict[str, str]:
    """Validate fixed environment variables (a spec's ``fixed_env``).

    Known knobs are validated as knobs; a name close to a known knob (``NCCL_ALGOO``) is rejected with the
    suggestion; any other variable (``NCCL_SOCKET_IFNAME``, ...) is kept verbatim, as data.
    """
    out = {}
    for name, value in env.items():
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            raise ConfigError(f"{name!r} is not a valid environment variable name (letters, digits, _)")
        if name in KNOBS:
            v = validate_setting(name, value)
            if v != DEFAULT:
                out[name] = v
            continue
        close = difflib.get_close_matches(name, list(KNOBS), n=1, cutoff=0.85)
        if close:
            raise ConfigError(f"unknown variable {name!r}: did you mean {close[0]}?")
        text = _as_text(name, value)
        out[name] = text
    return out


def requires(settings: Mapping[str, str]) -> dict[str, str]:
    """``settings`` plus what they imply: an Open MPI algorithm needs dynamic rules, a CollNet algorithm needs
    ``NCCL_COLLNET_ENABLE=1``. ConfigError when the settings contradict their own requirement."""
    out = dict(settings)
    forced = sorted(n for n in settings if KNOBS.get(n) is not None and KNOBS[n].collective is not None)
    if forced:
        if out.get(DYNAMIC_RULES, "1") != "1":
            raise ConfigError(f"{forced[0]} is only used with {DYNAMIC_RULES}=1, but it is set to "
                              f"{out[DYNAMIC_RULES]!r}")
        out[DYNAMIC_RULES] = "1"
    algo = settings.get("NCCL_ALGO")
    if algo:
        entries = parse_selection(algo, ALGORITHMS, "NCCL_ALGO")
        wants = {n for e in entries if not e.exclude for n in e.names if n.startswith("CollNet")}
        if wants:
            if out.get("NCCL_COLLNET_ENABLE", "1") != "1":
                raise ConfigError(f"NCCL_ALGO={algo} forces {', '.join(sorted(wants))}, which needs "
                                  f"NCCL_COLLNET_ENABLE=1, but it is set to {out['NCCL_COLLNET_ENABLE']!r}")
            out["NCCL_COLLNET_ENABLE"] = "1"
    return out


def describe(name: str, value: object) -> str:
    """Human text for one setting, e.g. ``"allreduce algorithm 4 (ring)"``."""
    return knob(name).describe(validate_setting(name, value))
