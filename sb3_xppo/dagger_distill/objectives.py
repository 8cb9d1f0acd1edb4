"""
Distillation objectives, one policy head at a time.

An objective is ``loss_fn(student, teacher, action) -> Tensor``: ``student`` and ``teacher`` are the
:class:`torch.distributions.Distribution` of one head, ``action`` the teacher's label for that head (its best
action, a sample, or what ``label_transform`` made of it). It returns an elementwise loss with the batch first;
:class:`~sb3_xppo.dagger_distill.DaggerDistiller` sums the remaining dims and the heads, and averages over the
states whose label is usable. Options such as ``reverse`` are bound with :func:`functools.partial`.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import torch as th
from torch.distributions import Distribution, kl_divergence
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

    :param student: the student's distribution of one head
    :param teacher: the teacher's distribution (unused: the label carries it)
    :param action: the teacher's label (its mode/mean, or a sample with ``teacher_sample=True``)
    :return: elementwise loss, the batch first
    """
    return -student.log_prob(action)


def kl_loss(student: Distribution, teacher: Distribution, action: th.Tensor | None = None, reverse: bool = False) -> th.Tensor:
    """
    KL divergence between the teacher's and the student's action distributions: ``KL(teacher || student)``
    (mode covering, policy distillation, Rusu et al. 2016, https://arxiv.org/abs/1511.06295), or
    ``KL(student || teacher)`` with ``reverse=True`` (mode seeking; bind it with ``functools.partial``).

    The closed forms are torch's (``torch.distributions.kl_divergence``): two Beta policies (scaled to the same
    bounds, which leaves the KL unchanged) have one; a Gaussian and a Beta policy have none (from the Gaussian, whose
    support is unbounded, to the bounded Beta it is infinite): a ``NotImplementedError`` says so, and ``nll_loss`` or
    ``mse_loss`` distil such a pair.

    :param student: the student's distribution of one head
    :param teacher: the teacher's distribution of the same family
    :param action: unused (soft targets)
    :param reverse: KL(student || teacher) instead
    :return: elementwise loss, the batch first
    :raises NotImplementedError: where torch has no KL for the pair
    """
    p, q = (student, teacher) if reverse else (teacher, student)
    try:
        return kl_divergence(p, q)
    except NotImplementedError as error:
        raise NotImplementedError(
            f"kl_loss: no closed-form KL from {_describe(p)} to {_describe(q)} (e.g. between a Gaussian and a Beta "
            "policy; from the Gaussian to the bounded Beta it is infinite): distil this pair with nll_loss or mse_loss"
        ) from error


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
