"""A canary's plan: the two sides, and their points in ABBA blocks, as a sweep :class:`~collscope.sweeps.spec.Plan`.

Block k holds one run of every op for A and one for B: A then B when k is even, B then A when k is odd, so a drift
in load or temperature during the run costs both sides alike. A point is one launch (one op, one side, one block,
``repeat`` = the block); its settings are the side's environment, its library directory first on
``LD_LIBRARY_PATH``, its command prefix (:data:`~collscope.canary.layout.PREFIX_VAR`) and its name
(:data:`~collscope.canary.layout.SIDE_VAR`), so identical sides (A/A) get different point ids. Ids are made from
what the side runs (never from the inherited environment), so the same command plans the same ids again (resume).

Pure: the inherited ``LD_LIBRARY_PATH`` is passed in.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from collscope.canary.layout import PREFIX_VAR, SIDE_VAR, PlannedPoint, SideConfig, SideName
from collscope.errors import ConfigError
from collscope.sweeps.spec import Plan, Point, SweepSpec, point_id_for
from collscope.vocab.knobs import validate_env

__all__ = ["parse_env_items", "parse_side", "parse_duration", "side_settings", "plan_canary", "block_order",
           "blocks_for_budget", "planned_points", "MIN_BLOCKS", "DEFAULT_MAX_BLOCKS"]

MIN_BLOCKS = 2
"""A budget never plans fewer blocks: one block gives no spread between blocks, hence no interval."""
DEFAULT_MAX_BLOCKS = 30
"""The most blocks a budget plans unless ``--max-blocks`` says otherwise."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(h|m|s|ms)?", re.IGNORECASE)
_SIDES: dict[str, SideName] = {"A": "A", "B": "B"}
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, None: 1.0}


