"""
Every benchmark result that README.md and the guide quote, rendered from the result JSON under
``benchmarks/results/``: no number of a results table or verdict is typed by hand.

- **Regions**: a page holds ``<!-- generated:NAME -->`` ... ``<!-- /generated -->``; this script writes between the
  two markers what :data:`RENDERERS` ``[NAME]`` makes of the result files (a campaign's ``report.json``, written by
  ``benchmarks/learning.py`` or ``benchmarks/multi_critic.py``; ``speed.json``, ``gae.json``, ``overhead.json``,
  ``distill_LunarLander-v3.json``). A campaign whose report does not exist yet renders as a pending note.
- **Verdicts**: a contender is *ahead* of (or *behind*) its baseline on a metric when the two 95% CIs do not
  overlap, *level* otherwise (:func:`verdict`).
- **Quoted intervals**: :func:`unheld_intervals` lists every ``x [low, high]`` of a page that no result file holds
  at the reports' precision (one or two decimals); ``tests/test_generated_docs.py`` fails on any, and on any region
  that differs from what this script renders.

usage: python benchmarks/render_docs.py            (rewrite the regions of README.md and docs/)
       python benchmarks/render_docs.py --check    (exit 1, naming them, if a region or a quoted interval is off)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
#: The pages whose regions are rendered and whose quoted intervals are checked
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))
#: The folders of run caches: runs, not reports
RUN_CACHES = ("learning_runs", "runs", "multi_critic_lunar_lander")
REGION = re.compile(r"(<!-- generated:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /generated -->)", re.DOTALL)
# a number, then an interval: "267.7 [263.0, 271.0]", "0.88 [0.70, 0.91]", "212 [208, 218]"
NUMBER = r"-?\d+(?:\.\d+)?"
INTERVAL = re.compile(rf"(?<![\w.])({NUMBER}) \[({NUMBER}), ({NUMBER})\]")
#: The env of the multi-critic "must match" campaign, LunarLander-v3's reward in four groups, bit for bit
FAITHFUL_LUNAR = "sb3_xppo/LunarLanderGroups-v3"
PPO = "ppo"
PRESET = "xppo-recommended"


def load(path: Path) -> dict[str, Any] | None:
    """The JSON at ``path``, or None when there is none."""
    if not path.is_file():
        return None
    with open(path) as f:
        return json.load(f)


def report(campaign: str, root: Path | None = None) -> dict[str, Any] | None:
    """The ``report.json`` of a campaign (``"confirmation"``, ``"multi_critic/styles"``), or None when not written."""
    return load((root or RESULTS) / campaign / "report.json")


def campaign_reports(root: Path | None = None) -> dict[str, dict[str, Any]]:
    """Every campaign's report, by its folder relative to ``root`` (``"confirmation"``, ``"multi_critic/styles"``)."""
    root = root or RESULTS
    found = {}
    for path in sorted(root.rglob("report.json")):
        if not any(part in RUN_CACHES for part in path.parts):
            found[path.parent.relative_to(root).as_posix()] = load(path)
    return found


def link(page: Path, target: Path, anchor: str = "") -> str:
    """The relative link from ``page`` to ``target`` (a file, or a page and its ``#anchor``)."""
    return os.path.relpath(target, page.parent).replace(os.sep, "/") + (f"#{anchor}" if anchor else "")


# ---------------------------------------------------------------------------------------------------------- figures


def interval(row: dict[str, Any], metric: str, decimals: int = 1) -> str:
    """``"iqm [low, high]"`` of a summary row's ``final`` or ``curve`` IQM."""
    low, high = row[f"{metric}_iqm_ci"]
    return f"{row[f'{metric}_iqm']:.{decimals}f} [{low:.{decimals}f}, {high:.{decimals}f}]"


def verdict(row: dict[str, Any], base: dict[str, Any], metric: str) -> str:
    """``"ahead"`` or ``"behind"`` when the 95% CIs of ``metric`` are apart, else ``"level"``."""
    (low, high), (base_low, base_high) = row[f"{metric}_iqm_ci"], base[f"{metric}_iqm_ci"]
    if low > base_high:
        return "ahead"
    if high < base_low:
        return "behind"
    return "level"


def steps(row: dict[str, Any], reached: bool = True) -> str:
    """Median steps to the threshold over the seeds that reached it (``"22.5k"``), and how many did."""
    median = row["median_steps_to_threshold"]
    count = f" ({row['reached']}/{len(row['seeds'])})" if reached else ""
    return (f"{median / 1000:g}k" if median is not None else "-") + count


def seeds(values: list[int]) -> str:
    """``[10, 11, ..., 19]`` as ``"10-19"`` (a run of consecutive seeds), else the list."""
    if len(values) > 2 and values == list(range(values[0], values[-1] + 1)):
        return f"{values[0]}-{values[-1]}"
    return ", ".join(map(str, values))


def rows_of(campaign: str, env_id: str) -> dict[str, dict[str, Any]]:
    """The summary rows of one env of a campaign, by contender (empty when the report or env is missing)."""
    found = report(campaign)
    return {} if found is None else found["summary"].get(env_id, {}).get("contenders", {})


def comparisons(campaigns: tuple[str, ...], contender: str) -> list[tuple[str, int, dict[str, Any], dict[str, Any]]]:
    """(env, budget, contender's row, PPO's row) for every env of the campaigns where both ran."""
    found = []
    for campaign in campaigns:
        data = report(campaign)
        for env_id, env_summary in ({} if data is None else data["summary"]).items():
            rows = env_summary["contenders"]
            if contender in rows and PPO in rows:
                found.append((env_id, env_summary["budget"], rows[contender], rows[PPO]))
    return found


