"""
How an XPPO algorithm is built: the one constructor of :class:`~sb3_xppo.XPPO`, :class:`~sb3_xppo.MaskableXPPO`,
:class:`~sb3_xppo.RecurrentXPPO` and :class:`~sb3_xppo.MaskableRecurrentXPPO` (the options checked before anything
is built, the parent's keywords handed on), the model's setup (options after ``load()``, value head, multi-critic
policy and buffer), the loss hooks' registry, the env wrapping and what is never saved. The train loop is
:mod:`sb3_xppo.core.algorithm`'s.
"""

import dataclasses
import inspect
import typing
import warnings
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, ClassVar

import gymnasium as gym
import torch as th
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.env_util import is_wrapped
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.type_aliases import GymEnv, RolloutBufferSamples
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.patch_gym import _patch_env
from torch.utils.hooks import RemovableHandle

from sb3_xppo.common.adaptive_lr import warn_if_schedule_ignored
from sb3_xppo.common.distributed import ProcessGroup, rank_device
from sb3_xppo.common.keywords import (
    check_normalize_advantage,
    check_parent_keywords,
    check_ppo_keywords,
    parent_keywords,
    ppo_keywords,
)
from sb3_xppo.common.options import XPPOOptions
from sb3_xppo.common.policies import XPPOPolicyMixin
from sb3_xppo.common.schedules import as_clip_schedule, unwrap_clip_schedule
from sb3_xppo.common.value_norm import ValueNormalizer
from sb3_xppo.core.data_parallel import DataParallel
from sb3_xppo.core.hooks import add_hook
from sb3_xppo.core.rollout import XPPORolloutMixin
from sb3_xppo.multi_critic.policies import MULTI_CRITIC_POLICIES, MultiCriticPolicyMixin
from sb3_xppo.vec_env import LeanVecEnv

#: ``hook(model, rollout_data, loss) -> loss``: called once per minibatch with the RL loss, returns the loss to optimise
LossHook = Callable[[Any, RolloutBufferSamples, th.Tensor], th.Tensor]
#: ``hook(model, rollout_data) -> loss or None``: an auxiliary loss whose gradient is projected off the RL loss's (PCGrad)
AuxiliaryLossHook = Callable[[Any, RolloutBufferSamples], "th.Tensor | None"]
#: runtime state: never saved with the model nor pickled
RUNTIME_STATE = ("_loss_hooks", "_auxiliary_loss_hooks", "_action_hooks", "_learn_hooks", "_checked_options", "_data_parallel")


def parent_algorithm(cls: type) -> type:
    """
    :param cls: an XPPO algorithm (e.g. ``MaskableXPPO``)
    :return: the SB3 algorithm it extends (e.g. ``MaskablePPO``): the first class after the XPPO mixins that has a
        constructor of its own
    """
    return next(base for base in cls.__mro__ if not issubclass(base, XPPORolloutMixin) and "__init__" in vars(base))


def constructor_signature(cls: type) -> inspect.Signature:
    """
    What ``inspect.signature`` (``help()``, Jupyter, IDEs that run code) shows for an XPPO algorithm: its parent's
    parameters as the parent declares them, then ``options`` and every option of its ``options_class`` as keywords,
    with their types and defaults. The one constructor takes them through ``*args`` / ``**kwargs``.

    :param cls: an XPPO algorithm (e.g. ``MaskableXPPO``)
    :return: its constructor's signature, without ``self``
    """
    parent = list(inspect.signature(parent_algorithm(cls).__init__).parameters.values())[1:]
    hints = typing.get_type_hints(cls.options_class)
    options = [
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=hints[f.name])
        for f in dataclasses.fields(cls.options_class)
    ]
    whole = inspect.Parameter("options", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=cls.options_class | None)
    return inspect.Signature([*parent, whole, *options])


