"""
SB3 checkpoints loaded with their own class, safely (no code from the file runs, docs/guide/security.md): the
algorithms by their rl-zoo3 name, and the algorithm that saved a checkpoint, told from its policy class and saved
hyperparameters.
"""

from __future__ import annotations

import functools
import os
import pathlib
import warnings
from typing import Any

import torch as th
from sb3_contrib import ARS, QRDQN, TQC, TRPO, CrossQ, MaskablePPO, RecurrentPPO
from sb3_contrib.ars.policies import ARSPolicy
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from sb3_contrib.crossq.policies import CrossQPolicy
from sb3_contrib.qrdqn.policies import QRDQNPolicy
from sb3_contrib.tqc.policies import TQCPolicy
from stable_baselines3 import A2C, DDPG, DQN, PPO, SAC, TD3
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.dqn.policies import DQNPolicy
from stable_baselines3.sac.policies import SACPolicy
from stable_baselines3.td3.policies import TD3Policy

from sb3_xppo.common.policies import ActionMaskingMixin
from sb3_xppo.core.loading import SafeLoadMixin
from sb3_xppo.loading.archive import checked_data, safe_load
from sb3_xppo.ppo_mask import MaskableXPPO
from sb3_xppo.ppo_mask_recurrent import MaskableRecurrentXPPO
from sb3_xppo.ppo_recurrent import RecurrentXPPO
from sb3_xppo.xppo import XPPO


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
        tqc=TQC,
        qrdqn=QRDQN,
        ars=ARS,
        crossq=CrossQ,
        ppo_mask=MaskablePPO,
        ppo_lstm=RecurrentPPO,
        xppo=XPPO,
        xppo_mask=MaskableXPPO,
        xppo_lstm=RecurrentXPPO,
        xppo_mask_lstm=MaskableRecurrentXPPO,
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


def infer_algo(path: str | os.PathLike, trust_code: bool = False) -> type[BaseAlgorithm]:
    """
    The algorithm that saved a checkpoint, read from its policy class and saved hyperparameters.

    :param path: path to an SB3 ``.zip``
    :param trust_code: unpickle its fields as SB3 does (default: with the allowlist, no code from the file runs)
    :return: the class to load it with
    """
    with warnings.catch_warnings():  # (what older stacks wrote is rebuilt with a warning: the load says it)
        warnings.simplefilter("ignore", UserWarning)
        data = checked_data(str(path), trust_code=trust_code)
    policy_class = data.get("policy_class")
    # XPPO's variants save their options (before the options object, actor_loss) beside their parent's hyperparameters
    xppo = "options" in data or "actor_loss" in data
    if isinstance(policy_class, type):
        if issubclass(policy_class, MaskableActorCriticPolicy):
            return MaskableXPPO if xppo else MaskablePPO
        if issubclass(policy_class, ActionMaskingMixin):  # (before RecurrentActorCriticPolicy: it is one)
            return MaskableRecurrentXPPO
        if issubclass(policy_class, RecurrentActorCriticPolicy):
            return RecurrentXPPO if xppo else RecurrentPPO
        # sb3-contrib's own policy classes (before SB3's: none subclasses another algorithm's)
        for policy, algorithm in ((TQCPolicy, TQC), (QRDQNPolicy, QRDQN), (ARSPolicy, ARS), (CrossQPolicy, CrossQ)):
            if issubclass(policy_class, policy):
                return algorithm
        if issubclass(policy_class, SACPolicy):
            return SAC
        if issubclass(policy_class, TD3Policy):  # DDPG is TD3 with one update per policy update and no target noise
            return DDPG if data.get("policy_delay") == 1 and data.get("target_noise_clip") == 0.0 else TD3
        if issubclass(policy_class, DQNPolicy):
            return DQN
        if issubclass(policy_class, ActorCriticPolicy):
            # Same policy class: tell the algorithms apart by the hyperparameters each one saves
            if xppo:
                return XPPO
            if "cg_max_steps" in data:
                return TRPO
            return PPO if "clip_range" in data else A2C
    raise ValueError(f"cannot tell which algorithm saved {path}: pass the algorithm (e.g. 'ppo') explicitly")


def load_sb3_model(
    path: str | os.PathLike,
    algo: str | type[BaseAlgorithm] | None = None,
    device: th.device | str = "auto",
    trust_code: bool = False,
    **kwargs: Any,
) -> BaseAlgorithm:
    """
    Load an SB3 checkpoint with its own class (inferred when ``algo`` is None), safely unless ``trust_code``.

    :param path: path to the ``.zip``
    :param algo: the algorithm (name or class); None infers it from the checkpoint
    :param device: device to load on
    :param trust_code: load as SB3 does, running whatever the file's pickles name
    :param kwargs: passed to ``load`` (e.g. ``env``, ``custom_objects``)
    :return: the model
    :raises UnsafeFileError: when the file asks for code outside the allowlist
    """
    if not pathlib.Path(path).exists():
        if not pathlib.Path(f"{path}.zip").exists():
            raise ValueError(f"no SB3 checkpoint at {path}")
        path = f"{path}.zip"
    cls = infer_algo(path, trust_code) if algo is None else resolve_algo(algo)
    # the package's algorithms check in their own load(); checking the checked zip again is a no-op
    load = functools.partial(cls.load, trust_code=trust_code) if issubclass(cls, SafeLoadMixin) else cls.load
    return safe_load(load, str(path), kwargs.pop("custom_objects", None), trust_code, device=device, **kwargs)


def load_model(
    algo_or_path: str | os.PathLike | type[BaseAlgorithm],
    path: str | os.PathLike | None = None,
    trust_code: bool = False,
    **kwargs: Any,
) -> BaseAlgorithm:
    """
    Load any SB3, sb3-contrib or sb3-xppo checkpoint without running code from the file (docs/guide/security.md):
    ``load_model("model.zip")`` (the class told from the checkpoint), ``load_model(SAC, "model.zip")`` or
    ``load_model("sac", "model.zip")``. The model is the one the class's own ``load()`` builds, bit for bit.

    :param algo_or_path: the algorithm (a class or its rl-zoo3 name), or the checkpoint when ``path`` is None
    :param path: the checkpoint (``.zip``), when the first argument names the algorithm
    :param trust_code: load as SB3 does, running whatever the file's pickles name (a schedule of your own): only
        for files you made or trust
    :param kwargs: the class's ``load()`` keywords (``env``, ``device``, ``custom_objects``, ...)
    :return: the model
    :raises UnsafeFileError: when the file asks for code outside the allowlist (the field and the global named)
    """
    if path is None:
        if isinstance(algo_or_path, type):
            raise TypeError("load_model(cls, path): the path of the checkpoint is missing")
        return load_sb3_model(algo_or_path, trust_code=trust_code, **kwargs)
    if not isinstance(algo_or_path, (str, type)):
        raise TypeError(f"load_model's first argument names the algorithm (a class or a name), got {algo_or_path!r}")
    return load_sb3_model(path, algo_or_path, trust_code=trust_code, **kwargs)
