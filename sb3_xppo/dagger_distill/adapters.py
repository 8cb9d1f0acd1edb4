"""
Stable-Baselines3 models as distillation policies: ``obs -> pytree of torch distributions`` over the env's actions.

Every SB3 policy is read without noise (gSDE's exploration matrix is never applied; a teacher's label is the
mode/mean). The distributions live in the environment's action units, so a PPO teacher (unclipped Gaussian) and a
SAC student (tanh-squashed, rescaled) label and score the same actions:

- PPO/A2C/TRPO/XPPO/MaskablePPO (``get_distribution``): Categorical, a tuple of Categoricals (MultiDiscrete),
  Independent Bernoulli (MultiBinary) or Independent Normal (Box; tanh-squashed and rescaled under gSDE's
  ``squash_output``). Maskable policies are read without masks.
- SAC (tanh-squashed Gaussian actor): ``Normal -> tanh -> affine`` to the action bounds.
- TD3/DDPG (deterministic actor): an Independent Normal centred on the action, with TD3's exploration scale
  (0.1 of the half range), so ``nll_loss`` is a scaled squared error.
- DQN (teacher only): Categorical over ``softmax(Q)``, whose mode is the greedy action.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib import TRPO, MaskablePPO
from sb3_contrib.common.maskable.distributions import (
    MaskableBernoulliDistribution,
    MaskableCategoricalDistribution,
    MaskableMultiCategoricalDistribution,
)
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3 import A2C, DDPG, DQN, PPO, SAC, TD3
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
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.save_util import load_from_zip_file
from stable_baselines3.common.utils import obs_as_tensor
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.dqn.policies import DQNPolicy
from stable_baselines3.sac.policies import SACPolicy
from stable_baselines3.td3.policies import TD3Policy
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

from sb3_xppo.dagger_distill.pytree import Tree, tree_leaves, tree_map

#: the scale of the Normal put around a deterministic (TD3/DDPG) actor, as a share of the action half range
DETERMINISTIC_ACTOR_STD = 0.1

ObsKeys = str | list[str] | tuple[str, ...] | None


def algorithms() -> dict[str, type[BaseAlgorithm]]:
    """
    The algorithms a checkpoint can be loaded with, by their rl-zoo3 name.

    :return: name -> class
    """
    from sb3_xppo.xppo import XPPO  # imported here: the XPPO package imports nothing of dagger_distill

    return dict(ppo=PPO, a2c=A2C, sac=SAC, td3=TD3, ddpg=DDPG, dqn=DQN, trpo=TRPO, ppo_mask=MaskablePPO, xppo=XPPO)


def resolve_algo(algo: str | type[BaseAlgorithm]) -> type[BaseAlgorithm]:
    """
    An algorithm class from its name (``'ppo'``, ``'sac'``, ...) or the class itself.

    :param algo: name or class
    :return: the class
    """
    if isinstance(algo, type) and issubclass(algo, BaseAlgorithm):
        return algo
    known = algorithms()
    if isinstance(algo, str) and algo.lower() in known:
        return known[algo.lower()]
    raise ValueError(f"unknown algorithm {algo!r}: pass one of {sorted(known)} or an SB3 algorithm class")


def infer_algo(path: str | os.PathLike) -> type[BaseAlgorithm]:
    """
    The algorithm that saved a checkpoint, read from its policy class and saved hyperparameters.

    :param path: path to an SB3 ``.zip``
    :return: the class to load it with
    """
    data, _, _ = load_from_zip_file(str(path), device="cpu")
    assert data is not None
    policy_class = data.get("policy_class")
    known = algorithms()
    if isinstance(policy_class, type):
        if issubclass(policy_class, MaskableActorCriticPolicy):
            return MaskablePPO
        if issubclass(policy_class, SACPolicy):
            return SAC
        if issubclass(policy_class, TD3Policy):
            return TD3
        if issubclass(policy_class, DQNPolicy):
            return DQN
        if issubclass(policy_class, ActorCriticPolicy):
            # Same policy class: tell the algorithms apart by the hyperparameters each one saves
            if "actor_loss" in data:
                return known["xppo"]
            if "cg_max_steps" in data:
                return TRPO
            return PPO if "clip_range" in data else A2C
    raise ValueError(f"cannot tell which algorithm saved {path}: pass the algorithm (e.g. 'ppo') explicitly")


def load_sb3_model(
    path: str | os.PathLike, algo: str | type[BaseAlgorithm] | None = None, device: th.device | str = "auto", **kwargs: Any
) -> BaseAlgorithm:
    """
    Load an SB3 checkpoint with its own class (inferred when ``algo`` is None).

    :param path: path to the ``.zip``
    :param algo: the algorithm (name or class); None infers it from the checkpoint
    :param device: device to load on
    :param kwargs: passed to ``load`` (e.g. ``env``)
    :return: the model
    """
    if not pathlib.Path(path).exists():
        if not pathlib.Path(f"{path}.zip").exists():
            raise ValueError(f"no SB3 checkpoint at {path}")
        path = f"{path}.zip"
    cls = infer_algo(path) if algo is None else resolve_algo(algo)
    return cls.load(str(path), device=device, **kwargs)


def is_sb3_policy_like(x: Any) -> bool:
    """Whether ``x`` is an SB3 model, an SB3 policy or a path to a checkpoint."""
    return isinstance(x, (BaseAlgorithm, BasePolicy, str, os.PathLike))


def select_obs(obs: Tree, keys: ObsKeys) -> Tree:
    """
    The part of a (Dict) observation a policy reads.

    :param obs: observation, a tensor or a dict of tensors
    :param keys: None (all of it), one key (its value) or several (a dict of those)
    :return: the selected observation
    """
    if keys is None:
        return obs
    if isinstance(keys, str):
        return obs[keys]
    return {k: obs[k] for k in keys}


def select_space(space: spaces.Space, keys: ObsKeys) -> spaces.Space:
    """
    The observation space of :func:`select_obs` 's result.

    :param space: the full observation space
    :param keys: as in :func:`select_obs`
    :return: the selected space
    """
    if keys is None:
        return space
    if not isinstance(space, spaces.Dict):
        raise ValueError(f"teacher_obs_keys={keys!r} selects keys, but the observations are not a Dict: {space}")
    names = [keys] if isinstance(keys, str) else list(keys)
    missing = [k for k in names if k not in space.spaces]
    if missing:
        raise ValueError(f"teacher_obs_keys={keys!r}: no key {missing} in the observations; the keys are {list(space.spaces)}")
    return space.spaces[keys] if isinstance(keys, str) else spaces.Dict({k: space.spaces[k] for k in names})


def teacher_obs_keys(student_space: spaces.Space, teacher_space: spaces.Space, keys: ObsKeys = None) -> ObsKeys:
    """
    The keys a teacher reads from the student's observations, checked against the teacher's observation space.
    Without ``keys``, a Dict teacher reads its own keys (a privileged teacher may read keys the student ignores).

    :param student_space: the observations the student (and so the teacher) receives
    :param teacher_space: the observation space the teacher was trained on
    :param keys: explicit keys (see :func:`select_obs`)
    :return: the keys to select (None: the whole observation)
    """
    if keys is None and isinstance(student_space, spaces.Dict):
        if isinstance(teacher_space, spaces.Dict):
            keys = None if list(teacher_space.spaces) == list(student_space.spaces) else list(teacher_space.spaces)
        else:
            raise ValueError(
                f"the observations are a Dict with keys {list(student_space.spaces)} but the teacher reads {teacher_space}: "
                "pass teacher_obs_keys, the key (or keys) the teacher reads"
            )
    selected = select_space(student_space, keys)
    if not same_obs_space(selected, teacher_space):
        raise ValueError(f"the teacher reads {teacher_space} but receives {selected} (teacher_obs_keys={keys!r})")
    return keys


def same_obs_space(a: spaces.Space, b: spaces.Space) -> bool:
    """Observation spaces of the same type and shapes (bounds may differ)."""
    if isinstance(a, spaces.Dict) and isinstance(b, spaces.Dict):
        return set(a.spaces) == set(b.spaces) and all(same_obs_space(a.spaces[k], b.spaces[k]) for k in a.spaces)
    if isinstance(a, spaces.Discrete) and isinstance(b, spaces.Discrete):
        return a.n == b.n
    return type(a) is type(b) and a.shape == b.shape


def same_action_space(a: spaces.Space, b: spaces.Space) -> bool:
    """Action spaces a teacher's labels and a student's actions can share: same type, size and bounds."""
    if isinstance(a, spaces.Box) and isinstance(b, spaces.Box):
        return a.shape == b.shape and np.allclose(a.low, b.low) and np.allclose(a.high, b.high)
    if isinstance(a, spaces.Discrete) and isinstance(b, spaces.Discrete):
        return a.n == b.n and a.start == b.start
    if isinstance(a, spaces.MultiDiscrete) and isinstance(b, spaces.MultiDiscrete):
        return a.nvec.shape == b.nvec.shape and bool(np.all(a.nvec == b.nvec))
    if isinstance(a, spaces.MultiBinary) and isinstance(b, spaces.MultiBinary):
        return a.shape == b.shape
    return False


class _ClampedTanhTransform(TanhTransform):
    """tanh whose inverse first clamps into (-1, 1), as SB3's ``TanhBijector``: a label on a bound keeps a finite log-prob."""

    def _inverse(self, y: th.Tensor) -> th.Tensor:
        return super()._inverse(y.clamp(-1.0 + 1e-6, 1.0 - 1e-6))


