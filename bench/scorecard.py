"""The published scorecard: collscope's prediction for each published collective measurement, side by side with it.

Each row of ``bench/scorecard/published.csv`` is one busbw that a public source shows (nccl-tests or rccl-tests
output in an issue, a cloud provider's or a vendor's benchmark page), with its geometry and its URL. For every row
the library's ``predict(op, gpu=, nranks=, nnodes=, nvl_domain=, sizes=)`` gives the prediction: the busbw of
NCCL's model's choice at that size when the model runs, else the best alpha-beta algorithm's. A row the library
refuses (unknown GPU, an op without a model, nodes without NIC rates) is shown as refused with the library's reason.
The yardstick is the published figure: a prediction counts when it is within 15% of it. The script prints the
rows, the share within 15% per system and overall; ``--markdown`` prints the table that docs/reading-results.md
carries, ``--csv`` one CSV row per published row, ``--accuracy`` the published accuracy per size band and scope
that ``predict`` states and ``analyze``'s verdicts allow for, ``--write-accuracy`` the same into
collscope/data/model_accuracy.csv after a change of the models or the rows (a shell redirect into that file would
empty it before the predictions, which read it, run).

    .venv/bin/python bench/scorecard.py [--markdown | --csv | --accuracy | --accuracy-markdown | --write-accuracy]
                                        [--data CSV]
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import statistics
import sys
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from collscope.analysis.model_accuracy import (  # noqa: E402
    TOLERANCE,
    AccuracySample,
    BandAccuracy,
    accuracy_table,
    model_family,
    render_accuracy_csv,
)
from collscope.analysis.nccl_model.channel_limits import bound_channels, channel_bound_note  # noqa: E402
from collscope.analysis.nccl_model.constants import JUDGING_TABLES, VERSIONS  # noqa: E402
from collscope.analysis.nccl_model.p2p import P2P_FITTED_OPS  # noqa: E402
from collscope.analysis.nccl_model.search import graph_inputs_from_topology  # noqa: E402
from collscope.analysis.predict import predict  # noqa: E402
from collscope.analysis.run_cost import RUN_FLOOR_MAX_BYTES, model_time_us, time_busbw_gbps  # noqa: E402
from collscope.errors import CollscopeError  # noqa: E402
from collscope.units import format_size, parse_size  # noqa: E402
from collscope.vocab.channel_limits import CHANNEL_LIMIT_NAMES  # noqa: E402
from collscope.vocab.nccl import PROTOCOLS  # noqa: E402
from collscope.vocab.ops import OPS, op_facts  # noqa: E402

DATA = ROOT / "bench" / "scorecard" / "published.csv"
SMALL = ROOT / "bench" / "scorecard" / "small_sizes.csv"
"""The sources' own times (or busbw where a page prints no time) at 64 B-64 KiB of the scorecard's curves that
show those sizes: the small-size bands of the accuracy table, and bench/run_cost_check.py's per-call cost."""
SMALL_COLUMNS = ("system", "op", "size_bytes", "time_us", "busbw_gbps", "source_url", "note")
SHIPPED_ACCURACY = ROOT / "collscope" / "data" / "model_accuracy.csv"
"""The accuracy table the package ships (collscope.analysis.model_accuracy reads it)."""
COLUMNS = ("system", "gpu", "nranks", "nnodes", "nvl_domain", "op", "size_bytes", "busbw_gbps", "nccl_version",
           "source_url", "note", "nic_gbit", "nics_per_node", "nccl_algo", "nccl_proto", "channel_bounds", "off_reason")
