"""
Stable-Baselines3 models as distillation policies: ``obs -> pytree of torch distributions`` over the env's actions.

Every SB3 policy is read without noise (gSDE's exploration matrix is never applied; a teacher's label is the
mode/mean). The distributions live in the environment's action units, so a PPO teacher (unclipped Gaussian) and a
SAC student (tanh-squashed, rescaled) label and score the same actions:

- PPO/A2C/TRPO/XPPO/MaskablePPO/RecurrentPPO (``get_distribution``): Categorical, a tuple of Categoricals
  (MultiDiscrete), Independent Bernoulli (MultiBinary) or Independent Normal (Box; tanh-squashed and rescaled under
  gSDE's ``squash_output``).
- Maskable policies (MaskablePPO, MaskableXPPO) read the action masks of a :class:`PolicyInput` (the masked-out
  actions get sb3-contrib's logit of -1e8: a probability of 0 with a finite log-probability); given a bare
  observation, they are read without masks.
- Recurrent policies (RecurrentPPO, RecurrentXPPO) take one LSTM step from the state of a :class:`PolicyInput`: the
  LSTM state the policy saw before acting on that observation, and whether an episode started there.
- SAC (tanh-squashed Gaussian actor): ``Normal -> tanh -> affine`` to the action bounds.
- TD3/DDPG (deterministic actor): an Independent Normal centred on the action, with TD3's exploration scale
  (0.1 of the half range), so ``nll_loss`` is a scaled squared error.
- DQN (teacher only): Categorical over ``softmax(Q)``, whose mode is the greedy action.
"""

from __future__ import annotations

import copy
import os
import pathlib
import pickle
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib import TRPO, MaskablePPO, RecurrentPPO
from sb3_contrib.common.maskable.distributions import (
    MaskableBernoulliDistribution,
    MaskableCategoricalDistribution,
    MaskableMultiCategoricalDistribution,
)
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
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
from stable_baselines3.common.vec_env import VecEnv, VecNormalize
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

from sb3_xppo.dagger_distill.pytree import Tree, batch_size_of, tree_leaves, tree_map
from sb3_xppo.ppo_mask import MaskableXPPO
from sb3_xppo.ppo_recurrent import RecurrentXPPO
from sb3_xppo.xppo import XPPO

#: the scale of the Normal put around a deterministic (TD3/DDPG) actor, as a share of the action half range
DETERMINISTIC_ACTOR_STD = 0.1

ObsKeys = str | list[str] | tuple[str, ...] | None

#: the logit sb3-contrib gives the actions a mask forbids (probability 0, finite log-probability)
MASKED_LOGIT = -1e8


def algorithms() -> dict[str, type[BaseAlgorithm]]:
    """
    The algorithms a checkpoint can be loaded with, by their rl-zoo3 name.

    :return: name -> class
    """
    return dict(
        ppo=PPO,
        a2c=A2C,
        sac=SAC,
        td3=TD3,
        ddpg=DDPG,
        dqn=DQN,
        trpo=TRPO,
        ppo_mask=MaskablePPO,
        ppo_lstm=RecurrentPPO,
        xppo=XPPO,
        xppo_mask=MaskableXPPO,
        xppo_lstm=RecurrentXPPO,
    )


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
        # XPPO's variants save their options (actor_loss) beside their parent's hyperparameters
        if issubclass(policy_class, MaskableActorCriticPolicy):
            return known["xppo_mask"] if "actor_loss" in data else MaskablePPO
        if issubclass(policy_class, RecurrentActorCriticPolicy):
            return known["xppo_lstm"] if "actor_loss" in data else RecurrentPPO
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


class PolicyInput(dict):
    """
    What a policy reads besides the observation, for the states of a maskable or recurrent student: a dict (a pytree,
    so the aggregated dataset stores and indexes it as any other state) whose entries all have the batch first:

    - ``obs``: the observation (a tensor or a dict of tensors);
    - ``action_masks``: ``(b, mask size)`` bool, MaskablePPO's masks (:func:`mask_size` entries per state);
    - ``lstm_states``: ``(hidden, cell)`` of the actor's LSTM, each ``(b, n_lstm_layers, lstm_hidden_size)``: the
      state the policy saw *before* acting on ``obs``;
    - ``episode_starts``: ``(b)`` float, 1 where ``obs`` starts an episode (the LSTM state is then reset to 0 first).

    Its type tells it apart from a Dict observation: :class:`PolicyAdapter` reads the entries its policy uses and
    ignores the others (a feed-forward teacher reads ``obs`` alone).
    """


