"""Plain-Python-loop references of the functional core, written from the formulas of the docstrings, one element at a time."""

from __future__ import annotations

import itertools
import math


def gae_loop(rewards, values, next_vals, masks, done_masks, gamma, lam, length=None):
    """One sequence: lists of floats; ``next_vals[t]`` is V'_t. Returns (returns, advantages)."""
    n = len(rewards)
    length = n if length is None else length
    adv = [0.0] * n
    ret = [0.0] * n
    running = 0.0
    for t in reversed(range(length)):
        nv = next_vals[t] if masks[t] != 0 else 0.0
        delta = rewards[t] + gamma * masks[t] * nv - values[t]
        cont = done_masks[t] if t < length - 1 else 0.0
        running = delta + gamma * lam * cont * running
        adv[t] = running
        ret[t] = running + values[t]
    return ret, adv


def returns_loop(rewards, masks, gamma, next_value, length=None):
    n = len(rewards)
    length = n if length is None else length
    out = [0.0] * n
    running = next_value
    for t in reversed(range(length)):
        running = rewards[t] + gamma * masks[t] * running
        out[t] = running
    return out


def zscore_loop(xs, ms, eps=1e-5):
    total = sum(ms)
    mean = sum(x * m for x, m in zip(xs, ms)) / max(total, eps)
    var = sum((x - mean) ** 2 * m for x, m in zip(xs, ms)) / max(total, eps)
    return [(x - mean) / math.sqrt(var + eps) if m != 0 else 0.0 for x, m in zip(xs, ms)]


def sigmoid(x):
    return 1 / (1 + math.exp(-x))


def gated_log_ratio(lp, olp, a, delightful, temp, clamp):
    """One sample's advantage after the delightful gate, and its log-ratio clamped to ``clamp`` (None: not clamped)."""
    if delightful:
        a = a * sigmoid(-lp * a / temp)
    log_ratio = lp - olp
    if clamp is not None:
        log_ratio = min(max(log_ratio, clamp[0]), clamp[1])
    return a, log_ratio


def actor_loss_loop(
    logp,
    old_logp,
    adv,
    kind="ppo",
    low=0.2,
    high=0.2,
    normalize=False,
    delightful=False,
    temp=1.0,
    dual_clip=False,
    threshold=3.0,
    log_ratio_clamp=None,
    asymmetric=False,
):
    """Elementwise actor loss over flat lists."""
    if normalize:
        adv = zscore_loop(adv, [1.0] * len(adv))
    out = []
    for lp, olp, a in zip(logp, old_logp, adv):
        a, log_ratio = gated_log_ratio(lp, olp, a, delightful, temp, log_ratio_clamp)
        r = math.exp(log_ratio)
        clipped = min(r * a, min(max(r, 1 - low), 1 + high) * a)
        if kind == "ppo" or (asymmetric and a > 0):
            surr = clipped
        else:
            eps = high if r >= 1 else low
            surr = r * a - abs(a) * (r - 1) ** 2 / (2 * eps)
        if dual_clip and a < 0:
            surr = max(surr, threshold * a)
        out.append(-surr)
    return out


def value_loss_loop(v, old, ret, clip, kind="clipped"):
    """Elementwise squared-error value losses over flat lists."""
    out = []
    for vi, oi, ri in zip(v, old, ret):
        if kind == "clipped":
            vc = oi + min(max(vi - oi, -clip), clip)
            out.append(max((vi - ri) ** 2, (vc - ri) ** 2))
        else:
            rc = min(max(ri, oi - clip), oi + clip)
            if ri < vi < oi - clip or oi + clip < vi < ri:
                out.append(0.0)
            else:
                out.append(min((vi - ri) ** 2, (vi - rc) ** 2))
    return out


def combine_grouped_loop(adv, group_dim, mask=None, weights=None, normalize=True, reduce="mean", eps=1e-5):
    """
    ``combine_grouped_advantages`` of a nested list ``adv``, one element at a time.

    ``mask`` is a nested list of the non-group dims or of the full shape (None: all present); ``reduce`` is
    ``'mean'``, ``'sum'``, ``'max'``, ``'min'`` or a function of one sample's list of ``g`` weighted values (absent
    groups 0). Returns the nested list of the non-group dims.
    """
    shape = []
    x = adv
    while isinstance(x, list):
        shape.append(len(x))
        x = x[0]
    axis = group_dim % len(shape)
    g = shape[axis]
    rest = shape[:axis] + shape[axis + 1 :]
    weights = [1.0] * g if weights is None else list(weights)

    def at(nested, index):
        for i in index:
            nested = nested[i]
        return nested

    full = mask is not None and _depth(mask) == len(shape)

    def present(k, index):
        if mask is None:
            return True
        return at(mask, index[:axis] + (k,) + index[axis:] if full else index) != 0

    samples = list(itertools.product(*(range(d) for d in rest)))
    values = [[at(adv, s[:axis] + (k,) + s[axis:]) for s in samples] for k in range(g)]
    ms = [[1.0 if present(k, s) else 0.0 for s in samples] for k in range(g)]
    if normalize:
        values = [zscore_loop([v if m else 0.0 for v, m in zip(values[k], ms[k])], ms[k], eps) for k in range(g)]
    out = []
    for i in range(len(samples)):
        here = [k for k in range(g) if ms[k][i]]
        weighted = [weights[k] * values[k][i] if ms[k][i] else 0.0 for k in range(g)]
        if callable(reduce):
            out.append(reduce(weighted))
        elif not here:
            out.append(0.0)
        elif reduce == "mean":
            out.append(sum(weighted[k] for k in here) / sum(weights[k] for k in here))
        elif reduce == "sum":
            out.append(sum(weighted[k] for k in here))
        else:
            out.append((max if reduce == "max" else min)(weighted[k] for k in here))
    return _nest(out, rest)


