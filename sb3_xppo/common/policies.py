"""
What XPPO's policies add to SB3's actor-critic policies, each off by default (then a policy is SB3's, bit for bit),
set through ``policy_kwargs``:

- ``rpo_alpha``: Robust Policy Optimization (Rahman & Xue 2022, https://arxiv.org/abs/2212.07536): in the update
  pass, the Gaussian's mean is shifted by uniform noise ``U(-a, a)`` per sample and action dim, which keeps the
  policy's entropy from collapsing; rollouts are unchanged.
- ``simba``: SimBa networks (Lee et al. 2024, SimBa: Simplicity Bias for Scaling Up Parameters in Deep Reinforcement
  Learning, https://arxiv.org/abs/2410.09754) for the actor and/or the critic: a linear embedding, pre-LayerNorm
  residual MLP blocks and a last LayerNorm; ``simba_activation='relu2'`` uses ReLU^2 in the blocks (Zhang et al.
  2024, ReLU^2 Wins: Discovering Efficient Activation Functions for Sparse LLMs).
- ``hl_gauss``: a classification critic (Farebrother et al. 2024, see :mod:`sb3_xppo.common.value_heads`), set by
  the algorithm for ``value_loss='hl_gauss'``.
- ``action_dist='beta'``: actions from a Beta distribution scaled to the bounds of a bounded ``Box`` (Chou et al.
  2017, see :mod:`sb3_xppo.common.beta`) instead of SB3's Gaussian; never clipped, the mode as the deterministic
  action.
- ``normalize_values``: the value head wrapped in a :class:`~sb3_xppo.common.value_norm.ValueNormalizer` (PopArt),
  set by the algorithm for ``normalize_values=True``; a constructor parameter so that a policy saved on its own
  (``policy.save``) loads back with its statistics.
"""

from __future__ import annotations

import io
import pathlib
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.distributions import MaskableDistribution, MaybeMasks, make_masked_proba_distribution
from sb3_contrib.common.maskable.policies import (
    MaskableActorCriticCnnPolicy,
    MaskableActorCriticPolicy,
    MaskableMultiInputActorCriticPolicy,
)
from sb3_contrib.common.recurrent.policies import (
    RecurrentActorCriticCnnPolicy,
    RecurrentActorCriticPolicy,
    RecurrentMultiInputActorCriticPolicy,
)
from stable_baselines3.common.distributions import DiagGaussianDistribution, Distribution, StateDependentNoiseDistribution
from stable_baselines3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy, MultiInputActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor, MlpExtractor
from stable_baselines3.common.type_aliases import Schedule
from stable_baselines3.common.utils import get_device
from torch import nn
from torch.distributions import Normal

from sb3_xppo.common.beta import BetaDistribution
from sb3_xppo.common.distributions import unchecked_distribution
from sb3_xppo.common.sequences import SequenceBatchingMixin
from sb3_xppo.common.value_heads import HLGaussConfig, HLGaussValueHead
from sb3_xppo.common.value_norm import ValueNormalizer
from sb3_xppo.loading.archive import safe_torch_load

#: the distributions whose ``.distribution`` is a ``Normal`` around the action net's output (gSDE's included)
GAUSSIAN_DISTRIBUTIONS = (DiagGaussianDistribution, StateDependentNoiseDistribution)
SIMBA_PARTS = {"actor": ("pi",), "critic": ("vf",), "both": ("pi", "vf")}
#: XPPOPolicyMixin's options when off
POLICY_OPTION_DEFAULTS: dict[str, Any] = dict(
    rpo_alpha=0.0, simba=None, simba_activation="relu", hl_gauss=None, normalize_values=False, action_dist="gaussian"
)
#: ``action_dist``'s values: SB3's distribution for the action space (a diagonal Gaussian for ``Box`` actions), or a
#: Beta distribution scaled to a bounded ``Box`` (:class:`~sb3_xppo.common.beta.BetaDistribution`)
ACTION_DISTS = ("gaussian", "beta")
#: output gain of a categorical value head's logits (small: the critic starts near-uniform over its support)
LOGITS_GAIN = 0.01


