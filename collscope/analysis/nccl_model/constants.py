"""The constant tables of NCCL's tuning model, per NCCL version.

Values are NCCL's ``ncclTunerConstantsDefaults`` and friends (``src/graph/tuning.cc``), the search speed lists
(``src/graph/search.cc``) and the link constants (``src/graph/topo.h``) as recorded, with their sources, in
``../shared/reference/nccl-facts.md``: section 1.2 (tables, NCCL 2.30.7), 1.3 (speeds, link bandwidths),
1.6 (tree correction) and 1.7 (what NCCL 2.19.4 had instead). Units: microseconds and decimal GB/s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from collscope.vocab.nccl import ALGORITHMS as ALGOS
from collscope.vocab.nccl import PATH_TYPES, release_major_minor
from collscope.vocab.nccl import PROTOCOLS as PROTOS

__all__ = [
    "ALGOS",
    "PROTOS",
    "HW",
    "PATH_TYPES",
    "NcclVersion",
    "VERSIONS",
    "NcclConstants",
    "nccl_constants",
    "compcap_index",
    "speed_list",
    "TREE_CORRECTION",
    "NCCL_PCI_X16_GBPS",
    "NCCL_STEPS",
    "DEFAULT_BUFFSIZE_BYTES",
    "model_version_for",
    "release_tables",
    "pipeline_model_note",
    "judged_release_notes",
    "JUDGING_TABLES",
    "ll128_default_sms",
    "ll128_off_note",
    "PROTOS_WITHOUT_LL128",
]

NcclVersion = Literal["2.30", "2.19"]
VERSIONS: tuple[str, ...] = ("2.30", "2.19")

# ALGOS and PROTOS (nccl-facts 1.1, index order) are the vocabulary's ALGORITHMS and PROTOCOLS.
HW: tuple[str, ...] = ("NVLINK", "PCI", "NET")

# PATH_TYPES: NCCL's path types in order (the vocabulary's); the protocol enable rules compare them with <=.

Row = tuple[float, float, float]
"""LL / LL128 / Simple."""
ScaleRow = tuple[float, float, float]
"""N1 / N2 / N4+ (nNodes 1, 2, more: ``index2 = nNodes <= 2 ? nNodes - 1 : 2``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclConstants:
    """One version's tables (nccl-facts 1.2); rows are indexed like :data:`ALGOS`, :data:`HW`, compCap index."""

    version: str
    algos: tuple[str, ...]
    """Algorithms this version has (2.19 has no PAT)."""
    base_latency_us: dict[str, Row]
    """``baseLatencies[algo]``."""
    hw_latency_us: dict[str, dict[str, Row]]
    """``hwLatencies[hw][algo]``."""
    ll_max_bw: tuple[ScaleRow, ...]
    """``llMaxBws[index1]``: single node index1 = compCap index; multi-node 0 (Intel) or 1 (AMD)."""
    per_ch_max_ring_ll128_bw: tuple[ScaleRow, ...]
    per_ch_max_tree_ll128_bw: tuple[ScaleRow, ...]
    per_ch_max_tree_bw: tuple[ScaleRow, ...]
    per_ch_max_nvls_tree_bw: tuple[ScaleRow, ...]
    nvls_efficiency: tuple[float, ...]
    """Per compCap index: Volta, Ampere, Hopper, Blackwell."""


# nccl-facts 1.2, baseLatencies (us), LL / LL128 / Simple.
_BASE_230: dict[str, Row] = {
    "Tree": (6.8, 14.0, 8.4), "Ring": (6.6, 14.0, 8.4), "CollNetDirect": (0.0, 0.0, 0.0),
    "CollNetChain": (0.0, 0.0, 0.0), "NVLS": (0.0, 0.0, 0.0), "NVLSTree": (0.0, 0.0, 0.0), "PAT": (8.0, 8.0, 8.0),
}
# nccl-facts 1.2, hwLatencies[hw][algo] (us per step/hop).
_HW_230: dict[str, dict[str, Row]] = {
    "NVLINK": {"Tree": (0.6, 1.25, 4.0), "Ring": (0.6, 1.9, 3.4), "CollNetDirect": (0.0, 0.0, 3.7),
               "CollNetChain": (0.0, 0.0, 2.8), "NVLS": (0.0, 0.0, 25.0), "NVLSTree": (0.0, 0.0, 25.0),
               "PAT": (0.0, 0.0, 4.0)},
    "PCI": {"Tree": (1.0, 1.9, 4.0), "Ring": (1.0, 2.5, 5.7), "CollNetDirect": (0.0, 0.0, 3.7),
            "CollNetChain": (0.0, 0.0, 2.8), "NVLS": (0.0, 0.0, 0.0), "NVLSTree": (0.0, 0.0, 0.0),
            "PAT": (0.0, 0.0, 4.0)},
    "NET": {"Tree": (5.0, 8.5, 14.0), "Ring": (2.7, 4.0, 14.0), "CollNetDirect": (0.0, 0.0, 31.0),
            "CollNetChain": (0.0, 0.0, 30.0), "NVLS": (0.0, 0.0, 18.0), "NVLSTree": (0.0, 0.0, 20.9),
            "PAT": (0.0, 0.0, 14.0)},
}
# nccl-facts 1.2, llMaxBws rows 0 Volta/Intel, 1 Ampere/AMD, 2 Hopper, 3 Blackwell (2 x Hopper).
_LL_MAX_230: tuple[ScaleRow, ...] = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0),
                                     (282.0, 90.0, 70.0))
