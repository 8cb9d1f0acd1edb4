"""
LunarLanderRewardGroups (``sb3_xppo/LunarLanderGroups-v3``): LunarLander-v3's reward as four reward groups, run step
for step beside LunarLander-v3 (the weighted sum of the groups is its reward bit for bit) and beside
mo-lunar-lander-v3 with ``LinearReward([1, 1, 0.3, 0.03])`` (the negative control: that reward differs from
LunarLander-v3's on the steps that end an episode, and only there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import mo_gymnasium  # noqa: F401  (registers mo-lunar-lander-v3)
import numpy as np
import pytest
from gymnasium.envs.box2d.lunar_lander import LunarLander, heuristic
from gymnasium.wrappers import TransformReward
from helpers import zoo_model
from mo_gymnasium.wrappers import LinearReward
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

from sb3_xppo import XPPO, zoo
from sb3_xppo.envs import (
    LUNAR_LANDER_CONTINUOUS_GROUPS_ID,
    LUNAR_LANDER_GROUP_NAMES,
    LUNAR_LANDER_GROUP_WEIGHTS,
    LUNAR_LANDER_GROUPS_ID,
    LunarLanderRewardGroups,
)

# per action type: random actions (crashes, the screen left), LunarLander's heuristic pilot (landings) and the pilot
# with every third action random (either); episodes of the last third end at TIME_LIMIT steps (truncations)
EPISODES = 100
TIME_LIMIT = 1000
SHORT_TIME_LIMIT = 60
ENV_IDS = {
    False: (LUNAR_LANDER_GROUPS_ID, "LunarLander-v3", "mo-lunar-lander-v3"),
    True: (LUNAR_LANDER_CONTINUOUS_GROUPS_ID, "LunarLanderContinuous-v3", "mo-lunar-lander-continuous-v3"),
}


def weighted_sum(vector: Any) -> float:
    """:return: ``sum_g w_g v_g`` with :data:`LUNAR_LANDER_GROUP_WEIGHTS`, summed in order in float64"""
    total = 0.0
    for weight, value in zip(LUNAR_LANDER_GROUP_WEIGHTS, vector, strict=True):
        total += weight * float(value)
    return total


@dataclass
class SideBySide:
    """Every step of the episodes, the three envs' rewards and vectors, in lockstep."""

    steps: int = 0
    episodes: int = 0
    lander: list[float] = field(default_factory=list)  # LunarLander-v3's reward
    ours: list[float] = field(default_factory=list)  # the wrapped env's reward
    groups_sum: list[float] = field(default_factory=list)  # the weighted sum of our groups
    groups: list[np.ndarray] = field(default_factory=list)
    mo: list[float] = field(default_factory=list)  # mo-lunar-lander-v3's LinearReward scalar
    mo_groups: list[np.ndarray] = field(default_factory=list)
    terminated: list[bool] = field(default_factory=list)
    truncated: list[bool] = field(default_factory=list)

    def array(self, name: str) -> np.ndarray:
        return np.array(getattr(self, name))


def run_side_by_side(continuous: bool) -> SideBySide:
    ours_id, lander_id, mo_id = ENV_IDS[continuous]
    record = SideBySide()
    for episode in range(EPISODES):
        kind = episode % 3  # 0 random, 1 the pilot, 2 the pilot with every third action random, a short limit
        limit = SHORT_TIME_LIMIT if kind == 2 and episode % 2 else TIME_LIMIT
        ours = gym.make(ours_id, max_episode_steps=limit)
        lander = gym.make(lander_id, max_episode_steps=limit)
        mo = LinearReward(gym.make(mo_id, max_episode_steps=limit), weight=np.array(LUNAR_LANDER_GROUP_WEIGHTS))
        seed = 1000 * continuous + episode
        obs, _ = ours.reset(seed=seed)
        for env in (lander, mo):
            np.testing.assert_array_equal(env.reset(seed=seed)[0], obs)
        actions = ours.action_space
        actions.seed(seed)
        done = False
        step = 0
        while not done:
            if kind == 0 or (kind == 2 and step % 3 == 0):
                action = actions.sample()
            else:
                action = heuristic(lander.unwrapped, obs)
                action = np.asarray(action, dtype=np.float32) if continuous else int(action)
            step += 1
            obs, reward, terminated, truncated, info = ours.step(action)
            lander_obs, lander_reward, *lander_end, _ = lander.step(action)
            mo_obs, mo_reward, *mo_end, mo_info = mo.step(action)
            # the same physics in all three
            assert np.array_equal(lander_obs, obs) and np.array_equal(mo_obs, obs)
            assert lander_end == mo_end == [terminated, truncated]
            record.lander.append(lander_reward)
            record.ours.append(reward)
            record.groups.append(info["vector_reward"])
            record.groups_sum.append(weighted_sum(info["vector_reward"]))
            record.mo.append(float(mo_reward))
            record.mo_groups.append(mo_info["vector_reward"])
            record.terminated.append(terminated)
            record.truncated.append(truncated)
            done = terminated or truncated
        record.steps += step
        record.episodes += 1
    return record


@pytest.fixture(scope="module", params=[False, True], ids=["discrete", "continuous"])
def side_by_side(request: pytest.FixtureRequest) -> SideBySide:
    return run_side_by_side(request.param)


