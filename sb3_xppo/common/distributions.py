"""
XPPO's policies build their action distributions as SB3's and sb3-contrib's do, with one difference when asked:
``validate_args=False`` on the torch distribution, so that its argument checks (about a fifth of a small policy's
forward pass) are skipped. XPPO asks for it only around its own calls whose inputs it has checked finite (see
:meth:`~sb3_xppo.common.policies.XPPOPolicyMixin.trusted_inputs`); the numbers are the same, only the checks go.
The setting belongs to the distribution built, never to torch's process-wide default.

Each builder below is the formula of the SB3 class's ``proba_distribution`` (one line each); a distribution class
not listed here (e.g. a user's own) is built by SB3's code, with its checks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch as th
from sb3_contrib.common.maskable.distributions import (
    MaskableBernoulliDistribution,
    MaskableCategorical,
    MaskableCategoricalDistribution,
    MaskableMultiCategoricalDistribution,
)
from stable_baselines3.common.distributions import (
    BernoulliDistribution,
    CategoricalDistribution,
    DiagGaussianDistribution,
    Distribution,
    MultiCategoricalDistribution,
    StateDependentNoiseDistribution,
)
from torch.distributions import Bernoulli, Categorical, Normal

from sb3_xppo.common.beta import BetaDistribution


def _diag_gaussian(dist: Any, mean_actions: th.Tensor, log_std: th.Tensor, latent_pi: th.Tensor) -> None:
    dist.distribution = Normal(mean_actions, th.ones_like(mean_actions) * log_std.exp(), validate_args=False)


def _state_dependent_noise(dist: Any, mean_actions: th.Tensor, log_std: th.Tensor, latent_pi: th.Tensor) -> None:
    # gSDE (Raffin et al. 2021): the noise's variance depends on the (possibly detached) latent features
    dist._latent_sde = latent_pi if dist.learn_features else latent_pi.detach()
    variance = th.mm(dist._latent_sde**2, dist.get_std(log_std) ** 2)
    dist.distribution = Normal(mean_actions, th.sqrt(variance + dist.epsilon), validate_args=False)


def _categorical(dist: Any, logits: th.Tensor, log_std: th.Tensor, latent_pi: th.Tensor) -> None:
    dist.distribution = Categorical(logits=logits, validate_args=False)


def _multi_categorical(dist: Any, logits: th.Tensor, log_std: th.Tensor, latent_pi: th.Tensor) -> None:
    splits = th.split(logits, list(dist.action_dims), dim=1)
    dist.distribution = [Categorical(logits=split, validate_args=False) for split in splits]


def _bernoulli(dist: Any, logits: th.Tensor, log_std: th.Tensor, latent_pi: th.Tensor) -> None:
    dist.distribution = Bernoulli(logits=logits, validate_args=False)


def _beta(dist: Any, action_params: th.Tensor, log_std: th.Tensor, latent_pi: th.Tensor) -> None:
    dist.proba_distribution(action_params, validate_args=False)  # the package's own: it takes validate_args


def _maskable_categorical(dist: Any, logits: th.Tensor, log_std: th.Tensor, latent_pi: th.Tensor) -> None:
    # apply_masking() re-initializes the distribution with the validate_args it was built with
    dist.distribution = MaskableCategorical(logits=logits.view(-1, dist.action_dim), validate_args=False)


def _maskable_multi_categorical(dist: Any, logits: th.Tensor, log_std: th.Tensor, latent_pi: th.Tensor) -> None:
    splits = th.split(logits.view(-1, sum(dist.action_dims)), list(dist.action_dims), dim=1)
    dist.distributions = [MaskableCategorical(logits=split, validate_args=False) for split in splits]


#: ``builder(action_dist, action_net_output, log_std, latent_pi)``, by the exact class of the policy's ``action_dist``
UNCHECKED_BUILDERS: dict[type[Distribution], Callable[[Any, th.Tensor, Any, th.Tensor], None]] = {
    DiagGaussianDistribution: _diag_gaussian,
    StateDependentNoiseDistribution: _state_dependent_noise,
    CategoricalDistribution: _categorical,
    MultiCategoricalDistribution: _multi_categorical,
    BernoulliDistribution: _bernoulli,
    MaskableCategoricalDistribution: _maskable_categorical,
    MaskableMultiCategoricalDistribution: _maskable_multi_categorical,
    MaskableBernoulliDistribution: _maskable_multi_categorical,
    BetaDistribution: _beta,
}


def unchecked_distribution(policy: Any, latent_pi: th.Tensor, action_dist: Distribution | None = None) -> Distribution | None:
    """
    The policy's action distribution for ``latent_pi``, as SB3's ``_get_action_dist_from_latent`` builds it, with the
    torch distribution's argument validation off.

    :param policy: an actor-critic policy (SB3's or sb3-contrib's, with ``action_net`` and ``action_dist``)
    :param latent_pi: the actor's latent features
    :param action_dist: the SB3 distribution object to build (None: ``policy.action_dist``), e.g. the maskable twin
        of an LSTM policy's distribution, over the same ``action_net`` outputs
    :return: that distribution object holding the new distribution, or None when its class has no builder here (then
        nothing was computed: build it the SB3 way)
    """
    action_dist = policy.action_dist if action_dist is None else action_dist
    builder = UNCHECKED_BUILDERS.get(type(action_dist))
    if builder is None:
        return None
    builder(action_dist, policy.action_net(latent_pi), getattr(policy, "log_std", None), latent_pi)
    return action_dist
