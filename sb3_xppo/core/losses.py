"""
The losses of one XPPO ``train()`` call: :class:`MinibatchLosses` holds the actor's and the critics' loss functions of
:mod:`sb3_xppo.functional` that the model's options pick, with the call's clip ranges, so that
:meth:`~sb3_xppo.core.XPPOCoreMixin.minibatch_loss` reads as PPO's recipe. Every mean is over the valid samples
(:func:`valid_mean`: a recurrent minibatch's padding does not count).
"""

from collections.abc import Callable
from typing import Any

import torch as th

from sb3_xppo.common.loss_registry import (
    ACTOR_LOSS_REGISTRY,
    VALUE_LOSS_REGISTRY,
    ValueLossFn,
    mse_value_loss,
    resolve_min_advantage_std,
)
from sb3_xppo.common.options import XPPOOptions
from sb3_xppo.core.gradient_surgery import pcgrad_group_loss
from sb3_xppo.functional.masked import minibatch_zscore, valid_mean, zscore_group_terms

# valid_mean, minibatch_zscore and zscore_group_terms stay importable here
__all__ = [
    "MinibatchLosses",
    "ValueLossFn",
    "minibatch_zscore",
    "mse_value_loss",
    "reduce_value_losses",
    "valid_mean",
    "zscore_group_terms",
]


def reduce_value_losses(value_losses: th.Tensor, weights: th.Tensor | None) -> th.Tensor:
    """
    The value loss the critics minimize: a single critic's as it is, one per reward group summed, weighted by the
    groups' value-loss weights where there are any.

    :param value_losses: a scalar, or ``(G,)`` one per reward group
    :param weights: ``(G,)`` or None (the plain sum)
    :return: a scalar
    """
    if value_losses.ndim == 0:  # (no sum of a single value loss: one more node in the graph, the same numbers)
        return value_losses
    return value_losses.sum() if weights is None else (value_losses * weights).sum()


class MinibatchLosses:
    """
    The actor's and the critics' losses of one ``train()`` call, picked once from the model's options.

    :param options: the model's options
    :param policy: the model's policy (its value head normalizes values with ``normalize_values``, and is the
        classification critic of ``value_loss='hl_gauss'``)
    :param clip_low: lower clip range of this call
    :param clip_high: upper clip range of this call
    :param clip_range_vf: value clip range of this call (or None)
    """

    def __init__(
        self, options: XPPOOptions, policy: Any, clip_low: float, clip_high: float, clip_range_vf: float | None
    ) -> None:
        self.options = options
        self.policy = policy
        self.clip_range_vf = clip_range_vf
        loss = ACTOR_LOSS_REGISTRY[options.actor_loss]
        # A linear schedule reaches 0 (below it when the last rollout overshoots the budget): a loss that divides by
        # the range has no trust region left there, so only the critic learns from this rollout (its declaration's
        # off_when_closed); PPO's clip takes the range as it is
        self.actor_off = loss.off_when_closed and min(clip_low, clip_high) <= 0
        #: the actor loss that ``actor_loss`` names, every keyword but the minibatch's bound (this call's clip ranges)
        self.actor_fn: Callable[..., Any] = loss.bind((clip_low, clip_high) if clip_low != clip_high else clip_low, options)
        self.min_advantage_std = resolve_min_advantage_std(options.min_advantage_std, options.actor_loss)
        weights = options.group_value_loss_weights()
        device = policy.device
        #: the ``(G,)`` weights of the groups' value losses, None for the plain sum
        self.value_weights = None if weights is None else th.as_tensor(weights, dtype=th.float32, device=device)
        # group_gradients='pcgrad': the minibatches' advantages are the groups' terms (batch, G), one actor loss each
        self.group_params = [p for p in policy.parameters() if p.requires_grad] if options.group_gradients else None
        #: the critics' values to normalized units (``normalize_values``), else None
        self.normalize = policy.value_net.normalize if options.normalize_values else None
        self.value_fn = self.value_loss_fn()

    def actor(
        self, log_prob: th.Tensor, old_log_prob: th.Tensor, advantages: th.Tensor, valid: th.Tensor | None
    ) -> tuple[th.Tensor, th.Tensor | None, th.Tensor | None]:
        """
        The actor's loss, averaged over the valid samples.

        :param log_prob: ``(batch,)`` under the current policy
        :param old_log_prob: ``(batch,)`` at collection
        :param advantages: ``(batch,)``, or ``(batch, G)`` the groups' terms with ``group_gradients``
        :param valid: ``(batch,)`` bool, or None
        :return: ``(loss, skipped, conflicts)``: whether ``min_advantage_std`` skipped the minibatch (None when off),
            and with ``group_gradients`` the share of the pairs of groups whose gradients conflicted (else None)
        """
        if self.actor_off:
            return th.zeros((), device=log_prob.device), None, None
        if self.group_params is None:
            loss, skipped = self.surrogate(log_prob, old_log_prob, advantages, valid)
            return loss, skipped, None
        # PCGrad over the groups' actor losses: the sum's value, the combined gradient (gradient_surgery.py)
        group_losses, group_skipped = zip(
            *(self.surrogate(log_prob, old_log_prob, terms, valid) for terms in advantages.unbind(-1)), strict=True
        )
        loss, conflicts = pcgrad_group_loss(group_losses, self.group_params)
        skipped = None if group_skipped[0] is None else th.stack(group_skipped).all()
        return loss, skipped, conflicts

    def surrogate(
        self, log_prob: th.Tensor, old_log_prob: th.Tensor, advantages: th.Tensor, valid: th.Tensor | None
    ) -> tuple[th.Tensor, th.Tensor | None]:
        """:return: the actor loss of ``(batch,)`` advantages over the valid samples, and whether it was skipped"""
        threshold = self.min_advantage_std
        if threshold is None:
            return valid_mean(self.actor_fn(log_prob, old_log_prob, advantages, min_advantage_std=None), valid), None
        # DAPO's dynamic sampling: the statistics over the valid samples, the loss kept in the graph at 0
        loss, stats = self.actor_fn(
            log_prob, old_log_prob, advantages, mask=valid, min_advantage_std=threshold, return_stats=True
        )
        return (loss.mean() if valid is None else loss), stats.var <= threshold**2

    def value(self, values: th.Tensor, old_values: th.Tensor, returns: th.Tensor, valid: th.Tensor | None = None) -> th.Tensor:
        """
        The value loss of ``value_loss`` (picked once, :meth:`value_loss_fn`), averaged over the (valid) samples.

        :param values: predicted values, ``(batch,)`` or ``(batch, G)``
        :param old_values: values at collection, same shape
        :param returns: TD(lambda) targets, same shape
        :param valid: ``(batch,)`` bool, the samples that count (None: all)
        :return: a scalar, or ``(G,)`` for grouped values
        """
        if self.normalize is not None:
            # In normalized units: commensurate across groups, and clip_range_vf means the same for every group
            values, old_values, returns = self.normalize(values), self.normalize(old_values), self.normalize(returns)
        return self.value_fn(values, old_values, returns, valid)

    def value_loss_fn(self) -> ValueLossFn:
        """:return: the value loss that ``value_loss`` names (its declaration's build), with this call's ``clip_range_vf``"""
        name = self.options.value_loss
        assert name is not None, "value_loss read before the options were checked"
        return VALUE_LOSS_REGISTRY[name].build(self.clip_range_vf, self.policy, self.options)