_RING_LL128_230: tuple[ScaleRow, ...] = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7),
                                         (40.0, 40.0, 40.0))
_TREE_LL128_230: tuple[ScaleRow, ...] = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0),
                                         (55.6, 31.67, 20.0))
_TREE_230: tuple[ScaleRow, ...] = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (70.0, 42.8, 24.0))
_NVLS_TREE_230: tuple[ScaleRow, ...] = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (0.0, 57.7, 45.5),
                                        (0.0, 96.0, 80.0))
_NVLS_EFF_230 = (0.0, 0.0, 0.85, 0.74)

_V230 = NcclConstants(
    version="2.30", algos=ALGOS, base_latency_us=_BASE_230, hw_latency_us=_HW_230, ll_max_bw=_LL_MAX_230,
    per_ch_max_ring_ll128_bw=_RING_LL128_230, per_ch_max_tree_ll128_bw=_TREE_LL128_230,
    per_ch_max_tree_bw=_TREE_230, per_ch_max_nvls_tree_bw=_NVLS_TREE_230, nvls_efficiency=_NVLS_EFF_230,
)


def _v219() -> NcclConstants:
    """nccl-facts 1.7: Tree Simple base latency 0 (now 8.4); Tree Simple hw latency 28 on NVLINK, PCI and NET;
    NVLS and NVLSTree NVLINK 23 (now 25); NVLSTree NET 14 (now 20.9); Hopper llMaxBws 87.7/22.5/19.0; no PAT, no
    Blackwell rows (Blackwell GPUs fall back to the Hopper row here). Every table was read again in
    src/graph/tuning.cc at v2.19.4-1 and v2.20.5-1 (the same constants): the rest equal 2.30's Volta, Ampere and
    Hopper rows; 2.19 has no perChMaxNVLSTreeBws and no nvlsEfficiency (its NVLS bandwidth rule is in
    :func:`~.model.nccl_bandwidth`)."""
    base = dict(_BASE_230)
    base["Tree"] = (6.8, 14.0, 0.0)
    hw = {k: dict(v) for k, v in _HW_230.items()}
    for name in HW:
        tree_ll, tree_ll128, _ = hw[name]["Tree"]
        hw[name]["Tree"] = (tree_ll, tree_ll128, 28.0)
    hw["NVLINK"]["NVLS"] = (0.0, 0.0, 23.0)
    hw["NVLINK"]["NVLSTree"] = (0.0, 0.0, 23.0)
    hw["NET"]["NVLSTree"] = (0.0, 0.0, 14.0)
    hopper_ll = (87.7, 22.5, 19.0)
    ll = (_LL_MAX_230[0], _LL_MAX_230[1], hopper_ll, hopper_ll)
    return NcclConstants(
        version="2.19", algos=ALGOS[:-1], base_latency_us=base, hw_latency_us=hw, ll_max_bw=ll,
        per_ch_max_ring_ll128_bw=_RING_LL128_230[:3] + _RING_LL128_230[2:3],
        per_ch_max_tree_ll128_bw=_TREE_LL128_230[:3] + _TREE_LL128_230[2:3],
        per_ch_max_tree_bw=_TREE_230[:3] + _TREE_230[2:3],
        per_ch_max_nvls_tree_bw=_NVLS_TREE_230[:3] + _NVLS_TREE_230[2:3],
        nvls_efficiency=_NVLS_EFF_230[:3] + _NVLS_EFF_230[2:3],
    )


_BY_VERSION = {"2.30": _V230, "2.19": _v219()}


def nccl_constants(version: str = "2.30") -> NcclConstants:
    """The tables of one NCCL version (``"2.30"``: 2.30.7, ``"2.19"``: 2.19.4); ValueError for others."""
    if version not in _BY_VERSION:
        raise ValueError(f"unknown NCCL model version {version!r}; valid: {', '.join(VERSIONS)}")
    return _BY_VERSION[version]


