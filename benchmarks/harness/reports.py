"""
A campaign's report: statistics over seeds (rliable's IQM with a 95% stratified-bootstrap CI), the provenance line,
``report.md``'s tables, ``plot.png``, the folder they go to and the command that writes them again.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
from collections.abc import Callable
from typing import Any

import numpy as np

from harness.contenders import Contender
from harness.layout import campaign_dir

#: What a campaign's report may declare it is (its ``kind``): the claim of the pages it answers, by which
#: ``benchmarks/render_docs.py`` finds it (:mod:`harness.regions.results` says what each means)
KINDS = (
    "recommended",
    "defaults",
    "zoo-entries",
    "screen",
    "option-confirmation",
    "envpool-equivalence",
    "must-win",
    "sequence-batching",
    "distributed",
    "spo-depth",
    "spo-depth-short",
    "spo-paper",
)


def provenance_note(status: dict[str, list[dict[str, Any]]], unverified_included: bool) -> str:
    """The report's line on what its runs were verified against."""

    def listed(runs: list[dict[str, Any]]) -> str:
        return ", ".join(f"{r['env']} {r['contender']} seed {r['seed']}" for r in runs)

    note = (
        f"Provenance: {len(status['current'])} runs current (their behavioural fingerprint is today's code's, "
        "`benchmarks/harness/provenance.py`)"
    )
    if status["unverified"]:
        verb = "included" if unverified_included else "left out"
        note += f"; {len(status['unverified'])} unverified (made before runs recorded a fingerprint), {verb}"
    if status["stale"]:
        note += f"; {len(status['stale'])} stale and left out (rerun with `--stale rerun`): {listed(status['stale'])}"
    return note + "."


def provenance_record(status: dict[str, list[dict[str, Any]]], note: str) -> dict[str, Any]:
    """The report JSON's ``provenance``: its note, and the runs of each status by env, contender and seed."""
    runs = {k: [dict(env=r["env"], contender=r["contender"], seed=r["seed"]) for r in v] for k, v in status.items()}
    return dict(note=note, **runs)


def iqm_with_ci(scores: dict[str, np.ndarray], reps: int) -> dict[str, tuple[float, float, float]]:
    """
    IQM over seeds and its 95% stratified-bootstrap CI (rliable), per contender: ``(iqm, low, high)``.

    Reproducible: rliable's ``StratifiedBootstrap`` draws its resamples from NumPy's global generator (whatever
    ``random_state`` says), so each contender's bootstrap starts from the same seed, which also makes its CI
    independent of the other contenders in the report; the caller's global state is restored.
    """
    from rliable import library as rly
    from rliable import metrics

    estimates, state = {}, np.random.get_state()
    try:
        for name, values in scores.items():
            np.random.seed(0)
            point, interval = rly.get_interval_estimates(
                {name: values.reshape(-1, 1)},  # (runs, tasks=1)
                lambda x: np.array([metrics.aggregate_iqm(x)]),
                reps=reps,
            )
            estimates[name] = (float(point[name][0]), float(interval[name][0, 0]), float(interval[name][1, 0]))
    finally:
        np.random.set_state(state)
    return estimates


def final_return_row(runs: list[dict[str, Any]], iqm: tuple[float, float, float]) -> dict[str, Any]:
    """
    The final-return part of a contender's summary row: its seeds, the final return per seed, their IQM with its 95%
    CI (``iqm``, :func:`iqm_with_ci`'s entry), mean and std.

    :param runs: the contender's runs, sorted by seed
    """
    finals = np.array([r["final_mean"] for r in runs])
    return dict(
        seeds=[r["seed"] for r in runs],
        final_per_seed=finals.tolist(),
        final_iqm=iqm[0],
        final_iqm_ci=[iqm[1], iqm[2]],
        final_mean=float(finals.mean()),
        final_std=float(finals.std()),
    )


