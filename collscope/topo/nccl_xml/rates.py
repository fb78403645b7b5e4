"""NCCL's bandwidth model for the links in its topology XML (``src/graph/topo.cc`` / ``topo.h``,
RCCL's xGMI included): GB/s per PCIe link, NVLink, xGMI link and inter-socket link."""

from __future__ import annotations

import re
from typing import Protocol

__all__ = ["pci_link_gbps", "nvlink_gbps_per_link", "xgmi_gbps_per_link", "inter_cpu_gbps", "CpuIdentity"]


class CpuIdentity(Protocol):
    """What NCCL's inter-socket rule reads of a ``<cpu>`` (``nccl_xml.records.XmlCpu`` is one)."""

    @property
    def arch(self) -> str | None:
        """``x86_64``, ``arm64``, ``ppc64``."""

    @property
    def vendor(self) -> str | None:
        """``GenuineIntel``, ``AuthenticAMD``, ..."""

    @property
    def familyid(self) -> int | None: ...

    @property
    def modelid(self) -> int | None: ...

_PCI_GEN_SPEED = {2.5: 15, 5.0: 30, 8.0: 60, 16.0: 120, 32.0: 240, 64.0: 480}
_GT_S = re.compile(r"\s*(\d+(?:\.\d+)?)\s*GT/s", re.IGNORECASE)


def pci_link_gbps(link_speed: str | None, link_width: int | None) -> float | None:
    """NCCL's bandwidth for a PCIe link, GB/s: ``width * speed / 80`` (Gen3 x16 12, Gen4 x16 24,
    Gen5 x16 48). ``None`` when the speed or width is missing, empty, zero or not a known generation
    (NCCL then falls back to x16 and 60, i.e. Gen3 x16 = 12 GB/s; the graph builder says so)."""
    if not link_speed or not link_width or link_width <= 0:
        return None
    m = _GT_S.match(link_speed)
    if m is None:
        return None
    speed = _PCI_GEN_SPEED.get(float(m.group(1)))
    return None if speed is None else link_width * speed / 80.0


def nvlink_gbps_per_link(sm: int) -> float:
    """GB/s per NVLink for a compute capability, as NCCL's ``ncclTopoNVLinkBw`` (src/graph/topo.h):
    SM60_NVLINK_BW 18, SM70 20, SM80 20, SM86 12, SM90 20.6, SM100 40.1; SM80's value below 60."""
    if sm >= 100:
        return 40.1
    if sm >= 90:
        return 20.6
    if sm == 86:
        return 12.0
    if sm >= 70:
        return 20.0
    if sm >= 60:
        return 18.0
    return 20.0


def xgmi_gbps_per_link(arch: str | None) -> float | None:
    """GB/s per xGMI link as RCCL's ``ncclTopoXGMISpeed`` (rccl src/graph/topo.h): gfx90a 36,
    gfx94x and gfx95x 48; ``None`` for other or unknown architectures."""
    if not arch:
        return None
    arch = arch.lower().split(":")[0]
    if arch == "gfx90a":
        return 36.0
    if arch.startswith(("gfx94", "gfx95")):
        return 48.0
    return None


def inter_cpu_gbps(cpu: CpuIdentity) -> tuple[float | None, str]:
    """NCCL's inter-socket bandwidth for a cpu (``ncclTopoGetInterCpuBw``, topo.cc/topo.h) and its name.

    POWER 32 (P9_BW), ARM 6, Intel by model (NCCL 2.30: ERP >= 0xCF 40, SRP >= 0x8F 22, SKL >= 0x55
    10, else BDW 6), AMD 16, Zhaoxin 6. ``(None, reason)`` when arch/vendor are missing or unknown.
    """
    arch = (cpu.arch or "").strip().lower()
    vendor = (cpu.vendor or "").strip()
    if arch == "ppc64":
        return 32.0, "P9_BW"
    if arch == "arm64":
        return 6.0, "ARM_BW"
    if arch != "x86_64":
        return None, f"unknown cpu arch {cpu.arch!r}"
    if vendor == "GenuineIntel":
        model = cpu.modelid if cpu.familyid == 6 and cpu.modelid is not None else -1
        if model >= 0xCF:
            return 40.0, "ERP_QPI_BW"
        if model >= 0x8F:
            return 22.0, "SRP_QPI_BW"
        if model >= 0x55:
            return 10.0, "SKL_QPI_BW"
        return 6.0, "BDW_QPI_BW"
    if vendor == "AuthenticAMD":
        return 16.0, "AMD_BW"
    if vendor in ("CentaurHauls", "Shanghai"):
        return 6.0, "ZPI_BW"
    return None, f"unknown cpu vendor {cpu.vendor!r}"
