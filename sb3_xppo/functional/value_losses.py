"""
Value (critic) losses.

- clipped value loss, max form: Schulman et al. 2017 (the PPO reference implementation)
- improved value clipping: Lee & Chung 2024, On Analysis of Clipped Critic Loss in Proximal Policy Gradient
- HL-Gauss classification critic: Farebrother et al. 2024, Stop Regressing: Training Value Functions via
  Classification for Scalable Deep RL, https://arxiv.org/abs/2403.03950 (Imani & White 2018 for the HL loss)
"""

from __future__ import annotations

from collections.abc import Callable

import torch as th
import torch.nn.functional as F

from sb3_xppo.functional._checks import check_broadcastable, expand_mask_for_groups, to_device
from sb3_xppo.functional.masked import lens_to_mask, masked_mean, masked_sum

ValueLossFn = Callable[..., th.Tensor]
REDUCTIONS = ("mean", "sum", "none")


def clipped_value_loss_fn(
    values: th.Tensor,
    old_values: th.Tensor | None = None,
    returns: th.Tensor | None = None,
    clip: float | None = 0.2,
    loss_fn: ValueLossFn = F.mse_loss,
    mask: th.Tensor | None = None,
    lens: th.Tensor | None = None,
    group_dim: int = -2,
    reduction: str = "mean",
) -> th.Tensor:
    """
    Value regression with PPO's clipping, max form (Schulman et al. 2017):
    ``max(loss_fn(v, R), loss_fn(old + clamp(v - old, -clip, clip), R))``.

    Without clipping (``clip`` None/False or no ``old_values``) it is ``loss_fn(values, returns)``.

    :param values: predicted values, ``(b n)``, grouped ``(b g n)`` / ``(b n g)``, or any shape
    :param old_values: the values predicted when the data was collected
    :param returns: regression targets
    :param clip: clip range of ``v - old``
    :param loss_fn: elementwise loss, called as ``loss_fn(pred, target, reduction='none')``
    :param mask: bool or float mask; a ``(b n)`` mask broadcasts along ``group_dim`` of grouped inputs
    :param lens: ``(b)`` valid lengths, builds the time mask when ``mask`` is not given (moved to the device of
        ``values``; a ``ValueError`` naming both devices where that is impossible)
    :param group_dim: the group dimension of grouped inputs
    :param reduction: ``'mean'`` (masked mean), ``'sum'`` (masked sum) or ``'none'`` (elementwise, masked-out entries 0)
    :return: the reduced loss
    """
    returns = _check_value_inputs(values, old_values, returns, reduction)
    loss = loss_fn(values, returns, reduction="none")
    c = _clip_range(clip, old_values)
    if c is not None and old_values is not None:
        clipped = old_values + th.clamp(values - old_values, -c, c)
        loss = th.max(loss, loss_fn(clipped, returns, reduction="none"))
    return _reduce(loss, mask, lens, group_dim, reduction)