def compcap_index(sm: int) -> int:
    """nccl-facts 1.1: 0 Volta (< sm80), 1 Ampere (sm80-89), 2 Hopper (sm90-99), 3 Blackwell (>= sm100)."""
    return 3 if sm >= 100 else 2 if sm >= 90 else 1 if sm >= 80 else 0


# nccl-facts 1.6: treeCorrectionFactor[proto][logSize], logSize = floor(log2(nBytes / 64)), 0..23.
TREE_CORRECTION: dict[str, tuple[float, ...]] = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0,
              1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9),
}

# nccl-facts 1.3: per-channel speeds the topology search tries, first that fits wins.
_SPEEDS = {
    ("intra", 0): (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0),
    ("inter", 0): (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2,
                   0.24, 0.12),
    ("intra", 90): (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
    ("inter", 90): (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24,
                    0.12),
    ("intra", 100): (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0),
    ("inter", 100): (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0,
                     2.4, 1.2, 0.24, 0.12),
}


def speed_list(sm: int, *, multi_node: bool) -> tuple[float, ...]:
    """The search's speed array: intra-node lists on one node, inter-node lists otherwise (nccl-facts 1.3)."""
    family = 100 if sm >= 100 else 90 if sm >= 90 else 0
    return _SPEEDS[("inter" if multi_node else "intra", family)]


# nccl-facts 1.3: NCCL's PCIe link model, width * speed / 80: Gen3 x16 12, Gen4 24, Gen5 48, Gen6 96 GB/s.
NCCL_PCI_X16_GBPS: dict[int, float] = {3: 12.0, 4: 24.0, 5: 48.0, 6: 96.0}
NCCL_STEPS = 8
"""src/include/device.h NCCL_STEPS: the slots of a connection's buffer; a Simple step is the buffer / it."""
DEFAULT_BUFFSIZE_BYTES = 4 * 1024 * 1024
"""NCCL_BUFFSIZE's default (src/init.cc DEFAULT_BUFFSIZE, 4 MiB): the Simple protocol's buffer."""


def model_version_for(nccl_version: str | None) -> str:
    """The tables closest to an NCCL release (``"2.20.5"``, ``"2.27.3+cuda12.9"``): ``"2.19"`` up to 2.20.x, else
    ``"2.30"``; unknown or unreadable versions get the newest tables.

    NCCL 2.19.4 and 2.20.5 have the same constants (Hopper ``llMaxBws`` 87.7 / 22.5 / 19.0, Ring LL x 1/4 or 1/3,
    Tree Simple hwLat 28); 2.21.5 has Hopper ``llMaxBws`` 141 / 45 / 35 and Ring LL x .5 (src/graph/tuning.cc at
    v2.20.5-1 and v2.21.5-1), and Tree Simple 4.0 / base 8.4 and PAT arrive in 2.23.4: 2.21-2.22 are nearer the 2.30
    tables.
    """
    release = release_major_minor(nccl_version) if nccl_version else None
    if release is None:
        return VERSIONS[0]
    return "2.19" if release < (2, 21) else "2.30"


_TABLE_RELEASE = {"2.30": "2.30.7", "2.19": "2.19.4"}

# NCCL 2.32.6 release notes (shared/reference/nccl-2025-2026.md): "pipeline-based cost model" for Ring, Tree,
# NVLS and NVLSTree, with Vera Rubin tuning data; NCCL's source at that release was not available to collscope.
PIPELINE_MODEL_FROM = (2, 32)


def release_tables(release: str) -> tuple[str, tuple[str, ...]]:
    """The tables for an NCCL release as a user names it (``"2.27.3"``, ``"2.32.6-1+cuda13.0"``) or a table
    name (``"2.30"``, ``"2.19"``), with notes saying what the tables are when they are not that release's own.

    ValueError when ``release`` is neither. Releases up to 2.20 take the 2.19.4 tables, later ones the 2.30.7
    tables (:func:`model_version_for`); from 2.32 NCCL chooses with a pipeline-based cost model that these
    tables do not reproduce, and the note says so.
    """
    if release in _BY_VERSION:
        return release, ()
    parsed = release_major_minor(release)
    if parsed is None:
        raise ValueError(f"NCCL version {release!r} is neither a release (2.27.3) nor one of collscope's tables "
                         f"({', '.join(VERSIONS)})")
    major, minor = parsed
    tables = model_version_for(f"{major}.{minor}")
    notes = [] if f"{major}.{minor}" == tables else [
        f"NCCL {release}: collscope's model uses the tables of NCCL {_TABLE_RELEASE[tables]} (src/graph/tuning.cc), "
        "the nearest it has"]
    pipeline = pipeline_model_note(release)
    return tables, (*notes, pipeline) if pipeline else tuple(notes)


def pipeline_model_note(release: str) -> str | None:
    """What to say of a model of NCCL's choice for ``release`` (``"2.32.6"``) when that release chooses with its
    pipeline-based cost model; ``None`` for earlier or unreadable releases."""
    parsed = release_major_minor(release)
    if parsed is None or parsed < PIPELINE_MODEL_FROM:
        return None
    return (f"NCCL {parsed[0]}.{parsed[1]} chooses algorithms and protocols with a pipeline-based cost model (NCCL "
            "2.32.6 release notes) that collscope does not reproduce: its choice at a size may differ from "
            "collscope's model of NCCL 2.30.7's; a run's own choices are in its NCCL_DEBUG_SUBSYS=TUNING log "
            "(collscope nccl-log)")


JUDGING_TABLES = "2.30"
"""The tables ``analyze`` and ``trace`` judge every run against, whatever its release: the terms collscope adds to
NCCL's model (:mod:`.measured`) and the published margins (:mod:`collscope.analysis.model_accuracy`) were fitted
and measured with them, and the scorecard scores them."""


def judged_release_notes(release: str | None) -> tuple[str, ...]:
    """What ``analyze`` and ``trace`` say of a run of NCCL ``release`` judged against :data:`JUDGING_TABLES`: that
    an older release's own tables differ (and how to see them), and 2.32's :func:`pipeline_model_note`."""
    parsed = release_major_minor(release) if release else None
    if release is None or parsed is None:
        return ()
    notes = []
    own = model_version_for(f"{parsed[0]}.{parsed[1]}")
    if own != JUDGING_TABLES:
        notes.append(f"NCCL {release}: judged against collscope's model with NCCL {_TABLE_RELEASE[JUDGING_TABLES]}'s "
                     f"tables, as every run is (the terms and margins were fitted with them); `collscope predict "
                     f"--nccl-version {release}` shows the model with NCCL {_TABLE_RELEASE[own]}'s")
    pipeline = pipeline_model_note(release)
    return (*notes, pipeline) if pipeline else tuple(notes)


# LL128's default enable by compute capability (src/graph/tuning.cc ncclTopoTuneModel, "Enable LL128 by default
# only on Volta/Ampere/Hopper+NVLink. Other cases are not tested and may cause silent data corruption"): from
# 2.19.4 to 2.24.3 a switch on minCompCap with the cases 70, 80 and 90; 2.25.1-2.26.6 add 100 and 120; from 2.27.3
# every sm >= 70. None: every sm >= 70. The 2.19 tables stand for releases up to 2.20, the 2.30 tables for 2.27 on.
_LL128_DEFAULT_SMS: tuple[tuple[tuple[int, int], frozenset[int] | None], ...] = (
    ((2, 27), None),
    ((2, 25), frozenset({70, 80, 90, 100, 120})),
    ((0, 0), frozenset({70, 80, 90})),
)


def ll128_default_sms(release: str) -> frozenset[int] | None:
    """The compute capabilities (x 10) on which NCCL ``release`` (``"2.23.4"``, or a table name ``"2.19"``) enables
    LL128 by default; ``None`` when it enables it on every sm >= 70 (and for a text that is no release)."""
    parsed = release_major_minor(release)
    if parsed is None:
        return None
    return next(sms for first, sms in _LL128_DEFAULT_SMS if parsed >= first)


PROTOS_WITHOUT_LL128: tuple[str, ...] = tuple(p for p in PROTOS if p != "LL128")
"""The protocols NCCL's choice may take where :func:`ll128_off_note` says LL128 is off."""


def ll128_off_note(release: str, sm: int) -> str | None:
    """What to say when NCCL ``release`` leaves LL128 off by default on ``sm`` although the tables collscope
    models it with (:func:`release_tables`) enable it; ``None`` when the release enables it there."""
    sms = ll128_default_sms(release)
    if sms is None or sm < 70 or sm in sms:
        return None
    tables = ll128_default_sms(release_tables(release)[0])
    if tables is not None and sm not in tables:  # the tables the release maps to leave it off already
        return None
    return (f"NCCL {release} enables LL128 by default only on sm {', '.join(str(s) for s in sorted(sms))} "
            f"(src/graph/tuning.cc of that release), not on this GPU's sm {sm}: its choice is modelled without "
            "LL128, as NCCL makes it unless NCCL_PROTO names LL128")

