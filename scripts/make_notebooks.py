"""Write notebooks/*.ipynb from the cell sources below (the notebooks are generated, then executed in CI).

The cells import only the public API (``collscope``, ``collscope.topo``, ``collscope.analysis`` and its
sub-packages), never a module deep inside them.

    python scripts/make_notebooks.py
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parents[1]

TOPOLOGY = [
    new_markdown_cell(
        "# Topology\n\nA node's topology from captures (`nvidia-smi topo -m`, `nvidia-smi` queries, `ibstat`, "
        "`ibdev2netdev`, NCCL XML). Set `CAPTURES` to your own capture directory or files; by default it uses the "
        "sample bundled with collscope (an 8x H100 node written in the real tools' formats, **not** a real "
        "machine)."),
    new_code_cell(
        "%matplotlib inline\n"
        "from pathlib import Path\n\n"
        "import collscope\n"
        "from collscope.topo import draw_png, node_summary_text\n\n"
        "CAPTURES = [collscope.sample_path()]  # e.g. [Path('topo/node01')]\n"
        "node = collscope.build_node(collscope.load_captures(CAPTURES), sample='hgx-h100-8gpu')\n"
        "print(node_summary_text(node))"),
    new_markdown_cell("## Drawing\n\nNUMA nodes, host bridges and PCIe switches (inferred from the path classes), "
                      "GPUs and NICs, NVLink/NVSwitch."),
    new_code_cell(
        "import tempfile\n\n"
        "from IPython.display import Image\n\n"
        "png = Path(tempfile.mkdtemp()) / 'topology.png'\n"
        "draw_png(node, png)\n"
        "Image(str(png))"),
    new_markdown_cell("## GPU-to-GPU bandwidth (GB/s per direction)"),
    new_code_cell(
        "import matplotlib.pyplot as plt\n"
        "from IPython.display import display\n\n"
        "matrix = node.bandwidth_matrix()\n"
        "fig, ax = plt.subplots(figsize=(5, 4))\n"
        "im = ax.imshow(matrix.to_numpy(), cmap='viridis')\n"
        "ax.set_xticks(range(len(matrix)), matrix.columns, rotation=90)\n"
        "ax.set_yticks(range(len(matrix)), matrix.index)\n"
        "fig.colorbar(im, label='GB/s per direction')\n"
        "display(fig)\n"
        "plt.close(fig)\n"
        "matrix.round(1)"),
    new_markdown_cell("## Nearest NICs and warnings"),
    new_code_cell(
        "for gpu in node.gpus:\n"
        "    print(gpu, *node.nearest_nics(gpu))\n"
        "node.warnings()"),
    new_markdown_cell("## A cluster and its rails\n\nThree copies of the node stand in for three captured "
                      "nodes (`collscope topo cluster DIR` reads one capture directory per host)."),
    new_code_cell(
        "import json\n"
        "import shutil\n"
        "import tempfile\n\n"
        "root = Path(tempfile.mkdtemp())\n"
        "for host in ('node01', 'node02', 'node03'):\n"
        "    shutil.copytree(collscope.sample_path(), root / host)\n"
        "    meta = json.loads((root / host / 'meta.json').read_text())\n"
        "    meta['host'] = host\n"
        "    (root / host / 'meta.json').write_text(json.dumps(meta))\n"
        "cluster = collscope.load_cluster(root)\n"
        "print(cluster.rail_source)\n"
        "for rail in cluster.rails[:8]:\n"
        "    print(rail.index, rail.members)"),
]

SWEEP = [
    new_markdown_cell(
        "# Sweep analysis\n\nA results directory (`collscope sweep run ... --out DIR`) into a DataFrame, curves, "
        "fits, anomalies and a recommendation. `RESULTS` defaults to the example shipped in the repo: Open MPI's "
        "allreduce/allgather algorithms on 2 CPU ranks (the CPU twin of an NCCL algorithm sweep)."),
    new_code_cell(
        "%matplotlib inline\n"
        "from pathlib import Path\n\n"
        "from collscope.analysis import aggregate, fit_alpha_beta, load_results\n\n"
        "RESULTS = [Path('../examples/results/mpi-algos-2rank')]\n"
        "df = load_results(RESULTS)\n"
        "print(len(df), 'records;', df['config'].nunique(), 'configurations')\n"
        "df[['op', 'config', 'size_bytes', 'repeat', 'time_us', 'busbw_gbps']].head()"),
    new_markdown_cell("## Bus bandwidth by size (median over repeats, min-max band)"),
    new_code_cell(
        "from IPython.display import display\n\n"
        "from collscope.analysis import busbw_vs_size, gain_heatmap\n\n"
        "agg = aggregate(df)\n"
        "for op in sorted(agg['op'].unique()):\n"
        "    display(busbw_vs_size(agg, op))\n"
        "    display(gain_heatmap(agg, op))"),
    new_markdown_cell("## Fitted time = alpha + size / bandwidth per configuration"),
    new_code_cell(
        "fits = fit_alpha_beta(agg)\n"
        "fits[['op', 'config', 'alpha_us', 'bw_gbps', 'busbw_gbps', 'n_half_bytes', 'r2']].round(3)"),
    new_markdown_cell("## Anomalies and crossovers"),
    new_code_cell(
        "import pandas as pd\n\n"
        "from collscope.analysis import analyze\n\n"
        "analysis = analyze(df)\n"
        "pd.DataFrame([a.to_dict() for a in analysis.anomalies]).head(20)"),
    new_markdown_cell("## Recommendation\n\nOnly where a configuration beats the measured default by more than "
                      "the minimum gain and more than the spread of the repeats."),
    new_code_cell(
        "from collscope.analysis.recommend import recommend, render_env\n\n"
        "print(render_env(recommend(df)))"),
]


def render() -> dict[str, str]:
    """File name -> notebook JSON text. Cell ids are derived from the position, so the output is stable."""
    out = {}
    for name, cells in (("topology.ipynb", TOPOLOGY), ("sweep-analysis.ipynb", SWEEP)):
        nb = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                "language": "python"}})
        for i, cell in enumerate(nb.cells):
            cell["id"] = f"{name.removesuffix('.ipynb')}-{i}"
        out[name] = nbformat.writes(nb) + "\n"
    return out


def main() -> None:
    out = ROOT / "notebooks"
    out.mkdir(exist_ok=True)
    for name, text in render().items():
        (out / name).write_text(text)
        print(f"wrote {out / name}")


if __name__ == "__main__":
    main()
