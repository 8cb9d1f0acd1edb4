"""
LunarLander-v3's own reward split into four reward groups for multi-critic XPPO: the landing outcome, the shaping,
the main engine's and the side engines' fuel, whose weighted sum is LunarLander-v3's reward bit for bit on every
step, the terminal one included.

MO-Gymnasium's ``mo-lunar-lander-v3`` has the same four terms, but on the step where an episode ends (a crash, the
lander leaving the screen, or a landing) it keeps the shaping and fuel terms beside its ±100 outcome, where
LunarLander-v3 *replaces* the step's reward with -100 or +100 (gymnasium's ``LunarLander.step``). Scalarized with
``LinearReward([1, 1, 0.3, 0.03])`` it is therefore another reward than LunarLander-v3's at those steps (a crash
often stops the lander, which raises the shaping by tens of points, so a crash costs less there).
"""

from __future__ import annotations

import importlib
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

#: The reward groups, in the order of the reward vector (MO-Gymnasium's lunar lander's order; pass them as XPPO's
#: ``reward_groups``)
LUNAR_LANDER_GROUP_NAMES = ("outcome", "shaping", "main_engine", "side_engine")
#: The weights whose weighted sum of the groups is LunarLander-v3's reward (pass them as XPPO's ``group_weights``,
#: with ``normalize_groups=False, group_reduce="sum"``: the "scalarize" mode)
LUNAR_LANDER_GROUP_WEIGHTS = (1.0, 1.0, 0.3, 0.03)


def _lunar_lander_module() -> Any:
    """:return: gymnasium's ``lunar_lander`` module, imported on first use (it needs Box2D)"""
    return importlib.import_module("gymnasium.envs.box2d.lunar_lander")


def engine_powers(action: Any, continuous: bool) -> tuple[float, float]:
    """
    The main and side engines' power of one LunarLander action, computed as gymnasium's ``LunarLander.step`` does
    (gymnasium 1.x, ``gymnasium/envs/box2d/lunar_lander.py``).

    :param action: a discrete action (0 noop, 1 left engine, 2 main engine, 3 right engine) or a continuous one
        (``[main, lateral]``, each clipped to ``[-1, 1]``)
    :param continuous: whether the env is LunarLanderContinuous
    :return: ``(m_power, s_power)``: 0, or the main engine's power in ``[0.5, 1]`` (1 for the discrete main engine),
        and 0 or the side engine's power in ``[0.5, 1]``
    """
    if continuous:
        action = np.clip(action, -1, +1).astype(np.float64)
        m_power = (np.clip(action[0], 0.0, 1.0) + 1.0) * 0.5 if action[0] > 0.0 else 0.0
        s_power = np.clip(np.abs(action[1]), 0.5, 1.0) if np.abs(action[1]) > 0.5 else 0.0
        return float(m_power), float(s_power)
    action = int(action)
    return (1.0 if action == 2 else 0.0), (1.0 if action in (1, 3) else 0.0)


