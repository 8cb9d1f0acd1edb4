"""
The region of ``benchmarks/time_to_solve.py`` (``single/time_to_solve.json``): the main job's wall-clock time to a
solved LunarLander-v3 against rl-zoo3 PPO's, per paired seed, and the median ratio with its interval.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.regions.figures import ratio_with_spread, seeds
from harness.regions.results import single


def time_to_solve() -> dict[str, Any] | None:
    """time_to_solve.json, or None when not written."""
    return single("time_to_solve.json")


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def _run(run: dict[str, Any]) -> str:
    reached = f"{run['steps'] / 1000:g}k steps" if run["solved"] else "not solved"
    return f"{minutes(run['seconds'])} ({reached})"


def time_to_solve_claim() -> str | None:
    """The median times to the threshold and the ratio, in one clause (None without the file)."""
    data = time_to_solve()
    if data is None:
        return None
    longest = max(run["seconds"] for pair in data["pairs"] for run in pair["runs"].values())
    return (
        f"reached {data['threshold']:g} on {data['env']} in a median {minutes(data['median_seconds']['XPPO'])} of wall-clock "
        f"time against {minutes(data['median_seconds']['PPO'])} for rl-zoo3's PPO: PPO's time over XPPO's "
        f"{ratio_with_spread(data['ratio'], longest)} ({data['pace']}: the median of {len(data['pairs'])} paired seeds, "
        f"{seeds(data['seeds'])}, with its 95% interval)"
    )


def render_time_to_solve(page: Path) -> str:
    """Each pair of runs, and the median ratio with its interval."""
    data = time_to_solve()
    if data is None:
        return "Pending: `python benchmarks/time_to_solve.py`."
    commands = dict.fromkeys(run["command"].split(" --env")[0] for pair in data["pairs"] for run in pair["runs"].values())
    lines = [
        f"The main job as a user runs it, to its first evaluation at {data['threshold']:g} on {data['env']} (rl-zoo3's: "
        "5 deterministic episodes every 25k steps), each run on its own wall clock from its start: "
        + " against ".join(f"`{command}`" for command in commands)
        + f", one pair per seed (seeds {seeds(data['seeds'])}, which no tuning saw), the order alternating. "
        f"{time_to_solve_claim()}.",
        "",
        "| seed | XPPO, `python -m sb3_xppo.train` | PPO, `python -m rl_zoo3.train` | PPO's time / XPPO's |",
        "| --- | --- | --- | --- |",
    ]
    for pair in data["pairs"]:
        runs = pair["runs"]
        lines.append(f"| {pair['seed']} | {_run(runs['XPPO'])} | {_run(runs['PPO'])} | {pair['ratio']:.2f}x |")
    return "\n".join(lines)


#: The regions this module renders: ``render(page) -> markdown``
REGIONS: dict[str, Callable[[Path], str]] = {"time-to-solve": render_time_to_solve}