FIT_SOURCES = ("github.com/Azure/AI-benchmarking-guide",)
"""Rows whose figures fitted the Ring/LL step latency (collscope.analysis.nccl_model.measured.hop_us) and first
fitted the size ramp; the ramp's form and fill are now chosen on every row of :data:`FIT_TIME_SOURCES`
(bench/ramp_form_fit.py), so the last two share lines, not the held-out one, are the ramp's out-of-sample check."""
NVLS_RANK_FIT_SYSTEMS = ("OCI GB300 NVL72, 16 trays (64 GPUs)",)
"""Systems whose rows fitted NVLS's cost per rank of a large domain
(collscope.analysis.nccl_model.measured.NVLS_RANK_US)."""
NVLS_STEP_FIT_SYSTEMS = ("GCP A4 (8x B200, GKE, gIB), 1 node", "OCI GB300 NVL72, 2 trays (8 GPUs)")
"""Systems whose rows fitted NVLS's shortest step on sm100 (measured.NVLS_STEP_MIN_US; bench/nvls_step_fit.py
chooses it on every row and shows that only these systems' rows move)."""
LL128_RATE_FIT_SYSTEMS = ("Azure ND A100 v4 (VM, 8x A100 SXM)",)
"""Systems whose rows fitted LL128's rate on sm80 (measured.LL128_SM80_RATE, bench/ll128_rate_fit.py); their source
fitted the LL step too (:data:`FIT_SOURCES`)."""
FIT_SYSTEMS = NVLS_RANK_FIT_SYSTEMS + NVLS_STEP_FIT_SYSTEMS + LL128_RATE_FIT_SYSTEMS
"""Systems whose rows fitted a term of one system's making: held out of the held-out line."""
FIT_OPS = P2P_FITTED_OPS
"""Ops whose every published row fitted a model's terms (alltoall: collscope.analysis.nccl_model.p2p, checked by
bench/p2p_fit.py leaving one system out). The share of the rows of neither kind is the held-out check."""
FIT_TIME_SOURCES = (
    "https://github.com/Azure/AI-benchmarking-guide/blob/main/Azure%20Results/ND_H100_v5_results.md",
    "https://github.com/Azure/AI-benchmarking-guide/blob/main/Azure_Results/ND_A100_v4_results.md",
    "https://github.com/Azure/AI-benchmarking-guide/blob/main/Azure_Results/ND_GB200_v6_results.md",
    "https://github.com/Azure/AI-benchmarking-guide/blob/main/Azure_Results/ND_H200_v5_results.md",
    "https://github.com/NVIDIA/nccl-tests/issues/119",
    "https://github.com/NVIDIA/nccl-tests/issues/232",
    "https://github.com/NVIDIA/nccl-tests/issues/256",
    "https://github.com/NVIDIA/nccl/issues/1161",
    "https://github.com/NVIDIA/nccl/issues/1368",
    "https://github.com/NVIDIA/nccl/issues/1801",
    "https://github.com/NVIDIA/nccl/issues/2409",
    "https://github.com/coreweave/nccl-tests/blob/HEAD/README.md",
    "https://github.com/dstackai/dstack/blob/master/examples/clusters/gcp/README.md",
    "https://github.com/dstackai/dstack/blob/master/examples/clusters/lambda/README.md",
    "https://github.com/dstackai/dstack/blob/master/examples/clusters/nebius/README.md",
    "https://github.com/google/dranet/blob/main/site/content/docs/user/gke-rdma.md",
    "https://github.com/hisohara/ai-scripts/blob/HEAD/training/01_rccl-smoketest/README.md",
    "https://github.com/lessizzmore/create-a3mega-ztan-fork/blob/HEAD/ztan-NCCL-test-result",
    "https://github.com/oracle-quickstart/oci-gpu-quickstarts/blob/HEAD/amd/MI355X/README-MI355X.md",
    "https://github.com/oracle-quickstart/oci-gpu-quickstarts/blob/HEAD/nvidia/B300/README-B300.md",
    "https://github.com/oracle-quickstart/oci-gpu-quickstarts/blob/HEAD/nvidia/GB200/README-GB200.md",
    "https://github.com/oracle-quickstart/oci-gpu-quickstarts/blob/HEAD/nvidia/GB300/README-GB300.md",
    "https://github.com/tinygrad/open-gpu-kernel-modules/issues/36",
    "https://github.com/yangwhale/gpu-tpu-pedia/blob/main/gpu/a4x/04-nccl-test/README.en.md",
    "https://github.com/yangwhale/gpu-tpu-pedia/blob/main/gpu/deepep/README.md",
)
"""The sources in bench/scorecard/published.csv when the measured terms (the size ramp, the LL step, the network
cost, the NVLS rank cost, the alltoall terms) were last chosen. Rows of any other source were added after and are
out of sample: the models never saw them. A refit that uses them must add them here."""
FAR = 0.30
"""Off by more than 30%: the row's note must say what the model does not cover."""


def on_nccl_model(row: PublishedRow) -> bool:
    """Whether NCCL's model (and the measured terms added to it) predicts the row: not a grouped point-to-point op
    (alltoall, gather, scatter, sendrecv), whose terms are collscope.analysis.nccl_model.p2p's."""
    return op_facts(row.op).nccl_func is not None


