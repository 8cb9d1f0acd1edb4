"""
Rollout buffers with one reward, value and return per reward group (multi-critic PPO).

- Mysore et al. 2022, Multi-Critic Actor Learning: Teaching RL Policies to Act with Style
- Vijayan et al. 2025, Multi-critic Learning for Whole-body End-effector Twist Tracking
"""

from collections.abc import Callable, Generator, Sequence
from typing import Any

import numpy as np
import torch as th
from stable_baselines3.common.vec_env import VecNormalize

from sb3_xppo.common.buffers import (
    XPPODictRolloutBuffer,
    XPPOMaskableDictRolloutBuffer,
    XPPOMaskableRolloutBuffer,
    XPPORolloutBuffer,
    rollout_gae,
)
from sb3_xppo.functional import combine_grouped_advantages
from sb3_xppo.functional.advantages import floor_scales, group_statistics

#: Default ``group_scale_floor``: with ``normalize_groups=True`` no group's advantage scale is taken below this
#: fraction of the largest group's, so no group is amplified more than 1000x against the largest. See the README's
#: Multi-critic section for the choice.
GROUP_SCALE_FLOOR = 1e-3


class MultiCriticBufferMixin:
    """
    Adds a group dim to a rollout buffer: rewards, values and returns are ``(n_steps, n_envs, G)``, the advantages
    of each group (``group_advantages``, same shape) come from one :func:`~sb3_xppo.common.buffers.rollout_gae` call over
    all groups, and ``advantages`` ``(n_steps, n_envs)`` are their combination by
    :func:`~sb3_xppo.functional.combine_grouped_advantages`: each group z-scored on its own (``normalize_groups``),
    then weighted and reduced, so that no reward term's scale drowns the others (Mysore et al. 2022).
    Minibatches carry ``old_values`` and ``returns`` of shape ``(batch, G)``: one value target per critic.

    :param n_groups: number of reward groups ``G``
    :param group_weights: ``G`` weights of the groups' advantages (None: all equal)
    :param group_reduce: ``'mean'``, ``'sum'``, ``'max'``, ``'min'`` or a callable receiving the weighted
        ``(G, n_steps, n_envs)`` advantages
    :param normalize_groups: z-score each group's advantages over the rollout before combining them
    :param group_scale_floor: with ``normalize_groups``, no group's advantage scale is taken below this fraction of
        the largest group's (:data:`GROUP_SCALE_FLOOR` by default, 0 turns the floor off): no group is amplified more
        than ``1 / group_scale_floor`` times against the largest one
    :param group_terms: also keep each group's term of the combined advantages (:attr:`group_terms`) and give them as
        the minibatches' ``advantages``, ``(batch, G)``: XPPO's ``group_gradients='pcgrad'``. Needs ``group_reduce``
        ``'mean'`` or ``'sum'`` (a weighted sum of the groups' advantages)

    **Groups present on some samples only** (one group per style or task, Mysore et al. 2022): where the env's info
    holds ``<vector_reward_key>_mask`` (``G`` bools: which groups exist at this step), XPPO's rollout passes it to
    :meth:`add` as ``group_masks`` (read by :class:`~sb3_xppo.multi_critic.GroupRewards`). Each group's
    statistics then cover its own samples, and each sample combines the groups present there (``'mean'`` divides
    by their weights' sum). GAE and the value targets are unchanged: an absent group's reward is the env's (0).

    **What the combination did** is kept per rollout in :attr:`group_stats` (logged by XPPO as
    ``train/advantage_std/<group>``, ``train/advantage_scale/<group>``, ``train/effective_weight/<group>``).
    """

    buffer_size: int
    n_envs: int
    pos: int
    rewards: np.ndarray
    values: np.ndarray
    returns: np.ndarray
    advantages: np.ndarray
    episode_starts: np.ndarray
    gamma: float
    gae_lambda: float
    to_torch: Callable[..., th.Tensor]
    generator_ready: bool
    swap_and_flatten: Callable[[np.ndarray], np.ndarray]

    def __init__(
        self,
        *args: Any,
        n_groups: int = 1,
        group_weights: Sequence[float] | None = None,
        group_reduce: str | Callable[[th.Tensor], th.Tensor] = "mean",
        normalize_groups: bool = True,
        group_scale_floor: float = GROUP_SCALE_FLOOR,
        group_terms: bool = False,
        **kwargs: Any,
    ) -> None:
        if isinstance(group_scale_floor, bool) or not isinstance(group_scale_floor, (int, float)):
            raise TypeError(f"group_scale_floor must be a number in [0, 1], got {group_scale_floor!r}")
        if not 0.0 <= group_scale_floor <= 1.0:
            raise ValueError(
                f"group_scale_floor must be in [0, 1] (a fraction of the largest group's advantage scale), "
                f"got {group_scale_floor!r}"
            )
        if group_terms and (callable(group_reduce) or group_reduce not in ("mean", "sum")):
            raise ValueError(
                f"group_terms needs group_reduce 'mean' or 'sum' (a weighted sum of the groups' advantages), got "
                f"{group_reduce!r}"
            )
        # Set before the base class's __init__, which calls reset()
        self.keeps_group_terms = bool(group_terms)
        self.n_groups = n_groups
        self.group_weights = None if group_weights is None else list(group_weights)
        self.group_reduce = group_reduce
        self.normalize_groups = normalize_groups
        self.group_scale_floor = float(group_scale_floor)
        #: per group, what the last combination did: ``std`` (the advantages' spread, ``sqrt(var + eps)``, over the
        #: group's samples), ``scale`` (what they were divided by: ``std`` floored, or 1 without ``normalize_groups``),
        #: ``weight`` (``w_g / scale``: the factor of the group's raw advantage in the combination, before
        #: ``'mean'`` divides by the weights' sum) and ``support`` (the share of samples where the group exists)
        self.group_stats: dict[str, np.ndarray] = {}
        super().__init__(*args, **kwargs)

    def reset(self) -> None:
        super().reset()  # type: ignore[misc]
        # The base class allocated one reward, value and return per env: here one per group
        grouped = (self.buffer_size, self.n_envs, self.n_groups)
        self.rewards = np.zeros(grouped, dtype=np.float32)
        self.values = np.zeros(grouped, dtype=np.float32)
        self.returns = np.zeros(grouped, dtype=np.float32)
        self.group_advantages = np.zeros(grouped, dtype=np.float32)
        #: which groups exist at each step (all, unless :meth:`add` is told otherwise)
        self.group_masks = np.ones(grouped, dtype=bool)
        #: with ``group_terms``: each group's term of :attr:`advantages` (they sum to it, up to rounding)
        self.group_terms = np.zeros(grouped if self.keeps_group_terms else (0,), dtype=np.float32)

    def add(
        self,
        obs: Any,
        action: np.ndarray,
        reward: np.ndarray | th.Tensor,
        episode_start: np.ndarray,
        value: th.Tensor,
        log_prob: th.Tensor,
        *args: Any,
        group_masks: np.ndarray | None = None,
        **kwargs: Any,
    ) -> None:
        """
        :param obs: Observation
        :param action: Action
        :param reward: ``(n_envs, G)`` group rewards (a truncated episode's already bootstrapped per group)
        :param episode_start: Start of episode signal.
        :param value: ``(n_envs, G)`` value estimates of the current state, one per critic
        :param log_prob: log probability of the action following the current policy.
        :param group_masks: ``(n_envs, G)`` bools, the groups present at this step (None: all)
        :param kwargs: the base buffer's extras (a maskable buffer's ``action_masks``)
        """
        reward = th.as_tensor(reward).detach().to("cpu", th.float32).reshape(self.n_envs, self.n_groups).numpy()
        # This step's row (the base class's add() then moves pos on)
        self.group_masks[self.pos] = (
            True if group_masks is None else np.asarray(group_masks, dtype=bool).reshape(self.n_envs, self.n_groups)
        )
        # The base class writes value.flatten() (n_envs * G numbers) into the step's row: a flat view takes it
        grouped_values, self.values = self.values, self.values.reshape(self.buffer_size, -1)
        try:
            super().add(obs, action, reward, episode_start, value, log_prob, *args, **kwargs)  # type: ignore[misc]
        finally:
            self.values = grouped_values

    def compute_returns_and_advantage(self, last_values: th.Tensor, dones: np.ndarray) -> None:
        """
        Per-group GAE(lambda) advantages and TD(lambda) returns, one :func:`~sb3_xppo.common.buffers.rollout_gae` call
        for all groups (per group bit for bit SB3's loop), then the combined advantages.

        :param last_values: ``(n_envs, G)`` values of the observation after the last step
        :param dones: if the last step was a terminal step (one bool for each env).
        """
        self.group_advantages, self.returns = rollout_gae(
            self.rewards, self.values, self.episode_starts, last_values, dones, self.gamma, self.gae_lambda
        )
        advantages = th.from_numpy(self.group_advantages)
        # Groups that exist on some samples only: their statistics over those, each sample combining its groups
        mask = None if self.group_masks.all() else th.from_numpy(self.group_masks)
        mean, std = group_statistics(advantages, group_dim=-1, mask=mask)
        scale = th.ones_like(std)
        if self.normalize_groups:
            # What combine_grouped_advantages(normalize=True, scale_floor=...) does, computed here to be logged
            scale = floor_scales(std, self.group_scale_floor)
            advantages = (advantages - mean) / scale
        # (n_steps, n_envs, G) -> (n_steps, n_envs)
        self.advantages = combine_grouped_advantages(
            advantages, weights=self.group_weights, normalize=False, group_dim=-1, mask=mask, reduce=self.group_reduce
        ).numpy()
        if self.keeps_group_terms:
            self.group_terms = self._group_terms(advantages, mask)
        weights = np.ones(self.n_groups) if self.group_weights is None else np.asarray(self.group_weights)
        self.group_stats = dict(
            std=std.numpy().astype(np.float64),
            scale=scale.numpy().astype(np.float64),
            weight=weights / scale.numpy(),
            support=self.group_masks.reshape(-1, self.n_groups).mean(axis=0),
        )

    def get(self, batch_size: int | None = None) -> Generator[Any, None, None]:
        """The base class's minibatches; with ``group_terms``, those are flattened with the base class's arrays."""
        if self.keeps_group_terms and not self.generator_ready:
            self.group_terms = self.swap_and_flatten(self.group_terms)
        yield from super().get(batch_size)  # type: ignore[misc]

    def _group_terms(self, advantages: th.Tensor, mask: th.Tensor | None) -> np.ndarray:
        """
        Each group's term of the combined advantages: the same combination of the groups' advantages with all groups
        but that one set to 0 (so a sample's total weight under ``'mean'``, which counts the groups present there, is
        unchanged); by linearity of ``'mean'`` and ``'sum'`` the terms sum to the combination.

        :param advantages: ``(n_steps, n_envs, G)`` the groups' advantages as the combination takes them
        :param mask: ``(n_steps, n_envs, G)`` the groups present, or None
        :return: ``(n_steps, n_envs, G)``, group ``g``'s term in column ``g``
        """
        g = self.n_groups
        one_hot = th.eye(g, dtype=advantages.dtype).reshape(g, 1, 1, g)
        alone = advantages.unsqueeze(0) * one_hot  # (G n_steps n_envs G): copy k keeps group k only
        expanded = None if mask is None else mask.unsqueeze(0).expand(g, *mask.shape)
        terms = combine_grouped_advantages(
            alone, weights=self.group_weights, normalize=False, group_dim=-1, mask=expanded, reduce=self.group_reduce
        )  # (G n_steps n_envs)
        return terms.permute(1, 2, 0).contiguous().numpy()

    def group_log_values(self, group_names: Sequence[str]) -> dict[str, float]:
        """
        The ``train/...`` keys and values of :attr:`group_stats`, for the logger: ``advantage_std``,
        ``advantage_scale`` and ``effective_weight`` of each group, and ``group_support`` where groups exist on some
        samples only.

        :param group_names: the groups' names, in order
        :return: key -> value
        """
        keys = dict(std="advantage_std", scale="advantage_scale", weight="effective_weight")
        if self.group_stats.get("support", np.ones(1)).min() < 1:
            keys["support"] = "group_support"
        return {
            f"train/{key}/{name}": float(value)
            for stat, key in keys.items()
            if stat in self.group_stats
            for name, value in zip(group_names, self.group_stats[stat], strict=True)
        }

    def _get_samples(self, batch_inds: np.ndarray, env: VecNormalize | None = None) -> Any:
        """
        The base class's samples (``RolloutBufferSamples`` or ``DictRolloutBufferSamples``), values and returns grouped;
        with ``group_terms`` the advantages are the groups' terms, ``(batch, G)``.
        """
        samples = super()._get_samples(batch_inds, env)  # type: ignore[misc]
        grouped = (len(batch_inds), self.n_groups)
        if samples.old_values.shape == grouped and samples.returns.shape == grouped:
            return samples  # taken grouped (_tensor_samples)
        # The base class flattens values and returns to one number per sample: here they keep the group dim (batch, G)
        samples = samples._replace(
            old_values=self.to_torch(self.values[batch_inds]), returns=self.to_torch(self.returns[batch_inds])
        )
        return samples._replace(advantages=self.to_torch(self.group_terms[batch_inds])) if self.keeps_group_terms else samples

    def _tensor_samples(self, take: Callable[..., th.Tensor]) -> Any:
        """
        The base class's minibatch from the rollout's tensors, values and returns taken grouped ``(batch, G)``; with
        ``group_terms`` the advantages are the groups' terms, ``(batch, G)``.
        """

        def take_grouped(name: str, array: np.ndarray, dtype: th.dtype | None = None, flatten: bool = False) -> th.Tensor:
            if name == "advantages" and self.keeps_group_terms:
                return take("group_terms", self.group_terms, dtype)
            return take(name, array, dtype, flatten and name not in ("values", "returns"))

        return super()._tensor_samples(take_grouped)  # type: ignore[misc]


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


# (sb3-contrib's maskable add() takes action_masks as its own keyword; the mixin's passes it through **kwargs)
class MultiCriticMaskableRolloutBuffer(MultiCriticBufferMixin, XPPOMaskableRolloutBuffer):  # type: ignore[misc]
    """:class:`MultiCriticRolloutBuffer` that also stores action masks, for :class:`~sb3_xppo.MaskableXPPO`."""


class MultiCriticMaskableDictRolloutBuffer(MultiCriticBufferMixin, XPPOMaskableDictRolloutBuffer):  # type: ignore[misc]
    """:class:`MultiCriticMaskableRolloutBuffer` for Dict observations."""