def summarize(runs: list[dict[str, Any]], contenders: list[Contender], reps: int) -> dict[str, Any]:
    """
    Per env and contender: seeds, final return (IQM + CI, mean, std), steps to threshold, curve mean (mean, IQM + CI:
    the area under the learning curve, sample efficiency), wall-clock.
    """
    summary: dict[str, Any] = {}
    for env_id in dict.fromkeys(r["env"] for r in runs):
        env_runs = [r for r in runs if r["env"] == env_id]
        by_name = {c.name: [r for r in env_runs if r["contender"] == c.name] for c in contenders}
        by_name = {k: sorted(v, key=lambda r: r["seed"]) for k, v in by_name.items() if v}
        iqm = iqm_with_ci({k: np.array([r["final_mean"] for r in v]) for k, v in by_name.items()}, reps)
        curve_iqm = iqm_with_ci({k: np.array([r["curve_mean"] for r in v]) for k, v in by_name.items()}, reps)
        rows = {}
        for name, rs in by_name.items():
            reached = [r["steps_to_threshold"] for r in rs if r["steps_to_threshold"] is not None]
            rows[name] = dict(
                **final_return_row(rs, iqm[name]),
                reached=len(reached),
                median_steps_to_threshold=float(np.median(reached)) if reached else None,
                curve_mean=float(np.mean([r["curve_mean"] for r in rs])),
                curve_iqm=curve_iqm[name][0],
                curve_iqm_ci=[curve_iqm[name][1], curve_iqm[name][2]],
                curve_per_seed=[float(r["curve_mean"]) for r in rs],
                # the runs resumed mid-way from a checkpoint, with the steps they resumed at (every run since the
                # field exists records it: null when not resumed; older runs have none, which counts as not known)
                resumed=[{"seed": r["seed"], "at": r["resumed_at"]} for r in rs if r.get("resumed_at")],
                resumed_unrecorded=sum("resumed_at" not in r for r in rs),
                learn_seconds=float(np.mean([r["learn_seconds"] for r in rs])),
                # (runs cached before the timer existed have none)
                train_seconds=float(np.mean(timed))
                if (timed := [r["train_seconds"] for r in rs if "train_seconds" in r])
                else None,
            )
        summary[env_id] = dict(budget=env_runs[0]["budget"], threshold=env_runs[0]["threshold"], contenders=rows)
    return summary


def train_cost(seconds: float | None, ppo_seconds: float | None) -> str:
    """A table cell: ``train()`` seconds and their ratio to PPO's in the same env, where both were timed."""
    if seconds is None:
        return "-"
    return f"{seconds:.0f}" + (f" ({seconds / ppo_seconds:.2f}x)" if ppo_seconds else "")


#: What the columns of a learning report mean (its report.md)
COLUMNS = (
    "Final: mean return of the deterministic evaluation episodes after training, per seed; IQM over seeds with its 95% "
    "stratified-bootstrap CI (rliable). Reached: seeds whose mean eval return reached the threshold; steps: median "
    "over those seeds of the first evaluation at or above it. Curve: mean eval return over the run (area under the "
    "curve / budget), IQM over seeds with its 95% CI. Wall: mean seconds of `learn()` per run, and of its `train()` "
    "calls with their ratio to PPO's (one torch thread; a campaign's runs may come from sessions under different loads "
    "of a shared machine, so compare loosely: `benchmarks/overhead.py` times `train()` side by side; '-' where not "
    "timed). "
    "`ppo` is SB3 PPO with rl-zoo3's ppo.yml entry, `xppo-zoo` XPPO with its entry in zoo_configs/xppo.yml, the "
    "other XPPO contenders add their options and `@` overrides to ppo.yml's entry."
)


def report_header(kind: str, name: str, command: str, question: str, provenance: str) -> list[str]:
    """
    The opening lines of a campaign's report.md: its title, question, command and provenance.

    :param kind: "Learning" or "Multi-critic"
    :param name: the campaign
    :param command: the command that writes the report (with ``--report-only``: from the run cache alone)
    :param question: what the campaign asks ("" when not given)
    :param provenance: :func:`provenance_note`'s line ("" when none)
    """
    lines = [f"# {kind} campaign `{name}`", ""]
    if question:
        lines += [f"**Question:** {question}", ""]
    lines.append(f"**Command:** `{command}` (add `--report-only` to write this report from the run cache alone).")
    if provenance:
        lines += ["", provenance]
    return lines


