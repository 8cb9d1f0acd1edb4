"""
Advantages and returns.

- generalized advantage estimation: Schulman et al. 2016, High-Dimensional Continuous Control Using GAE
- multi-critic advantage combination: Mysore et al. 2022, Multi-Critic Actor Learning;
  Vijayan et al. 2025, Multi-critic Learning for Whole-body End-effector Twist Tracking
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch as th

from sb3_xppo.functional._checks import to_device
from sb3_xppo.functional.masked import lens_to_mask, masked_mean, zero_masked

Reduce = str | Callable[[th.Tensor], th.Tensor]
REDUCES = ("mean", "sum", "max", "min")
# Sequences up to SEQUENTIAL_MAX steps are scanned step by step, in the float order of SB3's RolloutBuffer
# loop; longer ones in chunks of CHUNK steps (the fastest on CPU at rollout sizes, see benchmarks/gae.py).
SEQUENTIAL_MAX = 64
CHUNK = 8


class GAE(NamedTuple):
    """Result of :func:`calc_gae` with ``return_advantages=True``."""

    returns: th.Tensor
    advantages: th.Tensor


def reverse_linear_scan(x: th.Tensor, coef: th.Tensor, sequential: bool = False) -> th.Tensor:
    """
    Solve ``y_t = x_t + coef_t * y_{t+1}`` backwards in time, with ``y_n = 0``, along the last dim.

    A Python loop over single steps costs one tensor op per step, which dominates at rollout sizes. Here
    sequences longer than ``SEQUENTIAL_MAX`` steps are cut into chunks of ``CHUNK`` steps and solved in two
    passes over all chunks at once. The first pass runs each chunk from a zero carry and keeps only its value
    at the chunk's first step; with the product of the chunk's coefficients this gives a ``CHUNK`` times
    shorter recurrence of the same kind across chunks, solved recursively. The second pass re-runs every chunk
    from its true carry, writing the output: ``O(CHUNK log n)`` small ops instead of ``n``, and within a chunk
    the float order of the plain recurrence. Up to ``SEQUENTIAL_MAX`` steps the plain recurrence runs, in the
    float order of SB3's ``RolloutBuffer`` loop (so short rollouts reproduce SB3 bit for bit).

    :param x: ``(..., n)`` inputs
    :param coef: ``(..., n)`` coefficients, e.g. ``gamma * lam * done_mask``
    :param sequential: always run the plain recurrence, whatever the length (bit for bit a Python loop)
    :return: ``(..., n)`` solution
    """
    x, coef = th.broadcast_tensors(x, coef)
    # time-major and contiguous, so every step of the loops reads one contiguous block; x's copy takes the solution
    x_tm = x.movedim(-1, 0).clone(memory_format=th.contiguous_format)
    y = _scan_time_major(x_tm, coef.movedim(-1, 0).contiguous(), sequential, inplace=True)
    return y.movedim(0, -1)


def _scan_time_major(
    x: th.Tensor, coef: th.Tensor, sequential: bool = False, exact: bool = True, inplace: bool = False
) -> th.Tensor:
    """
    :func:`reverse_linear_scan` along the first dim of contiguous inputs.

    :param exact: round after each op as SB3's loop does (the chunk starts of the chunked scan need not)
    :param inplace: the solution may overwrite ``x`` (which then is the caller's own buffer)
    """
    n = x.shape[0]
    # without autograd every step is written straight into the output; with it, the steps are stacked
    out = None if _needs_grad(x, coef) else x if inplace else th.empty_like(x)
    if sequential or n <= SEQUENTIAL_MAX:
        steps, acc = [x[0]] * n, th.zeros_like(x[0])
        for t in range(n - 1, -1, -1):
            step_out = None if out is None else out[t]
            # SB3's float order: x + (coef * acc), rounded after each op
            acc = th.add(x[t], coef[t] * acc, out=step_out) if exact else th.addcmul(x[t], coef[t], acc, out=step_out)
            steps[t] = acc
        return th.stack(steps) if out is None else out
    n_chunks = -(-n // CHUNK)
    pad = n_chunks * CHUNK - n
    if pad:
        x = th.cat([x, x.new_zeros(pad, *x.shape[1:])])
        coef = th.cat([coef, coef.new_zeros(pad, *coef.shape[1:])])
        out = None if out is None else x
    x, coef = x.view(n_chunks, CHUNK, *x.shape[1:]), coef.view(n_chunks, CHUNK, *coef.shape[1:])
    # pass 1: every chunk from a zero carry, up to its value at the chunk's first step
    head = x[:, CHUNK - 1].clone()
    for t in range(CHUNK - 2, -1, -1):
        head = th.addcmul(x[:, t], coef[:, t], head, out=None if out is None else head)
    # the true values at the chunks' first steps obey the same recurrence across chunks
    starts = _scan_time_major(head, coef.prod(1), exact=False, inplace=True)
    # pass 2: every chunk again, from its true carry (the first step of the next chunk)
    carry = th.cat([starts[1:], th.zeros_like(starts[:1])])
    steps = [carry] * CHUNK
    chunked_out = None if out is None else out.view(x.shape)
    for t in range(CHUNK - 1, -1, -1):
        steps[t] = carry = th.addcmul(x[:, t], coef[:, t], carry, out=None if chunked_out is None else chunked_out[:, t])
    y = th.stack(steps, 1).flatten(0, 1) if out is None else out
    return y[:n] if pad else y


def calc_gae(
    rewards: th.Tensor,
    values: th.Tensor,
    masks: th.Tensor | None = None,
    gamma: float | th.Tensor = 0.99,
    lam: float | th.Tensor = 0.95,
    done_masks: th.Tensor | None = None,
    next_value: float | th.Tensor | None = None,
    next_values: th.Tensor | None = None,
    lens: th.Tensor | None = None,
    weights: th.Tensor | Sequence[float] | None = None,
    normalize_grouped: bool = True,
    group_reduce: Reduce = "mean",
    group_dim: int = -2,
    return_advantages: bool = False,
    sequential: bool = False,
) -> th.Tensor | GAE:
    """
    Generalized advantage estimation (Schulman et al. 2016).

    ``delta_t = r_t + gamma * mask_t * V'_t - V_t``, ``A_t = delta_t + gamma * lam * done_mask_t * A_{t+1}``,
    ``returns = A + V``. The next value ``V'_t`` is, in order of precedence: ``next_values[t]``; ``values[t+1]``
    when ``values`` has ``n + 1`` steps and ``next_value`` is None; else ``values[t+1]`` for ``t < n - 1`` and
    ``next_value`` (default 0) at the end. Next values at masked-out steps are zeroed first, so NaN never leaks.

    :param rewards: ``(b n)``, ``(n)`` for one sequence, or grouped ``(b g n)`` (``group_dim`` -2 or 1) /
        ``(b n g)`` (``group_dim`` -1) for multi-critic rewards
    :param values: like ``rewards``, optionally with ``n + 1`` steps; for grouped rewards also ``(b n)`` shared by
        all groups
    :param masks: ``(b n)``, 1 where the step's next state may be bootstrapped (not terminated)
    :param gamma: discount, a float or ``(b)`` per sequence
    :param lam: GAE lambda, a float or ``(b)`` per sequence
    :param done_masks: ``(b n)``, 1 where the recursion continues (not terminated and not truncated); default ``masks``
    :param next_value: bootstrap value after the last step: scalar, ``(b)`` or ``(b g)``
    :param next_values: ``(b n)`` (or grouped) next value of every step
    :param lens: ``(b)`` valid lengths, padding on the right: padded steps get 0 returns and advantages. With an
        explicit bootstrap (``next_value``/``next_values``) the bootstrap belongs to each sequence's last valid
        step; without one the last valid step does not bootstrap. On another device than ``rewards`` they are
        moved to it (a ``ValueError`` naming both devices where that is impossible)
    :param weights: ``(g)`` group weights; when given the grouped advantages are combined into ``(b n)`` with
        :func:`combine_grouped_advantages` (statistics over the valid steps), the returns stay grouped
    :param normalize_grouped: z-score each group before combining
    :param group_reduce: how groups are combined, see :func:`combine_grouped_advantages`
    :param group_dim: the group dimension of grouped inputs
    :param return_advantages: return ``GAE(returns, advantages)`` instead of the returns alone
    :param sequential: scan one step at a time at any length, in the float order of a plain loop such as SB3's
        ``RolloutBuffer``, so results match it bit for bit. By default sequences longer than 64 steps use the
        chunked scan of :func:`reverse_linear_scan`, several times faster and equal up to float rounding (~1e-6)
    """
    single = rewards.ndim == 1
    grouped = rewards.ndim == 3
    if rewards.ndim not in (1, 2, 3):
        raise ValueError(f"rewards must be (n), (b n), (b g n) or (b n g), got shape {tuple(rewards.shape)}")
    if grouped and group_dim not in (-2, 1, -1, 2):
        raise ValueError(f"group_dim must be -2/1 for (b g n) or -1/2 for (b n g), got {group_dim}")
    if weights is not None and not grouped:
        raise ValueError("weights combine grouped advantages: rewards must be grouped (b g n) or (b n g)")
    time_last = not grouped or group_dim in (-2, 1)

    def to_bgn(x: th.Tensor, name: str, allow_shared: bool = True) -> th.Tensor:
        """Bring an input to the canonical ``(b, g or 1, time)`` layout."""
        if single:
            x = x.unsqueeze(0)
        if x.ndim == 2 and (allow_shared or not grouped):
            return x.unsqueeze(1)
        if grouped and x.ndim == 3:
            return x if time_last else x.movedim(-1, 1)
        raise ValueError(f"{name} has shape {tuple(x.shape)}, which does not fit rewards of shape {tuple(rewards.shape)}")

    r = to_bgn(rewards, "rewards")
    v = to_bgn(values, "values")
    b, g, n = r.shape
    if v.shape[0] != b or v.shape[1] not in (1, g) or v.shape[2] not in (n, n + 1):
        raise ValueError(
            f"values has shape {tuple(values.shape)}: expected the batch and groups of rewards {tuple(rewards.shape)} "
            f"and a time length of n={n} or n+1={n + 1}"
        )
    ones = th.ones((), dtype=r.dtype, device=r.device)
    m = None if masks is None else _check_mask(to_bgn(masks, "masks"), "masks", r)
    dm = None if done_masks is None else _check_mask(to_bgn(done_masks, "done_masks"), "done_masks", r)
    m = ones if m is None else m
    dm = m if dm is None else dm
    nv = _next_values(None if next_values is None else to_bgn(next_values, "next_values"), next_value, v, r)
    v = v[..., :n]
    valid = None
    if lens is not None:
        lens = to_device(lens, r.device, "lens", "rewards")
        valid = lens_to_mask(lens.reshape(b), n).unsqueeze(1)
        last = th.arange(n, device=r.device) == (lens.reshape(b, 1, 1) - 1)
        if next_values is None:
            # the bootstrap belongs to each sequence's last valid step; none without an explicit one
            nv = th.where(last, _bootstrap(next_value, v, b, g), nv)
        m = m * valid
        dm = dm * (valid & ~last)

    gamma, lam = _per_sequence(gamma, b), _per_sequence(lam, b)
    returns, advantages = _gae_bgn(r, v, nv, m, dm, gamma, lam, valid, sequential)

    def from_bgn(x: th.Tensor) -> th.Tensor:
        if not grouped:
            x = x.squeeze(1)
            return x.squeeze(0) if single else x
        return x if time_last else x.movedim(1, -1)

    returns, advantages = from_bgn(returns), from_bgn(advantages)
    if weights is not None:
        advantages = combine_grouped_advantages(
            advantages,
            weights=weights,
            normalize=normalize_grouped,
            group_dim=group_dim,
            mask=None if valid is None else valid.squeeze(1),
            reduce=group_reduce,
        )
    return GAE(returns, advantages) if return_advantages else returns


def _gae_bgn(
    r: th.Tensor,
    v: th.Tensor,
    nv: th.Tensor,
    m: th.Tensor,
    dm: th.Tensor,
    gamma: float | th.Tensor,
    lam: float | th.Tensor,
    valid: th.Tensor | None,
    sequential: bool,
) -> tuple[th.Tensor, th.Tensor]:
    """:func:`calc_gae`'s arithmetic on canonical ``(b g n)`` inputs: ``(returns, advantages)``."""
    b, g, n = r.shape
    # Without autograd, delta and coef are written straight into time-major memory, the scan's layout, and the
    # scan solves delta in place: on CPU every fresh large tensor costs page faults, as much as the arithmetic.
    if _needs_grad(r, v, nv, m, dm, gamma, lam):
        time_major = delta_out = coef_out = None
    else:
        time_major = th.empty(2, n, b, g, dtype=r.dtype, device=r.device)
        delta_out, coef_out = (x.permute(1, 2, 0) for x in time_major)
    if m.ndim:  # (a 0-dim m is calc_gae's all-ones default: nothing to zero)
        # zero the next values of masked-out steps before the product, so a NaN there never leaks
        nv = zero_masked(nv, m)
    # r + gamma * nv * m - v, in this float order (SB3's)
    delta = th.addcmul(r, gamma * nv, m) if isinstance(gamma, th.Tensor) else th.addcmul(r, nv, m, value=gamma)
    delta = th.sub(delta, v, out=delta_out)  # one op writes the time-major layout: the transposition is fused in
    coef = th.mul(dm.expand_as(r), gamma * lam, out=coef_out)
    if valid is not None:
        delta = zero_masked(delta, valid, out=delta_out)
    if time_major is None:
        advantages = reverse_linear_scan(delta, coef, sequential)
    else:
        advantages = _scan_time_major(time_major[0], time_major[1], sequential, inplace=True).permute(1, 2, 0)
    returns = advantages + v
    if valid is not None:
        returns = zero_masked(returns, valid, out=returns)
    return returns, advantages


def _needs_grad(*inputs: th.Tensor | float | None) -> bool:
    return th.is_grad_enabled() and any(isinstance(x, th.Tensor) and x.requires_grad for x in inputs)


def _next_values(next_values: th.Tensor | None, next_value: float | th.Tensor | None, v: th.Tensor, r: th.Tensor) -> th.Tensor:
    """The next value of every step, ``(b g n)``, in the documented order of precedence."""
    b, g, n = r.shape
    if next_values is not None:
        if next_values.shape[0] != b or next_values.shape[1] not in (1, g) or next_values.shape[2] != n:
            raise ValueError(f"next_values has shape {tuple(next_values.squeeze(1).shape)}, expected the shape of rewards")
        return next_values
    if v.shape[2] == n + 1 and next_value is None:
        return v[..., 1:]
    bootstrap = _bootstrap(next_value, v, b, g)
    return th.cat([v[..., 1:n].expand(b, bootstrap.shape[1], n - 1), bootstrap], dim=-1)


def _per_sequence(gamma: float | th.Tensor, b: int) -> float | th.Tensor:
    """A float discount as is; a ``(b)`` tensor shaped to broadcast against ``(b g n)``."""
    if isinstance(gamma, th.Tensor) and gamma.ndim > 0:
        if gamma.numel() != b:
            raise ValueError(f"gamma/lam tensors must have one entry per sequence ({b}), got shape {tuple(gamma.shape)}")
        return gamma.reshape(b, 1, 1)
    return gamma


def _bootstrap(next_value: float | th.Tensor | None, v: th.Tensor, b: int, g: int) -> th.Tensor:
    """``next_value`` (None, scalar, ``(b)`` or ``(b g)``) as a ``(b, g, 1)`` tensor."""
    if next_value is None:
        return th.zeros(b, v.shape[1], 1, dtype=v.dtype, device=v.device)
    nv = th.as_tensor(next_value, dtype=v.dtype, device=v.device)
    if nv.ndim == 0:
        return nv.expand(b, v.shape[1], 1)
    if nv.shape == (b,):
        return nv.reshape(b, 1, 1)
    if nv.shape == (b, g):
        return nv.reshape(b, g, 1)
    if nv.shape == (1,):
        return nv.reshape(1, 1, 1).expand(b, v.shape[1], 1)
    raise ValueError(f"next_value must be a scalar, (b)=({b},) or (b g)=({b}, {g}), got shape {tuple(nv.shape)}")


def _check_mask(mask: th.Tensor, name: str, r: th.Tensor) -> th.Tensor:
    b, g, n = r.shape
    if mask.shape[0] != b or mask.shape[1] not in (1, g) or mask.shape[2] != n:
        raise ValueError(f"{name} must be (b n) = ({b}, {n}) (or grouped like rewards), got {tuple(mask.squeeze(1).shape)}")
    return mask.to(r.dtype)


def calc_returns(
    rewards: th.Tensor,
    masks: th.Tensor | None = None,
    gamma: float | th.Tensor = 0.99,
    next_value: float | th.Tensor | None = None,
    lens: th.Tensor | None = None,
) -> th.Tensor:
    """
    Discounted returns ``R_t = r_t + gamma * mask_t * R_{t+1}``.

    :param rewards: ``(b n)`` or ``(n)``
    :param masks: ``(b n)``, 1 where the next state may be bootstrapped
    :param gamma: discount, a float or ``(b)``
    :param next_value: bootstrap after the last (valid) step, times that step's mask: scalar or ``(b)``
    :param lens: ``(b)`` valid lengths; padded steps get 0
    :return: the returns, shaped like ``rewards``
    """
    # GAE with V = 0 and lam = 1 is the discounted return, bootstrap and padding included
    returns = calc_gae(rewards, th.zeros_like(rewards), masks=masks, gamma=gamma, lam=1.0, next_value=next_value, lens=lens)
    assert isinstance(returns, th.Tensor)  # (return_advantages=False)
    return returns


def dones_to_masks(
    terminated: th.Tensor | None = None,
    truncated: th.Tensor | None = None,
    dones: th.Tensor | None = None,
) -> th.Tensor | tuple[th.Tensor, th.Tensor]:
    """
    Masks for :func:`calc_gae` from gymnasium's episode flags.

    :param terminated: episode ended in a terminal state (no bootstrap)
    :param truncated: episode was cut (time limit): bootstrap, but stop the recursion
    :param dones: ``terminated | truncated`` (old gym style); with ``truncated`` the terminations are
        ``dones & ~truncated``
    :return: ``1 - terminated`` alone, or with ``truncated`` the pair
        ``(1 - terminated, 1 - (terminated | truncated))`` for ``masks=`` and ``done_masks=``
    """
    if terminated is None and dones is None:
        raise ValueError("dones_to_masks needs terminated or dones (and optionally truncated)")
    if terminated is not None and dones is not None:
        raise ValueError("give terminated or dones, not both")
    flags = terminated if terminated is not None else dones
    assert flags is not None  # (one of them is given)
    dtype = flags.dtype if flags.is_floating_point() else th.get_default_dtype()
    ended = flags.bool()
    if truncated is None:
        return (~ended).to(dtype)
    cut = truncated.bool()
    if terminated is None:
        ended = ended & ~cut
    return (~ended).to(dtype), (~(ended | cut)).to(dtype)


def combine_grouped_advantages(
    advantages: th.Tensor,
    weights: th.Tensor | Sequence[float] | None = None,
    normalize: bool = True,
    group_dim: int = -2,
    mask: th.Tensor | None = None,
    reduce: Reduce = "mean",
    eps: float = 1e-5,
    scale_floor: float = 0.0,
) -> th.Tensor:
    """
    Combine per-group advantages into one (Mysore et al. 2022; Vijayan et al. 2025).

    Each group is first z-scored on its own (over all non-group dims, masked), so no reward term's scale
    drowns the others, then the groups are weighted and reduced. Masked-out entries never contribute, normalized or
    not: with a mask of the full grouped shape a group may exist on some samples only (one group per task or
    style): its statistics cover its own samples, and each sample combines the groups present there.

    :param advantages: grouped advantages, e.g. ``(b g n)`` (``group_dim=-2``) or ``(b n g)`` (``group_dim=-1``)
    :param weights: ``(g)`` group weights, default all 1; they scale each group before any reduction (also before
        ``'max'``/``'min'``). With ``'mean'`` they must not sum to 0 (``ValueError``)
    :param normalize: z-score each group on its own before weighting: its masked mean and population variance over all
        non-group dims, ``(A_g - mean_g) / sqrt(var_g + eps)``
    :param group_dim: the group dimension
    :param mask: mask of the non-group dims (e.g. ``(b n)``), or of the full grouped shape
    :param reduce: ``'mean'`` (``sum_g w_g A_g / sum_g w_g``, without weights the plain mean over the groups; the sums
        over the groups present at each sample when a grouped mask is given), ``'sum'`` (``sum_g w_g A_g``), ``'max'``,
        ``'min'`` (over the groups present), or a callable receiving the weighted ``(g ...)`` tensor (masked-out
        entries 0) and returning the combined one. A sample where no group is present gets 0
    :param eps: added to each group's variance
    :param scale_floor: with ``normalize``, no group's scale ``sqrt(var + eps)`` is taken below ``scale_floor`` times
        the largest group's (see :func:`group_statistics`); 0 (default): the plain z-score
    :return: the combined advantages, the group dim removed
    """
    if not callable(reduce) and reduce not in REDUCES:
        raise ValueError(f"reduce must be one of {REDUCES} or a callable, got {reduce!r}")
    adv, mask = _groups_first(advantages, group_dim, mask)
    g = adv.shape[0]
    if normalize:
        mean, scale = _group_statistics(adv, mask, eps, scale_floor)
        adv = (adv - mean) / scale
    present = None if mask is None else mask != 0
    if present is not None:
        adv = zero_masked(adv, present)
    w = None
    if weights is not None:
        w = th.as_tensor(weights, dtype=adv.dtype, device=adv.device)
        if w.shape != (g,):
            raise ValueError(f"weights must have one entry per group ({g}), got shape {tuple(w.shape)}")
        # (zero up to rounding: [0.1, 0.2, -0.3] would divide by ~1e-17)
        if reduce == "mean" and w.sum().abs() <= th.finfo(w.dtype).eps * w.abs().sum():
            shown = ", ".join(f"{x:g}" for x in w.tolist())
            raise ValueError(
                f"weights sum to 0 ([{shown}]): reduce='mean' divides by their sum; use reduce='sum' for signed weights "
                "that cancel"
            )
        w = w.reshape(g, *([1] * (adv.ndim - 1)))
        adv = adv * w
    if callable(reduce):
        return reduce(adv)
    if reduce == "sum":
        return adv.sum(0)
    if reduce == "mean":
        if present is None:
            return adv.mean(0) if w is None else adv.sum(0) / w.sum()
        # the total weight of the groups present at each sample (all of them, or none, for a mask of the non-group
        # dims, whose present has a group dim of 1: expanded to g groups before the sum)
        total = (present.to(adv.dtype) if w is None else w * present).expand_as(adv).sum(0)
        return th.where(total != 0, adv.sum(0) / th.where(total != 0, total, 1), 0)
    if present is None:
        return adv.amax(0) if reduce == "max" else adv.amin(0)
    # a group absent from a sample cannot be its max (min): it is left out, and a sample with none present gets 0
    fill = -th.inf if reduce == "max" else th.inf
    extreme = adv.masked_fill(~present, fill)
    extreme = extreme.amax(0) if reduce == "max" else extreme.amin(0)
    return th.where(present.any(0), extreme, 0)


def group_statistics(
    advantages: th.Tensor,
    group_dim: int = -2,
    mask: th.Tensor | None = None,
    eps: float = 1e-5,
    scale_floor: float = 0.0,
) -> tuple[th.Tensor, th.Tensor]:
    """
    The statistics :func:`combine_grouped_advantages` normalizes each group with: its (masked) mean over all
    non-group dims and its scale ``s_g = sqrt(var_g + eps)`` (population variance, masked), raised to at least
    ``scale_floor * max_h s_h``. The floor bounds how far a group is amplified against the largest one: at most
    ``1 / scale_floor`` times, however small its spread (e.g. the estimation noise of a group without signal).

    :param advantages: grouped advantages, e.g. ``(b g n)`` (``group_dim=-2``) or ``(b n g)`` (``group_dim=-1``)
    :param group_dim: the group dimension
    :param mask: mask of the non-group dims (e.g. ``(b n)``), or of the full grouped shape (each group's statistics
        over its own samples)
    :param eps: added to each group's variance
    :param scale_floor: in ``[0, 1]``: 0 leaves every scale as it is, 1 divides every group by the largest scale
    :return: ``(mean, scale)``, each ``(g,)``
    """
    adv, mask = _groups_first(advantages, group_dim, mask)
    mean, scale = _group_statistics(adv, mask, eps, scale_floor)
    return mean.reshape(-1), scale.reshape(-1)


def _groups_first(advantages: th.Tensor, group_dim: int, mask: th.Tensor | None) -> tuple[th.Tensor, th.Tensor | None]:
    """The advantages ``(g ...)`` with the group dim first, and the mask broadcastable to them (or None)."""
    if advantages.ndim < 2:
        raise ValueError(f"advantages must have a group dim, got shape {tuple(advantages.shape)}")
    adv = advantages.movedim(group_dim, 0)  # (g ...)
    if mask is not None:
        if mask.shape == advantages.shape:
            mask = mask.movedim(group_dim, 0)
        elif mask.shape == adv.shape[1:]:
            mask = mask.unsqueeze(0)
        else:
            raise ValueError(
                f"mask has shape {tuple(mask.shape)}, expected {tuple(adv.shape[1:])} or {tuple(advantages.shape)}"
            )
    return adv, mask


def _group_statistics(adv: th.Tensor, mask: th.Tensor | None, eps: float, scale_floor: float) -> tuple[th.Tensor, th.Tensor]:
    """:func:`group_statistics` of ``(g ...)`` advantages, each ``(g, 1, ...)``."""
    if not 0.0 <= scale_floor <= 1.0:
        raise ValueError(f"scale_floor must be in [0, 1] (a fraction of the largest group's scale), got {scale_floor!r}")
    dims = tuple(range(1, adv.ndim))
    mean = masked_mean(adv, mask, dim=dims, keepdim=True, eps=eps)
    var = masked_mean((adv - mean).square(), mask, dim=dims, keepdim=True, eps=eps)
    return mean, floor_scales((var + eps).sqrt(), scale_floor)


def floor_scales(scales: th.Tensor, scale_floor: float) -> th.Tensor:
    """
    :param scales: each group's scale (any shape, one entry per group)
    :param scale_floor: in ``[0, 1]``, the fraction of the largest scale below which none is taken
    :return: ``max(s_g, scale_floor * max_h s_h)``
    """
    return scales.clamp_min(scale_floor * scales.max()) if scale_floor > 0 else scales
