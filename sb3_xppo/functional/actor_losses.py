"""
Policy (actor) losses.

- clipped surrogate: Schulman et al. 2017, Proximal Policy Optimization Algorithms
- decoupled clip range ``(low, high)``: Zhou et al. 2025
- dual clip: Ye et al. 2020, Mastering Complex Control in MOBA Games with Deep Reinforcement Learning
- delightful gate: Osband 2026, Delightful Policy Gradient
- Simple Policy Optimization: Xie et al. 2025
- a Huber fit of the log-ratio to a fixed target (HPO): Kaddour 2026, Target Policy Optimization (arXiv:2604.06159)
- skipping degenerate advantages: Yu et al. 2025, DAPO (dynamic sampling, arXiv:2503.14476)
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import NamedTuple, Protocol

import torch as th

from sb3_xppo.functional._checks import check_broadcastable, check_same_shape, clip_bounds, expand_mask_for_groups
from sb3_xppo.functional.masked import masked_mean, masked_moments, zscore_with

LogRatioClamp = float | tuple[float, float] | None


class AdvantageStats(NamedTuple):
    """
    The statistics of the advantages an actor loss received (``return_stats=True``), detached.

    ``mean`` and ``var`` are the masked mean and population (biased) variance over every valid entry, the groups of
    grouped inputs pooled: the statistics the loss's z-score uses (``normalize_advantages=True``), computed also
    without it. Both are 0-dim tensors of the loss's dtype.
    """

    mean: th.Tensor
    var: th.Tensor


#: an actor loss's return: the loss, or ``(loss, stats)`` with ``return_stats=True``
ActorLossResult = th.Tensor | tuple[th.Tensor, AdvantageStats]


class ActorLossFunction(Protocol):
    """
    The signature every actor loss shares, declared once: :func:`ppo_actor_loss`, :func:`spo_actor_loss`,
    :func:`hpo_actor_loss`, and a loss of your own (docs/guide/development.md, "Adding a loss"). XPPO calls it with
    these keywords, and the loss's own (``actor_loss_kwargs``: keywords of its function beyond these, with defaults).

    :param action_log_probs: log-probabilities of the taken actions under the current policy, ``(b n)`` or any shape
    :param old_action_log_probs: the same under the policy that collected the data
    :param advantages: advantage estimates, same shape (combine grouped advantages first)
    :param eps_clip: clip range, a float or a ``(low, high)`` pair for decoupled clipping (Zhou et al. 2025)
    :param mask: bool or float mask; when given the masked mean is returned, else the elementwise loss
    :param normalize_advantages: masked z-score of the advantages before anything else
    :param delightful: gate the advantages by ``sigmoid(-logp * A / delight_temp)`` (Osband 2026), after normalization
    :param delight_temp: temperature of the delightful gate
    :param log_ratio_clamp: clamp ``logp - old_logp`` to ``(low, high)`` (a float ``c`` means ``(-c, c)``) before ``exp``
    :param group_dim: where a ``(b n)`` mask gets its group dimension when the inputs are grouped
    :param min_advantage_std: when the advantages' (masked, population) variance is ``<= min_advantage_std**2`` the
        loss is multiplied by 0: it stays in the graph and its gradients are 0. DAPO's dynamic sampling (Yu et al.
        2025) for a minibatch whose advantages carry no signal. ``None`` never skips
    :param return_stats: also return the advantages' :class:`AdvantageStats`
    :return: the elementwise loss (no mask) or its masked mean; ``(loss, stats)`` with ``return_stats``. It is computed
        outside ``torch.autocast`` in float32 when the inputs are float16, bfloat16 or float32 (low precision is
        upcast), and in float64 when any input is float64
    """

    def __call__(
        self,
        action_log_probs: th.Tensor,
        old_action_log_probs: th.Tensor,
        advantages: th.Tensor,
        *,
        eps_clip: float | tuple[float, float],
        mask: th.Tensor | None = ...,
        normalize_advantages: bool = ...,
        delightful: bool = ...,
        delight_temp: float = ...,
        log_ratio_clamp: LogRatioClamp = ...,
        group_dim: int = ...,
        min_advantage_std: float | None = ...,
        return_stats: bool = ...,
    ) -> ActorLossResult: ...


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
    min_advantage_std: float | None = None,
    return_stats: bool = False,
) -> ActorLossResult:
    """
    PPO's clipped surrogate loss (Schulman et al. 2017), ``-min(r A, clip(r, 1 - low, 1 + high) A)``.

    :param dual_clip: bound the loss of negative advantages by ``dual_clip_threshold * A`` (Ye et al. 2020)
    :param dual_clip_threshold: the dual clip constant, > 1

    The other parameters, and the return, are those of every actor loss (:class:`ActorLossFunction`).
    """
    low, high = clip_bounds(eps_clip)

    def surrogate(ratio: th.Tensor, adv: th.Tensor) -> th.Tensor:
        return _clipped_surrogate(ratio, adv, low, high)

    return _actor_loss(
        _surrogate_loss(surrogate, dual_clip, dual_clip_threshold),
        action_log_probs,
        old_action_log_probs,
        advantages,
        mask,
        normalize_advantages,
        delightful,
        delight_temp,
        _log_ratio_bounds(log_ratio_clamp),
        group_dim,
        min_advantage_std,
        return_stats,
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
    min_advantage_std: float | None = None,
    return_stats: bool = False,
) -> ActorLossResult:
    """
    Simple Policy Optimization (Xie et al. 2025): ``-(r A - |A| (r - 1)^2 / (2 eps))``.

    Instead of PPO's flat clipped region, SPO penalises the ratio quadratically, so its gradient always
    pulls the ratio back towards ``[1 - low, 1 + high]``. ``eps`` is ``high`` where ``r >= 1`` and ``low`` below.

    :param asymmetric: where ``A > 0`` use PPO's clipped surrogate instead (SPO only for negative advantages)

    The other parameters, and the return, are those of :func:`ppo_actor_loss`.
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
        _surrogate_loss(surrogate, dual_clip, dual_clip_threshold),
        action_log_probs,
        old_action_log_probs,
        advantages,
        mask,
        normalize_advantages,
        delightful,
        delight_temp,
        _log_ratio_bounds(log_ratio_clamp),
        group_dim,
        min_advantage_std,
        return_stats,
    )


