"""
The regions of ``benchmarks/multi_critic.py`` (``campaigns/multi_critic/``): the must-win styles campaign, the
must-match campaign on LunarLander-v3's own reward, PCGrad's worth and the gradient-clipping A/B. Campaigns are found
by what their reports declare or hold (their ``kind``, their env, their contenders), not by their folders' names.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.regions.figures import budget, interval, seeds, table_with_pending, verdict
from harness.regions.results import campaign_files, campaign_reports, campaign_with, campaigns_of, report, result_file

#: The env of the multi-critic "must match" campaign, LunarLander-v3's reward in four groups, bit for bit
FAITHFUL_LUNAR = "sb3_xppo/LunarLanderGroups-v3"
#: The folder of the multi-critic campaigns under ``campaigns/``
FOLDER = "multi_critic"


def multi_critic_reports() -> dict[str, dict[str, Any]]:
    """The multi-critic campaigns' reports, by campaign (``"multi_critic/styles"``)."""
    return {name: data for name, data in campaign_reports().items() if name.startswith(f"{FOLDER}/")}


#: The styles env, and the default mode ("balanced" on a shared trunk) and its baseline there
TWO_STYLES = "sb3_xppo/TwoStylePendulum-v0"
BALANCED, SINGLE = "mc-balanced-shared", "single"


def compared_seeds(data: dict[str, Any]) -> int:
    """How many seeds a styles report ran both "balanced" and the single critic on (0 when it ran either not)."""
    rows = next(iter(data["summary"].values()))["contenders"]
    if BALANCED not in rows or SINGLE not in rows:
        return 0
    return len(set(rows[BALANCED]["seeds"]) & set(rows[SINGLE]["seeds"]))


def styles_campaign() -> str | None:
    """
    The campaign the styles headline quotes: of the reports of kind ``must-win``, the one that compared "balanced"
    with the single critic on the most seeds; on a tie the later folder (a rerun). None before one reports.
    """
    found = campaigns_of("must-win")
    if not found:
        return None
    return max(reversed(list(found)), key=lambda name: compared_seeds(found[name]))


def styles_rows() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]] | None:
    """The must-win campaign's env summary, its "balanced" row and its single critic's row (None before it reports)."""
    if (campaign := styles_campaign()) is None:
        return None
    env_summary = next(iter(report(campaign)["summary"].values()))
    rows = env_summary["contenders"]
    return env_summary, rows[BALANCED], rows[SINGLE]


def styles_claim() -> str | None:
    """
    The must-win campaign's "balanced" (the defaults) against one critic: the final score's and the curve's IQMs
    with their intervals and verdicts, the seeds that reached the threshold, and which seeds.
    """
    if (found := styles_rows()) is None:
        return None
    env_summary, row, base = found
    return (
        f"curve {verdict(row, base, 'curve')}: {interval(row, 'curve', 2)} against one critic's "
        f"{interval(base, 'curve', 2)}; final {verdict(row, base, 'final')}: {interval(row, 'final', 2)} against "
        f"{interval(base, 'final', 2)}; {row['reached']} of {len(row['seeds'])} seeds reached "
        f"{env_summary['threshold']:g}, one critic's {base['reached']} of {len(base['seeds'])} (seeds {seeds(row['seeds'])})"
    )


