"""The registry of knobs a sweep may set: NCCL and nccl-tests environment variables and Open MPI's
``coll tuned`` algorithm parameters, each with a validator that returns the normalised value (the validators:
:mod:`collscope.vocab.knob_values`).

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
from collscope.vocab import knob_values as values
from collscope.vocab.configs import DEFAULT
from collscope.vocab.nccl import ALGORITHMS, FUNCTIONS, PROTOCOLS, parse_selection
from collscope.vocab.ompi import (
    DYNAMIC_RULES,
    OMPI_ALGORITHMS,
    OMPI_COLL_OP,
    OMPI_VERSION,
    ompi_algorithm_knob,
)

__all__ = [
    "Knob", "KnobFamily", "KNOBS", "DYNAMIC_RULES", "validate_setting", "validate_settings", "validate_env",
    "requires", "describe", "knob", "ompi_algorithm_knob",
]

KnobFamily = Literal["nccl", "ompi", "nccl-tests", "gloo"]
_MAX_LEN = 4096
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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
        except values.InvalidValue as exc:
            raise ConfigError(f"{self.name}={value!r} is invalid: {exc}; valid: {self.valid}") from None

    def describe(self, value: str) -> str:
        if value == DEFAULT:
            return f"{self.name} unset (library default)"
        return self.describer(value) if self.describer else f"{self.name}={value}"


# ---- the registry -----------------------------------------------------------------------------------------
def _nccl(name: str, doc: str, validator: Callable[[str], str], valid: str, *, inter_node: bool = False,
          describer: Callable[[str], str] | None = None) -> Knob:
    return Knob(name=name, family="nccl", doc=doc, validator=validator, valid=valid, inter_node=inter_node,
                describer=describer)


_SEL_VALID = f"'func:list;func:list' per function (NCCL 2.24+), funcs {', '.join(FUNCTIONS)}"
_LEVELS = f"{', '.join(values.PATH_LEVELS)} or a legacy integer (0..4, larger = SYS)"


def _build() -> dict[str, Knob]:
    knobs = [
        _nccl("NCCL_ALGO", "algorithms NCCL may use", values.selection(ALGORITHMS, "NCCL_ALGO"),
              f"{', '.join(ALGORITHMS)}; '^' excludes; {_SEL_VALID}",
              describer=lambda v: f"NCCL algorithms {v}"),
        _nccl("NCCL_PROTO", "protocols NCCL may use", values.selection(PROTOCOLS, "NCCL_PROTO"),
              f"{', '.join(PROTOCOLS)}; '^' excludes; {_SEL_VALID}", describer=lambda v: f"NCCL protocols {v}"),
        _nccl("NCCL_PXN_DISABLE", "1 disables PXN (inter-node traffic through an NVLink peer's NIC)",
              values.choice("0", "1"), "0, 1", inter_node=True,
              describer=lambda v: "PXN disabled" if v == "1" else "PXN enabled"),
        _nccl("NCCL_P2P_PXN_LEVEL", "when send/recv uses PXN: 0 never, 1 if no PCI path, 2 always",
              values.choice("0", "1", "2"), "0, 1, 2", inter_node=True),
        _nccl("NCCL_CROSS_NIC", "0 same NIC per ring/tree (rail-optimised), 1 allow different NICs, 2 prefer same",
              values.choice("0", "1", "2"), "0, 1, 2", inter_node=True, describer=lambda v: f"cross-NIC mode {v}"),
        _nccl("NCCL_IB_HCA", "which InfiniBand HCAs NCCL uses", values.ib_hca,
              "'[^][=]name[:port[:rail[:plane]]],...' with at most 32 HCAs, names of letters, digits, _ . -",
              inter_node=True, describer=lambda v: f"HCAs {v}"),
        _nccl("NCCL_MIN_NCHANNELS", "lower bound on channels (deprecated in favour of NCCL_MIN_CTAS)",
              values.int_range(1, 64), "integer 1..64"),
        _nccl("NCCL_MAX_NCHANNELS", "upper bound on channels (deprecated in favour of NCCL_MAX_CTAS)",
              values.int_range(1, 64), "integer 1..64"),
        _nccl("NCCL_MIN_CTAS", "lower bound on CTAs (channels), NCCL 2.17+", values.int_range(1, 64),
              "integer 1..64 (1..32 before NCCL 2.25)"),
        _nccl("NCCL_MAX_CTAS", "upper bound on CTAs (channels), NCCL 2.17+", values.int_range(1, 64),
              "integer 1..64 (1..32 before NCCL 2.25)"),
        _nccl("NCCL_NVLS_ENABLE", "NVLink SHARP: 0 off, 1 on (fail without resources), 2 auto",
              values.choice("0", "1", "2"), "0, 1, 2"),
        _nccl("NCCL_NVLS_CHUNKSIZE", "largest NVLS chunk inside one NVLink domain, bytes (NCCL shrinks it for smaller "
              "messages)", values.positive_bytes, "a positive size in bytes ('131072' or '128K'; default 131072)"),
        _nccl("NCCL_COLLNET_ENABLE", "1 enables CollNet (SHARP) through a plugin", values.choice("0", "1"), "0, 1"),
        _nccl("NCCL_BUFFSIZE", "Simple protocol buffer in bytes", values.positive_bytes,
              "a positive size in bytes ('4194304' or '4M'; a power of 2 is recommended)"),
        _nccl("NCCL_NTHREADS", "CUDA threads per CTA", values.int_range(64, 512, 32), "a multiple of 32 in 64..512"),
        _nccl("NCCL_P2P_LL_THRESHOLD", "largest bytes per channel a point-to-point transfer sends with LL (0: never)",
              values.nonnegative_bytes, "a size in bytes, 0 or more ('16384' or '16K'; default 16384)"),
        _nccl("NCCL_P2P_NVL_CHUNKSIZE", "point-to-point chunk on one node of all-NVLink GPUs, bytes",
              values.positive_bytes, "a positive size in bytes ('524288' or '512K'; default 524288)"),
        _nccl("NCCL_P2P_PCI_CHUNKSIZE", "point-to-point chunk on one node of GPUs not all NVLink, bytes",
              values.positive_bytes, "a positive size in bytes ('131072' or '128K'; default 131072)"),
        _nccl("NCCL_P2P_NET_CHUNKSIZE", "point-to-point chunk across nodes (NVLink domains), bytes",
              values.positive_bytes, "a positive size in bytes ('131072' or '128K'; default 131072)",
              inter_node=True),
        _nccl("NCCL_P2P_PER_CHANNEL_NET_BW", "GB/s of a rank's NICs per point-to-point channel to a peer across "
              "nodes (NVLink domains)", values.int_range(1, 1000), "integer GB/s 1..1000 (default 14)",
              inter_node=True),
        _nccl("NCCL_IB_QPS_PER_CONNECTION", "queue pairs per IB connection", values.int_range(1, 128), "integer 1..128",
              inter_node=True),
        _nccl("NCCL_NET_GDR_LEVEL", "max GPU-NIC path class for GPUDirect RDMA", values.path_level, _LEVELS),
        _nccl("NCCL_P2P_LEVEL", "max GPU-GPU path class for P2P", values.path_level, _LEVELS),
        _nccl("NCCL_SHM_DISABLE", "1 disables the shared-memory transport", values.choice("0", "1"), "0, 1"),
        _nccl("NCCL_P2P_DISABLE", "1 disables the P2P transport", values.choice("0", "1"), "0, 1"),
        _nccl("NCCL_NO_CACHE", "variables NCCL reads again at every use instead of once per process (NCCL 2.30.3+)",
              values.no_cache, "ALL, or a comma list of NCCL variable names (NCCL_MIN_CTAS,NCCL_BUFFSIZE)"),
        _nccl("NCCL_DEBUG", "log level", values.choice("VERSION", "WARN", "INFO", "TRACE"),
              "VERSION, WARN, INFO, TRACE"),
        _nccl("NCCL_DEBUG_SUBSYS", "log subsystems", values.subsys,
              "comma list of INIT, COLL, P2P, SHM, NET, GRAPH, TUNING, ENV, ALLOC, ALLOC_HOST, CALL, PROXY, NVLS, "
              "BOOTSTRAP, REG, PROFILE, RAS, DESTROY, ALL; leading '^' excludes"),
        Knob(name="NCCL_TESTS_SPLIT_MASK", family="nccl-tests", validator=values.split_mask, inter_node=True,
             doc="nccl-tests splits ranks into communicators by rank & mask (rail-isolated runs)",
             valid="a mask '0x..' (hex, as nccl-tests reads it) or a single decimal digit",
             describer=lambda v: f"communicators split by rank & {v}"),
        Knob(name="OMPI_MCA_btl_tcp_if_include", family="ompi", validator=values.interfaces(subnets=True),
             inter_node=True, doc="Open MPI: the interfaces (or subnets) its TCP transport sends over: the rail",
             valid=values.IF_VALID + " or subnets a.b.c.d/n", describer=lambda v: f"Open MPI TCP over {v}"),
        Knob(name="OMPI_MCA_oob_tcp_if_include", family="ompi", validator=values.interfaces(subnets=True),
             inter_node=True, doc="Open MPI: the interfaces (or subnets) of its runtime's control traffic",
             valid=values.IF_VALID + " or subnets a.b.c.d/n", describer=lambda v: f"Open MPI runtime over {v}"),
        Knob(name="GLOO_SOCKET_IFNAME", family="gloo", validator=values.interfaces(subnets=False), inter_node=True,
             doc="torch gloo: the interfaces its sockets use (several: one device each): the rail",
             valid=values.IF_VALID, describer=lambda v: f"gloo over {v}"),
        Knob(name=DYNAMIC_RULES, family="ompi", validator=values.ompi_bool,
             doc="Open MPI: allow forcing coll tuned algorithms",
             valid=f"{', '.join(values.TRUE)} / {', '.join(values.FALSE)}",
             describer=lambda v: "Open MPI dynamic rules " + ("on" if v == "1" else "off")),
    ]
    for coll, names in OMPI_ALGORITHMS.items():
        knobs.append(Knob(
            name=ompi_algorithm_knob(coll), family="ompi", validator=values.ompi_algo(coll),
            collective=OMPI_COLL_OP[coll],
            doc=f"Open MPI {coll} algorithm (needs {DYNAMIC_RULES}=1)", describer=values.describe_ompi(coll),
            valid=f"an id or a name of Open MPI {OMPI_VERSION}: " + ", ".join(f"{i} {n}" for i, n in enumerate(names))))
    return {k.name: k for k in knobs}


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
