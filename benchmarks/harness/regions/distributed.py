"""
The data-parallel learner's regions (docs/guide/distributed.md), from ``benchmarks/distributed.py``
(``single/distributed.json``) and the learning campaign of kind ``distributed`` (``benchmarks/learning.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.paired import pace
from harness.regions.figures import MEDIAN_PAIRED, interval, ratio_with_spread, seeds, steps, verdict
from harness.regions.results import single, the_campaign


def quoted(row: dict[str, Any]) -> str:
    """A distributed.json row's median paired ratio to one process, with its interval (``figures.ratio_with_spread``)."""
    return ratio_with_spread(row.get("ratio_paired_spread"), row.get("seconds_median", 0.0))


def render_distributed_speed(page: Path) -> str:
    """Env-steps/s of 1 and 2 ranks against one process, plain and with SubprocVecEnv (``distributed.json``)."""
    data = single("distributed.json")
    if data is None:
        return "Pending: `python benchmarks/distributed.py`."
    lines = [
        f"| {data['env']}, rl-zoo3's entry | envs x minibatch per rank | env-steps/s, median (best) | "
        f"against one process: {MEDIAN_PAIRED} with its 95% interval |",
        "| --- | --- | ---: | ---: |",
    ]
    for row in data["rows"]:
        lines.append(
            f"| {row['name']} | {row['n_envs_per_rank']} x {row['batch_size_per_rank']} | "
            f"{row['steps_per_second_median']:,.0f} ({row['steps_per_second_best']:,.0f}) | {quoted(row)} |"
        )
    rows = {row["name"]: row for row in data["rows"]}
    ranks, bound = rows.get("2 ranks"), rows.get("one rank's share alone")
    wide, wide_bound = rows.get("2 ranks, minibatch 64 per rank"), rows.get("one rank's share alone, minibatch 64")
    lines += [
        "",
        f"`learn()` of {data['steps']:,} env steps, {data['reps']} repetitions, one torch thread per process, on a "
        "2-core machine.",
    ]
    if ranks is not None and bound is not None:
        faster = {"faster": "faster than", "slower": "slower than", "level": "level with"}[pace(ranks["ratio_paired_spread"])]
        lines += [
            "",
            f"**At this entry, on two CPU cores, 2 ranks are {faster} one process: {quoted(ranks)}.** "
            f"One rank's share of the work alone on the machine, with no collective, reaches {quoted(bound)}: "
            "with the same updates every rank still takes all of the rollout's sequential optimizer steps, and on a CPU a "
            "step on half the minibatch costs nearly as much, so only the rollout splits. The rest of the gap is the "
            "all-reduce of the gradients that every minibatch waits for (gloo, two processes on two cores)."
            + (
                f" Twice the per-rank minibatch (half the updates: another hyperparameter) gives {quoted(wide)}, "
                f"against a bound of {quoted(wide_bound)}."
                if wide is not None and wide_bound is not None
                else ""
            )
            + " It pays where a minibatch's compute outweighs a collective (larger networks and minibatches, one GPU per "
            "rank with NCCL) or where the envs dominate and need more cores than one process's envs can use.",
        ]
    return "\n".join(lines)


def render_distributed_learning(page: Path) -> str:
    """
    Final returns and learning curves of XPPO on ranks against one process at the same global rollout and minibatch
    (the campaign of kind ``distributed``): IQM over seeds with 95% intervals, and whether they overlap.
    """
    found = the_campaign("distributed")
    if found is None:
        return (
            "Pending: `python benchmarks/learning.py --envs LunarLander-v3 --contenders ppo,xppo@ranks=2 --seeds 0 1 2 3 4 "
            "--name distributed_lunar_lander --kind distributed`."
        )
    name, data = found
    lines = [
        "| env | contender | seeds | final return IQM [95% interval] | curve IQM [95% interval] | "
        "steps to the threshold, median |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    verdicts: dict[str, list[str]] = {"final": [], "curve": []}
    lower: dict[str, list[bool]] = {"final": [], "curve": []}
    for env_id, summary in data["summary"].items():
        rows = summary["contenders"]
        one = next((rows[c] for c in rows if "ranks=" not in c), None)
        for contender, row in rows.items():
            ranks = contender.split("ranks=")[1].split("@")[0] if "ranks=" in contender else "1"
            label = "one process" if ranks == "1" else f"{ranks} ranks"  # (ppo: XPPO's one process, bit for bit)
            lines.append(
                f"| {env_id} | {label} (`{contender}`) | {seeds(row['seeds'])} | {interval(row, 'final')} | "
                f"{interval(row, 'curve')} | {steps(row)} |"
            )
            if one is not None and row is not one:
                for metric, found_verdicts in verdicts.items():
                    found_verdicts.append(verdict(row, one, metric))
                    lower[metric].append(row[f"{metric}_iqm"] < one[f"{metric}_iqm"])
    words = {metric: "overlap" if all(v == "level" for v in found) else "are apart" for metric, found in verdicts.items()}
    lines += [
        "",
        f"The 95% intervals of the ranks' and the one process's final returns {words['final']}, and those of their "
        f"learning curves (the mean of the evaluations along the run) {words['curve']} "
        f"(`benchmarks/results/campaigns/{name}/`, curves in its `plot.png`).",
    ]
    if all(lower["final"] + lower["curve"]) or not any(lower["final"] + lower["curve"]):
        direction = "lower" if all(lower["final"] + lower["curve"]) else "higher"
        lines[-1] += (
            f" The ranks' IQMs are {direction} on both measures; five seeds cannot tell a difference smaller than these "
            "intervals."
        )
    return "\n".join(lines)


def render_distributed_target(page: Path) -> str:
    """Whether the data-parallel learner's speed target is met (campaigns.md, with the other targets)."""
    data = single("distributed.json")
    if data is None:
        return "Pending: `python benchmarks/distributed.py`."
    target = data["target"]
    rows = {row["name"]: row for row in data["rows"]}
    reached = rows[target["contender"]]
    met = "met" if target["met"] else "**missed**"
    bound = rows.get("one rank's share alone")
    why = (
        f" One rank's share of the work alone, with no collective, reaches {quoted(bound)}: with the same updates the "
        "sequential optimizer steps do not split, so the target lies beyond the bound on this machine "
        "(docs/guide/distributed.md, Does it pay?)."
        if bound is not None and bound["ratio_paired"] < target["ratio"]
        else ""
    )
    return (
        f"- Data-parallel, `benchmarks/distributed.py` on {data['env']}: the target, {target['contender']} at "
        f"{target['ratio']}x {target['against']}'s env-steps/s (the global rollout and minibatch equal), is {met}: "
        f"{quoted(reached)} {MEDIAN_PAIRED} with its 95% interval.{why}"
    )


#: The regions this module renders: ``render(page) -> markdown``
REGIONS: dict[str, Callable[[Path], str]] = {
    "distributed-speed": render_distributed_speed,
    "distributed-target": render_distributed_target,
    "distributed-learning": render_distributed_learning,
}
