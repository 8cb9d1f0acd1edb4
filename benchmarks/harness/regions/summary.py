"""The regions that sum up every producer's claims: the README's first screen, the headline table and which setup to use."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.regions import spo_depth, spo_paper
from harness.regions.dagger import dagger_claim, distill_results
from harness.regions.figures import MEDIAN_PAIRED, interval, seeds, steps, tally, verdict
from harness.regions.learning import PRESET, comparisons, recommended_claim, zoo_claim
from harness.regions.multi_critic import match_claim, styles_claim, styles_rows
from harness.regions.results import ROOT, campaigns_of, link
from harness.regions.speed import exactness_claim, lean_result, quoted, speed_claim
from harness.regions.time_to_solve import time_to_solve_claim

BENCHMARKS_PAGE = ROOT / "docs" / "guide" / "benchmarks.md"
#: The env of the README's quickstart (``XPPO("MlpPolicy", "CartPole-v1")``): the front figure is this env's
QUICKSTART_ENV = "CartPole-v1"


def words_header(page: Path) -> str:
    """The verdict column's heading: its words linked to the glossary that defines them."""
    return f"verdict ([ahead / level / behind]({link(page, BENCHMARKS_PAGE, 'glossary')}): 95% intervals apart or not)"


def render_headline(page: Path) -> str:
    """One row per claim, each verdict answering its own claim in words, with a link to its evidence."""

    def row(claim: str, result: str, anchor: str) -> str:
        return f"| {claim} | {result} ([evidence]({link(page, BENCHMARKS_PAGE, anchor)})) |"

    lines = [f"| claim | {words_header(page)} |", "| --- | --- |"]
    if (claim := exactness_claim()) is not None:
        lines.append(row("With PPO's options, XPPO trains PPO's model bit for bit", claim, "is-xppo-ppo"))
    if (claim := speed_claim()) is not None:
        lines.append(row("With PPO's options, `learn()` is faster than PPO's", claim, "is-it-faster"))
    if (claim := recommended_claim()) is not None:
        lines.append(
            row("`xppo_recommended` learns sooner than PPO, PPO's hyperparameters", claim, "what-does-xppo_recommended-buy")
        )
    if (claim := zoo_claim()) is not None:
        lines.append(row("XPPO's tuned LunarLander entries reach 200 sooner (tuning)", claim, "is-it-faster"))
    if (claim := styles_claim()) is not None:
        lines.append(row('multi-critic "balanced" beats one critic on two styles 100x apart', claim, "does-multi-critic-help"))
    match = match_claim() or "rerun pending on the faithful env"
    lines.append(
        row('multi-critic "scalarize" matches one critic on LunarLander-v3\'s reward', match, "does-multi-critic-help")
    )
    if (claim := dagger_claim()) is not None:
        lines.append(row("A DAgger student needs fewer env steps than PPO from scratch", claim, "how-much-does-dagger-save"))
    return "\n".join(lines)


#: The zoo config's entries that are not rl-zoo3's PPO entry, in words (``zoo_configs/xppo.yml`` says why)
ZOO_OWN_ENTRIES = (
    "LunarLander-v3 and LunarLanderContinuous-v3 tuned, Pendulum-v1 with value normalization and RPO (Robust Policy "
    "Optimization, [its section]({rpo})), the multi-critic `mo-lunar-lander-v3` and `sb3_xppo/LunarLanderGroups-v3`"
)
#: The page and section that define RPO
XPPO_PAGE, RPO_ANCHOR = ROOT / "docs" / "guide" / "xppo.md", "robust-policy-optimization-policy_kwargsdictrpo_alphaa"


def render_decision(page: Path) -> str:
    """Which setup to use: XPPO's defaults, ``xppo_recommended``, the tuned zoo entries, the multi-critic modes."""

    def row(use: str, when: str, evidence: str | None, anchor: str) -> str:
        return f"| {use} | {when} | {evidence or 'pending'} ([evidence]({link(page, BENCHMARKS_PAGE, anchor)})) |"

    return "\n".join(
        [
            "| use | when | evidence |",
            "| --- | --- | --- |",
            row('`XPPO("MlpPolicy", env)`', "you want PPO's results, in less time", speed_claim(), "is-it-faster"),
            row(
                "`xppo_recommended(env)`",
                "your own or rl-zoo3's PPO hyperparameters, learning sooner",
                recommended_claim(),
                "what-does-xppo_recommended-buy",
            ),
            row(
                "`zoo_configs/xppo.yml` (`python -m sb3_xppo.train`)",
                f"the LunarLanders, where env steps cost more than compute (its own entries: "
                f"{ZOO_OWN_ENTRIES.format(rpo=link(page, XPPO_PAGE, RPO_ANCHOR))}; the "
                "others are rl-zoo3's PPO ones)",
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
                styles_claim(),
                "does-multi-critic-help",
            ),
            # SPO's row: the campaign in the paper's own setting once it is done, the depth campaign before
            f'| `XPPO("MlpPolicy", env, actor_loss="spo")` | {spo_paper.when_words()} | '
            + (
                spo_paper.spo_paper_claim()
                or f"{spo_depth.spo_claim() or spo_depth.pending_claim()}; {spo_paper.progress_words()}"
            )
            + f" ([evidence]({link(page, ROOT / spo_depth.PAGE, spo_depth.ANCHOR)})) |",
        ]
    )