def hpo_actor_loss(
    action_log_probs: th.Tensor,
    old_action_log_probs: th.Tensor,
    advantages: th.Tensor,
    eps_clip: float | tuple[float, float] = 0.2,
    mask: th.Tensor | None = None,
    normalize_advantages: bool = False,
    delightful: bool = False,
    delight_temp: float = 1.0,
    log_ratio_clamp: LogRatioClamp = None,
    advantage_clip: float | tuple[float, float] = 2.0,
    group_dim: int = -2,
    min_advantage_std: float | None = 1e-6,
    return_stats: bool = False,
) -> ActorLossResult:
    """
    HPO: a Huber loss that pulls the log-ratio towards a fixed target, weighted by ``|A|``. After Target Policy
    Optimization (Kaddour 2026, arXiv:2604.06159), which fits the policy to a fixed target ``q ∝ p_old exp(u)``
    instead of following the policy gradient; here each sample's target is a log-ratio::

        eps = high where A >= 0 else low
        e = log(r) - eps * clamp(A, -c_low, c_high)
        loss = |A| * (e^2 / (2 eps) if |e| < eps else |e| - eps / 2)

    Its gradient in the log-ratio, ``|A| * clamp(e / eps, -1, 1)``, is 0 at the target and points back to it from
    either side, so more epochs do not push the ratio further; far from the target it is bounded by ``|A|``.

    :param eps_clip: the clip range ``eps``, a float or a ``(low, high)`` pair (``high`` for ``A >= 0``), > 0
    :param log_ratio_clamp: straight-through clamp of ``logp - old_logp``: the forward value is clamped to ``(low,
        high)`` (a float ``c`` means ``(-c, c)``), the gradient is the unclamped log-ratio's, so a ratio beyond the
        clamp is still pulled back. It must contain ``(-2 max(eps), 2 max(eps))``, else a ``ValueError``
    :param advantage_clip: ``c`` of the target ``eps * clamp(A, -c_low, c_high)``, a float or a ``(c_low, c_high)``
        pair, >= 0; the weight ``|A|`` is not clipped
    :param min_advantage_std: as every actor loss's, but on by default (1e-6): a minibatch of constant advantages
        gives a zero loss

    The other parameters and the return (no dual clip: the Huber loss is already bounded by ``|A| |e|``) are those
    of every actor loss (:class:`ActorLossFunction`); the delightful gate and the normalization change ``A`` before
    the target is formed.
    """
    low, high = clip_bounds(eps_clip)
    if low <= 0 or high <= 0:
        raise ValueError(f"eps_clip must be > 0 for HPO (its Huber loss divides by it), got {eps_clip!r}")
    c_low, c_high = clip_bounds(advantage_clip, "advantage_clip")
    if c_low < 0 or c_high < 0:
        raise ValueError(f"advantage_clip must be >= 0 (the target is eps * clamp(A, -c_low, c_high)), got {advantage_clip!r}")
    bounds = _log_ratio_bounds(log_ratio_clamp)
    check_hpo_log_ratio_clamp(log_ratio_clamp, max(low, high))

    def elementwise(log_ratio: th.Tensor, adv: th.Tensor) -> th.Tensor:
        # the side's clip range, exact in the compute dtype: high where A >= 0, low elsewhere
        eps = th.full_like(adv, low).masked_fill_(adv >= 0, high)
        error = log_ratio - eps * adv.clamp(-c_low, c_high)
        abs_error = error.abs()
        huber = th.where(abs_error < eps, error.square() / (2 * eps), abs_error - eps / 2)
        return adv.abs() * huber

    return _actor_loss(
        elementwise,
        action_log_probs,
        old_action_log_probs,
        advantages,
        mask,
        normalize_advantages,
        delightful,
        delight_temp,
        bounds,
        group_dim,
        min_advantage_std,
        return_stats,
        straight_through=True,
    )


