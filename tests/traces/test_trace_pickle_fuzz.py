"""Seeded mutations of a Flight Recorder pickle through the trace reader (issue 23 item 4): read or refused by
name, never run."""

from __future__ import annotations

import os
import pickle
import random

from collscope.errors import ParseError
from collscope.traces.load import read_traces
from tests.traces.test_trace_formats import fr_pickle_doc

_HOSTILE_SNIPPETS = (b"cos\nsystem\n", b"\x8c\x02os\x8c\x06system\x93", b"(X\x04\x00\x00\x00trueios\nsystem\n",
                     b"cbuiltins\nexec\n", b"R", b"b", b"\x81", b"\x92", b"o", b"\x82\x01", b"Q", b"r\xff\xff\xff\xff")


def test_seeded_mutations_of_a_dump_are_read_or_refused_never_run(tmp_path):
    """300 mutated Flight Recorder pickles (bytes flipped, cut, hostile opcodes spliced in): each is read or is a
    ParseError naming the file; no other exception, and the canary a spliced os.system would touch never exists."""
    rng = random.Random(int(os.environ.get("COLLSCOPE_FUZZ_SEED", "23")))
    canary = tmp_path / "canary"
    cmd = f"touch {canary}".encode()
    arg = b"X" + len(cmd).to_bytes(4, "little") + cmd
    runs = (b"cos\nsystem\n(" + arg + b"tR",  # GLOBAL, MARK, the command, TUPLE, REDUCE
            b"\x8c\x02os\x8c\x06system\x93" + arg + b"\x85R",  # STACK_GLOBAL, the command, TUPLE1, REDUCE
            b"(" + arg + b"ios\nsystem\n")  # INST
    snippets = _HOSTILE_SNIPPETS + runs
    bases = [pickle.dumps(fr_pickle_doc(0), protocol=p) for p in (2, 4)]
    outcomes = {"read": 0, "refused": 0}
    for case in range(300):
        data = bytearray(rng.choice(bases))
        for _ in range(rng.randint(1, 4)):
            if len(data) < 4:
                break
            at = rng.randrange(2, len(data))
            action = rng.random()
            if action < 0.4:
                data[at] = rng.randrange(256)
            elif action < 0.8:
                data[at:at] = rng.choice(snippets)
            else:
                del data[at:]
        path = tmp_path / f"nccl_trace_rank_{case}"
        path.write_bytes(bytes(data))
        try:
            read_traces([path])
            outcomes["read"] += 1
        except ParseError as exc:
            assert str(path) in str(exc)
            outcomes["refused"] += 1
        path.unlink()
    assert not canary.exists()
    assert outcomes["refused"] > 100
