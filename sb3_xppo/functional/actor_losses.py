"""
Policy (actor) losses.

- clipped surrogate: Schulman et al. 2017, Proximal Policy Optimization Algorithms
- decoupled clip range ``(low, high)``: Zhou et al. 2025
- dual clip: Ye et al. 2020, Mastering Complex Control in MOBA Games with Deep Reinforcement Learning
- delightful gate: Osband 2026, Delightful Policy Gradient
- Simple Policy Optimization: Xie et al. 2025
"""

from __future__ import annotations

from collections.abc import Callable

import torch as th

from sb3_xppo.functional._checks import check_broadcastable, check_same_shape, clip_bounds, expand_mask_for_groups
from sb3_xppo.functional.masked import masked_mean, masked_zscore

LogRatioClamp = float | tuple[float, float] | None


def ppo_actor_loss(
    action_log_probs: th.Tensor,
    old_action_log_probs: th.Tensor,
    advantages: th.Tensor,
    eps_clip: float | tuple[float, float] = 0.2,
    mask: th.Tensor | None = None,
    normalize_advantages: bool = False,
    delightful: bool = False,
    delight_temp: float = 1.0,
    dual_clip: bool = False,
    dual_clip_threshold: float = 3.0,
    log_ratio_clamp: LogRatioClamp = None,
    group_dim: int = -2,
) -> th.Tensor:
    """
    PPO's clipped surrogate loss (Schulman et al. 2017), ``-min(r A, clip(r, 1 - low, 1 + high) A)``.

    :param action_log_probs: log-probabilities of the taken actions under the current policy, ``(b n)`` or any shape
    :param old_action_log_probs: the same under the policy that collected the data
    :param advantages: advantage estimates, same shape (combine grouped advantages first)
    :param eps_clip: clip range, a float or a ``(low, high)`` pair for decoupled clipping (Zhou et al. 2025)
    :param mask: bool or float mask; when given the masked mean is returned, else the elementwise loss
    :param normalize_advantages: masked z-score of the advantages before anything else
    :param delightful: gate the advantages by ``sigmoid(-logp * A / delight_temp)`` (Osband 2026), after normalization
    :param delight_temp: temperature of the delightful gate
    :param dual_clip: bound the loss of negative advantages by ``dual_clip_threshold * A`` (Ye et al. 2020)
    :param dual_clip_threshold: the dual clip constant, > 1
    :param log_ratio_clamp: clamp ``logp - old_logp`` to ``(low, high)`` (a float ``c`` means ``(-c, c)``) before ``exp``
    :param group_dim: where a ``(b n)`` mask gets its group dimension when the inputs are grouped
    :return: the elementwise loss (no mask) or its masked mean. It is computed outside ``torch.autocast`` in float32
        when the inputs are float16, bfloat16 or float32 (low precision is upcast), and in float64 when any input is
        float64
    """
    low, high = clip_bounds(eps_clip)

    def surrogate(ratio: th.Tensor, adv: th.Tensor) -> th.Tensor:
        return _clipped_surrogate(ratio, adv, low, high)

    return _actor_loss(
        surrogate,
        action_log_probs,
        old_action_log_probs,
        advantages,
        mask,
        normalize_advantages,
        delightful,
        delight_temp,
        dual_clip,
        dual_clip_threshold,
        log_ratio_clamp,
        group_dim,
    )


def spo_actor_loss(
    action_log_probs: th.Tensor,
    old_action_log_probs: th.Tensor,
    advantages: th.Tensor,
    eps_clip: float | tuple[float, float] = 0.2,
    mask: th.Tensor | None = None,
    normalize_advantages: bool = False,
    delightful: bool = False,
    delight_temp: float = 1.0,
    dual_clip: bool = False,
    dual_clip_threshold: float = 3.0,
    log_ratio_clamp: LogRatioClamp = None,
    group_dim: int = -2,
    asymmetric: bool = False,
) -> th.Tensor:
    """
    Simple Policy Optimization (Xie et al. 2025): ``-(r A - |A| (r - 1)^2 / (2 eps))``.

    Instead of PPO's flat clipped region, SPO penalises the ratio quadratically, so its gradient always
    pulls the ratio back towards ``[1 - low, 1 + high]``. ``eps`` is ``high`` where ``r >= 1`` and ``low`` below.

    :param asymmetric: where ``A > 0`` use PPO's clipped surrogate instead (SPO only for negative advantages)
    :return: the elementwise loss (no mask) or its masked mean, in float32 (float64 for float64 inputs), as
        :func:`ppo_actor_loss`

    The other parameters are those of :func:`ppo_actor_loss`.
    """
    low, high = clip_bounds(eps_clip)
    if low <= 0 or high <= 0:
        raise ValueError(f"eps_clip must be > 0 for SPO (its penalty divides by it), got {eps_clip!r}")

    def surrogate(ratio: th.Tensor, adv: th.Tensor) -> th.Tensor:
        eps = th.where(ratio >= 1, high, low)
        spo = ratio * adv - adv.abs() * (ratio - 1).square() / (2 * eps)
        if asymmetric:
            return th.where(adv > 0, _clipped_surrogate(ratio, adv, low, high), spo)
        return spo

    return _actor_loss(
        surrogate,
        action_log_probs,
        old_action_log_probs,
        advantages,
        mask,
        normalize_advantages,
        delightful,
        delight_temp,
        dual_clip,
        dual_clip_threshold,
        log_ratio_clamp,
        group_dim,
    )