def parse_env_items(items: Sequence[str], option: str) -> dict[str, str]:
    """``("K=V", ...)`` of ``option`` -> a mapping; ConfigError naming the item for a missing ``=``, a bad name or
    a name given twice. Values are kept as given (commas, spaces, ``=``); known NCCL/Open MPI knobs are checked
    by the knob registry (an unknown ``NCCL_*`` name or a bad value is refused before anything runs)."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not _ENV_NAME.fullmatch(name):
            raise ConfigError(f"{option} {item!r}: expected NAME=VALUE (NAME: letters, digits and _)")
        if name in out:
            raise ConfigError(f"{option} sets {name} twice ({out[name]!r} and {value!r})")
        if "\0" in value:
            raise ConfigError(f"{option} {name}: the value contains a NUL byte")
        out[name] = value
    return validate_env(out)


def parse_side(name: SideName, *, env: Sequence[str] = (), lib: str | None = None, cmd_prefix: str | None = None,
               label: str | None = None) -> SideConfig:
    """A side from its command-line options (``--a-env``, ``--a-lib``, ``--a-cmd-prefix``, ``--a-label``).

    The prefix is split with :func:`shlex.split` (quotes group words) and never run by a shell."""
    option = f"--{name.lower()}"
    words: tuple[str, ...] = ()
    if cmd_prefix is not None and cmd_prefix.strip():
        try:
            words = tuple(shlex.split(cmd_prefix))
        except ValueError as exc:
            raise ConfigError(f"{option}-cmd-prefix {cmd_prefix!r}: {exc} (quote words as a shell would)") from None
        if any("\0" in w for w in words):
            raise ConfigError(f"{option}-cmd-prefix: a word contains a NUL byte")
    if lib is not None and (not lib or "\0" in lib or ":" in lib):
        raise ConfigError(f"{option}-lib {lib!r}: expected one directory (no ':')")
    text = label if label is not None and label.strip() else name
    return SideConfig(name=name, label=text.strip(), env=parse_env_items(env, f"{option}-env"), lib=lib,
                      cmd_prefix=words)


def parse_duration(text: str) -> float:
    """``90s``, ``10m``, ``1h30m``, ``2.5m``, ``600`` (seconds) -> seconds; ConfigError otherwise."""
    raw = text.strip()
    pos, total = 0, 0.0
    while pos < len(raw):
        match = _DURATION.match(raw, pos)
        if match is None or match.end() == pos:
            break
        total += float(match.group(1)) * _UNIT_S[match.group(2).lower() if match.group(2) else None]
        pos = match.end()
        while pos < len(raw) and raw[pos] == " ":
            pos += 1
    if not raw or pos != len(raw) or not total > 0:
        raise ConfigError(f"duration {text!r} is invalid; valid: a positive duration such as 90s, 10m, 1h30m")
    return total


def side_settings(side: SideConfig, inherited_ld_path: str | None) -> dict[str, str]:
    """The settings of ``side``'s points: its environment, :data:`SIDE_VAR`, its prefix (:data:`PREFIX_VAR`, a
    JSON list) and, with a library directory, ``LD_LIBRARY_PATH`` = the directory, then ``inherited_ld_path``."""
    out = {**side.env, SIDE_VAR: side.name}
    if side.lib is not None:
        out["LD_LIBRARY_PATH"] = side.lib + (f":{inherited_ld_path}" if inherited_ld_path else "")
    if side.cmd_prefix:
        out[PREFIX_VAR] = json.dumps(list(side.cmd_prefix))
    return out


def block_order(block: int) -> tuple[SideName, SideName]:
    """ABBA: ``("A", "B")`` for an even block, ``("B", "A")`` for an odd one."""
    return ("A", "B") if block % 2 == 0 else ("B", "A")


def _strategy(a: SideConfig, b: SideConfig) -> dict[str, Any]:
    return {"strategy": "canary", "A": a.identity(), "B": b.identity()}


def _point_id(spec: SweepSpec, op: str, side: SideConfig, block: int, sizes: tuple[int, ...] | None) -> str:
    """``<op>-<side>-b<block>-<hash>``: the hash covers the spec's measurement, the op, the sizes, the block and
    what the side runs (environment, library, prefix) and its name, so sides never share an id."""
    what = {SIDE_VAR: side.name, "canary": json.dumps(side.identity(), sort_keys=True)}
    base = point_id_for(spec, op, what, block, sizes=sizes)
    digest = hashlib.sha256(base.encode()).hexdigest()[:12]
    slug = re.sub(r"[^A-Za-z0-9]+", "-", op).strip("-").lower()
    return f"{slug}-{side.name.lower()}-b{block}-{digest}"


def plan_canary(spec: SweepSpec, a: SideConfig, b: SideConfig, *, blocks: int,
                sizes: Mapping[str, tuple[int, ...]] | None = None, inherited_ld_path: str | None = None) -> Plan:
    """The plan of ``blocks`` ABBA blocks: per block, every op of ``spec`` for the first side, then every op for
    the second (:func:`block_order`). ``sizes``: explicit sizes per op (a workload's), else the spec's ladder.

    The plan's strategy holds both sides' identities, so a canary of other sides never resumes into this
    directory (another sweep id); the number of blocks is not part of it (a budget may add blocks)."""
    if isinstance(blocks, bool) or not isinstance(blocks, int) or blocks < 1:
        raise ConfigError(f"blocks={blocks!r} is invalid; valid: an integer >= 1")
    if a.name != "A" or b.name != "B":
        raise ConfigError("plan_canary takes side A, then side B")
    sides = {"A": a, "B": b}
    points: list[Point] = []
    for block in range(blocks):
        for name in block_order(block):
            side = sides[name]
            settings = side_settings(side, inherited_ld_path)
            for op in spec.ops:
                op_sizes = None if sizes is None else sizes.get(op)
                points.append(Point(point_id=_point_id(spec, op, side, block, op_sizes), op=op, settings=settings,
                                    repeat=block, sizes=op_sizes))
    return Plan(spec, tuple(points), (), _strategy(a, b))


def planned_points(plan: Plan) -> tuple[PlannedPoint, ...]:
    """Side and block of every point of a canary plan (for ``canary.json``)."""
    out = []
    for p in plan.points:
        side = _SIDES.get(p.settings.get(SIDE_VAR, ""))
        if side is None:
            raise ConfigError(f"point {p.point_id} is not a canary point (no {SIDE_VAR})")
        out.append(PlannedPoint(p.point_id, side, p.repeat, p.op))
    return tuple(out)


def blocks_for_budget(budget_s: float, first_block_s: float, *, max_blocks: int = DEFAULT_MAX_BLOCKS,
                      elapsed_s: float | None = None) -> int:
    """How many blocks fit ``budget_s``, the first (calibration) block having taken ``first_block_s`` and the run
    ``elapsed_s`` so far (default: the first block): 1 + the further blocks that fit the rest, at least
    :data:`MIN_BLOCKS` and at most ``max_blocks``. Assumes every block costs what the first did."""
    if not budget_s > 0 or not first_block_s >= 0:
        raise ConfigError(f"budget {budget_s} s and block time {first_block_s} s: expected positive values")
    if max_blocks < MIN_BLOCKS:
        raise ConfigError(f"max_blocks={max_blocks} is invalid; valid: >= {MIN_BLOCKS}")
    spent = first_block_s if elapsed_s is None else elapsed_s
    further = int(max(0.0, budget_s - spent) // first_block_s) if first_block_s > 0 else max_blocks
    return max(MIN_BLOCKS, min(max_blocks, 1 + further))
