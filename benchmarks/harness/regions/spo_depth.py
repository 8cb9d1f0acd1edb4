"""
The SPO paper's claim where it makes it (issue 56, docs/guide/xppo.md "When SPO pays"): PPO's clip against
``actor_loss='spo'`` with the actor and the critic 7 hidden layers deep (the campaign of kind ``spo-depth``, 1M steps,
5 seeds), and the ratio's deviation at the zoo's own depth (kind ``spo-depth-short``, 100k steps, 3 seeds). A
campaign's contenders say their loss and depth by their overrides (``@actor_loss``, ``@depth``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from harness.layout import CAMPAIGNS
from harness.regions import results
from harness.regions.figures import budget, interval, seed_robust_verdict, seeds
from harness.regions.results import link, the_campaign
from harness.reports import resumed_runs
from harness.train_logs import PLOT

#: The envs, and their zoo entries' width (Hopper's 256 ReLU units, Walker2d's SB3 default of 64 tanh)
ENVS = {"Hopper-v5": 256, "Walker2d-v5": 64}
#: The losses, the baseline first
LOSSES = ("clip", "spo")
#: The campaign's depth (the paper's "7 layers" count the output; its actor has 6 hidden ones); the zoo's is 2
DEPTH, ZOO_DEPTH = 7, 2
#: The zoo entries the campaigns ran, and the paper's setup as its authors' code runs it (benchmarks/spo_paper.yml)
ZOO_ENTRIES, PAPER_ENTRY = "benchmarks/zoo_mujoco_v5.yml", "benchmarks/spo_paper.yml"
#: An evaluation below this share of the run's best so far is a collapse
COLLAPSE = 0.25
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
                row = {**contenders[name], "ratio": logs.get(name, {})}
                out.setdefault(env_id, {})[loss] = {**_from_runs(data, env_id, name, row), **row}
    return out


def _from_runs(data: dict[str, Any], env_id: str, name: str, row: dict[str, Any]) -> dict[str, Any]:
    """
    What a report written before its summary rows held them gives only in its runs' files: the curve return per seed
    and the runs resumed mid-way (read from the run files the report cites; nothing where it cites none).
    """
    if "curve_per_seed" in row:
        return {}
    cited = sorted((r for r in data.get("runs", []) if r["env"] == env_id and r["contender"] == name), key=lambda r: r["seed"])
    found = [run for r in cited if r.get("file") and (run := results.result_file(r["file"])) is not None]
    if [run["seed"] for run in found] != row["seeds"]:
        return {}
    return {
        "curve_per_seed": [run["curve_mean"] for run in found],
        "resumed": [{"seed": run["seed"], "at": run["resumed_at"]} for run in found if run.get("resumed_at")],
        "resumed_unrecorded": sum("resumed_at" not in run for run in found),
    }


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


def _entry(path: str, env_id: str) -> dict[str, Any]:
    with open(results.ROOT / path) as f:
        return yaml.safe_load(f)[env_id]


def _arch(entry: dict[str, Any]) -> tuple[list[int], list[int], str]:
    """The actor's and the critic's hidden widths and the activation an entry's ``policy_kwargs`` string gives (SB3's
    defaults, 64-64 tanh, where it gives none)."""
    kwargs = str(entry.get("policy_kwargs", ""))
    widths = {
        side: [int(w) for w in found[1].split(",")]
        for side in ("pi", "vf")
        if (found := re.search(rf"{side}=\[([^\]]*)\]", kwargs))
    }
    activation = found[1] if (found := re.search(r"activation_fn=nn\.(\w+)", kwargs)) else "Tanh"
    return widths.get("pi", [64, 64]), widths.get("vf", [64, 64]), activation


def _layers(widths: list[int]) -> str:
    return f"{len(widths)} x {widths[0]}" if len(set(widths)) == 1 else "-".join(map(str, widths))


def setup_of(entry: dict[str, Any], depth: int | None, steps: float) -> list[str]:
    """A run's setup in the setup table's rows: actor, critic, clip range, rollout, minibatches, learning rate, budget."""
    pi, vf, activation = _arch(entry)
    if depth is not None:  # (the campaign's @depth: every hidden layer of both networks the entry's width)
        pi, vf = [pi[0]] * depth, [vf[0]] * depth
    rollout = entry.get("n_envs", 1) * entry["n_steps"]
    rate = entry.get("learning_rate", 3e-4)
    rate = f"{rate.removeprefix('lin_')}, linear to 0" if isinstance(rate, str) else f"{rate:.2g}, constant"
    return [
        f"{_layers(pi)}, {activation}",
        _layers(vf),
        f"{entry.get('clip_range', 0.2):g}",
        f"{entry.get('n_envs', 1)} x {entry['n_steps']}",
        f"{rollout // entry['batch_size']} of {entry['batch_size']} x {entry['n_epochs']} epochs",
        rate,
        budget(int(steps)),
    ]


def setup_table() -> list[str]:
    """The deep campaign's setup per env beside the SPO paper's (its authors' MuJoCo code, benchmarks/spo_paper.yml)."""
    paper_entry = _entry(PAPER_ENTRY, "Walker2d-v5")
    columns = {"the SPO paper (its code, MuJoCo)": setup_of(paper_entry, None, paper_entry["n_timesteps"])}
    found = the_campaign(DEEP)
    for env_id in ENVS:
        steps = found[1]["summary"].get(env_id, {}).get("budget", 1e6) if found else 1e6
        columns[f"this campaign: {env_id}"] = setup_of(_entry(ZOO_ENTRIES, env_id), DEPTH, steps)
    names = ["actor (hidden layers)", "critic (hidden layers)", "clip range", "envs x steps", "minibatches x epochs"]
    names += ["learning rate", "budget (steps)"]
    lines = ["| | " + " | ".join(columns) + " |", "| --- " * (len(columns) + 1) + "|"]
    for i, name in enumerate(names):
        lines.append(f"| {name} | " + " | ".join(column[i] for column in columns.values()) + " |")
    return lines


def per_seed(row: dict[str, Any], metric: str) -> dict[int, float]:
    """A summary row's ``final`` or ``curve`` return by seed."""
    return dict(zip(row["seeds"], row[f"{metric}_per_seed"], strict=True))


def collapses(kind: str = DEEP) -> tuple[dict[str, dict[str, list[str]]], int]:
    """
    Per env and loss, the runs of the campaign that collapsed mid-run: an evaluation below :data:`COLLAPSE` of the
    run's best so far, each as ``"seed 0 (991 at 50k to 26 at 300k, 1011 at the end)"`` (its deepest fall).

    :return: those, and how many of the campaign's runs had evaluations to read
    """
    found = the_campaign(kind)
    out: dict[str, dict[str, list[str]]] = {}
    read = 0
    for reference in found[1].get("runs", []) if found else []:
        run = results.result_file(reference["file"]) if reference.get("file") else None
        if run is None or not run.get("eval_means"):
            continue
        read += 1
        means, steps = run["eval_means"], run["eval_steps"]
        best, at, fall = means[0], 0, (0.0, 0, 0)
        for i, value in enumerate(means):
            if value > best:
                best, at = value, i
            if best - value > fall[0]:
                fall = (best - value, at, i)
        _, top, bottom = fall
        if means[bottom] < COLLAPSE * means[top]:
            loss = next(loss for loss in LOSSES if reference["contender"] == contender_of(kind, loss))
            out.setdefault(reference["env"], {}).setdefault(loss, []).append(
                f"seed {reference['seed']} ({means[top]:.0f} at {budget(steps[top])} to {means[bottom]:.0f} at "
                f"{budget(steps[bottom])}, {means[-1]:.0f} at the end)"
            )
    return out, read


def collapse_words() -> str:
    """:func:`collapses` in a sentence ("" when no run has evaluations to read)."""
    found, read = collapses()
    if not read:
        return ""
    parts = []
    for env_id in ENVS:
        losses = found.get(env_id, {})
        said = "; ".join(f"`{loss}` on {', '.join(losses[loss])}" for loss in LOSSES if loss in losses)
        parts.append(f"{env_id}: {said or 'none'}")
    return (
        f"Collapses mid-run (an evaluation below {COLLAPSE:.0%} of the run's best so far; its deepest fall): "
        + "; ".join(parts)
        + "."
    )


def returns_table() -> list[str]:
    """
    The deep campaign's returns, per env: SPO's final and curve IQMs against PPO's clip, the difference of the IQMs with
    its bootstrap interval, and the verdicts (:func:`~harness.regions.figures.seed_robust_verdict`).
    """
    lines = [
        "| env (7 hidden layers, budget) | seeds: clip / spo | final IQM [95% interval]: clip / spo | "
        "curve IQM [95% interval]: clip / spo | spo - clip, final / curve [95% interval] | verdict of spo: final, curve |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    verdicts = spo_verdicts()
    for env_id, found in rows(DEEP).items():
        if len(found) < len(LOSSES):
            continue
        clip, spo = found["clip"], found["spo"]
        if env_id in verdicts:
            final, curve = verdicts[env_id]["final"], verdicts[env_id]["curve"]
            differences = f"{_difference(final)} / {_difference(curve)}"
            said = f"{final['verdict']} (p = {final['p']:.3f}), {curve['verdict']} (p = {curve['p']:.3f})"
        else:
            differences, said = "-", "pending"
        lines.append(
            f"| {env_id} ({ENVS[env_id]} units, {budget(the_campaign(DEEP)[1]['summary'][env_id]['budget'])}) | "  # type: ignore[index]
            f"{seeds(clip['seeds'])} / {seeds(spo['seeds'])} | {interval(clip, 'final')} / {interval(spo, 'final')} | "
            f"{interval(clip, 'curve')} / {interval(spo, 'curve')} | {differences} | {said} |"
        )
    return lines


def _difference(found: dict[str, Any]) -> str:
    difference, low, high = found["difference"]
    return f"{difference:+.1f} [{low:+.1f}, {high:+.1f}]"


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


def spo_verdicts() -> dict[str, dict[str, dict[str, Any]]]:
    """
    Per env with every seed of both losses in, SPO's verdict against PPO's clip at 7 hidden layers on the final and the
    curve return: the exact rank test over seeds, which must hold without any one seed
    (:func:`~harness.regions.figures.seed_robust_verdict`).
    """
    out = {}
    for env_id, found in rows(DEEP).items():
        if len(found) == len(LOSSES) and min(len(row["seeds"]) for row in found.values()) == SEEDS[DEEP]:
            out[env_id] = {
                metric: seed_robust_verdict(per_seed(found["spo"], metric), per_seed(found["clip"], metric))
                for metric in ("final", "curve")
            }
    return out


def _words(verdicts: dict[str, dict[str, dict[str, Any]]], word: str) -> dict[str, list[str]]:
    """The envs where some return's verdict is ``word``, with those returns."""
    found = {e: [m for m, v in by.items() if v["verdict"] == word] for e, by in verdicts.items()}
    return {e: measures for e, measures in found.items() if measures}


def answer() -> str:
    """The campaign's answer in one sentence, or how many runs are done while it runs."""
    done = {kind: runs_done(kind) for kind in RUNS}
    if not (complete(DEEP) and complete(SHORT)):
        return (
            f"{done[DEEP]} of {RUNS[DEEP]} runs at 7 hidden layers and {done[SHORT]} of {RUNS[SHORT]} at the zoo's depth "
            "done; verdict pending."
        )
    verdicts = spo_verdicts()
    ahead, unsure = _words(verdicts, "ahead"), _words(verdicts, "inconclusive")
    behind = [e for e, found in verdicts.items() if found["final"]["verdict"] == "behind"]
    held = {e: mechanism(e) for e in ENVS}
    mechanism_everywhere = all(m is not None and all(m.values()) for m in held.values())
    ratio_words = "; ".join(
        f"{e}: PPO's mean |r - 1| at depth 7 {'beyond' if m['exceeds'] else 'within'} its clip range over the run "
        f"and {'above' if m['grows'] else 'not above'} the zoo depth's over the first 100k steps, SPO's "
        f"{'within' if m['bounded'] else 'beyond'} the range"
        for e, m in held.items()
        if m is not None
    )
    steps = budget(the_campaign(DEEP)[1]["summary"][next(iter(ENVS))]["budget"])  # type: ignore[index]
    if len(ahead) == len(ENVS) and mechanism_everywhere:
        lead = "Reproduced: at 7 hidden layers SPO is ahead of PPO's clip on both envs"
    elif ahead:
        where = ", ".join(f"{e} ({' and '.join(ahead[e])} return)" for e in ahead)
        lead = f"Partly reproduced: at 7 hidden layers SPO ahead of PPO's clip on {where}"
    elif unsure:
        where = ", ".join(
            f"{e}'s {' and '.join(unsure[e])} return (level without seed "
            f"{seeds([s for s, side in verdicts[e][unsure[e][0]]['without'].items() if side != 'ahead'])})"
            for e in unsure
        )
        lead = (
            f"Inconclusive at {steps} steps: SPO is ahead of PPO's clip with every seed, but the lead does not survive "
            f"dropping one seed on {where}"
        )
    elif any(m is not None and any(m.values()) for m in held.values()):
        lead = "Partly reproduced: at 7 hidden layers SPO's return level with PPO's or behind"
    else:
        lead = "Not reproduced here: at 7 hidden layers SPO is not ahead of PPO's clip on either env"
    if behind:
        lead += f" (behind on final return: {', '.join(behind)})"
    return f"{lead}; {ratio_words}."


def spo_claim() -> str | None:
    """
    The decision table's evidence for ``actor_loss='spo'``: whether it paid at 7 hidden layers (on the envs where it is
    ahead of PPO's clip on the final or the curve return, without any one seed too), then the deep campaign's verdicts;
    None while it runs.
    """
    if not complete(DEEP):
        return None
    verdicts = spo_verdicts()
    ahead, unsure = _words(verdicts, "ahead"), _words(verdicts, "inconclusive")
    steps = budget(the_campaign(DEEP)[1]["summary"][next(iter(ENVS))]["budget"])  # type: ignore[index]
    if ahead:
        lead = f"pays at 7 hidden layers on {', '.join(ahead)}"
    elif unsure:
        lead = f"inconclusive at 7 hidden layers and {steps} steps (one seed carries SPO's lead on {', '.join(unsure)})"
    else:
        lead = "did not pay here, even at 7 hidden layers"
    parts = "; ".join(f"{e}: final {v['final']['verdict']}, curve {v['curve']['verdict']}" for e, v in verdicts.items())
    return f"{lead}; against PPO's clip ({steps} steps, seeds {seeds(rows(DEEP)[next(iter(ENVS))]['spo']['seeds'])}): {parts}"


def pending_claim() -> str:
    """The decision table's evidence while the deep campaign runs."""
    return f"pending: {runs_done(DEEP)} of {RUNS[DEEP]} runs at 7 hidden layers done"


def resumed_words() -> str:
    """The deep campaign's runs resumed mid-way, per env ("" when none)."""
    found = rows(DEEP)
    by_name = {env_id: {contender_of(DEEP, loss): row for loss, row in env.items()} for env_id, env in found.items()}
    parts = [f"{env_id}: {said}" for env_id, env in by_name.items() if (said := resumed_runs(env))]
    unrecorded = sum(row.get("resumed_unrecorded", 0) for env in found.values() for row in env.values())
    text = f"Resumed mid-way from a checkpoint: {'; '.join(parts)}." if parts else ""
    if unrecorded:
        text += f" {unrecorded} runs were made before runs recorded their resumes, and do not say whether they were."
    return text.strip()


def render_spo_depth(page: Path) -> str:
    """The setups, the deep campaign's returns, the ratio's deviation per depth and loss, the plots, and the answer."""
    text = (
        "Hopper-v5 and Walker2d-v5 on rl-zoo3's PPO entries, the actor and the critic deepened to 7 hidden layers of the "
        f"entry's width (the entries have 2), seeds 0-{SEEDS[DEEP] - 1}: PPO's clip (`actor_loss='clip'`) against "
        f"`actor_loss='spo'`; at the entries' own depth, 100k steps, seeds 0-{SEEDS[SHORT] - 1}, for the ratio. This is "
        "not the paper's setup, which deepens the actor only and trains 10 times longer:\n\n"
    )
    text += "\n".join(setup_table()) + "\n\n"
    text += (
        "Final and curve returns: IQM over seeds with 95% intervals (rliable). A verdict is the exact rank test over "
        "seeds (Mann-Whitney U, two-sided, 5% level), which must hold without any one seed too; a lead that dropping "
        "one seed takes away is *inconclusive*. The difference of the IQMs and its bootstrap interval give the size.\n\n"
    )
    returns = returns_table()
    text += "\n".join(returns) if len(returns) > 2 else "*No env has runs of both losses at 7 hidden layers yet.*"
    for words in (resumed_words(), collapse_words()):
        if words:
            text += f"\n\n{words}"
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
