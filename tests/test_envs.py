"""The package's environments (sb3_xppo.envs): GridMaze, a maze with illegal moves and action masks."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported
from stable_baselines3.common.env_util import make_vec_env

from sb3_xppo.envs import ACTION_NAMES, DEFAULT_LAYOUT, GRID_MAZE_ID, GridMaze

UP, RIGHT, DOWN, LEFT = (ACTION_NAMES.index(name) for name in ("up", "right", "down", "left"))


@pytest.mark.parametrize("render_mode", [None, "ansi", "rgb_array"])
def test_gymnasium_env_checker_passes(render_mode: str | None) -> None:
    check_env(GridMaze(render_mode=render_mode), skip_render_check=render_mode is None)


def test_registered_with_a_time_limit() -> None:
    env = gym.make(GRID_MAZE_ID)
    assert isinstance(env.unwrapped, GridMaze)
    assert env.spec.max_episode_steps == 50


def test_masks_by_hand() -> None:
    env = GridMaze()
    assert env.reset(seed=0) == (0, {})
    # the top-left corner: off the grid above and to the left, a wall below
    np.testing.assert_array_equal(env.action_masks(), [False, True, False, False])
    for action in (RIGHT, RIGHT, RIGHT):
        env.step(action)
    # (0, 3): a wall to the right, the corridor down
    np.testing.assert_array_equal(env.action_masks(), [False, False, True, True])
    env.step(DOWN)
    env.step(DOWN)
    # (2, 3): the open middle row, a wall below
    np.testing.assert_array_equal(env.action_masks(), [True, True, False, True])


def test_shortest_path_reaches_the_goal() -> None:
    env = GridMaze()
    env.reset()
    total = 0.0
    path = (RIGHT, RIGHT, RIGHT, DOWN, DOWN, RIGHT, DOWN, DOWN)
    for i, action in enumerate(path):
        assert env.action_masks()[action]
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        assert terminated == (i == len(path) - 1) and not truncated
        assert info == {"illegal_action": False, "is_success": terminated}
    assert obs == 24 and total == pytest.approx(1 - 0.01 * len(path))


def test_illegal_move_ends_the_episode_with_the_penalty() -> None:
    env = GridMaze(illegal_penalty=2.0)
    env.reset()
    obs, reward, terminated, truncated, info = env.step(UP)
    assert (obs, reward, terminated, truncated) == (0, -2.0, True, False)
    assert info == {"illegal_action": True, "is_success": False}


def test_renders() -> None:
    env = GridMaze(render_mode="ansi")
    env.reset()
    env.step(RIGHT)
    assert env.render() == "\n".join([".A..#", *DEFAULT_LAYOUT[1:]])
    image = GridMaze(render_mode="rgb_array").render()
    assert image.shape == (80, 80, 3) and image.dtype == np.uint8


def test_masks_reach_sb3_contrib_through_rl_zoo3_style_wrappers() -> None:
    # make_vec_env adds a Monitor and the registry a TimeLimit: sb3-contrib still finds action_masks()
    env = make_vec_env(GRID_MAZE_ID, n_envs=2, seed=0)
    assert is_masking_supported(env)
    np.testing.assert_array_equal(get_action_masks(env), [[False, True, False, False]] * 2)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"layout": "S.G"}, TypeError, "layout"),
        ({"layout": ["S.", "G"]}, ValueError, "layout"),
        ({"layout": ["S.", ".."]}, ValueError, "layout"),
        ({"layout": ["SX", ".G"]}, ValueError, "layout"),
        ({"step_penalty": -0.1}, ValueError, "step_penalty"),
        ({"render_mode": "rgb"}, ValueError, "render_mode"),
    ],
)
def test_bad_arguments(kwargs: dict, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        GridMaze(**kwargs)


def test_out_of_range_action() -> None:
    env = GridMaze()
    env.reset()
    with pytest.raises(ValueError, match="action"):
        env.step(4)
