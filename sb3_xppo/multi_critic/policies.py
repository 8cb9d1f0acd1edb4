"""
Actor-critic policies with one value output per reward group (multi-critic PPO).

- Mysore et al. 2022, Multi-Critic Actor Learning: Teaching RL Policies to Act with Style
- Vijayan et al. 2025, Multi-critic Learning for Whole-body End-effector Twist Tracking
"""

import math
from itertools import pairwise
from typing import Any

import torch as th
from sb3_contrib.common.maskable.policies import (
    MaskableActorCriticCnnPolicy,
    MaskableActorCriticPolicy,
    MaskableMultiInputActorCriticPolicy,
)
from stable_baselines3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy, MultiInputActorCriticPolicy
from torch import nn

from sb3_xppo.common.policies import (
    MaskableXPPOActorCriticCnnPolicy,
    MaskableXPPOActorCriticPolicy,
    MaskableXPPOMultiInputActorCriticPolicy,
    XPPOActorCriticCnnPolicy,
    XPPOActorCriticPolicy,
    XPPOMultiInputActorCriticPolicy,
    XPPOPolicyMixin,
)


class SeparateCritics(nn.Module):
    """
    One value network per reward group, each with its own hidden layers (Mysore et al. 2022). The ``G`` networks'
    weights are stacked, ``(G, in, out)`` per layer, so each layer of all critics is one batched matmul.

    :param in_dim: size of the critic features
    :param net_arch: hidden layer sizes of each critic (may be empty: one linear value per group)
    :param n_groups: number of critics ``G``
    :param activation_fn: activation between the hidden layers
    :param ortho_init: orthogonal initialization (gain sqrt(2) for the hidden layers, ``out_gain`` for the output, as
        SB3's ``ActorCriticPolicy``); else PyTorch's default for ``nn.Linear``
    :param out_dim: outputs per critic (1: a value; the bins of a classification critic)
    :param out_gain: the output layer's orthogonal gain (SB3's value head: 1)
    """

    def __init__(
        self,
        in_dim: int,
        net_arch: list[int],
        n_groups: int,
        activation_fn: type[nn.Module] = nn.Tanh,
        ortho_init: bool = True,
        out_dim: int = 1,
        out_gain: float = 1.0,
    ) -> None:
        super().__init__()
        dims = [in_dim, *net_arch, out_dim]
        self.out_gain = out_gain
        self.weights = nn.ParameterList(nn.Parameter(th.empty(n_groups, d_in, d_out)) for d_in, d_out in pairwise(dims))
        self.biases = nn.ParameterList(nn.Parameter(th.empty(n_groups, 1, d_out)) for d_out in dims[1:])
        self.activation = activation_fn()
        self.reset_parameters(ortho_init)

    @th.no_grad()
    def reset_parameters(self, ortho_init: bool = True) -> None:
        """
        :param ortho_init: orthogonal weights and zero biases, as SB3's ``init_weights``; else ``nn.Linear``'s default
        """
        last = len(self.weights) - 1
        for i, (weight, bias) in enumerate(zip(self.weights, self.biases, strict=True)):
            if ortho_init:
                for group_weight in weight:
                    nn.init.orthogonal_(group_weight, gain=self.out_gain if i == last else math.sqrt(2))
                bias.zero_()
            else:
                bound = 1 / math.sqrt(weight.shape[1])
                nn.init.uniform_(weight, -bound, bound)
                nn.init.uniform_(bias, -bound, bound)

    def forward(self, latent_vf: th.Tensor) -> th.Tensor:
        """
        :param latent_vf: ``(batch, in_dim)`` critic features
        :return: ``(batch, G)`` values, one per critic (``(batch, G, out_dim)`` with ``out_dim > 1``)
        """
        x = latent_vf.expand(len(self.weights[0]), *latent_vf.shape)  # (G, batch, in)
        last = len(self.weights) - 1
        for i, (weight, bias) in enumerate(zip(self.weights, self.biases, strict=True)):
            x = th.baddbmm(bias, x, weight)
            if i < last:
                x = self.activation(x)
        if x.shape[-1] == 1:
            return x.squeeze(-1).transpose(0, 1)
        return x.transpose(0, 1)


