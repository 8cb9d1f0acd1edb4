"""
Rollout buffers with one reward, value and return per reward group (multi-critic PPO).

- Mysore et al. 2022, Multi-Critic Actor Learning: Teaching RL Policies to Act with Style
- Vijayan et al. 2025, Multi-critic Learning for Whole-body End-effector Twist Tracking
"""

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch as th
from stable_baselines3.common.vec_env import VecNormalize

from sb3_xppo.functional import combine_grouped_advantages
from sb3_xppo.xppo.buffers import XPPODictRolloutBuffer, XPPORolloutBuffer, rollout_gae


class MultiCriticBufferMixin:
    """
    Adds a group dim to a rollout buffer: rewards, values and returns are ``(n_steps, n_envs, G)``, the advantages
    of each group (``group_advantages``, same shape) come from one :func:`~sb3_xppo.functional.calc_gae` call over
    all groups, and ``advantages`` ``(n_steps, n_envs)`` are their combination by
    :func:`~sb3_xppo.functional.combine_grouped_advantages`: each group z-scored on its own (``normalize_groups``),
    then weighted and reduced, so that no reward term's scale drowns the others (Mysore et al. 2022).
    Minibatches carry ``old_values`` and ``returns`` of shape ``(batch, G)``: one value target per critic.

    :param n_groups: number of reward groups ``G``
    :param group_weights: ``G`` weights of the groups' advantages (None: all equal)
    :param group_reduce: ``'mean'``, ``'sum'``, ``'max'``, ``'min'`` or a callable receiving the weighted
        ``(G, n_steps, n_envs)`` advantages
    :param normalize_groups: z-score each group's advantages over the rollout before combining them
    """

    buffer_size: int
    n_envs: int
    rewards: np.ndarray
    values: np.ndarray
    returns: np.ndarray
    advantages: np.ndarray
    episode_starts: np.ndarray
    gamma: float
    gae_lambda: float
    to_torch: Callable[..., th.Tensor]

    def __init__(
        self,
        *args: Any,
        n_groups: int = 1,
        group_weights: Sequence[float] | None = None,
        group_reduce: str | Callable[[th.Tensor], th.Tensor] = "mean",
        normalize_groups: bool = True,
        **kwargs: Any,
    ) -> None:
        # Set before the base class's __init__, which calls reset()
        self.n_groups = n_groups
        self.group_weights = None if group_weights is None else list(group_weights)
        self.group_reduce = group_reduce
        self.normalize_groups = normalize_groups
        super().__init__(*args, **kwargs)

    def reset(self) -> None:
        super().reset()  # type: ignore[misc]
        # The base class allocated one reward, value and return per env: here one per group
        grouped = (self.buffer_size, self.n_envs, self.n_groups)
        self.rewards = np.zeros(grouped, dtype=np.float32)
        self.values = np.zeros(grouped, dtype=np.float32)
        self.returns = np.zeros(grouped, dtype=np.float32)
        self.group_advantages = np.zeros(grouped, dtype=np.float32)

    def add(
        self,
        obs: Any,
        action: np.ndarray,
        reward: np.ndarray | th.Tensor,
        episode_start: np.ndarray,
        value: th.Tensor,
        log_prob: th.Tensor,
    ) -> None:
        """
        :param obs: Observation
        :param action: Action
        :param reward: ``(n_envs, G)`` group rewards (a truncated episode's already bootstrapped per group)
        :param episode_start: Start of episode signal.
        :param value: ``(n_envs, G)`` value estimates of the current state, one per critic
        :param log_prob: log probability of the action following the current policy.
        """
        reward = th.as_tensor(reward).detach().to("cpu", th.float32).reshape(self.n_envs, self.n_groups).numpy()
        # The base class writes value.flatten() (n_envs * G numbers) into the step's row: a flat view takes it
        grouped_values, self.values = self.values, self.values.reshape(self.buffer_size, -1)
        try:
            super().add(obs, action, reward, episode_start, value, log_prob)  # type: ignore[misc]
        finally:
            self.values = grouped_values

    def compute_returns_and_advantage(self, last_values: th.Tensor, dones: np.ndarray) -> None:
        """
        Per-group GAE(lambda) advantages and TD(lambda) returns, one :func:`~sb3_xppo.functional.calc_gae` call for
        all groups (through :func:`~sb3_xppo.xppo.buffers.rollout_gae`), then the combined advantages.

        :param last_values: ``(n_envs, G)`` values of the observation after the last step
        :param dones: if the last step was a terminal step (one bool for each env).
        """
        self.group_advantages, self.returns = rollout_gae(
            self.rewards, self.values, self.episode_starts, last_values, dones, self.gamma, self.gae_lambda
        )
        # (n_steps, n_envs, G) -> (n_steps, n_envs)
        self.advantages = combine_grouped_advantages(
            th.from_numpy(self.group_advantages),
            weights=self.group_weights,
            normalize=self.normalize_groups,
            group_dim=-1,
            reduce=self.group_reduce,
        ).numpy()

    def _get_samples(self, batch_inds: np.ndarray, env: VecNormalize | None = None) -> Any:
        """The base class's samples (``RolloutBufferSamples`` or ``DictRolloutBufferSamples``), values and returns grouped."""
        samples = super()._get_samples(batch_inds, env)  # type: ignore[misc]
        # The base class flattens values and returns to one number per sample: here they keep the group dim (batch, G)
        return samples._replace(
            old_values=self.to_torch(self.values[batch_inds]), returns=self.to_torch(self.returns[batch_inds])
        )


class MultiCriticRolloutBuffer(MultiCriticBufferMixin, XPPORolloutBuffer):
    """
    Rollout buffer of multi-critic XPPO (see :class:`MultiCriticBufferMixin`): rewards, values and returns of shape
    ``(n_steps, n_envs, G)``, per-group GAE in one vectorised call, advantages combined across groups.

    :param buffer_size: Max number of element in the buffer
    :param observation_space: Observation space
    :param action_space: Action space
    :param device: PyTorch device
    :param gae_lambda: Factor for trade-off of bias vs variance for Generalized Advantage Estimator
    :param gamma: Discount factor
    :param n_envs: Number of parallel environments
    :param n_groups: number of reward groups ``G``
    :param group_weights: ``G`` weights of the groups' advantages (None: all equal)
    :param group_reduce: ``'mean'``, ``'sum'``, ``'max'``, ``'min'`` or a callable
    :param normalize_groups: z-score each group's advantages before combining them
    """


class MultiCriticDictRolloutBuffer(MultiCriticBufferMixin, XPPODictRolloutBuffer):
    """:class:`MultiCriticRolloutBuffer` for Dict observations (same keywords)."""
