"""
Multi-critic XPPO on LunarLander-v3's own reward: four critics against one, on the same reward and the same budget.

``sb3_xppo/LunarLanderGroups-v3`` is LunarLander-v3 whose steps also report its reward's four terms (landing
outcome, shaping, main-engine fuel, side-engine fuel) in ``info["vector_reward"]``
(:class:`sb3_xppo.envs.LunarLanderRewardGroups`); with the weights ``(1, 1, 0.3, 0.03)`` they sum to the reward
bit for bit, the step that ends an episode included, where LunarLander-v3 pays the outcome alone. The single-critic
XPPO learns from the scalar reward; the multi-critic one gives each term its own critic (Mysore et al. 2022) and, in
the "scalarize" mode (the default here: ``normalize_groups=False, group_reduce="sum"``), sums the groups'
advantages with the reward's own weights, so that its actor's objective is the single critic's and only the
baseline is learned in parts (the critics' loss in the scalar reward's units: ``group_value_weights="squared"``,
that mode's default). ``--mode balanced`` z-scores each group's advantages first (XPPO's default, for groups whose
scales are arbitrary), which changes the objective here. The 5-seed campaign of ``benchmarks/multi_critic.py`` on
this env found "scalarize" level with the single critic (docs/guide/multi_critic.md, Evidence). Both models are
evaluated on LunarLander-v3's return (deterministic policy), seed by seed.

usage: python examples/multi_critic_lunar_lander.py [--steps 1000000] [--seeds 0 1 2] [--n-envs 16]
                                                     [--separate-critics] [--eval-episodes 20] [--quick]
                                                     [--mode scalarize|balanced] [--models both|multi|single]
                                                     [--results-dir DIR]

``--models`` trains one side only, so that the two can run in parallel processes; with ``--results-dir`` each
finished (model, seed) is kept as a JSON file there and read back instead of trained again, so the table can
be printed from both sides afterwards (a file of another env or budget is trained again).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecEnv

from sb3_xppo import XPPO
from sb3_xppo.envs import LUNAR_LANDER_GROUP_NAMES, LUNAR_LANDER_GROUP_WEIGHTS, LUNAR_LANDER_GROUPS_ID

GROUPS = list(LUNAR_LANDER_GROUP_NAMES)
# LunarLander-v3's own reward is this weighting of the four terms, on every step
WEIGHTS = list(LUNAR_LANDER_GROUP_WEIGHTS)
# rl-zoo3's tuned PPO hyperparameters for LunarLander (hyperparams/ppo.yml), shared by both models
HYPERPARAMS = dict(n_steps=1024, batch_size=64, n_epochs=4, gamma=0.999, gae_lambda=0.98, ent_coef=0.01)
# The two ways of combining the groups' advantages (docs/guide/multi_critic.md)
MODES = {
    "scalarize": dict(normalize_groups=False, group_reduce="sum"),
    "balanced": dict(normalize_groups=True, group_reduce="mean"),
}


def make_env(n_envs: int, seed: int) -> VecEnv:
    # the scalar reward, which the Monitor records, is LunarLander-v3's own
    return make_vec_env(LUNAR_LANDER_GROUPS_ID, n_envs=n_envs, seed=seed)


def train_and_evaluate(multi_critic: bool, args: argparse.Namespace, seed: int) -> float:
    """:return: the mean LunarLander-v3 return of the deterministic policy over ``args.eval_episodes`` episodes"""
    options = {}
    if multi_critic:
        options = dict(
            reward_groups=GROUPS,
            group_weights=WEIGHTS,
            **MODES[args.mode],
            policy_kwargs=dict(separate_critics=args.separate_critics),
        )
    hyperparams = dict(HYPERPARAMS, n_steps=args.n_steps) if args.n_steps else HYPERPARAMS
    model = XPPO("MlpPolicy", make_env(args.n_envs, seed), seed=seed, device="cpu", **hyperparams, **options)
    model.learn(args.steps)
    mean_return, _ = evaluate_policy(model, make_env(1, seed + 1000), n_eval_episodes=args.eval_episodes, deterministic=True)
    return float(mean_return)


MODELS = {"multi": "4 critics", "single": "1 critic"}


def run_once(model: str, args: argparse.Namespace, seed: int) -> dict:
    """Train and evaluate one model on one seed, or read the result back from ``args.results_dir`` (a result of the
    same model, seed, budget and env)."""
    name = model
    if model == "multi":
        name += "_separate" * args.separate_critics + f"_{args.mode}"
    path = args.results_dir / f"{name}_seed{seed}.json" if args.results_dir else None
    if path is not None and path.exists():
        result = json.loads(path.read_text())
        if result.get("env") == LUNAR_LANDER_GROUPS_ID and result.get("steps") == args.steps:
            return result
    start = time.perf_counter()
    result = dict(model=name, seed=seed, steps=args.steps, env=LUNAR_LANDER_GROUPS_ID)
    result["return"] = train_and_evaluate(model == "multi", args, seed)
    result["minutes"] = (time.perf_counter() - start) / 60
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1_000_000, help="environment steps per model and seed")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--n-envs", type=int, default=16)
    parser.add_argument("--n-steps", type=int, default=None, help="rollout length per env (default: rl-zoo3's 1024)")
    parser.add_argument("--separate-critics", action="store_true", help="one value MLP per group (default: shared trunk)")
    parser.add_argument(
        "--mode",
        choices=list(MODES),
        default="scalarize",
        help="scalarize: the groups' advantages summed with the reward's weights (the single critic's objective, "
        "level with it on mo-lunar-lander-v3); balanced: each group's advantages z-scored first",
    )
    parser.add_argument("--eval-episodes", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--models", choices=["both", *MODELS], default="both", help="train both models or one side only")
    parser.add_argument(
        "--results-dir", type=Path, default=None, help="keep one JSON per model and seed here; finished runs are read back"
    )
    parser.add_argument("--quick", action="store_true", help="a few seconds: tiny budget, one seed (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.seeds, args.n_envs, args.n_steps, args.eval_episodes = 256, [0], 2, 64, 1
    th.set_num_threads(args.threads)
    models = list(MODELS) if args.models == "both" else [args.models]

    print(f"{LUNAR_LANDER_GROUPS_ID}, LunarLander-v3's return (groups {GROUPS}, weights {WEIGHTS}), {args.steps} steps")
    print(f"{'seed':>4} " + " ".join(f"{MODELS[m]:>10}" for m in models) + f" {'minutes':>8}")
    returns: dict[str, list[float]] = {m: [] for m in models}
    for seed in args.seeds:
        results = [run_once(m, args, seed) for m in models]
        for m, result in zip(models, results, strict=True):
            returns[m].append(result["return"])
        minutes = sum(r["minutes"] for r in results)
        print(f"{seed:>4} " + " ".join(f"{r['return']:10.1f}" for r in results) + f" {minutes:8.1f}")
    means = " ".join(f"{np.mean(returns[m]):10.1f}" for m in models)
    stds = " / ".join(f"{np.std(returns[m]):.1f}" for m in models)
    print(f"{'mean':>4} {means}  (std {stds})")


if __name__ == "__main__":
    main()
