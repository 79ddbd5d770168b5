"""Names, reasons and a node's answers reach the report's Markdown as text: rendered by a real
CommonMark renderer (markdown-it-py), they make no HTML, no link and no image of their own."""

import re

import pytest
from markdown_it import MarkdownIt
from store_harness import study_row

from dtfbench.report import analysis, build, markdown
from dtfbench.results import store

HOSTILE = (
    "<script>alert(1)</script> <img src=x onerror=alert(2)> [click](javascript:alert(3)) "
    "![pixel](http://203.0.113.9/p.png) `tick` a|b back\\slash & <http://203.0.113.9/>\nsecond line"
)
SYSTEM = "lab<b>x</b>`s"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    db = tmp_path_factory.mktemp("store") / "results.sqlite"
    conn = store.connect(db)
    for rep, ips in ((1, 100.0), (2, 102.0)):
        store.add_run(conn, study_row(f"s-{rep}", "s", SYSTEM, 1, 1, "parameter_server", "synthetic", rep, ips))
    environment = {"h<script>": {"host": "h<script>alert(4)</script>", "cpu": {"model": "[x](javascript:alert(5))"}}}
    store.add_run(
        conn,
        study_row("s-3", "s", SYSTEM, 2, 1, "parameter_server", "synthetic", 1, None, reason=HOSTILE,
                  environment=environment, hosts=["h<script>alert(4)</script>"]),
    )  # fmt: skip
    conn.close()
    out = tmp_path_factory.mktemp("report") / "report"
    build.build(analysis.load_rows(db), out, formats=(), db=str(db))
    return out


def test_nothing_from_the_store_becomes_html_a_link_or_an_image(report):
    renderer = MarkdownIt("commonmark")  # raw HTML on, as GitHub and most viewers have it
    pages = sorted(report.glob("*.md"))
    assert {p.name for p in pages} >= {"index.md", "failures.md", "configurations.md", "environments.md"}
    for page in pages:
        html = renderer.render(page.read_text())
        tags = set(re.findall(r"<([a-z][a-z0-9]*)", html))
        assert not tags & {"script", "img", "b"}, (page.name, tags)
        # Links only to the report's own files.
        for href in re.findall(r'<a href="([^"]*)"', html):
            assert re.fullmatch(r"[\w.-]+\.(md|csv|json)", href), (page.name, href)
    failures = renderer.render((report / "failures.md").read_text())
    # The reason is there, whole, as text: on one line, every character shown.
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &lt;img src=x onerror=alert(2)&gt;" in failures
    assert "[click](javascript:alert(3)) ![pixel](http://203.0.113.9/p.png) `tick` a|b back\\slash &amp;" in failures
    assert "second line" in failures
    index = renderer.render((report / "index.md").read_text())
    assert "lab&lt;b&gt;x&lt;/b&gt;`s" in index


def test_the_escapes_are_undone_by_a_renderer_and_only_where_needed():
    renderer = MarkdownIt("commonmark")
    for value in (HOSTILE, SYSTEM, "]([", "\\](x)", "a ``b`` c"):
        shown = renderer.renderInline(markdown.text(value))
        assert "<" not in shown.replace("&lt;", "")
        # code spans keep their text whole, whatever backticks it holds
        code = renderer.renderInline(markdown.code(value))
        assert code.startswith("<code>") and code.endswith("</code>")
    # Our own brackets (confidence intervals, '[dtfbench worker 0]') stay as they are.
    assert markdown.text("[0.95, 1.05]") == "[0.95, 1.05]"
    assert markdown.text("[dtfbench worker 0] peer died") == "[dtfbench worker 0] peer died"
    assert markdown.cell("a|b") == "a\\|b"
