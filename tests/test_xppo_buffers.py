"""XPPO's rollout buffer GAE (``rollout_gae``): bit for bit SB3's loop, grouped or not, and not slower than it."""

import time

import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import RolloutBuffer

from sb3_xppo.common import buffers
from sb3_xppo.common.buffers import XPPORolloutBuffer, rollout_gae

BOX = spaces.Box(-1, 1, (1,))


def random_rollout(n_steps, n_envs, groups=None, seed=0):
    """Rewards and values ``(n_steps, n_envs[, G])``, episode starts at 10% of the steps, last values, final dones."""
    rng = np.random.default_rng(seed)
    shape = (n_steps, n_envs) if groups is None else (n_steps, n_envs, groups)
    rewards = (rng.normal(size=shape) * 10).astype(np.float32)
    values = rng.normal(size=shape).astype(np.float32)
    starts = (rng.random((n_steps, n_envs)) < 0.1).astype(np.float32)
    last_values = th.as_tensor(rng.normal(size=shape[1:]), dtype=th.float32)
    dones = rng.random(n_envs) < 0.5
    return rewards, values, starts, last_values, dones


def sb3_gae(rewards, values, starts, last_values, dones, gamma, lam):
    """SB3's own ``compute_returns_and_advantage`` on the given data: ``(advantages, returns)``."""
    buffer = RolloutBuffer(rewards.shape[0], BOX, BOX, n_envs=rewards.shape[1], gamma=gamma, gae_lambda=lam)
    buffer.rewards[:], buffer.values[:], buffer.episode_starts[:] = rewards, values, starts
    buffer.compute_returns_and_advantage(last_values, dones)
    return buffer.advantages, buffer.returns


# NumPy 2 promotion: a Python float meets float32 arrays as float32, a np.float64 turns SB3's whole loop float64
GAMMAS = [
    (0.99, 0.95),
    (1.0, 1.0),
    (0.5, 0.0),
    (np.float64(0.99), 0.95),
    (0.99, np.float64(0.95)),  # float32 deltas, float64 recurrence
    (np.float32(0.98), np.float32(0.9)),
]


@pytest.mark.parametrize("gamma, lam", GAMMAS)
@pytest.mark.parametrize("n_steps, n_envs", [(1, 1), (2, 1), (65, 1), (2048, 1), (7, 3), (5, 4), (300, 5), (1024, 16)])
def test_rollout_gae_equals_sb3_bit_for_bit(n_steps, n_envs, gamma, lam):
    data = random_rollout(n_steps, n_envs, seed=n_steps * n_envs)
    expected_adv, expected_ret = sb3_gae(*data, gamma, lam)
    advantages, returns = rollout_gae(*data, gamma, lam)
    assert advantages.dtype == returns.dtype == np.float32
    assert advantages.shape == returns.shape == (n_steps, n_envs) and advantages.flags.c_contiguous
    assert np.array_equal(advantages, expected_adv) and np.array_equal(returns, expected_ret)


@pytest.mark.parametrize("n_steps, n_envs, groups", [(9, 1, 1), (9, 1, 3), (9, 2, 2), (130, 3, 4), (64, 1, 5)])
def test_grouped_rollout_gae_equals_sb3_per_group(n_steps, n_envs, groups):
    # multi_critic/buffers.py calls rollout_gae with (n_steps, n_envs, G) rewards and values, (n_envs, G) last values
    rewards, values, starts, last_values, dones = random_rollout(n_steps, n_envs, groups, seed=groups)
    advantages, returns = rollout_gae(rewards, values, starts, last_values, dones, 0.99, 0.95)
    assert advantages.shape == returns.shape == (n_steps, n_envs, groups)
    for i in range(groups):
        expected_adv, expected_ret = sb3_gae(rewards[..., i], values[..., i], starts, last_values[:, i], dones, 0.99, 0.95)
        assert np.array_equal(advantages[..., i], expected_adv) and np.array_equal(returns[..., i], expected_ret)


@pytest.mark.parametrize("scalar_max_columns", [0, 10**6])  # every size on the row-wise path, every size on the scalar one
@pytest.mark.parametrize("n_steps, n_envs, groups", [(1, 1, None), (65, 2, None), (300, 5, None), (33, 2, 3)])
def test_both_recurrence_paths_equal_sb3(monkeypatch, scalar_max_columns, n_steps, n_envs, groups):
    monkeypatch.setattr(buffers, "SCALAR_MAX_COLUMNS", scalar_max_columns)
    rewards, values, starts, last_values, dones = random_rollout(n_steps, n_envs, groups, seed=3)
    advantages, returns = rollout_gae(rewards, values, starts, last_values, dones, 0.99, 0.95)
    for i in range(1 if groups is None else groups):
        pick = (lambda x: x) if groups is None else (lambda x, i=i: x[..., i])
        expected_adv, expected_ret = sb3_gae(pick(rewards), pick(values), starts, pick(last_values), dones, 0.99, 0.95)
        assert np.array_equal(pick(advantages), expected_adv) and np.array_equal(pick(returns), expected_ret)


def _best_time(fn, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


@pytest.mark.parametrize("n_steps, n_envs", [(2048, 1), (1024, 16)])
def test_buffer_gae_not_slower_than_sb3(n_steps, n_envs):
    # the sizes where the step-by-step torch recurrence was 1.15x and 1.6x SB3's time; this one measures ~5-25x faster
    rewards, values, starts, last_values, dones = random_rollout(n_steps, n_envs)
    sb3, ours = (cls(n_steps, BOX, BOX, n_envs=n_envs) for cls in (RolloutBuffer, XPPORolloutBuffer))
    for buffer in (sb3, ours):
        buffer.rewards[:], buffer.values[:], buffer.episode_starts[:] = rewards, values, starts
    t_sb3, t_ours = float("inf"), float("inf")
    for _ in range(3):  # interleaved, best of each: the machine is shared and noisy
        t_sb3 = min(t_sb3, _best_time(lambda: sb3.compute_returns_and_advantage(last_values, dones), 5))
        t_ours = min(t_ours, _best_time(lambda: ours.compute_returns_and_advantage(last_values, dones), 5))
    assert np.array_equal(ours.advantages, sb3.advantages) and np.array_equal(ours.returns, sb3.returns)
    assert t_ours < t_sb3, f"XPPO's buffer GAE took {t_ours * 1e3:.2f} ms, SB3's {t_sb3 * 1e3:.2f} ms"
