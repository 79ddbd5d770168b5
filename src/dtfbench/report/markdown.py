"""Text from the store written into the report's Markdown, shown as text and nothing else.

Host names, failure reasons, a node's environment and the workload's error text come from
places the report does not control (an inventory, a program's stderr, a node's answers). A
CommonMark renderer (GitHub, markdown-it) would turn ``<script>`` into live HTML, ``[x](url)``
into a link and ``![x](url)`` into an image fetched when the page is shown. Every such value
goes through :func:`text` (prose), :func:`cell` (a table cell) or :func:`code` (a code span);
the report's own Markdown (headings, links to its files, our numbers) does not.
"""

from __future__ import annotations

import re
from typing import Any

# HTML first (entities render as the characters), then what CommonMark reads as syntax: a
# backslash (so that no escape of ours can be undone), a backtick (a code span), and the
# bracket that closes a link, an image or a reference ("](", "][", "]:"). A lone '[' or ']'
# (our confidence intervals, "[dtfbench worker 0]") stays as it is.
_HTML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_SYNTAX = re.compile(r"\\|`|\](?=[(\[:])")
_SPACE = re.compile(r"\s+")


def text(value: Any) -> str:
    """`value` on one line, escaped for Markdown prose."""
    flat = _SPACE.sub(" ", str(value)).strip()
    return _SYNTAX.sub(lambda m: "\\" + m.group(0), flat.translate(_HTML))


def cell(value: Any) -> str:
    """`value` escaped for a cell of a Markdown table ('|' too)."""
    return text(value).replace("|", "\\|")


def code(value: Any) -> str:
    """`value` as a code span: fenced by more backticks than it holds in a row, so that it
    cannot end the span (inside one, HTML and links are text already)."""
    flat = _SPACE.sub(" ", str(value)).strip()
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"