def fitted(row: PublishedRow) -> bool:
    """Whether a row's figure was used to fit one of the models' terms."""
    return (row.op in FIT_OPS or row.system in FIT_SYSTEMS
            or any(src in row.source_url for src in FIT_SOURCES))


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedRow:
    """One published busbw with the geometry it was measured on."""

    system: str
    gpu: str
    """The GPU as the source names it (the library maps it to a generation, or refuses it)."""
    nranks: int
    nnodes: int
    nvl_domain: int
    """GPUs one NVLink fabric joins (8 on an HGX node, 72 on an NVL72 rack, 1 on a PCIe box)."""
    op: str
    size_bytes: int
    busbw_gbps: float
    nccl_version: str
    source_url: str
    note: str
    """What the source says that the model does not cover (SHARP, a forced algorithm, in-place, ...)."""
    nic_gbit: float | None = None
    """Each compute NIC's line rate as the source (or the provider's page of that instance) states it; None on one
    node or when not stated (then a multi-node row is refused, as ``collscope predict`` refuses it)."""
    nics_per_node: int | None = None
    """Compute NICs per node when not one per GPU."""
    nccl_algo: str = ""
    """The NCCL_ALGO the source ran with (``Tree``, ``Ring``, ``NVLS``, ``CollNetChain``, or a comma list such as
    ``Ring,Tree`` for what a run left NCCL, e.g. NCCL_NVLS_ENABLE=0; empty: NCCL's own choice): the prediction is
    NCCL's model restricted to it, as the variable restricts NCCL (a CollNet algorithm with the CollNet plugin
    enabled, as the run had it)."""
    nccl_proto: str = ""
    """The NCCL_PROTO the run had (``Simple``, or a comma list), set by the source or by a net plugin the source
    loads (aws-ofi-nccl sets ``simple`` where EFA does not deliver 128-byte lines in order); empty: NCCL's own
    choice. The prediction is NCCL's model restricted to it."""
    channel_bounds: str = ""
    """The channel bounds the run set (``NCCL_MIN_CTAS=24``; ``;`` between several; names from
    collscope.vocab.channel_limits): where they leave the algorithm of the prediction on another channel count than
    the model assumes, the row is not claimed, as ``analyze`` does not judge such a run
    (collscope.analysis.nccl_model.channel_limits)."""
    off_reason: str = ""
    """A fact that explains why the model is far off (stated in the source or its thread), with its URL; empty if
    none is known."""
    line: int
    """The CSV line, for messages."""

    @property
    def algos(self) -> list[str] | None:
        """The algorithms NCCL could run (:attr:`nccl_algo` split), None for NCCL's own choice."""
        return self.nccl_algo.split(",") if self.nccl_algo else None

    @property
    def protos(self) -> list[str] | None:
        """The protocols NCCL could run (:attr:`nccl_proto` split), None for NCCL's own choice."""
        return self.nccl_proto.split(",") if self.nccl_proto else None

    @property
    def channel_settings(self) -> dict[str, str]:
        """:attr:`channel_bounds` as settings."""
        return dict(item.split("=", 1) for item in self.channel_bounds.split(";") if item)

    @property
    def collnet(self) -> bool:
        """Whether the run had the CollNet plugin enabled (a CollNet algorithm among :attr:`algos`)."""
        return "CollNet" in self.nccl_algo


@dataclass(frozen=True, slots=True, kw_only=True)
class ScoredRow:
    """A published row with the library's prediction, or its refusal."""

    row: PublishedRow
    predicted_gbps: float | None
    model: str
    """Which prediction: ``"NCCL ring/simple"`` (NCCL's model's choice) or ``"alpha-beta ring"``; empty if refused."""
    refused: str | None = None
    """The library's reason when it gives no prediction."""
    across_domains: bool = False
    """The geometry spans more than one NVLink domain (``LinkParams.ndomains`` > 1): the network carries part."""
    near_tie_gbps: tuple[float, ...] = ()
    """The expected measurements of NCCL's model's near ties (collscope.analysis.nccl_model.choice.NEAR_TIE)."""
    unjudged: str = ""
    """The library's reason not to judge the row against the prediction (the run's channel bounds), as analyze
    gives it; empty when it judges it."""

    @property
    def ratio(self) -> float | None:
        """Predicted / published."""
        if self.predicted_gbps is None or self.row.busbw_gbps <= 0:
            return None
        return self.predicted_gbps / self.row.busbw_gbps

    @property
    def within(self) -> bool:
        return self.ratio is not None and abs(self.ratio - 1.0) <= TOLERANCE

    @property
    def within_or_tie(self) -> bool:
        """Within 15% of the prediction or of a near tie's: what analyze's verdicts allow when no log names the
        pair that ran."""
        return self.within or any(abs(t / self.row.busbw_gbps - 1.0) <= TOLERANCE for t in self.near_tie_gbps)

    @property
    def verdict(self) -> str:
        if self.ratio is None:
            return "refused"
        if self.within:
            return "within 15%"
        far = abs(self.ratio - 1.0) > FAR
        if self.unjudged:
            return f"off {self.ratio - 1.0:+.1%}, not judged (bounded channels)" if not self.within else "within 15%"
        return f"off {self.ratio - 1.0:+.1%}" + (" (>30%, reason below)" if far and self.row.off_reason
                                                 else " (>30%, unexplained)" if far else "")

    @property
    def claimed(self) -> bool:
        """Predicted, and no fact in the table saying why the source's figure is off: a row the models answer for."""
        return self.predicted_gbps is not None and not self.row.off_reason and not self.unjudged

    @property
    def unexplained(self) -> bool:
        """Off by more than 30% with no fact in the table that explains it."""
        return self.ratio is not None and abs(self.ratio - 1.0) > FAR and not self.row.off_reason and not self.unjudged


