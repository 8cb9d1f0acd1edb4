"""
Stable-Baselines3 models as distillation policies: ``obs -> pytree of torch distributions`` over the env's actions.

Every SB3 policy is read without noise (gSDE's exploration matrix is never applied; a teacher's label is the
mode/mean). The distributions live in the environment's action units, so a PPO teacher (unclipped Gaussian) and a
SAC student (tanh-squashed, rescaled) label and score the same actions:

- PPO/A2C/TRPO/XPPO/MaskablePPO/RecurrentPPO (``get_distribution``): Categorical, a tuple of Categoricals
  (MultiDiscrete), Independent Bernoulli (MultiBinary) or Independent Normal (Box; tanh-squashed and rescaled under
  gSDE's ``squash_output``); an XPPO policy with ``action_dist='beta'``: Independent
  :class:`~sb3_xppo.common.beta.ScaledBeta` (its labels are modes, inside the bounds; a label on or beyond a bound,
  e.g. a Gaussian teacher's mean, is scored just inside it, finite).
- Maskable policies (MaskablePPO, MaskableXPPO) read the action masks of a :class:`.PolicyInput` (the masked-out
  actions get sb3-contrib's logit of -1e8: a probability of 0 with a finite log-probability); given a bare
  observation, they are read without masks.
- Recurrent policies (RecurrentPPO, RecurrentXPPO) take one LSTM step from the state of a :class:`.PolicyInput`: the
  LSTM state the policy saw before acting on that observation, and whether an episode started there;
  MaskableRecurrentXPPO's also read its action masks.
- SAC (tanh-squashed Gaussian actor): ``Normal -> tanh -> affine`` to the action bounds.
- TD3/DDPG (deterministic actor): an Independent Normal centred on the action, with TD3's exploration scale
  (0.1 of the half range), so ``nll_loss`` is a scaled squared error.
- DQN (teacher only): Categorical over ``softmax(Q)``, whose mode is the greedy action.
"""

from __future__ import annotations

import os
from typing import Any

import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.distributions import (
    MaskableBernoulliDistribution,
    MaskableCategoricalDistribution,
    MaskableMultiCategoricalDistribution,
)
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.distributions import (
    BernoulliDistribution,
    CategoricalDistribution,
    DiagGaussianDistribution,
    MultiCategoricalDistribution,
    SquashedDiagGaussianDistribution,
    StateDependentNoiseDistribution,
)
from stable_baselines3.common.distributions import Distribution as SB3Distribution
from stable_baselines3.common.policies import BasePolicy
from torch.distributions import (
    AffineTransform,
    Bernoulli,
    Categorical,
    Distribution,
    Independent,
    Normal,
    TanhTransform,
    TransformedDistribution,
)

from sb3_xppo.common.beta import BetaDistribution
from sb3_xppo.dagger_distill.actions import tree_to_action
from sb3_xppo.dagger_distill.checkpoints import load_sb3_model
from sb3_xppo.dagger_distill.masks import MASKED_LOGIT, actions_allowed
from sb3_xppo.dagger_distill.policy_input import PolicyInput, batch_first_lstm_states, is_maskable, is_recurrent, obs_of
from sb3_xppo.dagger_distill.pytree import Tree, batch_size_of, tree_leaves
from sb3_xppo.dagger_distill.teacher_obs import ObsKeys, select_obs

#: the scale of the Normal put around a deterministic (TD3/DDPG) actor, as a share of the action half range
DETERMINISTIC_ACTOR_STD = 0.1


def is_sb3_policy_like(x: Any) -> bool:
    """Whether ``x`` is an SB3 model, an SB3 policy or a path to a checkpoint."""
    return isinstance(x, (BaseAlgorithm, BasePolicy, str, os.PathLike))


class _ClampedTanhTransform(TanhTransform):
    """tanh whose inverse first clamps into (-1, 1), as SB3's ``TanhBijector``: a label on a bound keeps a finite log-prob."""

    def _inverse(self, y: th.Tensor) -> th.Tensor:
        return super()._inverse(y.clamp(-1.0 + 1e-6, 1.0 - 1e-6))


