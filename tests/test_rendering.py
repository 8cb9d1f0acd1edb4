"""
The built documentation as a reader sees it: each page of ``docs/_build/html`` rendered by headless Chromium at
1400 and 1024 pixels. No table row has more cells than its header, no word of a table cell is split across two
lines (each word's range measured in the DOM), no figure is shrunk past legibility, no code block runs off its box,
and a screenshot of each page is kept under ``docs/_build/screenshots/`` (CI's artifacts). The markdown sources'
tables are checked too, as GitHub renders them.

Needs Debian's ``chromium`` (``.ci/run`` installs it) and the built site (``.ci/run`` builds it before pytest:
``sphinx-build -W --keep-going -b html docs docs/_build/html``); without either the browser tests skip, saying which.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from helpers import ROOT, _outside_fences

HTML = ROOT / "docs" / "_build" / "html"
SCREENSHOTS = ROOT / "docs" / "_build" / "screenshots"
CHROMIUM = next((path for name in ("chromium", "chromium-browser") if (path := shutil.which(name))), None)
#: Pages rendered: the front page, the guide, the changelog (the API reference is autodoc's own layout)
PAGES = sorted([HTML / "index.html", *HTML.glob("guide/*.html"), *HTML.glob("misc/*.html")]) if HTML.is_dir() else []
WIDTHS = (1400, 1024)
#: A figure drawn this many times wider than it is shown has labels too small to read; per window width
MAX_SHRINK = {1400: 1.6, 1024: 2.0}
MARKER = "render-check"
# runs once the page and its images have loaded; the result lands in the DOM that --dump-dom prints
PROBE = """
<script>
window.addEventListener("load", () => setTimeout(() => {
  const cells = (row) => [...row.children].reduce((n, cell) => n + (cell.colSpan || 1), 0);
  const tables = [...document.querySelectorAll("table.docutils")].map((table) => {
    const head = table.querySelector("thead tr");
    return {
      header: head ? cells(head) : null,
      rows: [...table.querySelectorAll("tbody tr")].map(cells),
      text: (head ? head.innerText : table.innerText).slice(0, 80),
    };
  });
  const images = [...document.querySelectorAll(".rst-content img")].map((img) => ({
    src: img.getAttribute("src"), natural: img.naturalWidth, shown: img.clientWidth,
    box: img.parentElement.clientWidth,
  }));
  // a word of a table cell laid out on two lines: the rectangles of its range on two lines. A word is a run of
  // letters and digits; a number with its sign (one that starts a word, before a digit) and its separators (0.56,
  // -212.0, 753,664) and a version (v2.3.1) are one word each. The word's text may span several text nodes (a <wbr>
  // between them), so it is read from the cell's text
  const split = [];
  const WORD = /(?<![\\p{L}\\p{N}])(?:[-+\u2212](?=\\p{N}))?[\\p{L}\\p{N}]+(?:[.,]\\p{N}+)*/gu;
  for (const cell of document.querySelectorAll("table.docutils td, table.docutils th")) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    const nodes = [];
    let text = "";
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      nodes.push({node, start: text.length});
      text += node.data;
    }
    const at = (offset) => {
      const found = nodes.filter((n) => n.start <= offset).pop();
      return [found.node, offset - found.start];
    };
    for (const word of text.matchAll(WORD)) {
      const range = document.createRange();
      range.setStart(...at(word.index));
      const [last, offset] = at(word.index + word[0].length - 1);  // (the node holding the word's last character)
      range.setEnd(last, offset + 1);
      const lines = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
      if (lines.size > 1) split.push({word: word[0], cell: cell.innerText.slice(0, 60)});
    }
  }
  const code = [...document.querySelectorAll(".rst-content pre")].map((pre) => ({
    scroll: pre.scrollWidth, shown: pre.clientWidth, text: pre.innerText.split("\\n")[0].slice(0, 80),
    overflow: getComputedStyle(pre).overflowX, wraps: getComputedStyle(pre).whiteSpace !== "pre",
  }));
  const out = document.createElement("pre");
  out.id = "MARKER";
  out.style.display = "none";
  out.textContent = JSON.stringify({tables, images, code, split, page: document.documentElement.scrollWidth,
                                    window: window.innerWidth});
  document.body.appendChild(out);
}, 0));
</script>
""".replace("MARKER", MARKER)


def needs_browser() -> None:
    if CHROMIUM is None:
        pytest.skip("no chromium on PATH (apt-get install -y chromium; .ci/run installs it)")
    if not (HTML / "index.html").is_file():
        pytest.skip("no built docs: sphinx-build -W --keep-going -b html docs docs/_build/html")


def chromium(*args: str) -> str:
    """Run headless Chromium in a profile of its own (xdist's workers run several at once); return what it printed."""
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--allow-file-access-from-files"]
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run([*command, f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=120)
    return done.stdout


def measure(page: Path, width: int, shot: Path | None = None) -> dict:
    """
    The page's tables, images and code blocks as laid out at ``width`` pixels (a probing copy beside the page, its
    findings in a hidden element), and its screenshot into ``shot`` in the same run of the browser.
    """
    probe = page.with_name(f".{page.stem}.{width}.probe.html")  # one per page and width: xdist runs them at once
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    screenshot = [] if shot is None else [f"--screenshot={shot}"]
    try:
        dom = chromium(f"--window-size={width},2400", "--virtual-time-budget=10000", *screenshot, "--dump-dom", probe.as_uri())
    finally:
        probe.unlink()
    found = re.search(rf'<pre id="{MARKER}"[^>]*>(.*?)</pre>', dom, re.DOTALL)
    assert found, f"{page.name}: the probe did not run"
    return json.loads(found[1].replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))


def page_id(page: Path) -> str:
    return page.relative_to(HTML).as_posix()


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("page", PAGES, ids=[page_id(p) for p in PAGES])
def test_page_renders_legibly(page: Path, width: int) -> None:
    needs_browser()
    shot = SCREENSHOTS / f"{page_id(page).replace('/', '_').removesuffix('.html')}_{width}.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    found = measure(page, width, shot)
    assert shot.is_file() and shot.stat().st_size > 0, "no screenshot"
    for table in found["tables"]:
        if table["header"] is not None:
            assert max(table["rows"], default=0) <= table["header"], f"a row wider than its header: {table['text']}"
    for image in found["images"]:
        assert image["natural"] > 0, f"{image['src']} did not load"
        assert image["shown"] <= image["box"] + 1, f"{image['src']} overflows its column"
        shrink = image["natural"] / image["shown"]
        assert shrink <= MAX_SHRINK[width], f"{image['src']}: {image['natural']} px drawn in {image['shown']} ({shrink:.1f}x)"
    assert found["page"] <= found["window"] + 1, "the page scrolls sideways"
    assert found["split"] == [], f"words split across lines in table cells: {found['split'][:5]}"
    for code in found["code"]:
        # a code line is never wrapped (its continuation would start at column 0): a wider one scrolls in its box
        assert not code["wraps"], f"a code block wraps its lines: {code['text']}"
        fits = code["scroll"] <= code["shown"] + 1
        assert fits or code["overflow"] in ("auto", "scroll"), f"code runs off its box: {code['text']}"


def test_the_probe_catches_a_split_row_and_a_huge_figure(tmp_path: Path) -> None:
    """Negative control: a row with a cell too many and a figure drawn 3x wider than shown are both found."""
    needs_browser()
    page = tmp_path / "bad.html"
    png = ROOT / "benchmarks" / "results" / "single" / "speed.png"
    assert png.is_file(), png
    page.write_text(
        '<html><body><div class="rst-content" style="width:400px">'
        '<table class="docutils"><thead><tr><th>a</th><th>b</th></tr></thead>'
        "<tbody><tr><td>1</td><td>2</td><td>3</td></tr></tbody></table>"
        f'<p><img src="{png.as_uri()}" style="width:100px"></p></div></body></html>'
    )
    found = measure(page, 1400)
    assert found["tables"][0]["rows"] == [3] and found["tables"][0]["header"] == 2
    image = found["images"][0]
    assert image["natural"] / image["shown"] > MAX_SHRINK[1400]


def test_the_probe_catches_a_word_split_and_a_wide_code_block(tmp_path: Path) -> None:
    """Negative control: a cell that breaks anywhere splits its long word; a code line wider than its box scrolls."""
    needs_browser()
    page = tmp_path / "bad.html"
    page.write_text(
        '<html><body><div class="rst-content" style="width:300px">'
        '<table class="docutils"><tbody><tr><td style="width:60px; max-width:60px; overflow-wrap:anywhere">'
        "normalize_values everywhere</td><td>ok</td></tr></tbody></table>"
        f'<pre style="white-space:pre; overflow:auto">{"x = 1  # " + "long " * 40}</pre></div></body></html>'
    )
    found = measure(page, 1024)
    assert any(s["word"] in ("normalize", "values", "everywhere") for s in found["split"]), found["split"]
    assert found["code"][0]["scroll"] > found["code"][0]["shown"] + 1
    # the same cell with the pages' rule (break between words only) splits nothing
    page.write_text(
        '<html><body><div class="rst-content" style="width:300px">'
        '<table class="docutils"><tbody><tr><td style="width:60px; overflow-wrap:normal">'
        "normalize_<wbr>values everywhere</td><td>ok</td></tr></tbody></table></div></body></html>"
    )
    assert measure(page, 1024)["split"] == []


def test_the_probe_reads_numbers_whole_and_the_pages_break_none(tmp_path: Path) -> None:
    """
    Negative control: the break points the pages had (a ``<wbr>`` after every ``.`` and ``,``) split ``0.56``,
    ``753,664`` and ``-212.0`` in a narrow cell, and the probe reads each as one word split; the pages' break points
    now (``docs/conf.py``'s ``TOKEN_BREAKS``) put none inside a number, and the same cell splits nothing.
    """
    needs_browser()
    spec = importlib.util.spec_from_file_location("docs_conf", ROOT / "docs" / "conf.py")
    conf = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(conf)  # type: ignore[union-attr]
    TOKEN_BREAKS = conf.TOKEN_BREAKS
    numbers = ["0.56", "753,664", "-212.0", "v2.3.1", "10/10"]
    old = re.compile(r"(?<=[_@=/.,:(\[])(?=\w)")  # (the rule before)

    def page(rule: re.Pattern) -> str:
        cells = "".join(f"<td>{'<wbr>'.join(rule.split(number))}</td>" for number in numbers)
        return (
            '<html><body><div class="rst-content" style="width:300px"><table class="docutils" style="width:40px">'
            f'<tbody><tr><td style="width:1px; overflow-wrap:normal">x</td>{cells}</tr></tbody></table></div></body></html>'
        )

    bad = tmp_path / "bad.html"
    bad.write_text(page(old).replace("<td>", '<td style="width:1px; max-width:1px; overflow-wrap:normal">'))
    found = {s["word"] for s in measure(bad, 1024)["split"]}
    assert {"0.56", "753,664", "-212.0"} <= found, found
    good = tmp_path / "good.html"
    good.write_text(page(TOKEN_BREAKS).replace("<td>", '<td style="width:1px; max-width:1px; overflow-wrap:normal">'))
    assert measure(good, 1024)["split"] == []
    assert all(TOKEN_BREAKS.split(number) == [number] for number in numbers)
    assert TOKEN_BREAKS.split("sb3_xppo.common") == ["sb3_", "xppo.", "common"]  # identifiers still break


# --- the markdown sources, as GitHub renders them (no browser needed) ---

MARKDOWN = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts)]
TABLE_SEPARATOR = re.compile(r"^\|(\s*:?-{3,}:?\s*\|)+\s*$")


def table_cells(line: str) -> int:
    """The cells GitHub's table parser sees in a row: every unescaped ``|`` splits, inside backticks too."""
    return len(re.split(r"(?<!\\)\|", line.strip().strip("|")))


@pytest.mark.parametrize("path", MARKDOWN, ids=[p.relative_to(ROOT).as_posix() for p in MARKDOWN])
def test_markdown_table_rows_fit_their_header(path: Path) -> None:
    lines = _outside_fences(path.read_text(encoding="utf-8"))
    header = None
    for previous, line in zip(["", *lines], lines):
        if TABLE_SEPARATOR.match(line.strip()):
            header = table_cells(previous)
        elif header is not None and line.startswith("|"):
            assert table_cells(line) <= header, f"{path.name}: a row with more cells than its header: {line[:100]}"
        elif not line.startswith("|"):
            header = None


def test_a_pipe_in_backticks_splits_a_row() -> None:
    """Negative control: the old HPO row, ``|A|`` inside backticks, has more cells than its header."""
    assert table_cells("| `actor_loss` | `x` | weighted by `|A|` (after) |") == 5
    assert table_cells("| `actor_loss` | `x` | weighted by `abs(A)` (after) |") == 3