def read_published(path: Path = DATA) -> list[PublishedRow]:
    """The rows of a scorecard CSV; ValueError naming ``path:line`` and the bad value for a malformed row."""
    text = path.read_text(encoding="utf-8")
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != COLUMNS:
        raise ValueError(f"{path}: columns {reader.fieldnames} differ from {list(COLUMNS)}")
    rows = []
    for record in reader:
        line = reader.line_num
        where = f"{path}:{line}"
        if None in record or any(record[c] is None for c in COLUMNS):
            raise ValueError(f"{where}: {len(COLUMNS)} fields expected")
        if record["op"] not in OPS:
            raise ValueError(f"{where}: unknown op {record['op']!r}; valid: {', '.join(OPS)}")
        if not record["source_url"].startswith("https://"):
            raise ValueError(f"{where}: source_url must be an https:// URL, got {record['source_url']!r}")
        if not record["system"].strip() or not record["gpu"].strip():
            raise ValueError(f"{where}: system and gpu must be named")
        bounds = record["channel_bounds"].strip()
        for item in (b for b in bounds.split(";") if b):
            name, _, value = item.partition("=")
            if name not in CHANNEL_LIMIT_NAMES or not value.isdigit() or int(value) < 1:
                raise ValueError(f"{where}: channel_bounds {bounds!r}: NAME=N;... expected, each NAME among "
                                 f"{', '.join(CHANNEL_LIMIT_NAMES)} and N a positive integer")
        protos = [p for p in record["nccl_proto"].strip().split(",") if p]
        if any(p not in PROTOCOLS for p in protos):
            raise ValueError(f"{where}: nccl_proto {record['nccl_proto']!r}: each protocol among "
                             f"{', '.join(PROTOCOLS)}")
        try:
            ints = {c: int(record[c]) for c in ("nranks", "nnodes", "nvl_domain")}
            size = parse_size(record["size_bytes"])
            busbw = float(record["busbw_gbps"])
            nic_gbit = float(record["nic_gbit"]) if record["nic_gbit"].strip() else None
            nics = int(record["nics_per_node"]) if record["nics_per_node"].strip() else None
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        if (nic_gbit is not None and not nic_gbit > 0) or (nics is not None and (nics < 1 or nic_gbit is None)):
            raise ValueError(f"{where}: nic_gbit must be > 0 and nics_per_node >= 1 with a nic_gbit (got "
                             f"{record['nic_gbit']!r}, {record['nics_per_node']!r})")
        if min(ints.values()) < 1 or ints["nranks"] % ints["nnodes"] or size < 1 or not busbw > 0:
            raise ValueError(f"{where}: nranks {ints['nranks']} must be a positive multiple of nnodes "
                             f"{ints['nnodes']}, nvl_domain >= 1, size and busbw > 0 (size {size}, busbw {busbw})")
        rows.append(PublishedRow(system=record["system"], gpu=record["gpu"], op=record["op"], size_bytes=size,
                                 busbw_gbps=busbw, nccl_version=record["nccl_version"],
                                 source_url=record["source_url"], note=record["note"], nic_gbit=nic_gbit,
                                 nics_per_node=nics, nccl_algo=record["nccl_algo"].strip(),
                                 nccl_proto=",".join(protos), channel_bounds=bounds,
                                 off_reason=record["off_reason"].strip(), line=line, **ints))
    return rows


ModelInputs = tuple[str, str, int, int, int, float | None, int | None, str, str]


def model_inputs(row: PublishedRow) -> ModelInputs:
    """What the prediction of a row depends on besides its size: op, GPU, ranks, nodes, NVLink domain, the NICs and
    the NCCL_ALGO and NCCL_PROTO the run had. Rows that share it (and a size) get the same prediction."""
    return (row.op, row.gpu, row.nranks, row.nnodes, row.nvl_domain, row.nic_gbit, row.nics_per_node, row.nccl_algo,
            row.nccl_proto)


def score(rows: Sequence[PublishedRow], *, version: str = JUDGING_TABLES) -> list[ScoredRow]:
    """Each row with the library's prediction; one ``predict`` call per geometry (all its sizes at once)."""
    groups: dict[ModelInputs, list[PublishedRow]] = {}
    for row in rows:
        groups.setdefault(model_inputs(row), []).append(row)
    scored: dict[int, ScoredRow] = {}
    for (op, gpu, nranks, nnodes, nvl_domain, nic_gbit, nics, _, _), members in groups.items():
        try:
            result = predict(op, gpu=gpu, nranks=nranks, nnodes=nnodes, nvl_domain=nvl_domain,
                             sizes=[r.size_bytes for r in members], version=version,
                             nic_gbit=nic_gbit if nnodes > 1 else None, nics_per_node=nics if nnodes > 1 else None,
                             algos=members[0].algos, protos=members[0].protos, collnet=members[0].collnet)
        except CollscopeError as exc:
            for r in members:
                scored[id(r)] = ScoredRow(row=r, predicted_gbps=None, model="", refused=str(exc))
            continue
        choice = {c.size_bytes: c for c in result.nccl_choice}
        across = result.params.ndomains > 1
        inputs = graph_inputs_from_topology(result.params, collnet=members[0].collnet, version=version) \
            if any(r.channel_bounds for r in members) and choice else None
        for r in members:
            if r.size_bytes in choice:
                c = choice[r.size_bytes]
                bound = bound_channels(inputs, c.algo, r.channel_settings) if inputs is not None else None
                scored[id(r)] = ScoredRow(row=r, predicted_gbps=c.expected_busbw_gbps, model=f"NCCL {c.algo}/{c.proto}",
                                          across_domains=across,
                                          near_tie_gbps=tuple(t.expected_busbw_gbps for t in c.near_ties),
                                          unjudged="" if bound is None else channel_bound_note(
                                              r.system, r.op, bound, [r.size_bytes]))
                continue
            best = max((p for p in result.predictions if p.model == "alpha-beta" and p.size_bytes == r.size_bytes),
                       key=lambda p: p.busbw_gbps, default=None)
            if best is None:
                scored[id(r)] = ScoredRow(row=r, predicted_gbps=None, model="", refused="no model predicts this size")
            else:
                scored[id(r)] = ScoredRow(row=r, predicted_gbps=best.busbw_gbps, model=f"alpha-beta {best.algo}",
                                          across_domains=across)
    return [scored[id(r)] for r in rows]


