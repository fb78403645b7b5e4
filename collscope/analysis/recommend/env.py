"""``collscope recommend --format env``: ``export`` lines with their evidence, from a :class:`Recommendation`.

Environment variables apply to every message size, so each op gets the one config chosen by
:func:`~collscope.analysis.recommend.core.recommend`: the one that saves the most time per step on the workload
and loses beyond noise at no size carrying more than 5% of its time. The sizes where it loses are printed as its
cost. When no config qualifies, the text says so, with each candidate's time figures, and points to the tuner
rules (per size range). Every ``export`` line carries its evidence in a
comment. NCCL_ALGO / NCCL_PROTO use NCCL's per-collective syntax (``allreduce:tree;allgather:ring``, NCCL
2.24+) when the ops want different values or some measured op wants none; Open MPI algorithm variables come
with ``OMPI_MCA_coll_tuned_use_dynamic_rules=1`` and their ``mpirun --mca`` equivalent.
"""

from __future__ import annotations

import re
import shlex

from collscope.analysis.noise import MIN_REPEATS, describe_rule
from collscope.analysis.recommend.records import EnvChoice, Recommendation, SizeRange
from collscope.analysis.recommend.timing import format_us, range_saving
from collscope.errors import CollscopeError
from collscope.units import format_size
from collscope.vocab.knobs import DYNAMIC_RULES, KNOBS, describe
from collscope.vocab.nccl import ALGORITHMS, ALGOS_FOR_FUNC, FUNCTIONS, OP_FUNC, PROTOCOLS, parse_selection
from collscope.vocab.secrets import REDACTED, is_secret_name

__all__ = ["render_env", "percent", "comment", "provenance_lines", "excluded_lines",
           "selection_for", "workload_line", "saved_text", "few_repeats_lines"]

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_BARE = re.compile(r"^[A-Za-z0-9_,.:^+/=@-]+$")
_SELECTION_KNOBS = {"NCCL_ALGO": ALGORITHMS, "NCCL_PROTO": PROTOCOLS}
_MAX_EXCLUDED_LINES = 10


# ---- small text helpers (shared with the tuner renderer) ---------------------------------------------------
def percent(fraction: float) -> str:
    """``0.03`` -> ``3%``, ``0.125`` -> ``12.5%``."""
    return f"{fraction * 100:.1f}".rstrip("0").rstrip(".") + "%"


def comment(text: str) -> str:
    """A ``#`` line whose text cannot break out of the comment (control characters become ``?``)."""
    return "# " + _CONTROL.sub("?", text)


def _span(r: SizeRange) -> str:
    return format_size(r.min_bytes) if r.min_bytes == r.max_bytes else \
        f"{format_size(r.min_bytes)}..{format_size(r.max_bytes)}"


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def workload_line(rec: Recommendation) -> str:
    """What the time figures assume."""
    w = rec.workload
    if w is None or w.per_measured_size:
        n = 0 if w is None else len(w.entries)
        return comment(f"workload: one call per measured size ({_count(n, 'call')} per step over the measured "
                       "groups), so each size weighs by its own time; `collscope recommend --workload FILE` weighs the "
                       "job's mix")
    n = len(w.entries)
    return comment(f"workload: {w.source} ({n} entr{'y' if n == 1 else 'ies'}: op, size, calls per step, ranks); "
                   "time figures are per step of it")


def saved_text(saved_us: float, total_us: float) -> str:
    """``saves 12.3 us per step (4.5%)`` or ``costs ...``."""
    verb = "saves" if saved_us >= 0 else "costs"
    pct = f" ({abs(saved_us) / total_us * 100:.1f}%)" if total_us > 0 else ""
    return f"{verb} {format_us(abs(saved_us))} per step{pct}"


def provenance_lines(rec: Recommendation) -> list[str]:
    sweeps = ", ".join(rec.sweep_ids) or "unknown"
    versions = ", ".join(rec.nccl_versions) or "unknown"
    return [comment(f"from sweep(s): {sweeps}; NCCL version(s): {versions}"),
            comment(f"rule: {describe_rule(rec.options.min_gain)}"), workload_line(rec)]


def excluded_lines(rec: Recommendation) -> list[str]:
    lines = [comment(f"excluded, may not win: {x.key.label} {x.config} at {format_size(x.size_bytes)}: "
                     f"{_count(x.rows, 'row')}, {x.reason}") for x in rec.excluded[:_MAX_EXCLUDED_LINES]]
    if len(rec.excluded) > _MAX_EXCLUDED_LINES:
        lines.append(comment(f"... and {len(rec.excluded) - _MAX_EXCLUDED_LINES} more excluded cells "
                             "(see --format json)"))
    for p in rec.failed_points[:_MAX_EXCLUDED_LINES]:
        lines.append(comment(f"failed, no records: point {p.get('point_id')} ({p.get('op')}, {p.get('config')}): "
                             f"{p.get('reason')}"))
    if len(rec.failed_points) > _MAX_EXCLUDED_LINES:
        lines.append(comment(f"... and {len(rec.failed_points) - _MAX_EXCLUDED_LINES} more failed points "
                             "(see --format json)"))
    return lines


