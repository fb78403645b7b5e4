"""Pass or fail of the device check's measured steps, from the figures ``device_worker.py`` wrote (pure).

Each judge returns ``(passed, figures, reason)``; the figures are what ``summary.json`` keeps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FLOOR_TOLERANCE = 0.15
"""CUDA-event and host per-call times of the in-place 8 B all_reduce agree within this fraction (of the host's)."""
GATHER_TOLERANCE = 0.10
"""One-rank out-of-place all_gather and ``tensor.copy_`` take the same time within this fraction (of the copy's)."""

Outcome = tuple[bool, dict[str, Any], str]


def judge_floor(doc: Mapping[str, Any]) -> Outcome:
    rows: dict[str, dict[str, float]] = {}
    bad: list[str] = []
    for iters, row in doc["per_call"].items():
        event, host = float(row["event_us"]), float(row["host_us"])
        gap = abs(event - host) / host if host > 0 else float("inf")
        rows[iters] = {"event_us": round(event, 3), "host_us": round(host, 3), "gap": round(gap, 4)}
        if not gap <= FLOOR_TOLERANCE:
            bad.append(f"{iters} calls: event {event:.2f} us, host {host:.2f} us ({gap:.0%} apart)")
    said = ", ".join(f"{k}: {v['event_us']:.2f}/{v['host_us']:.2f} us" for k, v in rows.items())
    if bad:
        return False, {"per_call": rows}, f"clocks more than {FLOOR_TOLERANCE:.0%} apart: " + "; ".join(bad)
    return True, {"per_call": rows}, f"event/host per call within {FLOOR_TOLERANCE:.0%}: {said}"


def judge_gather(doc: Mapping[str, Any]) -> Outcome:
    rows: list[dict[str, Any]] = []
    bad: list[str] = []
    for row in doc["sizes"]:
        size, nccl, copy = int(row["size_bytes"]), float(row["nccl_us"]), float(row["copy_us"])
        ratio = nccl / copy if copy > 0 else float("inf")
        rows.append({"size_bytes": size, "nccl_us": round(nccl, 2), "copy_us": round(copy, 2),
                     "ratio": round(ratio, 4), "copy_gbps": round(2 * size / copy / 1e3, 1) if copy > 0 else None,
                     "copied_right": bool(row["copied_right"])})
        mib = size >> 20
        if not row["copied_right"]:
            bad.append(f"{mib} MiB: all_gather's output differs from its input")
        if not abs(ratio - 1) <= GATHER_TOLERANCE:
            bad.append(f"{mib} MiB: all_gather {nccl:.1f} us, copy {copy:.1f} us (x{ratio:.3f})")
    if not rows:
        return False, {"sizes": rows}, "no sizes measured"
    if bad:
        return False, {"sizes": rows}, f"beyond {GATHER_TOLERANCE:.0%}: " + "; ".join(bad)
    worst = max(rows, key=lambda r: abs(r["ratio"] - 1))
    return True, {"sizes": rows}, (f"{len(rows)} sizes within {GATHER_TOLERANCE:.0%} of a device copy "
                                   f"(worst x{worst['ratio']:.3f} at {worst['size_bytes'] >> 20} MiB)")


def info_cost(warn: Mapping[str, Any], info: Mapping[str, Any], info_lines: int) -> Outcome:
    """Recorded, not judged against a bound: both runs must have completed with a time."""
    w, i = float(warn["event_us"]), float(info["event_us"])
    figures = {"warn_us": round(w, 3), "info_coll_us": round(i, 3), "extra_us_per_call": round(i - w, 3),
               "ratio": round(i / w, 3) if w > 0 else None, "info_lines": info_lines, "iters": int(warn["iters"]),
               "warn_host_us": round(float(warn["host_us"]), 3), "info_coll_host_us": round(float(info["host_us"]), 3)}
    if not (w > 0 and i > 0):
        return False, figures, f"a run gave no time (WARN {w} us, INFO {i} us)"
    return True, figures, (f"8 B all_reduce per call: WARN {w:.2f} us, INFO+COLL {i:.2f} us ({i - w:+.2f} us, "
                           f"x{i / w:.2f}); {info_lines} INFO lines for {figures['iters']} timed calls")


def judge_log(doc: Mapping[str, Any], effects: Mapping[str, Mapping[str, Any]], figures: dict[str, Any]) -> Outcome:
    """A one-rank INIT/ENV/TUNING log: version, one rank, the TUNING table, NCCL_MAX_NCHANNELS=4 applied."""
    figures.update({"nccl_version": doc.get("nccl_version"), "nranks": doc.get("nranks"),
                    "channels": doc.get("channels"), "env": doc.get("env"),
                    "tuning": bool(doc.get("tuning")), "effects": dict(effects)})
    bad = []
    if not doc.get("nccl_version"):
        bad.append("no NCCL version")
    if doc.get("nranks") != 1:
        bad.append(f"nranks {doc.get('nranks')} (expected 1)")
    if not doc.get("tuning"):
        bad.append("no TUNING table")
    forced = effects.get("NCCL_MAX_NCHANNELS")
    if forced is None:
        bad.append("NCCL_MAX_NCHANNELS not echoed (ENV)")
    elif forced.get("applied") is not True:
        bad.append(f"NCCL_MAX_NCHANNELS={forced.get('forced')} not applied (channels {forced.get('used')})")
    if bad:
        return False, figures, "; ".join(bad)
    return True, figures, (f"NCCL {doc['nccl_version']}, 1 rank, {doc.get('channels')} channels, TUNING table, "
                           f"NCCL_MAX_NCHANNELS={forced['forced'] if forced else '?'} applied")