class ReLU2(nn.Module):
    """``relu(x) ** 2`` (Zhang et al. 2024)."""

    def forward(self, x: th.Tensor) -> th.Tensor:
        return th.relu(x).square()


SIMBA_ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "relu2": ReLU2}


class ResidualBlock(nn.Module):
    """
    SimBa's pre-LayerNorm residual feed-forward block: ``x + W2 act(W1 LayerNorm(x))``, inner width ``4 * width``.

    :param width: the block's input and output size
    :param activation_fn: the inner activation
    """

    def __init__(self, width: int, activation_fn: type[nn.Module] = nn.ReLU) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.inner = nn.Sequential(nn.Linear(width, 4 * width), activation_fn(), nn.Linear(4 * width, width))

    def forward(self, x: th.Tensor) -> th.Tensor:
        return x + self.inner(self.norm(x))


def simba_network(in_dim: int, arch: list[int], activation_fn: type[nn.Module] = nn.ReLU) -> nn.Sequential:
    """
    A SimBa network (Lee et al. 2024): ``Linear(in_dim, h)``, ``len(arch)`` residual blocks of width ``h``, LayerNorm.

    :param in_dim: input size
    :param arch: ``net_arch``'s layer sizes for this network: all equal to the width ``h``, one block each
    :param activation_fn: the blocks' inner activation
    """
    if not arch or len(set(arch)) != 1:
        raise ValueError(f"a SimBa network takes net_arch layers of one width, one residual block each, got {arch!r}")
    width = arch[0]
    return nn.Sequential(nn.Linear(in_dim, width), *(ResidualBlock(width, activation_fn) for _ in arch), nn.LayerNorm(width))


class SimbaMlpExtractor(MlpExtractor):
    """
    :class:`~stable_baselines3.common.torch_layers.MlpExtractor` whose policy and/or value network is a SimBa network
    (:func:`simba_network`); the other stays SB3's MLP. Reads ``net_arch`` as SB3 does.

    :param feature_dim: input size
    :param net_arch: a list (both networks) or ``dict(pi=[...], vf=[...])``
    :param activation_fn: the MLP's activation (the plain network's)
    :param simba_nets: which networks are SimBa's: a subset of ``("pi", "vf")``
    :param simba_activation_fn: the residual blocks' inner activation
    :param device: PyTorch device
    """

    def __init__(
        self,
        feature_dim: int,
        net_arch: list[int] | dict[str, list[int]],
        activation_fn: type[nn.Module],
        simba_nets: tuple[str, ...],
        simba_activation_fn: type[nn.Module] = nn.ReLU,
        device: th.device | str = "auto",
    ) -> None:
        super().__init__(feature_dim, net_arch, activation_fn, device)
        arch = net_arch if isinstance(net_arch, dict) else dict(pi=net_arch, vf=net_arch)
        device = get_device(device)
        if "pi" in simba_nets:
            self.policy_net = simba_network(feature_dim, list(arch.get("pi", [])), simba_activation_fn).to(device)
        if "vf" in simba_nets:
            self.value_net = simba_network(feature_dim, list(arch.get("vf", [])), simba_activation_fn).to(device)


