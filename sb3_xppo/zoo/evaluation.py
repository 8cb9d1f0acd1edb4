"""
Evaluation with action masks: a maskable model acts on its env's masks wherever rl-zoo3 evaluates or watches it,
which rl-zoo3 itself does not do. rl-zoo3 calls ``model.predict(obs)`` without masks, and a model trained with masks
has never learnt to avoid the invalid actions.

- evaluation during training (rl-zoo3's ``EvalCallback``, and ``TrialEvalCallback`` under ``-optimize``): SB3's
  ``EvalCallback`` calls ``evaluate_policy`` through ``stable_baselines3.common.callbacks``, where
  :func:`masked_evaluate_policy` stands in: sb3-contrib's masked ``evaluate_policy`` (the one of its
  ``MaskableEvalCallback``) for a maskable model on an env with ``action_masks()``
  (:func:`sb3_xppo.ppo_mask_recurrent.evaluate_policy` for a ``MaskableRecurrentXPPO``: sb3-contrib's drops the LSTM
  state), SB3's own for everything else;
- ``enjoy`` and ``record_video``: rl-zoo3 builds their env with ``create_test_env`` and calls ``model.predict`` in its
  own loop; :func:`noting_test_envs` notes the env, and :func:`predict_with_masks` called without masks takes that
  env's current masks (``get_action_masks``).

:func:`sb3_xppo.zoo.session.install_masked_evaluation` puts them in place for a session.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def masked_evaluate_policy(evaluate_policy: Callable[..., Any]) -> Callable[..., Any]:
    """
    :param evaluate_policy: SB3's ``evaluate_policy``
    :return: ``evaluate_policy`` with the env's action masks for a maskable model on an env that has them
    """
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.evaluation import evaluate_policy as evaluate_with_masks
    from sb3_contrib.common.maskable.utils import is_masking_supported

    from sb3_xppo.ppo_mask_recurrent import MaskableRecurrentXPPO
    from sb3_xppo.ppo_mask_recurrent import evaluate_policy as evaluate_recurrent_with_masks

    def evaluate(model: Any, env: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(model, MaskablePPO) and is_masking_supported(env):
            return evaluate_with_masks(model, env, *args, **kwargs)
        if isinstance(model, MaskableRecurrentXPPO) and is_masking_supported(env):
            return evaluate_recurrent_with_masks(model, env, *args, **kwargs)
        return evaluate_policy(model, env, *args, **kwargs)

    return evaluate


def noting_test_envs(create_test_env: Callable[..., Any], test_envs: list[Any]) -> Callable[..., Any]:
    """
    :param create_test_env: rl-zoo3's ``create_test_env``
    :param test_envs: where each env it builds is appended
    :return: ``create_test_env``, noting its envs
    """

    def create_noted_test_env(*args: Any, **kwargs: Any) -> Any:
        env = create_test_env(*args, **kwargs)
        test_envs.append(env)
        return env

    return create_noted_test_env


def predict_with_masks(predict: Callable[..., Any], test_envs: list[Any]) -> Callable[..., Any]:
    """
    :param predict: a maskable algorithm's ``predict``
    :param test_envs: the envs rl-zoo3 built to watch a model (:func:`noting_test_envs`)
    :return: ``predict``, which takes the last noted env's masks when called without any
    """
    from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported

    def predict_masked(
        self: Any,
        observation: np.ndarray | dict[str, np.ndarray],
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
        action_masks: np.ndarray | None = None,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]:
        if action_masks is None and test_envs and is_masking_supported(test_envs[-1]):
            action_masks = get_action_masks(test_envs[-1])
        return predict(self, observation, state, episode_start, deterministic, action_masks)

    return predict_masked