def obs_of(states: Tree) -> Tree:
    """
    :param states: a batch of observations or a :class:`PolicyInput`
    :return: the observations
    """
    return states["obs"] if isinstance(states, PolicyInput) else states


def is_recurrent(policy: Any) -> bool:
    """Whether ``policy`` is sb3-contrib's LSTM policy (RecurrentPPO, RecurrentXPPO)."""
    return isinstance(policy, RecurrentActorCriticPolicy)


def is_maskable(policy: Any) -> bool:
    """Whether ``policy`` takes action masks (MaskablePPO, MaskableXPPO)."""
    return isinstance(policy, MaskableActorCriticPolicy)


def initial_lstm_states(policy: RecurrentActorCriticPolicy, n: int, device: th.device | str) -> tuple[th.Tensor, th.Tensor]:
    """
    The actor's LSTM state at the start (zeros), batch first as :class:`PolicyInput` holds it.

    :param policy: the recurrent policy
    :param n: batch size (number of envs)
    :param device: device of the tensors
    :return: ``(hidden, cell)``, each ``(n, n_lstm_layers, lstm_hidden_size)``
    """
    layers, _, size = policy.lstm_hidden_state_shape
    return th.zeros(n, layers, size, device=device), th.zeros(n, layers, size, device=device)


def batch_first_lstm_states(states: tuple[th.Tensor, th.Tensor]) -> tuple[th.Tensor, th.Tensor]:
    """
    SB3's ``(n_lstm_layers, b, size)`` LSTM states as :class:`PolicyInput` holds them, ``(b, n_lstm_layers, size)``,
    and back (the same transpose).

    :param states: ``(hidden, cell)``
    :return: ``(hidden, cell)`` with the first two dims swapped
    """
    hidden, cell = states
    return hidden.transpose(0, 1).contiguous(), cell.transpose(0, 1).contiguous()


def mask_size(space: spaces.Space) -> int:
    """
    The length of MaskablePPO's action mask for ``space``: one entry per action (Discrete), per action of each head
    (MultiDiscrete), two per bit (MultiBinary).

    :param space: the action space
    :return: the number of mask entries
    """
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.MultiDiscrete):
        return int(space.nvec.sum())
    if isinstance(space, spaces.MultiBinary):
        return 2 * int(np.prod(space.shape))
    raise ValueError(f"action masks need a Discrete, MultiDiscrete or MultiBinary action space, got {space}")


def actions_allowed(masks: Any, actions: th.Tensor, space: spaces.Space) -> th.Tensor:
    """
    Whether MaskablePPO's action masks allow each state's action; an action outside the space (or not finite) is
    never allowed.

    :param masks: ``(b, mask size)`` masks (see :func:`mask_size`), numpy or torch, bool or 0/1
    :param actions: ``(b, *space.shape)`` env-format actions
    :param space: the action space
    :return: ``(b)`` bool
    """
    b = actions.shape[0]
    masks = th.as_tensor(masks, device=actions.device).reshape(b, -1).bool()
    values = actions.reshape(b, -1)
    finite = th.isfinite(values) if values.is_floating_point() else th.ones_like(values, dtype=th.bool)
    index = th.where(finite, values, th.zeros_like(values)).long()
    if isinstance(space, spaces.Discrete):
        index, sizes = index - int(space.start), th.full_like(index, int(space.n))
    elif isinstance(space, spaces.MultiDiscrete):
        sizes = th.as_tensor(space.nvec.reshape(-1), device=actions.device).expand_as(index)
    elif isinstance(space, spaces.MultiBinary):
        sizes = th.full_like(index, 2)
    else:
        raise ValueError(f"action masks need a Discrete, MultiDiscrete or MultiBinary action space, got {space}")
    inside = finite & (index >= 0) & (index < sizes)
    index = th.where(inside, index, th.zeros_like(index))
    index = index + th.cumsum(sizes, dim=-1) - sizes  # each head's (bit's) block of the mask
    return (masks.gather(1, index) & inside).all(dim=-1)


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