class XPPOPolicyMixin:
    """
    XPPO's options on an SB3 actor-critic policy (see the module's docstring): put it before the SB3 class,
    ``class XPPOActorCriticPolicy(XPPOPolicyMixin, ActorCriticPolicy)``. With the defaults the policy is the SB3
    class's, bit for bit.

    :param rpo_alpha: RPO's noise half-width ``a >= 0`` on the Gaussian's mean in the update pass (0: off); needs a
        Gaussian policy (Box actions; with gSDE the noise shifts the mean the state-dependent noise is added to)
    :param simba: None, or which networks are SimBa's: ``'actor'``, ``'critic'`` or ``'both'`` (True); each takes
        its ``net_arch`` layers (one width) as one residual block each
    :param simba_activation: the residual blocks' inner activation, ``'relu'`` or ``'relu2'``
    :param hl_gauss: None (a linear value head), or the options of the classification critic (a dict of
        :class:`~sb3_xppo.common.value_heads.HLGaussConfig`'s fields, ``{}`` for the defaults); XPPO sets it for
        ``value_loss='hl_gauss'``
    :param normalize_values: wrap the value head in a :class:`~sb3_xppo.common.value_norm.ValueNormalizer`
        (:meth:`attach_value_normalizer`); XPPO does it for ``normalize_values=True``
    :param action_dist: ``'gaussian'``: SB3's distribution for the action space; ``'beta'``: a Beta distribution
        scaled to the bounds of a ``Box`` with finite bounds (Chou et al. 2017,
        :class:`~sb3_xppo.common.beta.BetaDistribution`), whose deterministic action is its mode; not with gSDE
        (``use_sde``) nor ``rpo_alpha``, which are Gaussian noise
    """

    net_arch: list[int] | dict[str, list[int]]
    activation_fn: type[nn.Module]
    features_dim: int
    ortho_init: bool
    action_space: spaces.Space
    share_features_extractor: bool
    #: (SB3 types it ``BaseFeaturesExtractor | None`` in ``BaseModel`` and ``BaseFeaturesExtractor`` in ``BasePolicy``)
    features_extractor: Any
    pi_features_extractor: BaseFeaturesExtractor
    vf_features_extractor: BaseFeaturesExtractor
    action_net: nn.Module
    device: th.device
    training: bool
    #: SB3's distribution for the action space, or sb3-contrib's masked one (the parents type it each their own way)
    action_dist: Any
    mlp_extractor: MlpExtractor
    #: SB3's ``nn.Linear`` head (its parents' type), or XPPO's: a SimBa network, a ``ValueNormalizer``
    value_net: Any
    optimizer_class: type[th.optim.Optimizer]
    optimizer_kwargs: dict[str, Any]
    optimizer: th.optim.Optimizer
    #: build action distributions with torch's argument checks (SB3's way); off only inside :meth:`trusted_inputs`
    validate_distributions: bool = True

    def __init__(
        self,
        *args: Any,
        rpo_alpha: float = 0.0,
        simba: str | bool | None = None,
        simba_activation: str = "relu",
        hl_gauss: dict[str, Any] | None = None,
        normalize_values: bool = False,
        action_dist: str = "gaussian",
        **kwargs: Any,
    ) -> None:
        if isinstance(rpo_alpha, bool) or not isinstance(rpo_alpha, (int, float)) or not rpo_alpha >= 0:
            raise ValueError(f"rpo_alpha must be a float >= 0 (0: off), got {rpo_alpha!r}")
        if simba is True:
            simba = "both"
        if simba not in (None, False, *SIMBA_PARTS):
            raise ValueError(f"simba must be None, True or one of {sorted(SIMBA_PARTS)}, got {simba!r}")
        if simba_activation not in SIMBA_ACTIVATIONS:
            raise ValueError(f"simba_activation must be one of {sorted(SIMBA_ACTIVATIONS)}, got {simba_activation!r}")
        if action_dist not in ACTION_DISTS:
            raise ValueError(f"action_dist must be one of {list(ACTION_DISTS)}, got {action_dist!r}")
        # Set before the base class's __init__, which builds the networks
        self.rpo_alpha = float(rpo_alpha)
        self.simba = simba or None
        self.simba_activation = simba_activation
        self.hl_gauss = None if hl_gauss is None else HLGaussConfig.from_kwargs(hl_gauss)
        #: the ``action_dist`` option (``self.action_dist`` is the SB3 distribution object, as in SB3)
        self.action_dist_name = action_dist
        self.validate_distributions = True
        super().__init__(*args, **kwargs)
        if self.rpo_alpha > 0 and not isinstance(self.action_dist, GAUSSIAN_DISTRIBUTIONS):
            raise ValueError(
                "rpo_alpha perturbs a Gaussian policy's mean: it needs a Box action space, got "
                f"{type(self.action_dist).__name__}"
            )
        if normalize_values:
            self.attach_value_normalizer()

    # --- networks ----------------------------------------------------------------------------------------------------

    def _mlp_input_dim(self) -> int:
        """The MLP extractor's input size: the features (or, for LSTM policies, the LSTM's output)."""
        return getattr(self, "lstm_output_dim", self.features_dim)

    def _make_mlp_extractor(self, net_arch: list[int] | dict[str, list[int]]) -> MlpExtractor:
        """SB3's MLP extractor for ``net_arch``, with SimBa networks where ``simba`` says."""
        nets = SIMBA_PARTS[self.simba] if self.simba else ()
        if not nets:
            return MlpExtractor(self._mlp_input_dim(), net_arch, self.activation_fn, device=self.device)
        return SimbaMlpExtractor(
            self._mlp_input_dim(),
            net_arch,
            self.activation_fn,
            nets,
            SIMBA_ACTIVATIONS[self.simba_activation],
            device=self.device,
        )

    def _build_mlp_extractor(self) -> None:
        if self.simba is None:
            super()._build_mlp_extractor()  # type: ignore[misc]
        else:
            self.mlp_extractor = self._make_mlp_extractor(self.net_arch)

    def _value_outputs(self) -> int:
        """The number of critic outputs ``G``."""
        return 1

    def _value_layers(self, out_dim: int, gain: float) -> nn.Module:
        """
        The value head's layers: critic features ``(batch, latent)`` to ``(batch, G * out_dim)``.

        :param out_dim: outputs per critic (1, or the bins of a categorical critic)
        :param gain: the orthogonal initialization's gain (with ``ortho_init``)
        """
        layer = nn.Linear(self.mlp_extractor.latent_dim_vf, self._value_outputs() * out_dim)
        if self.ortho_init:
            ActorCriticPolicy.init_weights(layer, gain=gain)
        return layer

    def _make_value_net(self) -> nn.Module | None:
        """The value head replacing SB3's one-output ``nn.Linear`` (None: keep it)."""
        if self.hl_gauss is None:
            return None
        return HLGaussValueHead(self._value_layers(self.hl_gauss.n_bins, LOGITS_GAIN), self._value_outputs(), self.hl_gauss)

    def _build(self, lr_schedule: Schedule) -> None:
        if self.action_dist_name == "beta":
            self.action_dist = self._beta_distribution()
            self._build_beta(lr_schedule)
        else:
            super()._build(lr_schedule)  # type: ignore[misc]
        value_net = self._make_value_net()
        if value_net is not None:
            self.value_net = value_net.to(self.device)
            # The optimizer holds the replaced head's parameters: build it again over the current ones
            self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)  # type: ignore[attr-defined, call-arg]

    def _beta_distribution(self) -> BetaDistribution:
        """The Beta distribution of ``action_dist='beta'``, or a ``ValueError`` where it cannot act."""
        distribution = BetaDistribution.for_space(self.action_space)
        if self.rpo_alpha > 0:
            raise ValueError("rpo_alpha perturbs a Gaussian policy's mean: it cannot be combined with action_dist='beta'")
        if getattr(self, "use_sde", False):  # (maskable policies have no gSDE)
            raise ValueError(
                "gSDE (use_sde=True) is state-dependent Gaussian noise: it cannot be combined with action_dist='beta'"
            )
        return distribution

    def _build_beta(self, lr_schedule: Schedule) -> None:
        """
        SB3's ``ActorCriticPolicy._build`` with the Beta action head: the same networks, orthogonal initialization
        (SB3's modules, gains and order; the head's gain 0.01) and optimizer, ``action_net`` giving both
        concentrations per action dim and no ``log_std``.
        """
        self._build_mlp_extractor()
        self.action_net = self.action_dist.proba_distribution_net(latent_dim=self.mlp_extractor.latent_dim_pi)
        self.value_net = nn.Linear(self.mlp_extractor.latent_dim_vf, 1)
        if self.ortho_init:
            gains: dict[nn.Module, float] = {
                self.features_extractor: np.sqrt(2),
                self.mlp_extractor: np.sqrt(2),
                self.action_net: 0.01,
                self.value_net: 1,
            }
            if not self.share_features_extractor:
                del gains[self.features_extractor]
                gains[self.pi_features_extractor] = np.sqrt(2)
                gains[self.vf_features_extractor] = np.sqrt(2)
            for module, gain in gains.items():
                module.apply(partial(ActorCriticPolicy.init_weights, gain=gain))
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)  # type: ignore[attr-defined, call-arg]

    def attach_value_normalizer(self) -> None:
        """
        Wrap the value head in a :class:`~sb3_xppo.common.value_norm.ValueNormalizer` (PopArt, van Hasselt et al.
        2016), one set of statistics per critic output. A classification critic's support is fixed, so its outputs
        are not preserved when the statistics move (its targets are normalized all the same). It has no parameters:
        the optimizer needs no rebuilding.
        """
        if isinstance(self.value_net, ValueNormalizer):
            return
        preserve_outputs = not isinstance(self.value_net, HLGaussValueHead)
        self.value_net = ValueNormalizer(self.value_net, self._value_outputs(), preserve_outputs).to(self.device)

    def set_training_mode(self, mode: bool) -> None:
        """
        SB3's ``set_training_mode`` (``nn.Module.train(mode)``), skipped where every module already is in ``mode``:
        ``predict()`` calls it on every step, and the walk that sets each module's flag costs a third of a small
        network's ``predict()``.

        :param mode: True for training mode, False for evaluation mode
        """
        if any(module.training != mode for module in self.modules()):  # type: ignore[attr-defined]
            super().set_training_mode(mode)  # type: ignore[misc]

    # --- action distributions ----------------------------------------------------------------------------------------

    @contextmanager
    def trusted_inputs(self, trusted: bool = True) -> Iterator[None]:
        """
        Within the block, this policy builds its action distributions without torch's argument validation
        (``validate_args=False`` on each distribution, :mod:`sb3_xppo.common.distributions`): the same numbers, without
        the checks' cost. For calls whose inputs the caller has checked finite, with finite parameters; XPPO's rollout
        and ``train()`` use it around their own calls only (``fast_paths``), never around user code. Nothing outside
        this policy changes.

        :param trusted: False leaves validation on (a no-op block)
        """
        previous = self.validate_distributions
        self.validate_distributions = previous and not trusted
        try:
            yield
        finally:
            self.validate_distributions = previous

    def _get_action_dist_from_latent(self, latent_pi: th.Tensor, *args: Any, **kwargs: Any) -> Distribution:
        distribution = None if self.validate_distributions else unchecked_distribution(self, latent_pi)
        if distribution is None and isinstance(self.action_dist, BetaDistribution):
            distribution = self.action_dist.proba_distribution(self.action_net(latent_pi))
        elif distribution is None:
            distribution = super()._get_action_dist_from_latent(latent_pi, *args, **kwargs)  # type: ignore[misc]
        if self.rpo_alpha > 0 and self.training:
            # RPO: the update pass (SB3's train() sets training mode, collection and predict() unset it): U(-a, a) on
            # the mean; the log-probabilities (squashed or not) and the entropy are read from this Normal
            normal = distribution.distribution
            assert isinstance(normal, Normal)  # (rpo_alpha is refused with any other distribution)
            noise = th.empty_like(normal.loc).uniform_(-self.rpo_alpha, self.rpo_alpha)
            validate_args = None if self.validate_distributions else False  # None: torch's default, as SB3 builds it
            distribution.distribution = Normal(normal.loc + noise, normal.scale, validate_args=validate_args)
        return distribution

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()  # type: ignore[misc]
        # Only the options that are on: a policy saved with the defaults loads into the SB3 class too
        # (``ActorCriticPolicy.load``), whose networks it has
        options = dict(
            rpo_alpha=self.rpo_alpha,
            simba=self.simba,
            simba_activation=self.simba_activation if self.simba else "relu",
            hl_gauss=None if self.hl_gauss is None else self.hl_gauss.to_kwargs(),
            normalize_values=isinstance(self.value_net, ValueNormalizer),
            action_dist=self.action_dist_name,
        )
        data.update({key: value for key, value in options.items() if value != POLICY_OPTION_DEFAULTS[key]})
        return data

    @classmethod
    def load(
        cls, path: str | pathlib.Path | io.BufferedIOBase, device: th.device | str = "auto", trust_code: bool = False
    ) -> Any:
        """
        SB3's ``BaseModel.load`` of a policy saved with ``policy.save(path)``, safe by default: its pickle is read with
        the allowlist (:func:`~sb3_xppo.loading.archive.safe_torch_load`) where SB3 reads it with
        ``torch.load(weights_only=False)``, which would run whatever the file names (SB3 offers no hook for the read,
        so its four lines are here).

        :param path: the file
        :param device: the device to load it on
        :param trust_code: read it as SB3 does, running its code: only for files you made or trust
        :return: the policy
        :raises UnsafeFileError: when the file asks for code outside the allowlist
        """
        if trust_code:
            return super().load(path, device)  # type: ignore[misc]
        device = get_device(device)
        saved = safe_torch_load(path, map_location=device)
        policy = cls(**saved["data"])
        policy.load_state_dict(saved["state_dict"])  # type: ignore[attr-defined]
        return policy.to(device)  # type: ignore[attr-defined]