@dataclass(frozen=True, slots=True, kw_only=True)
class Share:
    """How many rows of a system (or of all) are within 15%."""

    name: str
    rows: int
    predicted: int
    within: int

    @property
    def text(self) -> str:
        """The count and the share, the share rounded down to 0.1% so that it never reads above a target it misses
        (703/784 is 89.6%, not 90%)."""
        share = (f"{self.within}/{self.rows} within 15% ({math.floor(1000 * self.within / self.rows) / 10:.1f}%)"
                 if self.rows else "no rows")
        return f"{share}; {self.rows - self.predicted} refused"


def shares(scored: Iterable[ScoredRow]) -> list[Share]:
    """Per system in first-seen order, then all rows, the held-out rows, the rows the models claim (predicted, with
    no fact in the row saying why the source's figure is off: a TCP transport, a bug report, a fixed cost the
    source's own table shows), and both again for the rows no term was fitted on (:data:`FIT_TIME_SOURCES`)."""
    by_system: dict[str, list[ScoredRow]] = {}
    everything = []
    for s in scored:
        by_system.setdefault(s.row.system, []).append(s)
        everything.append(s)
    out = [_share(name, members) for name, members in by_system.items()]
    held_out = [s for s in everything if not fitted(s.row)]
    claimed = [s for s in everything if s.claimed]
    unseen = [s for s in everything if s.row.source_url not in FIT_TIME_SOURCES]
    return out + [_share("all rows", everything),
                  _share("held-out rows (all but the rows the LL step, the NVLS rank cost, the NVLS step floor, the "
                         "sm80 LL128 rate and the alltoall terms were fitted on; the size ramp, chosen on every row of "
                         "FIT_TIME_SOURCES, is checked by the last two lines, the network term, fitted on every "
                         "multi-node row, source by source in bench/net_term_fit.py)", held_out),
                  _share("rows the models claim (predicted, and no stated reason to be off)", claimed),
                  replace(_share("rows the models claim, within 15% of NCCL's choice or of a near tie (a pair "
                                 "within 5% of it in NCCL's model, which analyze judges a measurement against when "
                                 "it matches; not the scorecard's count)", claimed),
                          within=sum(s.within_or_tie for s in claimed)),
                  _share("rows of sources added after the terms were fitted (out of sample: FIT_TIME_SOURCES)",
                         unseen),
                  _share("of those, the rows the models claim",
                         [s for s in unseen if s.claimed])]


def far_lines(scored: Sequence[ScoredRow]) -> list[str]:
    """The rows off by more than 30%: how many, and per system the stated reason, or "unexplained"."""
    far = [s for s in scored if s.ratio is not None and abs(s.ratio - 1.0) > FAR]
    unexplained = sum(s.unexplained for s in far)
    out = [f"rows off by more than {FAR:.0%}: {len(far)} ({len(far) - unexplained} with a stated reason, "
           f"{unexplained} unexplained)"]
    seen: dict[tuple[str, str], int] = {}
    for s in far:
        key = (s.row.system, s.row.off_reason or s.unjudged.split(": ", 1)[-1]
               or "unexplained: no fact found in the source or its thread")
        seen[key] = seen.get(key, 0) + 1
    out += [f"{system} ({n} row{'s' if n > 1 else ''}): {why}" for (system, why), n in seen.items()]
    return out


Computed = TypeVar("Computed")


def by_constant(module: object, name: str, values: Iterable[float],
                compute: Callable[[], Computed]) -> dict[float, Computed]:
    """value -> ``compute()`` with ``module.name`` set to it (a fitted term's constant, read by the library at each
    call); the shipped value is put back whatever happens."""
    out = {}
    shipped = getattr(module, name)
    try:
        for value in values:
            setattr(module, name, value)
            out[value] = compute()
    finally:
        setattr(module, name, shipped)
    return out


def scored_by_constant(rows: Sequence[PublishedRow], module: object, name: str,
                       values: Iterable[float]) -> dict[float, list[ScoredRow]]:
    """value -> every row scored with ``module.name`` set to it (:func:`by_constant`)."""
    return by_constant(module, name, values, lambda: score(rows))


