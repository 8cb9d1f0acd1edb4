"""
The SPO paper's claim where it makes it (issue 56, docs/guide/xppo.md "When SPO pays"): PPO's clip against
``actor_loss='spo'`` with the actor and the critic 7 hidden layers deep (the campaign of kind ``spo-depth``, 1M steps,
5 seeds), and the ratio's deviation at the zoo's own depth (kind ``spo-depth-short``, 100k steps, 3 seeds). A
campaign's contenders say their loss and depth by their overrides (``@actor_loss``, ``@depth``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.layout import CAMPAIGNS
from harness.regions import results
from harness.regions.figures import budget, interval, seeds, verdict
from harness.regions.results import link, the_campaign
from harness.train_logs import PLOT

#: The envs, and their zoo entries' width (Hopper's 256 ReLU units, Walker2d's SB3 default of 64 tanh)
ENVS = {"Hopper-v5": 256, "Walker2d-v5": 64}
#: The losses, the baseline first
LOSSES = ("clip", "spo")
#: The paper's depth; the zoo's is 2
DEPTH, ZOO_DEPTH = 7, 2
#: The campaigns: kind, seeds per env and loss, and their number of runs
DEEP, SHORT = "spo-depth", "spo-depth-short"
SEEDS = {DEEP: 5, SHORT: 3}
RUNS = {kind: n * len(ENVS) * len(LOSSES) for kind, n in SEEDS.items()}
#: The page and section of the ratio statistics and this region, which the decision table links to
PAGE, ANCHOR = "docs/guide/xppo.md", "when-spo-pays-the-ratio-statistics"


def contender_of(kind: str, loss: str) -> str:
    """The contender of ``loss`` in the campaign of ``kind`` (the deep one's: :data:`DEPTH` layers of the entry's width)."""
    return f"xppo@actor_loss='{loss}'" + (f"@depth={DEPTH}" if kind == DEEP else "")


def rows(kind: str) -> dict[str, dict[str, dict[str, Any]]]:
    """Per env and loss: the campaign's summary row (with its ``train_logs`` row as ``ratio``), the finished ones."""
    found = the_campaign(kind)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    if found is None:
        return out
    data = found[1]
    for env_id in ENVS:
        contenders = data["summary"].get(env_id, {}).get("contenders", {})
        logs = data.get("train_logs", {}).get(env_id, {})
        for loss in LOSSES:
            name = contender_of(kind, loss)
            if name in contenders:
                out.setdefault(env_id, {})[loss] = {**contenders[name], "ratio": logs.get(name, {})}
    return out


def runs_done(kind: str) -> int:
    """How many of the campaign's runs its report holds."""
    return sum(len(row["seeds"]) for env in rows(kind).values() for row in env.values())


def complete(kind: str) -> bool:
    """Whether every run of the campaign is in its report."""
    return runs_done(kind) == RUNS[kind]


def _stat(row: dict[str, Any], key: str, span: str) -> float | None:
    return row["ratio"].get(key, {}).get(span)