class PolicyAdapter:
    """
    An SB3 policy as a distillation policy: ``obs -> pytree of torch distributions`` over the env's actions (see
    the module docstring), noise-free. Observations are tensors (or dicts of tensors) as the SB3 policy receives
    them; ``obs_keys`` selects what a privileged teacher reads from a Dict observation.

    :param policy: the SB3 policy (``model.policy``)
    :param obs_keys: keys of a Dict observation this policy reads (see :func:`select_obs`)
    """

    def __init__(self, policy: BasePolicy, obs_keys: ObsKeys = None) -> None:
        if not isinstance(policy, BasePolicy):
            raise TypeError(f"policy must be an SB3 BasePolicy, got {type(policy).__name__}")
        if not (hasattr(policy, "get_distribution") or hasattr(policy, "actor") or hasattr(policy, "q_net")):
            raise ValueError(f"{type(policy).__name__} has no action distribution, actor or Q-network to distill")
        #: the wrapped policy; layer names (``student_layer``/``teacher_layer``) are its submodule names
        self.module = policy
        self.obs_keys = obs_keys
        self.action_space = policy.action_space

    @property
    def policy(self) -> BasePolicy:
        return self.module

    def __call__(self, obs: Tree) -> Tree:
        obs = select_obs(obs, self.obs_keys)
        policy: Any = self.module
        if hasattr(policy, "get_distribution"):  # on-policy: PPO, A2C, TRPO, XPPO, MaskablePPO
            return self._from_sb3(policy.get_distribution(obs))
        if hasattr(policy, "actor") and hasattr(policy.actor, "get_action_dist_params"):  # SAC-like
            mean_actions, log_std, kwargs = policy.actor.get_action_dist_params(obs)
            dist = policy.actor.action_dist.proba_distribution(mean_actions, log_std, **kwargs)
            return self._squashed(dist.distribution)
        if hasattr(policy, "actor"):  # TD3/DDPG: deterministic actor, tanh output in [-1, 1]
            loc, half = self._affine()
            return Independent(Normal(loc + half * policy.actor(obs), DETERMINISTIC_ACTOR_STD * half), 1)
        return Categorical(logits=policy.q_net(obs))  # DQN: softmax over Q-values, mode = greedy action

    def _from_sb3(self, dist: SB3Distribution) -> Tree:
        # Subclasses before their parents
        if isinstance(dist, SquashedDiagGaussianDistribution):
            return self._squashed(dist.distribution)
        if isinstance(dist, StateDependentNoiseDistribution):
            return self._squashed(dist.distribution) if dist.bijector is not None else Independent(dist.distribution, 1)
        if isinstance(dist, DiagGaussianDistribution):
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