def criteria(scored: Sequence[ScoredRow]) -> tuple[int, int, float]:
    """The scorecard's two criteria and its spread: claimed rows within 15%, rows more than 30% off with no stated
    reason, the rms of log(predicted / published) of the claimed rows."""
    claimed = [s for s in scored if s.claimed]
    return sum(s.within for s in claimed), sum(s.unexplained for s in scored), rms_log_ratio(claimed)


@dataclass(frozen=True, slots=True)
class HeldOutSource:
    """One source left out of a fit (:func:`leave_one_source_out`)."""

    source: str
    chosen: Hashable
    """The candidate chosen on the other sources' rows."""
    within: int
    """The left-out source's counted rows within 15% with that candidate."""
    within_baseline: int
    """The same with the baseline candidate (the models without the term)."""
    rows: int
    """The left-out source's counted rows."""


Candidate = TypeVar("Candidate", bound=Hashable)


def leave_one_source_out(by_candidate: Mapping[Candidate, Sequence[ScoredRow]],
                         key: Callable[[Candidate, list[ScoredRow]], Any], baseline: Candidate, *,
                         counted: Callable[[ScoredRow], bool] = lambda s: True) -> list[HeldOutSource]:
    """A fit's check leaving one source (URL) out at a time: ``by_candidate`` holds every row scored with each
    candidate term (the same rows in the same order); per source, the candidate with the highest ``key(candidate,
    the other sources' rows)`` is chosen and the source's ``counted`` rows are scored with it and with
    ``baseline``."""
    rows = next(iter(by_candidate.values()))
    out = []
    for source in sorted({s.row.source_url for s in rows}):
        chosen = max(by_candidate, key=lambda c: key(c, [s for s in by_candidate[c] if s.row.source_url != source]))

        def within(candidate: Candidate, left: str = source) -> int:
            return sum(s.within for s in by_candidate[candidate] if s.row.source_url == left and counted(s))
        out.append(HeldOutSource(source=source, chosen=chosen, within=within(chosen),
                                 within_baseline=within(baseline),
                                 rows=sum(s.row.source_url == source and counted(s) for s in rows)))
    return out


def rms_log_ratio(scored: Iterable[ScoredRow]) -> float:
    """The root mean square of log(predicted / published) over ``scored``'s predicted rows (nan without any): how
    far the predictions sit from the figures, whichever side of the 15% line."""
    logs = [math.log(s.ratio) for s in scored if s.ratio]
    return math.sqrt(sum(x * x for x in logs) / len(logs)) if logs else float("nan")


def spread_line(scored: Sequence[ScoredRow]) -> str:
    """How far the claimed rows' predictions sit from the published figures, whichever side of the 15% line: the
    rms of log(predicted / published), and the median and 90th percentile of |predicted / published - 1|. A count
    at the line moves with the rows at its edge; these move only when the predictions do."""
    claimed = [s for s in scored if s.claimed and s.ratio]
    if not claimed:
        return "rows the models claim: none"
    rms = rms_log_ratio(claimed)
    off = sorted(abs(s.ratio - 1.0) for s in claimed if s.ratio)
    p90 = off[min(len(off) - 1, math.ceil(0.9 * len(off)) - 1)]
    return (f"rows the models claim ({len(claimed)}), how far from the published figure: rms of log(predicted / "
            f"published) {rms:.3f}; |predicted / published - 1| median {statistics.median(off):.1%}, 90th "
            f"percentile {p90:.1%}")


def _share(name: str, members: Sequence[ScoredRow]) -> Share:
    return Share(name=name, rows=len(members), predicted=sum(s.ratio is not None for s in members),
                 within=sum(s.within for s in members))


def _cells(s: ScoredRow) -> list[str]:
    r = s.row
    return [r.system, r.op, format_size(r.size_bytes), f"{r.busbw_gbps:.2f}",
            "-" if s.predicted_gbps is None else f"{s.predicted_gbps:.2f}", s.model or "-",
            "-" if s.ratio is None else f"{s.ratio:.2f}", s.verdict]


HEADER = ["system", "op", "size", "published GB/s", "predicted GB/s", "model", "pred/pub", "verdict"]


def render_text(scored: Sequence[ScoredRow]) -> str:
    """Rows side by side with the published figure, the refusals' reasons, then the shares."""
    table = [HEADER] + [_cells(s) for s in scored]
    widths = [max(len(row[i]) for row in table) for i in range(len(HEADER))]
    left = (0, 1, 5, 7)  # text columns; numbers right-aligned
    lines = ["  ".join(c.ljust(w) if i in left else c.rjust(w)
                       for i, (c, w) in enumerate(zip(row, widths, strict=True))) for row in table]
    reasons = sorted({(s.row.system, s.refused) for s in scored if s.refused})
    if reasons:
        lines += ["", "refused (the library's reason):"] + [f"  {system}: {why}" for system, why in reasons]
    far = far_lines(scored)
    lines += ["", far[0] + ":"] + [f"  {line}" for line in far[1:]]
    lines += ["", f"share within {TOLERANCE:.0%} of the published busbw:"]
    lines += [f"  {sh.name}: {sh.text}" for sh in shares(scored)]
    lines += ["", spread_line(scored)]
    return "\n".join(lines)


