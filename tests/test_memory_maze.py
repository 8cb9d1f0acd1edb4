"""MemoryMaze's premise: the cue is shown at the first step only, the masks are the legal moves, and a policy without
memory cannot do better than -0.06 in expectation where remembering the cue earns 0.94."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from sb3_xppo.envs import MEMORY_MAZE_ID, MemoryMaze
from sb3_xppo.envs.grid_maze import MOVES

UP, RIGHT, DOWN, LEFT = range(4)


def cells(env: MemoryMaze) -> list[tuple[int, int]]:
    return [(r, c) for r in range(env.walls.shape[0]) for c in range(env.walls.shape[1]) if not env.walls[r, c]]


def test_cue_is_shown_at_the_first_step_only():
    env = gym.make(MEMORY_MAZE_ID)
    rng = np.random.default_rng(0)
    cues = []
    for episode in range(20):
        obs, info = env.reset(seed=episode)
        n_cells = env.unwrapped.walls.size
        assert obs[n_cells:].tolist() == [float(info["cue"] == 0), float(info["cue"] == 1)]
        cues.append(info["cue"])
        done = False
        while not done:  # a random walk over legal moves
            action = rng.choice(np.flatnonzero(env.unwrapped.action_masks()))
            obs, _, terminated, truncated, _ = env.step(action)
            assert obs[n_cells:].sum() == 0 and obs[:n_cells].sum() == 1
            done = terminated or truncated
    assert set(cues) == {0, 1}


def test_masks_are_the_legal_moves():
    env = MemoryMaze()
    for cell in cells(env):
        for action in range(4):
            env.reset(seed=0)
            env.position = cell
            legal = env.action_masks()[action]
            _, reward, terminated, _, info = env.step(action)
            assert info["illegal_action"] == (not legal)
            if not legal:
                assert terminated and reward == -env.illegal_penalty and env.position == cell
    env.reset()
    assert env.action_masks().tolist() == [True, False, False, False]  # the start is a dead end: up only


def best_return_without_memory(env: MemoryMaze, horizon: int) -> float:
    """
    The best expected return of a policy that cannot remember the cue: from the start every path is the same for both
    cues (its only legal move is up, and an illegal move ends the episode), so after the first step such a policy
    faces the maze with the goals' rewards averaged over the cue. Value iteration over that MDP, finite horizon.
    """
    goal_value = 0.5 * env.goal_reward - 0.5 * env.goal_reward  # either cue is as likely
    values = {cell: 0.0 for cell in cells(env)}
    for _ in range(horizon - 1):
        new = {}
        for cell in values:
            if cell in env.goals:
                new[cell] = 0.0  # the episode ended there
                continue
            best = -env.illegal_penalty
            for action, legal in enumerate(legal_at(env, cell)):
                if legal:
                    target = tuple(int(x) for x in np.asarray(cell) + MOVES[action])
                    reward = -env.step_penalty + (goal_value if target in env.goals else 0.0)
                    best = max(best, reward + values[target])
            new[cell] = best
        values = new
    first = tuple(int(x) for x in np.asarray(env.start) + MOVES[UP])
    return max(-env.illegal_penalty, -env.step_penalty + values[first])


def legal_at(env: MemoryMaze, cell: tuple[int, int]) -> np.ndarray:
    env.position = cell
    return env.action_masks()


def test_a_policy_without_memory_is_bounded_where_memory_earns_the_goal():
    env = MemoryMaze()
    horizon = gym.spec(MEMORY_MAZE_ID).max_episode_steps
    bound = best_return_without_memory(env, horizon)
    assert bound == pytest.approx(-0.06)
    # remembering the cue: up to the junction, then to the cued side
    for seed in range(10):
        _, info = env.reset(seed=seed)
        total = 0.0
        for action in [UP] * 4 + [LEFT if info["cue"] == 0 else RIGHT] * 2:
            _, reward, terminated, _, step_info = env.step(action)
            total += reward
        assert terminated and step_info["is_success"] and total == pytest.approx(0.94)
    # a memoryless policy that always turns left earns the bound in expectation: +0.94 or -1.06, half the time each
    outcomes = []
    for seed in range(200):
        env.reset(seed=seed)
        outcomes.append(sum(env.step(a)[1] for a in [UP] * 4 + [LEFT] * 2))
    assert set(np.round(outcomes, 6)) == {0.94, -1.06}
    assert np.mean(outcomes) == pytest.approx(bound, abs=0.15)


def test_render_modes():
    env = MemoryMaze(render_mode="ansi")
    env.reset(seed=1)
    text = env.render()
    assert text.count("A") == 1 and text.count("*") == 1
    image = MemoryMaze(render_mode="rgb_array")
    image.reset(seed=0)
    assert image.render().shape == (5 * 16, 5 * 16, 3)
    assert MemoryMaze().render() is None


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(layout="S.L.R"), TypeError, "sequence of strings"),
        (dict(layout=["S.L", "R."]), ValueError, "one non-zero length"),
        (dict(layout=["S.L.G"]), ValueError, "exactly one of each of 'S', 'L', 'R'"),
        (dict(goal_reward=0.0), ValueError, "goal_reward"),
        (dict(step_penalty=-0.1), ValueError, "step_penalty"),
        (dict(render_mode="human"), ValueError, "render_mode"),
    ],
)
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        MemoryMaze(**kwargs)


def test_action_outside_the_space():
    env = MemoryMaze()
    env.reset()
    with pytest.raises(ValueError, match="action must be one of"):
        env.step(4)
