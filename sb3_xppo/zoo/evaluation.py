"""
Evaluation with action masks: a maskable model acts on its env's masks wherever rl-zoo3 evaluates or watches it
(:func:`masked_evaluation`), which rl-zoo3 itself does not do.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from stable_baselines3.common.vec_env import VecEnv


@contextlib.contextmanager
def _replaced(owner: Any, name: str, value: Any) -> Iterator[None]:
    """Set ``owner.name = value`` for the duration of the block, then put back exactly what was there."""
    had_own = name in vars(owner)
    saved = vars(owner).get(name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        if had_own:
            setattr(owner, name, saved)
        else:
            delattr(owner, name)


@contextlib.contextmanager
def masked_evaluation() -> Iterator[None]:
    """
    While the block runs, a maskable model (``MaskableXPPO``, or any sb3-contrib ``MaskablePPO``, and
    ``MaskableRecurrentXPPO``) acts on its env's action masks wherever rl-zoo3 evaluates or watches it; rl-zoo3
    itself calls ``model.predict(obs)`` without masks, and a model trained with masks has never learnt to avoid the
    invalid actions.

    - evaluation during training (rl-zoo3's ``EvalCallback``, and ``TrialEvalCallback`` under ``-optimize``): SB3's
      ``EvalCallback`` calls ``evaluate_policy`` through ``stable_baselines3.common.callbacks``; there it is
      replaced by sb3-contrib's masked ``evaluate_policy`` (the one of its ``MaskableEvalCallback``) for a maskable
      model on an env with ``action_masks()`` (:func:`sb3_xppo.ppo_mask_recurrent.evaluate_policy` for a
      ``MaskableRecurrentXPPO``: sb3-contrib's drops the LSTM state), and is SB3's own for everything else;
    - ``enjoy`` and ``record_video``: rl-zoo3 builds their env with ``create_test_env`` and then calls
      ``model.predict`` in its own loop; the env is noted, and ``MaskablePPO.predict`` (``MaskableRecurrentXPPO``'s)
      called without masks takes that env's current masks (``get_action_masks``).

    Everything is put back when the block ends.
    """
    import rl_zoo3.enjoy
    import rl_zoo3.utils
    import stable_baselines3.common.callbacks as sb3_callbacks
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.evaluation import evaluate_policy as evaluate_with_masks
    from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported

    from sb3_xppo.ppo_mask_recurrent import MaskableRecurrentXPPO
    from sb3_xppo.ppo_mask_recurrent import evaluate_policy as evaluate_recurrent_with_masks

    evaluate_policy = sb3_callbacks.evaluate_policy
    create_test_env = rl_zoo3.utils.create_test_env
    test_envs: list[VecEnv] = []

    def evaluate(model: Any, env: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(model, MaskablePPO) and is_masking_supported(env):
            return evaluate_with_masks(model, env, *args, **kwargs)
        if isinstance(model, MaskableRecurrentXPPO) and is_masking_supported(env):
            return evaluate_recurrent_with_masks(model, env, *args, **kwargs)
        return evaluate_policy(model, env, *args, **kwargs)

    def create_noted_test_env(*args: Any, **kwargs: Any) -> VecEnv:
        env = create_test_env(*args, **kwargs)
        test_envs.append(env)
        return env

    def with_masks(predict: Any) -> Any:
        """``predict`` (a maskable algorithm's), which takes the noted env's masks when called without any."""

        def predict_with_masks(
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

        return predict_with_masks

    with contextlib.ExitStack() as stack:
        stack.enter_context(_replaced(sb3_callbacks, "evaluate_policy", evaluate))
        # enjoy bound create_test_env when it was imported; record_video imports it from rl_zoo3.utils when it runs
        stack.enter_context(_replaced(rl_zoo3.enjoy, "create_test_env", create_noted_test_env))
        stack.enter_context(_replaced(rl_zoo3.utils, "create_test_env", create_noted_test_env))
        for maskable in (MaskablePPO, MaskableRecurrentXPPO):
            stack.enter_context(_replaced(maskable, "predict", with_masks(maskable.predict)))
        yield