def render_markdown(scored: Sequence[ScoredRow]) -> str:
    """The table of docs/reading-results.md (a source link per row), refusals, then the shares."""
    lines = ["| " + " | ".join(HEADER + ["source"]) + " |", "|" + "---|" * (len(HEADER) + 1)]
    for s in scored:
        cells = [c.replace("|", "\\|") for c in _cells(s)] + [f"[link]({s.row.source_url})"]
        lines.append("| " + " | ".join(cells) + " |")
    reasons = sorted({(s.row.system, s.refused) for s in scored if s.refused})
    if reasons:
        lines += ["", "Refused rows, with the library's reason:", ""]
        lines += [f"- {system}: {why}" for system, why in reasons]
    far = far_lines(scored)
    lines += ["", far[0].capitalize() + ":", ""] + [f"- {line}" for line in far[1:]]
    lines += ["", f"Share within {TOLERANCE:.0%} of the published busbw:", ""]
    lines += [f"- {sh.name}: {sh.text}" for sh in shares(scored)]
    lines += ["", spread_line(scored).capitalize() + "."]
    return "\n".join(lines)


def render_csv(scored: Sequence[ScoredRow]) -> str:
    """The published columns plus predicted_gbps, model, ratio, within_15pct, refused."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*COLUMNS, "predicted_gbps", "model", "ratio", "within_15pct", "refused"])
    for s in scored:
        r = s.row
        writer.writerow([r.system, r.gpu, r.nranks, r.nnodes, r.nvl_domain, r.op, r.size_bytes, r.busbw_gbps,
                         r.nccl_version, r.source_url, r.note, "" if r.nic_gbit is None else f"{r.nic_gbit:g}",
                         "" if r.nics_per_node is None else r.nics_per_node, r.nccl_algo, r.nccl_proto,
                         r.channel_bounds, r.off_reason,
                         "" if s.predicted_gbps is None else f"{s.predicted_gbps:.4g}", s.model,
                         "" if s.ratio is None else f"{s.ratio:.4f}", int(s.within), s.refused or ""])
    return out.getvalue()


@dataclass(frozen=True, slots=True)
class SmallPoint:
    """One size of 64 B-64 KiB of a published curve: the source's time, or its busbw where it prints no time."""

    system: str
    op: str
    size_bytes: int
    time_us: float | None
    busbw_gbps: float | None
    source_url: str

    def time(self, nranks: int) -> float:
        if self.time_us is not None:
            return self.time_us
        assert self.busbw_gbps is not None
        return model_time_us(self.op, nranks, self.size_bytes, self.busbw_gbps) if self.busbw_gbps > 0 else math.nan


