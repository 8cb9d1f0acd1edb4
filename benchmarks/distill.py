"""
Environment steps for a student to reach 95% of a teacher's return: PPO with a DaggerCallback against PPO from
scratch, in one run (Ross et al. 2011, DAgger). The target (docs/guide/development.md): the student needs <= 1/10 of the steps.

- teacher: SB3 PPO with rl-zoo3's tuned hyperparameters for the env, trained once and cached under
  ``benchmarks/results/tmp/`` (``--retrain-teacher`` trains it again, ``--teacher PATH`` uses yours); its return
  is the mean of ``--teacher-episodes`` deterministic episodes;
- DAgger student: a fresh PPO with SB3's default hyperparameters (8 envs x 64 steps, as the test suite's) and
  ``DaggerCallback(teacher)`` with its defaults;
- DAgger student with a warm-up (``--pretrain-steps N``, one more run per seed): the same student with
  ``DaggerCallback(teacher, pretrain_steps=N)``: the teacher acts for N vector steps (N x 8 env steps) and the student
  fits them once before RL; it is also evaluated right after the warm-up (at 0 RL steps). Its steps are given both as
  RL steps and in total, the warm-up's env steps added;
- from scratch: PPO with rl-zoo3's tuned hyperparameters (the teacher's recipe, another seed).

The teacher's own training is never counted in a student's steps.

Both are evaluated (deterministic, ``--eval-episodes`` episodes) every few thousand steps by SB3's
``EvalCallback`` and stop at the first evaluation >= the threshold (``R - 0.05 |R|``), or at ``--max-steps``.
Prints a table and writes ``benchmarks/results/single/distill_<env>.json`` and a PNG of the learning curves.

usage: python benchmarks/distill.py [--env LunarLander-v3] [--seeds 0 1 2] [--ppo-seeds 0] [--pretrain-steps 64]
                                   [--name NAME] [--quick]
       (--quick: CartPole-v1, one seed unless --seeds, small budgets, about a minute per run)
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Any

import numpy as np
import torch as th
import yaml
from harness.layout import RESULTS, single_file, write_result
from harness.provenance import code_record
from rl_zoo3.utils import linear_schedule
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback, EvalCallback, StopTrainingOnRewardThreshold
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from sb3_xppo import DaggerCallback

# Steps between evaluations (DAgger student, PPO from scratch) and the step budget, per env
SCHEDULE = {
    "LunarLander-v3": dict(dagger_eval=4_096, ppo_eval=32_768, max_steps=2_000_000),
    "CartPole-v1": dict(dagger_eval=1_024, ppo_eval=4_096, max_steps=100_000),  # the zoo budget (its schedules span it)
}


def zoo_hyperparams(env_id: str) -> tuple[dict[str, Any], int, int]:
    """rl-zoo3's tuned PPO hyperparameters for ``env_id``: (PPO keywords, n_envs, n_timesteps)."""
    import rl_zoo3

    with open(os.path.join(os.path.dirname(rl_zoo3.__file__), "hyperparams", "ppo.yml")) as file:
        config = dict(yaml.safe_load(file)[env_id])
    n_envs, n_timesteps = int(config.pop("n_envs", 1)), int(float(config.pop("n_timesteps")))
    config.pop("policy", None)
    for key in ("learning_rate", "clip_range"):
        if isinstance(config.get(key), str) and config[key].startswith("lin_"):
            config[key] = linear_schedule(float(config[key][4:]))
    if config.pop("normalize", False):
        raise ValueError(f"{env_id}'s zoo config normalizes observations, which this benchmark does not handle")
    return config, n_envs, n_timesteps


def evaluate(model: Any, env_id: str, episodes: int, seed: int = 10_000) -> tuple[float, float]:
    mean, std = evaluate_policy(model, make_vec_env(env_id, n_envs=1, seed=seed), n_eval_episodes=episodes)
    return float(mean), float(std)