def tree_to_action(tree: Tree, action_space: spaces.Space) -> th.Tensor:
    """
    Actions of a pytree of heads (as :class:`PolicyAdapter` builds them) in the env's format.

    :param tree: one action tensor per head
    :param action_space: the env's action space
    :return: ``(b, *action_space.shape)`` tensor
    """
    if isinstance(action_space, spaces.MultiDiscrete):
        return th.stack(tree_leaves(tree), dim=-1)
    return tree


def action_to_tree(actions: th.Tensor, action_space: spaces.Space) -> Tree:
    """
    The inverse of :func:`tree_to_action`.

    :param actions: ``(b, *action_space.shape)`` env actions
    :param action_space: the env's action space
    :return: one action tensor per head
    """
    if isinstance(action_space, spaces.Discrete):
        return actions.long().reshape(-1)
    if isinstance(action_space, spaces.MultiDiscrete):
        return tuple(actions.long().reshape(-1, len(action_space.nvec)).unbind(dim=-1))
    return actions.float()


def action_clipper(action_space: spaces.Space, device: th.device | str = "cpu") -> Any:
    """
    A ``label_transform`` that clips Box labels to the action bounds, as SB3 clips the actions it executes
    (None for other spaces).

    :param action_space: the student's action space
    :param device: device of the labels
    :return: ``label_transform(state, action, info, step)`` or None
    """
    if not isinstance(action_space, spaces.Box):
        return None
    low = th.as_tensor(action_space.low, dtype=th.float32, device=device)
    high = th.as_tensor(action_space.high, dtype=th.float32, device=device)

    def clip(state: Tree, action: Tree, info: Any, step: int) -> Tree:
        return tree_map(lambda a: th.clamp(a, low, high), action)

    return clip


