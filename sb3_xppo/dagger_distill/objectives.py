"""
Distillation objectives, one policy head at a time.

An objective is ``loss_fn(student, teacher, action) -> Tensor``: ``student`` and ``teacher`` are the
:class:`torch.distributions.Distribution` of one head, ``action`` the teacher's label for that head (its best
action, a sample, or what ``label_transform`` made of it). It returns an elementwise loss with the batch first;
:class:`~sb3_xppo.dagger_distill.DaggerDistiller` sums the remaining dims and the heads, and averages over the
states whose label is usable. Options such as ``reverse`` are bound with :func:`functools.partial`.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple, Protocol

import torch as th
from torch.distributions import Bernoulli, Categorical, Distribution, Independent, kl_divergence
from torch.nn import functional as F

from sb3_xppo.dagger_distill.pytree import distribution_mean


class Objective(Protocol):
    """``loss_fn(student, teacher, action) -> elementwise loss``, the batch first."""

    def __call__(self, student: Distribution, teacher: Distribution, action: th.Tensor) -> th.Tensor: ...


class LossBreakdown(NamedTuple):
    """
    The distillation loss and its parts, each a scalar averaged over the usable states:
    ``loss = policy - entropy_weight * entropy + rep_align_weight * alignment``.
    """

    loss: th.Tensor
    policy: th.Tensor
    entropy: th.Tensor
    alignment: th.Tensor


def nll_loss(student: Distribution, teacher: Distribution, action: th.Tensor) -> th.Tensor:
    """
    Negative log-likelihood of the teacher's action under the student, ``-log pi_student(a_teacher | s)``:
    behaviour cloning of the expert's labels, the DAgger objective (Ross et al. 2011, https://arxiv.org/abs/1011.0686).
    A Categorical head's is the cross-entropy of its logits with the label (``F.cross_entropy``, the same value as
    ``-log_prob``); a Categorical label outside ``[0, n_classes)`` is a ``ValueError``.

    :param student: the student's distribution of one head
    :param teacher: the teacher's distribution (unused: the label carries it)
    :param action: the teacher's label (its mode/mean, or a sample with ``teacher_sample=True``)
    :return: elementwise loss, the batch first
    """
    if isinstance(student, Categorical) and tuple(action.shape) == tuple(student.batch_shape):
        return categorical_cross_entropy(student.logits, action)
    return -student.log_prob(action)


def categorical_cross_entropy(logits: th.Tensor, action: th.Tensor) -> th.Tensor:
    """
    ``-log softmax(logits)[action]`` per state, by ``F.cross_entropy`` (one fused, stable log-softmax).

    :param logits: ``(..., n_classes)`` logits (normalized or not)
    :param action: ``(...)`` class indices (any dtype holding integers)
    :return: ``(...)`` loss
    """
    n = logits.shape[-1]
    index = action.long()
    if bool(((index < 0) | (index >= n)).any()):
        raise ValueError(f"a Categorical label must be a class index in [0, {n}), got {action[(index < 0) | (index >= n)]}")
    return F.cross_entropy(logits.reshape(-1, n), index.reshape(-1), reduction="none").reshape(index.shape)


def kl_loss(student: Distribution, teacher: Distribution, action: th.Tensor | None = None, reverse: bool = False) -> th.Tensor:
    """
    KL divergence between the teacher's and the student's action distributions: ``KL(teacher || student)``
    (mode covering, policy distillation, Rusu et al. 2016, https://arxiv.org/abs/1511.06295), or
    ``KL(student || teacher)`` with ``reverse=True`` (mode seeking; bind it with ``functools.partial``).

    Categorical and Bernoulli heads (and ``Independent`` Bernoulli, SB3's MultiBinary) are compared from their logits
    (``sb3_xppo.dagger_distill.objectives.logits_kl``): finite for every finite logit. The other closed forms are
    torch's (``torch.distributions.kl_divergence``): two Beta policies (scaled to the same bounds, which leaves the KL
    unchanged) have one; a Gaussian and a Beta policy have none (from the Gaussian, whose support is unbounded, to the
    bounded Beta it is infinite): a ``NotImplementedError`` says so, and ``nll_loss`` or ``mse_loss`` distil such a
    pair.

    :param student: the student's distribution of one head
    :param teacher: the teacher's distribution of the same family
    :param action: unused (soft targets)
    :param reverse: KL(student || teacher) instead
    :return: elementwise loss, the batch first
    :raises NotImplementedError: where torch has no KL for the pair
    """
    p, q = (student, teacher) if reverse else (teacher, student)
    kl = logits_kl(p, q)
    if kl is not None:
        return kl
    try:
        return kl_divergence(p, q)
    except NotImplementedError as error:
        raise NotImplementedError(
            f"kl_loss: no closed-form KL from {_describe(p)} to {_describe(q)} (e.g. between a Gaussian and a Beta "
            "policy; from the Gaussian to the bounded Beta it is infinite): distil this pair with nll_loss or mse_loss"
        ) from error


def logits_kl(p: Distribution, q: Distribution) -> th.Tensor | None:
    """
    ``KL(p || q)`` of two Categorical or two Bernoulli distributions (or two ``Independent`` of them, summed over the
    reinterpreted dims) from their logits, by log-softmax / softplus: ``sum_k p_k (log p_k - log q_k)`` with
    ``log p = log_softmax(logits)``, and for a Bernoulli ``p (softplus(-l_q) - softplus(-l_p)) + (1 - p)
    (softplus(l_q) - softplus(l_p))``. Finite and >= 0 for any finite logits, where torch's closed forms (from the
    probabilities) give ``inf`` once a probability underflows to 0; a class of probability 0 under ``p`` (a logit
    of ``-inf``) adds 0, one under ``q`` alone adds ``inf``.

    :param p: the first distribution
    :param q: the second
    :return: the elementwise KL (``batch_shape``), or None for another pair of families
    """
    if isinstance(p, Independent) and isinstance(q, Independent):
        n = p.reinterpreted_batch_ndims
        if n != q.reinterpreted_batch_ndims:
            return None
        kl = logits_kl(p.base_dist, q.base_dist)
        return None if kl is None else kl.sum(dim=tuple(range(-n, 0))) if n > 0 else kl
    if isinstance(p, Categorical) and isinstance(q, Categorical):
        log_p, log_q = p.logits.log_softmax(-1), q.logits.log_softmax(-1)
        terms = log_p.exp() * (log_p - log_q)
        return th.where(log_p == -math.inf, th.zeros_like(terms), terms).sum(-1).clamp_min(0.0)
    if isinstance(p, Bernoulli) and isinstance(q, Bernoulli):
        lp, lq = p.logits, q.logits
        # log p = -softplus(-l), log (1 - p) = -softplus(l); 1 - p as sigmoid(-l), exact where p rounds to 1
        prob, rest = th.sigmoid(lp), th.sigmoid(-lp)
        ones = prob * (F.softplus(-lq) - F.softplus(-lp))
        zeros = rest * (F.softplus(lq) - F.softplus(lp))
        kl = th.where(prob == 0, th.zeros_like(ones), ones) + th.where(rest == 0, th.zeros_like(zeros), zeros)
        return kl.clamp_min(0.0)  # >= 0: rounding of near-equal distributions may fall just below
    return None


def reads_label(loss_fn: Any) -> bool:
    """
    Whether an objective reads the teacher's label: ``kl_loss`` and ``mse_loss`` (also bound with
    ``functools.partial``) compare distributions and do not, ``nll_loss`` and any other objective are assumed to.
    :class:`~sb3_xppo.dagger_distill.DaggerDistiller` stores no labels for the former: it re-evaluates the teacher on
    its stored inputs at fit time.

    :param loss_fn: an objective
    :return: False for ``kl_loss`` and ``mse_loss``
    """
    while isinstance(loss_fn, functools.partial):
        loss_fn = loss_fn.func
    return loss_fn not in (kl_loss, mse_loss)


def _describe(dist: Distribution) -> str:
    """A distribution's class, with its base's for ``Independent`` and transformed distributions."""
    base = getattr(dist, "base_dist", None)
    return type(dist).__name__ if base is None else f"{type(dist).__name__}({_describe(base)})"


def mse_loss(student: Distribution, teacher: Distribution, action: th.Tensor | None = None) -> th.Tensor:
    """
    Squared error between the means of the student's and the teacher's actions (class probabilities for
    categorical heads, see :func:`~sb3_xppo.dagger_distill.pytree.distribution_mean`).

    :param student: the student's distribution of one head
    :param teacher: the teacher's distribution of one head
    :param action: unused (the teacher's mean is the target)
    :return: elementwise loss, the batch first
    """
    return (distribution_mean(student) - distribution_mean(teacher)).square()


def cosine_alignment_loss(student_features: th.Tensor, teacher_features: th.Tensor) -> th.Tensor:
    """
    Representation alignment, ``1 - cos(student_features, teacher_features)`` per state
    (REPA, Yu et al. 2024, https://arxiv.org/abs/2410.06940).

    :param student_features: ``(b d)`` student features, already projected to the teacher's width
    :param teacher_features: ``(b d)`` teacher features
    :return: ``(b)`` loss, in [0, 2]
    """
    return 1.0 - F.cosine_similarity(student_features, teacher_features, dim=-1)
