"""
The regions of the learning campaigns (``benchmarks/learning.py``): the preset's confirmation, the screens' best
option, the tuned zoo entries, the third wave's screens and their confirmations, EnvPool's learning equivalence and
the list of every campaign. A campaign is found by the ``kind`` its ``report.json`` declares
(:func:`harness.regions.results.campaigns_of`), not by its folder's name.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import layout
from harness.regions import results
from harness.regions.figures import budget, cell, interval, said, seeds, steps, table_with_pending, tally, verdict
from harness.regions.results import campaign_reports, campaign_with, campaigns_of, report, the_campaign

#: The baseline of every learning campaign: SB3 PPO with the zoo's entry
PPO = "ppo"
#: ``xppo_recommended``'s contender
PRESET = "xppo-recommended"
#: The screen's best loss option, against PPO in the campaign of kind ``defaults``
DEFAULTS_OPTION = "xppo-asymmetric_spo-mse-mb"


def rows_of(campaign: str, env_id: str) -> dict[str, dict[str, Any]]:
    """The summary rows of one env of a campaign, by contender (empty when the report or env is missing)."""
    found = report(campaign)
    return {} if found is None else found["summary"].get(env_id, {}).get("contenders", {})


def comparisons(kind: str, contender: str) -> list[tuple[str, int, dict[str, Any], dict[str, Any]]]:
    """(env, budget, contender's row, PPO's row) for every env of the campaigns of ``kind`` where both ran."""
    found = []
    for data in campaigns_of(kind).values():
        for env_id, env_summary in data["summary"].items():
            rows = env_summary["contenders"]
            if contender in rows and PPO in rows:
                found.append((env_id, env_summary["budget"], rows[contender], rows[PPO]))
    return found


def recommended_claim() -> str | None:
    """The headline verdict of ``xppo_recommended`` against PPO (None before its confirmation)."""
    found = comparisons("recommended", PRESET)
    if not found:
        return None
    curve, final = tally(found, "curve"), tally(found, "final")
    return (
        f"curve (learning speed) {said(curve, len(found), names=False)}; final return {said(final, len(found), names=False)}"
    )


#: What a ratio of a campaign's ``train_seconds`` is: means over learning runs, not a paired timing
TRAIN_SECONDS_WORDS = "means over runs made at different times, not paired"


def zoo_claim() -> str | None:
    """The tuned LunarLander entries' steps to 200 against the preset's and PPO's, final verdict and ``train()`` time."""
    if (found := the_campaign("zoo-entries")) is None:
        return None
    envs = found[1]["summary"]
    rows = [env_summary["contenders"] for env_summary in envs.values()]
    seed_words = seeds(rows[0]["xppo-zoo"]["seeds"])

    def each(cell: Callable[[dict[str, dict[str, Any]]], str]) -> str:
        return " / ".join(cell(r) for r in rows)

    def train_ratio(r: dict[str, dict[str, Any]]) -> str:
        return f"{r['xppo-zoo']['train_seconds'] / r[PPO]['train_seconds']:.2f}x"

    return (
        f"{' / '.join(envs)}: 200 after {each(lambda r: steps(r['xppo-zoo'], False))} env steps (the preset "
        f"`xppo_recommended` {each(lambda r: steps(r[PRESET], False))}, PPO {each(lambda r: steps(r[PPO], False))}; "
        f"medians, seeds {seed_words}); final return {each(lambda r: verdict(r['xppo-zoo'], r[PRESET], 'final'))} "
        "with the preset's; "
        f"their runs spent {each(train_ratio)} PPO's runs' `train()` seconds ({TRAIN_SECONDS_WORDS}; more updates per "
        "env step)"
    )


