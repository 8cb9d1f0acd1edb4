"""
XPPO on two ranks (``distributed=True``, docs/guide/distributed.md): rl-zoo3's LunarLander-v3 entry (16 envs x 1024
steps, minibatch 64) split over the ranks, 8 envs and a minibatch of 32 each, so that the global rollout and minibatch
are the entry's. Run under PyTorch's launcher:

    python -m torch.distributed.run --standalone --nproc-per-node 2 examples/distributed_lunar_lander.py

or plainly (``python examples/distributed_lunar_lander.py``), and it starts the launcher itself. Rank 0 evaluates
and saves; the saved model is a plain one. ``--quick``: a short run.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch as th
from stable_baselines3.common.evaluation import evaluate_policy

from sb3_xppo import XPPO
from sb3_xppo.vec_env import make_vec_env

RANKS = 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a short run (CI)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if "RANK" not in os.environ:  # not started by the launcher: start it, with this script on every rank
        launcher = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(RANKS)]
        os.execv(sys.executable, [sys.executable, *launcher, os.path.abspath(__file__), *sys.argv[1:]])

    th.set_num_threads(1)  # one core per rank
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    steps = 2 * 16 * 64 if args.quick else 1_000_000  # every rank's steps together (num_timesteps is global)
    n_steps = 64 if args.quick else 1024
    env = make_vec_env("LunarLander-v3", n_envs=16 // world, seed=args.seed)  # seeded seed + rank * 8 + i
    model = XPPO(
        "MlpPolicy",
        env,
        n_steps=n_steps,
        batch_size=64 // world,
        n_epochs=4,
        gamma=0.999,
        gae_lambda=0.98,
        ent_coef=0.01,
        seed=args.seed,
        distributed=True,
    )
    model.learn(steps, progress_bar=not args.quick)
    if rank == 0:
        mean, std = evaluate_policy(
            model, make_vec_env("LunarLander-v3", n_envs=1, seed=100), n_eval_episodes=5 if args.quick else 20
        )
        print(f"{world} ranks, {model.num_timesteps} env steps: mean return {mean:.1f} +- {std:.1f}")
        model.save("xppo_lunar_lander_distributed")
        print("saved xppo_lunar_lander_distributed.zip (a plain model: XPPO.load it anywhere)")


if __name__ == "__main__":
    main()