def _clipped_surrogate(ratio: th.Tensor, adv: th.Tensor, low: float, high: float) -> th.Tensor:
    # Schulman et al. 2017; decoupled (low, high) - Zhou et al. 2025
    return th.min(ratio * adv, th.clamp(ratio, 1 - low, 1 + high) * adv)


def _actor_loss(
    surrogate: Callable[[th.Tensor, th.Tensor], th.Tensor],
    action_log_probs: th.Tensor,
    old_action_log_probs: th.Tensor,
    advantages: th.Tensor,
    mask: th.Tensor | None,
    normalize_advantages: bool,
    delightful: bool,
    delight_temp: float,
    dual_clip: bool,
    dual_clip_threshold: float,
    log_ratio_clamp: LogRatioClamp,
    group_dim: int,
) -> th.Tensor:
    """The steps both actor losses share: checks, float32 or wider, normalization, gate, ratio, dual clip, reduction."""
    if advantages.ndim > action_log_probs.ndim:
        raise ValueError(
            f"advantages has shape {tuple(advantages.shape)}, with more dims than action_log_probs "
            f"{tuple(action_log_probs.shape)}: grouped advantages must be combined first "
            "(combine_grouped_advantages, or calc_gae(..., weights=...))"
        )
    check_same_shape("action_log_probs", action_log_probs, old_action_log_probs=old_action_log_probs, advantages=advantages)
    if dual_clip_threshold <= 1:
        raise ValueError(f"dual_clip_threshold must be > 1, got {dual_clip_threshold}")
    if mask is not None:
        mask = expand_mask_for_groups(mask, action_log_probs, group_dim)
        check_broadcastable("mask", mask, action_log_probs.shape)

    dtype = _compute_dtype(action_log_probs, old_action_log_probs, advantages)
    device_type = action_log_probs.device.type
    with th.autocast(device_type=device_type, enabled=False):
        logp, old_logp, adv = (x.to(dtype) for x in (action_log_probs, old_action_log_probs, advantages))
        if mask is not None:
            # padding may hold anything: zero it so that neither the loss nor its gradient sees a NaN there
            keep = (mask != 0).expand_as(logp)
            zero = th.zeros((), dtype=dtype, device=logp.device)
            logp, old_logp, adv = (th.where(keep, x, zero) for x in (logp, old_logp, adv))
        if normalize_advantages:
            adv = masked_zscore(adv, mask)
        if delightful:
            # Osband 2026: weight each sample by how surprising (low logp) and how good (high A) it is
            adv = adv * th.sigmoid(-logp * adv / delight_temp).detach()
        log_ratio = logp - old_logp
        if log_ratio_clamp is not None:
            low, high = (-log_ratio_clamp, log_ratio_clamp) if isinstance(log_ratio_clamp, (int, float)) else log_ratio_clamp
            log_ratio = log_ratio.clamp(low, high)
        ratio = th.exp(log_ratio)
        surr = surrogate(ratio, adv)
        if dual_clip:
            # Ye et al. 2020: for A < 0 the loss is bounded by -c * A however large the ratio grows
            surr = th.where(adv < 0, th.max(surr, dual_clip_threshold * adv), surr)
        loss = -surr
        return loss if mask is None else masked_mean(loss, mask)


def _compute_dtype(*inputs: th.Tensor) -> th.dtype:
    """The inputs' promoted dtype, at least float32: half precision is upcast, float64 stays float64."""
    dtype = th.float32
    for x in inputs:
        dtype = th.promote_types(dtype, x.dtype)
    return dtype