def tally(found: list[tuple[str, int, dict[str, Any], dict[str, Any]]], metric: str) -> dict[str, list[str]]:
    """The envs where the contender is ahead, level or behind PPO on ``metric``."""
    counts: dict[str, list[str]] = dict(ahead=[], level=[], behind=[])
    for env_id, _, row, base in found:
        counts[verdict(row, base, metric)].append(env_id)
    return counts


def said(counts: dict[str, list[str]], total: int, names: bool = True) -> str:
    """``"ahead on 3 of 6 (A, B, C), level on 3"``: the verdicts of :func:`tally` in words."""
    parts = []
    for word in ("ahead", "level", "behind"):
        envs = counts[word]
        if envs:
            listed = f" ({', '.join(envs)})" if names and word != "level" else ""
            parts.append(f"{word} on {len(envs)} of {total}{listed}")
    return ", ".join(parts)


def budget(value: int) -> str:
    return f"{value / 1e6:g}M" if value >= 1e6 else f"{value / 1e3:g}k"


# ---------------------------------------------------------------------------------------------------------- regions
CONFIRMATION = ("confirmation", "confirmation_bipedal")


def recommended_claim() -> str | None:
    """The headline verdict of ``xppo_recommended`` against PPO (None before its confirmation)."""
    found = comparisons(CONFIRMATION, PRESET)
    if not found:
        return None
    curve, final = tally(found, "curve"), tally(found, "final")
    return (
        f"curve (learning speed) {said(curve, len(found), names=False)}; final return {said(final, len(found), names=False)}"
    )


def zoo_claim() -> str | None:
    """The tuned LunarLander entries' steps to 200 against the preset's and PPO's, final verdict and ``train()`` cost."""
    data = report("confirmation_zoo")
    if data is None:
        return None
    envs = data["summary"]
    rows = [env_summary["contenders"] for env_summary in envs.values()]

    def each(cell: Callable[[dict[str, dict[str, Any]]], str]) -> str:
        return " / ".join(cell(r) for r in rows)

    return (
        f"{' / '.join(envs)}: 200 after {each(lambda r: steps(r['xppo-zoo'], False))} steps (preset "
        f"{each(lambda r: steps(r[PRESET], False))}, PPO {each(lambda r: steps(r[PPO], False))}); final return "
        f"{each(lambda r: verdict(r['xppo-zoo'], r[PRESET], 'final'))} with the preset's; `train()` "
        f"{each(lambda r: format(r['xppo-zoo']['train_seconds'] / r[PPO]['train_seconds'], '.2f') + 'x')} PPO's"
    )