class XPPOActorCriticPolicy(XPPOPolicyMixin, ActorCriticPolicy):
    """XPPO's ``MlpPolicy``: SB3's :class:`~stable_baselines3.common.policies.ActorCriticPolicy` with XPPO's options."""


class XPPOActorCriticCnnPolicy(XPPOPolicyMixin, ActorCriticCnnPolicy):
    """XPPO's ``CnnPolicy``: SB3's ``ActorCriticCnnPolicy`` with XPPO's options."""


class XPPOMultiInputActorCriticPolicy(XPPOPolicyMixin, MultiInputActorCriticPolicy):
    """XPPO's ``MultiInputPolicy``: SB3's ``MultiInputActorCriticPolicy`` with XPPO's options."""


# the mixin's _get_action_dist_from_latent returns its parent's distribution (here a MaskableDistribution), which
# mypy cannot tie to the parent
class MaskableXPPOActorCriticPolicy(XPPOPolicyMixin, MaskableActorCriticPolicy):  # type: ignore[misc]
    """MaskableXPPO's ``MlpPolicy``: sb3-contrib's ``MaskableActorCriticPolicy`` with XPPO's options."""


# the mixin's _get_action_dist_from_latent returns its parent's distribution (here a MaskableDistribution), which
# mypy cannot tie to the parent
class MaskableXPPOActorCriticCnnPolicy(XPPOPolicyMixin, MaskableActorCriticCnnPolicy):  # type: ignore[misc]
    """MaskableXPPO's ``CnnPolicy``: sb3-contrib's ``MaskableActorCriticCnnPolicy`` with XPPO's options."""


