"""Masked statistics: the one copy of each, used by every loss and by the advantage estimators.

A mask is bool or float and broadcasts against the tensor it masks; a float mask acts as a weight.
Entries whose mask is 0 never contribute, even when they hold NaN or inf.
"""

from __future__ import annotations

import torch as th

EPS = 1e-5


def _dims(x: th.Tensor, dim: int | tuple[int, ...] | None) -> tuple[int, ...]:
    return tuple(range(x.ndim)) if dim is None else ((dim,) if isinstance(dim, int) else tuple(dim))


def masked_sum(
    x: th.Tensor, mask: th.Tensor | None = None, dim: int | tuple[int, ...] | None = None, keepdim: bool = False
) -> th.Tensor:
    """
    ``sum(x * mask)`` over ``dim`` (all dims by default); masked-out entries count as 0 even if non-finite.

    :param x: values
    :param mask: bool or float mask broadcastable to ``x``; ``None`` keeps every entry
    :param dim: dimension(s) to reduce
    :param keepdim: keep the reduced dimensions
    """
    if mask is None:
        return x.sum(dim=_dims(x, dim), keepdim=keepdim)
    return _apply_mask(x, mask).sum(dim=_dims(x, dim), keepdim=keepdim)


def masked_mean(
    x: th.Tensor,
    mask: th.Tensor | None = None,
    dim: int | tuple[int, ...] | None = None,
    keepdim: bool = False,
    eps: float = EPS,
) -> th.Tensor:
    """
    Masked mean ``sum(x * m) / max(sum(m), eps)``.

    :param x: values
    :param mask: bool or float mask broadcastable to ``x`` (float masks weight the entries); ``None`` is the plain mean
    :param dim: dimension(s) to reduce, all by default
    :param keepdim: keep the reduced dimensions
    :param eps: lower bound of the total weight, so an all-masked input gives 0 rather than NaN
    :return: the masked mean
    """
    if mask is None:
        return x.mean(dim=_dims(x, dim), keepdim=keepdim)
    dims = _dims(x, dim)
    weight = mask.to(x.dtype).expand_as(x).sum(dim=dims, keepdim=keepdim)
    return _apply_mask(x, mask).sum(dim=dims, keepdim=keepdim) / weight.clamp(min=eps)


def masked_zscore(
    x: th.Tensor,
    mask: th.Tensor | None = None,
    dim: int | tuple[int, ...] | None = None,
    eps: float = EPS,
) -> th.Tensor:
    """
    Masked z-score ``(x - mean) / sqrt(var + eps)`` with the population (biased) variance.

    Both statistics are masked; masked-out entries come back as 0. A single entry gives 0, never NaN.

    :param x: values
    :param mask: bool or float mask broadcastable to ``x``; ``None`` uses every entry
    :param dim: dimension(s) the statistics are taken over, all by default
    :param eps: added to the variance
    :return: the normalized tensor, same shape as ``x``
    """
    mean, var = masked_moments(x, mask, dim=dim, eps=eps)
    return zscore_with(x, mean, var, mask, eps=eps)


def masked_moments(
    x: th.Tensor, mask: th.Tensor | None = None, dim: int | tuple[int, ...] | None = None, eps: float = EPS
) -> tuple[th.Tensor, th.Tensor]:
    """
    The masked mean and population (biased) variance that :func:`masked_zscore` uses, with the reduced dims kept.

    :param x: values
    :param mask: bool or float mask broadcastable to ``x``; ``None`` uses every entry
    :param dim: dimension(s) the statistics are taken over, all by default
    :param eps: lower bound of the total weight (see :func:`masked_mean`)
    :return: ``(mean, var)``, each of ``x``'s shape with size 1 along the reduced dims
    """
    mean = masked_mean(x, mask, dim=dim, keepdim=True, eps=eps)
    var = masked_mean((x - mean).square(), mask, dim=dim, keepdim=True, eps=eps)
    return mean, var


def zscore_with(x: th.Tensor, mean: th.Tensor, var: th.Tensor, mask: th.Tensor | None = None, eps: float = EPS) -> th.Tensor:
    """
    ``(x - mean) / sqrt(var + eps)``, masked-out entries set to 0: the z-score of given statistics.

    :param x: values
    :param mean: mean broadcastable to ``x`` (from :func:`masked_moments`)
    :param var: population variance broadcastable to ``x``
    :param mask: bool or float mask broadcastable to ``x``; ``None`` keeps every entry
    :param eps: added to the variance
    """
    z = (x - mean) * th.rsqrt(var + eps)
    return z if mask is None else _apply_mask(z, mask != 0)