class PolicyAdapter:
    """
    An SB3 policy as a distillation policy: ``obs -> pytree of torch distributions`` over the env's actions (see
    the module docstring), noise-free. Observations are tensors (or dicts of tensors) as the SB3 policy receives
    them, or a :class:`.PolicyInput` that adds a maskable policy's action masks and a recurrent policy's LSTM state;
    ``obs_keys`` selects what a privileged teacher reads from a Dict observation.

    :param policy: the SB3 policy (``model.policy``)
    :param obs_keys: keys of a Dict observation this policy reads (see :func:`.select_obs`)
    """

    def __init__(self, policy: BasePolicy, obs_keys: ObsKeys = None) -> None:
        if not isinstance(policy, BasePolicy):
            raise TypeError(f"policy must be an SB3 BasePolicy, got {type(policy).__name__}")
        heads = ("get_distribution", "actor", "q_net", "quantile_net", "action_net")
        if not any(hasattr(policy, head) for head in heads):
            raise ValueError(f"{type(policy).__name__} has no action distribution, actor or Q-network to distill")
        #: the wrapped policy; layer names (``student_layer``/``teacher_layer``) are its submodule names
        self.module = policy
        self.obs_keys = obs_keys
        self.action_space = policy.action_space
        #: whether the policy takes action masks / an LSTM state (see :class:`.PolicyInput`)
        self.maskable = is_maskable(policy)
        self.recurrent = is_recurrent(policy)

    @property
    def policy(self) -> BasePolicy:
        return self.module

    def allowed_labels(self, states: Tree, labels: Tree) -> th.Tensor | None:
        """
        Which labels the action masks of the states allow (:class:`.DaggerDistiller` drops the others from the loss:
        their log-probability under a masked policy is about -1e8).

        :param states: the states the labels belong to
        :param labels: one label tensor per head, the batch first
        :return: ``(b)`` bool, or None when the policy takes no masks or the states carry none
        """
        if not (self.maskable and isinstance(states, PolicyInput) and "action_masks" in states):
            return None
        return actions_allowed(states["action_masks"], tree_to_action(labels, self.action_space), self.action_space)

    def restrict_to_allowed(self, states: Tree, tree: Tree) -> Tree:
        """
        Another policy's (the teacher's) Categorical heads restricted to the actions the states' masks allow, as this
        maskable policy's own: the forbidden actions get sb3-contrib's logit of -1e8 (the others renormalized), so that
        ``kl_loss`` and ``mse_loss`` compare distributions over the same actions. Other heads (MultiBinary's
        Bernoulli bits) and trees of another shape are returned as they are.

        :param states: the states (a :class:`.PolicyInput` with ``action_masks``; anything else changes nothing)
        :param tree: a pytree of distributions over this policy's action space
        :return: the restricted pytree
        """
        if not (self.maskable and isinstance(states, PolicyInput) and "action_masks" in states):
            return tree
        space = self.action_space
        if isinstance(space, spaces.Discrete):
            sizes = [int(space.n)]
        elif isinstance(space, spaces.MultiDiscrete):
            sizes = [int(n) for n in space.nvec.reshape(-1)]
        else:
            return tree
        heads = tree_leaves(tree)
        if len(heads) != len(sizes) or not all(
            isinstance(d, Categorical) and d.logits.shape[-1] == n for d, n in zip(heads, sizes, strict=True)
        ):
            return tree
        masks = th.as_tensor(states["action_masks"]).bool().reshape(len(heads[0].logits), -1)
        restricted = [
            Categorical(logits=th.where(m.to(d.logits.device), d.logits, th.full_like(d.logits, MASKED_LOGIT)))
            for d, m in zip(heads, masks.split(sizes, dim=-1), strict=True)
        ]
        return restricted[0] if isinstance(space, spaces.Discrete) else type(tree)(restricted)

    def __call__(self, obs: Tree) -> Tree:
        inputs = obs if isinstance(obs, PolicyInput) else None
        obs = select_obs(obs_of(obs), self.obs_keys)
        policy: Any = self.module
        if self.recurrent:
            if inputs is None or "lstm_states" not in inputs:
                raise ValueError(
                    f"{type(policy).__name__} is recurrent: it reads a PolicyInput with the LSTM state it saw "
                    "(lstm_states, episode_starts), not a bare observation"
                )
            starts = inputs.get("episode_starts")
            if starts is None:
                starts = th.zeros(batch_size_of(obs), device=policy.device)
            # One LSTM step from the stored state: a sequence of length 1 per state (MaskableRecurrentXPPO: masked)
            masks = {"action_masks": inputs.get("action_masks")} if self.maskable else {}
            dist, _ = policy.get_distribution(obs, batch_first_lstm_states(inputs["lstm_states"]), starts.float(), **masks)
            return self._from_sb3(dist)
        if self.maskable:
            action_masks = None if inputs is None else inputs.get("action_masks")
            return self._from_sb3(policy.get_distribution(obs, action_masks=action_masks))
        if hasattr(policy, "get_distribution"):  # on-policy: PPO, A2C, TRPO, XPPO
            return self._from_sb3(policy.get_distribution(obs))
        if hasattr(policy, "actor") and hasattr(policy.actor, "get_action_dist_params"):  # SAC-like
            mean_actions, log_std, kwargs = policy.actor.get_action_dist_params(obs)
            dist = policy.actor.action_dist.proba_distribution(mean_actions, log_std, **kwargs)
            return self._squashed(dist.distribution)
        if hasattr(policy, "actor"):  # TD3/DDPG: deterministic actor, tanh output in [-1, 1]
            loc, half = self._affine()
            return Independent(Normal(loc + half * policy.actor(obs), DETERMINISTIC_ACTOR_STD * half), 1)
        if hasattr(policy, "quantile_net"):  # QR-DQN: Q-values are the quantiles' means (as its _predict takes them)
            return Categorical(logits=policy.quantile_net(obs).mean(dim=1))
        if hasattr(policy, "action_net"):  # ARS: a deterministic policy
            return self._deterministic(policy, obs)
        return Categorical(logits=policy.q_net(obs))  # DQN: softmax over Q-values, mode = greedy action

    def _deterministic(self, policy: BasePolicy, obs: Any) -> Tree:
        """ARS's policy: its action net's logits (discrete), or a Normal around its action (``DETERMINISTIC_ACTOR_STD``
        of the half range), in the space's units as its ``predict`` gives them (tanh-squashed: scaled to the bounds)."""
        output = policy.action_net(policy.extract_features(obs, policy.features_extractor))  # type: ignore[operator]
        if isinstance(self.action_space, spaces.Discrete):
            return Categorical(logits=output)
        loc, half = self._affine()
        action = loc + half * th.tanh(output) if policy.squash_output else output
        return Independent(Normal(action, DETERMINISTIC_ACTOR_STD * half), 1)

    def _from_sb3(self, dist: SB3Distribution) -> Tree:
        # Subclasses before their parents
        if isinstance(dist, SquashedDiagGaussianDistribution):
            return self._squashed(dist.distribution)
        if isinstance(dist, StateDependentNoiseDistribution):
            return self._squashed(dist.distribution) if dist.bijector is not None else Independent(dist.distribution, 1)
        if isinstance(dist, (DiagGaussianDistribution, BetaDistribution)):
            return Independent(dist.distribution, 1)
        if isinstance(dist, MaskableBernoulliDistribution):
            # Two logits per binary action: Bernoulli(logit_1 - logit_0) is the same distribution
            logits = th.stack([d.logits[:, 1] - d.logits[:, 0] for d in dist.distributions], dim=-1)
            return Independent(Bernoulli(logits=logits), 1)
        if isinstance(dist, MaskableMultiCategoricalDistribution):
            return tuple(Categorical(logits=d.logits) for d in dist.distributions)
        if isinstance(dist, (CategoricalDistribution, MaskableCategoricalDistribution)):
            return Categorical(logits=dist.distribution.logits)
        if isinstance(dist, MultiCategoricalDistribution):
            return tuple(Categorical(logits=d.logits) for d in dist.distribution)
        if isinstance(dist, BernoulliDistribution):
            return Independent(Bernoulli(logits=dist.distribution.logits), 1)
        raise TypeError(f"cannot distill {type(dist).__name__} distributions")

    def _affine(self) -> tuple[th.Tensor, th.Tensor]:
        """Centre and half range of the Box action space, as tensors on the policy's device."""
        assert isinstance(self.action_space, spaces.Box)
        low = th.as_tensor(self.action_space.low, dtype=th.float32, device=self.module.device)
        high = th.as_tensor(self.action_space.high, dtype=th.float32, device=self.module.device)
        return (high + low) / 2, (high - low) / 2

    def _squashed(self, normal: Normal) -> Distribution:
        loc, half = self._affine()
        transforms = [_ClampedTanhTransform(), AffineTransform(loc, half, event_dim=1)]
        return TransformedDistribution(Independent(normal, 1), transforms)


def policy_adapter(policy: Any, obs_keys: ObsKeys = None, algo: str | type[BaseAlgorithm] | None = None) -> PolicyAdapter:
    """
    A :class:`PolicyAdapter` for an SB3 model, an SB3 policy or the path to a checkpoint.

    :param policy: model, policy or path
    :param obs_keys: keys of a Dict observation this policy reads
    :param algo: the algorithm of a checkpoint (inferred when None)
    :return: the adapter
    """
    if isinstance(policy, (str, os.PathLike)):
        policy = load_sb3_model(policy, algo, device="cpu")
    if isinstance(policy, BaseAlgorithm):
        policy = policy.policy
    return PolicyAdapter(policy, obs_keys)


def student_optimizer(model: BaseAlgorithm) -> th.optim.Optimizer:
    """
    The optimizer that owns a model's action distribution: the actor's for SAC/TD3, the policy's otherwise.

    :param model: the SB3 model
    :return: its optimizer
    """
    actor = getattr(model, "actor", None)
    if actor is not None and hasattr(actor, "optimizer"):
        return actor.optimizer
    return model.policy.optimizer
