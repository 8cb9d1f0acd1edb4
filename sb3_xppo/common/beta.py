"""
Bounded continuous actions with a Beta distribution (Chou et al. 2017, Improving Stochastic Policy Gradients in
Continuous Control with Deep Reinforcement Learning using the Beta Distribution, ICML,
https://proceedings.mlr.press/v70/chou17a.html): each action dim is ``low + (high - low) * x`` with
``x ~ Beta(alpha, beta)`` on ``[0, 1]``, so every action is inside the ``Box``'s bounds and none is clipped.

- The policy's action head outputs two numbers per action dim; ``alpha = 1 + softplus(.)`` and
  ``beta = 1 + softplus(.)``. Both are above 1, as in the paper, where the density is unimodal and vanishes at the
  bounds; the mode ``(alpha - 1) / (alpha + beta - 2)`` is then always defined and is the deterministic action.
- Log-probabilities and the entropy are those of the action, the affine map's log-Jacobian included:
  ``log p(a) = log p_Beta(x) - sum log(high - low)`` and ``H(a) = H_Beta(x) + sum log(high - low)``.
- An action on a bound (or beyond it, e.g. a Gaussian teacher's label) is scored at ``x`` clamped into
  ``[BETA_EPS, 1 - BETA_EPS]``, so its log-probability is finite.

Used through ``policy_kwargs=dict(action_dist="beta")`` (:class:`~sb3_xppo.common.policies.XPPOPolicyMixin`).
"""

from __future__ import annotations

import math
from typing import TypeVar

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.distributions import Distribution, sum_independent_dims
from torch import nn
from torch.distributions import AffineTransform, Beta, TransformedDistribution
from torch.nn import functional as F

#: ``x`` is clamped into ``[BETA_EPS, 1 - BETA_EPS]`` before its log-density is taken: ``1 - 1e-6`` is distinct
#: from 1 in float32 (whose spacing below 1 is 6e-8), and ``(alpha - 1) * log(1e-6)`` stays finite
BETA_EPS = 1e-6

SelfBetaDistribution = TypeVar("SelfBetaDistribution", bound="BetaDistribution")


def check_bounded_box(action_space: spaces.Space) -> spaces.Box:
    """
    The action space, if the Beta distribution can act in it: a ``Box`` whose bounds are finite, ``low < high``.

    :param action_space: the policy's action space
    :return: the same space
    :raises ValueError: naming ``action_dist='beta'``, for any other space
    """
    if not isinstance(action_space, spaces.Box):
        raise ValueError(f"action_dist='beta' needs a Box action space with finite bounds, got {action_space}")
    low, high = np.asarray(action_space.low, dtype=np.float64), np.asarray(action_space.high, dtype=np.float64)
    if not (np.isfinite(low).all() and np.isfinite(high).all() and (low < high).all()):
        raise ValueError(
            f"action_dist='beta' needs a Box action space with finite bounds (low < high in every dim), got {action_space}: "
            "use the Gaussian (action_dist='gaussian') or bound the space"
        )
    return action_space


