"""Open MPI's ``coll tuned`` dynamic rules file (``OMPI_MCA_coll_tuned_dynamic_rules_filename``), read as data.

The classic format (``ompi/mca/coll/tuned/coll_tuned_dynamic_file.c``): an optional first line
``rule-file-version-N``, then whole numbers only, ``#`` starting a comment to the end of its line and every other
character skipped: the number of collectives; per collective its id (Open MPI's ``COLLTYPE``: allgather 0,
allreduce 2, alltoall 3, bcast 7, reduce 11, reduce_scatter 12), the number of communicator sizes; per size the
size and the number of message-size rules; per rule ``msg_size algorithm faninout segsize`` (version 2: an optional
fifth number on the same line, the maximum of requests). Numbers read as C's ``%li`` reads them (``0x1f`` hex,
``017`` octal). The first message rule of a size must be for 0 bytes.

Which rule applies (Open MPI 5.0's lookup): the last listed communicator size not above the communicator's (else
the first), then the last message rule whose size is not above the message's. Algorithm 0 means "no rule": Open
MPI then falls back to a forced algorithm, else its fixed decisions. Nothing in the file is executed; the JSON
rules of Open MPI 6 are not read here (a ParseError says so).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from collscope.errors import ParseError
from collscope.files import read_input_text
from collscope.vocab.ompi import OMPI_COLL_IDS

__all__ = ["OmpiRule", "OmpiRules", "parse_ompi_rules", "read_ompi_rules"]

_MAX_BYTES = 1 << 20
_TOKEN = re.compile(r"#[^\n]*|0[xX][0-9a-fA-F]+|\d+|\n")
_VERSION = re.compile(r"rule-file-version-(\d{1,9})")


@dataclass(frozen=True, slots=True, kw_only=True)
class OmpiRule:
    """One message-size rule of the file."""

    coll_id: int
    comm_size: int
    msg_bytes: int
    """The rule applies from this message size up to the next rule's."""
    algorithm: int
    """The ``coll_tuned_<coll>_algorithm`` id; 0: no rule (fixed decisions)."""
    faninout: int
    segsize: int
    line: int
    """The line of the file that holds the rule's message size."""

    def text(self) -> str:
        """The rule as the file writes it (``65536 4 0 0``)."""
        return f"{self.msg_bytes} {self.algorithm} {self.faninout} {self.segsize}"


@dataclass(frozen=True, slots=True)
class OmpiRules:
    """A rules file: its rules in file order."""

    source: str
    version: int
    rules: tuple[OmpiRule, ...]

    def rule_for(self, coll: str, comm_size: int, msg_bytes: int) -> OmpiRule | None:
        """The rule Open MPI applies to ``coll`` on ``comm_size`` ranks at ``msg_bytes`` (module doc); None when the
        file has no rule for that collective."""
        coll_id = OMPI_COLL_IDS.get(coll)
        mine = [r for r in self.rules if r.coll_id == coll_id]
        if not mine:
            return None
        sizes = list(dict.fromkeys(r.comm_size for r in mine))
        fitting = [s for s in sizes if s <= comm_size]
        chosen = fitting[-1] if fitting else sizes[0]
        found = None
        for rule in (r for r in mine if r.comm_size == chosen):
            if rule.msg_bytes <= msg_bytes:
                found = rule
        return found


def _numbers(text: str) -> list[tuple[int, int]]:
    """(value, line) of every number, as ``%li`` reads it, comments skipped."""
    out = []
    line = 1
    for m in _TOKEN.finditer(text):
        token = m.group()
        if token == "\n":
            line += 1
        elif token[0] != "#":
            base = 16 if token[:2] in ("0x", "0X") else 8 if len(token) > 1 and token[0] == "0" else 10
            digits = token[2:] if base == 16 else token
            try:
                out.append((int(digits, base), line))
            except ValueError:  # 08, 09: C reads "0" then "8"; never seen in a real file
                raise ParseError("", line, "a decimal, 0x hex or 0-prefixed octal number", found=token) from None
    return out


def parse_ompi_rules(text: str, source: str) -> OmpiRules:
    """The rules of a classic rules file (module doc); ParseError naming the line of what is missing or wrong."""
    if text.lstrip().startswith(("{", "[")):
        raise ParseError(source, 1, "a classic coll tuned rules file (numbers); Open MPI 6's JSON rules are not read",
                         found=text.lstrip()[:1])
    version = 1
    m = _VERSION.match(text)
    if m:
        version = int(m.group(1))
        text = " " * m.end() + text[m.end():]
    try:
        numbers = _numbers(text)
    except ParseError as exc:
        raise exc.with_source(source) from None
    pos = 0

    def take(what: str) -> tuple[int, int]:
        nonlocal pos
        if pos >= len(numbers):
            last = numbers[-1][1] if numbers else 1
            raise ParseError(source, last, what, found="the end of the file")
        pos += 1
        return numbers[pos - 1]

    rules: list[OmpiRule] = []
    ncoll, _ = take("the number of collectives")
    for _ in range(ncoll):
        coll_id, line = take("a collective id")
        if coll_id > 64:
            raise ParseError(source, line, "a collective id (0-16)", found=str(coll_id))
        ncomm, _ = take("the number of communicator sizes")
        for _ in range(ncomm):
            comm_size, _ = take("a communicator size")
            nmsg, _ = take("the number of message sizes")
            for k in range(nmsg):
                msg, line = take("a message size")
                alg, _ = take("an algorithm id")
                fan, _ = take("a fan in/out")
                seg, seg_line = take("a segment size")
                if version > 1 and pos < len(numbers) and numbers[pos][1] == seg_line:
                    pos += 1  # the optional maximum of requests
                if k == 0 and msg != 0:
                    raise ParseError(source, line, "the first message rule of a communicator size at 0 bytes",
                                     found=str(msg))
                rules.append(OmpiRule(coll_id=coll_id, comm_size=comm_size, msg_bytes=msg, algorithm=alg,
                                      faninout=fan, segsize=seg, line=line))
    return OmpiRules(source=source, version=version, rules=tuple(rules))


def read_ompi_rules(path: Path | str) -> OmpiRules:
    """:func:`parse_ompi_rules` of a file (a regular file of at most 1 MiB); ParseError / ConfigError naming it."""
    text = read_input_text(path, "an Open MPI coll tuned rules file", max_bytes=_MAX_BYTES,
                           why_capped=" (a rules file is a few lines)")
    return parse_ompi_rules(text, str(path))
