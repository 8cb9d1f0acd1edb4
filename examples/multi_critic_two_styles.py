"""
Multi-critic XPPO where a single critic struggles: two styles of different scales, one per episode.

``sb3_xppo/TwoStylePendulum-v0`` draws a style per episode and shows it in the observation: style 0 is Pendulum-v1's
swing-up, style 1 a conflicting "hang still at the bottom" reward 100x smaller. A single critic learns from the
active style's reward: its advantages in style-1 episodes are 100x smaller than in style-0 ones, so the policy
gradient hardly sees style 1. Multi-critic XPPO gives each style its own critic (``reward_groups``, the env's
``info["vector_reward"]``) and, with ``normalize_groups=True`` ("balanced"), z-scores each style's advantages over
that style's own samples (the env's ``info["vector_reward_mask"]``), so that both styles weigh the same.
Both models are trained with rl-zoo3's PPO hyperparameters for Pendulum-v1 and evaluated on each style.

usage: python examples/multi_critic_two_styles.py [--steps 200000] [--seed 0] [--quick]
"""

from __future__ import annotations

import argparse

import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from sb3_xppo import XPPO
from sb3_xppo.envs import STYLE_NAMES, TWO_STYLE_PENDULUM_ID, FixedStyle

# rl-zoo3's tuned PPO hyperparameters for Pendulum-v1 (hyperparams/ppo.yml), shared by both models
HYPERPARAMS = dict(n_steps=1024, gae_lambda=0.95, gamma=0.9, n_epochs=10, ent_coef=0.0, learning_rate=1e-3,
                   clip_range=0.2, use_sde=True, sde_sample_freq=4)  # fmt: skip
# One critic per style on a shared trunk, each style's advantages z-scored over its own samples ("balanced": what won
# the styles campaign, docs/guide/benchmarks.md)
MULTI_CRITIC = dict(reward_groups=list(STYLE_NAMES), normalize_groups=True)


def per_style_returns(model: XPPO, episodes: int, seed: int) -> list[float]:
    """:return: the mean deterministic return of ``episodes`` episodes of each style"""
    means = []
    for style in range(len(STYLE_NAMES)):
        env = make_vec_env(
            TWO_STYLE_PENDULUM_ID, n_envs=1, seed=seed, wrapper_class=FixedStyle, wrapper_kwargs=dict(style=style)
        )
        mean, _ = evaluate_policy(model, env, n_eval_episodes=episodes, deterministic=True)
        means.append(float(mean))
    return means


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200_000, help="environment steps per model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-episodes", type=int, default=20, help="per style")
    parser.add_argument("--quick", action="store_true", help="a few seconds: tiny budget (a smoke run)")
    args = parser.parse_args()
    hyperparams = dict(HYPERPARAMS)
    if args.quick:
        args.steps, args.eval_episodes, hyperparams["n_steps"] = 512, 1, 128
    th.set_num_threads(1)

    print(f"{TWO_STYLE_PENDULUM_ID}: mean return per style after {args.steps} steps (seed {args.seed})")
    print(f"{'model':>12} " + " ".join(f"{name:>10}" for name in STYLE_NAMES))
    for name, options in (("1 critic", {}), ("2 critics", MULTI_CRITIC)):
        env = make_vec_env(TWO_STYLE_PENDULUM_ID, n_envs=4, seed=args.seed)
        model = XPPO("MlpPolicy", env, seed=args.seed, device="cpu", **hyperparams, **options).learn(args.steps)
        returns = per_style_returns(model, args.eval_episodes, args.seed + 1000)
        print(f"{name:>12} " + " ".join(f"{r:10.1f}" for r in returns))


if __name__ == "__main__":
    main()