def improved_value_clipping_fn(
    values: th.Tensor,
    old_values: th.Tensor | None = None,
    returns: th.Tensor | None = None,
    clip: float | None = 0.2,
    loss_fn: ValueLossFn = F.mse_loss,
    scalar_values: th.Tensor | None = None,
    scalar_old_values: th.Tensor | None = None,
    mask: th.Tensor | None = None,
    lens: th.Tensor | None = None,
    group_dim: int = -2,
    reduction: str = "mean",
) -> th.Tensor:
    """
    Improved value clipping (Lee & Chung 2024).

    The return is clipped around the old value, ``R_c = clamp(R, sv_old - clip, sv_old + clip)``, and the
    loss is ``min(loss_fn(v, R), loss_fn(v, R_c))``, except where the prediction already lies strictly between
    the return and the far clip boundary (``R < sv < sv_old - clip`` or ``sv_old + clip < sv < R``), where it is 0:
    there the clipped target would pull the prediction away from the return.

    :param scalar_values: scalar read-out of ``values`` used for the clip test (defaults to ``values``), so a
        distributional critic (logits + cross-entropy ``loss_fn``) can clip on its expected value
    :param scalar_old_values: the same for ``old_values``

    The other parameters are those of :func:`clipped_value_loss_fn`.
    """
    # a distributional critic's values carry a bins dim: the scalar read-outs are what match the returns
    returns = _check_value_inputs(
        values if scalar_values is None else scalar_values,
        old_values if scalar_old_values is None else scalar_old_values,
        returns,
        reduction,
    )
    loss = loss_fn(values, returns, reduction="none")
    c = _clip_range(clip, old_values)
    if c is not None and old_values is not None:
        sv = values if scalar_values is None else scalar_values
        sv_old = old_values if scalar_old_values is None else scalar_old_values
        low, high = sv_old - c, sv_old + c
        clipped_loss = loss_fn(values, th.clamp(returns, low, high), reduction="none")
        beyond = ((returns < sv) & (sv < low)) | ((high < sv) & (sv < returns))
        loss = th.where(beyond, th.zeros((), dtype=loss.dtype, device=loss.device), th.min(loss, clipped_loss))
    return _reduce(loss, mask, lens, group_dim, reduction)


def hl_gauss_probs(targets: th.Tensor, v_min: float, v_max: float, n_bins: int, sigma_ratio: float = 0.75) -> th.Tensor:
    """
    HL-Gauss targets (Farebrother et al. 2024, section 3.1): the mass that a Gaussian ``N(y, sigma^2)``, truncated
    to the support ``[v_min, v_max]``, puts on each of ``n_bins`` equal bins,
    ``p_k = (Phi((e_{k+1} - y) / sigma) - Phi((e_k - y) / sigma)) / (Phi((e_K - y) / sigma) - Phi((e_0 - y) / sigma))``
    with the bin edges ``e_0 = v_min < ... < e_K = v_max`` and ``sigma = sigma_ratio * (v_max - v_min) / n_bins``.
    Targets outside the support are clamped to it first.

    :param targets: scalar targets, any shape ``(...)``
    :param v_min: the support's lower end
    :param v_max: the support's upper end, > ``v_min``
    :param n_bins: number of bins ``K`` >= 2
    :param sigma_ratio: the Gaussian's standard deviation in bin widths (the paper's 0.75 spreads the mass over about
        six bins)
    :return: ``(..., K)`` probabilities summing to 1
    """
    _check_support(v_min, v_max, n_bins, sigma_ratio)
    edges = th.linspace(v_min, v_max, n_bins + 1, dtype=targets.dtype, device=targets.device)
    sigma = sigma_ratio * (v_max - v_min) / n_bins
    y = targets.clamp(v_min, v_max).unsqueeze(-1)
    cdf = th.special.ndtr((edges - y) / sigma)  # (..., K + 1)
    return (cdf[..., 1:] - cdf[..., :-1]) / (cdf[..., -1:] - cdf[..., :1])


def hl_gauss_value(logits: th.Tensor, v_min: float, v_max: float) -> th.Tensor:
    """
    The scalar value of a categorical critic: the expectation of the bin centers under ``softmax(logits)``.

    :param logits: ``(..., K)`` logits over ``K`` equal bins of ``[v_min, v_max]``
    :param v_min: the support's lower end
    :param v_max: the support's upper end
    :return: ``(...)`` values
    """
    n_bins = logits.shape[-1]
    _check_support(v_min, v_max, n_bins, 1.0)
    width = (v_max - v_min) / n_bins
    centers = th.linspace(v_min + width / 2, v_max - width / 2, n_bins, dtype=logits.dtype, device=logits.device)
    return th.softmax(logits, dim=-1) @ centers