def selection_for(name: str, value: str, op: str) -> tuple[bool, tuple[str, ...]] | None:
    """The NCCL_ALGO/NCCL_PROTO entry that applies to ``op``: (exclude, names), or None when none does."""
    func = OP_FUNC.get(op)
    if func is None:
        return None
    try:
        entries = parse_selection(value, _SELECTION_KNOBS[name], name)
    except CollscopeError:
        return None
    for wanted in (func, None):
        for e in entries:
            if e.func == wanted:
                return e.exclude, e.names
    return None


def _shell(value: str) -> str:
    if _BARE.match(value):
        return value
    if not re.search(r'["$`\\!]', value):
        return f'"{value}"'
    return shlex.quote(value)


def _evidence(choice: EnvChoice) -> str:
    parts = []
    for key, r in choice.wins:
        gain = percent(r.gain_min) if percent(r.gain_min) == percent(r.gain_max) else \
            f"{percent(r.gain_min)}..{percent(r.gain_max)}"
        parts.append(f"{key.label} +{gain} busbw at {_span(r)} ({_count(len(r.sizes), 'size')}, "
                     f"{_count(r.repeats_min, 'repeat')}, noise <= {percent(r.noise_max)})")
    return "; ".join(parts)


def few_repeats_lines(rec: Recommendation) -> list[str]:
    """A line when gains were left uncounted for want of repeats."""
    n = sum(1 for g in rec.groups for s in g.sizes if any(c.verdict == "too few repeats" for c in s.candidates))
    if not n:
        return []
    return [comment(f"{n} size(s) where a config gains more than {percent(rec.options.min_gain)} on fewer than "
                    f"{MIN_REPEATS} repeats: noise unknown, not counted; measure again with "
                    f"{MIN_REPEATS} repeats (`collscope sweep run --repeats {MIN_REPEATS}`)")]


def _why_not_lines(rec: Recommendation, skip_ops: set[str] | None = None) -> list[str]:
    """One line per config that wins somewhere but is not one setting for every size, with its time figures."""
    quiet = ("chosen", "wins at no size beyond noise", "not usable", "saves less time")
    return [comment(f"{c.config}: {c.reason}") for c in rec.env_candidates
            if not c.reason.startswith(quiet) and c.op not in (skip_ops or set())]


def _cost_lines(rec: Recommendation, choice: EnvChoice) -> list[str]:
    lines = []
    groups = {g.key: g for g in rec.groups}
    for key, r in choice.losses:
        worst, least = percent(-r.gain_min), percent(-r.gain_max)
        loss = worst if worst == least else f"{least}..{worst}"
        on_workload = ""
        if rec.workload is not None and key in groups:
            ev = range_saving(groups[key], rec.workload.for_group(key.op, key.nranks), r)
            on_workload = (f"; {format_us(-ev.saved_us)} per step on the workload" if ev.covered else
                           "; no workload call there")
        lines.append(comment(f"cost: {key.label} loses {loss} at {_span(r)} ({_count(len(r.sizes), 'size')}) "
                             f"with {choice.config}{on_workload}"))
    return lines


# ---- the renderer -----------------------------------------------------------------------------------------
def render_env(rec: Recommendation) -> str:
    """Shell text: comments with provenance, evidence and costs, and ``export`` lines (none when nothing wins)."""
    lines = [comment("collscope recommend: environment settings chosen from measurements"), *provenance_lines(rec)]
    lines += [comment(f"note: {n}") for n in rec.notes]
    lines += few_repeats_lines(rec)
    if not rec.env:
        if not rec.any_winner:
            lines.append(comment(f"nothing beats the default beyond noise (min gain {percent(rec.options.min_gain)})"))
        else:
            lines.append(comment("no single setting fits every size: environment variables apply to every size, and "
                                 "no config saves time on the workload without losing beyond noise at a size that "
                                 "carries more than 5% of its time"))
            lines += _why_not_lines(rec)
            lines.append(comment("use the per-size-range rules instead: collscope recommend --format tuner "
                                 "(details: --format json)"))
        return "\n".join(lines + excluded_lines(rec)) + "\n"
    lines.append(comment("environment variables apply to every size: per op, the config that saves the most time "
                         "on the workload and loses beyond noise at no size carrying more than 5% of its time"))
    for choice in rec.env:
        lines.append(comment(f"{choice.op}: {choice.config} "
                             f"{saved_text(choice.time_saved_us, choice.workload_time_us)} on the workload "
                             f"(default: {format_us(choice.workload_time_us)} per step)"))
        lines += _cost_lines(rec, choice)
    ops_with_env = {c.op for c in rec.env}
    lines += _why_not_lines(rec, skip_ops=ops_with_env)
    body, notes = _exports(rec)
    lines += [comment(n) for n in notes]
    lines += body
    return "\n".join(lines + excluded_lines(rec)) + "\n"


