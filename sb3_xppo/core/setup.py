"""
How an XPPO algorithm is built: the one constructor of :class:`~sb3_xppo.XPPO`, :class:`~sb3_xppo.MaskableXPPO`,
:class:`~sb3_xppo.RecurrentXPPO` and :class:`~sb3_xppo.MaskableRecurrentXPPO` (the keywords checked before anything
is built, the parent's handed on). :class:`XPPOSetupMixin` gathers the other jobs, one module each: the model's setup
(:mod:`~sb3_xppo.core.model_setup`), the loss hooks (:mod:`~sb3_xppo.core.hooks`), the env wrapping
(:mod:`~sb3_xppo.core.env_wrapping`), ``learn()`` (:mod:`~sb3_xppo.core.learning`) and what is saved and pickled
(:mod:`~sb3_xppo.core.saving`). The train loop is :mod:`sb3_xppo.core.algorithm`'s.
"""

import dataclasses
import inspect
import typing
from collections import OrderedDict
from typing import Any

import gymnasium as gym
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.type_aliases import GymEnv, Schedule
from stable_baselines3.common.vec_env import VecEnv

from sb3_xppo.common.adaptive_lr import warn_if_schedule_ignored
from sb3_xppo.common.distributed import process_device
from sb3_xppo.common.keywords import (
    check_parent_keywords,
    check_ppo_keywords,
    parent_keywords,
    ppo_keywords,
)
from sb3_xppo.common.options import XPPOOptions
from sb3_xppo.core.env_wrapping import EnvWrappingMixin
from sb3_xppo.core.hooks import AuxiliaryLossHook, LossHook, LossHooksMixin
from sb3_xppo.core.learning import LearnMixin
from sb3_xppo.core.model_setup import ModelSetupMixin
from sb3_xppo.core.rollout import XPPORolloutMixin
from sb3_xppo.core.saving import RUNTIME_STATE, SavingMixin

# LossHook, AuxiliaryLossHook and RUNTIME_STATE stay importable here
__all__ = ["RUNTIME_STATE", "AuxiliaryLossHook", "LossHook", "XPPOSetupMixin", "constructor_signature", "parent_algorithm"]


#: the PPO keywords XPPO takes more of than PPO: a ``(low, high)`` pair of clip ranges, ``'rollout'`` normalization
XPPO_PPO_KEYWORD_TYPES = {
    "clip_range": float | Schedule | tuple[float | Schedule, float | Schedule],
    "normalize_advantage": bool | str,
}


def parent_algorithm(cls: type) -> type:
    """
    :param cls: an XPPO algorithm (e.g. ``MaskableXPPO``)
    :return: the SB3 algorithm it extends (e.g. ``MaskablePPO``): the first class after the XPPO mixins that has a
        constructor of its own
    """
    return next(base for base in cls.__mro__ if not issubclass(base, XPPORolloutMixin) and "__init__" in vars(base))


def constructor_signature(cls: "type[XPPOSetupMixin]") -> inspect.Signature:
    """
    What ``inspect.signature`` (``help()``, Jupyter, IDEs that run code) shows for an XPPO algorithm: its parent's
    parameters as the parent declares them, then ``options`` and every option of its ``options_class`` as keywords,
    with their types and defaults. The one constructor takes them through ``*args`` / ``**kwargs``.

    :param cls: an XPPO algorithm (e.g. ``MaskableXPPO``)
    :return: its constructor's signature, without ``self``
    """
    parent = [
        p.replace(annotation=XPPO_PPO_KEYWORD_TYPES.get(p.name, p.annotation))
        for p in inspect.signature(parent_algorithm(cls)).parameters.values()
    ]
    hints = typing.get_type_hints(cls.options_class)
    options = [
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=hints[f.name])
        for f in dataclasses.fields(cls.options_class)
    ]
    whole = inspect.Parameter("options", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=cls.options_class | None)
    return inspect.Signature([*parent, whole, *options])


class XPPOSetupMixin(ModelSetupMixin, LossHooksMixin, EnvWrappingMixin, LearnMixin, SavingMixin):
    """
    How an XPPO algorithm is built on top of an SB3 on-policy algorithm: its constructor, and the mixins of the
    other jobs. The algorithm names its options class (``options_class``) and its buffers; it writes no constructor
    of its own.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if any(issubclass(base, BaseAlgorithm) for base in cls.__bases__):  # an algorithm, not a mixin
            cls.__signature__ = constructor_signature(cls)  # type: ignore[attr-defined]

    #: check rollouts and train() for non-finite values (see :class:`~sb3_xppo.XPPO`)
    check_finite: bool = True
    #: the learning rate of the KL-adaptive rule (``adaptive_kl``) that the next ``train()`` starts from, saved with
    #: the model; None before the rule's first update (the start is then ``learning_rate``'s value at progress 1)
    adaptive_kl_lr: float | None = None
    # Set by the SB3 algorithm
    normalize_advantage: Any
    learning_rate: Any
    # Set by the constructor
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
        # (distributed: one GPU per process where CUDA is asked for without an index)
        kwargs["device"] = process_device(checked.distributed, kwargs.get("device", "auto"))
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

    def _maybe_recommend_cpu(self, mlp_class_name: str = "ActorCriticPolicy") -> None:
        # SB3's recommendation of the CPU for an MLP policy: the package's MlpPolicy is a class of its own
        own = self.policy_aliases.get("MlpPolicy")  # type: ignore[attr-defined]
        mlp_class_name = own.__name__ if own is not None and self.policy_class is own else mlp_class_name  # type: ignore[attr-defined]
        super()._maybe_recommend_cpu(mlp_class_name)  # type: ignore[misc]

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
