"""TwoStylePendulum (sb3_xppo.envs): Pendulum-v1 with two styles, one per episode, one reward group each."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.classic_control.pendulum import angle_normalize
from gymnasium.utils.env_checker import check_env
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.monitor import Monitor

from sb3_xppo import XPPO
from sb3_xppo.envs import STYLE_NAMES, TWO_STYLE_PENDULUM_ID, FixedStyle, GridMaze, TwoStylePendulum


def test_gymnasium_env_checker_passes() -> None:
    check_env(TwoStylePendulum(), skip_render_check=True)


def test_registered_with_pendulums_time_limit() -> None:
    env = gym.make(TWO_STYLE_PENDULUM_ID)
    assert isinstance(env.unwrapped, TwoStylePendulum)
    assert env.spec.max_episode_steps == 200 == gym.spec("Pendulum-v1").max_episode_steps


def test_style_0_is_pendulum_bit_for_bit() -> None:
    env, pendulum = gym.make(TWO_STYLE_PENDULUM_ID, style=0), gym.make("Pendulum-v1")
    obs, info = env.reset(seed=3)
    reference, _ = pendulum.reset(seed=3)
    assert info["style"] == 0 and obs[3] == 0.0 and np.array_equal(obs[:3], reference)
    env.action_space.seed(0)
    for _ in range(200):
        action = env.action_space.sample()
        obs, reward, _, truncated, info = env.step(action)
        reference, reference_reward, _, reference_truncated, _ = pendulum.step(action)
        assert reward == reference_reward and np.array_equal(obs[:3], reference) and truncated == reference_truncated
        np.testing.assert_array_equal(info["vector_reward"], np.float32([reward, 0.0]))
        np.testing.assert_array_equal(info["vector_reward_mask"], [True, False])
    assert truncated


def test_style_1_hangs_down_at_a_hundredth_of_the_scale() -> None:
    env = TwoStylePendulum(style=1)
    obs, info = env.reset(seed=0)
    assert info["style"] == 1 and obs[3] == 1.0
    for torque in (2.0, -0.5, 3.0):  # 3 is clipped to 2, as Pendulum-v1 does
        theta, theta_dot = env.state
        u = min(torque, 2.0)
        expected = -0.01 * ((np.pi - abs(angle_normalize(theta))) ** 2 + 0.1 * theta_dot**2 + 0.001 * u**2)
        _, reward, _, _, info = env.step(np.array([torque], dtype=np.float32))
        assert reward == pytest.approx(expected, rel=1e-6)
        np.testing.assert_allclose(info["vector_reward"], [0.0, expected], rtol=1e-6)
        np.testing.assert_array_equal(info["vector_reward_mask"], [False, True])
    # hanging still at the bottom costs nothing; upright still costs the most
    env.state = np.array([np.pi, 0.0])
    assert env.step(np.zeros(1, dtype=np.float32))[1] == pytest.approx(0.0, abs=1e-12)
    env.state = np.array([0.0, 0.0])
    assert env.step(np.zeros(1, dtype=np.float32))[1] == pytest.approx(-0.01 * np.pi**2)


def test_style_drawn_per_episode_from_the_seed() -> None:
    env = TwoStylePendulum()
    styles = [env.reset(seed=seed)[1]["style"] for seed in range(200)]
    assert 0.35 < np.mean(styles) < 0.65
    assert styles == [TwoStylePendulum().reset(seed=seed)[1]["style"] for seed in range(200)]
    # unseeded resets continue the generator: both styles come up
    assert {env.reset()[1]["style"] for _ in range(50)} == {0, 1}


def test_fixing_the_style() -> None:
    env = TwoStylePendulum()
    assert {env.reset(options={"style": 1})[1]["style"] for _ in range(20)} == {1}
    # a Monitor (as rl-zoo3 puts it) beneath the wrapper
    wrapped = FixedStyle(Monitor(gym.make(TWO_STYLE_PENDULUM_ID)), style=0)
    assert {wrapped.reset(seed=seed)[1]["style"] for seed in range(20)} == {0}
    with pytest.raises(ValueError, match="style must be None"):
        TwoStylePendulum(style=2)
    with pytest.raises(ValueError, match=r"options\['style'\] must be None"):
        env.reset(options={"style": "1"})
    with pytest.raises(ValueError, match="style must be 0 or 1 for FixedStyle"):
        FixedStyle(TwoStylePendulum(), style=None)
    with pytest.raises(TypeError, match="FixedStyle wraps a TwoStylePendulum"):
        FixedStyle(GridMaze(), style=0)


def test_multi_critic_reads_the_styles() -> None:
    env = make_vec_env(TWO_STYLE_PENDULUM_ID, n_envs=2)
    # (seed 3 seeds the envs with 3 and 4: their first episodes have both styles)
    model = XPPO("MlpPolicy", env, reward_groups=list(STYLE_NAMES), n_steps=250, batch_size=125, n_epochs=1, seed=3,
                 policy_kwargs=dict(net_arch=[16]), device="cpu")  # fmt: skip
    model.learn(500)  # each env's rollout crosses an episode boundary
    buffer = model.rollout_buffer
    # train() flattened the sampled arrays env by env (SB3's swap_and_flatten); masks and rewards kept their layout
    style = buffer.observations.reshape(-1, 4)[:, 3].astype(int)
    masks, rewards = (x.swapaxes(0, 1).reshape(-1, 2) for x in (buffer.group_masks, buffer.rewards))
    assert 0 < style.mean() < 1
    np.testing.assert_array_equal(masks, np.stack([style == 0, style == 1], axis=-1))
    # the inactive style's reward is 0, but at the step that truncates an episode (one per env here), where each group
    # gets its own bootstrap gamma * V_g(terminal observation)
    assert np.count_nonzero(rewards[style == 0, 1]) + np.count_nonzero(rewards[style == 1, 0]) <= 2
    logs = model.logger.name_to_value
    assert logs["train/group_support/swing_up"] + logs["train/group_support/hang_down"] == pytest.approx(1.0)
