"""What sweep.json records about the machine: versions, hosts, a topology hash, the inherited-environment audit."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from collscope import proc
from collscope._version import __version__
from collscope.errors import CollscopeError
from collscope.sweeps.termination import SweepTerminated

__all__ = ["SweepMeta", "sweep_meta", "topology_hash"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepMeta:
    """What ``sweep.json`` records about the machine a sweep ran on."""

    versions: dict[str, str | None] = field(default_factory=dict)
    """collscope, python, mpi4py, torch (and mpirun's first ``--version`` line for the mpi engine); None: absent."""
    hosts: tuple[str, ...] = ()
    """This host, or the hosts of the Slurm allocation (``SLURM_JOB_NODELIST`` expanded)."""
    slurm_job_id: str | None = None
    topology_hash: str | None = None
    """See :func:`topology_hash`; None without GPU tools or captures."""
    inherited_env: dict[str, Any] | None = None
    """The inherited-environment audit (:meth:`collscope.sweeps.inherited_env.EnvAudit.to_dict`): what the user's
    environment and NCCL's conf files held that could shape the timed runs, and what the sweep did with it."""

    def to_dict(self) -> dict[str, Any]:
        """The keys merged into ``sweep.json``: ``{"versions", "hosts", "slurm_job_id", "topology_hash"}``, and
        ``inherited_env`` when the audit was made."""
        doc = {"versions": dict(self.versions), "hosts": list(self.hosts), "slurm_job_id": self.slurm_job_id,
               "topology_hash": self.topology_hash}
        if self.inherited_env is not None:
            doc["inherited_env"] = self.inherited_env
        return doc


def _package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _first_line(argv: list[str]) -> str | None:
    if proc.which(argv[0]) is None:
        return None
    try:
        result = proc.run(argv, timeout_s=30)
    except SweepTerminated:  # SIGTERM at startup stops the sweep (exit 143); it is no missing version
        raise
    except CollscopeError:
        return None
    text = (result.stdout or result.stderr).strip()
    return text.splitlines()[0] if text else None


def topology_hash(topo_paths: list[str] | None) -> str | None:
    """sha256 of the node model built from the captures (or of this node's live capture), else None."""
    from collscope.topo.capture import NoGpuToolsError, capture_live
    from collscope.topo.load import load_one_node
    from collscope.topo.node import build_node
    from collscope.topo.render import node_to_json

    try:
        node = load_one_node(topo_paths) if topo_paths else build_node(capture_live())
    except NoGpuToolsError:
        return None
    doc = node_to_json(node)
    for volatile in ("graph", "sources", "host", "sample"):
        doc.pop(volatile, None)
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


def sweep_meta(*, engine: str, topo_paths: list[str] | None = None,
               inherited_env: dict[str, Any] | None = None) -> SweepMeta:
    """Versions, hosts, Slurm job and topology hash of this run of the sweep, and ``inherited_env`` (the audit's
    ``to_dict()``) as given (``to_dict()`` for sweep.json)."""
    from collscope.collectives.ranks import expand_nodelist

    hosts = [socket.gethostname()]
    nodelist = os.environ.get("SLURM_JOB_NODELIST")
    if nodelist:
        try:
            hosts = expand_nodelist(nodelist)
        except ValueError:
            hosts = [nodelist]
    versions: dict[str, str | None] = {
        "collscope": __version__,
        "python": platform.python_version(),
        "mpi4py": _package_version("mpi4py"),
        "torch": _package_version("torch"),
    }
    if engine == "mpi":
        versions["mpirun"] = _first_line(["mpirun", "--version"])
    return SweepMeta(versions=versions, hosts=tuple(hosts), slurm_job_id=os.environ.get("SLURM_JOB_ID"),
                     topology_hash=topology_hash(topo_paths), inherited_env=inherited_env)