def check_hpo_log_ratio_clamp(log_ratio_clamp: LogRatioClamp, eps: float) -> None:
    """
    HPO's rule for ``log_ratio_clamp``, in one place (the loss checks it at each call, XPPO's options at
    construction): the clamp must contain ``(-2 eps, 2 eps)``, the reach of HPO's targets ``eps * clamp(A, -2, 2)``.

    :param log_ratio_clamp: None, a number ``c`` (``(-c, c)``) or a ``(low, high)`` pair
    :param eps: the largest clip range
    :raises ValueError: naming ``log_ratio_clamp`` and the interval it must contain
    """
    bounds = _log_ratio_bounds(log_ratio_clamp)
    reach = 2 * eps
    if bounds is not None and (bounds[0] > -reach or bounds[1] < reach):
        raise ValueError(
            f"log_ratio_clamp={log_ratio_clamp!r} with HPO (actor_loss='hpo') must contain ({-reach:g}, {reach:g}) = "
            "(-2 eps, 2 eps), twice the largest clip range: a tighter clamp hides HPO's targets eps * clamp(A, -2, 2) "
            "from the log-ratio"
        )


def _clipped_surrogate(ratio: th.Tensor, adv: th.Tensor, low: float, high: float) -> th.Tensor:
    # Schulman et al. 2017; decoupled (low, high) - Zhou et al. 2025
    return th.min(ratio * adv, th.clamp(ratio, 1 - low, 1 + high) * adv)


def _surrogate_loss(
    surrogate: Callable[[th.Tensor, th.Tensor], th.Tensor], dual_clip: bool, dual_clip_threshold: float
) -> Callable[[th.Tensor, th.Tensor], th.Tensor]:
    """``(log_ratio, A) -> -surrogate(exp(log_ratio), A)``, dual-clipped where asked (Ye et al. 2020)."""
    if dual_clip_threshold <= 1:
        raise ValueError(f"dual_clip_threshold must be > 1, got {dual_clip_threshold}")

    def elementwise(log_ratio: th.Tensor, adv: th.Tensor) -> th.Tensor:
        surr = surrogate(th.exp(log_ratio), adv)
        if dual_clip:
            # for A < 0 the loss is bounded by -c * A however large the ratio grows
            surr = th.where(adv < 0, th.max(surr, dual_clip_threshold * adv), surr)
        return -surr

    return elementwise


def _log_ratio_bounds(log_ratio_clamp: LogRatioClamp) -> tuple[float, float] | None:
    """``log_ratio_clamp`` as ``(low, high)``: a number ``c`` is ``(-c, c)``, None stays None."""
    if log_ratio_clamp is None:
        return None
    if isinstance(log_ratio_clamp, (int, float)):
        return -float(log_ratio_clamp), float(log_ratio_clamp)
    return clip_bounds(log_ratio_clamp, "log_ratio_clamp")


