"""
The data-parallel learner's regions (docs/guide/distributed.md), from ``benchmarks/distributed.py``
(``single/distributed.json``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.regions.figures import MEDIAN_PAIRED
from harness.regions.results import single


def render_distributed_speed(page: Path) -> str:
    """Env-steps/s of 1 and 2 ranks against one process, plain and with SubprocVecEnv (``distributed.json``)."""
    data = single("distributed.json")
    if data is None:
        return "Pending: `python benchmarks/distributed.py`."
    lines = [
        f"| {data['env']}, rl-zoo3's entry | envs x minibatch per rank | env-steps/s, median (best) | "
        f"against one process: {MEDIAN_PAIRED} |",
        "| --- | --- | ---: | ---: |",
    ]
    for row in data["rows"]:
        lines.append(
            f"| {row['name']} | {row['n_envs_per_rank']} x {row['batch_size_per_rank']} | "
            f"{row['steps_per_second_median']:,.0f} ({row['steps_per_second_best']:,.0f}) | {row['ratio_paired']:.2f}x |"
        )
    lines += [
        "",
        f"`learn()` of {data['steps']:,} env steps, {data['reps']} repetitions, one torch thread per process, on a "
        "2-core machine.",
    ]
    return "\n".join(lines)


def render_distributed_target(page: Path) -> str:
    """Whether the data-parallel learner's speed target is met (campaigns.md, with the other targets)."""
    data = single("distributed.json")
    if data is None:
        return "Pending: `python benchmarks/distributed.py`."
    target = data["target"]
    reached = next(row["ratio_paired"] for row in data["rows"] if row["name"] == target["contender"])
    met = "met" if target["met"] else "**missed**"
    return (
        f"- Data-parallel, `benchmarks/distributed.py` on {data['env']}: the target, {target['contender']} at "
        f"{target['ratio']}x {target['against']}'s env-steps/s (the global rollout and minibatch equal), is {met}: "
        f"{reached:.2f}x {MEDIAN_PAIRED}."
    )


#: The regions this module renders: ``render(page) -> markdown``
REGIONS: dict[str, Callable[[Path], str]] = {
    "distributed-speed": render_distributed_speed,
    "distributed-target": render_distributed_target,
}
