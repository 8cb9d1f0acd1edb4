"""
Envs built to train: ``sb3_xppo.vec_env.make_vec_env`` and XPPO given an env id make their envs without a render mode
(SB3 asks for ``"rgb_array"``), which changes no number.

- every env family stepped both ways gives the same observations, rewards, dones and infos;
- ``learn()`` on the new default ends on SB3 PPO's parameters (on SB3's ``make_vec_env``), bit for bit;
- rendering is asked for by keyword, and ``render()`` without a render mode is a ``ValueError`` that names it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from helpers import assert_same_value, params_equal, random_actions
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env as sb3_make_vec_env
from stable_baselines3.common.vec_env import VecEnv, VecNormalize, VecVideoRecorder

from sb3_xppo import XPPO
from sb3_xppo.envs import GRID_MAZE_ID, LUNAR_LANDER_GROUPS_ID, MEMORY_MAZE_ID, TWO_STYLE_PENDULUM_ID
from sb3_xppo.vec_env import LeanVecEnv, make_vec_env


def mo_lunar_lander(**kwargs: Any) -> gym.Env:
    mo_gymnasium = pytest.importorskip("mo_gymnasium")
    from mo_gymnasium.wrappers import LinearReward

    return LinearReward(mo_gymnasium.make("mo-lunar-lander-v3", **kwargs), weight=np.ones(4, dtype=np.float32))


#: one env of each family: classic control, Box2D, MuJoCo, the package's own, MO-Gymnasium's (vector rewards in infos)
FAMILIES: dict[str, str | Callable[..., gym.Env]] = {
    "CartPole-v1": "CartPole-v1",
    "Acrobot-v1": "Acrobot-v1",
    "MountainCarContinuous-v0": "MountainCarContinuous-v0",
    "Pendulum-v1": "Pendulum-v1",
    "LunarLander-v3": "LunarLander-v3",
    "LunarLanderContinuous-v3": "LunarLanderContinuous-v3",
    "BipedalWalker-v3": "BipedalWalker-v3",
    "CarRacing-v3": "CarRacing-v3",
    "Hopper-v5": "Hopper-v5",
    "HalfCheetah-v5": "HalfCheetah-v5",
    "GridMaze": GRID_MAZE_ID,
    "MemoryMaze": MEMORY_MAZE_ID,
    "TwoStylePendulum": TWO_STYLE_PENDULUM_ID,
    "LunarLanderGroups": LUNAR_LANDER_GROUPS_ID,
    "mo-lunar-lander-v3": mo_lunar_lander,
}
#: shorter episodes for the families whose random episodes run long, so that resets are compared too
MAX_EPISODE_STEPS = {"Acrobot-v1": 100, "MountainCarContinuous-v0": 100, "CarRacing-v3": 25, "HalfCheetah-v5": 60}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_render_mode_changes_no_number(family: str) -> None:
    env_id = FAMILIES[family]
    if family.startswith(("Hopper", "HalfCheetah")):
        pytest.importorskip("mujoco")
    env_kwargs = dict(max_episode_steps=MAX_EPISODE_STEPS[family]) if family in MAX_EPISODE_STEPS else None
    lean = make_vec_env(env_id, 2, seed=5, env_kwargs=env_kwargs)
    drawn = make_vec_env(env_id, 2, seed=5, render_mode="rgb_array", env_kwargs=env_kwargs)
    assert lean.get_attr("render_mode") == [None, None] and drawn.get_attr("render_mode") == ["rgb_array"] * 2
    assert_same_value(lean.reset(), drawn.reset(), "reset")
    assert_same_value(lean.reset_infos, drawn.reset_infos, "reset_infos")
    ends = 0
    for t, action in enumerate(random_actions(lean, 60 if family == "CarRacing-v3" else 300)):
        assert_same_value(lean.step(action), drawn.step(action), f"step {t}")
        ends += sum("terminal_observation" in info for info in lean.buf_infos)
    assert ends > 0  # resets compared too


#: every env gymnasium itself registers (the package's and MO-Gymnasium's are above); chosen by entry point, so the
#: list does not depend on which other test modules an xdist worker imported first
REGISTERED = sorted(
    env_id
    for env_id, spec in gym.registry.items()
    if spec.namespace is None and "Vector" not in env_id and str(spec.entry_point).startswith("gymnasium.envs.")
)


def trace(env_id: str, render_mode: str | None, steps: int = 200) -> list[Any]:
    """Everything one env returns over ``steps`` seeded random steps, resets included."""
    env = gym.make(env_id, render_mode=render_mode)
    env.action_space.seed(3)
    returned: list[Any] = [env.reset(seed=3)]
    for _ in range(steps):
        returned.append(env.step(env.action_space.sample()))
        if returned[-1][2] or returned[-1][3]:
            returned.append(env.reset())
    env.close()
    return returned


@pytest.mark.parametrize("env_id", REGISTERED)
def test_every_registered_env_gives_the_same_numbers_both_ways(env_id: str) -> None:
    try:
        plain = trace(env_id, None)
    except (ImportError, gym.error.DependencyNotInstalled) as missing:  # e.g. the MuJoCo v2/v3 ids, gym v21 shims
        pytest.skip(f"{env_id} cannot be built here: {missing}")
    assert_same_value(plain, trace(env_id, "rgb_array"), env_id)


def test_learn_equals_ppo_on_sb3_make_vec_env_from_an_env_id() -> None:
    # what a user writes: the env id; SB3 makes it with render_mode="rgb_array", XPPO without
    kwargs = dict(n_steps=64, batch_size=32, n_epochs=2, seed=3, policy_kwargs=dict(net_arch=[16]))
    ppo = PPO("MlpPolicy", "LunarLander-v3", **kwargs).learn(128)
    xppo = XPPO("MlpPolicy", "LunarLander-v3", **kwargs).learn(128)
    assert ppo.env.get_attr("render_mode") == ["rgb_array"] and xppo.env.get_attr("render_mode") == [None]
    assert params_equal(ppo.policy, xppo.policy)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "LunarLander-v3", "Pendulum-v1"])
@pytest.mark.parametrize("normalize", [False, True], ids=["plain", "VecNormalize"])
def test_learn_on_lean_default_equals_ppo_on_sb3_make_vec_env(env_id: str, normalize: bool) -> None:
    def envs(make: Callable[..., VecEnv]) -> VecEnv:
        env = make(env_id, n_envs=4, seed=7)
        return VecNormalize(env, gamma=0.98) if normalize else env

    kwargs = dict(n_steps=64, batch_size=64, n_epochs=3, gamma=0.98, seed=7, policy_kwargs=dict(net_arch=[32]))
    ppo = PPO("MlpPolicy", envs(sb3_make_vec_env), **kwargs).learn(3 * 256)
    xppo = XPPO("MlpPolicy", envs(make_vec_env), **kwargs).learn(3 * 256)
    assert type(xppo.get_env().unwrapped if normalize else xppo.get_env()) is LeanVecEnv
    assert params_equal(ppo.policy, xppo.policy)
    if normalize:
        assert np.array_equal(ppo.get_env().obs_rms.mean, xppo.get_env().obs_rms.mean)
        assert np.array_equal(ppo.get_env().ret_rms.var, xppo.get_env().ret_rms.var)


def test_render_without_a_render_mode_names_the_keyword() -> None:
    env = make_vec_env("CartPole-v1", 2, seed=0)
    env.reset()
    for draw in (env.render, lambda: env.render("rgb_array"), env.get_images):
        with pytest.raises(ValueError, match="render_mode='rgb_array'"):
            draw()
    model = XPPO("MlpPolicy", "CartPole-v1", n_steps=16, batch_size=16)
    with pytest.raises(ValueError, match="render_mode"):
        model.get_env().render()


def test_rendering_asked_for_draws_and_records(tmp_path: Path) -> None:
    env = make_vec_env("LunarLander-v3", 2, seed=0, render_mode="rgb_array")
    env.reset()
    images = env.get_images()
    assert len(images) == 2 and all(image.shape == (400, 600, 3) and image.any() for image in images)
    video = VecVideoRecorder(env, str(tmp_path), record_video_trigger=lambda step: step == 0, video_length=5)
    video.reset()
    for action in random_actions(env, 6):
        video.step(action)
    video.close()
    assert list(tmp_path.glob("*.mp4"))


def test_env_kwargs_render_mode_wins() -> None:
    assert make_vec_env("CartPole-v1", 1, env_kwargs=dict(render_mode="rgb_array")).render_mode == "rgb_array"
    assert make_vec_env("CartPole-v1", 1, render_mode="rgb_array", env_kwargs=dict(render_mode=None)).render_mode is None
    # an env factory is called as it is, with the render mode only when one is asked for
    assert make_vec_env(lambda **kw: gym.make("CartPole-v1", **kw), 1).render_mode is None
    assert make_vec_env(lambda **kw: gym.make("CartPole-v1", **kw), 1, render_mode="rgb_array").render_mode == "rgb_array"


class NoRenderModeEnv(gym.Env):
    """An env whose constructor takes no ``render_mode``: it must still build."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,))
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        super().__init__()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        return np.zeros(2, dtype=np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        return np.zeros(2, dtype=np.float32), 1.0, False, False, {}


def test_env_without_render_mode_keyword_builds() -> None:
    env_id = "test_render_modes/NoRenderMode-v0"
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=NoRenderModeEnv, max_episode_steps=5)
    env = make_vec_env(env_id, 2, seed=0)
    env.reset()
    assert env.step(np.array([0, 1]))[1].tolist() == [1.0, 1.0]
    assert XPPO("MlpPolicy", env_id, n_steps=8, batch_size=8).learn(8).num_timesteps == 8


def test_envpool_refuses_a_render_mode() -> None:
    with pytest.raises(ValueError, match="do not render"):
        make_vec_env("CartPole-v1", 2, backend="envpool", render_mode="rgb_array")
