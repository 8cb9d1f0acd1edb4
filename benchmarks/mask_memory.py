"""
Memory and masks together: :class:`~sb3_xppo.MaskableRecurrentXPPO` against :class:`~sb3_xppo.MaskableXPPO` (masks, no
memory) and :class:`~sb3_xppo.RecurrentXPPO` (memory, no masks) on ``sb3_xppo/MemoryMaze-v0``
(:class:`~sb3_xppo.envs.MemoryMaze`: a T-maze whose paying goal is shown only at the first step, with illegal moves
that end the episode).

- **Contenders**, the same hyperparameters (:data:`HYPERPARAMS`, :data:`POLICY_KWARGS`; the LSTM ones add
  :data:`LSTM_KWARGS`) and seeds: ``mask_lstm`` (MaskableRecurrentXPPO, ``MlpLstmPolicy``, trained and evaluated
  with the env's masks), ``mask`` (MaskableXPPO, ``MlpPolicy``, with masks), ``lstm`` (RecurrentXPPO,
  ``MlpLstmPolicy``, without masks: it never sees them).
- **The env's bounds**: remembering the cue earns 0.94 (6 moves); a policy without memory earns at most -0.06 in
  expectation (half of its episodes end at the wrong goal; ``tests/test_memory_maze.py`` computes it).
- **Metrics**: the final deterministic evaluation (``--final-episodes`` episodes, each contender evaluated as it was
  trained: with masks for the maskable ones, :func:`sb3_xppo.ppo_mask_recurrent.evaluate_policy` carrying the LSTM
  state), its mean per seed, IQM over seeds with a 95% stratified-bootstrap CI (rliable, the helpers of
  ``benchmarks/harness/``); the share of final episodes that reached the cued goal; eval curves.
- **Cache and provenance**: one JSON per run in the run cache, ``<out-dir>/runs/<env>_<budget>/<contender>/seed<k>.json``,
  with a key of its configuration, the code that made it and its behavioural fingerprint
  (``benchmarks/harness/provenance.py``); a run whose key matches is not run again, and a report leaves out runs
  whose fingerprint today's code no longer gives (``--stale rerun`` runs them again).
- **Sequence batching** (issue 48): the contenders ``mask_lstm_seq`` and ``lstm_seq`` are ``mask_lstm`` and ``lstm``
  with ``sequence_batching=True`` (whole-sequence LSTM passes in ``train()``), the same seeds and hyperparameters;
  not run by default. ``--campaign`` names the report's folder (the run cache is shared, so the step-by-step
  contenders' runs are too).
- **Outputs**: ``<out-dir>/campaigns/<campaign>/report.json``, ``report.md``, ``plot.png`` and ``table.md`` (the table
  alone, which docs/guide/contrib.md's region ``mask-memory`` renders), ``<campaign>`` ``mask_memory`` by default.

usage: python benchmarks/mask_memory.py [--seeds 0 1 2 3 4] [--budget 16384] [--workers 2] [--report-only]
       python benchmarks/mask_memory.py --contenders mask_lstm_seq lstm_seq --campaign mask_memory_sequences \
           --kind sequence-batching
       python benchmarks/mask_memory.py --quick     (one seed, 1,024 steps: a smoke test)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from typing import Any

import numpy as np
import torch as th
from harness.layout import RESULTS, campaign_dir, run_cache
from harness.provenance import behaviour_fingerprint, code_record
from harness.reports import (
    KINDS,
    final_return_row,
    iqm_with_ci,
    previous_report,
    provenance_note,
    provenance_record,
    report_header,
    reproducing_command,
    write_report,
)
from harness.runs import init_worker, save_run
from sb3_contrib.common.maskable.evaluation import evaluate_policy as evaluate_maskable
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy as evaluate_plain

from sb3_xppo import MaskableRecurrentXPPO, MaskableXPPO, RecurrentXPPO
from sb3_xppo.envs import MEMORY_MAZE_ID
from sb3_xppo.ppo_mask_recurrent import evaluate_policy as evaluate_masked_recurrent

CAMPAIGN = "mask_memory"
RUN_FORMAT = 1
#: What every contender trains with
N_ENVS = 8
HYPERPARAMS: dict[str, Any] = dict(n_steps=64, batch_size=128, n_epochs=4, learning_rate=1e-3, ent_coef=0.01, gamma=0.99)
POLICY_KWARGS: dict[str, Any] = dict(net_arch=[64])
LSTM_KWARGS: dict[str, Any] = dict(lstm_hidden_size=32)
#: The env's returns: the cued goal by the shortest path, and the most a policy without memory expects
MEMORY_OPTIMUM, MEMORYLESS_BOUND = 0.94, -0.06


def _evaluate_mask_lstm(model: Any, env: Any, **kwargs: Any) -> Any:
    return evaluate_masked_recurrent(model, env, use_masking=True, **kwargs)


def _evaluate_mask(model: Any, env: Any, **kwargs: Any) -> Any:
    return evaluate_maskable(model, env, use_masking=True, **kwargs)


#: name -> (algorithm, policy, LSTM, evaluation as trained, what it is)
CONTENDERS: dict[str, tuple[type, str, bool, Callable[..., Any], str]] = {
    "mask_lstm": (MaskableRecurrentXPPO, "MlpLstmPolicy", True, _evaluate_mask_lstm, "MaskableRecurrentXPPO, masks"),
    "mask": (MaskableXPPO, "MlpPolicy", False, _evaluate_mask, "MaskableXPPO, masks, no memory"),
    "lstm": (RecurrentXPPO, "MlpLstmPolicy", True, evaluate_plain, "RecurrentXPPO, memory, no masks"),
}
#: The sequence-batching campaign's contenders (not run by default): as CONTENDERS', with the keywords of KWARGS
SEQUENCE_CONTENDERS: dict[str, tuple[type, str, bool, Callable[..., Any], str]] = {
    "mask_lstm_seq": (*CONTENDERS["mask_lstm"][:4], "MaskableRecurrentXPPO, masks, sequence_batching"),
    "lstm_seq": (*CONTENDERS["lstm"][:4], "RecurrentXPPO, memory, no masks, sequence_batching"),
}
ALL_CONTENDERS = {**CONTENDERS, **SEQUENCE_CONTENDERS}
#: Constructor keywords of a contender beyond HYPERPARAMS (none for CONTENDERS: their cache keys stay as they were)
KWARGS: dict[str, dict[str, Any]] = {name: dict(sequence_batching=True) for name in SEQUENCE_CONTENDERS}


def task_key(contender: str, seed: int, budget: int, n_evals: int, eval_episodes: int, final_episodes: int) -> str:
    """Hash of everything that determines a run's result (its cache key)."""
    algo, policy, lstm, _, _ = ALL_CONTENDERS[contender]
    spec = dict(
        format=RUN_FORMAT,
        env=MEMORY_MAZE_ID,
        algo=algo.__name__,
        policy=policy,
        n_envs=N_ENVS,
        hyperparams=HYPERPARAMS,
        policy_kwargs={**POLICY_KWARGS, **(LSTM_KWARGS if lstm else {})},
        seed=seed,
        budget=budget,
        n_evals=n_evals,
        eval_episodes=eval_episodes,
        final_episodes=final_episodes,
        **({"kwargs": KWARGS[contender]} if contender in KWARGS else {}),
    )
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def run_path(out_dir: str, task: dict[str, Any]) -> str:
    """The file of ``task``'s run in the run cache under ``out_dir``."""
    return os.path.join(
        run_cache(out_dir), f"{MEMORY_MAZE_ID}_{task['budget']}", task["contender"], f"seed{task['seed']}.json"
    )


