"""
Evaluation of a maskable recurrent model: SB3's ``evaluate_policy`` loop, which carries the LSTM states from step to
step, with each step's action masks read from the env.

sb3-contrib's maskable ``evaluate_policy`` (2.9.2) cannot serve: with ``use_masking=True`` it binds the state
``model.predict`` returns to a name it never passes back (``actions, state = model.predict(..., state=states, ...)``),
so a recurrent model would act from a zero LSTM state at every step.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported
from stable_baselines3.common import evaluation
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv


class _MaskedPredictor:
    """``model.predict`` as SB3's ``evaluate_policy`` calls it, given the env's current action masks."""

    def __init__(self, model: Any, env: VecEnv) -> None:
        self.model, self.env = model, env

    def predict(
        self,
        observation: np.ndarray | dict[str, np.ndarray],
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]:
        masks = get_action_masks(self.env)
        return self.model.predict(observation, state, episode_start, deterministic, action_masks=masks)


def evaluate_policy(
    model: Any,
    env: Any,
    n_eval_episodes: int = 10,
    deterministic: bool = True,
    render: bool = False,
    callback: Any = None,
    reward_threshold: float | None = None,
    return_episode_rewards: bool = False,
    warn: bool = True,
    use_masking: bool = True,
) -> tuple[float, float] | tuple[list[float], list[int]]:
    """
    SB3's :func:`~stable_baselines3.common.evaluation.evaluate_policy` (its arguments, its return values) for a model
    whose ``predict`` takes ``state``, ``episode_start`` and ``action_masks`` (:class:`~sb3_xppo.MaskableRecurrentXPPO`):
    the LSTM states are carried from step to step (reset where an episode starts) and, with ``use_masking``, each
    step's actions are drawn among those the env's ``action_masks()`` allow.

    :param model: the model
    :param env: the env (a gymnasium env is put in a ``DummyVecEnv``)
    :param n_eval_episodes: number of episodes
    :param deterministic: the policy's mode instead of samples
    :param render: render the env
    :param callback: SB3's ``callback(locals, globals)``, called after each step
    :param reward_threshold: minimum expected mean reward (an ``AssertionError`` below it, as SB3's)
    :param return_episode_rewards: return every episode's return and length instead of their mean and std
    :param warn: warn when the env has no ``Monitor``
    :param use_masking: read the env's action masks (False: SB3's ``evaluate_policy`` unchanged)
    :return: as SB3's ``evaluate_policy``
    :raises ValueError: with ``use_masking`` for an env without ``action_masks()``
    """
    if not isinstance(env, VecEnv):
        env = DummyVecEnv([lambda: env])
    if use_masking and not is_masking_supported(env):
        raise ValueError("the env has no action_masks() method: wrap it in sb3_contrib.common.wrappers.ActionMasker")
    predictor = _MaskedPredictor(model, env) if use_masking else model
    return evaluation.evaluate_policy(
        predictor,  # type: ignore[arg-type]
        env,
        n_eval_episodes=n_eval_episodes,
        deterministic=deterministic,
        render=render,
        callback=callback,
        reward_threshold=reward_threshold,
        return_episode_rewards=return_episode_rewards,
        warn=warn,
    )
