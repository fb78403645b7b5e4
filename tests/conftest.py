"""Fixtures for the whole test suite.

``fake_tools``: fake nvidia-smi, ibstat, ibdev2netdev, all_reduce_perf, ... (see ``tests/fakes.py``) written
into a bin directory that is first on ``PATH`` for the test and its subprocesses.

Open MPI's ofi BTL is left out of every MPI job the tests start (``OMPI_MCA_btl=^ofi`` unless the environment
sets ``OMPI_MCA_btl``): this machine has no fabric for libfabric to find, and probing for one costs about 1 s
of every ``MPI_Init`` (1.26 s -> 0.25 s for a 2-rank mpirun here). The transports the tests measure (shared
memory, TCP) are the same either way; collscope itself never sets it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.fakes import FakeTools

SUITE_ENV = {"OMPI_MCA_btl": "^ofi"}
"""Set for the suite (module docstring) where the environment does not say otherwise."""
for _key, _value in SUITE_ENV.items():
    os.environ.setdefault(_key, _value)


def env_without_suite_defaults() -> dict[str, str]:
    """This environment less what :data:`SUITE_ENV` added: for a sweep whose configuration names a test
    checks exactly (an exported ``OMPI_MCA_*`` variable is a setting every record carries)."""
    return {k: v for k, v in os.environ.items() if SUITE_ENV.get(k) != v}


@pytest.fixture()
def fake_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeTools:
    """Fake tools in ``tmp_path/fake-bin``, first on ``PATH`` for this test and its subprocesses."""
    tools = FakeTools(tmp_path / "fake-bin")
    monkeypatch.setenv("PATH", f"{tools.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return tools
