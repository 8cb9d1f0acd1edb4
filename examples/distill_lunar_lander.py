"""
Distill a LunarLander-v3 teacher into a fresh PPO student with DAgger, then let RL take over.

1. The teacher: ``--teacher T.zip`` (any SB3 checkpoint), else the benchmark's cached one
   (``python benchmarks/distill.py`` trains it), else a PPO trained here with rl-zoo3's hyperparameters.
2. The student: stock SB3 PPO, trained with ``DaggerCallback``: every state it visits is labelled by the teacher
   and joins a bounded aggregated dataset it is fitted to. The distillation weight decays from 1 to 0 over the
   first half of training (pure RL afterwards), and ``beta`` executes some of the teacher's actions early on.
3. Teacher and student are evaluated; the student is saved and reloaded with ``PPO.load``, stock SB3.

The same, checkpoint to checkpoint, without RL::

    python -m sb3_xppo.dagger_distill --teacher T.zip --student-algo ppo --env LunarLander-v3 --timesteps 100000 --out S.zip

usage: python examples/distill_lunar_lander.py [--teacher T.zip] [--timesteps 100000] [--quick]
       (--quick: a briefly trained teacher and a few thousand steps, to see it run in seconds)
"""

import argparse
import os
import tempfile

import torch as th
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from sb3_xppo import DaggerCallback

ENV = "LunarLander-v3"
CACHED_TEACHER = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "results", "tmp", f"teacher_ppo_{ENV}.zip")


def train_teacher(steps: int) -> PPO:
    """PPO with rl-zoo3's LunarLander-v3 hyperparameters (1M steps reach about 250); short rollouts for short runs."""
    n_steps = 1024 if steps >= 100_000 else 128
    env = make_vec_env(ENV, n_envs=16, seed=100)
    kwargs = dict(batch_size=64, gae_lambda=0.98, gamma=0.999, n_epochs=4, ent_coef=0.01, seed=100)
    teacher = PPO("MlpPolicy", env, n_steps=n_steps, **kwargs)
    return teacher.learn(steps)


def decaying_weight(progress_remaining: float) -> float:
    """Distillation weight: 1 at the start, 0 (pure RL) from half-way on."""
    return max(0.0, 2.0 * progress_remaining - 1.0)


def early_beta(progress_remaining: float) -> float:
    """Probability of executing the teacher's action: 0.5 at the start, 0 after the first quarter."""
    return max(0.0, 0.5 * (4.0 * progress_remaining - 3.0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teacher", default=None, help="teacher checkpoint (.zip)")
    parser.add_argument("--teacher-steps", type=int, default=1_000_000, help="steps when the teacher is trained here")
    parser.add_argument("--timesteps", type=int, default=100_000, help="student's training steps")
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="a tiny run, to see it work")
    args = parser.parse_args()
    th.set_num_threads(1)  # tiny networks: one thread is fastest
    if args.quick:
        args.teacher_steps, args.timesteps, args.eval_episodes = 4_096, 2_048, 1

    if args.teacher is not None:
        teacher = PPO.load(args.teacher)
    elif os.path.exists(CACHED_TEACHER) and not args.quick:
        teacher = PPO.load(CACHED_TEACHER)
    else:
        print(f"training a teacher for {args.teacher_steps} steps ...")
        teacher = train_teacher(args.teacher_steps)

    student = PPO("MlpPolicy", make_vec_env(ENV, n_envs=8, seed=0), n_steps=64, seed=0, verbose=0)
    callback = DaggerCallback(teacher, weight=decaying_weight, beta=early_beta)
    student.learn(args.timesteps, callback=callback)

    eval_env = make_vec_env(ENV, n_envs=1, seed=1_000)
    for name, model in (("teacher", teacher), ("student", student)):
        mean, std = evaluate_policy(model, eval_env, n_eval_episodes=args.eval_episodes)
        print(f"{name}: {mean:8.1f} +- {std:.1f}  ({args.eval_episodes} episodes)")

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "student.zip")
        student.save(path)
        reloaded = PPO.load(path)  # the distilled student is a plain PPO checkpoint
        print(f"saved and reloaded with PPO.load: {type(reloaded).__name__}, {reloaded.num_timesteps} steps")


if __name__ == "__main__":
    main()