def comparison_table(found: list[tuple[str, int, dict[str, Any], dict[str, Any]]], name: str) -> str:
    """Per env: the contender's final and curve IQMs against PPO's, steps to the threshold, and the verdicts."""
    lines = [
        f"| env (budget, seeds) | final IQM [95% interval]: {name} / PPO | curve IQM [95% interval]: {name} / PPO | "
        f"steps to threshold, median (seeds reaching it): {name} / PPO | verdict: final, curve |",
        "| --- | --- | --- | --- | --- |",
    ]
    for env_id, env_budget, row, base in found:
        lines.append(
            f"| {env_id} ({budget(env_budget)}, seeds {seeds(row['seeds'])}) | {interval(row, 'final')} / "
            f"{interval(base, 'final')} | {interval(row, 'curve')} / {interval(base, 'curve')} | {steps(row)} / "
            f"{steps(base)} | {verdict(row, base, 'final')}, {verdict(row, base, 'curve')} |"
        )
    return "\n".join(lines)


def render_recommended(page: Path) -> str:
    """``xppo_recommended`` against PPO at PPO's hyperparameters: the confirmation's table."""
    found = comparisons("recommended", PRESET)
    if not found:
        return "*The confirmation of `xppo_recommended` has no report yet.*"
    return comparison_table(found, "preset")


def render_defaults(page: Path) -> str:
    """The screen's best option, ``asymmetric_spo``, against PPO on five envs (the ``final`` campaign)."""
    found = comparisons("defaults", DEFAULTS_OPTION)
    return comparison_table(found, "asymmetric_spo") if found else "*The `final` campaign has no report yet.*"


