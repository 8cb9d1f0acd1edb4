"""GridMaze: a small maze whose moves into walls are illegal, the test bed of invalid-action masking."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

#: The default maze: ``S`` start, ``G`` goal, ``#`` wall, ``.`` free. The shortest path takes 8 moves; the left
#: part of the middle row is a dead end.
DEFAULT_LAYOUT = (
    "S...#",
    "###.#",
    ".....",
    ".###.",
    "....G",
)
#: The moves of the four actions, as (row, column) offsets: up, right, down, left.
MOVES = np.array([(-1, 0), (0, 1), (1, 0), (0, -1)])
ACTION_NAMES = ("up", "right", "down", "left")
#: Side of one cell in the ``rgb_array`` rendering, in pixels.
CELL_PIXELS = 16


def check_layout(layout: Sequence[str], markers: str) -> str:
    """
    :param layout: a maze's rows: ``.`` free, ``#`` wall, and each of ``markers`` exactly once
    :param markers: the marker cells the maze needs (e.g. ``"SG"``: start and goal)
    :return: the layout's cells, row after row, as one string
    :raises TypeError: if ``layout`` is not a sequence of strings
    :raises ValueError: for rows of different or zero length, another character, or a marker missing or repeated
    """
    if isinstance(layout, str) or not layout or any(not isinstance(row, str) for row in layout):
        raise TypeError(f"layout must be a sequence of strings (one per row), got {layout!r}")
    if len({len(row) for row in layout}) != 1 or not layout[0]:
        raise ValueError(f"layout must have rows of one non-zero length, got {list(layout)!r}")
    cells = "".join(layout)
    if set(cells) - set(".#" + markers) or any(cells.count(marker) != 1 for marker in markers):
        named = ", ".join(repr(marker) for marker in markers)
        raise ValueError(f"layout must be made of '.', '#' and exactly one of each of {named}, got {list(layout)!r}")
    return cells


def legal_moves(walls: np.ndarray, position: tuple[int, int]) -> np.ndarray:
    """
    :param walls: ``(rows, columns)`` bool, True on a wall
    :param position: the agent's ``(row, column)``
    :return: a bool array of one entry per action (:data:`MOVES`), True where the move stays on the grid and off the
        walls
    """
    rows, columns = walls.shape
    targets = np.asarray(position) + MOVES
    inside = (targets[:, 0] >= 0) & (targets[:, 0] < rows) & (targets[:, 1] >= 0) & (targets[:, 1] < columns)
    legal = inside.copy()
    legal[inside] = ~walls[targets[inside, 0], targets[inside, 1]]
    return legal


class GridMaze(gym.Env):
    """
    An agent walks a maze from ``S`` to ``G``, one cell per step. A move into a wall or off the grid is illegal:
    the episode ends at once with ``-illegal_penalty``, as an illegal move loses a board game, and
    ``info["illegal_action"]`` says so. ``action_masks()`` gives the legal moves of the current cell, the method
    sb3-contrib's ``MaskablePPO`` (and ``MaskableXPPO``) read them from (Huang & Ontañón 2022, A Closer Look at
    Invalid Action Masking in Policy Gradient Algorithms, https://arxiv.org/abs/2006.14171). Every legal move costs
    ``step_penalty``; reaching the goal earns 1 and ends the episode (``info["is_success"]``).

    Observation: the agent's cell, ``row * n_columns + column`` (``Discrete``; SB3 one-hot encodes it).
    Actions: ``0`` up, ``1`` right, ``2`` down, ``3`` left.

    :param layout: the maze, one string per row, all of one length, of ``.`` (free), ``#`` (wall) and exactly one
        ``S`` (start) and one ``G`` (goal)
    :param step_penalty: the cost of each legal move, >= 0
    :param illegal_penalty: the cost of an illegal move, which also ends the episode, >= 0
    :param render_mode: None, ``"ansi"`` (``render()`` returns the maze as text), ``"human"`` (prints it) or
        ``"rgb_array"`` (an image, for videos)
    """

    # (gymnasium's Env declares metadata an instance attribute, which a ClassVar here may not override)
    metadata: dict[str, Any] = {"render_modes": ["ansi", "human", "rgb_array"], "render_fps": 4}  # noqa: RUF012
    observation_space: spaces.Discrete
    action_space: spaces.Discrete

    def __init__(
        self,
        layout: Sequence[str] = DEFAULT_LAYOUT,
        step_penalty: float = 0.01,
        illegal_penalty: float = 1.0,
        render_mode: str | None = None,
    ) -> None:
        super().__init__()
        cells = check_layout(layout, "SG")
        if step_penalty < 0 or illegal_penalty < 0:
            raise ValueError(f"step_penalty and illegal_penalty must be >= 0, got {step_penalty} and {illegal_penalty}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}")

        self.layout = tuple(layout)
        self.walls = np.array([[cell == "#" for cell in row] for row in layout])
        self.start = divmod(cells.index("S"), len(layout[0]))
        self.goal = divmod(cells.index("G"), len(layout[0]))
        self.step_penalty = step_penalty
        self.illegal_penalty = illegal_penalty
        self.render_mode = render_mode
        self.observation_space = spaces.Discrete(self.walls.size)
        self.action_space = spaces.Discrete(len(MOVES))
        self.position = self.start

    def _observation(self) -> int:
        return self.position[0] * self.walls.shape[1] + self.position[1]

    def action_masks(self) -> np.ndarray:
        """
        :return: a bool array of one entry per action, True where the move stays on the grid and off the walls
        """
        return legal_moves(self.walls, self.position)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        """
        Puts the agent back on ``S``.

        :param seed: seeds the env's random generator (the maze itself is deterministic)
        :param options: unused
        :return: the start cell's observation and an empty info
        """
        super().reset(seed=seed)
        self.position = self.start
        if self.render_mode == "human":
            self.render()
        return self._observation(), {}

    def step(self, action: int) -> tuple[int, float, bool, bool, dict[str, Any]]:
        """
        :param action: ``0`` up, ``1`` right, ``2`` down, ``3`` left
        :return: observation, reward, terminated (goal reached or illegal move), truncated (always False: the
            registered env's ``TimeLimit`` truncates) and info (``illegal_action``, ``is_success``)
        :raises ValueError: for an action outside the action space
        """
        action = int(action)
        if not self.action_space.contains(action):
            raise ValueError(f"action must be one of 0..{self.action_space.n - 1}, got {action}")
        if not self.action_masks()[action]:
            info = {"illegal_action": True, "is_success": False}
            return self._observation(), -self.illegal_penalty, True, False, info
        row, column = np.asarray(self.position) + MOVES[action]
        self.position = (int(row), int(column))
        reached = self.position == self.goal
        if self.render_mode == "human":
            self.render()
        reward = (1.0 if reached else 0.0) - self.step_penalty
        return self._observation(), reward, reached, False, {"illegal_action": False, "is_success": reached}

    def render(self) -> str | np.ndarray | None:
        """
        :return: with ``render_mode="ansi"`` the maze as text, the agent an ``A``; with ``"rgb_array"`` an image
            (walls dark, goal green, agent blue; ``CELL_PIXELS`` square pixels per cell); None otherwise (``"human"``
            prints the text, no ``render_mode`` renders nothing)
        """
        if self.render_mode == "rgb_array":
            colors = np.where(self.walls[..., None], np.uint8(60), np.uint8(235)).repeat(3, axis=-1)
            colors[self.goal] = (40, 170, 60)
            colors[self.position] = (40, 90, 220)
            return colors.repeat(CELL_PIXELS, axis=0).repeat(CELL_PIXELS, axis=1)
        if self.render_mode is None:
            return None
        rows = [list(row.replace("S", ".")) for row in self.layout]
        rows[self.position[0]][self.position[1]] = "A"
        text = "\n".join("".join(row) for row in rows)
        if self.render_mode == "human":
            print(text + "\n")
            return None
        return text
