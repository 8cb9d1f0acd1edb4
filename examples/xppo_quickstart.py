"""
XPPO through the plain Stable-Baselines3 API: build, learn, save, load, evaluate.

usage: python examples/xppo_quickstart.py [--env CartPole-v1] [--timesteps 100000] [--quick]

XPPO takes every PPO keyword; here it also picks its losses: the SPO actor loss (Xie et al. 2025) with a
decoupled clip range (Zhou et al. 2025) and the improved value clipping (Lee & Chung 2024).
``--quick`` runs a few thousand steps, to check that everything works (it does not learn the task).
"""

from __future__ import annotations

import argparse
import os
import tempfile

from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from sb3_xppo import XPPO


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="CartPole-v1", help="gymnasium environment id")
    parser.add_argument("--timesteps", type=int, default=100_000, help="training budget in env steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a 2,048-step smoke run")
    args = parser.parse_args()
    timesteps = 2_048 if args.quick else args.timesteps

    env = make_vec_env(args.env, n_envs=8, seed=args.seed)
    model = XPPO(
        "MlpPolicy",
        env,
        # rl-zoo3's tuned PPO values for CartPole-v1
        n_steps=32,
        batch_size=256,
        n_epochs=20,
        gamma=0.98,
        gae_lambda=0.8,
        learning_rate=1e-3,
        actor_loss="spo",
        clip_range=(0.2, 0.28),
        value_loss="improved",
        clip_range_vf=0.2,
        seed=args.seed,
        verbose=0,
    )
    model.learn(total_timesteps=timesteps)

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "xppo_model.zip")
        model.save(path)
        loaded = XPPO.load(path, env=env)

    eval_env = make_vec_env(args.env, n_envs=1, seed=args.seed + 1000)
    mean_return, std_return = evaluate_policy(loaded, eval_env, n_eval_episodes=5 if args.quick else 20, deterministic=True)
    print(f"XPPO on {args.env} after {timesteps} steps: eval return {mean_return:.1f} +/- {std_return:.1f}")


if __name__ == "__main__":
    main()