def test_groups_sum_to_lunar_landers_reward_on_every_step(side_by_side: SideBySide) -> None:
    record = side_by_side
    lander, ours, groups_sum = record.array("lander"), record.array("ours"), record.array("groups_sum")
    # the wrapped env's reward is LunarLander-v3's, and so is the groups' weighted sum, bit for bit
    np.testing.assert_array_equal(ours, lander)
    np.testing.assert_array_equal(groups_sum, lander)
    assert np.max(np.abs(groups_sum - lander)) == 0.0
    groups = np.stack(record.groups)
    assert groups.dtype == np.float64 and groups.shape == (record.steps, 4)
    # every way an episode ends is covered: crashes and the screen left (-100), landings (+100), the time limit
    terminated, truncated = record.array("terminated"), record.array("truncated")
    assert np.sum(terminated & (lander == -100)) >= 30
    assert np.sum(terminated & (lander == 100)) >= 5
    assert np.sum(truncated) >= 5
    assert record.episodes == EPISODES and record.steps == len(lander)
    # on the terminal step the outcome alone, as LunarLander-v3 pays it
    np.testing.assert_array_equal(groups[terminated], np.outer(lander[terminated], [1.0, 0.0, 0.0, 0.0]))
    assert np.all(groups[~terminated, 0] == 0.0)


def test_mo_lunar_lander_differs_on_terminal_steps_only(side_by_side: SideBySide) -> None:
    """The issue's premise: mo-lunar-lander-v3's scalarized reward is LunarLander-v3's but on the steps that end an
    episode, where it keeps the shaping and fuel terms beside its outcome."""
    record = side_by_side
    lander, mo, terminated = record.array("lander"), record.array("mo"), record.array("terminated")
    groups, mo_groups = np.stack(record.groups), np.stack(record.mo_groups)
    # every other step: the same groups in the same units (float32 there), the same reward up to float32
    np.testing.assert_array_equal(groups[~terminated].astype(np.float32), mo_groups[~terminated])
    assert np.max(np.abs(mo[~terminated] - lander[~terminated])) < 1e-4
    # the terminal step: the same outcome, plus the shaping and fuel terms LunarLander-v3 replaces
    np.testing.assert_array_equal(mo_groups[terminated, 0], lander[terminated])
    kept = mo_groups[terminated, 1:] @ np.array(LUNAR_LANDER_GROUP_WEIGHTS[1:])
    np.testing.assert_allclose(mo[terminated] - lander[terminated], kept, atol=1e-4)
    # a crash often stops the lander, which raises the shaping by tens of points: the crash costs less there (on
    # these episodes by 54 points on average with discrete actions, 30 with continuous ones, up to 196)
    crash_gaps = (mo - lander)[terminated & (lander == -100)]
    assert np.mean(np.abs(crash_gaps) > 1) > 0.9
    assert np.mean(crash_gaps) > 20 and np.max(crash_gaps) > 100


def test_registered_with_lunar_landers_time_limit() -> None:
    for env_id, continuous in ((LUNAR_LANDER_GROUPS_ID, False), (LUNAR_LANDER_CONTINUOUS_GROUPS_ID, True)):
        env = gym.make(env_id)
        assert env.spec.max_episode_steps == 1000
        assert isinstance(env.unwrapped, LunarLander) and env.unwrapped.continuous is continuous
        wrapper = env.env
        while not isinstance(wrapper, LunarLanderRewardGroups):
            wrapper = wrapper.env
        assert wrapper.group_names == list(LUNAR_LANDER_GROUP_NAMES)
        assert wrapper.group_weights == list(LUNAR_LANDER_GROUP_WEIGHTS)


def test_refuses_what_is_not_lunar_landers_reward() -> None:
    with pytest.raises(TypeError, match="LunarLander"):
        LunarLanderRewardGroups(gym.make("CartPole-v1"))
    # a reward-changing wrapper beneath: the groups no longer sum to the reward, and the step says so
    env = LunarLanderRewardGroups(TransformReward(LunarLander(), lambda reward: 2 * reward))
    env.reset(seed=0)
    with pytest.raises(RuntimeError, match="do not match the env's reward"):
        for _ in range(5):
            env.step(0)


class RecordRewards(BaseCallback):
    """Each rollout step's scalar rewards and group rewards, as XPPO's rollout sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.rewards: list[np.ndarray] = []
        self.group_rewards: list[np.ndarray] = []

    def _on_step(self) -> bool:
        self.rewards.append(np.array(self.locals["rewards"]))
        self.group_rewards.append(np.array(self.locals["group_rewards"]))
        return True


def test_multi_critic_xppo_learns_on_it() -> None:
    env = make_vec_env(LUNAR_LANDER_GROUPS_ID, n_envs=2, seed=0)
    model = XPPO(
        "MlpPolicy",
        env,
        reward_groups=4,
        group_weights=list(LUNAR_LANDER_GROUP_WEIGHTS),
        normalize_groups=False,
        group_reduce="sum",
        n_steps=64,
        batch_size=64,
        n_epochs=1,
        seed=0,
        device="cpu",
    )
    callback = RecordRewards()
    model.learn(total_timesteps=256, callback=callback)
    assert model.num_timesteps == 256
    rewards, group_rewards = np.stack(callback.rewards), np.stack(callback.group_rewards)
    assert group_rewards.shape == (128, 2, 4)
    # the group rewards the rollout stores (float32) sum, weighted, to the scalar reward
    np.testing.assert_allclose(group_rewards @ np.array(LUNAR_LANDER_GROUP_WEIGHTS), rewards, atol=1e-4)
    assert np.all(np.isfinite(model.rollout_buffer.values))


def test_zoo_entry_builds_a_multi_critic_xppo(tmp_path: Path) -> None:
    zoo.register()
    model, _ = zoo_model("xppo", LUNAR_LANDER_GROUPS_ID, tmp_path, zoo.CONFIG_PATH)
    assert type(model) is XPPO and model.n_envs == 16
    assert list(model.options.reward_groups) == list(LUNAR_LANDER_GROUP_NAMES)
    assert list(model.options.group_weights) == list(LUNAR_LANDER_GROUP_WEIGHTS)