def comparison_table(found: list[tuple[str, int, dict[str, Any], dict[str, Any]]], name: str) -> str:
    """Per env: the contender's final and curve IQMs against PPO's, steps to the threshold, and the verdicts."""
    lines = [
        f"| env (budget, seeds) | final IQM [95% CI]: {name} / PPO | curve IQM [95% CI]: {name} / PPO | "
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
    found = comparisons(CONFIRMATION, PRESET)
    if not found:
        return "*The confirmation of `xppo_recommended` has no report yet.*"
    return comparison_table(found, "preset")


def render_defaults(page: Path) -> str:
    """The screen's best option, ``asymmetric_spo``, against PPO on five envs (the ``final`` campaign)."""
    found = comparisons(("final",), "xppo-asymmetric_spo-mse-mb")
    return comparison_table(found, "asymmetric_spo") if found else "*The `final` campaign has no report yet.*"


def render_zoo_entries(page: Path) -> str:
    """XPPO's tuned LunarLander entries against the preset and PPO (``confirmation_zoo``)."""
    data = report("confirmation_zoo")
    if data is None:
        return "*The `confirmation_zoo` campaign has no report yet.*"
    names = {"xppo-zoo": "tuned entry (`xppo.yml`)", PRESET: "`xppo_recommended`", PPO: "PPO (zoo)"}
    lines = [
        "| env | contender | final IQM [95% CI] | curve IQM [95% CI] | steps to 200, median (seeds) | train() ÷ PPO's |",
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


def speed_results(vec_env: bool = False) -> dict[str, Any] | None:
    """
    :param vec_env: the rows of XPPO on another VecEnv (``<env id>@<vec env>``) instead of the plain rows, where
        both algorithms step SB3's ``make_vec_env``
    :return: speed.json with only those rows (None without the file)
    """
    data = load(RESULTS / "speed.json")
    if data is None:
        return None
    return {**data, "results": [r for r in data["results"] if ("@" in r["env"]) == vec_env]}


def speed_claim() -> str | None:
    """``learn()``'s env-steps/s against PPO's, per env and contrib parent (median paired ratios)."""
    data = speed_results()
    if data is None:
        return None
    parts = [f"{r['ratio_paired']:.2f}x on {r['env']}" for r in data["results"]]
    parts += [f"{c['name'].split(' / ')[0]} {c['ratio_paired']:.2f}x its parent" for c in data.get("contrib", [])]
    exact = all(r["bit_exact"] for r in data["results"] + data.get("contrib", []))
    return ", ".join(parts) + ("; bit for bit" if exact else "; NOT bit-exact")


def render_speed(page: Path) -> str:
    """``learn()`` throughput, ``train()`` overhead and GAE, from speed.json, overhead.json and gae.json."""
    lines = ["| what | result | from |", "| --- | --- | --- |"]
    if (claim := speed_claim()) is not None:
        lines.append(
            "| `learn()` env-steps/s, XPPO with PPO's options against SB3 PPO (median paired ratio, one torch thread) "
            f"| {claim} | `benchmarks/speed.py`, `speed.json` |"
        )
    overhead = load(RESULTS / "overhead.json")
    if overhead is not None:
        cells = [f"{r['variant'].removeprefix('XPPO ')} {r['paired_ratio']:.2f}x" for r in overhead["rows"][1:]]
        cells += [
            f"{k.removeprefix('XPPO ')} {v['paired_ratio']:.2f}x single-critic XPPO"
            for k, v in overhead["multi_critic"].items()
        ]
        lines.append(
            f"| `train()` time against PPO's (median paired ratio) | {'; '.join(cells)} | `benchmarks/overhead.py`, "
            "`overhead.json` |"
        )
    gae = load(RESULTS / "gae.json")
    if gae is not None:
        exact = all(r["buffer_exact"] for r in gae["rows"])
        cells = [f"{r['buffer_speedup']:.1f}x at {r['n_steps']}x{r['n_envs']}" for r in gae["rows"]]
        lines.append(
            f"| rollout-buffer GAE against SB3's loop ({'equal bit for bit' if exact else 'NOT bit-exact'}) | "
            f"{', '.join(cells)} | `benchmarks/gae.py`, `gae.json` |"
        )
    return "\n".join(lines)


def render_speed_breakdown(page: Path) -> str:
    """Where ``learn()``'s time goes, PPO against XPPO: CPU microseconds per env-step, from speed.json."""
    data = speed_results()
    if data is None:
        return "*No speed.json yet.*"
    pieces = list(data["results"][0]["breakdown"]["PPO"]["us_per_step"])
    header = " | ".join(f"{r['env']} PPO / XPPO" for r in data["results"])
    lines = [f"| piece (us per env-step) | {header} |", "| --- |" + " --- |" * len(data["results"])]
    for piece in [*pieces, "total"]:
        cells = []
        for r in data["results"]:
            parts = [r["breakdown"][who]["us_per_step"] for who in ("PPO", "XPPO")]
            values = [sum(p.values()) if piece == "total" else p.get(piece, float("nan")) for p in parts]
            cells.append(f"{values[0]:.1f} / {values[1]:.1f}")
        lines.append(f"| {piece.replace('_', ' ')} | {' | '.join(cells)} |")
    return "\n".join(lines)


def distill_results() -> dict[str, Any] | None:
    return load(RESULTS / "distill_LunarLander-v3.json")


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


def dash(value: float | None) -> str:
    """A step count (``"12,288"``), or ``"-"`` where none was reached."""
    return "-" if value is None else f"{value:,.0f}"


def table_with_pending(lines: list[str], pending: list[str], empty: str, lead: str = "Not finished") -> str:
    """A comparison table (``lines``, its header first) or ``empty`` when it has no row, then what is still running."""
    text = "\n".join(lines) if len(lines) > 2 else empty
    if pending:
        text += f"\n\n{lead} (the run cache keeps the runs done so far): " + "; ".join(pending) + "."
    return text


#: The distillation runs with a warm-up (``distill.py --pretrain-steps N``), by file stem under ``RESULTS``
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
        data = load(RESULTS / f"{stem}.json")
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


def styles_claim() -> tuple[str, str] | None:
    """(best "balanced" row's words, single critic's words) of the must-win campaign."""
    data = report("multi_critic/styles")
    if data is None:
        return None
    rows = next(iter(data["summary"].values()))["contenders"]
    base = rows["mc-balanced-shared"]
    return interval(base, "final", 2), interval(rows["single"], "final", 2)


def multi_critic_table(campaign: str, contenders: tuple[str, ...] | None = None, decimals: int = 2) -> str:
    """A multi-critic campaign's rows: contender, seeds, final IQM and CI, seeds reaching the threshold, curve mean."""
    data = report(campaign)
    env_id, env_summary = next(iter(data["summary"].items()))
    rows = env_summary["contenders"]
    unverified = len(data.get("provenance", {}).get("unverified", []))
    lines = [
        f"| contender ({env_id}, {budget(env_summary['budget'])} steps) | seeds | final IQM [95% CI] | "
        f"reached {env_summary['threshold']:g} | curve (mean) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name in contenders or sorted(rows, key=lambda n: -rows[n]["final_iqm"]):
        if name in rows:
            row = rows[name]
            lines.append(
                f"| {name} | {seeds(row['seeds'])} | {interval(row, 'final', decimals)} | "
                f"{row['reached']}/{len(row['seeds'])} | {row['curve_mean']:.{decimals}f} |"
            )
    if unverified:
        lines += ["", f"*{unverified} of the report's runs are unverified: made before runs recorded a fingerprint.*"]
    return "\n".join(lines)


def render_multi_critic_styles(page: Path) -> str:
    if report("multi_critic/styles") is None:
        return "*The styles campaign has no report yet.*"
    return multi_critic_table("multi_critic/styles")


def faithful_lunar_campaign() -> str | None:
    """The multi-critic campaign run on LunarLander-v3's own reward (:data:`FAITHFUL_LUNAR`), if one has reported."""
    for campaign, data in campaign_reports(RESULTS / "multi_critic").items():
        if FAITHFUL_LUNAR in data["summary"]:
            return f"multi_critic/{campaign}"
    return None


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


def render_ray_vec_env(page: Path) -> str:
    """``learn()`` env-steps/s over the lean env, ``SubprocVecEnv`` and ``RayVecEnv``, from ray_vec_env.json."""
    results = load(RESULTS / "ray_vec_env.json")
    if results is None:
        return "Pending: `python benchmarks/ray_vec_env.py`."
    machine, config = results["machine"], results["config"]
    loads = [machine["load_average_before"][0], machine["load_average_after"][0]]
    # a load of a core or more before the run is other jobs'; after it, it includes the run's own processes
    shared = "shared with other jobs " if loads[0] >= 1.0 else ""
    lines = [
        f"Env-steps/s of `learn()` ({config['timesteps']:,} env-steps, best of {config['reps']}; wall clock), measured on a "
        f"{machine['cpus']}-core machine {shared}(1-minute load average {loads[0]:.1f} before the run, {loads[1]:.1f} after "
        "it, its own processes included):",
        "",
        "| env | n_envs | lean | SubprocVecEnv | RayVecEnv | Ray / lean | Ray / Subproc |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    crossover: dict[str, list[int]] = {}
    for row in results["rows"]:
        rate = row["steps_per_s"]
        lines.append(
            f"| {row['env']} | {row['n_envs']} | {rate['lean']:,.0f} | {rate['subproc']:,.0f} | {rate['ray']:,.0f} | "
            f"{rate['ray'] / rate['lean']:.2f}x | {rate['ray'] / rate['subproc']:.2f}x |"
        )
        crossover.setdefault(row["env"], [])
        if rate["ray"] > rate["lean"]:
            crossover[row["env"]].append(row["n_envs"])
    lines.append("")
    for env, above in crossover.items():
        if above:
            lines.append(f"- {env}: RayVecEnv is ahead of the lean env from {min(above)} envs on (here: n_envs {above}).")
        else:
            lines.append(f"- {env}: RayVecEnv is behind the lean env at every n_envs measured.")
    return "\n".join(lines)


def render_campaigns(page: Path) -> str:
    """Every campaign: its report, its question, its seeds and its runs by provenance."""
    lines = [
        "| campaign (`benchmarks/results/...`) | question | runs: current / unverified / stale (left out) |",
        "| --- | --- | --- |",
    ]
    for campaign, data in campaign_reports().items():
        provenance = data.get("provenance", {})
        counts = " / ".join(str(len(provenance.get(k, []))) for k in ("current", "unverified", "stale"))
        lines.append(f"| `{campaign}` | {data.get('question') or '-'} | {counts} |")
    return "\n".join(lines)


def render_headline(page: Path) -> str:
    """One row per claim, each with a plain verdict and a link to its evidence."""
    guide = ROOT / "docs" / "guide" / "benchmarks.md"

    def row(claim: str, result: str, anchor: str) -> str:
        return f"| {claim} | {result} | [evidence]({link(page, guide, anchor)}) |"

    lines = ["| claim | verdict | |", "| --- | --- | --- |"]
    if found := comparisons(("final",), "xppo-asymmetric_spo-mse-mb"):
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


def render_pcgrad_cost(page: Path) -> str:
    """The ``train()`` time of ``group_gradients='pcgrad'`` against plain multi-critic (``overhead_pcgrad.json``)."""
    data = load(RESULTS / "overhead_pcgrad.json")
    if data is None or "pcgrad" not in data:
        return "- **Cost**: *`overhead_pcgrad.json` has not been written yet.*"
    ratios = data["pcgrad"]
    return (
        "- **Cost**: one more backward pass through the actor per group. `python benchmarks/overhead.py --only critics\n"
        "  --reps 15 --learn-steps 0 --no-contrib --out benchmarks/results/overhead_pcgrad.json` (CartPole, 2048 steps,\n"
        '  batch 64, 2 epochs, 4 groups, one thread): `train()` with `group_gradients="pcgrad"` took\n'
        f"  {ratios['paired_ratio']:.1f}x the time of the plain multi-critic on the same groups, by the median of the paired\n"
        f"  ratios ({ratios['ratio']:.1f}x by the minimum over repetitions). On a policy this small the per-operation\n"
        "  overhead of the extra backward passes dominates; the projection has no data-dependent branch, so the cost\n"
        "  does not depend on how often the groups conflict."
    )


def render_multi_critic_overhead(page: Path) -> str:
    """``train()`` time of 4 reward groups against single-critic XPPO (``overhead.json``'s ``multi_critic``)."""
    data = load(RESULTS / "overhead.json")
    if data is None or "multi_critic" not in data:
        return "- Cost: *`benchmarks/overhead.py` has not written `overhead.json` yet.*"
    ratios = {name: row["paired_ratio"] for name, row in data["multi_critic"].items()}
    config = data["config"]
    return (
        f"- Cost (`python benchmarks/overhead.py --reps {config['reps']} --learn-steps 0`, {config['env']}, "
        f"{config['n_steps']} steps,\n  batch {config['batch_size']}, the median of the paired ratios): `train()` with "
        f"4 groups on the shared trunk takes {ratios['XPPO 4 critics']:.2f}x the time of single-critic XPPO, "
        f"{ratios['XPPO 4 critics, normalize_values']:.2f}x with `normalize_values`\n"
        f"  (the target is 1.15x), {ratios['XPPO 4 separate critics']:.2f}x with `separate_critics=True`.\n"
        "  The per-part clipping works on the flat gradient buffer of the fast Adam step (one `_foreach_norm` for every\n"
        "  part), and the normalizer's statistics are fixed once per `train()` call; the numbers are the same, bit for bit."
    )


#: The gradient-clipping A/B's campaigns, as the table's column prefixes: (campaign folder, label)
CLIP_AB = (("lunar", "mo-lunar-lander"), ("styles", "styles"))


def render_clip_ab(page: Path) -> str:
    """
    The gradient-clipping A/B (``multi_critic.py --clip-ab``): per contender and campaign, the means over the rollouts
    of the actor step's ratio (joint clip over clip apart), approx_kl both ways, and the joint clip's coefficient
    against the one the actor alone would get.
    """
    found = [(label, data) for folder, label in CLIP_AB if (data := load(RESULTS / "multi_critic" / folder / "clip_ab.json"))]
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
        f"Means over the rollouts of seed 0 ({rollouts}; `benchmarks/results/multi_critic/<campaign>/clip_ab.json`). "
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


def render_vec_env_throughput(page: Path) -> str:
    """Env-only steps/s of the lean env against ``DummyVecEnv`` + ``Monitor`` and the bare floor (``vec_env.json``)."""
    data = load(RESULTS / "vec_env.json")
    if data is None:
        return "Pending: `python benchmarks/vec_env.py --profile`."
    lines = [
        "| env | made as | DummyVecEnv + Monitor | lean | lean / dummy | floor / dummy | bit for bit |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in data["rows"]:
        rate = row["best_steps_per_s"]
        lines.append(
            f"| {row['env']} x{row['n_envs']} | `{row['made_as']}` | {rate['dummy']:,.0f} | {rate['lean']:,.0f} | "
            f"{row['ratio_best']:.2f}x | {row['floor_ratio']:.2f}x | {'yes' if row['bit_exact'] else '**no**'} |"
        )
    lines += ["", f"Best of {data['reps']} repetitions of {data['env_steps']:,} env-steps each."]
    targeted = [row for row in data["rows"] if row.get("target") is not None and row["made_as"] == "zoo"]
    share = data.get("profile_env_share")
    for row in targeted:
        if row["target_met"]:
            verdict = "met"
        elif row["floor_ratio"] < row["target"]:
            verdict = "out of reach of any vector env that steps gymnasium's envs in one process"
        else:
            verdict = "missed"
        lines[-1] += (
            f" Issue 33's target, {row['target']:g}x on {row['env']} x{row['n_envs']}, is {verdict}: the floor is "
            f"{row['floor_ratio']:.2f}x."
        )
    if share is not None:
        env_id = data["rows"][0]["env"]
        lines[-1] += (
            f" In the profile of a lean run of {env_id} (`zoo`), {share:.0%} of the time is the env's own `step` and "
            f"`reset` with all they call; the lean env's loop, the Monitor's and TimeLimit's bookkeeping and the info "
            f"copies are the other {1 - share:.0%}."
        )
    return "\n".join(lines)


def render_vec_env_speed(page: Path) -> str:
    """``learn()`` of XPPO on the lean and EnvPool envs against SB3 PPO on ``make_vec_env``'s (speed.json's rows)."""
    data = speed_results(vec_env=True)
    if data is None or not data["results"]:
        return "Pending: `python benchmarks/speed.py --contrib`."
    lines = [
        "| env, XPPO's VecEnv | XPPO / PPO env-steps/s: best, median paired (CPU time) | target | PPO's parameters |",
        "| --- | --- | --- | --- |",
    ]
    for r in data["results"]:
        met = "" if r["target"] is None else f"{r['target']}x ({'met' if r['target_met'] else 'missed'})"
        exact = "bit for bit" if r["bit_exact"] else f"no (EnvPool's envs; max diff {r['max_abs_param_diff']:.2g})"
        env_id, vec_env = r["env"].split("@")
        lines.append(
            f"| {env_id}, {vec_env} | {r['ratio_best']:.2f}x, {r['ratio_paired']:.2f}x ({r['cpu_ratio_paired']:.2f}x) | "
            f"{met} | {exact} |"
        )
    return "\n".join(lines + ["", *speed_floor_lines(data["results"])])


def render_sequence_batching(page: Path) -> str:
    """RecurrentXPPO with ``sequence_batching=True`` against RecurrentPPO: ``train()`` and ``learn()``, from
    speed_sequences.json (``benchmarks/speed.py --sequences``)."""
    data = load(RESULTS / "speed_sequences.json")
    if data is None or not data.get("sequences"):
        return "Pending: `python benchmarks/speed.py --envs --sequences --name speed_sequences`."
    lines = [
        "| env (rl-zoo3 `ppo_lstm.yml`) | `train()` time, RecurrentPPO / RecurrentXPPO (CPU time) | `learn()` env-steps/s, "
        "RecurrentXPPO / RecurrentPPO (CPU time) | targets (`train()`, `learn()`) | largest parameter difference |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in data["sequences"]:
        q, met = r["ratio_paired"], r["targets_met"]
        targets = ", ".join(
            f"{r['targets'][key]:g}x {'met' if met[key] else 'missed'}" for key in ("train", "learn") if key in met
        )
        lines.append(
            f"| {r['env']} | {q['train']:.2f}x ({q['train_cpu']:.2f}x) | {q['learn']:.2f}x ({q['learn_cpu']:.2f}x) | "
            f"{targets} | {r['max_abs_param_diff']:.1g} |"
        )
    runs = {r["env"]: f"{r['rollouts']} rollout{'s' if r['rollouts'] > 1 else ''}" for r in data["sequences"]}
    reps = data["config"]["reps"]
    lines += [
        "",
        f"Median paired ratios over {reps} runs of each, alternating, one torch thread "
        f"({', '.join(f'{env}: {n}' for env, n in runs.items())} per run). The parameter difference is after the first "
        "run of each, same seed: float rounding, grown over the run's updates.",
    ]
    return "\n".join(lines)


#: Does ``sequence_batching=True`` learn the same: (env, what runs, step-by-step (campaign, contender), the option's
#: (campaign, contender)); the memory maze's from ``benchmarks/mask_memory.py``, the others from ``learning.py``
SEQUENCE_PAIRS = (
    (
        "sb3_xppo/MemoryMaze-v0",
        "MaskableRecurrentXPPO, masks",
        ("mask_memory", "mask_lstm"),
        ("mask_memory_sequences", "mask_lstm_seq"),
    ),
    ("sb3_xppo/MemoryMaze-v0", "RecurrentXPPO, no masks", ("mask_memory", "lstm"), ("mask_memory_sequences", "lstm_seq")),
    (
        "CartPoleNoVel-v1",
        "RecurrentPPO / RecurrentXPPO, zoo entry",
        ("sequence_batching_cartpole_novel", "recurrentppo"),
        ("sequence_batching_cartpole_novel", "xppo-lstm@sequence_batching=True"),
    ),
)


def _final_row(campaign: str, env_id: str, contender: str) -> dict[str, Any] | None:
    """A contender's summary row in a mask_memory report (one env) or a learning.py report (per env)."""
    data = report(campaign)
    if data is None:
        return None
    summary = data["summary"]
    rows = summary["contenders"] if "contenders" in summary else summary.get(env_id, {}).get("contenders", {})
    return rows.get(contender)


def render_sequence_batching_learning(page: Path) -> str:
    """
    Final returns with and without ``sequence_batching`` (:data:`SEQUENCE_PAIRS`): the same seeds, hyperparameters and
    budget, IQM over seeds with 95% CIs, and whether the CIs overlap.
    """
    lines = [
        "| env | algorithm | seeds | final return IQM [95% CI], step by step | `sequence_batching=True` | CIs |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    verdicts, pending = [], []
    for env_id, label, (campaign, name), (twin_campaign, twin) in SEQUENCE_PAIRS:
        row, twin_row = _final_row(campaign, env_id, name), _final_row(twin_campaign, env_id, twin)
        if row is None or twin_row is None:
            pending.append(env_id)
            continue
        digits = 2 if max(abs(row["final_iqm"]), abs(twin_row["final_iqm"])) < 10 else 1
        cells = [
            f"{r['final_iqm']:.{digits}f} [{r['final_iqm_ci'][0]:.{digits}f}, {r['final_iqm_ci'][1]:.{digits}f}]"
            for r in (row, twin_row)
        ]
        verdicts.append(verdict(twin_row, row, "final"))
        overlap = "overlap" if verdicts[-1] == "level" else f"apart ({verdicts[-1]})"
        lines.append(f"| {env_id} | {label} | {seeds(twin_row['seeds'])} | {cells[0]} | {cells[1]} | {overlap} |")
    if not verdicts:
        return (
            "Pending: `python benchmarks/mask_memory.py --contenders mask_lstm_seq lstm_seq --campaign mask_memory_sequences`."
        )
    said = "The CIs overlap for every pair" if all(v == "level" for v in verdicts) else "The CIs are apart for some pair"
    note = f"; not run yet: {', '.join(dict.fromkeys(pending))}" if pending else ""
    return "\n".join(lines + ["", f"{said}{note}."])


#: The pieces of ``learn()`` that XPPO with PPO's settings cannot shed: the env's step and the network's passes, the
#: same operations on the same operands as PPO's (the contract of its exactness)
FLOOR_PIECES = {"env": "env step", "policy": "collection forward", "forward": "minibatch forward", "backward": "backward"}


def speed_floor_lines(results: list[dict[str, Any]]) -> list[str]:
    """
    What bounds each row's ratio, from its instrumented run (CPU microseconds per env-step, speed.json's
    ``breakdown``): the time a target leaves XPPO (PPO's total over the target) against what XPPO's env step and
    network passes alone take, and the rest of XPPO's time.
    """
    lines = [
        "What bounds these ratios, in CPU microseconds per env-step from the same run's instrumented repetition "
        "(`breakdown` in `speed.json`):",
        "",
        "| env, XPPO's VecEnv | the target leaves XPPO | XPPO: " + " + ".join(FLOOR_PIECES.values()) + " | XPPO: the rest |",
        "| --- | ---: | ---: | ---: |",
    ]
    beyond = []
    for r in results:
        if r["target"] is None:
            continue
        ppo, xppo = (r["breakdown"][who]["us_per_step"] for who in ("PPO", "XPPO"))
        left, floor = sum(ppo.values()) / r["target"], sum(xppo[piece] for piece in FLOOR_PIECES)
        parts = " + ".join(f"{xppo[piece]:.0f}" for piece in FLOOR_PIECES)
        lines.append(
            f"| {r['env'].replace('@', ', ')} | {left:.0f} | {parts} = {floor:.0f} | {sum(xppo.values()) - floor:.0f} |"
        )
        if floor > left:
            beyond.append(r["env"].replace("@", ", "))
    lines += [
        "",
        "The env step and the network's passes are the operations that reproducing PPO fixes: the same ones on the same "
        "operands (XPPO has already trimmed the Python around them). "
        + (
            f"On {' and '.join(beyond)} they alone take more than the target leaves, so that target is out of reach at "
            "PPO's bits; elsewhere"
            if beyond
            else "Everywhere"
        )
        + " the rest (minibatch sampling, the loss terms, the optimizer step, the rollout's bookkeeping) would have to "
        "shrink to what the target leaves over them.",
    ]
    return lines


#: PCGrad's campaigns: (report under multi_critic/, env, the mode with PCGrad, the same mode without, its words)
PCGRAD_CAMPAIGNS = (
    (
        "styles_pcgrad",
        "sb3_xppo/TwoStylePendulum-v0",
        "mc-balanced-separate-vn-pcgrad",
        "mc-balanced-separate-vn",
        "balanced, separate critics, value normalization (the best mode there)",
    ),
    (
        "lunar_groups",
        FAITHFUL_LUNAR,
        "mc-scalarize-shared-pcgrad@group_value_weights='squared'",
        "mc-scalarize-shared@group_value_weights='squared'",
        "scalarize, shared trunk (the mode whose objective is the reward's)",
    ),
)
PCGRAD_SEEDS = 5


def render_pcgrad_worth(page: Path) -> str:
    """``group_gradients='pcgrad'`` against the same mode without it, on both multi-critic envs (:data:`PCGRAD_CAMPAIGNS`)."""
    lines = [
        "| env (budget, seeds) | mode | final IQM [95% CI]: PCGrad / without | curve IQM [95% CI]: PCGrad / without | "
        "verdict: final, curve | pairs in conflict |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    pending = []
    for campaign, env_id, contender, baseline, mode in PCGRAD_CAMPAIGNS:
        data = report(f"multi_critic/{campaign}")
        rows = data["summary"].get(env_id, {}).get("contenders", {}) if data else {}
        row, base = rows.get(contender), rows.get(baseline)
        if row is None or base is None or min(len(row["seeds"]), len(base["seeds"])) < PCGRAD_SEEDS:
            done = [0 if side is None else len(side["seeds"]) for side in (row, base)]
            pending.append(f"{env_id} (PCGrad {done[0]}, without {done[1]} of {PCGRAD_SEEDS} seeds)")
            continue
        runs = [load(RESULTS / "multi_critic" / r["file"]) for r in data["runs"] if r["contender"] == contender]
        conflicts = [c for r in runs if r and (c := r.get("train_logs", {}).get("train/pcgrad_conflict_fraction")) is not None]
        conflict = f"{100 * sum(conflicts) / len(conflicts):.0f}%" if conflicts else "-"
        lines.append(
            f"| {env_id} ({budget(data['summary'][env_id]['budget'])}, seeds {seeds(row['seeds'])}; `{campaign}`) | {mode} | "
            f"{interval(row, 'final', 2)} / {interval(base, 'final', 2)} | {interval(row, 'curve', 2)} / "
            f"{interval(base, 'curve', 2)} | {verdict(row, base, 'final')}, {verdict(row, base, 'curve')} | {conflict} |"
        )
    return table_with_pending(lines, pending, "*No PCGrad campaign has finished yet.*")


#: The learning-equivalence campaign of the EnvPool backend, its envs and its seeds per side
ENVPOOL_CAMPAIGN, ENVPOOL_ENVS, ENVPOOL_SEEDS = "envpool_equivalence", ("LunarLander-v3", "Hopper-v5"), 5


def render_envpool_equivalence(page: Path) -> str:
    """
    PPO's zoo entry trained on EnvPool's envs against gymnasium's, both evaluated on gymnasium's: the final IQMs and
    whether their 95% CIs overlap ("level" is the equivalence the backend needs), per env once both sides have
    :data:`ENVPOOL_SEEDS` seeds.
    """
    lines = [
        "| env (budget, seeds) | final IQM [95% CI]: EnvPool / gymnasium | curve IQM [95% CI]: EnvPool / gymnasium | CIs |",
        "| --- | --- | --- | --- |",
    ]
    pending = []
    for env_id in ENVPOOL_ENVS:
        rows = rows_of(ENVPOOL_CAMPAIGN, env_id)
        row, base = rows.get("ppo@vec_env='envpool'"), rows.get(PPO)
        if row is None or base is None or min(len(row["seeds"]), len(base["seeds"])) < ENVPOOL_SEEDS:
            done = [0 if side is None else len(side["seeds"]) for side in (row, base)]
            pending.append(f"{env_id} (EnvPool {done[0]}, gymnasium {done[1]} of {ENVPOOL_SEEDS} seeds)")
            continue
        env_budget = report(ENVPOOL_CAMPAIGN)["summary"][env_id]["budget"]  # type: ignore[index]
        overlap = "overlap" if verdict(row, base, "final") == "level" else f"apart ({verdict(row, base, 'final')})"
        lines.append(
            f"| {env_id} ({budget(env_budget)}, seeds {seeds(row['seeds'])}) | {interval(row, 'final')} / "
            f"{interval(base, 'final')} | {interval(row, 'curve')} / {interval(base, 'curve')} | {overlap} |"
        )
    return table_with_pending(lines, pending, "*No env of the campaign has finished yet.*")


#: The screens of the third wave's options: (campaign, env, contender, baseline, option's name, baseline's name)
SCREENS: tuple[tuple[str, str, str, str, str, str], ...] = (
    ("screen_hpo_pendulum", "Pendulum-v1", "xppo@actor_loss='hpo'", PPO, "`actor_loss='hpo'`", "PPO (zoo)"),
    ("screen_wave3_llc", "LunarLanderContinuous-v3", "xppo@actor_loss='hpo'", PPO, "`actor_loss='hpo'`", "PPO (zoo)"),
    ("screen_beta_akl_pendulum", "Pendulum-v1", "xppo@adaptive_kl=True", PPO, "`adaptive_kl=True`", "PPO (zoo)"),
    ("screen_wave3_llc", "LunarLanderContinuous-v3", "xppo@adaptive_kl=True", PPO, "`adaptive_kl=True`", "PPO (zoo)"),
    (
        "screen_beta_akl_pendulum",
        "Pendulum-v1",
        "xppo@use_sde=False@action_dist='beta'",
        "xppo@use_sde=False",
        "`action_dist='beta'`",
        "Gaussian, `use_sde=False`",
    ),
    ("screen_wave3_llc", "LunarLanderContinuous-v3", "xppo@action_dist='beta'", PPO, "`action_dist='beta'`", "PPO (zoo)"),
    ("screen_wave3_mujoco", "Hopper-v5", "xppo@actor_loss='hpo'", PPO, "`actor_loss='hpo'`", "PPO (zoo)"),
    ("screen_wave3_mujoco", "Hopper-v5", "xppo@adaptive_kl=True", PPO, "`adaptive_kl=True`", "PPO (zoo)"),
    ("screen_akl_halfcheetah", "HalfCheetah-v5", "xppo@adaptive_kl=True", PPO, "`adaptive_kl=True`", "PPO (zoo)"),
    ("screen_beta_bipedal", "BipedalWalker-v3", "xppo@action_dist='beta'", PPO, "`action_dist='beta'`", "PPO (zoo)"),
)
#: A screen row is shown once each side has this many seeds
SCREEN_SEEDS = 3
#: The confirmations the screens earned, on fresh seeds never screened on: entries as :data:`SCREENS`'
CONFIRMATIONS: tuple[tuple[str, str, str, str, str, str], ...] = (
    ("confirmation_hpo_hopper", "Hopper-v5", "xppo@actor_loss='hpo'", PPO, "`actor_loss='hpo'`", "PPO (zoo)"),
)
#: A confirmation row is shown once each side has this many seeds
CONFIRMATION_SEEDS = 10


def option_rows(
    entries: tuple[tuple[str, str, str, str, str, str], ...], n_seeds: int
) -> tuple[list[str], list[str], dict[str, list[tuple[str, int, dict[str, Any], dict[str, Any]]]]]:
    """
    The table rows of option-against-baseline campaigns (entries as :data:`SCREENS`') whose both sides have
    ``n_seeds`` seeds, the pending ones in words, and per option its finished ``(env, budget, row, baseline row)``.
    """
    lines, pending = [], []
    finished: dict[str, list[tuple[str, int, dict[str, Any], dict[str, Any]]]] = {}
    for campaign, env_id, contender, baseline, name, baseline_name in entries:
        rows = rows_of(campaign, env_id)
        row, base = rows.get(contender), rows.get(baseline)
        if row is None or base is None or min(len(row["seeds"]), len(base["seeds"])) < n_seeds:
            done = "no report yet" if not rows else f"{0 if row is None else len(row['seeds'])} of {n_seeds} seeds"
            pending.append(f"{name} on {env_id} ({done})")
            continue
        env_budget = report(campaign)["summary"][env_id]["budget"]  # type: ignore[index]
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
        "| option | env (budget, seeds) | against | final IQM [95% CI]: option / baseline | "
        "curve IQM [95% CI]: option / baseline | verdict: final, curve |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    lines, pending, finished = option_rows(SCREENS, SCREEN_SEEDS)
    text = table_with_pending(header + lines, pending, "*No screen has finished yet.*", "Screens not finished")
    confirmed_lines, confirming, confirmed = option_rows(CONFIRMATIONS, CONFIRMATION_SEEDS)
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


#: Each region's renderer: ``render(page) -> markdown``
RENDERERS: dict[str, Callable[[Path], str]] = {
    "headline": render_headline,
    "decision": render_decision,
    "defaults": render_defaults,
    "recommended": render_recommended,
    "zoo-entries": render_zoo_entries,
    "speed": render_speed,
    "speed-breakdown": render_speed_breakdown,
    "dagger": render_dagger,
    "dagger-claim": render_dagger_claim,
    "dagger-pretrain": render_dagger_pretrain,
    "multi-critic-styles": render_multi_critic_styles,
    "multi-critic-match": render_multi_critic_match,
    "campaigns": render_campaigns,
    "ray-vec-env": render_ray_vec_env,
    "screens": render_screens,
    "pcgrad-cost": render_pcgrad_cost,
    "pcgrad-worth": render_pcgrad_worth,
    "envpool-equivalence": render_envpool_equivalence,
    "multi-critic-overhead": render_multi_critic_overhead,
    "clip-ab": render_clip_ab,
    "vec-env-throughput": render_vec_env_throughput,
    "vec-env-speed": render_vec_env_speed,
    "sequence-batching": render_sequence_batching,
    "sequence-batching-learning": render_sequence_batching_learning,
}


# ---------------------------------------------------------------------------------------------------------- pages


def render_page(page: Path, text: str) -> str:
    """``text`` with every region rendered afresh; an unknown region name is an error."""

    def fill(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in RENDERERS:
            raise ValueError(f"{page}: unknown region {name!r}; known: {sorted(RENDERERS)}")
        return f"{match[1]}{RENDERERS[name](page)}\n{match[4]}"

    return REGION.sub(fill, text)


def held_intervals(root: Path = RESULTS) -> set[str]:
    """
    Every ``"iqm [low, high]"`` a result file holds (a summary row's ``<x>`` and ``<x>_ci``), at one and two decimals:
    the precisions the reports and pages quote.
    """
    held: set[str] = set()

    def walk(node: Any) -> Iterator[tuple[float, float, float]]:
        if isinstance(node, dict):
            for key, value in node.items():
                ci = node.get(f"{key}_ci")
                if isinstance(value, (int, float)) and isinstance(ci, list) and len(ci) == 2:
                    yield float(value), float(ci[0]), float(ci[1])
                yield from walk(value)
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)

    for path in root.rglob("*.json"):
        if any(part in RUN_CACHES for part in path.relative_to(root).parts):
            continue
        for triple in walk(load(path)):
            for decimals in (1, 2):
                held.add("{:.{d}f} [{:.{d}f}, {:.{d}f}]".format(*triple, d=decimals))
    return held


def unheld_intervals(pages: tuple[Path, ...] = PAGES, root: Path = RESULTS) -> list[str]:
    """``"page:line: quoted"`` for every quoted ``x [low, high]`` that no result file holds (:func:`held_intervals`)."""
    held = held_intervals(root)
    found = []
    for page in pages:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for match in INTERVAL.finditer(line):
                if match[0] not in held:
                    where = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
                    found.append(f"{where}:{number}: {match[0]}")
    return found


def stale_regions(pages: tuple[Path, ...] = PAGES) -> list[str]:
    """The pages whose regions differ from what :func:`render_page` writes."""
    return [str(p.relative_to(ROOT)) for p in pages if render_page(p, text := p.read_text(encoding="utf-8")) != text]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a region or interval is off")
    args = parser.parse_args(argv)
    if args.check:
        problems = [f"{page}: a region differs from its result files" for page in stale_regions()]
        problems += [f"{where} is held by no result file" for where in unheld_intervals()]
        print("\n".join(problems) or "every region and quoted interval matches the result files")
        sys.exit(1 if problems else 0)
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        rendered = render_page(page, text)
        if rendered != text:
            page.write_text(rendered, encoding="utf-8")
            print(f"rendered {page.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