def render_zoo_entries(page: Path) -> str:
    """XPPO's tuned LunarLander entries against the preset and PPO (the campaign of kind ``zoo-entries``)."""
    if (found := the_campaign("zoo-entries")) is None:
        return "*The `confirmation_zoo` campaign has no report yet.*"
    data = found[1]
    names = {"xppo-zoo": "tuned entry (`xppo.yml`)", PRESET: "`xppo_recommended`", PPO: "PPO (zoo)"}
    lines = [
        "| env | contender | final IQM [95% interval] | curve IQM [95% interval] | steps to 200, median (seeds) | "
        f"`train()` seconds per run ÷ PPO's ({TRAIN_SECONDS_WORDS}) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for env_id, env_summary in data["summary"].items():
        rows = env_summary["contenders"]
        ppo_train = rows[PPO].get("train_seconds")
        for contender, label in names.items():
            if contender in rows:
                row = rows[contender]
                ratio = f"{row['train_seconds'] / ppo_train:.2f}x" if row.get("train_seconds") and ppo_train else "-"
                lines.append(
                    f"| {env_id} | {label} | {interval(row, 'final')} | {interval(row, 'curve')} | {steps(row)} | {ratio} |"
                )
    return "\n".join(lines)


def render_campaigns(page: Path) -> str:
    """
    Every campaign: its report, its question, its seeds and its runs by provenance; the archived ones (which no other
    region reads) after the live ones, under their ``archive/`` folder, so that no campaign a page cites drops out.
    """
    lines = [
        "| campaign (`benchmarks/results/campaigns/...`) | question | runs: current / unverified / stale (left out) |",
        "| --- | --- | --- |",
    ]
    for campaign, data in (campaign_reports() | campaign_reports(archived=True)).items():
        provenance = data.get("provenance", {})
        counts = " / ".join(str(len(provenance.get(k, []))) for k in ("current", "unverified", "stale"))
        lines.append(f"| `{campaign}` | {cell(data.get('question') or '-')} | {counts} |")
    return "\n".join(lines)


#: The envs of EnvPool's learning-equivalence campaign (kind ``envpool-equivalence``), and its seeds per side
ENVPOOL_ENVS, ENVPOOL_SEEDS = ("LunarLander-v3", "Hopper-v5"), 5


def render_envpool_equivalence(page: Path) -> str:
    """
    PPO's zoo entry trained on EnvPool's envs against gymnasium's, both evaluated on gymnasium's: the final IQMs and
    whether their 95% CIs overlap ("level" is the equivalence the backend needs), per env once both sides have
    :data:`ENVPOOL_SEEDS` seeds.
    """
    lines = [
        "| env (budget, seeds) | final IQM [95% interval]: EnvPool / gymnasium | "
        "curve IQM [95% interval]: EnvPool / gymnasium | 95% intervals |",
        "| --- | --- | --- | --- |",
    ]
    pending = []
    summary = found[1]["summary"] if (found := the_campaign("envpool-equivalence")) else {}
    for env_id in ENVPOOL_ENVS:
        rows = summary.get(env_id, {}).get("contenders", {})
        row, base = rows.get("ppo@vec_env='envpool'"), rows.get(PPO)
        if row is None or base is None or min(len(row["seeds"]), len(base["seeds"])) < ENVPOOL_SEEDS:
            done = [0 if side is None else len(side["seeds"]) for side in (row, base)]
            pending.append(f"{env_id} (EnvPool {done[0]}, gymnasium {done[1]} of {ENVPOOL_SEEDS} seeds)")
            continue
        overlap = "overlap" if verdict(row, base, "final") == "level" else f"apart ({verdict(row, base, 'final')})"
        lines.append(
            f"| {env_id} ({budget(summary[env_id]['budget'])}, seeds {seeds(row['seeds'])}) | {interval(row, 'final')} / "
            f"{interval(base, 'final')} | {interval(row, 'curve')} / {interval(base, 'curve')} | {overlap} |"
        )
    return table_with_pending(lines, pending, "*No env of the campaign has finished yet.*")


#: An option against its baseline: (env, contender, baseline, option's name, baseline's name)
OptionEntry = tuple[str, str, str, str, str]
#: The screens of the third wave's options, in the table's order, each found in the campaign of kind ``screen`` that
#: ran its contender on its env
SCREENS: tuple[OptionEntry, ...] = (
    ("Pendulum-v1", "xppo@actor_loss='hpo'", PPO, "`actor_loss='hpo'`", "PPO (zoo)"),
    ("LunarLanderContinuous-v3", "xppo@actor_loss='hpo'", PPO, "`actor_loss='hpo'`", "PPO (zoo)"),
    ("Pendulum-v1", "xppo@adaptive_kl=True", PPO, "`adaptive_kl=True`", "PPO (zoo)"),
    ("LunarLanderContinuous-v3", "xppo@adaptive_kl=True", PPO, "`adaptive_kl=True`", "PPO (zoo)"),
    (
        "Pendulum-v1",
        "xppo@use_sde=False@action_dist='beta'",
        "xppo@use_sde=False",
        "`action_dist='beta'`",
        "Gaussian, `use_sde=False`",
    ),
    ("LunarLanderContinuous-v3", "xppo@action_dist='beta'", PPO, "`action_dist='beta'`", "PPO (zoo)"),
    ("Hopper-v5", "xppo@actor_loss='hpo'", PPO, "`actor_loss='hpo'`", "PPO (zoo)"),
    ("Hopper-v5", "xppo@adaptive_kl=True", PPO, "`adaptive_kl=True`", "PPO (zoo)"),
    ("HalfCheetah-v5", "xppo@adaptive_kl=True", PPO, "`adaptive_kl=True`", "PPO (zoo)"),
    ("BipedalWalker-v3", "xppo@action_dist='beta'", PPO, "`action_dist='beta'`", "PPO (zoo)"),
)
#: A screen row is shown once each side has this many seeds
SCREEN_SEEDS = 3
#: The confirmations the screens earned, on fresh seeds never screened on, in campaigns of kind
#: ``option-confirmation``: entries as :data:`SCREENS`'
CONFIRMATIONS: tuple[OptionEntry, ...] = (("Hopper-v5", "xppo@actor_loss='hpo'", PPO, "`actor_loss='hpo'`", "PPO (zoo)"),)
#: A confirmation row is shown once each side has this many seeds
CONFIRMATION_SEEDS = 10


def option_rows(
    entries: tuple[OptionEntry, ...], kind: str, n_seeds: int
) -> tuple[list[str], list[str], dict[str, list[tuple[str, int, dict[str, Any], dict[str, Any]]]]]:
    """
    The table rows of option-against-baseline entries (as :data:`SCREENS`'), each in its campaign of ``kind``, whose
    both sides have ``n_seeds`` seeds, the pending ones in words, and per option its finished
    ``(env, budget, row, baseline row)``.
    """
    lines, pending = [], []
    finished: dict[str, list[tuple[str, int, dict[str, Any], dict[str, Any]]]] = {}
    for env_id, contender, baseline, name, baseline_name in entries:
        campaign = campaign_with(campaigns_of(kind), env_id, contender)
        rows = {} if campaign is None else rows_of(campaign, env_id)
        row, base = rows.get(contender), rows.get(baseline)
        if row is None or base is None or min(len(row["seeds"]), len(base["seeds"])) < n_seeds:
            done = "no report yet" if not rows else f"{0 if row is None else len(row['seeds'])} of {n_seeds} seeds"
            pending.append(f"{name} on {env_id} ({done})")
            continue
        env_budget = report(campaign)["summary"][env_id]["budget"]  # type: ignore[arg-type,index]
        finished.setdefault(name, []).append((env_id, env_budget, row, base))
        lines.append(
            f"| {name} | {env_id} ({budget(env_budget)}, seeds {seeds(row['seeds'])}; `{campaign}`) | {baseline_name} | "
            f"{interval(row, 'final')} / {interval(base, 'final')} | "
            f"{interval(row, 'curve')} / {interval(base, 'curve')} | {verdict(row, base, 'final')}, "
            f"{verdict(row, base, 'curve')} |"
        )
    return lines, pending, finished


def render_screens(page: Path) -> str:
    """
    The screens of ``actor_loss='hpo'``, ``adaptive_kl`` and ``action_dist='beta'`` (:data:`SCREENS`), each against
    its baseline at the zoo entry's hyperparameters, and the confirmations they earned (:data:`CONFIRMATIONS`); a
    campaign with fewer seeds a side than it needs is listed as pending. An option's verdict waits for all its
    screens, and its claim for its confirmations.
    """
    header = [
        "| option | env (budget, seeds) | against | final IQM [95% interval]: option / baseline | "
        "curve IQM [95% interval]: option / baseline | verdict: final, curve |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    lines, pending, finished = option_rows(SCREENS, "screen", SCREEN_SEEDS)
    text = table_with_pending(header + lines, pending, "*No screen has finished yet.*", "Screens not finished")
    confirmed_lines, confirming, confirmed = option_rows(CONFIRMATIONS, "option-confirmation", CONFIRMATION_SEEDS)
    if confirmed_lines or confirming:
        text += "\n\nThe confirmations, on fresh seeds:\n\n" + table_with_pending(
            header + confirmed_lines, confirming, "*No confirmation has finished yet.*", "Confirmations not finished"
        )
    worth = []
    for name, found in finished.items():
        if any(entry.startswith(f"{name} on ") for entry in pending):
            continue  # its verdict waits for all its screens
        final, curve = tally(found, "final"), tally(found, "curve")
        ahead = sorted(set(final["ahead"]) | set(curve["ahead"]))
        sentence = f"- {name}, every screen done: final return {said(final, len(found))}; curve {said(curve, len(found))}; "
        if not ahead:
            worth.append(sentence + "it is ahead nowhere, so no confirmation is run and nothing recommends it.")
            continue
        sentence += f"it earns a confirmation on {CONFIRMATION_SEEDS} fresh seeds on {', '.join(ahead)}"
        if name in confirmed:
            fresh = confirmed[name]
            sentence += (
                f"; on fresh seeds, final return {said(tally(fresh, 'final'), len(fresh))}, "
                f"curve {said(tally(fresh, 'curve'), len(fresh))}"
            )
            if not any(tally(fresh, metric)["ahead"] for metric in ("final", "curve")):
                sentence += ", so the gain is not confirmed and nothing recommends it"
        running = [entry.removeprefix(f"{name} on ") for entry in confirming if entry.startswith(f"{name} on ")]
        if running:
            sentence += f"; running: {', '.join(running)}"
        worth.append(sentence + ".")
    return text + ("\n\nWhat each option is worth so far:\n\n" + "\n".join(worth) if worth else "")


#: Does ``sequence_batching=True`` learn the same: (env, what runs, the step-by-step contender, its twin with the
#: option); the twins' campaigns declare kind ``sequence-batching``, the step-by-step runs are found in any report that
#: holds them (the memory maze's from ``benchmarks/mask_memory.py``, the others from ``learning.py``)
SEQUENCE_PAIRS = (
    ("sb3_xppo/MemoryMaze-v0", "MaskableRecurrentXPPO, masks", "mask_lstm", "mask_lstm_seq"),
    ("sb3_xppo/MemoryMaze-v0", "RecurrentXPPO, no masks", "lstm", "lstm_seq"),
    ("CartPoleNoVel-v1", "RecurrentPPO / RecurrentXPPO, zoo entry", "recurrentppo", "xppo-lstm@sequence_batching=True"),
)


def _final_row(reports: dict[str, dict[str, Any]], env_id: str, contender: str) -> dict[str, Any] | None:
    """A contender's summary row in the first of ``reports`` that holds it: a mask_memory report (one env, its
    ``summary`` the contenders') or a learning.py report (per env)."""
    for data in reports.values():
        summary = data["summary"]
        rows = summary["contenders"] if "contenders" in summary else summary.get(env_id, {}).get("contenders", {})
        if contender in rows:
            return rows[contender]
    return None


def render_thresholds(page: Path) -> str:
    """Each benchmark env's return threshold for "steps to threshold", from where the harness defines them."""
    from harness.runs import THRESHOLDS  # the run machinery (torch, SB3): imported only to render this region

    listed = ", ".join(f"{env_id} {value:g}" for env_id, value in THRESHOLDS.items())
    return (
        f"The thresholds (`THRESHOLDS` in `benchmarks/harness/runs.py`): {listed}. A multi-critic campaign states "
        'its own in its table (the "reached" column).'
    )


def render_mask_memory(page: Path) -> str:
    """The memory maze's table, as ``benchmarks/mask_memory.py`` writes it from its report (``table.md``)."""
    path = results.RESULTS / layout.CAMPAIGNS / "mask_memory" / "table.md"
    if not path.is_file():
        return "Pending: `python benchmarks/mask_memory.py --workers 2`."
    return path.read_text(encoding="utf-8").strip().replace("95% CI", "95% interval")


def render_sequence_batching_learning(page: Path) -> str:
    """
    Final returns with and without ``sequence_batching`` (:data:`SEQUENCE_PAIRS`): the same seeds, hyperparameters and
    budget, IQM over seeds with 95% intervals, and whether the intervals overlap.
    """
    lines = [
        "| env | algorithm | seeds | final return IQM [95% interval], step by step | `sequence_batching=True` | "
        "95% intervals |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    twins, everything = campaigns_of("sequence-batching"), campaign_reports()
    verdicts, pending = [], []
    for env_id, label, name, twin in SEQUENCE_PAIRS:
        twin_row = _final_row(twins, env_id, twin)
        row = _final_row({**twins, **everything}, env_id, name)
        if row is None or twin_row is None:
            pending.append(env_id)
            continue
        digits = 2 if max(abs(row["final_iqm"]), abs(twin_row["final_iqm"])) < 10 else 1
        cells = [interval(r, "final", digits) for r in (row, twin_row)]
        verdicts.append(verdict(twin_row, row, "final"))
        overlap = "overlap" if verdicts[-1] == "level" else f"apart ({verdicts[-1]})"
        lines.append(f"| {env_id} | {label} | {seeds(twin_row['seeds'])} | {cells[0]} | {cells[1]} | {overlap} |")
    if not verdicts:
        return (
            "Pending: `python benchmarks/mask_memory.py --contenders mask_lstm_seq lstm_seq --campaign mask_memory_sequences "
            "--kind sequence-batching`."
        )
    said_words = (
        "The 95% intervals overlap for every pair"
        if all(v == "level" for v in verdicts)
        else "The 95% intervals are apart for some pair"
    )
    note = f"; not run yet: {', '.join(dict.fromkeys(pending))}" if pending else ""
    return "\n".join(lines + ["", f"{said_words}{note}."])


#: The regions this module renders: ``render(page) -> markdown``
REGIONS: dict[str, Callable[[Path], str]] = {
    "defaults": render_defaults,
    "recommended": render_recommended,
    "zoo-entries": render_zoo_entries,
    "campaigns": render_campaigns,
    "screens": render_screens,
    "envpool-equivalence": render_envpool_equivalence,
    "sequence-batching-learning": render_sequence_batching_learning,
    "mask-memory": render_mask_memory,
    "thresholds": render_thresholds,
}