class XPPOSetupMixin(XPPORolloutMixin):
    """
    How an XPPO algorithm is built on top of an SB3 on-policy algorithm: its constructor and ``_setup_model``. The
    algorithm names its options class (``options_class``) and its buffers; it writes no constructor of its own.
    """

    #: the options this algorithm takes (a subclass of :class:`~sb3_xppo.common.options.XPPOOptions` adds its own)
    options_class: ClassVar[type[XPPOOptions]] = XPPOOptions

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if any(issubclass(base, BaseAlgorithm) for base in cls.__bases__):  # an algorithm, not a mixin
            cls.__signature__ = constructor_signature(cls)  # type: ignore[attr-defined]

    #: check rollouts and train() for non-finite values (see :class:`~sb3_xppo.XPPO`)
    check_finite: bool = True
    #: the learning rate of the KL-adaptive rule (``adaptive_kl``) that the next ``train()`` starts from, saved with
    #: the model; None before the rule's first update (the start is then ``learning_rate``'s value at progress 1)
    adaptive_kl_lr: float | None = None
    #: this algorithm's XPPO rollout buffers for (Box, Dict) observations, single and multi-critic (None: the parent's)
    xppo_buffer_classes: ClassVar[tuple[type[RolloutBuffer], type[RolloutBuffer]] | None] = None
    multi_critic_buffer_classes: ClassVar[tuple[type[RolloutBuffer], type[RolloutBuffer]] | None] = None

    # Set by the SB3 algorithm
    rollout_buffer: Any
    rollout_buffer_class: type[RolloutBuffer] | None
    rollout_buffer_kwargs: dict[str, Any]
    policy_class: type
    policy_kwargs: dict[str, Any]
    observation_space: spaces.Space
    clip_range: Any
    clip_range_vf: Any
    normalize_advantage: Any
    learning_rate: Any
    # Set by the constructor
    options: XPPOOptions
    _checked_options: XPPOOptions | None
    _loss_hooks: "OrderedDict[int, LossHook]"
    _auxiliary_loss_hooks: "OrderedDict[int, AuxiliaryLossHook]"

    def __init__(
        self,
        policy: str | type[Any],
        env: GymEnv | str,
        *args: Any,
        options: XPPOOptions | None = None,
        _init_setup_model: bool = True,
        **kwargs: Any,
    ) -> None:
        kwargs, given, checked, normalize_advantage = self.check_keywords(env, args, kwargs, options)
        if checked.distributed:  # one GPU per rank (cuda:LOCAL_RANK) where CUDA is asked for without an index
            kwargs["device"] = rank_device(kwargs.get("device", "auto"))
        if isinstance(env, str):
            # An env id is made without a render mode, where SB3's maybe_make_env asks for "rgb_array": the same
            # numbers, faster steps (docs/guide/vec_env.md, Render modes); render() then asks for an env built with one
            if kwargs.get("verbose", 0) >= 1:
                print(f"Creating environment from the given name '{env}' (no render mode)")
            env = gym.make(env)
        # PPO's asserts were made above, for every parent; its normalize_advantage is XPPO's ('rollout' is no bool)
        super().__init__(policy, env, **{**kwargs, "normalize_advantage": False}, _init_setup_model=False)  # type: ignore[call-arg]
        self.normalize_advantage = normalize_advantage
        # A model set up later (one being loaded: load() may still change its options and clip ranges) checks its
        # options in _setup_model
        self.options = checked if _init_setup_model else given
        self._checked_options = checked if _init_setup_model else None
        self._loss_hooks = OrderedDict()
        self._auxiliary_loss_hooks = OrderedDict()
        self._action_hooks = OrderedDict()
        self._learn_hooks = []
        if checked.adaptive_kl is not None:
            warn_if_schedule_ignored(self.learning_rate)
        if _init_setup_model:
            self._setup_model()

    @classmethod
    def check_keywords(
        cls, env: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: XPPOOptions | None = None
    ) -> tuple[dict[str, Any], XPPOOptions, XPPOOptions, str | bool]:
        """
        Every check the constructor makes before any env or network is built, also for rl-zoo3's entries before
        their envs are (``python -m sb3_xppo.train``).

        :param env: the constructor's ``env``, or the number of envs (None: unknown, as in ``load()``)
        :param args: the parent's arguments after ``env``, positionally
        :param kwargs: the parent's keywords and the options as plain keywords
        :param options: the constructor's ``options``
        :return: the parent's keywords (the options taken out), the options as given and checked, and
            ``normalize_advantage`` in canonical form
        :raises TypeError: for an unknown keyword
        :raises ValueError: for a bad value, naming the keyword (a ``PPOSettingError`` where PPO asserts)
        """
        parent = parent_algorithm(cls)
        kwargs = parent_keywords(parent, args, kwargs)
        given = cls.options_class.from_keywords(options, kwargs)
        check_parent_keywords(cls.__name__, parent, kwargs, cls.options_class)
        ppo = ppo_keywords(parent, kwargs)
        n_envs = env if isinstance(env, int) else env.num_envs if isinstance(env, VecEnv) else None if env is None else 1
        normalize_advantage = check_ppo_keywords(parent, ppo, n_envs)
        return kwargs, given, given.checked(ppo["clip_range"], ppo["clip_range_vf"]), normalize_advantage

    def _setup_model(self) -> None:
        self._setup_options()
        if self.options.distributed:
            self._join_data_parallel()
        if self.options.reward_groups is not None:
            self._setup_multi_critic()
        if self.rollout_buffer_class is None and self.xppo_buffer_classes is not None:
            box, dict_obs = self.xppo_buffer_classes
            self.rollout_buffer_class = dict_obs if isinstance(self.observation_space, spaces.Dict) else box
        self._setup_value_head()
        # The parent wraps the clip ranges in FloatSchedule, which would turn a (low, high) pair into a float
        self.clip_range = as_clip_schedule(self.clip_range)
        super()._setup_model()  # type: ignore[misc]
        self.clip_range = unwrap_clip_schedule(self.clip_range)
        if self.options.group_gradients is not None and not getattr(self.rollout_buffer, "keeps_group_terms", False):
            raise ValueError(
                f"group_gradients={self.options.group_gradients!r} needs a multi-critic rollout buffer that keeps each "
                "group's term of the advantages (sb3_xppo.multi_critic.MultiCriticBufferMixin, group_terms=True), got "
                f"{type(self.rollout_buffer).__name__}"
            )
        if self.options.normalize_values and isinstance(self.policy, XPPOPolicyMixin):
            # PopArt: the head predicts normalized values, the policy still returns values in return units
            self.policy.attach_value_normalizer()
        elif self.options.normalize_values and not isinstance(self.policy.value_net, ValueNormalizer):
            # a policy of the user's own: its linear head, one output per critic
            n_outputs = len(self.options.reward_groups) if self.options.reward_groups is not None else 1
            self.policy.value_net = ValueNormalizer(self.policy.value_net, n_outputs)
        if self._data_parallel is not None:
            self._data_parallel.check_agreement(self)

    def _join_data_parallel(self) -> None:
        """
        ``distributed=True``: join the launcher's process group (:mod:`sb3_xppo.core.data_parallel`) and seed this
        rank's envs ``seed + rank * n_envs + i`` (SB3 seeds env ``i`` of a VecEnv ``seed + i``), before the parent
        seeds anything.
        """
        if self._data_parallel is None:
            self._data_parallel = DataParallel(ProcessGroup.join(self.options.distributed_timeout, self.device))
            if self.seed is not None:
                self.seed += self._data_parallel.rank * self.n_envs

    def _setup_options(self) -> None:
        """
        Check the options of a model set up after its constructor, e.g. by ``load()``, which sets the saved
        ``options`` unchecked, and options given as its keywords (``load(path, fast_paths=False)``) or saved by a
        model from before the options object (one attribute each) as attributes; those override the saved object's
        fields. A PPO checkpoint has none of them: the defaults, ``value_loss`` in PPO's meaning of its
        ``clip_range_vf``.
        """
        attributes = {name: vars(self).pop(name) for name in self.options_class.names() if name in vars(self)}
        # A PPO checkpoint stores normalize_advantage as a bool
        self.normalize_advantage = check_normalize_advantage(self.normalize_advantage)
        if self.options is self._checked_options and not attributes:
            return
        options = self.options_class.from_keywords(self.options, attributes)
        self.options = self._checked_options = options.checked(self.clip_range, self.clip_range_vf)

    def _setup_value_head(self) -> None:
        """``value_loss='hl_gauss'``: the policy gets a classification critic (``policy_kwargs['hl_gauss']``)."""
        wants_bins = "hl_gauss" in self.policy_kwargs
        if self.options.value_loss != "hl_gauss":
            if wants_bins:
                raise ValueError(
                    "policy_kwargs['hl_gauss'] configures the classification critic of value_loss='hl_gauss', "
                    f"but value_loss={self.options.value_loss!r}"
                )
            return
        if not issubclass(self.policy_class, XPPOPolicyMixin):
            raise ValueError(
                "value_loss='hl_gauss' needs one of XPPO's policies (a categorical value head): 'MlpPolicy', "
                "'CnnPolicy', 'MultiInputPolicy' (LSTM: 'MlpLstmPolicy', ...) or a subclass of "
                f"sb3_xppo.common.policies.XPPOPolicyMixin, got {self.policy_class.__name__}"
            )
        bins = dict(self.policy_kwargs.get("hl_gauss") or {})
        self.policy_kwargs = {**self.policy_kwargs, "hl_gauss": bins}
        env = getattr(self, "env", None)
        vec_normalize = self.get_vec_normalize_env() if env is not None else None  # type: ignore[attr-defined]
        normalized = self.options.normalize_values or (vec_normalize is not None and vec_normalize.norm_reward)
        if not normalized and not {"v_min", "v_max"} & set(bins):
            warnings.warn(
                "value_loss='hl_gauss' without normalize_values=True or a reward-normalizing VecNormalize: the "
                "classification critic's default support [-10, 10] is then in the environment's return units, and "
                "returns beyond it are clamped; pass normalize_values=True or policy_kwargs=dict(hl_gauss=dict(v_min=..., "
                "v_max=...))",
                stacklevel=3,
            )

    def _setup_multi_critic(self) -> None:
        """One critic per reward group: the multi-critic policy and buffer, told the number of groups."""
        options = self.options
        assert options.reward_groups is not None
        self.policy_class = MULTI_CRITIC_POLICIES.get(self.policy_class, self.policy_class)
        if not issubclass(self.policy_class, MultiCriticPolicyMixin):
            raise ValueError(
                "reward_groups needs a multi-critic policy: 'MlpPolicy', 'CnnPolicy', 'MultiInputPolicy' or a subclass of "
                f"sb3_xppo.multi_critic.MultiCriticPolicyMixin, got {self.policy_class.__name__}"
            )
        self.policy_kwargs = {**self.policy_kwargs, "n_groups": len(options.reward_groups)}
        if self.rollout_buffer_class is None and self.multi_critic_buffer_classes is not None:
            box, dict_obs = self.multi_critic_buffer_classes
            self.rollout_buffer_class = dict_obs if isinstance(self.observation_space, spaces.Dict) else box
        self.rollout_buffer_kwargs = {
            **self.rollout_buffer_kwargs,
            "n_groups": len(options.reward_groups),
            "group_weights": options.group_weights,
            "group_reduce": options.group_reduce,
            "normalize_groups": options.normalize_groups,
        }
        # with group_gradients the minibatches' advantages are each group's term of the combined ones, (batch, G)
        self.rollout_buffer_kwargs.pop("group_terms", None)  # (a loaded model's, whose option load() may change)
        if options.group_gradients == "pcgrad":
            self.rollout_buffer_kwargs["group_terms"] = True

    def register_loss_hook(self, hook: LossHook, until_learn_ends: bool = False) -> RemovableHandle:
        """
        Add ``hook(model, rollout_data, loss) -> loss`` to every minibatch of :meth:`train`: called once per
        minibatch, after the RL loss (``policy_loss + ent_coef * entropy_loss + vf_coef * value_loss``) is built and
        before ``backward()``, it returns the loss to optimise. Hooks run in registration order; they are runtime
        state, never saved with the model nor pickled.

        :param hook: receives this model, the minibatch (the buffer's samples) and the RL loss; returns the loss
            to optimise
        :param until_learn_ends: remove the hook when the running ``learn()`` returns or raises (for a callback,
            which SB3 does not tell of an exception)
        :return: a handle whose ``remove()`` removes the hook
        """
        signature = "(model, rollout_data, loss) -> loss"
        return add_hook(self._loss_hooks, hook, signature, self._learn_hooks if until_learn_ends else None)

    def register_auxiliary_loss_hook(self, hook: AuxiliaryLossHook, until_learn_ends: bool = False) -> RemovableHandle:
        """
        Add ``hook(model, rollout_data) -> loss or None`` to every minibatch of :meth:`train`: called once per
        minibatch, after the loss hooks, it returns an auxiliary loss (or None for none this minibatch). The
        auxiliary losses are summed, and their gradient is projected off the RL loss's gradient (the loss after the
        loss hooks) where the two conflict, on the parameters the auxiliary loss reaches, then added (PCGrad, Yu et al.
        2020, Gradient Surgery for Multi-Task Learning, arXiv:2001.06782; :func:`~sb3_xppo.functional.pcgrad_auxiliary`):
        the RL gradient is kept whole. Logs ``train/pcgrad_auxiliary_conflict_fraction`` (the share of the minibatches
        where the two conflicted). Costs a second backward pass. Runtime state, as the loss hooks.

        :param hook: receives this model and the minibatch; returns the auxiliary loss (a scalar) or None
        :param until_learn_ends: remove the hook when the running ``learn()`` returns or raises
        :return: a handle whose ``remove()`` removes the hook
        """
        signature = "(model, rollout_data) -> loss or None"
        return add_hook(self._auxiliary_loss_hooks, hook, signature, self._learn_hooks if until_learn_ends else None)

    @staticmethod
    def _wrap_env(env: Any, verbose: int = 0, monitor_wrapper: bool = True) -> VecEnv:
        # SB3's BaseAlgorithm._wrap_env, but an env that it would put in a DummyVecEnv (an env id, made into an env;
        # a gymnasium env) goes in a LeanVecEnv, which returns the same numbers faster; a VecEnv is kept as it is
        if not isinstance(env, VecEnv):
            env = _patch_env(env)
            if monitor_wrapper and not is_wrapped(env, Monitor):
                if verbose >= 1:
                    print("Wrapping the env with a `Monitor` wrapper")
                env = Monitor(env)
            if verbose >= 1:
                print("Wrapping the env in a LeanVecEnv.")
            env = LeanVecEnv([lambda: env])
        return BaseAlgorithm._wrap_env(env, verbose, monitor_wrapper)

    def learn(self, total_timesteps: int, *args: Any, **kwargs: Any) -> Any:
        """
        The parent's ``learn()``, its ``tb_log_name`` by default the algorithm's name; the hooks registered until it
        ends are removed when it returns or raises.

        :param total_timesteps: the number of environment steps to train for
        :param args: the parent's further arguments (``callback``, ``log_interval``, ``tb_log_name``, ...)
        :param kwargs: the parent's keywords
        :return: this model
        """
        if len(args) < 3:  # (callback, log_interval, tb_log_name)
            kwargs.setdefault("tb_log_name", type(self).__name__)
        if self._data_parallel is not None:
            self._data_parallel.start_learn(self)
            kwargs["callback"] = self._data_parallel.progress_bars(kwargs.get("callback"), kwargs.pop("progress_bar", False))
        try:
            return super().learn(total_timesteps, *args, **kwargs)  # type: ignore[misc]
        finally:
            while self._learn_hooks:
                self._learn_hooks.pop().remove()

    def _setup_learn(self, *args: Any, **kwargs: Any) -> Any:
        # A data-parallel run logs on rank 0 only (its logger as SB3 configures it); the other ranks' loggers write
        # nothing
        result = super()._setup_learn(*args, **kwargs)  # type: ignore[misc]
        if self._data_parallel is not None and self._data_parallel.rank != 0:
            self._logger = Logger(folder=None, output_formats=[])
        return result

    def save(self, *args: Any, **kwargs: Any) -> None:
        """
        The parent's ``save()``. A data-parallel model is saved as a plain one (``distributed=False``): it loads and
        runs in one process; ``load(path, distributed=True)`` under the launcher trains it on ranks again. Every rank
        holds the same model, and only rank 0 writes it: on the other ranks ``save()`` writes nothing (so that a
        ``CheckpointCallback`` on every rank never has two processes write one file).
        """
        if self._data_parallel is not None and self._data_parallel.rank != 0:
            return
        if not self.options.distributed:
            return super().save(*args, **kwargs)  # type: ignore[misc]
        options, checked = self.options, self._checked_options
        self.options = self._checked_options = dataclasses.replace(options, distributed=False)
        try:
            super().save(*args, **kwargs)  # type: ignore[misc]
        finally:
            self.options, self._checked_options = options, checked

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), *RUNTIME_STATE]  # type: ignore[misc]

    def __getstate__(self) -> dict[str, Any]:
        # Loss and action hooks are runtime state (usually closures over a callback): never pickled
        state = self.__dict__.copy()
        state["_loss_hooks"], state["_action_hooks"], state["_learn_hooks"] = OrderedDict(), OrderedDict(), []
        state["_auxiliary_loss_hooks"], state["_data_parallel"] = OrderedDict(), None
        return state