# the mixin's _get_action_dist_from_latent returns its parent's distribution (here a MaskableDistribution), which
# mypy cannot tie to the parent
class MaskableXPPOMultiInputActorCriticPolicy(XPPOPolicyMixin, MaskableMultiInputActorCriticPolicy):  # type: ignore[misc]
    """MaskableXPPO's ``MultiInputPolicy``: sb3-contrib's ``MaskableMultiInputActorCriticPolicy`` with XPPO's options."""


class RecurrentXPPOActorCriticPolicy(SequenceBatchingMixin, XPPOPolicyMixin, RecurrentActorCriticPolicy):
    """RecurrentXPPO's ``MlpLstmPolicy``: sb3-contrib's ``RecurrentActorCriticPolicy`` with XPPO's options."""


class RecurrentXPPOActorCriticCnnPolicy(SequenceBatchingMixin, XPPOPolicyMixin, RecurrentActorCriticCnnPolicy):
    """RecurrentXPPO's ``CnnLstmPolicy``: sb3-contrib's ``RecurrentActorCriticCnnPolicy`` with XPPO's options."""


class RecurrentXPPOMultiInputActorCriticPolicy(SequenceBatchingMixin, XPPOPolicyMixin, RecurrentMultiInputActorCriticPolicy):
    """RecurrentXPPO's ``MultiInputLstmPolicy``: sb3-contrib's ``RecurrentMultiInputActorCriticPolicy`` with XPPO's
    options."""


