"""The pieces every self-contained HTML page of collscope shares (``report``, ``trace --report``, ``observe report``,
``canary report``): its CSS, a table, and figures saved as PNG and inlined as data URIs, so that a page opens
offline from a mail attachment or an artifact store."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["PAGE_STYLE", "save_png", "png_data_uri", "table_html"]

PAGE_STYLE = """
body { font-family: sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
img { max-width: 100%; display: block; margin: 1em 0; }
pre { background: #f4f4f4; padding: 1em; white-space: pre-wrap; overflow-wrap: anywhere; }
table.t { border-collapse: collapse; font-size: 12px; } table.t td, table.t th { padding: 2px 8px; }
table.t td { overflow-wrap: break-word; }
table.t tr:nth-child(even) { background: #f7f7f7; } .note { color: #555; font-size: 13px; }
"""
"""The pages' CSS: text wraps (long comment lines, long configuration names) rather than overflow behind a scroll
bar; figures shrink to the page's width."""


def save_png(fig: Any, path: Path) -> str:
    """Save the matplotlib figure ``fig`` as the PNG ``path`` and close it; the file's name."""
    fig.savefig(path, format="png")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path.name


def png_data_uri(path: Path) -> str:
    """The PNG at ``path`` as a ``data:`` URI (the page carries its figures)."""
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


def table_html(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A table of ``class='t'`` (:data:`PAGE_STYLE`), every cell escaped."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table class='t'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