def beta_concentrations(action_params: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
    """
    ``alpha, beta = 1 + softplus(.)`` of the action head's output (both > 1: a unimodal density, Chou et al. 2017).

    :param action_params: ``(batch, 2 * action_dim)``: the ``alpha`` half first, then the ``beta`` half
    :return: ``alpha`` and ``beta``, each ``(batch, action_dim)``
    """
    alpha, beta = (1.0 + F.softplus(action_params)).chunk(2, dim=-1)
    return alpha, beta


class BoundsTransform(AffineTransform):
    """
    ``x -> low + (high - low) * x`` from ``[0, 1]`` to ``[low, high]``, elementwise. The forward map clamps its
    result into ``[low, high]`` (the product may round one ulp past a bound); the inverse clamps ``x`` into
    ``[BETA_EPS, 1 - BETA_EPS]``, so an action on a bound, or beyond it, has a finite log-density. The log-Jacobian is
    ``log(high - low)`` (``AffineTransform``'s). Equal to another such transform with the same bounds, so that torch's
    KL between two transformed distributions applies (KL is unchanged by the same bijection on both sides).

    :param low: the lower bounds, ``(action_dim,)``
    :param high: the upper bounds, ``(action_dim,)``
    """

    def __init__(self, low: th.Tensor, high: th.Tensor) -> None:
        super().__init__(loc=low, scale=high - low)
        self.low, self.high = low, high

    def _call(self, x: th.Tensor) -> th.Tensor:
        return th.minimum(th.maximum(self.loc + self.scale * x, self.low), self.high)

    def _inverse(self, y: th.Tensor) -> th.Tensor:
        return ((y - self.loc) / self.scale).clamp(BETA_EPS, 1.0 - BETA_EPS)


class ScaledBeta(TransformedDistribution):
    """
    The torch distribution of a Beta policy's actions: ``low + (high - low) * x``, ``x ~ Beta(alpha, beta)``,
    elementwise (batch shape ``(batch, action_dim)``). Build it with :meth:`from_concentrations`. Besides
    ``TransformedDistribution``'s ``log_prob`` and ``rsample`` (see :class:`BoundsTransform`), it has the exact
    ``entropy``, ``mean`` and ``mode``. Its support is left as the real line, so that labels outside the bounds are
    scored (clamped) rather than refused.
    """

    base_dist: Beta

    @classmethod
    def from_concentrations(
        cls, alpha: th.Tensor, beta: th.Tensor, low: th.Tensor, high: th.Tensor, validate_args: bool | None = None
    ) -> ScaledBeta:
        """
        :param alpha: ``Beta``'s ``concentration1``, ``(batch, action_dim)``
        :param beta: ``Beta``'s ``concentration0``, ``(batch, action_dim)``
        :param low: the lower bounds, ``(action_dim,)``
        :param high: the upper bounds, ``(action_dim,)``
        :param validate_args: torch's argument checks (None: torch's default; False: off)
        """
        base = Beta(alpha, beta, validate_args=validate_args)
        return cls(base, [BoundsTransform(low, high)], validate_args=validate_args)

    @property
    def bounds_transform(self) -> BoundsTransform:
        transform = self.transforms[0]
        assert isinstance(transform, BoundsTransform)
        return transform

    @property
    def mean(self) -> th.Tensor:
        return self.bounds_transform(self.base_dist.mean)

    @property
    def mode(self) -> th.Tensor:
        """``low + (high - low) * (alpha - 1) / (alpha + beta - 2)``: torch's ``Beta.mode``, defined for alpha, beta > 1."""
        return self.bounds_transform(self.base_dist.mode)

    def entropy(self) -> th.Tensor:
        scale = self.bounds_transform.scale
        assert isinstance(scale, th.Tensor)  # (the bounds, as tensors)
        return self.base_dist.entropy() + scale.log()


class BetaDistribution(Distribution):
    """
    SB3 ``Distribution`` of a Beta policy on a bounded ``Box`` (see the module's docstring): the action head is one
    linear layer of ``2 * action_dim`` outputs (``alpha``'s, then ``beta``'s), its distribution a :class:`ScaledBeta`.
    The deterministic action is the mode, always inside the bounds; so is every sample, which SB3's (and XPPO's)
    clipping to the bounds therefore leaves unchanged.

    :param action_dim: the number of action dims (the ``Box``'s flattened size)
    :param low: the ``Box``'s lower bounds (flattened to ``action_dim``)
    :param high: the ``Box``'s upper bounds
    """

    distribution: ScaledBeta

    def __init__(self, action_dim: int, low: np.ndarray, high: np.ndarray) -> None:
        super().__init__()
        self.action_dim = action_dim
        self.low = np.asarray(low, dtype=np.float64).reshape(action_dim)
        self.high = np.asarray(high, dtype=np.float64).reshape(action_dim)
        self._bounds: tuple[th.device, th.dtype, th.Tensor, th.Tensor] | None = None

    @classmethod
    def for_space(cls, action_space: spaces.Space) -> BetaDistribution:
        """
        The Beta distribution for a bounded ``Box``.

        :param action_space: the policy's action space
        :raises ValueError: for any space but a ``Box`` with finite bounds (:func:`check_bounded_box`)
        """
        box = check_bounded_box(action_space)
        return cls(int(np.prod(box.shape)), box.low, box.high)

    def bounds(self, like: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        """
        The bounds as tensors of ``like``'s device and dtype, each rounded inwards when the dtype cannot hold it, so
        that a mapped action never lies outside the ``Box``. Built once per device and dtype, outside inference mode
        (a rollout's inference tensors could not be used by the update's autograd).

        :param like: e.g. the action head's output
        :return: ``low`` and ``high``, ``(action_dim,)``
        """
        if self._bounds is None or self._bounds[:2] != (like.device, like.dtype):
            with th.inference_mode(False), th.no_grad():
                low = _rounded_inwards(self.low, like, up=True)
                high = _rounded_inwards(self.high, like, up=False)
            self._bounds = (like.device, like.dtype, low, high)
        return self._bounds[2], self._bounds[3]

    def proba_distribution_net(self, latent_dim: int) -> nn.Module:
        """
        The action head: ``alpha``'s and ``beta``'s pre-activations, ``2 * action_dim`` outputs.

        :param latent_dim: the actor's latent size
        """
        return nn.Linear(latent_dim, 2 * self.action_dim)

    def proba_distribution(
        self: SelfBetaDistribution, action_params: th.Tensor, validate_args: bool | None = None
    ) -> SelfBetaDistribution:
        """
        :param action_params: the action head's output, ``(batch, 2 * action_dim)``
        :param validate_args: torch's argument checks (None: torch's default; False: off, XPPO's trusted path)
        :return: self, holding the new :class:`ScaledBeta`
        """
        alpha, beta = beta_concentrations(action_params)
        low, high = self.bounds(action_params)
        self.distribution = ScaledBeta.from_concentrations(alpha, beta, low, high, validate_args=validate_args)
        return self

    def log_prob(self, actions: th.Tensor) -> th.Tensor:
        """Summed over the action dims; actions on or beyond a bound are scored at the clamped ``x`` (finite)."""
        return sum_independent_dims(self.distribution.log_prob(actions))

    def entropy(self) -> th.Tensor:
        return sum_independent_dims(self.distribution.entropy())

    def sample(self) -> th.Tensor:
        # Reparametrized (as SB3's Gaussian samples), inside the bounds
        return self.distribution.rsample()

    def mode(self) -> th.Tensor:
        """``low + (high - low) * (alpha - 1) / (alpha + beta - 2)``: ``predict(deterministic=True)``'s action."""
        return self.distribution.mode

    def actions_from_params(self, action_params: th.Tensor, deterministic: bool = False) -> th.Tensor:
        self.proba_distribution(action_params)
        return self.get_actions(deterministic=deterministic)

    def log_prob_from_params(self, action_params: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        actions = self.actions_from_params(action_params)
        return actions, self.log_prob(actions)


def _rounded_inwards(bound: np.ndarray, like: th.Tensor, up: bool) -> th.Tensor:
    """``bound`` in ``like``'s dtype and device, moved one step towards the interior where the cast rounded outwards."""
    exact = th.as_tensor(bound, dtype=th.float64)  # on the CPU: not every device holds float64
    cast = exact.to(like.dtype)
    outside = cast.double() < exact if up else cast.double() > exact
    towards = th.full_like(cast, math.inf if up else -math.inf)
    return th.where(outside, th.nextafter(cast, towards), cast).to(like.device)
