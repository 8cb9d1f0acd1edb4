"""
The region of ``benchmarks/resume.py`` (``single/resume.json``): what resumable checkpoints cost; and what the action
recorders cost, from ``benchmarks/vec_env.py`` (``single/vec_env.json``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.regions.figures import MEDIAN_PAIRED, ratio_with_spread
from harness.regions.results import single


def render_resume_cost(page: Path) -> str:
    """``learn()`` with a checkpoint every 10 rollouts against none, and the time ``XPPO.resume`` takes, replay included."""
    data = single("resume.json")
    if data is None:
        return "Pending: `python benchmarks/resume.py`."
    spread = data.get("overhead_ratio_spread")
    ratio = ratio_with_spread(spread, data["learn_s_without"])
    low, high = spread["interval"]  # type: ignore[index]
    said = "a cost the pairs cannot tell from none" if low <= 1 <= high else ("slower" if low > 1 else "faster")
    return (
        f"On {data['env']}'s zoo entry ({data['n_envs']} envs x {data['n_steps']} steps, its VecNormalize, "
        f"{data['threads']} torch thread), `learn()` of {data['rollouts']} rollouts with a checkpoint every 10 took "
        f"{data['learn_s_with']:.1f} s and {data['learn_s_without']:.1f} s without (medians): {ratio}, the median of "
        f"{len(spread['pairs'])} paired ratios with its 95% interval, {said}. Resuming from the "  # type: ignore[index]
        f"{data['checkpoint_bytes'] / 1e3:.0f} kB checkpoint, "
        f"the replay of {data['n_envs']} envs included, took {data['resume_s']:.3f} s (median; at most "
        f"{data['resume_s_max']:.3f} s) (`{data['command']}`, `benchmarks/results/single/resume.json`)."
    ) + recorder_cost()


def recorder_cost() -> str:
    """
    What the action recorders cost, which every env the package builds carries, checkpoint or not: the lean env's
    env-steps/s with them against without them, from ``vec_env.json`` (empty where it has no such rows).
    """
    data = single("vec_env.json")
    rows = [row for row in (data or {}).get("rows", []) if "recorder_spread" in row]
    if not rows:
        return ""
    ratios = ", ".join(
        f"{ratio_with_spread(row.get('recorder_spread'), row.get('seconds_median', 0.0))} on {row['env']} x{row['n_envs']}"
        for row in rows
    )
    command = data["command"]  # type: ignore[index]
    return (
        " The recorders that make the replay possible are in every run, checkpoint or not: the lean env, stepped "
        f"alone, gives {ratios} the env-steps/s it gives without them ({MEDIAN_PAIRED} with its 95% interval, "
        f"`{command}`, `benchmarks/results/single/vec_env.json`)."
    )


#: The regions this module renders: ``render(page) -> markdown``
REGIONS: dict[str, Callable[[Path], str]] = {"resume-cost": render_resume_cost}
