"""The regions that sum up every producer's claims: the headline table and which setup to use."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.regions.dagger import dagger_claim
from harness.regions.figures import said, tally
from harness.regions.learning import DEFAULTS_OPTION, comparisons, recommended_claim, zoo_claim
from harness.regions.multi_critic import match_claim, styles_claim
from harness.regions.results import ROOT, link
from harness.regions.speed import speed_claim


def render_headline(page: Path) -> str:
    """One row per claim, each with a plain verdict and a link to its evidence."""
    guide = ROOT / "docs" / "guide" / "benchmarks.md"

    def row(claim: str, result: str, anchor: str) -> str:
        return f"| {claim} | {result} | [evidence]({link(page, guide, anchor)}) |"

    lines = ["| claim | verdict | |", "| --- | --- | --- |"]
    if found := comparisons("defaults", DEFAULTS_OPTION):
        final = said(tally(found, "final"), len(found))
        lines.append(row("XPPO's defaults are PPO's, bit for bit", f"the screen's best option ended {final}", "is-xppo-ppo"))
    if (claim := speed_claim()) is not None:
        lines.append(row("`learn()` faster than PPO's, PPO's options", claim, "is-it-faster"))
    if (claim := recommended_claim()) is not None:
        lines.append(row("`xppo_recommended` against PPO, PPO's hyperparameters", claim, "what-does-xppo_recommended-buy"))
    if (claim := zoo_claim()) is not None:
        lines.append(row("XPPO's tuned LunarLander entries (tuning)", claim, "is-it-faster"))
    if (styles := styles_claim()) is not None:
        lines.append(
            row(
                'multi-critic "balanced", two styles 100x apart',
                f"{styles[0]} against one critic's {styles[1]}",
                "does-multi-critic-help",
            )
        )
    match = match_claim() or "rerun pending on the faithful env"
    lines.append(row('multi-critic "scalarize", LunarLander-v3\'s reward', match, "does-multi-critic-help"))
    if (claim := dagger_claim()) is not None:
        lines.append(row("DAgger student against PPO from scratch", claim, "how-much-does-dagger-save"))
    return "\n".join(lines)


def render_decision(page: Path) -> str:
    """Which setup to use: XPPO's defaults, ``xppo_recommended``, the tuned zoo entries, the multi-critic modes."""
    bench = ROOT / "docs" / "guide" / "benchmarks.md"

    def row(use: str, when: str, evidence: str | None, anchor: str) -> str:
        return f"| {use} | {when} | {evidence or 'pending'} ([evidence]({link(page, bench, anchor)})) |"

    styles = styles_claim()
    return "\n".join(
        [
            "| use | when | evidence |",
            "| --- | --- | --- |",
            row(
                '`XPPO("MlpPolicy", env)`',
                "you want PPO exactly, faster",
                "no loss option beat PPO on every env",
                "is-xppo-ppo",
            ),
            row(
                "`xppo_recommended(env)`",
                "your own or rl-zoo3's PPO hyperparameters",
                recommended_claim(),
                "what-does-xppo_recommended-buy",
            ),
            row(
                "`zoo_configs/xppo.yml` (`python -m sb3_xppo.train`)",
                "the LunarLanders, where env steps cost more than compute (other entries: rl-zoo3's PPO ones)",
                zoo_claim(),
                "is-it-faster",
            ),
            row(
                '"scalarize" (`normalize_groups=False, group_reduce="sum"`)',
                "the group weights reproduce the reward you care about",
                match_claim() or "rerun pending on the faithful env",
                "does-multi-critic-help",
            ),
            row(
                '"balanced" (`normalize_groups=True`, the default)',
                "the groups are separate tasks or styles, their scales arbitrary",
                f"{styles[0]} against one critic's {styles[1]}" if styles else None,
                "does-multi-critic-help",
            ),
        ]
    )


#: The regions this module renders: ``render(page) -> markdown``
REGIONS: dict[str, Callable[[Path], str]] = {
    "headline": render_headline,
    "decision": render_decision,
}
