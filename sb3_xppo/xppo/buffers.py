"""Rollout buffers whose GAE goes through :func:`sb3_xppo.functional.calc_gae`, one vectorised call per rollout."""

import numpy as np
import torch as th
from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer

from sb3_xppo.functional import GAE, calc_gae


def rollout_gae(
    rewards: np.ndarray,
    values: np.ndarray,
    episode_starts: np.ndarray,
    last_values: th.Tensor,
    dones: np.ndarray,
    gamma: float,
    gae_lambda: float,
) -> tuple[np.ndarray, np.ndarray]:
    """
    GAE(lambda) advantages and TD(lambda) returns of an SB3 rollout, in SB3's layout, computed by
    :func:`sb3_xppo.functional.calc_gae` in one call over ``(n_envs, n_steps)``
    (Schulman et al. 2016, https://arxiv.org/abs/1506.02438).

    SB3's conventions are kept: the value of the last observation is the bootstrap, a step is bootstrapped
    unless the next step starts a new episode (the last step: unless its env is done), and truncation was
    already folded into the reward at collection (``reward += gamma * V(terminal_obs)``).

    :param rewards: ``(n_steps, n_envs)`` or grouped ``(n_steps, n_envs, G)``
    :param values: value estimates, same shape as ``rewards``
    :param episode_starts: ``(n_steps, n_envs)``, 1 where a step starts an episode
    :param last_values: values of the observation after the last step, ``n_envs`` or ``n_envs * G`` numbers
    :param dones: ``(n_envs,)``, whether the last step ended its episode
    :param gamma: discount factor
    :param gae_lambda: GAE lambda
    :return: ``(advantages, returns)``, float32 arrays shaped like ``rewards``
    """
    # Time goes last for calc_gae: (n b) -> (b n), grouped (n b g) -> (b g n)
    rewards_t = th.as_tensor(rewards).movedim(0, -1)
    values_t = th.as_tensor(values).movedim(0, -1)
    bootstrap = last_values.detach().to("cpu", th.float32).reshape(values_t.shape[:-1])
    values_t = th.cat((values_t, bootstrap.unsqueeze(-1)), dim=-1)  # n + 1 steps, bootstrap appended
    # masks[t] = 1 - episode_start[t + 1], and 1 - done for the last step; shared by all groups: (b n)
    next_starts = np.concatenate((episode_starts[1:], np.asarray(dones, dtype=np.float32)[None]), axis=0)
    masks = 1.0 - th.as_tensor(next_starts, dtype=th.float32).T
    # Step by step, in the float order of SB3's loop: XPPO with PPO's settings then reproduces PPO bit for bit. The
    # chunked scan would agree only to ~1e-6, and GAE is a negligible share of a rollout's time either way.
    gae = calc_gae(rewards_t, values_t, masks=masks, gamma=gamma, lam=gae_lambda, return_advantages=True, sequential=True)
    assert isinstance(gae, GAE)
    advantages = gae.advantages.movedim(-1, 0).contiguous().numpy()
    # TD(lambda) returns, as SB3: advantages + values (see SB3's RolloutBuffer)
    return advantages, advantages + values


class XPPORolloutBufferMixin:
    """Replaces SB3's per-step GAE loop by one :func:`rollout_gae` call; results equal SB3's."""

    rewards: np.ndarray
    values: np.ndarray
    episode_starts: np.ndarray
    advantages: np.ndarray
    returns: np.ndarray
    gamma: float
    gae_lambda: float

    def compute_returns_and_advantage(self, last_values: th.Tensor, dones: np.ndarray) -> None:
        """
        Post-processing step: GAE(lambda) advantages and TD(lambda) returns, as
        :meth:`stable_baselines3.common.buffers.RolloutBuffer.compute_returns_and_advantage`.

        :param last_values: state value estimation for the last step (one for each env)
        :param dones: if the last step was a terminal step (one bool for each env).
        """
        self.advantages, self.returns = rollout_gae(
            self.rewards, self.values, self.episode_starts, last_values, dones, self.gamma, self.gae_lambda
        )


class XPPORolloutBuffer(XPPORolloutBufferMixin, RolloutBuffer):
    """:class:`~stable_baselines3.common.buffers.RolloutBuffer` with vectorised GAE (:func:`rollout_gae`)."""


class XPPODictRolloutBuffer(XPPORolloutBufferMixin, DictRolloutBuffer):
    """:class:`~stable_baselines3.common.buffers.DictRolloutBuffer` with vectorised GAE (:func:`rollout_gae`)."""