def get_teacher(env_id: str, path: str | None, retrain: bool, seed: int) -> tuple[PPO, str]:
    """Load the teacher, or train it with the zoo's recipe and cache it."""
    if path is None:
        path = os.path.join(RESULTS, "tmp", f"teacher_ppo_{env_id}.zip")
    if os.path.exists(path) and not retrain:
        return PPO.load(path, device="cpu"), path
    kwargs, n_envs, n_timesteps = zoo_hyperparams(env_id)
    print(f"training the teacher: PPO, rl-zoo3 hyperparameters, {n_timesteps} steps on {env_id} ...", flush=True)
    start = time.time()
    teacher = PPO("MlpPolicy", make_vec_env(env_id, n_envs=n_envs, seed=seed), seed=seed, device="cpu", **kwargs)
    teacher.learn(n_timesteps)
    print(f"  done in {time.time() - start:.0f} s", flush=True)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    teacher.save(path)
    return teacher, path


class EvaluateAtStart(BaseCallback):
    """
    One evaluation when training starts (after a DaggerCallback's warm-up, listed before it); training stops at the
    first step when it already reaches ``threshold``.
    """

    def __init__(self, env_id: str, threshold: float, episodes: int, seed: int) -> None:
        super().__init__()
        self.env_id, self.threshold, self.episodes, self.seed = env_id, threshold, episodes, seed
        self.mean_return: float | None = None

    def _on_training_start(self) -> None:
        self.mean_return = evaluate(self.model, self.env_id, self.episodes, seed=self.seed)[0]

    def _on_step(self) -> bool:
        return self.mean_return is None or self.mean_return < self.threshold


def steps_to_threshold(
    model: PPO,
    env_id: str,
    threshold: float,
    eval_freq: int,
    max_steps: int,
    episodes: int,
    seed: int,
    callback: Any = None,
    evaluate_at_start: bool = False,
) -> dict[str, Any]:
    """
    Train until an evaluation reaches ``threshold`` (SB3's EvalCallback + StopTrainingOnRewardThreshold; with
    ``evaluate_at_start`` also one evaluation before the first step, after ``callback``'s ``on_training_start``).
    """
    callbacks = [] if callback is None else [callback]
    at_start = EvaluateAtStart(env_id, threshold, episodes, seed + 1_000) if evaluate_at_start else None
    if at_start is not None:
        callbacks.append(at_start)
    with tempfile.TemporaryDirectory() as log_path:
        evaluation = EvalCallback(
            make_vec_env(env_id, n_envs=1, seed=seed + 1_000),
            callback_on_new_best=StopTrainingOnRewardThreshold(reward_threshold=threshold),
            n_eval_episodes=episodes,
            eval_freq=max(eval_freq // model.n_envs, 1),
            log_path=log_path,
            deterministic=True,
            verbose=0,
        )
        start = time.time()
        model.learn(max_steps, callback=[*callbacks, evaluation])
        seconds = time.time() - start
    curve = [
        (int(t), float(np.mean(r)))
        for t, r in zip(evaluation.evaluations_timesteps, evaluation.evaluations_results, strict=True)
    ]
    if at_start is not None and at_start.mean_return is not None:
        curve.insert(0, (0, at_start.mean_return))
    reached = bool(curve) and curve[-1][1] >= threshold
    return dict(seed=seed, steps=curve[-1][0] if reached else None, reached=reached, seconds=seconds, curve=curve)


def plot(results: dict[str, list[dict[str, Any]]], threshold: float, env_id: str, pretrain_steps: int, stem: str) -> None:
    """The evaluation curves of every run, and the threshold, in ``<stem>.png``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib: no plot")
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    lines = (
        ("dagger", "tab:blue", "PPO + DaggerCallback"),
        ("dagger_pretrain", "tab:green", f"PPO + DaggerCallback(pretrain_steps={pretrain_steps}), RL steps"),
        ("ppo", "tab:orange", "PPO from scratch (zoo)"),
    )
    for key, color, label in lines:
        for i, run in enumerate(results.get(key, [])):
            steps, returns = zip(*run["curve"], strict=True) if run["curve"] else ((), ())
            ax.plot(steps, returns, color=color, alpha=0.8, label=label if i == 0 else None)
    ax.axhline(threshold, color="k", linestyle="--", label=f"95% of the teacher ({threshold:.0f})")
    ax.set_xscale("symlog", linthresh=1_000)  # the evaluation at 0 RL steps (after a warm-up) shows too
    ax.set_xlabel("environment steps")
    ax.set_ylabel("mean eval return")
    ax.set_title(f"{env_id}: steps to 95% of the teacher's return")
    ax.legend()
    fig.tight_layout()
    fig.savefig(stem + ".png", dpi=120)
    print(f"wrote {stem}.png")


def parse_args() -> argparse.Namespace:
    """The command line, checked, with ``--quick``'s and the default seeds filled in."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="LunarLander-v3", choices=sorted(SCHEDULE))
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="default: 0 1 2 (0 with --quick)")
    parser.add_argument("--teacher", default=None, help="teacher checkpoint (default: train and cache one)")
    parser.add_argument("--retrain-teacher", action="store_true")
    parser.add_argument("--teacher-episodes", type=int, default=20)
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--max-steps", type=int, default=None, help="step budget of each run (default: per env)")
    parser.add_argument(
        "--dagger-eval", type=int, default=None, help="env steps between the DAgger students' evaluations (default: per env)"
    )
    parser.add_argument(
        "--ppo-seeds",
        type=int,
        nargs="*",
        default=None,
        help="the seeds among --seeds that also run PPO from scratch (default: all; none: only DAgger)",
    )
    parser.add_argument(
        "--pretrain-steps",
        type=int,
        default=0,
        help="also run each DAgger seed with DaggerCallback(pretrain_steps=N), a teacher-driven warm-up (0: not)",
    )
    parser.add_argument(
        "--name",
        default=None,
        help="write distill_<env>_<name>.json/.png (default: distill_<env>, and distill_<env>_quick with --quick)",
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="CartPole-v1, one seed, small budgets")
    args = parser.parse_args()
    if args.quick:
        args.env, args.teacher_episodes, args.eval_episodes = "CartPole-v1", 10, 5
        args.seeds = args.seeds or [0]
    args.seeds = args.seeds or [0, 1, 2]
    if args.pretrain_steps < 0:
        raise ValueError(f"--pretrain-steps must be >= 0, got {args.pretrain_steps}")
    return args


