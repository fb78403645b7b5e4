"""Split one file that holds several tool outputs pasted one after the other into its parts, by content.

People publish a node's RDMA picture as one block: ``ibstat`` then ``ibv_devinfo``, ``ibdev2netdev`` then
``ibstat``, ``nvidia-smi topo -m`` then ``ibstat``, often with the shell prompt line of each command
(``[root@node ~]# ibstat``, ``$ rdma link show``) and markdown code fences kept. Each part is then read by its
own parser and the facts merged (:mod:`collscope.topo.infiniband.merge` names the ones that disagree).

A part starts at the first line of one tool's block (``CA 'mlx5_0'``, ``hca_id: mlx5_0``, ``Infiniband device
'mlx5_0' port 1 status:``, a ``link mlx5_0/1 ...`` line, an ``mlx5_0 port 1 ==> ib0 (Up)`` line, the
``device  node GUID`` header, the ``GPU0 GPU1 ...`` matrix header) whose tool differs from the block before it,
or after a prompt line or a fence. The file name never decides. A file with one tool's output and no prompt is
left whole (:func:`split_pasted` returns ``None``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from collscope.topo.infiniband import netdev
from collscope.topo.infiniband.rdma_link import looks_like_json, looks_like_rdma_link

__all__ = ["PastedPart", "split_pasted", "SPLIT_FORMATS"]

_A = re.ASCII
_COMMANDS = frozenset({"ibstat", "ibstatus", "ibv_devinfo", "ibv_devices", "ibdev2netdev", "rdma", "nvidia-smi"})
_PROMPT_ENDS = ("$", "#", ">", "%")
_FENCE = re.compile(r"^[ \t]*(```|~~~)[\w+-]*[ \t]*$", _A)
_MAX_PROMPT_TOKENS = 8


def _matches(pattern: str) -> Callable[[str], bool]:
    regex = re.compile(pattern, _A)
    return lambda line: regex.match(line) is not None


def _matrix_header(line: str) -> bool:
    tokens = line.split()
    return bool(tokens) and tokens[0] == "GPU0" and (len(tokens) == 1 or tokens[1] != "X")


_STARTS: tuple[tuple[str, Callable[[str], bool]], ...] = (
    ("ibstat", _matches(r"^CA '[^']+'[ \t]*$")),
    ("ibstatus", _matches(r"^Infiniband device '[^']+' port \d+ status:")),
    ("ibv_devinfo", _matches(r"^hca_id:[ \t]*\S+[ \t]*$")),
    ("ibv_devices", _matches(r"^[ \t]*device[ \t]+node GUID[ \t]*$")),
    ("rdma-link", lambda line: not line[:1].isspace() and looks_like_rdma_link(line)),
    ("ibdev2netdev", lambda line: not line[:1].isspace() and netdev.looks_like_ibdev2netdev(line)),
    ("nvidia-smi-topo", _matrix_header),
)  # fmt: skip
SPLIT_FORMATS: tuple[str, ...] = tuple(name for name, _ in _STARTS)
"""The formats (:data:`collscope.topo.detect.FORMATS` names) whose outputs are split apart when pasted together."""


@dataclass(frozen=True, slots=True)
class PastedPart:
    """One tool's output inside a pasted file."""

    fmt: str | None
    """The format its first line starts (a :data:`SPLIT_FORMATS` name); ``None`` for text before any."""
    first_line: int
    """1-based line number in the file of the part's first line."""
    last_line: int
    text: str
    command: str | None
    """The command line of the prompt just above it (``ibv_devinfo -v``), when the paste kept one."""

    @property
    def where(self) -> str:
        return f"lines {self.first_line}-{self.last_line}"


def _command(line: str) -> str | None:
    """The command of a shell prompt line (``[root@n1 ~]# ibstat``, ``$ sudo rdma link``, ``ibstat``), ``""`` for
    a bare prompt (``[root@n1 ~]#``), else None."""
    if not line or line[0].isspace() or len(line) > 400:
        return None
    tokens = line.split()
    if len(tokens) <= 3 and tokens[-1].endswith(("$", "#")) and any(c in line for c in "@]~"):
        return ""  # a prompt with no command after it (the end of a pasted session)
    for i, token in enumerate(tokens[:_MAX_PROMPT_TOKENS]):
        if token.rsplit("/", 1)[-1] not in _COMMANDS:
            continue
        before = tokens[i - 1] if i else ""
        if before == "sudo":
            before = tokens[i - 2] if i > 1 else ""
            if i == 1:
                return " ".join(tokens[i:])
        if i == 0 or before.endswith(_PROMPT_ENDS):
            return " ".join(tokens[i:])
        return None
    return None


def _start_of(line: str) -> str | None:
    for name, starts in _STARTS:
        if starts(line):
            return name
    return None


def split_pasted(text: str) -> list[PastedPart] | None:
    """The parts of a file holding several tool outputs (or one behind a prompt line); ``None`` when it is one
    output as it is (a single tool's text, JSON, or nothing this module knows)."""
    if text.lstrip()[:1] == "<" or looks_like_json(text):
        return None
    lines = text.splitlines()
    parts: list[PastedPart] = []
    current: list[str] = []
    fmt: str | None = None
    first = 1
    command: str | None = None
    pending: str | None = None
    cuts = 0

    def close(end: int) -> None:
        while current and not current[-1].strip():
            current.pop()
            end -= 1
        if any(line.strip() for line in current):
            parts.append(PastedPart(fmt, first, end, "\n".join(current) + "\n", command))

    for number, line in enumerate(lines, 1):
        prompt = _command(line)
        if prompt is not None or _FENCE.match(line):
            close(number - 1)
            current, fmt, first, command, cuts = [], None, number + 1, None, cuts + 1
            pending = prompt or pending
            continue
        start = _start_of(line)
        if start is not None and start != fmt:
            if fmt is not None:
                close(number - 1)
                current, first, cuts = [], number, cuts + 1
            elif not any(x.strip() for x in current):  # prose before the first block stays with it
                current, first = [], number
            fmt = start
            command, pending = pending, None
        elif not current and not line.strip():
            first = number + 1
            continue
        current.append(line)
    close(len(lines))
    formats = {p.fmt for p in parts if p.fmt is not None}
    if not formats or (len(formats) == 1 and cuts == 0):
        return None
    return parts