def lens_to_mask(lens: th.Tensor, n: int) -> th.Tensor:
    """
    Validity mask of right-padded sequences.

    :param lens: ``(b)`` number of valid steps of each sequence
    :param n: padded length
    :return: ``(b n)`` bool mask, True at valid steps
    """
    return th.arange(n, device=lens.device) < lens.reshape(-1, 1)


# integer dtypes of the same width as each float dtype, for zero_masked's bitwise path
_SAME_WIDTH_INT = {th.float16: th.int16, th.bfloat16: th.int16, th.float32: th.int32, th.float64: th.int64}


def zero_masked(x: th.Tensor, mask: th.Tensor, out: th.Tensor | None = None) -> th.Tensor:
    """
    ``x`` where ``mask`` is nonzero and an exact 0 elsewhere, even where ``x`` is NaN or inf.

    Outside autograd this multiplies each float's bit pattern, read as an integer, by 1 or 0: the same result
    as ``th.where(mask != 0, x, 0)`` at about half the cost on CPU (``calc_gae`` runs it on every call).

    :param x: values
    :param mask: bool or float mask broadcastable to ``x``
    :param out: optional output tensor (may be ``x`` itself)
    """
    keep = mask.bool()  # nonzero is True, as `mask != 0`, and 8x cheaper on CPU
    int_dtype = _SAME_WIDTH_INT.get(x.dtype)
    if int_dtype is None or (th.is_grad_enabled() and x.requires_grad):
        return th.where(keep, x, th.zeros((), dtype=x.dtype, device=x.device), out=out)
    bits = th.mul(x.view(int_dtype), keep, out=None if out is None else out.view(int_dtype))
    return bits.view(x.dtype) if out is None else out


def _apply_mask(x: th.Tensor, mask: th.Tensor) -> th.Tensor:
    """``x * mask`` with exact zeros where the mask is 0 (a NaN there must not leak)."""
    return zero_masked(x if mask.dtype == th.bool else x * mask.to(x.dtype), mask)


def valid_mean(x: th.Tensor, valid: th.Tensor | None, dim: int | None = None) -> th.Tensor:
    """
    The mean over the valid samples: ``x.mean()`` (all count), else ``x[valid].mean()``, the form sb3-contrib's
    ``RecurrentPPO`` reduces its padded minibatches with (bit for bit).

    :param x: ``(batch, ...)``
    :param valid: ``(batch,)`` bool, or None
    :param dim: reduce this dim only (e.g. 0, keeping a group dim)
    :return: the mean
    """
    if valid is not None:
        x = x[valid]
    return x.mean() if dim is None else x.mean(dim=dim)


def zscore_group_terms(terms: th.Tensor, valid: th.Tensor | None = None, minibatch: bool = False) -> th.Tensor:
    """
    The groups' terms of the combined advantages normalized as the combined advantages are: each term minus its mean
    over the (valid) samples, all divided by the spread of their sum; so the normalized terms sum to the z-scored
    combined advantages (up to rounding).

    :param terms: ``(batch, G)``
    :param valid: ``(batch,)`` bool, or None (all count)
    :param minibatch: PPO's per-minibatch form, ``/ (std + 1e-8)`` with the unbiased std (left as they are where fewer
        than two samples count); else the rollout's, :func:`~sb3_xppo.functional.masked.masked_zscore`'s
        ``/ sqrt(var + eps)`` with the population variance
    :return: ``(batch, G)``
    """
    counted = terms if valid is None else terms[valid]
    if minibatch and len(counted) <= 1:
        return terms
    centred = terms - counted.mean(0)
    if minibatch:
        return centred / (counted.sum(-1).std() + 1e-8)
    _, var = masked_moments(counted.sum(-1))
    return centred * th.rsqrt(var + EPS)


def minibatch_zscore(advantages: th.Tensor, valid: th.Tensor | None) -> th.Tensor:
    """
    ``normalize_advantage='minibatch'``: PPO's z-score (unbiased std; its statistics over the valid samples, as
    ``RecurrentPPO``), kept in that form for exact reproduction; a minibatch of one (valid) sample is left as is
    instead of becoming NaN. The groups' terms ``(batch, G)`` of ``group_gradients`` go through
    :func:`zscore_group_terms`, so that they sum to the z-scored combined advantages.

    :param advantages: ``(batch,)``, or ``(batch, G)`` the groups' terms
    :param valid: ``(batch,)`` bool or None
    :return: the same shape
    """
    if advantages.ndim == 2:
        return zscore_group_terms(advantages, valid, minibatch=True)
    counted = advantages if valid is None else advantages[valid]
    if len(counted) <= 1:
        return advantages
    return (advantages - counted.mean()) / (counted.std() + 1e-8)
