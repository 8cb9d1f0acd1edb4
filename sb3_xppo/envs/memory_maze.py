"""MemoryMaze: a T-maze whose rewarded arm is shown only at the first step, with illegal moves: memory and masks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from sb3_xppo.envs.grid_maze import CELL_PIXELS, MOVES, check_layout, legal_moves

#: The default maze: ``S`` start, ``L`` and ``R`` the two goals, ``#`` wall, ``.`` free. From the dead end ``S`` a
#: corridor leads up to the junction between the goals: 6 moves to either goal.
DEFAULT_MEMORY_LAYOUT = (
    "L...R",
    "##.##",
    "##.##",
    "##.##",
    "##S##",
)


class MemoryMaze(gym.Env):
    """
    A T-maze (Bakker 2001, Reinforcement Learning with Long Short-Term Memory, NeurIPS) with illegal moves: at the first
    step the observation shows a cue, which of the two goals ``L`` and ``R`` pays; from then on it does not. Reaching
    the cued goal earns ``goal_reward``, the other one ``-goal_reward``, and either ends the episode; every legal
    move costs ``step_penalty``. A move into a wall or off the grid is illegal: the episode ends at once with
    ``-illegal_penalty`` (``info["illegal_action"]``), and ``action_masks()`` gives the legal moves, the method
    sb3-contrib's ``MaskablePPO`` (and the package's maskable algorithms) read them from.

    What it takes: memory, since the cue is gone long before the junction, where the choice is made; and the masks,
    since a policy without them must first learn to stay off the walls, each illegal move ending its episode. From the
    start ``S`` (a dead end: one legal move), every path is the same for both cues, so a policy without memory reaches
    the cued goal in at most half of the episodes: its expected return is at most ``-shortest * step_penalty`` (0 from
    the goals on average), while one that remembers the cue earns ``goal_reward - shortest * step_penalty`` (0.94 with
    the defaults: 6 moves).

    Observation: ``Box(0, 1, (n_cells + 2,))``, the agent's cell one-hot, then the cue one-hot (``[1, 0]``: ``L`` pays,
    ``[0, 1]``: ``R`` pays) at the first step and ``[0, 0]`` after it. Actions: ``0`` up, ``1`` right, ``2`` down,
    ``3`` left. ``info["is_success"]``: the cued goal was reached.

    :param layout: the maze, one string per row, all of one length, of ``.`` (free), ``#`` (wall) and exactly one
        ``S`` (start), one ``L`` and one ``R`` (the goals)
    :param goal_reward: the reward of the cued goal (the other goal's is its negative), > 0
    :param step_penalty: the cost of each legal move, >= 0
    :param illegal_penalty: the cost of an illegal move, which also ends the episode, >= 0
    :param render_mode: None, ``"ansi"`` (``render()`` returns the maze as text) or ``"rgb_array"`` (an image)
    """

    # (gymnasium's Env declares metadata an instance attribute, which a ClassVar here may not override)
    metadata: dict[str, Any] = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}  # noqa: RUF012
    observation_space: spaces.Box
    action_space: spaces.Discrete

    def __init__(
        self,
        layout: Sequence[str] = DEFAULT_MEMORY_LAYOUT,
        goal_reward: float = 1.0,
        step_penalty: float = 0.01,
        illegal_penalty: float = 1.0,
        render_mode: str | None = None,
    ) -> None:
        super().__init__()
        cells = check_layout(layout, "SLR")
        if not goal_reward > 0 or step_penalty < 0 or illegal_penalty < 0:
            raise ValueError(
                f"goal_reward must be > 0, step_penalty and illegal_penalty >= 0, got {goal_reward}, {step_penalty} "
                f"and {illegal_penalty}"
            )
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.layout = tuple(layout)
        self.walls = np.array([[cell == "#" for cell in row] for row in layout])
        columns = len(layout[0])
        self.start = divmod(cells.index("S"), columns)
        #: the two goals' cells, ``L`` then ``R`` (the cue's order)
        self.goals = (divmod(cells.index("L"), columns), divmod(cells.index("R"), columns))
        self.goal_reward = float(goal_reward)
        self.step_penalty = float(step_penalty)
        self.illegal_penalty = float(illegal_penalty)
        self.render_mode = render_mode
        self.observation_space = spaces.Box(0.0, 1.0, (self.walls.size + 2,), dtype=np.float32)
        self.action_space = spaces.Discrete(len(MOVES))
        self.position = self.start
        #: which goal pays this episode: 0 (``L``) or 1 (``R``)
        self.cue = 0
        self._first_step = True

    def _observation(self) -> np.ndarray:
        obs = np.zeros(self.observation_space.shape, dtype=np.float32)
        obs[self.position[0] * self.walls.shape[1] + self.position[1]] = 1.0
        if self._first_step:
            obs[self.walls.size + self.cue] = 1.0
        return obs

    def action_masks(self) -> np.ndarray:
        """:return: a bool array of one entry per action, True where the move stays on the grid and off the walls"""
        return legal_moves(self.walls, self.position)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """
        Puts the agent back on ``S`` and draws the cue (from the env's random generator).

        :param seed: seeds the env's random generator
        :param options: unused
        :return: the first observation (with the cue) and an info with ``cue``
        """
        super().reset(seed=seed)
        self.position = self.start
        self.cue = int(self.np_random.integers(2))
        self._first_step = True
        return self._observation(), {"cue": self.cue}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """
        :param action: ``0`` up, ``1`` right, ``2`` down, ``3`` left
        :return: observation (without the cue), reward, terminated (a goal reached or an illegal move), truncated
            (always False: the registered env's ``TimeLimit`` truncates) and info (``illegal_action``, ``is_success``)
        :raises ValueError: for an action outside the action space
        """
        action = int(action)
        if not self.action_space.contains(action):
            raise ValueError(f"action must be one of 0..{self.action_space.n - 1}, got {action}")
        self._first_step = False
        if not self.action_masks()[action]:
            return self._observation(), -self.illegal_penalty, True, False, {"illegal_action": True, "is_success": False}
        row, column = np.asarray(self.position) + MOVES[action]
        self.position = (int(row), int(column))
        reward, reached, success = -self.step_penalty, self.position in self.goals, False
        if reached:
            success = self.position == self.goals[self.cue]
            reward += self.goal_reward if success else -self.goal_reward
        return self._observation(), reward, reached, False, {"illegal_action": False, "is_success": success}

    def render(self) -> str | np.ndarray | None:
        """
        :return: with ``render_mode="ansi"`` the maze as text (the agent ``A``, the paying goal ``*``); with
            ``"rgb_array"`` an image (walls dark, the paying goal green, the other red, the agent blue;
            ``CELL_PIXELS`` square pixels per cell); None without a render mode
        """
        paying, other = self.goals[self.cue], self.goals[1 - self.cue]
        if self.render_mode == "rgb_array":
            colors = np.where(self.walls[..., None], np.uint8(60), np.uint8(235)).repeat(3, axis=-1)
            colors[paying], colors[other], colors[self.position] = (40, 170, 60), (200, 60, 40), (40, 90, 220)
            return colors.repeat(CELL_PIXELS, axis=0).repeat(CELL_PIXELS, axis=1)
        if self.render_mode is None:
            return None
        rows = [list(row.replace("S", ".")) for row in self.layout]
        rows[paying[0]][paying[1]] = "*"
        rows[self.position[0]][self.position[1]] = "A"
        return "\n".join("".join(row) for row in rows)