def _actor_loss(
    elementwise: Callable[[th.Tensor, th.Tensor], th.Tensor],
    action_log_probs: th.Tensor,
    old_action_log_probs: th.Tensor,
    advantages: th.Tensor,
    mask: th.Tensor | None,
    normalize_advantages: bool,
    delightful: bool,
    delight_temp: float,
    log_ratio_bounds: tuple[float, float] | None,
    group_dim: int,
    min_advantage_std: float | None,
    return_stats: bool,
    straight_through: bool = False,
) -> ActorLossResult:
    """
    The steps every actor loss shares: checks, float32 or wider, statistics, normalization, gate, log-ratio and its
    clamp, the elementwise loss ``elementwise(log_ratio, A)``, the skip of degenerate advantages, reduction.
    """
    if advantages.ndim > action_log_probs.ndim:
        raise ValueError(
            f"advantages has shape {tuple(advantages.shape)}, with more dims than action_log_probs "
            f"{tuple(action_log_probs.shape)}: grouped advantages must be combined first "
            "(combine_grouped_advantages, or calc_gae(..., weights=...))"
        )
    check_same_shape("action_log_probs", action_log_probs, old_action_log_probs=old_action_log_probs, advantages=advantages)
    if mask is not None:
        mask = expand_mask_for_groups(mask, action_log_probs, group_dim)
        check_broadcastable("mask", mask, action_log_probs.shape)
    if min_advantage_std is not None and not min_advantage_std >= 0:
        raise ValueError(f"min_advantage_std must be None or >= 0, got {min_advantage_std!r}")

    dtype = _compute_dtype(action_log_probs, old_action_log_probs, advantages)
    device_type = action_log_probs.device.type
    # (entering autocast's off-switch costs more than the loss's own ops on a small batch: only where autocast is on)
    with th.autocast(device_type=device_type, enabled=False) if _autocast_enabled(device_type) else nullcontext():
        logp, old_logp, adv = (
            x if x.dtype == dtype else x.to(dtype) for x in (action_log_probs, old_action_log_probs, advantages)
        )
        if mask is not None:
            # padding may hold anything: zero it so that neither the loss nor its gradient sees a NaN there
            keep = (mask != 0).expand_as(logp)
            zero = th.zeros((), dtype=dtype, device=logp.device)
            logp, old_logp, adv = (th.where(keep, x, zero) for x in (logp, old_logp, adv))
        need_stats = normalize_advantages or return_stats or min_advantage_std is not None
        # (1 ...) each: the masked mean and population variance over all valid entries, groups pooled
        mean, var = masked_moments(adv, mask) if need_stats else (None, None)
        if normalize_advantages:
            assert mean is not None and var is not None  # (need_stats)
            adv = zscore_with(adv, mean, var, mask)
        if delightful:
            # Osband 2026: weight each sample by how surprising (low logp) and how good (high A) it is
            adv = adv * th.sigmoid(-logp * adv / delight_temp).detach()
        log_ratio = logp - old_logp
        if log_ratio_bounds is not None:
            clamped = log_ratio.clamp(*log_ratio_bounds)
            # straight-through: the forward value is exactly the clamped one (x - x is 0), the gradient is 1 everywhere
            log_ratio = clamped.detach() + (log_ratio - log_ratio.detach()) if straight_through else clamped
        loss = elementwise(log_ratio, adv)
        loss = loss if mask is None else masked_mean(loss, mask)
        if min_advantage_std is not None:
            assert var is not None  # (need_stats)
            # DAPO (Yu et al. 2025): constant advantages carry no signal; x 0 keeps the loss and its graph
            # (a NaN variance is not <= s**2: NaN advantages are not hidden)
            loss = loss * (~(var.reshape(()) <= min_advantage_std**2)).to(dtype)
        if not return_stats:
            return loss
        assert mean is not None and var is not None  # (need_stats)
        return loss, AdvantageStats(mean.detach().reshape(()), var.detach().reshape(()))


def _autocast_enabled(device_type: str) -> bool:
    """Whether ``torch.autocast`` is on for ``device_type`` (torch 2.3, which cannot ask per device type: assumed on)."""
    try:
        return th.is_autocast_enabled(device_type)
    except TypeError:
        return True


def _compute_dtype(*inputs: th.Tensor) -> th.dtype:
    """The inputs' promoted dtype, at least float32: half precision is upcast, float64 stays float64."""
    dtype = th.float32
    for x in inputs:
        dtype = th.promote_types(dtype, x.dtype)
    return dtype
