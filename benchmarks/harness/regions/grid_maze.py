"""
The region of ``examples/maskable_grid_maze.py --out benchmarks/results/single/grid_maze.json``: why a model trained
with masks must be evaluated with them, on the maze of docs/guide/contrib.md.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from harness.regions.results import single


def render_grid_maze(page: Path) -> str:
    """The illegal moves in training, and the masked model's evaluations with and without its masks."""
    data = single("grid_maze.json")
    if data is None:
        return "Pending: `python examples/maskable_grid_maze.py --out benchmarks/results/single/grid_maze.json`."
    with_masks, without = data["evaluations"]["with"], data["evaluations"]["without"]
    moves = len(data["path"])
    path = (
        "the shortest path"
        if moves == data["shortest"]
        else f"a path {moves - data['shortest']} moves longer than the shortest"
    )
    first_move = all(length == 1 for length in without["lengths"]) and all(r == -1 for r in without["returns"])
    lost = ": an illegal first move, every episode" if first_move else f", {np.mean(without['lengths']):.1f} moves per episode"
    return "\n".join(
        [
            f"`{data['command']}` (seed {data['seed']}, {data['timesteps']:,} steps, 4 envs; "
            f"{len(with_masks['returns'])} evaluation episodes each way):",
            "",
            "| | MaskableXPPO | XPPO, no masks |",
            "| --- | --- | --- |",
            f"| illegal moves while training | {data['illegal']['masked']:,} | {data['illegal']['plain']:,} |",
            f"| deterministic evaluation with masks | return {np.mean(with_masks['returns']):.2f}, {path} ({moves} moves) | |",
            f"| the same model evaluated without masks | return {np.mean(without['returns']):.2f}{lost} | |",
        ]
    )


#: The regions this module renders: ``render(page) -> markdown``
REGIONS: dict[str, Callable[[Path], str]] = {"grid-maze": render_grid_maze}