def _exports(rec: Recommendation) -> tuple[list[str], list[str]]:
    selections: dict[str, dict[str, tuple[str, EnvChoice]]] = {}
    plain: dict[str, list[tuple[str, EnvChoice]]] = {}
    notes: list[str] = []
    for choice in rec.env:
        for name, value in sorted(choice.settings.items()):
            family = KNOBS[name].family if name in KNOBS else ("ompi" if name.startswith("OMPI_MCA_") else "nccl")
            if not _ENV_NAME.match(name) or _CONTROL.search(value):
                notes.append(f"{name}={value!r} of {choice.op} is not exported: not a plain variable and value")
            elif family == "nccl-tests":
                notes.append(f"{name} of {choice.op} is read by the nccl-tests binaries, not NCCL: not exported")
            elif is_secret_name(name):
                notes.append(f"{name} of {choice.op} holds a secret, recorded as {REDACTED}: not exported (set it as "
                             "the measured ranks had it)")
            elif name in _SELECTION_KNOBS:
                sel = selection_for(name, value, choice.op)
                if sel is None:
                    notes.append(f"{name}={value} does not apply to {choice.op}: not exported")
                else:
                    selections.setdefault(name, {})[choice.op] = (("^" if sel[0] else "") + ",".join(sel[1]), choice)
            elif name != DYNAMIC_RULES:
                plain.setdefault(name, []).append((value, choice))
    body: list[str] = []
    nccl_ops = sorted({g.key.op for g in rec.groups if g.key.backend == "nccl" and g.key.op in OP_FUNC})
    for name in ("NCCL_ALGO", "NCCL_PROTO"):
        if name in selections:
            body += _selection_lines(name, selections[name], nccl_ops)
    if body:
        notes.append("warning: forcing NCCL_ALGO/NCCL_PROTO disables a loaded NCCL tuner plugin's choices for the "
                     "affected collectives; the per-size alternative is a tuner plugin rule file: "
                     "collscope recommend --format tuner")
    ompi: list[tuple[str, str, str]] = []
    for name, items in sorted(plain.items()):
        items.sort(key=lambda t: -t[1].total_gain)
        value, choice = items[0]
        for other, loser in items[1:]:
            if other != value:
                notes.append(f"{loser.op} wants {name}={other}: not exported, conflicts with {choice.op}'s {value} "
                             "(larger total gain)")
        wanted_by = sorted({c.op for v, c in items if v == value})
        evidence = "; ".join(_evidence(c) for v, c in items if v == value)
        if name.startswith("OMPI_MCA_"):
            try:
                what = describe(name, value) + "; "
            except CollscopeError:
                what = ""
            ompi.append((name, value, f"export {name}={_shell(value)}  # {_CONTROL.sub('?', what + evidence)}"))
        else:
            body.append(f"export {name}={_shell(value)}  # {_CONTROL.sub('?', evidence)}")
            if wanted_by != sorted({g.key.op for g in rec.groups}):
                notes.append(f"{name} applies to every collective, not only {', '.join(wanted_by)}")
    if ompi:
        mca = " ".join(f"--mca {n.removeprefix('OMPI_MCA_')} {shlex.quote(v)}" for n, v, _ in ompi)
        body.append(comment(f"Open MPI (coll tuned, the CPU twin of NCCL_ALGO): the same as mpirun --mca "
                            f"coll_tuned_use_dynamic_rules 1 {mca}"))
        body.append(f"export {DYNAMIC_RULES}=1  # Open MPI reads the coll_tuned_*_algorithm variables only with "
                    "dynamic rules on")
        body += [line for _, _, line in ompi]
    return body, notes


def _selection_lines(name: str, wants: dict[str, tuple[str, EnvChoice]], nccl_ops: list[str]) -> list[str]:
    values = {v for v, _ in wants.values()}
    ordered = sorted(wants, key=lambda op: FUNCTIONS.index(OP_FUNC[op]))
    per_coll = ";".join(f"{OP_FUNC[op].lower()}:{wants[op][0].lower()}" for op in ordered)
    evidence = "; ".join(_evidence(wants[op][1]) for op in ordered)
    lines: list[str] = []
    if len(values) == 1 and set(wants) >= set(nccl_ops):
        value = values.pop()
        lines.append(f"export {name}={_shell(value)}  # {_CONTROL.sub('?', evidence)}")
        funcs = {OP_FUNC[op] for op in wants}
        others = [f for f in FUNCTIONS if f not in funcs]
        if others:
            lines.append(comment(f"{name}={value} applies to every collective; to force it for "
                                 f"{', '.join(ordered)} only (NCCL >= 2.24): {name}=\"{per_coll}\""))
        if name == "NCCL_ALGO" and not value.startswith("^"):
            forced = set(value.split(","))
            cannot = [f for f in others if not forced & ALGOS_FOR_FUNC[f]]
            if cannot:
                lines.append(comment(f"careful: {', '.join(cannot)} cannot run {value}; NCCL >= 2.24 then fails "
                                     "with 'No algorithm/protocol available' for them: use the per-collective form "
                                     "above if you run them"))
        return lines
    lines.append(comment(f"{name} per collective: NCCL >= 2.24 syntax (older NCCL rejects it); collectives not "
                         "listed keep NCCL's own choice"))
    lines.append(f'export {name}="{per_coll}"  # {_CONTROL.sub("?", evidence)}')
    return lines