def frozen_vec_normalize(vec_normalize: VecNormalize | str | os.PathLike) -> VecNormalize:
    """
    A teacher's observation statistics, frozen: a ``VecNormalize`` (a snapshot of it: the object passed in is not
    touched and may go on training) or the ``.pkl`` that ``VecNormalize.save`` (and rl-zoo3) wrote, loaded without
    an environment. It only serves ``normalize_obs``: ``training`` and ``norm_reward`` are off.

    :param vec_normalize: a ``VecNormalize`` or the path of its ``.pkl``
    :return: a ``VecNormalize`` detached from any environment, never updated
    """
    if isinstance(vec_normalize, (str, os.PathLike)):
        if not pathlib.Path(vec_normalize).is_file():
            raise ValueError(f"teacher_vec_normalize: no VecNormalize statistics at {vec_normalize}")
        with open(vec_normalize, "rb") as file:
            frozen = pickle.load(file)
        if not isinstance(frozen, VecNormalize):
            raise ValueError(f"teacher_vec_normalize: {vec_normalize} holds a {type(frozen).__name__}, not a VecNormalize")
    elif isinstance(vec_normalize, VecNormalize):
        # What VecNormalize pickles, without pickling (a loaded, unattached one has no venv to drop)
        skip = ("venv", "class_attributes", "returns", "old_obs", "old_reward")
        frozen = VecNormalize.__new__(VecNormalize)
        frozen.__dict__.update(copy.deepcopy({k: v for k, v in vars(vec_normalize).items() if k not in skip}))
        frozen.venv = None  # type: ignore[assignment]
    else:
        raise TypeError(
            f"teacher_vec_normalize must be a VecNormalize or the path of its .pkl, got {type(vec_normalize).__name__}"
        )
    frozen.training = False
    frozen.norm_reward = False
    return frozen


class TeacherObs:
    """
    What a teacher reads of the raw observations: its keys of a Dict observation (see :func:`select_obs`), then
    normalized with its own frozen ``VecNormalize`` statistics (:func:`frozen_vec_normalize`), as in the env it was
    trained in.

    :param keys: keys of a Dict observation the teacher reads (None: all of it)
    :param vec_normalize: the teacher's statistics (None: no normalization)
    """

    def __init__(self, keys: ObsKeys = None, vec_normalize: VecNormalize | None = None) -> None:
        self.keys = keys
        self.vec_normalize = vec_normalize

    def numpy(self, raw: Any) -> Any:
        """
        :param raw: raw observations (numpy arrays or tensors, or a dict of them), the batch first
        :return: the teacher's observations as numpy arrays (or a dict of them)
        """
        obs = select_obs(tree_map(lambda x: x.cpu().numpy() if isinstance(x, th.Tensor) else np.asarray(x), raw), self.keys)
        return obs if self.vec_normalize is None else self.vec_normalize.normalize_obs(obs)

    def __call__(self, raw: Any, device: th.device | str = "cpu") -> Tree:
        """
        :param raw: raw observations (numpy arrays or tensors, or a dict of them), the batch first
        :param device: device of the result
        :return: the teacher's observations as tensors
        """
        return obs_as_tensor(self.numpy(raw), th.device(device))


class _ClampedTanhTransform(TanhTransform):
    """tanh whose inverse first clamps into (-1, 1), as SB3's ``TanhBijector``: a label on a bound keeps a finite log-prob."""

    def _inverse(self, y: th.Tensor) -> th.Tensor:
        return super()._inverse(y.clamp(-1.0 + 1e-6, 1.0 - 1e-6))