def markdown(summary: dict[str, Any], name: str, command: str, provenance: str = "", question: str = "") -> str:
    """
    The campaign's report.md: :func:`report_header`, then per env a table of every contender, its IQMs written as the
    pages write them (one seed's alone, without a degenerate interval).
    """
    from harness.regions.figures import interval  # (inside: harness.regions' modules import this one)

    lines = [*report_header("Learning", name, command, question, provenance), "", COLUMNS]
    for env_id, env_summary in summary.items():
        rows = env_summary["contenders"]
        lines += [
            "",
            f"## {env_id}: {env_summary['budget']:,} steps, threshold {env_summary['threshold']}",
            "",
            "| contender | seeds | final IQM [95% CI] | final mean ± std | reached | steps to threshold | "
            "curve IQM [95% CI] | wall s | train() s (÷ PPO) |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        ppo_train = rows.get("ppo", {}).get("train_seconds")
        for cname, row in sorted(rows.items(), key=lambda kv: (-kv[1]["final_iqm"], -kv[1]["curve_mean"])):
            steps = f"{row['median_steps_to_threshold']:,.0f}" if row["median_steps_to_threshold"] is not None else "-"
            mean = f"{row['final_mean']:.1f}" + (f" ± {row['final_std']:.1f}" if len(row["seeds"]) > 1 else "")
            lines.append(
                f"| {'**ppo (zoo)**' if cname == 'ppo' else cname} | {','.join(map(str, row['seeds']))} | "
                f"{interval(row, 'final')} | {mean} | {row['reached']}/{len(row['seeds'])} | {steps} | "
                f"{interval(row, 'curve')} | {row['learn_seconds']:.0f} | {train_cost(row.get('train_seconds'), ppo_train)} |"
            )
        resumed = resumed_runs(rows)
        if resumed:
            lines += ["", f"Resumed mid-way from a checkpoint: {resumed}."]
    return "\n".join(lines) + "\n"


def resumed_runs(rows: dict[str, dict[str, Any]]) -> str:
    """The runs of one env's contenders that were resumed mid-way, in words ("" when none): contender, seed, steps."""
    return "; ".join(
        f"{name} seed {run['seed']} (at {', '.join(f'{step:,}' for step in run['at'])} steps)"
        for name, row in rows.items()
        for run in row.get("resumed", [])
    )


def campaign_files(out_dir: str, name: str) -> dict[str, str]:
    """The paths of a campaign's outputs: ``report.json``, ``report.md`` and ``plot.png`` in its folder under ``out_dir``."""
    folder = campaign_dir(out_dir, name)
    return {
        kind: os.path.join(folder, file) for kind, file in (("json", "report.json"), ("md", "report.md"), ("png", "plot.png"))
    }


def run_reference(run: dict[str, Any]) -> dict[str, Any]:
    """A cited run as its report names it: env, contender, seed, the score it contributed, its cache key and file."""
    return {k: run.get(k) for k in ("env", "contender", "seed", "final_mean", "key", "file", "resumed_at")}


def write_report(out_dir: str, name: str, report: dict[str, Any], table: str, draw: Callable[[str], None]) -> None:
    """
    Write a campaign's folder (:func:`campaign_files`): ``report.json`` (``report``, whose ``runs`` are named by
    :func:`run_reference`, not copied: the run cache holds them), ``report.md`` (``table``) and ``plot.png``
    (``draw(path)``).
    """
    files = campaign_files(out_dir, name)
    os.makedirs(os.path.dirname(files["json"]), exist_ok=True)
    with open(files["json"], "w") as f:
        json.dump({**report, "runs": [run_reference(r) for r in report["runs"]]}, f, indent=1)
    with open(files["md"], "w") as f:
        f.write(table)
    draw(files["png"])
    print(f"wrote {files['json']}, {files['md']}, {files['png']}")


def plot(runs: list[dict[str, Any]], summary: dict[str, Any], contenders: list[Contender], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = list(summary)
    ncols = min(len(envs), 2)  # two panels a row at most: legible at a page's width
    nrows = -(-len(envs) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(7.5 * ncols, 5.0 * nrows), squeeze=False)
    for ax in axes.flat[len(envs) :]:
        ax.set_visible(False)
    colors = plt.get_cmap("tab10" if len(contenders) <= 11 else "tab20").colors
    # Min-max bands only while they stay readable
    bands = len(contenders) <= 4
    for ax, env_id in zip(axes.flat, envs, strict=False):
        for i, c in enumerate(contenders):
            rs = [r for r in runs if r["env"] == env_id and r["contender"] == c.name]
            if not rs:
                continue
            n = min(len(r["eval_means"]) for r in rs)
            steps = np.array(rs[0]["eval_steps"][:n])
            curves = np.array([r["eval_means"][:n] for r in rs])
            style = dict(color="black", lw=2.2) if c.name == "ppo" else dict(color=colors[(i - 1) % len(colors)], lw=1.3)
            ax.plot(steps, curves.mean(0), label=f"{c.name} ({len(rs)})", **style)
            if bands:
                ax.fill_between(steps, curves.min(0), curves.max(0), color=style["color"], alpha=0.1)
        if summary[env_id]["threshold"] is not None:
            ax.axhline(summary[env_id]["threshold"], color="gray", ls="--", lw=0.8)
        ax.set_title(f"{env_id} ({summary[env_id]['budget']:,} steps)", fontsize=13)
        ax.set_xlabel("environment steps", fontsize=11)
        ax.set_ylabel("eval return (mean" + (", min-max" if bands else "") + " over seeds)", fontsize=11)
        ax.tick_params(labelsize=10)
        ax.legend(fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=80, pil_kwargs=dict(optimize=True))  # legible at a page's width, small in the repository
    plt.close(fig)


# flags that change when and how often runs start, or the report's words, never what a finished run or a table holds;
# the ones with a value
_SCHEDULING_FLAGS = ("--report-only", "--time-limit", "--question", "--kind")
_WITH_VALUE = ("--time-limit", "--question", "--kind")


def shell_quote(arg: str) -> str:
    """``arg`` quoted for a POSIX shell, in double quotes where it holds single quotes and nothing a shell expands there."""
    if "'" in arg and not any(c in arg for c in '"$`\\!'):
        return f'"{arg}"'
    return shlex.quote(arg)


def reproducing_command(script: str, argv: list[str]) -> str:
    """
    The command that writes the same outputs as ``argv`` from the run cache, for the report's heading.

    ``--report-only``, ``--time-limit``, ``--question`` and ``--kind`` (with their values) are left out: a campaign run
    in several sittings, each with its own limit, is one command.
    """
    kept, skip_value = [], False
    for arg in argv:
        if skip_value:
            skip_value = False
        elif arg in _WITH_VALUE:
            skip_value = True
        elif arg.split("=", 1)[0] not in _SCHEDULING_FLAGS:
            kept.append(arg)
    return f"python {script} " + " ".join(shell_quote(arg) for arg in kept)


def previous_report(out_dir: str, name: str) -> dict[str, Any]:
    """The campaign's last report.json (empty when none), so that a rewrite keeps what it states: question, kind."""
    path = campaign_files(out_dir, name)["json"]
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def report_words(args: argparse.Namespace, out_dir: str, name: str) -> dict[str, Any]:
    """
    What a campaign's report states besides its numbers: its ``question`` and, where it has one, its ``kind``, each
    from ``args`` (``--question``, ``--kind``) or else from the campaign's last report.
    """
    previous = previous_report(out_dir, name)
    kind = args.kind or previous.get("kind")
    return dict(question=args.question or previous.get("question", ""), **({"kind": kind} if kind else {}))


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """``--question`` and ``--kind``: what the campaign asks, and the claim of the pages it answers."""
    parser.add_argument("--question", default="", help="what the campaign asks, for its report (kept from the last report)")
    parser.add_argument(
        "--kind",
        choices=KINDS,
        default=None,
        help="the claim of the pages the campaign answers, for benchmarks/render_docs.py (kept from the last report)",
    )
