"""
What resumable checkpoints cost (docs/guide/resume.md): ``learn()`` time with a checkpoint every 10 rollouts against
none, and the time ``XPPO.resume`` takes, the envs' replay included, on LunarLander-v3's zoo entry (rl-zoo3's tuned
PPO hyperparameters: 16 envs x 1024 steps, reward normalization).

The envs are the package's (``sb3_xppo.vec_env.make_vec_env``, lean, with the entry's ``VecNormalize``), so that they
replay. Each repetition runs ``learn()`` for ``--rollouts`` rollouts (plus one, so that the checkpoint after the last
``train()`` is written) once each way, the order alternating; the overhead is the median of the paired ratios
(with / without). Then the newest checkpoint is resumed ``--reps`` times. Prints a line and writes
``benchmarks/results/single/resume.json``.

usage: python benchmarks/resume.py [--reps 9] [--rollouts 10] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from harness.layout import single_file, write_result
from harness.paired import paired_ratio
from harness.provenance import code_record
from harness.zoo import zoo_setup
from stable_baselines3.common.vec_env import VecNormalize

from sb3_xppo import XPPO, ResumableCheckpoint
from sb3_xppo.resume import checkpoints
from sb3_xppo.vec_env import make_vec_env

ENV_ID = "LunarLander-v3"


def entry(folder: str) -> tuple[dict[str, Any], int]:
    """:return: the zoo entry's model keywords (rl-zoo3's ``ppo.yml``, turned into objects by rl-zoo3) and its n_envs"""
    hyperparams, env, eval_env, _, raw = zoo_setup(ENV_ID, seed=0, budget=1, log_folder=folder)
    env.close()
    eval_env.close()
    return hyperparams, int(raw["n_envs"])


def build(n_envs: int, gamma: float) -> VecNormalize:
    """The entry's envs, the package's (they replay): lean envs, reward normalization."""
    return VecNormalize(make_vec_env(ENV_ID, n_envs, seed=0), norm_obs=False, norm_reward=True, gamma=gamma)


def timed_learn(hyperparams: dict[str, Any], n_envs: int, steps: int, folder: Path | None) -> float:
    model = XPPO(env=build(n_envs, hyperparams["gamma"]), seed=0, device="cpu", **hyperparams)
    callback = ResumableCheckpoint(folder, every_rollouts=10) if folder is not None else None
    start = time.perf_counter()
    model.learn(steps, callback=callback)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=9, help="paired repetitions (and resumes)")
    parser.add_argument("--rollouts", type=int, default=10, help="rollouts per learn() (a checkpoint after the 10th)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--out", default=single_file("resume.json"))
    args = parser.parse_args()
    th.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as scratch:
        hyperparams, n_envs = entry(scratch)
        steps = (args.rollouts + 1) * hyperparams["n_steps"] * n_envs
        times: dict[str, list[float]] = {"with": [], "without": []}
        for rep in range(args.reps):
            for name in ("with", "without") if rep % 2 == 0 else ("without", "with"):
                folder = Path(scratch) / f"run{rep}" if name == "with" else None
                times[name].append(timed_learn(hyperparams, n_envs, steps, folder))
        newest = checkpoints(Path(scratch) / "run0")[-1]
        resumes = []
        for _ in range(args.reps):
            start = time.perf_counter()
            XPPO.resume(newest, env=build(n_envs, hyperparams["gamma"]), device="cpu")
            resumes.append(time.perf_counter() - start)
        size = newest.stat().st_size

    ratios = [a / b for a, b in zip(times["with"], times["without"], strict=True)]
    record = dict(
        env=ENV_ID,
        n_envs=n_envs,
        n_steps=hyperparams["n_steps"],
        rollouts=args.rollouts + 1,
        checkpoints_per_learn=(args.rollouts + 1 - 1) // 10,
        checkpoint_bytes=size,
        reps=args.reps,
        threads=args.threads,
        learn_s_with=statistics.median(times["with"]),
        learn_s_without=statistics.median(times["without"]),
        overhead_ratio=statistics.median(ratios),
        overhead_ratio_quartiles=[float(q) for q in np.percentile(ratios, [25, 75])],
        # every pair's seconds and the median ratio's 95% bootstrap interval (harness/paired.py)
        learn_seconds=times,
        overhead_ratio_spread=paired_ratio(ratios),
        resume_s=statistics.median(resumes),
        resume_s_max=max(resumes),
        command=f"python benchmarks/resume.py --reps {args.reps} --rollouts {args.rollouts} --threads {args.threads}",
        code=code_record(),
    )
    print(
        f"{ENV_ID} zoo entry, {args.rollouts + 1} rollouts of {n_envs}x{hyperparams['n_steps']}: learn() "
        f"{record['learn_s_with']:.2f} s with a checkpoint every 10 rollouts, {record['learn_s_without']:.2f} s without, "
        f"median paired ratio {record['overhead_ratio']:.4f}; resume {record['resume_s']:.3f} s (replay included, "
        f"checkpoint {size / 1e3:.0f} kB)"
    )
    write_result(args.out, record)


if __name__ == "__main__":
    main()
