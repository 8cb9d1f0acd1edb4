"""
Multi-critic XPPO on mo-lunar-lander-v3: four critics against one, on the same reward and the same budget.

MO-Gymnasium's lunar lander returns a reward vector of four terms (landing outcome, shaping, main-engine fuel,
side-engine fuel); ``LinearReward`` with weights ``(1, 1, 0.3, 0.03)`` scalarizes it into the reward of
``LunarLander-v3`` and keeps the vector in ``info["vector_reward"]``. The single-critic XPPO learns from the
scalar reward; the multi-critic one gives each term its own critic, z-scores each group's advantages and
combines them with the same weights (Mysore et al. 2022). Both are evaluated on the scalarized return
(deterministic policy), seed by seed.

usage: python examples/multi_critic_lunar_lander.py [--steps 1000000] [--seeds 0 1 2] [--n-envs 16]
                                                     [--separate-critics] [--eval-episodes 20] [--quick]
"""

from __future__ import annotations

import argparse
import time

import mo_gymnasium
import numpy as np
import torch as th
from mo_gymnasium.wrappers import LinearReward
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecEnv

from sb3_xppo import XPPO

GROUPS = ["outcome", "shaping", "main_engine", "side_engine"]
# LunarLander-v3's own reward is this weighting of the four terms
WEIGHTS = [1.0, 1.0, 0.3, 0.03]
# rl-zoo3's tuned PPO hyperparameters for LunarLander (hyperparams/ppo.yml), shared by both models
HYPERPARAMS = dict(n_steps=1024, batch_size=64, n_epochs=4, gamma=0.999, gae_lambda=0.98, ent_coef=0.01)


def make_env(n_envs: int, seed: int) -> VecEnv:
    # LinearReward inside the Monitor that make_vec_env adds: the Monitor records the scalarized return
    def scalarized() -> LinearReward:
        return LinearReward(mo_gymnasium.make("mo-lunar-lander-v3"), weight=np.array(WEIGHTS, dtype=np.float32))

    return make_vec_env(scalarized, n_envs=n_envs, seed=seed)


def train_and_evaluate(multi_critic: bool, args: argparse.Namespace, seed: int) -> float:
    """:return: the mean scalarized return of the deterministic policy over ``args.eval_episodes`` episodes"""
    options = {}
    if multi_critic:
        options = dict(reward_groups=GROUPS, group_weights=WEIGHTS, policy_kwargs=dict(separate_critics=args.separate_critics))
    hyperparams = dict(HYPERPARAMS, n_steps=args.n_steps) if args.n_steps else HYPERPARAMS
    model = XPPO("MlpPolicy", make_env(args.n_envs, seed), seed=seed, device="cpu", **hyperparams, **options)
    model.learn(args.steps)
    mean_return, _ = evaluate_policy(model, make_env(1, seed + 1000), n_eval_episodes=args.eval_episodes, deterministic=True)
    return float(mean_return)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1_000_000, help="environment steps per model and seed")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--n-envs", type=int, default=16)
    parser.add_argument("--n-steps", type=int, default=None, help="rollout length per env (default: rl-zoo3's 1024)")
    parser.add_argument("--separate-critics", action="store_true", help="one value MLP per group (default: shared trunk)")
    parser.add_argument("--eval-episodes", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--quick", action="store_true", help="a few seconds: tiny budget, one seed (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.seeds, args.n_envs, args.n_steps, args.eval_episodes = 256, [0], 2, 64, 1
    th.set_num_threads(args.threads)

    print(f"mo-lunar-lander-v3, scalarized return (weights {WEIGHTS}), {args.steps} steps per model and seed")
    print(f"{'seed':>4} {'4 critics':>10} {'1 critic':>10} {'minutes':>8}")
    results = {True: [], False: []}
    for seed in args.seeds:
        start = time.perf_counter()
        for multi_critic in (True, False):
            results[multi_critic].append(train_and_evaluate(multi_critic, args, seed))
        print(f"{seed:>4} {results[True][-1]:10.1f} {results[False][-1]:10.1f} {(time.perf_counter() - start) / 60:8.1f}")
    multi, single = np.asarray(results[True]), np.asarray(results[False])
    print(f"{'mean':>4} {multi.mean():10.1f} {single.mean():10.1f}  (std {multi.std():.1f} / {single.std():.1f})")


if __name__ == "__main__":
    main()