class SB3VecEnvAdapter:
    """
    An SB3 ``VecEnv`` in the API :class:`~sb3_xppo.dagger_distill.DaggerDistiller` drives: ``reset() -> (obs, info)``
    and ``step(action_tree) -> (obs, reward, terminated, truncated, info)``, with torch tensors on ``device``.
    Actions come as the pytree a :class:`PolicyAdapter` samples, and Box actions are clipped to the bounds.

    :param venv: the vectorised environment
    :param device: device of the returned tensors
    """

    def __init__(self, venv: VecEnv, device: th.device | str = "cpu") -> None:
        self.venv = venv
        self.num_envs = venv.num_envs
        self.device = th.device(device)
        self.action_space = venv.action_space

    def reset(self) -> tuple[Tree, None]:
        obs: Any = self.venv.reset()  # an array or a dict of arrays (SB3 has no tuple observations)
        return obs_as_tensor(obs, self.device), None

    def step(self, action: Tree) -> tuple[Tree, th.Tensor, th.Tensor, th.Tensor, list[dict[str, Any]]]:
        actions = tree_to_action(action, self.action_space).cpu().numpy()
        if isinstance(self.action_space, spaces.Box):
            actions = np.clip(actions, self.action_space.low, self.action_space.high)
        obs: Any
        obs, rewards, dones, infos = self.venv.step(actions)
        dones_t = th.as_tensor(dones, device=self.device)
        return (
            obs_as_tensor(obs, self.device),
            th.as_tensor(rewards, device=self.device),
            dones_t,
            th.zeros_like(dones_t),
            infos,
        )
