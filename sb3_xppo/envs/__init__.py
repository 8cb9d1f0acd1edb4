"""
Environments of the package, registered with gymnasium on import under the ``sb3_xppo`` namespace.

- ``sb3_xppo/GridMaze-v0``: :class:`GridMaze`, a maze whose moves into walls are illegal, with ``action_masks()``
  (invalid-action masking, ``MaskableXPPO``); 50 steps at most.
- ``sb3_xppo/TwoStylePendulum-v0``: :class:`TwoStylePendulum`, Pendulum-v1 with two conflicting styles 100x apart in
  scale, one per episode, one reward group each (multi-critic groups with disjoint support); 200 steps at most.

This room imports nothing else of the package (docs/guide/development.md, Layout).
"""

import gymnasium as gym

from sb3_xppo.envs.grid_maze import ACTION_NAMES, DEFAULT_LAYOUT, GridMaze
from sb3_xppo.envs.two_style_pendulum import STYLE_NAMES, FixedStyle, TwoStylePendulum

GRID_MAZE_ID = "sb3_xppo/GridMaze-v0"

if GRID_MAZE_ID not in gym.envs.registry:
    gym.register(id=GRID_MAZE_ID, entry_point="sb3_xppo.envs.grid_maze:GridMaze", max_episode_steps=50)

TWO_STYLE_PENDULUM_ID = "sb3_xppo/TwoStylePendulum-v0"

if TWO_STYLE_PENDULUM_ID not in gym.envs.registry:
    gym.register(
        id=TWO_STYLE_PENDULUM_ID, entry_point="sb3_xppo.envs.two_style_pendulum:TwoStylePendulum", max_episode_steps=200
    )

__all__ = [
    "ACTION_NAMES",
    "DEFAULT_LAYOUT",
    "GRID_MAZE_ID",
    "STYLE_NAMES",
    "TWO_STYLE_PENDULUM_ID",
    "FixedStyle",
    "GridMaze",
    "TwoStylePendulum",
]
