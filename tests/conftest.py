"""Fixtures for the whole test suite.

``fake_tools``: fake nvidia-smi, ibstat, ibdev2netdev, all_reduce_perf, ... (see ``tests/fakes.py``) written
into a bin directory that is first on ``PATH`` for the test and its subprocesses.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.fakes import FakeTools


@pytest.fixture()
def fake_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeTools:
    """Fake tools in ``tmp_path/fake-bin``, first on ``PATH`` for this test and its subprocesses."""
    tools = FakeTools(tmp_path / "fake-bin")
    monkeypatch.setenv("PATH", f"{tools.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return tools