class MultiCriticPolicyMixin(XPPOPolicyMixin):
    """
    Turns an SB3 actor-critic policy into a multi-critic one: the value output has one entry per reward group
    (``forward``, ``evaluate_actions`` and ``predict_values`` return values of shape ``(batch, G)``).
    With ``separate_critics=False`` the groups share the critic's hidden layers and read their values from one
    linear head of ``G`` outputs; with ``separate_critics=True`` each group has its own value MLP
    (``net_arch``'s ``vf`` layers, see :class:`SeparateCritics`), so a group's value loss trains its own
    critic only (Mysore et al. 2022). XPPO's policy options (:class:`~sb3_xppo.common.policies.XPPOPolicyMixin`)
    apply; a classification critic (``hl_gauss``) has its bins per group.

    :param n_groups: number of reward groups ``G`` (set by :class:`sb3_xppo.XPPO` from ``reward_groups``)
    :param separate_critics: one value MLP per group instead of a shared critic trunk with ``G`` outputs
    """

    def __init__(self, *args: Any, n_groups: int = 1, separate_critics: bool = False, **kwargs: Any) -> None:
        if not isinstance(n_groups, int) or isinstance(n_groups, bool) or n_groups < 1:
            raise ValueError(f"n_groups must be an int >= 1 (the number of reward groups), got {n_groups!r}")
        # Set before the base class's __init__, which builds the networks
        self.n_groups = n_groups
        self.separate_critics = bool(separate_critics)
        if self.separate_critics and kwargs.get("simba") in (True, "both", "critic"):
            raise ValueError(
                "simba='critic'/'both' needs the shared critic: with separate_critics=True each group's critic is its "
                "own MLP (SeparateCritics); use simba='actor'"
            )
        super().__init__(*args, **kwargs)

    def _critic_arch(self) -> tuple[list[int], list[int]]:
        """The policy's and the critic's hidden layer sizes, as :class:`~stable_baselines3.common.torch_layers.MlpExtractor`
        reads ``net_arch``."""
        if isinstance(self.net_arch, dict):
            return list(self.net_arch.get("pi", [])), list(self.net_arch.get("vf", []))
        return list(self.net_arch), list(self.net_arch)

    def _build_mlp_extractor(self) -> None:
        if not self.separate_critics:
            super()._build_mlp_extractor()
            return
        # The critics' hidden layers live in the separate value networks: the extractor's value branch is empty
        pi_arch, _ = self._critic_arch()
        self.mlp_extractor = self._make_mlp_extractor(dict(pi=pi_arch, vf=[]))

    def _value_outputs(self) -> int:
        return self.n_groups

    def _value_layers(self, out_dim: int, gain: float) -> nn.Module:
        if not self.separate_critics:
            return super()._value_layers(out_dim, gain)
        return SeparateCritics(
            self.mlp_extractor.latent_dim_vf,
            self._critic_arch()[1],
            self.n_groups,
            self.activation_fn,
            self.ortho_init,
            out_dim=out_dim,
            out_gain=gain,
        )

    def _make_value_net(self) -> nn.Module | None:
        if self.hl_gauss is not None or (self.n_groups == 1 and not self.separate_critics):
            # A classification critic (bins per group), or SB3's single value head: plain XPPO's networks
            return super()._make_value_net()
        # SB3 builds one value output; it is replaced by G of them
        return self._value_layers(1, 1.0)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(n_groups=self.n_groups, separate_critics=self.separate_critics)
        return data


class MultiCriticPolicy(MultiCriticPolicyMixin, ActorCriticPolicy):
    """
    Multi-critic actor-critic policy for vector observations: :class:`~stable_baselines3.common.policies.ActorCriticPolicy`
    with one value output per reward group (see :class:`MultiCriticPolicyMixin`). Takes every keyword of
    ``ActorCriticPolicy`` plus ``n_groups`` and ``separate_critics``.
    """


class MultiCriticCnnPolicy(MultiCriticPolicyMixin, ActorCriticCnnPolicy):
    """:class:`MultiCriticPolicy` for image observations (NatureCNN features, as ``ActorCriticCnnPolicy``)."""


class MultiCriticMultiInputPolicy(MultiCriticPolicyMixin, MultiInputActorCriticPolicy):
    """:class:`MultiCriticPolicy` for Dict observations (combined features, as ``MultiInputActorCriticPolicy``)."""


# (XPPO's policy mixin returns its parent's distribution, here a MaskableDistribution: mypy cannot tie it to the parent)
class MaskableMultiCriticPolicy(MultiCriticPolicyMixin, MaskableActorCriticPolicy):  # type: ignore[misc]
    """:class:`MultiCriticPolicy` with invalid-action masking (sb3-contrib's ``MaskableActorCriticPolicy``)."""


# (XPPO's policy mixin returns its parent's distribution, here a MaskableDistribution: mypy cannot tie it to the parent)
class MaskableMultiCriticCnnPolicy(MultiCriticPolicyMixin, MaskableActorCriticCnnPolicy):  # type: ignore[misc]
    """:class:`MaskableMultiCriticPolicy` for image observations."""


# (XPPO's policy mixin returns its parent's distribution, here a MaskableDistribution: mypy cannot tie it to the parent)
class MaskableMultiCriticMultiInputPolicy(MultiCriticPolicyMixin, MaskableMultiInputActorCriticPolicy):  # type: ignore[misc]
    """:class:`MaskableMultiCriticPolicy` for Dict observations."""


#: XPPO's policy classes (and SB3's, sb3-contrib's) -> their multi-critic counterparts (used when ``reward_groups`` is set)
MULTI_CRITIC_POLICIES: dict[type, type] = {
    XPPOActorCriticPolicy: MultiCriticPolicy,
    XPPOActorCriticCnnPolicy: MultiCriticCnnPolicy,
    XPPOMultiInputActorCriticPolicy: MultiCriticMultiInputPolicy,
    MaskableXPPOActorCriticPolicy: MaskableMultiCriticPolicy,
    MaskableXPPOActorCriticCnnPolicy: MaskableMultiCriticCnnPolicy,
    MaskableXPPOMultiInputActorCriticPolicy: MaskableMultiCriticMultiInputPolicy,
    ActorCriticPolicy: MultiCriticPolicy,
    ActorCriticCnnPolicy: MultiCriticCnnPolicy,
    MultiInputActorCriticPolicy: MultiCriticMultiInputPolicy,
    MaskableActorCriticPolicy: MaskableMultiCriticPolicy,
    MaskableActorCriticCnnPolicy: MaskableMultiCriticCnnPolicy,
    MaskableMultiInputActorCriticPolicy: MaskableMultiCriticMultiInputPolicy,
}