def multi_critic_table(campaign: str, contenders: tuple[str, ...] | None = None, decimals: int = 2) -> str:
    """A multi-critic campaign's rows: contender, seeds, final and curve IQMs with their intervals, seeds at the threshold."""
    data = report(campaign)
    env_id, env_summary = next(iter(data["summary"].items()))  # type: ignore[index]
    rows = env_summary["contenders"]
    unverified = len(data.get("provenance", {}).get("unverified", []))
    lines = [
        f"| contender ({env_id}, {budget(env_summary['budget'])} steps) | seeds | final IQM [95% interval] | "
        f"curve IQM [95% interval] | reached {env_summary['threshold']:g} |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name in contenders or sorted(rows, key=lambda n: -rows[n]["final_iqm"]):
        if name in rows:
            row = rows[name]
            lines.append(
                f"| {name} | {seeds(row['seeds'])} | {interval(row, 'final', decimals)} | "
                f"{interval(row, 'curve', decimals)} | {row['reached']}/{len(row['seeds'])} |"
            )
    if unverified:
        lines += ["", f"*{unverified} of the report's runs are unverified: made before runs recorded a fingerprint.*"]
    return "\n".join(lines)


def modes_campaign() -> str | None:
    """The campaign that ran the most multi-critic modes on the styles env (the screen of every mode)."""
    found = {name: data for name, data in multi_critic_reports().items() if TWO_STYLES in data["summary"]}
    if not found:
        return None
    return max(found, key=lambda name: len(found[name]["summary"][TWO_STYLES]["contenders"]))


def render_multi_critic_styles(page: Path) -> str:
    """Every mode on the styles env (the screen of modes), final and curve IQMs with their intervals."""
    if (campaign := modes_campaign()) is None:
        return "*The styles campaign has no report yet.*"
    return multi_critic_table(campaign)


def render_multi_critic_styles_fresh(page: Path) -> str:
    """
    The headline's campaign: "balanced" against one critic on its own seeds, both IQMs, and its verdicts in words;
    then any other must-win campaign (a rerun still running), with how far it has got.
    """
    if (campaign := styles_campaign()) is None or (found := styles_rows()) is None:
        return "*The styles campaign has no report yet.*"
    _, row, base = found
    name = campaign.removeprefix(FOLDER + "/")
    text = (
        multi_critic_table(campaign, (BALANCED, SINGLE))
        + f'\n\n"balanced" against one critic (`{name}`, seeds {seeds(row["seeds"])}): '
        f"curve {verdict(row, base, 'curve')}, final {verdict(row, base, 'final')}."
    )
    for other, data in campaigns_of("must-win").items():
        planned = len(data.get("args", {}).get("seeds", []))
        if other != campaign and compared_seeds(data) < planned:  # a rerun still running
            text += (
                f"\n\nNot quoted yet: `{other.removeprefix(FOLDER + '/')}`. {data.get('question', '')} It has compared "
                f"the two on {compared_seeds(data)} of its {planned} seeds so far; the headline moves to it once it has "
                f"compared them on more seeds than `{name}`. Its runs so far:\n\n"
                + multi_critic_table(other, (BALANCED, SINGLE))
            )
    return text


def faithful_lunar_campaign() -> str | None:
    """The multi-critic campaign run on LunarLander-v3's own reward (:data:`FAITHFUL_LUNAR`), if one has reported."""
    return next((campaign for campaign, data in multi_critic_reports().items() if FAITHFUL_LUNAR in data["summary"]), None)


def match_claim() -> str | None:
    """ "scalarize" on a shared trunk against the single critic on the faithful env (None while its rerun is pending)."""
    campaign = faithful_lunar_campaign()
    if campaign is None:
        return None
    rows = report(campaign)["summary"][FAITHFUL_LUNAR]["contenders"]
    shared = [name for name in rows if name.startswith("mc-scalarize-shared") and "-vn" not in name and "-pcgrad" not in name]
    if "single" not in rows or not shared:
        return "see the table"
    name = "mc-scalarize-shared" if "mc-scalarize-shared" in rows else shared[0]
    row, base = rows[name], rows["single"]
    return f"{verdict(row, base, 'final')}: {interval(row, 'final')} against one critic's {interval(base, 'final')}"


PENDING_MATCH = (
    "*Rerun pending on the faithful env.* The must-match campaign is being rerun on `sb3_xppo/LunarLanderGroups-v3`, "
    "LunarLander-v3's reward split into four groups bit for bit. The earlier runs used mo-lunar-lander-v3, whose "
    "reward differs from LunarLander-v3's on the step that ends an episode, so they are not quoted as LunarLander-v3's. "
    "This table appears when that campaign's report exists."
)


def render_multi_critic_match(page: Path) -> str:
    """The must-match table, then what value normalization does on the same reward (``single-vn`` against ``single``)."""
    campaign = faithful_lunar_campaign()
    if campaign is None:
        return PENDING_MATCH
    rows = report(campaign)["summary"][FAITHFUL_LUNAR]["contenders"]  # type: ignore[index]
    # PCGrad's rows are its own table's (``pcgrad-worth``)
    plain = tuple(sorted((name for name in rows if "-pcgrad" not in name), key=lambda name: -rows[name]["final_iqm"]))
    text = multi_critic_table(campaign, plain, decimals=1)
    if "single-vn" in rows and "single" in rows:
        vn, base = rows["single-vn"], rows["single"]
        text += (
            f"\n\nValue normalization (`single-vn`, what `xppo_recommended` adds) against the single critic: final "
            f"{verdict(vn, base, 'final')}, curve {verdict(vn, base, 'curve')} ({interval(vn, 'curve')} against "
            f"{interval(base, 'curve')})."
        )
    return text


#: PCGrad's rows: (env, the mode with PCGrad, the same mode without, its words), each from the multi-critic campaign
#: that ran the mode with PCGrad on the env
PCGRAD_ROWS = (
    (
        "sb3_xppo/TwoStylePendulum-v0",
        "mc-balanced-separate-vn-pcgrad",
        "mc-balanced-separate-vn",
        "balanced, separate critics, value normalization (the best mode there)",
    ),
    (
        FAITHFUL_LUNAR,
        "mc-scalarize-shared-pcgrad@group_value_weights='squared'",
        "mc-scalarize-shared@group_value_weights='squared'",
        "scalarize, shared trunk (the mode whose objective is the reward's)",
    ),
)
#: A PCGrad row is shown once each side has this many seeds
PCGRAD_SEEDS = 5


def render_pcgrad_worth(page: Path) -> str:
    """``group_gradients='pcgrad'`` against the same mode without it, on both multi-critic envs (:data:`PCGRAD_ROWS`)."""
    lines = [
        "| env (budget, seeds) | mode | final IQM [95% interval]: PCGrad / without | "
        "curve IQM [95% interval]: PCGrad / without | verdict: final, curve | pairs in conflict |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    pending = []
    for env_id, contender, baseline, mode in PCGRAD_ROWS:
        campaign = campaign_with(multi_critic_reports(), env_id, contender) or ""
        data = report(campaign) if campaign else None
        rows = data["summary"][env_id]["contenders"] if data else {}
        row, base = rows.get(contender), rows.get(baseline)
        if row is None or base is None or min(len(row["seeds"]), len(base["seeds"])) < PCGRAD_SEEDS:
            done = [0 if side is None else len(side["seeds"]) for side in (row, base)]
            pending.append(f"{env_id} (PCGrad {done[0]}, without {done[1]} of {PCGRAD_SEEDS} seeds)")
            continue
        runs = [result_file(r["file"]) for r in data["runs"] if r["contender"] == contender]
        conflicts = [c for r in runs if r and (c := r.get("train_logs", {}).get("train/pcgrad_conflict_fraction")) is not None]
        conflict = f"{100 * sum(conflicts) / len(conflicts):.0f}%" if conflicts else "-"
        lines.append(
            f"| {env_id} ({budget(data['summary'][env_id]['budget'])}, seeds {seeds(row['seeds'])}; "
            f"`{campaign.removeprefix(FOLDER + '/')}`) | {mode} | "
            f"{interval(row, 'final', 2)} / {interval(base, 'final', 2)} | {interval(row, 'curve', 2)} / "
            f"{interval(base, 'curve', 2)} | {verdict(row, base, 'final')}, {verdict(row, base, 'curve')} | {conflict} |"
        )
    return table_with_pending(lines, pending, "*No PCGrad campaign has finished yet.*")


def render_clip_ab(page: Path) -> str:
    """
    The gradient-clipping A/B (``multi_critic.py --clip-ab``): per contender and campaign, the means over the rollouts
    of the actor step's ratio (joint clip over clip apart), approx_kl both ways, and the joint clip's coefficient
    against the one the actor alone would get.
    """
    found = [(data["label"], data) for data in campaign_files("clip_ab.json").values()]
    if not found:
        return "*No `clip_ab.json` has been written yet.*"

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    header = ["contender"]
    for label, _ in found:
        header += [
            f"{label}: actor step joint ÷ apart",
            f"{label}: approx_kl joint / apart",
            f"{label}: clip coef joint / actor alone",
        ]
    rollouts = "; ".join(f"{label}: {len(next(iter(d['results'].values())))} rollouts, `{d['command']}`" for label, d in found)
    lines = [
        f"Means over the rollouts of seed 0 ({rollouts}; "
        "`benchmarks/results/campaigns/multi_critic/<campaign>/clip_ab.json`). "
        "Actor step: the norm of the actor's parameter change over one `train()` call, joint clip over clip apart; "
        "clip coef: the mean factor the joint clip applies to the actor's gradient, and the one it gets clipped on its own.",
        "",
        "| " + " | ".join(header) + " |",
        "| " + " | ".join("---" for _ in header) + " |",
    ]
    for name in found[0][1]["results"]:
        cells = [name]
        for _, data in found:
            runs = data["results"].get(name)
            if runs is None:
                cells += ["-", "-", "-"]
                continue
            joint, apart = [r["joint"] for r in runs], [r["per_part"] for r in runs]
            cells += [
                f"{mean([j['actor_step'] / a['actor_step'] for j, a in zip(joint, apart, strict=True)]):.2f}",
                f"{mean([j['approx_kl'] for j in joint]):.4f} / {mean([a['approx_kl'] for a in apart]):.4f}",
                f"{mean([j['grad_clip_coef'] for j in joint]):.3f} / "
                f"{mean([a['grad_clip_coef_actor_alone'] for a in apart]):.3f}",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


#: The env of the campaign that chose ``group_value_weights``'s default: MO-Gymnasium's lunar lander, whose side engine
#: term has a small weight and a large raw scale; its "scalarize" contender with equal value weights and with squared
#: ones, and the term
MO_LUNAR = "mo-lunar-lander-v3"
EQUAL_WEIGHTS, SQUARED_WEIGHTS = "mc-scalarize-shared", "mc-scalarize-shared@group_value_weights='squared'"
SMALL_TERM = "side_engine"


def render_group_value_weights(page: Path) -> str:
    """
    Why ``group_value_weights='squared'`` is the "scalarize" default: with equal weights, the share of the critics'
    loss that :data:`SMALL_TERM` takes (its value loss over the groups' sum, each run's mean over training), and the
    final IQMs of both weightings against the single critic, from the runs of the :data:`MO_LUNAR` campaign.
    """
    campaign = next((name for name, data in multi_critic_reports().items() if MO_LUNAR in data["summary"]), None)
    data = report(campaign) if campaign else None
    rows = data["summary"][MO_LUNAR]["contenders"] if data else {}
    if not all(name in rows for name in (EQUAL_WEIGHTS, SQUARED_WEIGHTS, SINGLE)):
        return f"*Pending: the {MO_LUNAR} campaign with {EQUAL_WEIGHTS}, {SQUARED_WEIGHTS} and {SINGLE}.*"
    runs = [run for entry in data["runs"] if entry["contender"] == EQUAL_WEIGHTS and (run := result_file(entry["file"]))]  # type: ignore[index]
    logs = [run["train_logs"] for run in runs]
    shares = [log[f"train/value_loss/{SMALL_TERM}"] / log["train/value_loss"] for log in logs]
    kwargs = runs[0]["kwargs"]
    weight = kwargs["group_weights"][kwargs["reward_groups"].index(SMALL_TERM)]
    equal, squared, single_row = rows[EQUAL_WEIGHTS], rows[SQUARED_WEIGHTS], rows[SINGLE]
    return (
        f'On {MO_LUNAR} ("scalarize", a shared trunk, {budget(data["summary"][MO_LUNAR]["budget"])} steps, seeds '  # type: ignore[index]
        f"{seeds(equal['seeds'])}), the side engine's fuel "
        f"return weighs {weight:g} in the reward, so {weight**2:.2g} of the scalar's squared error; with equal value "
        f"weights its value loss made {min(shares):.0%}-{max(shares):.0%} of the critics' loss (each run's mean over "
        f"training). Final IQMs against the single critic's {interval(single_row, 'final')}: equal weights "
        f'{interval(equal, "final")} ({verdict(equal, single_row, "final")}), `"squared"` '
        f"{interval(squared, 'final')} ({verdict(squared, single_row, 'final')})."
    )


#: The regions this module renders: ``render(page) -> markdown``
REGIONS: dict[str, Callable[[Path], str]] = {
    "group-value-weights": render_group_value_weights,
    "multi-critic-styles": render_multi_critic_styles,
    "multi-critic-styles-fresh": render_multi_critic_styles_fresh,
    "multi-critic-match": render_multi_critic_match,
    "pcgrad-worth": render_pcgrad_worth,
    "clip-ab": render_clip_ab,
}