def threshold(env_id: str) -> float:
    """The return threshold of an env in the confirmation's reports (200 on the LunarLanders)."""
    return next(
        data["summary"][env_id]["threshold"] for data in campaigns_of("recommended").values() if env_id in data["summary"]
    )


def render_front(page: Path) -> str:
    """The README's first screen: what a user gets, one measured number each, with its evidence."""
    bench = BENCHMARKS_PAGE
    items, parts = [], []
    if (solve := time_to_solve_claim()) is not None:
        # the path the main job takes: the command the README gives, to a solved task, on the wall clock
        parts.append(f"The main job, `python -m sb3_xppo.train`, {solve}")
    if (lean := lean_result(QUICKSTART_ENV)) is not None:
        # the path the quickstart takes: an env id, which XPPO builds as its lean env
        parts.append(
            f'`XPPO("MlpPolicy", "{QUICKSTART_ENV}")` trains SB3 PPO\'s model bit for bit at {quoted(lean)} PPO\'s '
            f"env-steps/s on {QUICKSTART_ENV} (its lean env; [{MEDIAN_PAIRED}]({link(page, bench, 'glossary')}))"
        )
    if parts:
        items.append(f"- **In less time.** {'. '.join(parts)} ([evidence]({link(page, bench, 'is-it-faster')})).")
    found = comparisons("recommended", PRESET)
    if found:
        curve = tally(found, "curve")
        # the env where the preset's head start is largest, among those where its curve is ahead
        reached = [
            f
            for f in found
            if f[0] in curve["ahead"] and f[2]["median_steps_to_threshold"] and f[3]["median_steps_to_threshold"]
        ]
        env_id, _, row, base = max(
            reached or found, key=lambda f: (f[3]["median_steps_to_threshold"] or 0) / (f[2]["median_steps_to_threshold"] or 1)
        )
        items.append(
            f"- **Learns sooner, one keyword.** `xppo_recommended(env)` (value normalization) reached "
            f"{threshold(env_id):g} on {env_id} after {steps(row, False)} env steps, PPO after {steps(base, False)} "
            "(medians, seeds "
            f"{seeds(row['seeds'])}); learning curve ahead of PPO's on {len(curve['ahead'])} of {len(found)} envs, "
            f"level on the others ([evidence]({link(page, bench, 'what-does-xppo_recommended-buy')}))."
        )
    if (found := styles_rows()) is not None:
        _, row, base = found
        guide = ROOT / "docs" / "guide" / "multi_critic.md"
        items.append(
            f"- **One critic per [reward group]({link(page, guide)}).** On two reward styles 100x apart, "
            f'"balanced" multi-critic (advantages normalized per group) against one critic: curve '
            f"{interval(row, 'curve', 2)} against {interval(base, 'curve', 2)} ({verdict(row, base, 'curve')}), final "
            f"score {interval(row, 'final', 2)} against {interval(base, 'final', 2)} ({verdict(row, base, 'final')}), "
            f"IQMs over seeds {seeds(row['seeds'])} ([evidence]({link(page, bench, 'does-multi-critic-help')}))."
        )
    distill = distill_results()
    if distill is not None:
        items.append(
            f"- **Distillation.** A DAgger student reached 95% of its teacher's return in {distill['ratio']:.0f}x fewer "
            f"env steps than PPO from scratch ([evidence]({link(page, bench, 'how-much-does-dagger-save')}))."
        )
    return "\n".join(items)


#: The regions this module renders: ``render(page) -> markdown``
REGIONS: dict[str, Callable[[Path], str]] = {
    "front": render_front,
    "headline": render_headline,
    "decision": render_decision,
}