def hl_gauss_value_loss_fn(
    logits: th.Tensor,
    returns: th.Tensor,
    v_min: float,
    v_max: float,
    sigma_ratio: float = 0.75,
    old_values: th.Tensor | None = None,
    clip: float | None = None,
    mask: th.Tensor | None = None,
    lens: th.Tensor | None = None,
    group_dim: int = -2,
    reduction: str = "mean",
) -> th.Tensor:
    """
    The classification value loss of Farebrother et al. 2024: the cross-entropy between the critic's
    ``softmax(logits)`` and the HL-Gauss encoding of the return (:func:`hl_gauss_probs`). Value clipping happens in
    scalar space, before encoding: the target becomes ``old + clamp(R - old, -clip, clip)``, so the critic is never
    pulled further than ``clip`` from its value at collection.

    :param logits: ``(..., K)``: the values' shape plus a bins dim
    :param returns: regression targets, the values' shape ``(...)``
    :param v_min: the support's lower end (targets beyond the support are clamped to it)
    :param v_max: the support's upper end
    :param sigma_ratio: see :func:`hl_gauss_probs`
    :param old_values: the values at collection (needed with ``clip``)
    :param clip: clip range of ``R - old`` (None: no clipping)
    :param mask: bool or float mask over the values' shape, as :func:`clipped_value_loss_fn`
    :param lens: ``(b)`` valid lengths, as :func:`clipped_value_loss_fn`
    :param group_dim: the group dimension of grouped values
    :param reduction: ``'mean'``, ``'sum'`` or ``'none'`` (per value, masked-out entries 0)
    :return: the reduced loss
    """
    if logits.ndim < 1 or logits.shape[-1] < 2:
        raise ValueError(f"logits must end with a bins dim of at least 2, got shape {tuple(logits.shape)}")
    returns = _check_value_inputs(logits[..., 0], old_values, returns, reduction)
    targets = returns.expand(logits.shape[:-1])
    c = _clip_range(clip, old_values)
    if c is not None and old_values is not None:
        targets = old_values + th.clamp(targets - old_values, -c, c)
    probs = hl_gauss_probs(targets.detach(), v_min, v_max, logits.shape[-1], sigma_ratio)
    loss = -(probs * th.log_softmax(logits, dim=-1)).sum(dim=-1)
    return _reduce(loss, mask, lens, group_dim, reduction)


def _check_support(v_min: float, v_max: float, n_bins: int, sigma_ratio: float) -> None:
    if not v_max > v_min:
        raise ValueError(f"the support needs v_min < v_max, got v_min={v_min!r}, v_max={v_max!r}")
    if n_bins < 2:
        raise ValueError(f"n_bins must be >= 2, got {n_bins!r}")
    if not sigma_ratio > 0:
        raise ValueError(f"sigma_ratio must be > 0, got {sigma_ratio!r}")


def _clip_range(clip: float | None, old_values: th.Tensor | None) -> float | None:
    """:return: the clip range where the loss clips (``clip`` given, not False, and ``old_values``), else None"""
    return None if clip is None or clip is False or old_values is None else clip


def _check_value_inputs(
    values: th.Tensor, old_values: th.Tensor | None, returns: th.Tensor | None, reduction: str
) -> th.Tensor:
    if returns is None:
        raise ValueError("returns is required")
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    check_broadcastable("returns", returns, values.shape)
    check_broadcastable("old_values", old_values, values.shape)
    return returns


def _reduce(loss: th.Tensor, mask: th.Tensor | None, lens: th.Tensor | None, group_dim: int, reduction: str) -> th.Tensor:
    if mask is None and lens is not None:
        time_dim = -2 if loss.ndim >= 3 and group_dim in (-1, loss.ndim - 1) else -1
        mask = lens_to_mask(to_device(lens, loss.device, "lens", "values"), loss.shape[time_dim])
    if mask is not None:
        mask = expand_mask_for_groups(mask, loss, group_dim)
        check_broadcastable("mask", mask, loss.shape)
    if reduction == "mean":
        return masked_mean(loss, mask)
    if reduction == "sum":
        return masked_sum(loss, mask)
    return (
        loss if mask is None else th.where(mask.expand_as(loss) != 0, loss, th.zeros((), dtype=loss.dtype, device=loss.device))
    )