class LunarLanderRewardGroups(gym.Wrapper):
    """
    Puts LunarLander-v3's reward, split into four groups, into each step's ``info[vector_reward_key]`` (a float64
    vector in the order of :data:`LUNAR_LANDER_GROUP_NAMES`); the observation, the scalar reward and the episode's
    end are the env's own, untouched. The groups, from the env's state as gymnasium's ``LunarLander.step`` computes
    its reward (``m_power``, ``s_power``: the engines' power, :func:`engine_powers`; ``shaping``: LunarLander's
    potential of the state, ``prev_shaping`` the one of the state before):

    - a step that does not end the episode: ``[0, shaping - prev_shaping, -m_power, -s_power]``, LunarLander-v3's
      reward being ``(shaping - prev_shaping) - 0.3 * m_power - 0.03 * s_power``;
    - the step that ends it (terminated): ``[-100, 0, 0, 0]`` on a crash or when the lander leaves the screen,
      ``[+100, 0, 0, 0]`` on a landing (the lander at rest), LunarLander-v3's reward being that outcome alone: it
      replaces the step's shaping and fuel terms. A step cut by the time limit (truncated) is a step like any other.

    With :data:`LUNAR_LANDER_GROUP_WEIGHTS` ``(1, 1, 0.3, 0.03)``, the weighted sum ``w_0 v_0 + w_1 v_1 + w_2 v_2
    + w_3 v_3``, summed in that order in float64, is the step's reward bit for bit (checked at every step: a
    ``RuntimeError`` says when the env's reward is not the one gymnasium's LunarLander computes, e.g. in a wrapper
    that changes its actions or its reward). XPPO stores the groups in float32, where the sum is as exact as float32
    allows. The groups and their units are ``mo-lunar-lander-v3``'s (MO-Gymnasium), whose vector is the same on
    every other step (up to its float32); only the terminal step differs.

    Registered as ``sb3_xppo/LunarLanderGroups-v3`` and ``sb3_xppo/LunarLanderContinuousGroups-v3``
    (LunarLander-v3's and LunarLanderContinuous-v3's limit of 1000 steps).

    :param env: a gymnasium ``LunarLander`` (discrete or continuous, with or without wind), possibly wrapped, but in no
        wrapper that changes its actions or its reward
    :param vector_reward_key: the info key written, XPPO's ``vector_reward_key``
    """

    def __init__(self, env: gym.Env, vector_reward_key: str = "vector_reward") -> None:
        super().__init__(env)
        lunar_lander = _lunar_lander_module()
        if not isinstance(env.unwrapped, lunar_lander.LunarLander):
            raise TypeError(f"LunarLanderRewardGroups wraps a gymnasium LunarLander, got {type(env.unwrapped).__name__}")
        self.vector_reward_key = vector_reward_key
        #: the group names, in the order of the reward vector (pass them as XPPO's ``reward_groups``)
        self.group_names = list(LUNAR_LANDER_GROUP_NAMES)
        #: the weights that reproduce the reward (pass them as XPPO's ``group_weights``)
        self.group_weights = list(LUNAR_LANDER_GROUP_WEIGHTS)
        # LunarLander's x coordinate of the state, (pos.x - half) / half, its "left the screen" test being |x| >= 1
        self._half_width = lunar_lander.VIEWPORT_W / lunar_lander.SCALE / 2

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """
        The env's step, with the reward groups in ``info[vector_reward_key]``.

        :param action: the env's action
        :return: the env's observation, reward, terminated, truncated and info, the info with the group vector
        :raises RuntimeError: when the groups' weighted sum is not the env's reward, or the episode's end is not the
            one gymnasium's LunarLander decides (the env is not gymnasium's LunarLander-v3 as this wrapper reads it)
        """
        lander: Any = self.env.unwrapped  # gymnasium's LunarLander: its Box2D state, which Env does not declare
        prev_shaping = lander.prev_shaping
        obs, reward, terminated, truncated, info = self.env.step(action)
        # LunarLander.step's end tests, on the state after the step (the later one wins, as there)
        outcome = 0.0
        x = (lander.lander.position.x - self._half_width) / self._half_width
        if lander.game_over or abs(x) >= 1.0:
            outcome = -100.0
        if not lander.lander.awake:
            outcome = 100.0
        if outcome:
            vector = [outcome, 0.0, 0.0, 0.0]
        else:
            m_power, s_power = engine_powers(action, lander.continuous)
            # LunarLander.step has set prev_shaping to this state's shaping
            shaping_change = 0.0 if prev_shaping is None else lander.prev_shaping - prev_shaping
            vector = [0.0, shaping_change, -m_power, -s_power]
        total = 0.0
        for weight, value in zip(LUNAR_LANDER_GROUP_WEIGHTS, vector, strict=True):
            total += weight * value
        if total != reward or bool(outcome) != terminated:
            raise RuntimeError(
                f"LunarLanderRewardGroups: groups {vector} (weighted sum {total!r}, terminal={bool(outcome)}) do not "
                f"match the env's reward {reward!r} (terminated={terminated}): the env must be gymnasium's "
                "LunarLander-v3 in no wrapper that changes its actions or its reward"
            )
        info[self.vector_reward_key] = np.array(vector, dtype=np.float64)
        return obs, reward, terminated, truncated, info


def make_lunar_lander_groups(
    continuous: bool = False, vector_reward_key: str = "vector_reward", **kwargs: Any
) -> LunarLanderRewardGroups:
    """
    The entry point of ``sb3_xppo/LunarLanderGroups-v3`` (and, with ``continuous=True``,
    ``sb3_xppo/LunarLanderContinuousGroups-v3``): gymnasium's ``LunarLander`` in :class:`LunarLanderRewardGroups`
    (``gym.make`` adds the time limit around it).

    :param continuous: LunarLanderContinuous's actions
    :param vector_reward_key: the info key written
    :param kwargs: ``LunarLander``'s other keywords (``render_mode``, ``gravity``, ``enable_wind``, ...)
    :return: the wrapped env
    """
    return LunarLanderRewardGroups(
        _lunar_lander_module().LunarLander(continuous=continuous, **kwargs), vector_reward_key=vector_reward_key
    )
