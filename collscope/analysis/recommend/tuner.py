"""``collscope recommend --format tuner``: rules for NCCL's example tuner plugin, from a :class:`Recommendation`.

Format (``reference/nccl-facts.md`` section 3; ``plugins/tuner/example`` of NCCL 2.27.5+): CSV without spaces,
``#`` comments, columns ``collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,
numPipeOps,regBuff``; lower-case names; inclusive byte ranges (nccl-tests' total size, NCCL's nBytes); the
first matching line wins. One line per winning range of a group: the ranges of a group are disjoint and
their edges are measured sizes, so the rules cover only sizes with evidence. A config that forces exactly one
algorithm and one protocol (and optionally one channel count) is expressible; so is a protocol-only win
(``NCCL_PROTO`` forced, ``NCCL_ALGO`` not): its algorithm is the one NCCL logged for that config in the sweep's
check data (``points/<id>.check.json``), else Ring, named in a comment as an assumption. Each rule is preceded
by a comment with its evidence and the time it saves on the workload.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from collscope.analysis.recommend.env import (
    comment,
    excluded_lines,
    few_repeats_lines,
    percent,
    provenance_lines,
    saved_text,
    selection_for,
)
from collscope.analysis.recommend.records import DEFAULT_CONFIG, GroupKey, GroupResult, Recommendation, SizeRange
from collscope.analysis.recommend.timing import evaluate, range_saving
from collscope.units import format_size
from collscope.vocab.ops import OP_TABLE

__all__ = ["TunerRule", "NotExpressible", "TUNER_COLUMNS", "TUNER_COLLECTIVE", "TUNER_ALGORITHM", "TUNER_PROTOCOL",
           "tuner_rules", "tuner_rule", "render_tuner", "ASSUMED_ALGORITHM"]

ASSUMED_ALGORITHM = "Ring"
"""The algorithm of a protocol-only rule when the check data names none: every collective the plugin handles
can run Ring with every protocol."""

TUNER_COLUMNS = "collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff"
TUNER_COLLECTIVE = {row.name: row.tuner_collective for row in OP_TABLE if row.tuner_collective}
"""collscope op -> the plugin's collective_type (the op table's)."""
TUNER_ALGORITHM = {"Tree": "tree", "Ring": "ring", "CollNetDirect": "collnet_direct", "CollNetChain": "collnet_chain",
                   "NVLS": "nvls", "NVLSTree": "nvls_tree", "PAT": "pat"}
"""collscope's algorithm name -> the plugin's ``algorithm`` column."""
TUNER_PROTOCOL = {"LL": "ll", "LL128": "ll128", "Simple": "simple"}
"""collscope's protocol name -> the plugin's ``protocol`` column."""
_CHANNEL_PAIRS = (("NCCL_MIN_CTAS", "NCCL_MAX_CTAS"), ("NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS"))


class NotExpressible(ValueError):
    """A winning config the tuner plugin cannot express; the message says why."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TunerRule:
    """One CSV line; ``-1`` is the plugin's wildcard / keep-NCCL's value."""

    collective: str
    min_bytes: int
    max_bytes: int
    algorithm: str
    protocol: str
    channels: int = -1
    nnodes: int = -1
    nranks: int = -1
    num_pipe_ops: int = -1
    reg_buff: int = -1
    notes: tuple[str, ...] = field(default=(), compare=False)
    """Comments that go with the line: evidence, time saved, an assumed algorithm."""

    def line(self) -> str:
        return ",".join(str(v) for v in (self.collective, self.min_bytes, self.max_bytes, self.algorithm,
                                          self.protocol, self.channels, self.nnodes, self.nranks,
                                          self.num_pipe_ops, self.reg_buff))


def _single(name: str, settings: dict[str, str], op: str) -> str:
    value = settings.get(name)
    if value is None:
        raise NotExpressible(f"{name} is not forced (a rule needs one algorithm and one protocol)")
    sel = selection_for(name, value, op)
    if sel is None or sel[0] or len(sel[1]) != 1:
        raise NotExpressible(f"{name}={value} is not a single value for {op}")
    return sel[1][0]


def _channels(settings: dict[str, str]) -> int:
    found: set[int] = set()
    for lo, hi in _CHANNEL_PAIRS:
        if lo in settings or hi in settings:
            if settings.get(lo) != settings.get(hi):
                raise NotExpressible(f"{lo}/{hi} do not force one channel count (the rule's channels column "
                                     "needs min = max)")
            found.add(int(settings[lo]))
    if len(found) > 1:
        raise NotExpressible("the CTA and NCHANNELS bounds force different channel counts")
    return found.pop() if found else -1


