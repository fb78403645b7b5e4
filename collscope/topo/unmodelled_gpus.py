"""GPUs collscope knows by name and does not model (AMD Instinct), with their interconnect facts and the reason,
and the message every layer gives for a GPU name no table models.
"""

from __future__ import annotations

from dataclasses import dataclass

from collscope.topo.gpu_names import PLACEHOLDER, gpu_text, name_matches
from collscope.topo.gpus import GENERATIONS

__all__ = ["UNMODELLED", "UnmodelledGpu", "unknown_gpu_message", "unmodelled_gpu"]


@dataclass(frozen=True, slots=True)
class UnmodelledGpu:
    """A GPU collscope knows by name and does not model, with its interconnect facts and the reason."""

    name: str
    """Short name, e.g. ``"MI300X"`` (matched in ``"AMD Instinct MI300X"``)."""
    arch: str
    """The architecture RCCL's topology XML names (``<gpu arch=...>``)."""
    xgmi_links: int
    """xGMI (Infinity Fabric) links per GPU to its peers."""
    xgmi_link_gbps: float
    """Spec rate of one link, per direction, decimal GB/s."""
    rccl_xgmi_link_gbps: float
    """RCCL's model of one link (``ncclTopoXGMISpeed``), per direction."""
    why: str
    """Why no model: what a figure would have to guess."""


# AMD Instinct 8-GPU platforms (OAM, fully connected: each GPU has one xGMI link to each of its 7 peers).
# MI300X and MI325X: 7 links, 896 GB/s aggregate bidirectional peak = 7 x 128 GB/s = 64 GB/s per link per
# direction (AMD Instinct MI300X and MI325X data sheets, "AMD Infinity Fabric Links: 7", "Peak Infinity Fabric
# Link Bandwidth 128 GB/s"). MI355X: 7 links x 153.6 GB/s bidirectional = 76.8 per direction (AMD Instinct MI355X
# data sheet, 1075 GB/s aggregate). RCCL's model constant per link: 48 GB/s for gfx94x/gfx95x
# (:func:`collscope.topo.nccl_xml.rates.xgmi_gbps_per_link`, rccl src/graph/topo.h).
_RCCL_WHY = ("RCCL builds its rings over a fully connected xGMI mesh (no switch, no NVLS; a ring uses 1 of the "
             "7 links of each GPU, RCCL's direct all-to-all kernels use all 7) and chooses algorithms, channels and "
             "protocols from its own tuning tables, which differ from NCCL's tuning.cc that collscope models; a "
             "figure would be a guess. Model a ring yourself with --alpha-us and --bw-gbps")
# MI250X and MI250 (gfx90a): each package holds two GCDs that ROCm, RCCL and rccl-tests show as two GPUs. Infinity
# Fabric links between GPUs run at 25 GT/s x 16 lanes = 50 GB/s (ROCm docs, "AMD Instinct MI250 microarchitecture");
# the two GCDs of a package are joined by 200 GB/s (4 links), GCDs of different packages by 50-100 GB/s (1 or 2
# links) (OLCF Frontier User Guide, 4 x MI250X per node). RCCL's model constant for gfx90a: 36 GB/s per link.
_MI250_WHY = ("its GCDs are not a full mesh: the two GCDs of a package share 4 links, GCDs of different packages 1 or "
              "2 (50-100 GB/s), so RCCL's rings and their bandwidth depend on which GCDs a job holds, and RCCL "
              "chooses algorithms, channels and protocols from its own tuning tables, which differ from NCCL's "
              "tuning.cc that collscope models; a figure would be a guess. Model a ring yourself with --alpha-us "
              "and --bw-gbps")
UNMODELLED: tuple[UnmodelledGpu, ...] = (
    UnmodelledGpu("MI355X", "gfx950", 7, 76.8, 48.0, _RCCL_WHY),
    UnmodelledGpu("MI350X", "gfx950", 7, 76.8, 48.0, _RCCL_WHY),
    UnmodelledGpu("MI325X", "gfx942", 7, 64.0, 48.0, _RCCL_WHY),
    UnmodelledGpu("MI300X", "gfx942", 7, 64.0, 48.0, _RCCL_WHY),
    UnmodelledGpu("MI250X", "gfx90a", 4, 50.0, 36.0, _MI250_WHY),
    UnmodelledGpu("MI250", "gfx90a", 4, 50.0, 36.0, _MI250_WHY),
)




def unmodelled_gpu(model: str | None) -> UnmodelledGpu | None:
    """The :class:`UnmodelledGpu` row a GPU string names (``"AMD Instinct MI300X"``), ``None`` when none does."""
    if not model:
        return None
    text = gpu_text(model)
    return next((row for row in UNMODELLED if name_matches(row.name, text)), None)


def unknown_gpu_message(model: str) -> str:
    """Why ``model`` gives no GPU generation: known and not modelled (with the reason), or unknown (with the list
    of known names)."""
    row = unmodelled_gpu(model)
    if row is not None:
        return (f"GPU {model!r} is {row.name} ({row.arch}, {row.xgmi_links} xGMI links x {row.xgmi_link_gbps:g} GB/s "
                f"per direction; RCCL's model {row.rccl_xgmi_link_gbps:g} per link), known but not modelled: "
                f"{row.why}")
    known = [g.name for g in GENERATIONS] + [f"{r.name} (not modelled)" for r in UNMODELLED]
    if PLACEHOLDER.fullmatch(model.strip()):
        return (f"GPU {model!r} is the placeholder a driver prints for a GPU it has no product name for (GB200 "
                "trays printed it in published NVL72 runs, coreweave/nccl-tests pull request 43): the name does not "
                f"say which GPU it is; pass --gpu NAME, one of: {', '.join(known)}")
    return f"unknown GPU {model!r}; known: {', '.join(known)}"