class PolicyAdapter:
    """
    An SB3 policy as a distillation policy: ``obs -> pytree of torch distributions`` over the env's actions (see
    the module docstring), noise-free. Observations are tensors (or dicts of tensors) as the SB3 policy receives
    them, or a :class:`PolicyInput` that adds a maskable policy's action masks and a recurrent policy's LSTM state;
    ``obs_keys`` selects what a privileged teacher reads from a Dict observation.

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
        #: whether the policy takes action masks / an LSTM state (see :class:`PolicyInput`)
        self.maskable = is_maskable(policy)
        self.recurrent = is_recurrent(policy)

    @property
    def policy(self) -> BasePolicy:
        return self.module

    def allowed_labels(self, states: Tree, labels: Tree) -> th.Tensor | None:
        """
        Which labels the action masks of the states allow (:class:`DaggerDistiller` drops the others from the loss:
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

        :param states: the states (a :class:`PolicyInput` with ``action_masks``; anything else changes nothing)
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
            # One LSTM step from the stored state: a sequence of length 1 per state
            dist, _ = policy.get_distribution(obs, batch_first_lstm_states(inputs["lstm_states"]), starts.float())
            return self._from_sb3(dist)
        if self.maskable:
            masks = None if inputs is None else inputs.get("action_masks")
            return self._from_sb3(policy.get_distribution(obs, action_masks=masks))
        if hasattr(policy, "get_distribution"):  # on-policy: PPO, A2C, TRPO, XPPO
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

    With the student's ``policy``, a maskable or recurrent student's states are :class:`PolicyInput`: the env's
    action masks (``get_action_masks``, as MaskablePPO reads them), and the LSTM state the student saw before each
    observation, advanced here at every step with the student's current weights from the observation it acted on
    (reset where an episode starts), as RecurrentPPO's rollouts do. A :class:`PolicyAdapter` teacher reads what it
    needs of them; a callable teacher gets the observations through ``teacher_state_fn=lambda s, info, step:
    obs_of(s)``.

    :param venv: the vectorised environment
    :param device: device of the returned tensors
    :param policy: the student's policy, for the masks and LSTM state its states carry (None: bare observations)
    """

    def __init__(self, venv: VecEnv, device: th.device | str = "cpu", policy: BasePolicy | None = None) -> None:
        self.venv = venv
        self.num_envs = venv.num_envs
        self.device = th.device(device)
        self.action_space = venv.action_space
        self.policy: Any = policy
        self._masks = is_maskable(policy)
        self._recurrent = is_recurrent(policy)
        if self._masks and not is_masking_supported(venv):
            raise ValueError("the student is maskable but the env has no action_masks() method (sb3-contrib's ActionMasker)")
        self._obs: Tree = None
        self._lstm_states: tuple[th.Tensor, th.Tensor] | None = None
        self._episode_starts: th.Tensor | None = None

    def reset(self) -> tuple[Tree, None]:
        obs: Any = self.venv.reset()  # an array or a dict of arrays (SB3 has no tuple observations)
        if self._recurrent:
            self._lstm_states = initial_lstm_states(self.policy, self.num_envs, self.device)
            self._episode_starts = th.ones(self.num_envs, device=self.device)
        return self._inputs(obs), None

    def step(self, action: Tree) -> tuple[Tree, th.Tensor, th.Tensor, th.Tensor, list[dict[str, Any]]]:
        if self._recurrent:  # the state after the observation just acted on (it does not depend on the action)
            assert self._lstm_states is not None and self._episode_starts is not None, "reset() first"
            with th.no_grad():
                lstm_states = batch_first_lstm_states(self._lstm_states)
                _, after = self.policy.get_distribution(self._obs, lstm_states, self._episode_starts)
            self._lstm_states = batch_first_lstm_states(after)
        actions = tree_to_action(action, self.action_space).cpu().numpy()
        if isinstance(self.action_space, spaces.Box):
            actions = np.clip(actions, self.action_space.low, self.action_space.high)
        obs: Any
        obs, rewards, dones, infos = self.venv.step(actions)
        dones_t = th.as_tensor(dones, device=self.device)
        if self._recurrent:
            self._episode_starts = dones_t.float()
        return (
            self._inputs(obs),
            th.as_tensor(rewards, device=self.device),
            dones_t,
            th.zeros_like(dones_t),
            infos,
        )

    def _inputs(self, obs: Any) -> Tree:
        self._obs = obs_as_tensor(obs, self.device)
        if not (self._masks or self._recurrent):
            return self._obs
        inputs = PolicyInput(obs=self._obs)
        if self._masks:
            inputs["action_masks"] = th.as_tensor(get_action_masks(self.venv), device=self.device).bool()
        if self._recurrent:
            assert self._lstm_states is not None and self._episode_starts is not None
            inputs["lstm_states"] = self._lstm_states
            inputs["episode_starts"] = self._episode_starts
        return inputs