def build(contender: str, seed: int) -> Any:
    """The contender's model on ``N_ENVS`` copies of the env, seeded."""
    algo, policy, lstm, _, _ = ALL_CONTENDERS[contender]
    env = make_vec_env(MEMORY_MAZE_ID, n_envs=N_ENVS, seed=seed)
    policy_kwargs = {**POLICY_KWARGS, **(LSTM_KWARGS if lstm else {})}
    kwargs = KWARGS.get(contender, {})
    return algo(policy, env, seed=seed, device="cpu", policy_kwargs=policy_kwargs, **HYPERPARAMS, **kwargs)


def fingerprint(contender: str, budget: int) -> str:
    """The behavioural fingerprint of the contender's configuration with today's code (seed 0, first update)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return behaviour_fingerprint(build(contender, 0), budget)


class EvalCurve(BaseCallback):
    """Every ``every`` env-steps, the mean return of ``episodes`` deterministic episodes, evaluated as trained."""

    def __init__(self, evaluate: Callable[..., Any], env: Any, every: int, episodes: int) -> None:
        super().__init__()
        self.evaluate, self.eval_env, self.every, self.episodes = evaluate, env, every, episodes
        self.steps: list[int] = []
        self.means: list[float] = []
        self._next = every

    def _on_step(self) -> bool:
        if self.num_timesteps >= self._next:
            self._next += self.every
            returns, _ = self.evaluate(
                self.model, self.eval_env, n_eval_episodes=self.episodes, deterministic=True, return_episode_rewards=True
            )
            self.steps.append(int(self.num_timesteps))
            self.means.append(float(np.mean(returns)))
        return True


def run_task(task: dict[str, Any]) -> dict[str, Any]:
    """Train one contender at one seed; evaluate it along the way and at the end."""
    th.set_num_threads(1)
    contender, seed, budget = task["contender"], task["seed"], task["budget"]
    _, _, _, evaluate, _ = ALL_CONTENDERS[contender]
    code, behaviour = code_record(), fingerprint(contender, budget)
    model = build(contender, seed)
    eval_env = make_vec_env(MEMORY_MAZE_ID, n_envs=1, seed=10_000 + seed)
    curve = EvalCurve(evaluate, eval_env, max(budget // task["n_evals"], 1), task["eval_episodes"])
    start = time.perf_counter()
    with warnings.catch_warnings(), tempfile.TemporaryDirectory():
        warnings.simplefilter("ignore", UserWarning)
        model.learn(budget, callback=curve)
        learn_s = time.perf_counter() - start
        returns, lengths = evaluate(
            model, eval_env, n_eval_episodes=task["final_episodes"], deterministic=True, return_episode_rewards=True
        )
    return dict(
        key=task["key"],
        env=MEMORY_MAZE_ID,
        contender=contender,
        algo=ALL_CONTENDERS[contender][0].__name__,
        seed=seed,
        budget=budget,
        hyperparams=dict(n_envs=N_ENVS, **HYPERPARAMS),
        policy_kwargs={**POLICY_KWARGS, **(LSTM_KWARGS if ALL_CONTENDERS[contender][2] else {})},
        **({"kwargs": KWARGS[contender]} if contender in KWARGS else {}),
        eval_steps=curve.steps,
        eval_means=curve.means,
        final_returns=[float(r) for r in returns],
        final_mean=float(np.mean(returns)),
        # the cued goal earns goal_reward minus the moves' cost, every other ending a negative return
        final_success=float(np.mean(np.asarray(returns) > 0)),
        final_lengths=[int(n) for n in lengths],
        learn_seconds=learn_s,
        finished=time.strftime("%Y-%m-%d %H:%M:%S"),
        loadavg=os.getloadavg(),
        code=code,
        fingerprint=behaviour,
    )


def load_run(task: dict[str, Any], out_dir: str) -> dict[str, Any] | None:
    """The cached run of ``task`` (its key must match), or None."""
    path = run_path(out_dir, task)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        run = json.load(f)
    return {**run, "file": os.path.relpath(path, out_dir)} if run.get("key") == task["key"] else None


def run_all(tasks: list[dict[str, Any]], out_dir: str, workers: int, rerun: frozenset[str] = frozenset()) -> None:
    """Run the tasks without a cached run (and those whose key is in ``rerun``), ``workers`` at a time."""
    todo = [t for t in tasks if t["key"] in rerun or load_run(t, out_dir) is None]
    print(f"{len(tasks) - len(todo)} of {len(tasks)} runs cached, {len(todo)} to run with {workers} worker(s)", flush=True)

    def report(task: dict[str, Any], run: dict[str, Any]) -> None:
        save_run(run, run_path(out_dir, task))
        print(
            f"[{time.strftime('%H:%M:%S')}] {task['contender']} seed {task['seed']}: final {run['final_mean']:.2f}, "
            f"success {run['final_success']:.0%}, {run['learn_seconds']:.0f}s",
            flush=True,
        )

    if workers <= 1:
        for task in todo:
            report(task, run_task(task))
        return
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn"), initializer=init_worker) as pool:
        futures = {pool.submit(run_task, task): task for task in todo}
        for done in as_completed(futures):
            report(futures[done], done.result())


def verify(runs: list[dict[str, Any]], budget: int) -> dict[str, list[dict[str, Any]]]:
    """The runs by provenance: ``current`` (their fingerprint is today's code's), ``stale``, ``unverified`` (none)."""
    today = {name: fingerprint(name, budget) for name in dict.fromkeys(r["contender"] for r in runs)}
    status: dict[str, list[dict[str, Any]]] = dict(current=[], stale=[], unverified=[])
    for run in runs:
        recorded = run.get("fingerprint")
        kind = "unverified" if recorded is None else "current" if recorded == today[run["contender"]] else "stale"
        status[kind].append(run)
    return status


def summarize(runs: list[dict[str, Any]], reps: int) -> dict[str, Any]:
    """Per contender: seeds, final return (IQM + 95% CI, mean, std), success rate, curve mean, seconds."""
    by_name = {name: sorted((r for r in runs if r["contender"] == name), key=lambda r: r["seed"]) for name in ALL_CONTENDERS}
    by_name = {k: v for k, v in by_name.items() if v}
    iqm = iqm_with_ci({k: np.array([r["final_mean"] for r in v]) for k, v in by_name.items()}, reps)
    rows = {}
    for name, rs in by_name.items():
        rows[name] = dict(
            algorithm=ALL_CONTENDERS[name][4],
            **final_return_row(rs, iqm[name]),
            success=float(np.mean([r["final_success"] for r in rs])),
            curve_mean=float(np.mean([np.mean(r["eval_means"]) for r in rs if r["eval_means"]] or [np.nan])),
            learn_seconds=float(np.mean([r["learn_seconds"] for r in rs])),
        )
    return dict(
        env=MEMORY_MAZE_ID,
        budget=runs[0]["budget"],
        memory_optimum=MEMORY_OPTIMUM,
        memoryless_bound=MEMORYLESS_BOUND,
        contenders=rows,
    )


def table(summary: dict[str, Any]) -> str:
    """The result table (Markdown), best first."""
    lines = [
        f"`{summary['env']}`, {summary['budget']:,} steps per run; the cued goal earns {summary['memory_optimum']}, a policy "
        f"without memory at most {summary['memoryless_bound']} in expectation.",
        "",
        "| contender | algorithm | seeds | final return IQM [95% CI] | final mean ± std | cued goal reached | "
        "curve mean | learn() s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, row in sorted(summary["contenders"].items(), key=lambda kv: -kv[1]["final_iqm"]):
        low, high = row["final_iqm_ci"]
        lines.append(
            f"| `{name}` | {row['algorithm']} | {len(row['seeds'])} | {row['final_iqm']:.2f} [{low:.2f}, {high:.2f}] | "
            f"{row['final_mean']:.2f} ± {row['final_std']:.2f} | {row['success']:.0%} | {row['curve_mean']:.2f} | "
            f"{row['learn_seconds']:.0f} |"
        )
    return "\n".join(lines) + "\n"


#: What the table's columns mean (report.md)
COLUMNS = (
    "Final return: the mean return of the deterministic evaluation episodes after training, per seed; IQM over seeds "
    "with its 95% stratified-bootstrap CI (rliable). Cued goal reached: the share of those episodes, over all seeds. "
    "Curve mean: the mean eval return over the run. learn() s: mean seconds per run (one torch thread, a shared "
    "machine). Each contender is evaluated as it was trained: with the env's masks for the maskable ones, without for "
    "RecurrentXPPO."
)


def plot(runs: list[dict[str, Any]], summary: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 5.0))
    for (name, row), color in zip(summary["contenders"].items(), plt.get_cmap("tab10").colors, strict=False):
        rs = [r for r in runs if r["contender"] == name and r["eval_means"]]
        if not rs:
            continue
        n = min(len(r["eval_means"]) for r in rs)
        steps, curves = np.array(rs[0]["eval_steps"][:n]), np.array([r["eval_means"][:n] for r in rs])
        ax.plot(steps, curves.mean(0), color=color, lw=1.6, label=f"{name}: {row['algorithm']} ({len(rs)})")
        ax.fill_between(steps, curves.min(0), curves.max(0), color=color, alpha=0.12)
    ax.axhline(summary["memory_optimum"], color="gray", ls="--", lw=0.8, label="remembering the cue")
    ax.axhline(summary["memoryless_bound"], color="gray", ls=":", lw=0.8, label="best without memory")
    ax.set_title(f"{summary['env']} ({summary['budget']:,} steps)", fontsize=13)
    ax.set_xlabel("environment steps", fontsize=11)
    ax.set_ylabel("eval return (mean, min-max over seeds)", fontsize=11)
    ax.legend(fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=80, pil_kwargs=dict(optimize=True))
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--contenders", nargs="+", default=list(CONTENDERS), choices=list(ALL_CONTENDERS))
    parser.add_argument("--campaign", default=CAMPAIGN, help="the report's folder under <out-dir>/campaigns/")
    parser.add_argument(
        "--kind",
        choices=KINDS,
        default=None,
        help="the claim of the pages the campaign answers, for benchmarks/render_docs.py (kept from the last report)",
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--budget", type=int, default=16384, help="env-steps per run")
    parser.add_argument("--n-evals", type=int, default=12, help="evaluations along each run")
    parser.add_argument("--eval-episodes", type=int, default=20)
    parser.add_argument("--final-episodes", type=int, default=100)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--bootstrap-reps", type=int, default=5000)
    parser.add_argument("--out-dir", default=RESULTS)
    parser.add_argument("--report-only", action="store_true", help="write the outputs from cached runs, run nothing")
    parser.add_argument("--stale", choices=("exclude", "rerun"), default="exclude", help="runs today's code would not make")
    parser.add_argument("--quick", action="store_true", help="smoke test: seed 0, 1,024 steps, few evaluation episodes")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.budget, args.n_evals, args.eval_episodes, args.final_episodes = [0], 1024, 2, 2, 4
        args.bootstrap_reps = 200
    th.set_num_threads(1)

    tasks = [
        dict(
            contender=name,
            seed=seed,
            budget=args.budget,
            n_evals=args.n_evals,
            eval_episodes=args.eval_episodes,
            final_episodes=args.final_episodes,
            key=task_key(name, seed, args.budget, args.n_evals, args.eval_episodes, args.final_episodes),
        )
        for seed in args.seeds
        for name in args.contenders
    ]
    if not args.report_only:
        run_all(tasks, args.out_dir, args.workers)
    runs = [run for run in (load_run(t, args.out_dir) for t in tasks) if run is not None]
    if not runs:
        print("no finished runs to report")
        return
    status = verify(runs, args.budget)
    if status["stale"] and args.stale == "rerun" and not args.report_only:
        run_all(tasks, args.out_dir, args.workers, rerun=frozenset(r["key"] for r in status["stale"]))
        runs = [run for run in (load_run(t, args.out_dir) for t in tasks) if run is not None]
        status = verify(runs, args.budget)
    runs = status["current"] + status["unverified"]
    provenance = provenance_note(status, True)
    summary = summarize(runs, args.bootstrap_reps)
    command = reproducing_command("benchmarks/mask_memory.py", sys.argv[1:] if argv is None else argv)
    question = (
        "Does MaskableRecurrentXPPO learn a task that needs both memory and action masks, where MaskableXPPO (no "
        "memory) and RecurrentXPPO (no masks) do not, at the same hyperparameters and budget?"
    )
    if set(args.contenders) & set(SEQUENCE_CONTENDERS):
        question = (
            "Does sequence_batching=True (whole-sequence LSTM passes in train()) learn as the step-by-step loop does, "
            "at the same hyperparameters, seeds and budget?"
        )
    body = table(summary)
    markdown = "\n".join([*report_header("Masks and memory", args.campaign, command, question, provenance), "", COLUMNS, ""])
    kind = args.kind or previous_report(args.out_dir, args.campaign).get("kind")
    report = dict(**({"kind": kind} if kind else {}), question=question, command=command, args=vars(args), summary=summary)
    report["runs"] = runs
    report["provenance"] = provenance_record(status, provenance)
    write_report(args.out_dir, args.campaign, report, markdown + "\n" + body, lambda path: plot(runs, summary, path))
    with open(os.path.join(campaign_dir(args.out_dir, args.campaign), "table.md"), "w") as f:
        f.write(body)
    print(markdown + "\n" + body)


if __name__ == "__main__":
    main()