def run_schedule(args: argparse.Namespace) -> dict[str, int]:
    """The env's evaluation intervals and step budget, with the command line's overrides."""
    schedule = dict(SCHEDULE[args.env])
    if args.dagger_eval is not None:
        schedule["dagger_eval"] = args.dagger_eval
    if args.max_steps is not None:
        schedule["max_steps"] = args.max_steps
    elif args.quick:
        schedule["max_steps"] = 50_000
    return schedule


def run_students(
    args: argparse.Namespace, schedule: dict[str, int], teacher: Any, threshold: float
) -> dict[str, list[dict[str, Any]]]:
    """
    Per seed: the DAgger student (and with ``--pretrain-steps`` the student with a warm-up), then PPO from scratch on
    the seeds of ``--ppo-seeds``; each run's steps to ``threshold``, by ``"dagger"``, ``"dagger_pretrain"``, ``"ppo"``.
    """
    ppo_kwargs, ppo_envs, _ = zoo_hyperparams(args.env)
    ppo_seeds = args.seeds if args.ppo_seeds is None else args.ppo_seeds
    results: dict[str, list[dict[str, Any]]] = {"dagger": [], "ppo": []}
    warm_up_steps = args.pretrain_steps * 8  # env steps of the warm-up (8 envs)
    if args.pretrain_steps:
        results["dagger_pretrain"] = []
    for seed in args.seeds:
        for key, pretrain_steps in (("dagger", 0), ("dagger_pretrain", args.pretrain_steps)):
            if key not in results:
                continue
            student = PPO("MlpPolicy", make_vec_env(args.env, n_envs=8, seed=seed), n_steps=64, seed=seed, device="cpu")
            run = steps_to_threshold(
                student,
                args.env,
                threshold,
                schedule["dagger_eval"],
                schedule["max_steps"],
                args.eval_episodes,
                seed,
                DaggerCallback(teacher, pretrain_steps=pretrain_steps),
                evaluate_at_start=pretrain_steps > 0,
            )
            if pretrain_steps:
                run["pretrain_env_steps"] = warm_up_steps
                run["total_steps"] = None if run["steps"] is None else run["steps"] + warm_up_steps
            results[key].append(run)
            name = f"DAgger student{' + warm-up' if pretrain_steps else ''}"
            print(f"  {name}, seed {seed}: {run['steps']} RL steps ({run['seconds']:.0f} s)", flush=True)
        if seed not in ppo_seeds:
            continue
        scratch = PPO("MlpPolicy", make_vec_env(args.env, n_envs=ppo_envs, seed=seed), seed=seed, device="cpu", **ppo_kwargs)
        run = steps_to_threshold(
            scratch, args.env, threshold, schedule["ppo_eval"], schedule["max_steps"], args.eval_episodes, seed
        )
        results["ppo"].append(run)
        print(f"  PPO from scratch, seed {seed}: {run['steps']} steps ({run['seconds']:.0f} s)", flush=True)
    return results