def _depth(nested):
    depth = 0
    while isinstance(nested, list):
        depth += 1
        nested = nested[0]
    return depth


def _nest(flat, shape):
    """The flat row-major list ``flat`` as a nested list of ``shape``."""
    if not shape:
        return flat[0]
    step = len(flat) // shape[0]
    return [_nest(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]


def moments_loop(xs, ms, eps=1e-5):
    """Masked mean and population variance of a flat list (float mask weights)."""
    total = max(sum(ms), eps)
    mean = sum(x * m for x, m in zip(xs, ms)) / total
    return mean, sum((x - mean) ** 2 * m for x, m in zip(xs, ms)) / total


def hpo_loss_loop(
    logp, old_logp, adv, low=0.2, high=0.2, c_low=2.0, c_high=2.0, normalize=False, delightful=False, temp=1.0, clamp=None
):
    """Elementwise HPO loss over flat lists: |A| * Huber_eps(log r - eps * clip(A)), eps by the sign of A."""
    if normalize:
        adv = zscore_loop(adv, [1.0] * len(adv))
    out = []
    for lp, olp, a in zip(logp, old_logp, adv):
        a, log_ratio = gated_log_ratio(lp, olp, a, delightful, temp, clamp)
        eps = high if a >= 0 else low
        e = log_ratio - eps * min(max(a, -c_low), c_high)
        huber = e * e / (2 * eps) if abs(e) < eps else abs(e) - eps / 2
        out.append(abs(a) * huber)
    return out


def pcgrad_loop(grads, weights=None, reduce="mean", orders=None):
    """PCGrad over lists of floats: g_i projected off each conflicting original g_j (j in ``orders[i]``), then reduced."""
    n = len(grads)
    orders = orders or [[j for j in range(n) if j != i] for i in range(n)]
    weights = weights or [1.0] * n
    out = [0.0] * len(grads[0])
    for i in range(n):
        gi = list(grads[i])
        for j in orders[i]:
            gj = grads[j]
            dot = sum(a * b for a, b in zip(gi, gj))
            norm2 = sum(b * b for b in gj)
            if dot < 0 and norm2 > 0:
                gi = [a - dot / norm2 * b for a, b in zip(gi, gj)]
        for k in range(len(out)):
            out[k] += weights[i] * gi[k]
    return [x / n for x in out] if reduce == "mean" else out


def adaptive_lr_loop(lr, kls, target, factor, lr_min, lr_max):
    """The KL-adaptive learning rate after each KL of ``kls`` (rsl_rl's rule): the list of learning rates."""
    out = []
    for kl in kls:
        if kl > 2 * target:
            lr = lr / factor
        elif kl < target / 2:
            lr = lr * factor
        lr = min(max(lr, lr_min), lr_max)
        out.append(lr)
    return out


def approx_kl_loop(log_ratios, valid):
    """Per minibatch (lists of floats and 0/1 flags) the mean of ``(exp(x) - 1) - x`` over valid samples; their mean."""
    means = []
    for xs, ms in zip(log_ratios, valid):
        terms = [(math.exp(x) - 1) - x for x, m in zip(xs, ms) if m]
        means.append(sum(terms) / max(len(terms), 1))
    return sum(means) / len(means)


def ratio_statistics_loop(ratios, valid, clip_low, clip_high):
    """
    Per minibatch (lists of floats and 0/1 flags), over its valid samples: ``mean |r - 1|`` and the share with
    ``1 - r > clip_low`` or ``r - 1 > clip_high``; returns the means of both over the minibatches.
    """
    deviations, fractions = [], []
    for rs, ms in zip(ratios, valid):
        kept = [r for r, m in zip(rs, ms) if m]
        n = max(len(kept), 1)
        deviations.append(sum(abs(r - 1) for r in kept) / n)
        fractions.append(sum(1 for r in kept if 1 - r > clip_low or r - 1 > clip_high) / n)
    return sum(deviations) / len(deviations), sum(fractions) / len(fractions)