#: the action spaces an LSTM policy takes action masks for: their SB3 distribution and sb3-contrib's maskable one read
#: the same ``action_net`` outputs (MultiBinary's do not: one logit per bit against two)
MASKABLE_LSTM_ACTION_SPACES = (spaces.Discrete, spaces.MultiDiscrete)


def all_actions_valid(action_masks: MaybeMasks) -> bool:
    """Whether ``action_masks`` (None, or a bool / 0-1 array or tensor) allow every action."""
    if action_masks is None:
        return True
    if isinstance(action_masks, th.Tensor):
        return bool(action_masks.all())
    return bool(np.all(action_masks))


class ActionMaskingMixin:
    """
    Invalid-action masks for sb3-contrib's LSTM policies (Huang & Ontañón 2022, A Closer Look at Invalid Action Masking
    in Policy Gradient Algorithms, https://arxiv.org/abs/2006.14171; sb3-contrib issues #80 and #101): put it first,
    ``class MaskableRecurrentXPPOActorCriticPolicy(ActionMaskingMixin, RecurrentXPPOActorCriticPolicy)``.
    ``forward``, ``get_distribution``, ``evaluate_actions`` and ``predict`` take ``action_masks`` as
    ``MaskableActorCriticPolicy``'s do (one entry per action, ``True`` where allowed, the masks of a batch stacked).

    Where some action is masked out, the action distribution is sb3-contrib's maskable one (``MaskableCategorical``:
    a forbidden action gets the logit -1e8, a probability of 0); where the masks allow every action (or there are
    none), it is the LSTM policy's own, so that with every action valid the policy is ``RecurrentActorCriticPolicy``
    bit for bit (sb3-contrib's masking renormalizes the logits a second time, which moves the last bits). Both read
    the same ``action_net`` outputs: Discrete and MultiDiscrete action spaces (``ValueError`` for others).
    """

    action_space: spaces.Space
    action_net: nn.Module
    validate_distributions: bool

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        #: the masks the distributions of the running call are built with (set by the public methods' ``action_masks``)
        self._action_masks: MaybeMasks = None
        super().__init__(*args, **kwargs)
        if not isinstance(self.action_space, MASKABLE_LSTM_ACTION_SPACES):
            raise ValueError(
                f"{type(self).__name__} takes action masks for Discrete and MultiDiscrete action spaces, got "
                f"{self.action_space}"
            )
        #: sb3-contrib's maskable distribution over the action net's outputs, for the calls with masks
        self.masked_action_dist: MaskableDistribution = make_masked_proba_distribution(self.action_space)

    @contextmanager
    def _masked(self, action_masks: MaybeMasks) -> Iterator[None]:
        """
        The block's action distributions are built with ``action_masks``; None keeps the masks of an enclosing call
        (``predict`` reaches ``get_distribution`` through the parent's ``_predict``, which passes none).
        """
        previous = self._action_masks
        self._action_masks = previous if action_masks is None else action_masks
        try:
            yield
        finally:
            self._action_masks = previous

    def _get_action_dist_from_latent(self, latent_pi: th.Tensor, *args: Any, **kwargs: Any) -> Distribution:
        masks = self._action_masks
        if all_actions_valid(masks):
            return super()._get_action_dist_from_latent(latent_pi, *args, **kwargs)  # type: ignore[misc]
        distribution = (
            None if self.validate_distributions else unchecked_distribution(self, latent_pi, self.masked_action_dist)
        )
        if distribution is None:
            distribution = self.masked_action_dist.proba_distribution(action_logits=self.action_net(latent_pi))
        distribution.apply_masking(masks)  # type: ignore[attr-defined]
        return distribution

    def forward(
        self,
        obs: th.Tensor,
        lstm_states: Any,
        episode_starts: th.Tensor,
        deterministic: bool = False,
        action_masks: MaybeMasks = None,
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor, Any]:
        """``RecurrentActorCriticPolicy.forward``, the actions drawn among those ``action_masks`` allow."""
        with self._masked(action_masks):
            return super().forward(obs, lstm_states, episode_starts, deterministic)  # type: ignore[misc]

    def get_distribution(
        self,
        obs: th.Tensor,
        lstm_states: tuple[th.Tensor, th.Tensor],
        episode_starts: th.Tensor,
        action_masks: MaybeMasks = None,
    ) -> tuple[Distribution, tuple[th.Tensor, ...]]:
        """``RecurrentActorCriticPolicy.get_distribution``, masked by ``action_masks``."""
        with self._masked(action_masks):
            return super().get_distribution(obs, lstm_states, episode_starts)  # type: ignore[misc]

    def evaluate_actions(
        self, obs: th.Tensor, actions: th.Tensor, lstm_states: Any, episode_starts: th.Tensor, action_masks: MaybeMasks = None
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        """``RecurrentActorCriticPolicy.evaluate_actions`` under the distribution masked by ``action_masks``."""
        with self._masked(action_masks):
            return super().evaluate_actions(obs, actions, lstm_states, episode_starts)  # type: ignore[misc]

    def predict(
        self,
        observation: np.ndarray | dict[str, np.ndarray],
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
        action_masks: MaybeMasks = None,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]:
        """
        ``RecurrentActorCriticPolicy.predict``: the action and the next LSTM state, the action one ``action_masks``
        allows (``(n_envs, mask size)``, or ``(mask size,)`` for a single observation).
        """
        with self._masked(action_masks):
            return super().predict(observation, state, episode_start, deterministic)  # type: ignore[misc]


# sb3-contrib's recurrent forward, get_distribution and evaluate_actions take LSTM states, which its own base
# ActorCriticPolicy's do not: mypy sees the mixin's (the recurrent ones) clash with ActorCriticPolicy's
class MaskableRecurrentXPPOActorCriticPolicy(ActionMaskingMixin, RecurrentXPPOActorCriticPolicy):  # type: ignore[misc]
    """MaskableRecurrentXPPO's ``MlpLstmPolicy``: RecurrentXPPO's ``MlpLstmPolicy`` with action masks."""


# sb3-contrib's recurrent forward, get_distribution and evaluate_actions take LSTM states, which its own base
# ActorCriticPolicy's do not: mypy sees the mixin's (the recurrent ones) clash with ActorCriticPolicy's
class MaskableRecurrentXPPOActorCriticCnnPolicy(ActionMaskingMixin, RecurrentXPPOActorCriticCnnPolicy):  # type: ignore[misc]
    """MaskableRecurrentXPPO's ``CnnLstmPolicy``: RecurrentXPPO's ``CnnLstmPolicy`` with action masks."""


# sb3-contrib's recurrent forward, get_distribution and evaluate_actions take LSTM states, which its own base
# ActorCriticPolicy's do not: mypy sees the mixin's (the recurrent ones) clash with ActorCriticPolicy's
class MaskableRecurrentXPPOMultiInputActorCriticPolicy(ActionMaskingMixin, RecurrentXPPOMultiInputActorCriticPolicy):  # type: ignore[misc]
    """MaskableRecurrentXPPO's ``MultiInputLstmPolicy``: RecurrentXPPO's ``MultiInputLstmPolicy`` with action masks."""
