"""
MaskableXPPO on a maze whose moves into walls are illegal: invalid-action masking with XPPO's losses.

usage: python examples/maskable_grid_maze.py [--timesteps 10000] [--seed 0] [--quick] [--out FILE]

``sb3_xppo/GridMaze-v0`` (``sb3_xppo.envs.GridMaze``) ends an episode at -1 when the agent walks into a wall or
off the grid, as an illegal move loses a board game, and tells the legal moves of each cell through
``action_masks()``. MaskableXPPO (sb3-contrib's MaskablePPO, Huang & Ontañón 2022, trained by XPPO's core, here
with the SPO actor loss of Xie et al. 2025) samples legal moves only, so it never takes an illegal one while it
learns; plain XPPO has to learn from its mistakes. The script counts the illegal moves each makes in training,
then evaluates the masked model twice: with its masks, and without them, as SB3's and rl-zoo3's evaluation would
(``python -m sb3_xppo.train/enjoy`` pass the masks). A model trained with masks has never learnt to avoid the
illegal moves: it must be evaluated with them. ``--quick`` runs 2,048 steps, to check that everything works;
``--out`` writes the figures as JSON (docs/guide/contrib.md's table is rendered from
``benchmarks/results/single/grid_maze.json``).
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
from sb3_contrib.common.maskable.evaluation import evaluate_policy as evaluate_with_masks
from sb3_contrib.common.maskable.utils import get_action_masks
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

from sb3_xppo import XPPO, MaskableXPPO
from sb3_xppo.envs import GRID_MAZE_ID


class IllegalMoves(BaseCallback):
    """Counts the illegal moves of the training rollouts (``info["illegal_action"]``)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def _on_step(self) -> bool:
        self.count += sum(bool(info.get("illegal_action")) for info in self.locals["infos"])
        return True


def train(algorithm: type[XPPO] | type[MaskableXPPO], timesteps: int, seed: int) -> tuple[XPPO | MaskableXPPO, int]:
    """
    :return: the model trained on the maze (4 envs, the settings of ``zoo_configs/xppo_mask.yml``) and the number of
        illegal moves it made while training
    """
    model = algorithm(
        "MlpPolicy",
        make_vec_env(GRID_MAZE_ID, n_envs=4, seed=seed),
        n_steps=128,
        batch_size=64,
        ent_coef=0.01,
        actor_loss="spo",
        seed=seed,
        verbose=0,
    )
    illegal = IllegalMoves()
    model.learn(total_timesteps=timesteps, callback=illegal)
    return model, illegal.count


def show_path(model: MaskableXPPO, seed: int) -> str:
    """:return: the masked greedy path of one episode, as the names of its moves"""
    env = make_vec_env(GRID_MAZE_ID, n_envs=1, seed=seed)
    obs, moves = env.reset(), []
    for _ in range(50):
        action, _ = model.predict(obs, deterministic=True, action_masks=get_action_masks(env))
        moves.append(("up", "right", "down", "left")[int(action[0])])
        obs, _, done, _ = env.step(action)
        if done[0]:
            break
    return " ".join(moves)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timesteps", type=int, default=10_000, help="training budget in env steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a 2,048-step smoke run")
    parser.add_argument("--out", default=None, help="write the figures to this JSON file")
    args = parser.parse_args()
    timesteps = 2_048 if args.quick else args.timesteps

    masked, masked_illegal = train(MaskableXPPO, timesteps, args.seed)
    _, plain_illegal = train(XPPO, timesteps, args.seed)
    print(f"Illegal moves in {timesteps} training steps: MaskableXPPO {masked_illegal}, XPPO (no masks) {plain_illegal}")

    eval_env = make_vec_env(GRID_MAZE_ID, n_envs=1, seed=args.seed + 1000)
    evaluations = {}
    for use_masking in (True, False):
        returns, lengths = evaluate_with_masks(
            masked, eval_env, n_eval_episodes=5, use_masking=use_masking, return_episode_rewards=True
        )
        evaluations["with" if use_masking else "without"] = dict(returns=list(returns), lengths=list(lengths))
        print(
            f"MaskableXPPO evaluated {'with' if use_masking else 'without'} masks: "
            f"return {np.mean(returns):.2f}, episode length {np.mean(lengths):.1f}"
        )
    path = show_path(masked, args.seed)
    print(f"Its path with masks: {path} (the shortest takes 8 moves)")
    if args.out:
        figures = dict(
            command=" ".join(["python examples/maskable_grid_maze.py", *sys.argv[1:]]),
            timesteps=timesteps,
            seed=args.seed,
            illegal=dict(masked=masked_illegal, plain=plain_illegal),
            evaluations=evaluations,
            path=path.split(),
            shortest=8,
        )
        with open(args.out, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
