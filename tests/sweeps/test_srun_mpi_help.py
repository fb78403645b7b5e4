"""`sweep run --help` says which engines get `srun --mpi=pmix` by default, as the engine table decides it (issue 26
item 6: the help said only the mpi engine did, while nccl-tests gets it too)."""

from __future__ import annotations

import re

from click.testing import CliRunner

from collscope.cli import main
from collscope.vocab.engines import ENGINE_ROWS


def test_the_help_names_every_engine_started_with_pmix() -> None:
    pmix = sorted({row.engine for row in ENGINE_ROWS if row.srun_mpi == "pmix"})
    none = sorted({row.engine for row in ENGINE_ROWS if row.srun_mpi is None})
    assert pmix == ["mpi", "nccl-tests"] and none == ["torch"]
    text = " ".join(CliRunner().invoke(main, ["sweep", "run", "--help"], terminal_width=200).output.split())
    option = re.search(r"--srun-mpi \[pmix\|pmi2\|none\] (.*?) --gpus-per-node", text)
    assert option, text
    assert "pmix for the mpi and nccl-tests engines" in option.group(1), option.group(1)
    assert "none for torch" in option.group(1), option.group(1)
