"""
Environments of the package, registered with gymnasium on import under the ``sb3_xppo`` namespace.

- ``sb3_xppo/GridMaze-v0``: :class:`GridMaze`, a maze whose moves into walls are illegal, with ``action_masks()``
  (invalid-action masking, ``MaskableXPPO``); 50 steps at most.
- ``sb3_xppo/MemoryMaze-v0``: :class:`MemoryMaze`, a T-maze whose paying goal is shown only at the first step, with
  illegal moves and ``action_masks()``: it takes memory and masks (``MaskableRecurrentXPPO``); 30 steps at most.
- ``sb3_xppo/TwoStylePendulum-v0``: :class:`TwoStylePendulum`, Pendulum-v1 with two conflicting styles 100x apart in
  scale, one per episode, one reward group each (multi-critic groups with disjoint support); 200 steps at most.
- ``sb3_xppo/LunarLanderGroups-v3`` and ``sb3_xppo/LunarLanderContinuousGroups-v3``: LunarLander-v3 and
  LunarLanderContinuous-v3 in :class:`LunarLanderRewardGroups`, their own reward with its four terms as reward
  groups (outcome, shaping, main engine, side engine) whose weighted sum is the reward bit for bit; 1000 steps at
  most.

This room imports nothing else of the package (docs/guide/development.md, Layout).
"""

import gymnasium as gym

from sb3_xppo.envs.grid_maze import ACTION_NAMES, DEFAULT_LAYOUT, GridMaze
from sb3_xppo.envs.lunar_lander_groups import (
    LUNAR_LANDER_GROUP_NAMES,
    LUNAR_LANDER_GROUP_WEIGHTS,
    LunarLanderRewardGroups,
)
from sb3_xppo.envs.memory_maze import DEFAULT_MEMORY_LAYOUT, MemoryMaze
from sb3_xppo.envs.two_style_pendulum import STYLE_NAMES, FixedStyle, TwoStylePendulum

GRID_MAZE_ID = "sb3_xppo/GridMaze-v0"

if GRID_MAZE_ID not in gym.envs.registry:
    gym.register(id=GRID_MAZE_ID, entry_point="sb3_xppo.envs.grid_maze:GridMaze", max_episode_steps=50)

MEMORY_MAZE_ID = "sb3_xppo/MemoryMaze-v0"

if MEMORY_MAZE_ID not in gym.envs.registry:
    gym.register(id=MEMORY_MAZE_ID, entry_point="sb3_xppo.envs.memory_maze:MemoryMaze", max_episode_steps=30)

TWO_STYLE_PENDULUM_ID = "sb3_xppo/TwoStylePendulum-v0"

if TWO_STYLE_PENDULUM_ID not in gym.envs.registry:
    gym.register(
        id=TWO_STYLE_PENDULUM_ID, entry_point="sb3_xppo.envs.two_style_pendulum:TwoStylePendulum", max_episode_steps=200
    )

#: LunarLander-v3 in :class:`LunarLanderRewardGroups` (LunarLander-v3's time limit, 1000 steps)
LUNAR_LANDER_GROUPS_ID = "sb3_xppo/LunarLanderGroups-v3"
#: LunarLanderContinuous-v3 in :class:`LunarLanderRewardGroups` (its time limit, 1000 steps)
LUNAR_LANDER_CONTINUOUS_GROUPS_ID = "sb3_xppo/LunarLanderContinuousGroups-v3"

for _env_id, _kwargs in ((LUNAR_LANDER_GROUPS_ID, {}), (LUNAR_LANDER_CONTINUOUS_GROUPS_ID, {"continuous": True})):
    if _env_id not in gym.envs.registry:
        gym.register(
            id=_env_id,
            entry_point="sb3_xppo.envs.lunar_lander_groups:make_lunar_lander_groups",
            max_episode_steps=1000,
            kwargs=_kwargs,
        )

__all__ = [
    "ACTION_NAMES",
    "DEFAULT_LAYOUT",
    "DEFAULT_MEMORY_LAYOUT",
    "GRID_MAZE_ID",
    "LUNAR_LANDER_CONTINUOUS_GROUPS_ID",
    "LUNAR_LANDER_GROUPS_ID",
    "LUNAR_LANDER_GROUP_NAMES",
    "LUNAR_LANDER_GROUP_WEIGHTS",
    "MEMORY_MAZE_ID",
    "STYLE_NAMES",
    "TWO_STYLE_PENDULUM_ID",
    "FixedStyle",
    "GridMaze",
    "LunarLanderRewardGroups",
    "MemoryMaze",
    "TwoStylePendulum",
]
