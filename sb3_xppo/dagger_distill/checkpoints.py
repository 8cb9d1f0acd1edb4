"""
SB3 checkpoints loaded with their own class: the algorithms by their rl-zoo3 name, and the algorithm that saved a
checkpoint, told from its policy class and saved hyperparameters.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

import torch as th
from sb3_contrib import TRPO, MaskablePPO, RecurrentPPO
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from stable_baselines3 import A2C, DDPG, DQN, PPO, SAC, TD3
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.save_util import load_from_zip_file
from stable_baselines3.dqn.policies import DQNPolicy
from stable_baselines3.sac.policies import SACPolicy
from stable_baselines3.td3.policies import TD3Policy

from sb3_xppo.common.policies import ActionMaskingMixin
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
    # XPPO's variants save their options (before the options object, actor_loss) beside their parent's hyperparameters
    xppo = "options" in data or "actor_loss" in data
    if isinstance(policy_class, type):
        if issubclass(policy_class, MaskableActorCriticPolicy):
            return known["xppo_mask"] if xppo else MaskablePPO
        if issubclass(policy_class, ActionMaskingMixin):  # (before RecurrentActorCriticPolicy: it is one)
            return known["xppo_mask_lstm"]
        if issubclass(policy_class, RecurrentActorCriticPolicy):
            return known["xppo_lstm"] if xppo else RecurrentPPO
        if issubclass(policy_class, SACPolicy):
            return SAC
        if issubclass(policy_class, TD3Policy):
            return TD3
        if issubclass(policy_class, DQNPolicy):
            return DQN
        if issubclass(policy_class, ActorCriticPolicy):
            # Same policy class: tell the algorithms apart by the hyperparameters each one saves
            if xppo:
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
