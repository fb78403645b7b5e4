"""Live capture: run the node's tools (through proc.run) and keep their raw outputs.

Build argv, run, parse stay separate: :data:`TOOLS` is the argv table, :func:`capture_raw` runs it
and :func:`captures_from_raw` parses what came back (through the same detection as ``--from``).
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collscope import proc
from collscope._version import __version__
from collscope.atomic import write_text_atomic
from collscope.errors import CollscopeError, ParseError, ToolMissingError
from collscope.files import check_output_dir
from collscope.topo.detect import add_capture
from collscope.topo.meta import META_FILE, CaptureMeta
from collscope.topo.node import NodeCaptures

__all__ = ["TOOLS", "CaptureTool", "CaptureMeta", "capture_raw", "captures_from_raw", "collect_to_dir",
           "NoGpuToolsError"]


class NoGpuToolsError(CollscopeError):
    """This machine has no nvidia-smi, so there is nothing to capture live."""


@dataclass(frozen=True)
class CaptureTool:
    filename: str
    argv: tuple[str, ...]
    hint: str


_NVSMI_HINT = "install the NVIDIA driver utilities (nvidia-smi), or pass --from with captured files"
_IB_HINT = "install infiniband-diags / rdma-core (ibstat, ibv_devinfo) or MLNX_OFED (ibdev2netdev)"
_IP_HINT = "install iproute2 (ip)"
TOOLS: tuple[CaptureTool, ...] = (
    CaptureTool("nvidia-smi-topo.txt", ("nvidia-smi", "topo", "-m"), _NVSMI_HINT),
    CaptureTool("nvidia-smi-query-gpu.csv",
                ("nvidia-smi", "--query-gpu=index,name,pci.bus_id,pcie.link.gen.max,pcie.link.width.max",
                 "--format=csv"), _NVSMI_HINT),
    CaptureTool("nvidia-smi-nvlink.txt", ("nvidia-smi", "nvlink", "-s"), _NVSMI_HINT),
    # Each GPU's NVLink fabric registration (its Fabric block; collscope.topo.nvidia_smi.fabric).
    CaptureTool("nvidia-smi-q.txt", ("nvidia-smi", "-q"), _NVSMI_HINT),
    CaptureTool("ibstat.txt", ("ibstat",), _IB_HINT),
    CaptureTool("ibdev2netdev.txt", ("ibdev2netdev", "-v"), _IB_HINT),
    # Network interfaces (the rails of a CPU cluster): see collscope.topo.netif.
    CaptureTool("ip-addr.json", ("ip", "-j", "addr"), _IP_HINT),
    CaptureTool("ip-link.json", ("ip", "-j", "-s", "link"), _IP_HINT),
)


def capture_raw(timeout_s: float = 60.0) -> tuple[dict[str, str], dict[str, Any]]:
    """Run every tool that exists; returns ``{filename: stdout}`` and a meta dict (host, tools, errors)."""
    outputs: dict[str, str] = {}
    tools: dict[str, Any] = {}
    errors: list[str] = []
    for tool in TOOLS:
        entry: dict[str, Any] = {"argv": list(tool.argv)}
        try:
            result = proc.run(list(tool.argv), timeout_s=timeout_s, install_hint=tool.hint)
        except ToolMissingError as exc:
            entry["missing"] = True
            errors.append(str(exc))
            tools[tool.filename] = entry
            continue
        entry.update(returncode=result.returncode, timed_out=result.timed_out,
                     duration_s=round(result.duration_s, 3))
        if result.stdout.strip():
            outputs[tool.filename] = result.stdout
        if not result.ok:
            tail = (result.stderr.strip().splitlines() or ["(no stderr)"])[-1]
            what = "timed out" if result.timed_out else f"exited {result.returncode}"
            errors.append(f"{' '.join(tool.argv)} {what}: {tail}")
        tools[tool.filename] = entry
    _add_netif_speeds(outputs)
    meta = {
        "host": socket.gethostname(),
        "collscope_version": __version__,
        "captured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "tools": tools,
        "errors": errors,
        "env": {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "CUDA_VISIBLE", "SLURM_JOB_ID",
                                                                    "SLURM_NODEID", "SLURMD_NODENAME"))},
    }
    return outputs, meta


def _add_netif_speeds(outputs: dict[str, str]) -> None:
    """``netif-speeds.json``: the interfaces' speeds from /sys, when that /sys is this namespace's."""
    from collscope.topo import netif

    try:
        names = [n.name for n in netif.parse_ip_addr_json(outputs["ip-addr.json"])]
    except (KeyError, ParseError):
        return
    speeds = netif.read_speeds(names)
    if speeds:
        outputs["netif-speeds.json"] = json.dumps({netif.SPEEDS_KEY: speeds}, sort_keys=True) + "\n"


def captures_from_raw(outputs: dict[str, str], meta: dict[str, Any]) -> NodeCaptures:
    captures = NodeCaptures(host=str(meta.get("host") or "localhost"))
    captures.errors.extend(meta.get("errors", []))
    for filename, text in outputs.items():
        try:
            add_capture(captures, text, filename)
        except ParseError as exc:
            captures.errors.append(str(exc))
    return captures


def capture_live(timeout_s: float = 60.0) -> NodeCaptures:
    """This node, from its tools. Raises :class:`NoGpuToolsError` when nvidia-smi is missing."""
    if proc.which("nvidia-smi") is None:
        raise NoGpuToolsError(f"nvidia-smi not found on this machine ({socket.gethostname()}); "
                              "use --from FILE|DIR with captured outputs, or --sample NAME")
    outputs, meta = capture_raw(timeout_s)
    return captures_from_raw(outputs, meta)


def collect_to_dir(out_dir: Path, timeout_s: float = 60.0) -> CaptureMeta:
    """Save this node's raw captures and meta.json into ``out_dir``; returns what meta.json holds.

    ``out_dir`` is created and checked for writing before any tool runs (ConfigError naming it).
    """
    check_output_dir(out_dir, "capture directory")
    outputs, meta = capture_raw(timeout_s)
    for filename, text in outputs.items():
        write_text_atomic(out_dir / filename, text)
    saved = CaptureMeta(host=meta["host"], collscope_version=meta["collscope_version"],
                        captured_at=meta["captured_at"], tools=meta["tools"], errors=tuple(meta["errors"]),
                        env=meta["env"], files=tuple(sorted(outputs)))
    write_text_atomic(out_dir / META_FILE, json.dumps(saved.to_dict(), indent=2, sort_keys=True) + "\n")
    return saved
