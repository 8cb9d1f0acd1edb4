"""
Rollout buffers whose GAE reproduces SB3's loop bit for bit, with a two-op recurrence per step (:func:`rollout_gae`):
SB3's plain and Dict buffers, sb3-contrib's maskable and recurrent ones, and the two combined (padded sequences with
their action masks). The plain, Dict and maskable ones also
take their minibatches from tensors over the rollout (:class:`TensorMinibatchMixin`): the same values, without a
NumPy copy and a tensor copy per array and minibatch.
"""

from collections.abc import Callable, Generator
from typing import Any, ClassVar, NamedTuple

import numpy as np
import torch as th
from sb3_contrib.common.maskable.buffers import (
    MaskableDictRolloutBuffer,
    MaskableDictRolloutBufferSamples,
    MaskableRolloutBuffer,
    MaskableRolloutBufferSamples,
)
from sb3_contrib.common.recurrent.buffers import RecurrentDictRolloutBuffer, RecurrentRolloutBuffer
from sb3_contrib.common.recurrent.type_aliases import RNNStates
from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer
from stable_baselines3.common.type_aliases import DictRolloutBufferSamples, RolloutBufferSamples, TensorDict
from stable_baselines3.common.vec_env import VecNormalize

# Up to this many recurrences per step (n_envs times reward groups), each runs as a loop over NumPy scalars; wider
# rollouts run one row of every recurrence per NumPy call. Below it the scalar loop is faster (benchmarks/gae.py).
SCALAR_MAX_COLUMNS = 3


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
    GAE(lambda) advantages and TD(lambda) returns of an SB3 rollout, in SB3's layout, equal bit for bit to
    :meth:`stable_baselines3.common.buffers.RolloutBuffer.compute_returns_and_advantage`
    (Schulman et al. 2016, https://arxiv.org/abs/1506.02438).

    SB3's loop computes, per step and in this order,
    ``delta = r[t] + gamma * next_values * next_non_terminal - values[t]`` and
    ``last = delta + gamma * gae_lambda * next_non_terminal * last``. Everything but the recurrence on ``last``
    is computed here for all steps at once, with the same operands and the same float operations in the same
    order (so NumPy's promotion rules give the same dtypes: a Python float ``gamma`` meets the float32 arrays as
    float32, ``gamma * gae_lambda`` is a float64 product first). What is left is two rounded ops per step,
    ``last = delta[t] + coef[t] * last``, the loop that cannot be vectorised without changing the rounding.

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
    last = last_values.detach().to("cpu", th.float32).numpy().astype(values.dtype, copy=False).reshape(values.shape[1:])
    next_values = np.concatenate((values[1:], last[None]))
    # SB3: 1.0 - episode_starts[t + 1], and 1.0 - dones.astype(np.float32) at the last step; shared by all groups
    next_non_terminal = 1.0 - np.concatenate((episode_starts[1:], np.asarray(dones).astype(np.float32)[None]))
    if rewards.ndim == 3:
        next_non_terminal = next_non_terminal[..., None]
    # SB3's two expressions, operand for operand, over all steps at once
    delta = rewards + gamma * next_values * next_non_terminal - values
    coef = gamma * gae_lambda * next_non_terminal
    # SB3 keeps `last` in the dtype of its expression and rounds to the float32 buffer when storing it
    advantages = _reverse_recurrence(delta, coef).astype(np.float32, copy=False)
    # TD(lambda) returns, as SB3: advantages + values
    return advantages, advantages + values


def _reverse_recurrence(x: np.ndarray, coef: np.ndarray) -> np.ndarray:
    """
    ``y[t] = x[t] + coef[t] * y[t + 1]`` backwards along the first axis from ``y[n] = 0``, each op rounded to the
    promoted dtype of ``x`` and ``coef`` as in SB3's loop (the result equals that loop's bit for bit).

    :param x: ``(n, ...)`` inputs, time first
    :param coef: coefficients broadcastable to ``x`` (e.g. ``(n, n_envs, 1)`` for grouped ``x``)
    :return: ``(n, ...)`` C-contiguous solution
    """
    n = x.shape[0]
    columns = x[0].size
    dtype = np.result_type(x, coef)
    if columns <= SCALAR_MAX_COLUMNS:
        # Few recurrences: NumPy scalar arithmetic costs a fraction of a ufunc call on a one-element row
        x_cols = x.reshape(n, columns).T
        coef_cols = np.broadcast_to(coef, x.shape).reshape(n, columns).T
        out = np.empty((columns, n), dtype=dtype)
        for x_col, coef_col, out_col in zip(x_cols, coef_cols, out, strict=True):
            acc, steps = dtype.type(0), []
            for x_t, coef_t in zip(list(x_col[::-1]), list(coef_col[::-1]), strict=True):
                acc = x_t + coef_t * acc
                steps.append(acc)
            out_col[::-1] = steps
        return np.ascontiguousarray(out.T).reshape(x.shape)
    # Many: one row (a contiguous block of every recurrence) per call, written in place
    out = np.empty(x.shape, dtype=dtype)
    acc = np.zeros_like(out[0])
    for x_t, coef_t, out_t in zip(x[::-1], coef[::-1], out[::-1], strict=True):
        np.multiply(coef_t, acc, out_t)
        np.add(x_t, out_t, out_t)
        acc = out_t
    return out


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


#: NumPy dtypes whose arrays the minibatches are indexed from as tensors (any other takes the base class's path)
TENSOR_DTYPES = frozenset(
    np.dtype(t) for t in (np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.bool_)
)

#: ``take(name, array, dtype=None, flatten=False) -> tensor``: the minibatch's rows of a buffer array, a new tensor
Take = Callable[..., th.Tensor]


class _NotAsTensor(Exception):
    """An array the tensor path does not take (its dtype): the base class's ``_get_samples`` runs instead."""


class TensorMinibatchMixin:
    """
    Minibatches indexed from tensors over the flattened rollout, one ``index_select`` per array, instead of SB3's
    NumPy fancy indexing followed by a copy into a new tensor (``to_torch``) per array and minibatch: the same values,
    dtypes and shapes, in new tensors as before. Each pass of :meth:`get` makes the tensors once per array (on CPU
    they share the arrays' memory; a cast, e.g. of discrete actions to float32, or a copy to another device is made
    once per pass instead of once per minibatch); a ``_get_samples`` call outside a pass takes the base class's path.
    """

    device: th.device
    _rollout_tensors: dict[str, tuple[np.ndarray, th.Tensor]]
    _in_pass: bool

    def reset(self) -> None:
        # Drops the last rollout's tensors (set before the base class's reset, which SB3's __init__ calls)
        self._rollout_tensors, self._in_pass = {}, False
        super().reset()  # type: ignore[misc]

    def get(self, batch_size: int | None = None) -> Generator[Any, None, None]:
        """The base class's minibatches (its permutation, its order), each indexed from the rollout's tensors."""
        self._rollout_tensors, self._in_pass = {}, True
        try:
            yield from super().get(batch_size)  # type: ignore[misc]
        finally:
            self._in_pass = False

    def _get_samples(self, batch_inds: np.ndarray, env: VecNormalize | None = None) -> Any:
        if not self._in_pass:
            return super()._get_samples(batch_inds, env)  # type: ignore[misc]
        index = th.from_numpy(np.ascontiguousarray(batch_inds)).to(self.device)

        def take(name: str, array: np.ndarray, dtype: th.dtype | None = None, flatten: bool = False) -> th.Tensor:
            rows = self._rollout_tensor(name, array, dtype, flatten).index_select(0, index)
            return rows.flatten() if flatten and rows.ndim > 1 else rows

        try:
            return self._tensor_samples(take)
        except _NotAsTensor:
            return super()._get_samples(batch_inds, env)  # type: ignore[misc]

    def _rollout_tensor(self, name: str, array: np.ndarray, dtype: th.dtype | None, flatten: bool) -> th.Tensor:
        """
        The rollout's tensor over ``array``, made once per pass: cast to ``dtype`` if given; with ``flatten``, one
        column becomes a 1-D tensor (its rows then need no flattening).
        """
        cached = self._rollout_tensors.get(name)
        if cached is not None and cached[0] is array:
            return cached[1]
        if array.dtype not in TENSOR_DTYPES:
            raise _NotAsTensor(name)
        tensor = th.from_numpy(array).to(self.device)
        if dtype is not None:
            tensor = tensor.to(dtype)
        if flatten and tensor.ndim == 2 and tensor.shape[1] == 1:
            tensor = tensor.view(-1)
        self._rollout_tensors[name] = (array, tensor)
        return tensor

    def _tensor_samples(self, take: Take) -> Any:
        """
        The minibatch, as the base class's ``_get_samples`` builds it from ``array[batch_inds]``.

        :param take: ``take(name, array, dtype=None, flatten=False)``: the minibatch's rows of ``array``, cast to
            ``dtype``, flattened as ``array[batch_inds].flatten()`` with ``flatten`` (``name`` is its cache key)
        """
        raise NotImplementedError


class XPPORolloutBuffer(TensorMinibatchMixin, XPPORolloutBufferMixin, RolloutBuffer):
    """
    :class:`~stable_baselines3.common.buffers.RolloutBuffer` with vectorised GAE (:func:`rollout_gae`) and minibatches
    indexed from tensors (:class:`TensorMinibatchMixin`).
    """

    def _tensor_samples(self, take: Take) -> RolloutBufferSamples:
        return RolloutBufferSamples(
            take("observations", self.observations),
            # Cast to float32 (SB3's backward compatible cast)
            take("actions", self.actions, th.float32),
            take("values", self.values, flatten=True),
            take("log_probs", self.log_probs, flatten=True),
            take("advantages", self.advantages, flatten=True),
            take("returns", self.returns, flatten=True),
        )


class XPPODictRolloutBuffer(TensorMinibatchMixin, XPPORolloutBufferMixin, DictRolloutBuffer):
    """
    :class:`~stable_baselines3.common.buffers.DictRolloutBuffer` with vectorised GAE (:func:`rollout_gae`) and
    minibatches indexed from tensors (:class:`TensorMinibatchMixin`).
    """

    def _tensor_samples(self, take: Take) -> DictRolloutBufferSamples:
        return DictRolloutBufferSamples(
            observations={key: take(f"observations/{key}", obs) for key, obs in self.observations.items()},
            actions=take("actions", self.actions, th.float32),
            old_values=take("values", self.values, flatten=True),
            old_log_prob=take("log_probs", self.log_probs, flatten=True),
            advantages=take("advantages", self.advantages, flatten=True),
            returns=take("returns", self.returns, flatten=True),
        )


class XPPOMaskableRolloutBuffer(TensorMinibatchMixin, XPPORolloutBufferMixin, MaskableRolloutBuffer):
    """
    sb3-contrib's :class:`~sb3_contrib.common.maskable.buffers.MaskableRolloutBuffer` with :func:`rollout_gae` and
    minibatches indexed from tensors (:class:`TensorMinibatchMixin`).
    """

    def _tensor_samples(self, take: Take) -> MaskableRolloutBufferSamples:
        return MaskableRolloutBufferSamples(
            take("observations", self.observations),
            take("actions", self.actions),
            take("values", self.values, flatten=True),
            take("log_probs", self.log_probs, flatten=True),
            take("advantages", self.advantages, flatten=True),
            take("returns", self.returns, flatten=True),
            take("action_masks", self.action_masks).reshape(-1, self.mask_dims),
        )


class XPPOMaskableDictRolloutBuffer(TensorMinibatchMixin, XPPORolloutBufferMixin, MaskableDictRolloutBuffer):
    """
    sb3-contrib's :class:`~sb3_contrib.common.maskable.buffers.MaskableDictRolloutBuffer` with :func:`rollout_gae` and
    minibatches indexed from tensors (:class:`TensorMinibatchMixin`).
    """

    def _tensor_samples(self, take: Take) -> MaskableDictRolloutBufferSamples:
        return MaskableDictRolloutBufferSamples(
            observations={key: take(f"observations/{key}", obs) for key, obs in self.observations.items()},
            actions=take("actions", self.actions),
            old_values=take("values", self.values, flatten=True),
            old_log_prob=take("log_probs", self.log_probs, flatten=True),
            advantages=take("advantages", self.advantages, flatten=True),
            returns=take("returns", self.returns, flatten=True),
            action_masks=take("action_masks", self.action_masks).reshape(-1, self.mask_dims),
        )


class XPPORecurrentRolloutBuffer(XPPORolloutBufferMixin, RecurrentRolloutBuffer):
    """sb3-contrib's :class:`~sb3_contrib.common.recurrent.buffers.RecurrentRolloutBuffer` with :func:`rollout_gae`."""


class XPPORecurrentDictRolloutBuffer(XPPORolloutBufferMixin, RecurrentDictRolloutBuffer):
    """sb3-contrib's :class:`~sb3_contrib.common.recurrent.buffers.RecurrentDictRolloutBuffer` with :func:`rollout_gae`."""


class MaskableRecurrentRolloutBufferSamples(NamedTuple):
    """sb3-contrib's ``RecurrentRolloutBufferSamples`` with each step's action masks (padded sequences)."""

    observations: th.Tensor
    actions: th.Tensor
    old_values: th.Tensor
    old_log_prob: th.Tensor
    advantages: th.Tensor
    returns: th.Tensor
    lstm_states: RNNStates
    episode_starts: th.Tensor
    mask: th.Tensor
    action_masks: th.Tensor


class MaskableRecurrentDictRolloutBufferSamples(NamedTuple):
    """sb3-contrib's ``RecurrentDictRolloutBufferSamples`` with each step's action masks (padded sequences)."""

    observations: TensorDict
    actions: th.Tensor
    old_values: th.Tensor
    old_log_prob: th.Tensor
    advantages: th.Tensor
    returns: th.Tensor
    lstm_states: RNNStates
    episode_starts: th.Tensor
    mask: th.Tensor
    action_masks: th.Tensor


class MaskedSequencesMixin:
    """
    sb3-contrib's recurrent buffer and its maskable buffer in one: put first, before a recurrent buffer that is followed
    by the matching maskable one in the bases, e.g. ``(MaskedSequencesMixin, RecurrentRolloutBuffer,
    MaskableRolloutBuffer)``. The maskable buffer's ``reset`` and ``add`` allocate and store the masks (``add(...,
    action_masks=...)``; all ones when a step has none), the recurrent one's ``get`` cuts the rollout into padded
    sequences; the masks are flattened and padded as every other array. A padded step's masks allow every action:
    the padding is out of every mean, and a minibatch whose masks allow everything is evaluated without masking.
    """

    #: the minibatch's ``NamedTuple``: the recurrent buffer's fields, then ``action_masks``
    samples_class: ClassVar[type]
    action_masks: np.ndarray
    mask_dims: int
    generator_ready: bool
    pad: Callable[..., th.Tensor]
    swap_and_flatten: Callable[[np.ndarray], np.ndarray]

    def get(self, batch_size: int | None = None) -> Generator[Any, None, None]:
        """The recurrent buffer's minibatches (its sequences, its order), each with its steps' action masks."""
        if not self.generator_ready:
            # (n_steps, n_envs, mask_dims) -> (n_envs * n_steps, mask_dims), the order of the recurrent buffer's arrays
            self.action_masks = self.swap_and_flatten(self.action_masks)
        yield from super().get(batch_size)  # type: ignore[misc]

    def _get_samples(self, batch_inds: np.ndarray, env_change: np.ndarray, env: VecNormalize | None = None) -> Any:
        samples = super()._get_samples(batch_inds, env_change, env)  # type: ignore[misc]
        # The recurrent buffer's _get_samples made self.pad for this minibatch's sequences
        masks = self.pad(self.action_masks[batch_inds], padding_value=1.0).reshape(-1, self.mask_dims)
        return self.samples_class(*samples, action_masks=masks)


# sb3-contrib's recurrent buffers take env_change in _get_samples and LSTM states in add, which its maskable ones
# (and SB3's RolloutBuffer) do not: mypy sees the two parents' signatures clash
class XPPOMaskableRecurrentRolloutBuffer(  # type: ignore[misc]
    MaskedSequencesMixin, XPPORolloutBufferMixin, RecurrentRolloutBuffer, MaskableRolloutBuffer
):
    """
    sb3-contrib's :class:`~sb3_contrib.common.recurrent.buffers.RecurrentRolloutBuffer` (LSTM states, padded
    sequences) with the action masks of its
    :class:`~sb3_contrib.common.maskable.buffers.MaskableRolloutBuffer` (:class:`MaskedSequencesMixin`) and
    :func:`rollout_gae`.
    """

    samples_class = MaskableRecurrentRolloutBufferSamples


# (as XPPOMaskableRecurrentRolloutBuffer: sb3-contrib's recurrent and maskable signatures clash)
class XPPOMaskableRecurrentDictRolloutBuffer(  # type: ignore[misc]
    MaskedSequencesMixin, XPPORolloutBufferMixin, RecurrentDictRolloutBuffer, MaskableDictRolloutBuffer
):
    """
    sb3-contrib's :class:`~sb3_contrib.common.recurrent.buffers.RecurrentDictRolloutBuffer` with the action masks of
    its :class:`~sb3_contrib.common.maskable.buffers.MaskableDictRolloutBuffer` (:class:`MaskedSequencesMixin`) and
    :func:`rollout_gae`.
    """

    samples_class = MaskableRecurrentDictRolloutBufferSamples
