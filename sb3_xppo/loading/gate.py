"""
The one gate for every name a file hands the package, SB3 or rl-zoo3 to import or call (docs/guide/security.md): a
pickle's globals and a YAML ``!!python/name`` tag (:func:`library_global`), an env id with a module path
(:func:`check_env_id`), and the wrappers and callbacks a ``config.yml`` names (:func:`config_class`). Each name is
checked against an allowlist of known names *before* anything is imported for it: a pickle's global is looked up
among the modules the libraries have already loaded (and a short list of known modules); a config's class is
imported only under the libraries' own wrapper and callback modules. ``trust_code`` opens the env ids and config
names, as rl-zoo3 and gymnasium do; it does not open a pickle's globals here (that is SB3's own loader).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import gymnasium as gym
import numpy as np
import sb3_contrib  # noqa: F401  (loads every sb3-contrib module whose classes a checkpoint names)
import stable_baselines3  # noqa: F401  (likewise for SB3)
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import BaseBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.noise import ActionNoise
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.common.vec_env import VecEnvWrapper

from sb3_xppo.loading.errors import CODE_NAME_HINT, Refusal, UnsafeFileError

#: Libraries whose policy, buffer, features-extractor, action-noise, optimizer and module classes a file may name
LIBRARIES = ("stable_baselines3.", "sb3_contrib.", "sb3_xppo.")

#: Classes of known modules a file may name besides those families (schedules, options, small value types), and the
#: inert stand-in the loader puts for a function pickled by value (a model saved after such a load names it)
LIBRARY_CLASSES = frozenset(
    {
        ("stable_baselines3.common.utils", "FloatSchedule"),
        ("stable_baselines3.common.utils", "ConstantSchedule"),
        ("stable_baselines3.common.utils", "LinearSchedule"),
        ("stable_baselines3.common.type_aliases", "TrainFreq"),
        ("stable_baselines3.common.type_aliases", "TrainFrequencyUnit"),
        ("stable_baselines3.common.vec_env.vec_normalize", "VecNormalize"),
        ("stable_baselines3.common.running_mean_std", "RunningMeanStd"),
        ("stable_baselines3.common.sb2_compat.rmsprop_tf_like", "RMSpropTFLike"),
        ("sb3_contrib.common.recurrent.type_aliases", "RNNStates"),
        ("rl_zoo3.utils", "SimpleLinearSchedule"),
        ("sb3_xppo.common.options", "XPPOOptions"),
        ("sb3_xppo.common.options", "RecurrentXPPOOptions"),
        ("sb3_xppo.common.schedules", "ClipRange"),
        ("sb3_xppo.common.schedules", "ClipRangePair"),
        ("sb3_xppo.xppo.xppo", "ClipRangePair"),  # the path checkpoints saved before the re-layout name
        ("sb3_xppo.loading.legacy", "InertFunction"),
    }
)

#: Attributes a pickle may read with ``getattr(class, name)``, besides an enum's members: static methods that SB3
#: pickles by their class (a policy's ``save()`` writes ``lr_schedule=BasePolicy._dummy_schedule``)
CLASS_ATTRIBUTES = frozenset({("stable_baselines3.common.policies", "BasePolicy", "_dummy_schedule")})

#: Modules an env id may name before its ``:`` (gymnasium imports the module to register the env): the package's
#: and the environment libraries of the field; anything else is code shipped beside a file
ENV_MODULES = ("gymnasium", "sb3_xppo", "ale_py", "mo_gymnasium", "minigrid", "shimmy", "highway_env", "panda_gym")

#: What a ``config.yml`` key may name: the modules it may come from (imported only under these), and its family
CONFIG_NAMES: dict[str, tuple[tuple[str, ...], type]] = {
    "env_wrapper": (
        (
            "gymnasium.wrappers.",
            "stable_baselines3.common.atari_wrappers.",
            "stable_baselines3.common.monitor.",
            "sb3_contrib.common.wrappers.",
            "rl_zoo3.wrappers.",
            "sb3_xppo.",
        ),
        gym.Wrapper,
    ),
    "vec_env_wrapper": (("stable_baselines3.common.vec_env.", "sb3_xppo."), VecEnvWrapper),
    "callback": (("stable_baselines3.common.callbacks.", "rl_zoo3.callbacks.", "sb3_contrib.", "sb3_xppo."), BaseCallback),
}


def _in_family(module: str, value: Any) -> bool:
    """A class of the families a checkpoint names by reference: policies, buffers, spaces, activations, optimizers."""
    if not isinstance(value, type):
        return False
    if module.startswith(LIBRARIES):
        families = (BasePolicy, BaseBuffer, BaseFeaturesExtractor, ActionNoise, th.optim.Optimizer, th.nn.Module)
        return issubclass(value, families)
    if module.startswith("gymnasium.spaces."):
        return issubclass(value, spaces.Space)
    if module == "torch.nn.modules.activation":
        return issubclass(value, th.nn.Module)
    if module.startswith("torch.optim."):
        return issubclass(value, th.optim.Optimizer)
    if module == "numpy" or module.startswith("numpy.dtypes"):
        return issubclass(value, (np.generic, np.dtype))
    return False


def _loaded(module: str) -> Any:
    """The module if the libraries have loaded it already (None: never imported for a file)."""
    return sys.modules.get(module)


def library_global(module: str, name: str) -> Any:
    """
    The class a file (a pickle's global, a YAML ``!!python/name`` tag) names, if the allowlist holds it: a class of
    :data:`LIBRARY_CLASSES`, or of the families (SB3's, sb3-contrib's and the package's policies, buffers, features
    extractors and action noises; gymnasium's spaces; torch's activations and optimizers; numpy's scalar types and
    dtypes) in a module the libraries have loaded. No module is imported for the name but those of
    :data:`LIBRARY_CLASSES`.

    :param module: its module
    :param name: its name in the module (no dotted names)
    :return: the class, or None when the allowlist does not hold it
    :raises AttributeError: for an allowlisted name the installed library does not have (SB3 then drops the field)
    """
    if (module, name) in LIBRARY_CLASSES:
        return getattr(importlib.import_module(module), name)
    if not name.isidentifier() or name.startswith("__"):
        return None
    loaded = _loaded(module)
    value = None if loaded is None else vars(loaded).get(name)
    return value if _in_family(module, value) else None


def class_attribute(owner: type, name: str) -> Any:
    """
    ``getattr(owner, name)`` as a pickle asks for it, for the members of an allowlisted enum and
    :data:`CLASS_ATTRIBUTES` only.

    :return: the attribute, or None when it is not one of those
    """
    import enum

    if isinstance(owner, enum.EnumMeta) and name in owner.__members__:
        return owner.__members__[name]
    for module, qualname, attribute in CLASS_ATTRIBUTES:
        if owner.__module__ == module and owner.__qualname__ == qualname and name == attribute:
            return getattr(owner, name)
    return None


def check_env_id(env_id: str, field: str, trust_code: bool = False) -> None:
    """
    An env id a file holds (a checkpoint's), before gymnasium makes it: ``module:Name-v0`` makes gymnasium import
    ``module``, which must be one of :data:`ENV_MODULES` unless ``trust_code``.

    :param env_id: the id
    :param field: where it was found, for the error
    :param trust_code: let gymnasium import any module the id names
    :raises UnsafeFileError: for a module outside the allowlist (nothing imported)
    """
    module, colon, _ = env_id.partition(":")
    if not colon or trust_code:
        return
    if not any(module == root or module.startswith(f"{root}.") for root in ENV_MODULES):
        why = "an env id with a module path, which gymnasium would import"
        raise UnsafeFileError.of([Refusal(field, module, why)], CODE_NAME_HINT)


def config_refusal(key: str, name: Any, field: str) -> Refusal | None:
    """
    :param key: a ``config.yml`` key that names code (:data:`CONFIG_NAMES`: ``env_wrapper``, ``vec_env_wrapper``,
        ``callback``)
    :param name: its value: a dotted class name, a one-key dict ``{name: kwargs}``, or a list of those
    :param field: where it was found, for the refusal
    :return: the refusal of the first name outside the allowlist, or None when every name is a class of the
        libraries' wrapper or callback modules (those modules are imported to check it; nothing else)
    """
    prefixes, family = CONFIG_NAMES[key]
    names = name if isinstance(name, list) else [name]
    for item in names:
        dotted = next(iter(item)) if isinstance(item, dict) and len(item) == 1 else item
        if not isinstance(dotted, str) or not dotted.startswith(prefixes):
            return Refusal(f"{field}: {key}", str(dotted), "code to import and call, outside the libraries' wrappers")
        module, _, attribute = dotted.rpartition(".")
        try:
            value = getattr(importlib.import_module(module), attribute, None)
        except ImportError:
            value = None
        if not (isinstance(value, type) and issubclass(value, family)):
            return Refusal(f"{field}: {key}", dotted, f"not a {family.__name__} class")
    return None


def check_config(hyperparams: dict[str, Any], field: str, trust_code: bool = False) -> None:
    """
    The names of code in an rl-zoo3 ``config.yml`` (its wrappers and callbacks), before rl-zoo3 imports and calls them.

    :param hyperparams: the config's hyperparameters
    :param field: the file, for the error
    :param trust_code: let rl-zoo3 import whatever they name
    :raises UnsafeFileError: listing every name outside the allowlist
    """
    if trust_code:
        return
    refusals = [config_refusal(key, hyperparams[key], field) for key in CONFIG_NAMES if hyperparams.get(key)]
    refused = [refusal for refusal in refusals if refusal is not None]
    if refused:
        raise UnsafeFileError.of(refused, CODE_NAME_HINT)
