"""Sample captures bundled with collscope, written by its authors in the real tools' formats.

They stand in for a real node on machines without GPUs (the README's first command, the demo,
notebooks); everything built from them is labelled as a sample.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from collscope.errors import ConfigError

__all__ = ["DEFAULT_SAMPLE", "sample_names", "sample_path"]

DEFAULT_SAMPLE = "hgx-h100-8gpu"


def _root() -> Path:
    return Path(str(resources.files("collscope") / "data" / "samples"))


def sample_names() -> list[str]:
    return sorted(p.name for p in _root().iterdir() if p.is_dir())


def sample_path(name: str = DEFAULT_SAMPLE) -> Path:
    path = _root() / name
    if not path.is_dir():
        raise ConfigError(f"unknown sample {name!r}; bundled samples: {', '.join(sample_names())}")
    return path
