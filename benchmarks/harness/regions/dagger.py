"""The regions of ``benchmarks/distill.py`` (``single/distill_*.json``): DAgger against PPO from scratch, and the warm-up."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.regions.figures import dash, seeds
from harness.regions.results import ROOT, link, single


def distill_results() -> dict[str, Any] | None:
    return single("distill_LunarLander-v3.json")


def dagger_claim() -> str | None:
    data = distill_results()
    if data is None:
        return None
    median = data["median_steps"]
    return (
        f"95% of the teacher's return in {median['dagger']:,.0f} env steps against {median['ppo']:,.0f}: "
        f"{data['ratio']:.0f}x fewer (the teacher's own training not counted)"
    )


def render_dagger_claim(page: Path) -> str:
    """The DAgger result in one sentence, for the DAgger page."""
    claim = dagger_claim()
    bench = link(page, ROOT / "docs" / "guide" / "benchmarks.md", "how-much-does-dagger-save")
    if claim is None:
        return f"The distillation benchmark has no result yet ([Benchmarks]({bench}))."
    return (
        f"A fresh PPO student with `DaggerCallback`'s defaults, against PPO from scratch on LunarLander-v3, reaches "
        f"{claim}. The command and the table are in [Benchmarks]({bench})."
    )


def render_dagger(page: Path) -> str:
    data = distill_results()
    if data is None:
        return "*No distillation result yet.*"
    per_seed = {
        who: " / ".join(f"{r['steps']:,.0f}" if r["reached"] else "-" for r in data["runs"][who]) for who in ("dagger", "ppo")
    }
    return "\n".join(
        [
            "| what | DAgger student | PPO from scratch |",
            "| --- | --- | --- |",
            f"| who | {data['dagger_student']} | {data['ppo_from_scratch']} |",
            f"| env steps to {data['threshold']:.1f} (95% of the teacher's {data['teacher']['mean_return']:.1f}), "
            f"median | {data['median_steps']['dagger']:,.0f} | {data['median_steps']['ppo']:,.0f} |",
            f"| per seed | {per_seed['dagger']} | {per_seed['ppo']} |",
            f"| ratio | {data['ratio']:.0f}x fewer steps; the teacher's own training (PPO, rl-zoo3 settings) is not "
            "counted | |",
        ]
    )


#: The distillation runs with a warm-up (``distill.py --pretrain-steps N``), by file stem in ``single/``
PRETRAIN_RESULTS = ("distill_LunarLander-v3_pretrain", "distill_CartPole-v1_quick")


def render_dagger_pretrain(page: Path) -> str:
    """Steps to the threshold of the DAgger student with and without ``pretrain_steps``, per env that has been run."""
    lines = [
        "| env (seeds) | warm-up | without: median RL steps (per seed) | with: median RL steps (per seed) | "
        "with: median total steps |",
        "| --- | --- | --- | --- | --- |",
    ]
    verdicts = []
    for stem in PRETRAIN_RESULTS:
        data = single(f"{stem}.json")
        if data is None or "dagger_pretrain" not in data["runs"]:
            continue
        runs, median = data["runs"], data["median_steps"]
        per_seed = {who: " / ".join(f"{r['steps']:,}" if r["reached"] else "-" for r in runs[who]) for who in runs}
        lines.append(
            f"| {data['env']} (seeds {seeds([r['seed'] for r in runs['dagger']])}; "
            f"teacher {data['teacher']['mean_return']:.1f}, "
            f"threshold {data['threshold']:.1f}; `{stem}.json`) | "
            f"{data['pretrain_steps']} vector steps = {runs['dagger_pretrain'][0]['pretrain_env_steps']:,} env steps | "
            f"{dash(median['dagger'])} ({per_seed['dagger']}) | "
            f"{dash(median['dagger_pretrain'])} ({per_seed['dagger_pretrain']}) | "
            f"{dash(median['dagger_pretrain_total'])} |"
        )
        without, total = median["dagger"], median["dagger_pretrain_total"]
        if without is not None and total is not None:
            words = "fewer" if total < without else "more" if total > without else "as many"
            verdicts.append(f"{data['env']}: {words} steps with the warm-up, its own steps counted")
    if len(lines) == 2:
        return "*No run with a warm-up yet.*"
    return "\n".join(lines) + ("\n\nBy the medians: " + "; ".join(verdicts) + "." if verdicts else "")


#: The regions this module renders: ``render(page) -> markdown``
REGIONS: dict[str, Callable[[Path], str]] = {
    "dagger": render_dagger,
    "dagger-claim": render_dagger_claim,
    "dagger-pretrain": render_dagger_pretrain,
}