def _cell(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def returns_table() -> list[str]:
    """The deep campaign's returns, per env: SPO's final and curve IQMs against PPO's clip, and the verdicts."""
    lines = [
        "| env (7 hidden layers, budget) | seeds: clip / spo | final IQM [95% interval]: clip / spo | "
        "curve IQM [95% interval]: clip / spo | verdict of spo: final, curve |",
        "| --- | --- | --- | --- | --- |",
    ]
    for env_id, found in rows(DEEP).items():
        if len(found) < len(LOSSES):
            continue
        clip, spo = found["clip"], found["spo"]
        full = min(len(clip["seeds"]), len(spo["seeds"])) == SEEDS[DEEP]
        verdicts = f"{verdict(spo, clip, 'final')}, {verdict(spo, clip, 'curve')}" if full else "pending"
        lines.append(
            f"| {env_id} ({ENVS[env_id]} units, {budget(the_campaign(DEEP)[1]['summary'][env_id]['budget'])}) | "  # type: ignore[index]
            f"{seeds(clip['seeds'])} / {seeds(spo['seeds'])} | {interval(clip, 'final')} / {interval(spo, 'final')} | "
            f"{interval(clip, 'curve')} / {interval(spo, 'curve')} | {verdicts} |"
        )
    return lines


def ratio_table() -> list[str]:
    """Per env, depth and loss: the mean ``|r - 1|`` and clip fraction over the first 100k steps and the whole run."""
    lines = [
        "| env | hidden layers | budget | loss | seeds | mean \\|r - 1\\|, first 100k steps | mean \\|r - 1\\|, whole run | "
        "clip fraction, first 100k steps / whole run | clip range |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for env_id, width in ENVS.items():
        for kind, depth in ((SHORT, ZOO_DEPTH), (DEEP, DEPTH)):
            found = rows(kind).get(env_id, {})
            for loss in LOSSES:
                if loss not in found or not found[loss]["ratio"]:
                    continue
                row = found[loss]
                env_budget = the_campaign(kind)[1]["summary"][env_id]["budget"]  # type: ignore[index]
                lines.append(
                    f"| {env_id} | {depth} x {width} | {budget(env_budget)} | `{loss}` | {seeds(row['ratio']['seeds'])} | "
                    f"{_cell(_stat(row, 'ratio_deviation', 'early'))} | {_cell(_stat(row, 'ratio_deviation', 'run'))} | "
                    f"{_cell(_stat(row, 'clip_fraction', 'early'))} / {_cell(_stat(row, 'clip_fraction', 'run'))} | "
                    f"{_cell(_stat(row, 'clip_range', 'run'), 2)} |"
                )
    return lines


def mechanism(env_id: str) -> dict[str, bool] | None:
    """
    The paper's mechanism on ``env_id``, once both campaigns are complete: PPO's mean ``|r - 1|`` beyond the clip
    range at depth 7 (``exceeds``) and above its own at the zoo's depth over the same first 100k steps (``grows``),
    SPO's within the clip range at depth 7 (``bounded``). None while a campaign runs.
    """
    if not (complete(DEEP) and complete(SHORT)):
        return None
    deep, short = rows(DEEP)[env_id], rows(SHORT)[env_id]
    clip_range = _stat(deep["clip"], "clip_range", "run")
    values = (
        _stat(deep["clip"], "ratio_deviation", "run"),
        _stat(deep["clip"], "ratio_deviation", "early"),
        _stat(short["clip"], "ratio_deviation", "early"),
        _stat(deep["spo"], "ratio_deviation", "run"),
    )
    if clip_range is None or any(v is None for v in values):
        return None
    ppo_run, ppo_deep_early, ppo_zoo_early, spo_run = values
    return dict(
        exceeds=ppo_run > clip_range,  # type: ignore[operator]
        grows=ppo_deep_early > ppo_zoo_early,  # type: ignore[operator]
        bounded=spo_run <= clip_range,  # type: ignore[operator]
    )


def spo_verdicts() -> dict[str, dict[str, str]]:
    """Per env, SPO's verdict against PPO's clip at 7 hidden layers on the final and the curve return (complete runs)."""
    deep = rows(DEEP)
    return {e: {m: verdict(deep[e]["spo"], deep[e]["clip"], m) for m in ("final", "curve")} for e in ENVS}


def answer() -> str:
    """The campaign's answer in one sentence, or how many runs are done while it runs."""
    done = {kind: runs_done(kind) for kind in RUNS}
    if not (complete(DEEP) and complete(SHORT)):
        return (
            f"{done[DEEP]} of {RUNS[DEEP]} runs at 7 hidden layers and {done[SHORT]} of {RUNS[SHORT]} at the zoo's depth "
            "done; verdict pending."
        )
    verdicts = spo_verdicts()
    returns_ahead = {e: [m for m, v in found.items() if v == "ahead"] for e, found in verdicts.items()}
    ahead = [e for e, measures in returns_ahead.items() if measures]
    behind = [e for e, found in verdicts.items() if found["final"] == "behind"]
    held = {e: mechanism(e) for e in ENVS}
    mechanism_everywhere = all(m is not None and all(m.values()) for m in held.values())
    ratio_words = "; ".join(
        f"{e}: PPO's mean |r - 1| at depth 7 {'beyond' if m['exceeds'] else 'within'} its clip range over the run "
        f"and {'above' if m['grows'] else 'not above'} the zoo depth's over the first 100k steps, SPO's "
        f"{'within' if m['bounded'] else 'beyond'} the range"
        for e, m in held.items()
        if m is not None
    )
    if len(ahead) == len(ENVS) and mechanism_everywhere:
        lead = "Reproduced: at 7 hidden layers SPO is ahead of PPO's clip on both envs"
    elif ahead or any(m is not None and any(m.values()) for m in held.values()):
        where = (
            "SPO ahead of PPO's clip on " + ", ".join(f"{e} ({' and '.join(returns_ahead[e])} return)" for e in ahead)
            if ahead
            else "SPO's return level with PPO's or behind"
        )
        lead = f"Partly reproduced: at 7 hidden layers {where}"
    else:
        lead = "Not reproduced here: at 7 hidden layers SPO is not ahead of PPO's clip on either env"
    if behind:
        lead += f" (behind on final return: {', '.join(behind)})"
    return f"{lead}; {ratio_words}."


def spo_claim() -> str | None:
    """
    The decision table's evidence for ``actor_loss='spo'``: whether it paid at 7 hidden layers (on the envs where it is
    ahead of PPO's clip on the final or the curve return), then the deep campaign's verdicts; None while it runs.
    """
    if not complete(DEEP):
        return None
    verdicts = spo_verdicts()
    ahead = [e for e, v in verdicts.items() if "ahead" in v.values()]
    lead = f"pays at 7 hidden layers on {', '.join(ahead)}" if ahead else "did not pay here, even at 7 hidden layers"
    parts = "; ".join(f"{e}: final {v['final']}, curve {v['curve']}" for e, v in verdicts.items())
    return f"{lead}; against PPO's clip (1M steps, seeds {seeds(rows(DEEP)[next(iter(ENVS))]['spo']['seeds'])}): {parts}"


def pending_claim() -> str:
    """The decision table's evidence while the deep campaign runs."""
    return f"pending: {runs_done(DEEP)} of {RUNS[DEEP]} runs at 7 hidden layers done"


def render_spo_depth(page: Path) -> str:
    """The deep campaign's returns, the ratio's deviation per depth and loss, the plots, and the answer."""
    text = (
        "Hopper-v5 and Walker2d-v5 on rl-zoo3's PPO entries, the actor and the critic 7 hidden layers of the entry's "
        f"width (the paper's depth; the entries have 2), 1M steps, seeds 0-{SEEDS[DEEP] - 1}: PPO's clip "
        f"(`actor_loss='clip'`) against `actor_loss='spo'`; at the entries' own depth, 100k steps, seeds "
        f"0-{SEEDS[SHORT] - 1}, for the ratio. Final and curve returns: IQM over seeds with 95% intervals (rliable).\n\n"
    )
    returns = returns_table()
    text += "\n".join(returns) if len(returns) > 2 else "*No env has runs of both losses at 7 hidden layers yet.*"
    ratios = ratio_table()
    text += "\n\nThe probability ratio over training (its mean over each run's `train()` calls, mean over seeds):\n\n"
    text += "\n".join(ratios) if len(ratios) > 2 else "*No run has recorded the ratio's statistics yet.*"
    for kind, label in ((SHORT, "the zoo's depth, 100k steps"), (DEEP, "7 hidden layers, 1M steps")):
        if (found := the_campaign(kind)) is not None and "train_logs" in found[1]:
            path = link(page, results.RESULTS / CAMPAIGNS / found[0] / PLOT)
            text += f"\n\n![Mean |r - 1| and clip fraction per train() over training, per loss: {label}]({path})"
    return text + f"\n\n**Answer:** {answer()}"


#: The regions this module renders: ``render(page) -> markdown``
REGIONS: dict[str, Callable[[Path], str]] = {"spo-depth": render_spo_depth}
