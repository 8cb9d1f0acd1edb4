"""``env_wrapper`` entries for rl-zoo3 configs: the reward of an MO-Gymnasium env scalarized (:func:`linear_reward`)."""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np
from stable_baselines3.common.monitor import Monitor


def linear_reward(env: gym.Env, weight: Sequence[float] | None = None) -> gym.Env:
    """
    ``env_wrapper`` for MO-Gymnasium environments in an rl-zoo3 config: scalarize the reward vector with
    ``mo_gymnasium.wrappers.LinearReward``, which also puts the vector in ``info["vector_reward"]`` where
    multi-critic XPPO reads its reward groups.

    rl-zoo3 applies ``env_wrapper`` on top of the ``Monitor`` it puts on every env, but SB3's ``Monitor``
    can only log a scalar reward; so when ``env`` is a ``Monitor``, ``LinearReward`` goes beneath it and the
    Monitor logs the scalarized return.

    :param env: the environment (as rl-zoo3 passes it: wrapped in a ``Monitor``)
    :param weight: one weight per reward term (default: all ones)
    :return: the wrapped environment
    """
    from mo_gymnasium.wrappers import LinearReward

    weights = None if weight is None else np.asarray(weight, dtype=np.float32)
    # (mo-gymnasium's LinearReward takes weights=None, its default, but annotates an array)
    if isinstance(env, Monitor):
        env.env = LinearReward(env.env, weights)  # type: ignore[arg-type]
        return env
    return LinearReward(env, weights)  # type: ignore[arg-type]
