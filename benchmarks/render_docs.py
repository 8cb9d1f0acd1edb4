"""
Every benchmark result that README.md and the guide quote, rendered from the result files under
``benchmarks/results/``: no number of a results table or verdict is typed by hand.

- **Regions**: a page holds ``<!-- generated:NAME -->`` ... ``<!-- /generated -->``; this script writes between the
  two markers what :data:`harness.regions.RENDERERS` ``[NAME]`` makes of the result files. The renderers live in
  ``benchmarks/harness/regions/``, a module per producer (``benchmarks/README.md`` maps each region to its script and
  files); a campaign's region finds the campaign by the ``kind`` its ``report.json`` declares. A result not written
  yet renders as a pending note.
- **Verdicts**: a contender is *ahead* of (or *behind*) its baseline on a metric when the two 95% CIs do not
  overlap, *level* otherwise (:func:`harness.regions.figures.verdict`).
- **Quoted intervals**: :func:`unheld_intervals` lists every ``x [low, high]`` of a page that no result file holds
  at the reports' precision (one or two decimals); ``tests/test_generated_docs.py`` fails on any, and on any region
  that differs from what this script renders.

usage: python benchmarks/render_docs.py            (rewrite the regions of README.md and docs/)
       python benchmarks/render_docs.py --check    (exit 1, naming them, if a region or a quoted interval is off)
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness import layout
from harness.regions import RENDERERS, results
from harness.regions.results import ROOT, load

#: The pages whose regions are rendered and whose quoted intervals are checked
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))
REGION = re.compile(r"(<!-- generated:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /generated -->)", re.DOTALL)
# a number, then an interval: "267.7 [263.0, 271.0]", "0.88 [0.70, 0.91]", "212 [208, 218]"
NUMBER = r"-?\d+(?:\.\d+)?"
INTERVAL = re.compile(rf"(?<![\w.])({NUMBER}) \[({NUMBER}), ({NUMBER})\]")


def render_page(page: Path, text: str) -> str:
    """``text`` with every region rendered afresh; an unknown region name is an error."""

    def fill(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in RENDERERS:
            raise ValueError(f"{page}: unknown region {name!r}; known: {sorted(RENDERERS)}")
        return f"{match[1]}{RENDERERS[name](page)}\n{match[4]}"

    return REGION.sub(fill, text)


def held_intervals(root: Path | None = None) -> set[str]:
    """
    Every ``"iqm [low, high]"`` a result file holds (a summary row's ``<x>`` and ``<x>_ci``), at one and two decimals:
    the precisions the reports and pages quote.
    """
    root = root or results.RESULTS
    held: set[str] = set()

    def walk(node: Any) -> Iterator[tuple[float, float, float]]:
        if isinstance(node, dict):
            for key, value in node.items():
                ci = node.get(f"{key}_ci")
                if isinstance(value, (int, float)) and isinstance(ci, list) and len(ci) == 2:
                    yield float(value), float(ci[0]), float(ci[1])
                yield from walk(value)
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)

    for path in root.rglob("*.json"):
        if path.is_relative_to(root / layout.RUNS):
            continue
        for triple in walk(load(path)):
            for decimals in (1, 2):
                held.add("{:.{d}f} [{:.{d}f}, {:.{d}f}]".format(*triple, d=decimals))
    return held


def unheld_intervals(pages: tuple[Path, ...] = PAGES, root: Path | None = None) -> list[str]:
    """``"page:line: quoted"`` for every quoted ``x [low, high]`` that no result file holds (:func:`held_intervals`)."""
    held = held_intervals(root)
    found = []
    for page in pages:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for match in INTERVAL.finditer(line):
                if match[0] not in held:
                    where = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
                    found.append(f"{where}:{number}: {match[0]}")
    return found


def stale_regions(pages: tuple[Path, ...] = PAGES) -> list[str]:
    """The pages whose regions differ from what :func:`render_page` writes."""
    return [str(p.relative_to(ROOT)) for p in pages if render_page(p, text := p.read_text(encoding="utf-8")) != text]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a region or interval is off")
    args = parser.parse_args(argv)
    if args.check:
        problems = [f"{page}: a region differs from its result files" for page in stale_regions()]
        problems += [f"{where} is held by no result file" for where in unheld_intervals()]
        print("\n".join(problems) or "every region and quoted interval matches the result files")
        sys.exit(1 if problems else 0)
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        rendered = render_page(page, text)
        if rendered != text:
            page.write_text(rendered, encoding="utf-8")
            print(f"rendered {page.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