def main() -> None:
    args = parse_args()
    th.set_num_threads(args.threads)
    schedule = run_schedule(args)
    teacher, teacher_path = get_teacher(args.env, args.teacher, args.retrain_teacher, seed=100)
    teacher_return, teacher_std = evaluate(teacher, args.env, args.teacher_episodes)
    threshold = teacher_return - 0.05 * abs(teacher_return)
    print(f"teacher: {teacher_return:.1f} +- {teacher_std:.1f} ({args.teacher_episodes} episodes); threshold {threshold:.1f}")
    results = run_students(args, schedule, teacher, threshold)
    warm_up_steps = args.pretrain_steps * 8  # env steps of the warm-up (8 envs)

    def median(runs: list[dict[str, Any]], extra: int = 0) -> float | None:
        # A run that never reached the threshold counts as the budget (a lower bound on its steps)
        steps = [(r["steps"] if r["reached"] else schedule["max_steps"]) + extra for r in runs]
        return float(np.median(steps)) if steps else None

    dagger_median, ppo_median = median(results["dagger"]), median(results["ppo"])
    ratio = ppo_median / dagger_median if dagger_median and ppo_median else None
    print(f"\n{'':18}{'steps to ' + format(threshold, '.1f'):>20}   per seed")
    for name, key in (("DAgger student", "dagger"), ("PPO from scratch", "ppo")):
        if results[key]:
            per_seed = ", ".join(str(r["steps"]) if r["reached"] else f">{schedule['max_steps']}" for r in results[key])
            print(f"{name:18}{median(results[key]):>20.0f}   {per_seed}")
    if args.pretrain_steps:
        for label, extra in (("+ warm-up, RL", 0), ("+ warm-up, total", warm_up_steps)):
            per_seed = ", ".join(
                str(r["steps"] + extra) if r["reached"] else f">{schedule['max_steps']}" for r in results["dagger_pretrain"]
            )
            print(f"{label:18}{median(results['dagger_pretrain'], extra):>20.0f}   {per_seed}")
    if ratio is not None:
        print(f"PPO / DAgger: {ratio:.1f}x (target >= 10x)")

    summary = dict(
        env=args.env,
        teacher=dict(
            path=os.path.relpath(teacher_path),
            mean_return=teacher_return,
            std_return=teacher_std,
            episodes=args.teacher_episodes,
        ),
        threshold=threshold,
        eval_episodes=args.eval_episodes,
        eval_every=dict(dagger=schedule["dagger_eval"], ppo=schedule["ppo_eval"]),
        max_steps=schedule["max_steps"],
        dagger_student="PPO defaults, 8 envs x 64 steps, DaggerCallback(teacher) defaults",
        ppo_from_scratch="PPO, rl-zoo3 hyperparameters",
        median_steps=dict(dagger=dagger_median, ppo=ppo_median),
        ratio=ratio,
        runs=results,
        code=code_record(),
    )
    if args.pretrain_steps:
        summary.update(
            pretrain_steps=args.pretrain_steps,
            dagger_pretrain_student=(
                f"the DAgger student with DaggerCallback(teacher, pretrain_steps={args.pretrain_steps}): "
                f"{warm_up_steps} teacher-driven env steps before RL, counted in total (not in RL) steps"
            ),
            teacher_training="the teacher's own training is not counted in any student's steps",
        )
        summary["median_steps"].update(
            dagger_pretrain=median(results["dagger_pretrain"]),
            dagger_pretrain_total=median(results["dagger_pretrain"], warm_up_steps),
        )
    suffix = f"_{args.name}" if args.name else "_quick" if args.quick else ""
    stem = single_file(f"distill_{args.env}{suffix}")
    write_result(stem + ".json", summary, indent=2)
    plot(results, threshold, args.env, args.pretrain_steps, stem)


if __name__ == "__main__":
    main()
