"""
The region of ``benchmarks/resume.py`` (``single/resume.json``): what resumable checkpoints cost; and what the action
recorders cost, from ``benchmarks/vec_env.py`` (``single/vec_env.json``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.regions.figures import MEDIAN_PAIRED
from harness.regions.results import single


def render_resume_cost(page: Path) -> str:
    """``learn()`` with a checkpoint every 10 rollouts against none, and the time ``XPPO.resume`` takes, replay included."""
    data = single("resume.json")
    if data is None:
        return "Pending: `python benchmarks/resume.py`."
    low, high = data["overhead_ratio_quartiles"]
    verdict = "within" if data["overhead_ratio"] <= 1.02 else "above"
    return (
        f"On {data['env']}'s zoo entry ({data['n_envs']} envs x {data['n_steps']} steps, its VecNormalize, "
        f"{data['threads']} torch thread), `learn()` of {data['rollouts']} rollouts with a checkpoint every 10 took "
        f"{data['learn_s_with']:.1f} s and {data['learn_s_without']:.1f} s without: {data['overhead_ratio']:.2f}x, "
        f"the median of {data['reps']} paired ratios (quartiles {low:.2f}-{high:.2f}x), {verdict} the target of at most "
        f"1.02x. Resuming from the {data['checkpoint_bytes'] / 1e3:.0f} kB checkpoint, "
        f"the replay of {data['n_envs']} envs included, took {data['resume_s']:.3f} s (median; at most "
        f"{data['resume_s_max']:.3f} s) (`{data['command']}`, `benchmarks/results/single/resume.json`)."
    ) + recorder_cost()


def recorder_cost() -> str:
    """
    What the action recorders cost, which every env the package builds carries, checkpoint or not: the lean env's
    env-steps/s with them against without them, from ``vec_env.json`` (empty where it has no such rows).
    """
    data = single("vec_env.json")
    rows = [row for row in (data or {}).get("rows", []) if "recorder_ratio_paired_median" in row]
    if not rows:
        return ""
    ratios = ", ".join(f"{row['recorder_ratio_paired_median']:.3f}x on {row['env']} x{row['n_envs']}" for row in rows)
    return (
        " The recorders that make the replay possible are in every run, checkpoint or not: the lean env, stepped "
        f"alone, gives {ratios} the env-steps/s it gives without them ({MEDIAN_PAIRED}, `{data['command']}`, "  # type: ignore[index]
        "`benchmarks/results/single/vec_env.json`)."
    )


#: The regions this module renders: ``render(page) -> markdown``
REGIONS: dict[str, Callable[[Path], str]] = {"resume-cost": render_resume_cost}