def _number(text: str, what: str, where: str) -> float | None:
    if not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{where}: {what} {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{where}: {what} {text!r} is not a finite number >= 0")
    return value


def read_small(path: Path = SMALL) -> list[SmallPoint]:
    """The small-size points; ValueError naming the file and line for a row that does not read."""
    out = []
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != SMALL_COLUMNS:
            raise ValueError(f"{path}: header {reader.fieldnames} is not {list(SMALL_COLUMNS)}")
        for line, row in enumerate(reader, start=2):
            where = f"{path}:{line}"
            size = _number(row["size_bytes"], "size_bytes", where)
            time, busbw = _number(row["time_us"], "time_us", where), _number(row["busbw_gbps"], "busbw_gbps", where)
            if size is None or size != int(size) or not 0 < size <= RUN_FLOOR_MAX_BYTES:
                raise ValueError(f"{where}: size_bytes {row['size_bytes']!r} is not a size of 1 B-64 KiB")
            if (time is None) == (busbw is None):
                raise ValueError(f"{where}: give the source's time_us or, where it prints none, its busbw_gbps")
            out.append(SmallPoint(row["system"], row["op"], int(size), time, busbw, row["source_url"]))
    return out


def small_curves(published: Sequence[PublishedRow], small: Sequence[SmallPoint]
                 ) -> dict[tuple[str, str], tuple[list[SmallPoint], list[PublishedRow]]]:
    """(system, op) -> (its small-size points, its published rows); ValueError for points whose curve the
    published rows lack or that name another source."""
    curves: dict[tuple[str, str], list[SmallPoint]] = {}
    for p in small:
        curves.setdefault((p.system, p.op), []).append(p)
    out = {}
    for (system, op), points in curves.items():
        rows = [r for r in published if r.system == system and r.op == op]
        if not rows:
            raise ValueError(f"{SMALL}: no published row has system {system!r} and op {op!r}")
        if {p.source_url for p in points} != {rows[0].source_url}:
            raise ValueError(f"{SMALL}: the small sizes of {system!r} {op} name another source than its rows")
        out[(system, op)] = (points, rows)
    return out


def curve_small_rows(points: Sequence[SmallPoint], rows: Sequence[PublishedRow]) -> list[PublishedRow]:
    """A curve's small-size points as rows of that curve (no stated reason), each with the busbw its time gives (the
    printed busbw of 64 B-64 KiB has one or two digits)."""
    template = rows[0]
    return [replace(template, size_bytes=p.size_bytes, off_reason="",
                    busbw_gbps=time_busbw_gbps(p.op, template.nranks, p.size_bytes, p.time(template.nranks)))
            for p in points]


def small_size_rows(scored: Sequence[ScoredRow], small: Sequence[SmallPoint]) -> list[PublishedRow]:
    """:func:`curve_small_rows` of the curves the models claim (at least one of the curve's rows claimed)."""
    claimed = {(s.row.system, s.row.op) for s in scored if s.claimed}
    return [row for curve, (points, rows) in small_curves([s.row for s in scored], small).items()
            if curve in claimed for row in curve_small_rows(points, rows)]


def small_size_samples(scored: Sequence[ScoredRow], small: Sequence[SmallPoint],
                       *, version: str = JUDGING_TABLES) -> list[AccuracySample]:
    """:func:`small_size_rows` whose prediction is the models' expected measurement, as published / predicted."""
    return [AccuracySample(family=model_family(s.row.op), across_domains=s.across_domains,
                           size_bytes=s.row.size_bytes, measured_over_model=s.row.busbw_gbps / s.predicted_gbps)
            for s in score(small_size_rows(scored, small), version=version)
            if s.predicted_gbps and s.model.startswith("NCCL ")]


def accuracy_samples(scored: Sequence[ScoredRow], small: Sequence[SmallPoint] = (),
                     *, version: str = JUDGING_TABLES) -> list[AccuracySample]:
    """The rows the models claim whose prediction is the models' expected measurement (NCCL's model with the
    measured terms, or the grouped point-to-point model; not an alpha-beta fallback), as published / predicted;
    then the small-size points of ``small`` (:func:`small_size_samples`)."""
    rows = [AccuracySample(family=model_family(s.row.op), across_domains=s.across_domains, size_bytes=s.row.size_bytes,
                           measured_over_model=s.row.busbw_gbps / s.predicted_gbps)
            for s in scored if s.claimed and s.predicted_gbps and s.model.startswith("NCCL ")]
    return rows + small_size_samples(scored, small, version=version) if small else rows


ACCURACY_HEADER = ["model", "scope", "size", "published figures", "within 15%",
                   "published / expected, 10th-90th percentile (median)"]


def render_accuracy_markdown(table: Sequence[BandAccuracy]) -> str:
    """The bands of :func:`accuracy_samples` as docs/reading-results.md carries them."""
    lines = ["| " + " | ".join(ACCURACY_HEADER) + " |", "|" + "---|" * len(ACCURACY_HEADER)]
    for b in table:
        model = "NCCL's model" if b.family == "nccl" else "grouped point-to-point"
        lines.append(f"| {model} | {b.scope} | {b.band} | {b.rows} | {b.within_15pct} | "
                     f"{b.measured_over_model_p10:.2f}-{b.measured_over_model_p90:.2f} "
                     f"({b.measured_over_model_p50:.2f}) |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--markdown", action="store_true", help="the markdown table of docs/reading-results.md")
    mode.add_argument("--csv", action="store_true", help="one CSV row per published row, with the prediction")
    mode.add_argument("--accuracy", action="store_true",
                      help="the published accuracy per size band and scope (collscope/data/model_accuracy.csv)")
    mode.add_argument("--write-accuracy", action="store_true",
                      help=f"write the --accuracy table into {SHIPPED_ACCURACY.relative_to(ROOT)}")
    mode.add_argument("--accuracy-markdown", action="store_true",
                      help="the same as the markdown table of docs/reading-results.md")
    parser.add_argument("--data", type=Path, default=DATA, help="the published measurements (CSV)")
    parser.add_argument("--small", type=Path, default=SMALL,
                        help="the published curves' own times at 64 B-64 KiB (CSV), for the accuracy bands")
    parser.add_argument("--version", default=JUDGING_TABLES, choices=VERSIONS, help="NCCL cost-model version")
    args = parser.parse_args(argv)
    try:
        rows = read_published(args.data)
    except (OSError, ValueError) as exc:
        print(f"scorecard: {exc}", file=sys.stderr)
        return 2
    scored = score(rows, version=args.version)
    if args.accuracy or args.accuracy_markdown or args.write_accuracy:
        try:
            small = read_small(args.small)
        except (OSError, ValueError) as exc:
            print(f"scorecard: {exc}", file=sys.stderr)
            return 2
        table = accuracy_table(accuracy_samples(scored, small, version=args.version))
        if args.write_accuracy:
            SHIPPED_ACCURACY.write_text(render_accuracy_csv(table), encoding="utf-8")
            print(f"wrote {SHIPPED_ACCURACY.relative_to(ROOT)} ({len(table)} bands)")
            return 0
        sys.stdout.write(render_accuracy_csv(table) if args.accuracy else render_accuracy_markdown(table) + "\n")
        return 0
    render = render_markdown if args.markdown else render_csv if args.csv else render_text
    sys.stdout.write(render(scored).rstrip("\n") + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