def tuner_rule(key: GroupKey, span: SizeRange, settings: dict[str, str],
               logged_algorithm: str | None = None) -> TunerRule:
    """The rule for one winning range; NotExpressible when the config cannot be a rule. ``logged_algorithm``:
    what NCCL ran for a protocol-only config (NCCL's spelling), else :data:`ASSUMED_ALGORITHM` is assumed."""
    if any(name.startswith("OMPI_MCA_") for name in settings):
        raise NotExpressible("Open MPI settings: the NCCL tuner plugin only chooses NCCL algorithms")
    collective = TUNER_COLLECTIVE.get(key.op)
    if collective is None:
        raise NotExpressible(f"{key.op} is not a collective the tuner plugin handles "
                             f"({', '.join(TUNER_COLLECTIVE.values())})")
    known = {"NCCL_ALGO", "NCCL_PROTO", *(n for pair in _CHANNEL_PAIRS for n in pair)}
    others = sorted(set(settings) - known)
    if others:
        raise NotExpressible(f"{', '.join(others)} has no tuner column")
    protocol = _single("NCCL_PROTO", settings, key.op)
    notes: tuple[str, ...] = ()
    if "NCCL_ALGO" in settings:
        algorithm = _single("NCCL_ALGO", settings, key.op)
    elif logged_algorithm in TUNER_ALGORITHM:
        algorithm = str(logged_algorithm)
        notes = (f"algorithm {TUNER_ALGORITHM[algorithm]}: what NCCL logged for {key.op} with NCCL_PROTO={protocol} "
                 "(sweep check data)",)
    else:
        algorithm = ASSUMED_ALGORITHM
        notes = (f"assumed algorithm {TUNER_ALGORITHM[algorithm]}: NCCL_PROTO={protocol} was measured with NCCL's own "
                 "algorithm choice and the sweep's check data names none; verify with NCCL_DEBUG=INFO "
                 "NCCL_DEBUG_SUBSYS=TUNING (or measure NCCL_ALGO x NCCL_PROTO)",)
    return TunerRule(collective=collective, min_bytes=span.min_bytes, max_bytes=span.max_bytes,
                     algorithm=TUNER_ALGORITHM[algorithm], protocol=TUNER_PROTOCOL[protocol],
                     channels=_channels(settings), nnodes=-1 if key.nnodes is None else key.nnodes,
                     nranks=key.nranks, notes=notes)


def tuner_rules(rec: Recommendation) -> tuple[list[TunerRule], list[str]]:
    """Rules for every expressible winning range, sorted, and a line per range that is not expressible."""
    rules: list[TunerRule] = []
    skipped: list[str] = []
    for group in rec.groups:
        for span in group.ranges:
            if span.config == DEFAULT_CONFIG:
                continue
            where = (f"{group.key.label} {format_size(span.min_bytes)}..{format_size(span.max_bytes)} "
                     f"{span.config}")
            try:
                rule = tuner_rule(group.key, span, rec.settings.get(span.config, {}),
                                  rec.algorithms.get(span.config, {}).get(group.key.op))
                rules.append(replace(rule, notes=(_evidence(rec, group, span), *rule.notes)))
            except NotExpressible as exc:
                skipped.append(f"not expressible: {where}: {exc}")
    rules.sort(key=lambda r: (r.collective, r.nnodes, r.nranks, r.min_bytes))
    return rules, skipped


def _evidence(rec: Recommendation, group: GroupResult, span: SizeRange) -> str:
    gains = percent(span.gain_min) if percent(span.gain_min) == percent(span.gain_max) else \
        f"{percent(span.gain_min)}..{percent(span.gain_max)}"
    where = f"{group.key.label} {format_size(span.min_bytes)}..{format_size(span.max_bytes)}: {span.config} +{gains} " \
            f"busbw ({len(span.sizes)} sizes, {span.repeats_min} repeats, noise <= {percent(span.noise_max)})"
    if rec.workload is None:
        return where
    entries = rec.workload.for_group(group.key.op, group.key.nranks)
    total = evaluate(group, entries, DEFAULT_CONFIG).default_us
    saved = range_saving(group, entries, span)
    if saved.covered == 0:
        return f"{where}; no workload call in this range, so it saves 0 us per step"
    return f"{where}; {saved_text(saved.saved_us, total)} of the workload's {group.key.op} time"


def render_tuner(rec: Recommendation) -> str:
    """The rule file: provenance comments, then one CSV line per expressible winning range."""
    rules, skipped = tuner_rules(rec)
    lines = [comment("NCCL tuner plugin rules (example CSV plugin, plugins/tuner/example): save as "
                     "nccl_tuner.conf or point NCCL_TUNER_CONFIG_FILE at it"),
             comment("written by collscope recommend"), *provenance_lines(rec),
             comment("ranges are inclusive, their edges are measured sizes (bytes as nccl-tests prints them, "
                     "NCCL's nBytes); outside them NCCL's own tuning applies; first match wins, no overlaps"),
             comment("channels -1 keeps NCCL's count; nNodes/nRanks are those measured; numPipeOps, regBuff -1: any")]
    lines += [comment(f"note: {n}") for n in rec.notes]
    lines += few_repeats_lines(rec)
    lines += [comment(s) for s in skipped]
    lines += excluded_lines(rec)
    if not rules:
        lines.append(comment("no rules: " + (
            f"nothing beats the default beyond noise (min gain {percent(rec.options.min_gain)})"
            if not rec.any_winner else "no winning range is expressible as a tuner rule")))
    lines.append(comment(TUNER_COLUMNS))
    for r in rules:
        lines += [comment(n) for n in r.notes]
        lines.append(r.line())
    return "\n".join(lines) + "\n"
