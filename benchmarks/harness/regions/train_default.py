"""The region of ``benchmarks/train_default.py`` (``single/train_default_<env>_seed<k>.json``): the no-argument run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.regions.results import ROOT, link, single

BENCHMARKS_PAGE = ROOT / "docs" / "guide" / "benchmarks.md"


def render_train_default(page: Path) -> str:
    """The no-argument training run (``benchmarks/train_default.py``): when it first reached 200, where it ended."""
    data = single("train_default_LunarLander-v3_seed0.json")
    if data is None:
        return "Pending: `python benchmarks/train_default.py`."
    evaluations = data["evaluations"]
    first = next((e["steps"] for e in evaluations if e["mean"] >= 200), None)
    reached = f"first evaluated above 200 after {first:,} steps" if first is not None else "never evaluated above 200"
    return (
        f"The no-argument run (`{data['command']}`: one run, seed 0, 1M steps, the tuned {data['env']} entry) {reached} "
        f"and ended at {evaluations[-1]['mean']:.1f} ({data['eval_episodes']} evaluation episodes every "
        f"{evaluations[0]['steps']:,} steps). One seed: the benchmarks' medians over ten seeds are in "
        f"[Benchmarks]({link(page, BENCHMARKS_PAGE, 'is-it-faster')})."
    )


#: The regions this module renders: ``render(page) -> markdown``
REGIONS: dict[str, Callable[[Path], str]] = {"train-default": render_train_default}
