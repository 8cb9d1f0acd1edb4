"""
Non-finite data stopped at the door: a rollout's observations and rewards checked before any update reads them, and
a ``train()`` call rolled back whole when one of its losses or gradients is not finite.

SB3 leaves this to ``VecCheckNan``, which a user has to know about; without it one NaN reward trains into the
policy's parameters and the run dies later with a message about a distribution's arguments. Here the error names
the env, the step and the value at the point of entry, and the model stays as it was before the rollout.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch as th
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper, unwrap_vec_normalize
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn

RESUME_HINT = (
    "The model is unchanged since its last update: fix the environment, then save it or call learn() again "
    "(set_env() for a new env)."
)


def first_non_finite(values: np.ndarray) -> tuple[int, np.ndarray] | None:
    """
    The first row (env, or step) whose entry holds a non-finite number, or None when all are finite (and for integer
    dtypes, which always are).

    :param values: ``(rows, ...)`` array
    :return: ``(row index, that row's entry)`` or None
    """
    values = np.asarray(values)
    if not np.issubdtype(values.dtype, np.inexact):
        return None
    finite = np.isfinite(values)
    if finite.all():
        return None
    row = int(np.flatnonzero(~finite.reshape(len(values), -1).all(axis=1))[0])
    return row, values[row]


def check_finite_observation(obs: VecEnvObs, where: str) -> None:
    """
    Raise when a batched observation (array, or dict of arrays) holds a non-finite number.

    :param obs: ``(n_envs, ...)`` array or dict of those
    :param where: where it comes from, for the message (e.g. ``"at rollout step 3 (num_timesteps 96)"``)
    :raises ValueError: naming the env index, the Dict key and the values
    """
    items = obs.items() if isinstance(obs, dict) else [(None, obs)]
    for key, values in items:
        found = first_non_finite(values)  # type: ignore[arg-type]
        if found is not None:
            env, entry = found
            raise ValueError(f"non-finite {_observation(key)} from env {env} {where}: {_show(entry)}. {RESUME_HINT}")


def rollout_non_finite_error(
    rewards: np.ndarray, observations: VecEnvObs, steps: int, last_obs: VecEnvObs, num_timesteps: int
) -> ValueError | None:
    """
    The first non-finite reward or observation of a rollout, in the order the env returned them, or None.

    One vectorised ``np.isfinite`` per array for the whole rollout, after it (no cost per step): the buffer's row
    ``t`` holds step ``t``'s reward and the observation acted on at step ``t``, which step ``t - 1`` returned (row 0
    was checked when the rollout started); ``last_obs`` is what the last step returned.

    :param rewards: the buffer's ``(n_steps, n_envs)`` rewards (a truncated episode's already bootstrapped)
    :param observations: the buffer's ``(n_steps, n_envs, ...)`` observations, or a dict of those
    :param steps: how many rows were filled
    :param last_obs: the observation after the last filled row, ``(n_envs, ...)``
    :param num_timesteps: the model's step count when the rollout started
    :return: a ``ValueError`` naming the step, the env, the Dict key and the values
    """
    n_envs = len(rewards[0]) if len(rewards) else 1
    candidates = []  # (step that returned it, env, what, values)
    found = _first_cell(rewards[:steps])
    if found is not None:
        step, env, values = found
        shown = _show(values)
        candidates.append((step, env, f"reward {shown}", "(a truncated episode's reward includes gamma * V(terminal obs))"))
    items: list[tuple[Any, Any]] = list(observations.items()) if isinstance(observations, dict) else [(None, observations)]
    last_items: dict[Any, Any] = last_obs if isinstance(last_obs, dict) else {None: last_obs}
    for key, buffer_values in items:
        values = np.asarray(buffer_values)
        if not np.issubdtype(values.dtype, np.inexact):
            continue  # integers (Discrete, MultiBinary, images) are always finite
        # rows 1..steps-1 of the buffer, then the last observation (in the buffer's row shape): steps 0..steps-1
        last_row = np.asarray(last_items[key]).reshape(values.shape[1:])
        returned = np.concatenate((values[1:steps], last_row[None]), axis=0)
        found = _first_cell(returned)
        if found is not None:
            step, env, entry = found
            candidates.append((step, env, _observation(key), f": {_show(entry)}"))
    if not candidates:
        return None
    step, env, what, detail = min(candidates, key=lambda c: (c[0], c[1]))
    where = f"at rollout step {step} (num_timesteps {num_timesteps + (step + 1) * n_envs})"
    return ValueError(f"non-finite {what} from env {env} {where} {detail}. {RESUME_HINT}".replace(" :", ":"))


def _first_cell(values: np.ndarray) -> tuple[int, int, np.ndarray] | None:
    """The first ``(step, env)`` of a ``(steps, n_envs, ...)`` array holding a non-finite number, and its entry."""
    values = np.asarray(values)
    if len(values) == 0 or not np.issubdtype(values.dtype, np.inexact) or np.isfinite(values).all():
        return None
    bad = ~np.isfinite(values).reshape(values.shape[0], values.shape[1], -1).all(axis=2)
    step, env = (int(i[0]) for i in np.nonzero(bad))
    return step, env, values[step, env]


def _observation(key: str | None) -> str:
    return "observation" if key is None else f"observation[{key!r}]"


def _show(values: Any) -> str:
    return np.array2string(np.asarray(values), threshold=8, precision=4)


class VecNormalizeGuard(VecEnvWrapper):
    """
    For a chain with a training ``VecNormalize``: checks each step's raw observations and rewards as it keeps them
    (``old_obs``/``old_reward``), since an ``inf`` would be clipped into range after normalization and only show,
    misplaced, a step later; and when one is not finite, puts back the normalization's running statistics, which
    have just seen it, as they were when the rollout started. The chain itself is not changed (SB3's
    ``sync_envs_normalization`` walks it in step with the eval env's). Without ``VecNormalize`` the check after the
    rollout suffices (:func:`rollout_non_finite_error`), at no cost per step.

    :param venv: the training env, with a ``VecNormalize`` somewhere in its chain
    :param num_timesteps: the model's step count when the rollout starts (for the messages)
    """

    def __init__(self, venv: VecEnv, num_timesteps: int) -> None:
        super().__init__(venv)
        self.vec_normalize = unwrap_vec_normalize(venv)
        assert self.vec_normalize is not None
        self.start_timesteps, self.rollout_step = num_timesteps, 0
        state = vars(self.vec_normalize)
        # obs_rms only exists with norm_obs
        self.saved = copy.deepcopy({k: state[k] for k in ("obs_rms", "ret_rms", "returns") if k in state})

    def reset(self) -> VecEnvObs:
        return self.venv.reset()

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, dones, infos = self.venv.step_wait()
        timesteps = self.start_timesteps + (self.rollout_step + 1) * self.num_envs
        where = f"at rollout step {self.rollout_step} (num_timesteps {timesteps})"
        try:
            check_finite_reward(self.vec_normalize.old_reward, where)  # type: ignore[union-attr]
            check_finite_observation(self.vec_normalize.old_obs, where)  # type: ignore[union-attr]
        except ValueError:
            self.restore()
            raise
        self.rollout_step += 1
        return obs, rewards, dones, infos

    def restore(self) -> None:
        """Put the ``VecNormalize`` statistics back as they were when the rollout started."""
        for name, value in self.saved.items():
            setattr(self.vec_normalize, name, value)


def check_finite_reward(rewards: np.ndarray, where: str) -> None:
    """
    Raise when a step's rewards hold a non-finite number.

    :param rewards: ``(n_envs,)`` rewards
    :param where: where they come from, for the message
    :raises ValueError: naming the env index and the reward
    """
    found = first_non_finite(rewards)
    if found is not None:
        env, reward = found
        raise ValueError(f"non-finite reward {_show(reward)} from env {env} {where}. {RESUME_HINT}")


def guarded_env(env: VecEnv, num_timesteps: int) -> VecEnv:
    """
    The env to collect a rollout from: under a training ``VecNormalize``, wrapped in :class:`VecNormalizeGuard`.

    :param env: the training env
    :param num_timesteps: the model's step count when the rollout starts
    :return: ``env`` or the guarded env
    """
    vec_normalize = unwrap_vec_normalize(env)
    if vec_normalize is None or not vec_normalize.training:
        return env
    return VecNormalizeGuard(env, num_timesteps)


class TrainingSnapshot:
    """
    A copy of everything one ``train()`` call changes (the policy's parameters and buffers, the optimizer's state
    and the update counter), taken before it, so that the call can be undone whole.

    One copy per ``train()`` call, no host-device synchronisation: a non-finite loss or gradient is looked for
    once, after the epochs, in the statistics ``train()`` gathers anyway.

    :param model: the model about to train (its ``policy``, ``policy.optimizer`` and ``_n_updates``)
    :param enabled: False keeps no copy, and :meth:`restore` does nothing
    """

    def __init__(self, model: BaseAlgorithm, enabled: bool = True) -> None:
        self.model, self.enabled = model, enabled
        if not enabled:
            return
        self.n_updates = model._n_updates  # type: ignore[attr-defined]
        with th.no_grad():
            self.module_state = {name: value.clone() for name, value in model.policy.state_dict().items()}
            self.optimizer_state = {
                param: {k: v.clone() if isinstance(v, th.Tensor) else v for k, v in state.items()}
                for param, state in model.policy.optimizer.state.items()
            }

    def restore(self) -> None:
        """Put the policy, the optimizer and the update counter back as they were."""
        if not self.enabled:
            return
        optimizer = self.model.policy.optimizer
        with th.no_grad():
            self.model.policy.load_state_dict(self.module_state)
            for param in list(optimizer.state):
                if param not in self.optimizer_state:
                    del optimizer.state[param]  # lazily created by this call's first step
            for param, state in self.optimizer_state.items():
                optimizer.state[param] = {k: v.clone() if isinstance(v, th.Tensor) else v for k, v in state.items()}
        self.model._n_updates = self.n_updates  # type: ignore[attr-defined]


def non_finite_error(rows: np.ndarray, columns: Sequence[str], epochs: np.ndarray) -> ValueError | None:
    """
    The error to raise when a minibatch's loss terms or gradient norm were not finite, or None.

    :param rows: ``(M, len(columns))`` one row per minibatch, in order
    :param columns: what each column is (e.g. ``"policy loss"``, ``"gradient norm"``)
    :param epochs: ``(M,)`` epoch of each minibatch
    :return: a ``ValueError`` naming the first non-finite term, its epoch and minibatch
    """
    finite = np.isfinite(rows)
    if finite.all():
        return None
    row = int(np.flatnonzero(~finite.all(axis=1))[0])
    column = int(np.flatnonzero(~finite[row])[0])
    epoch = int(epochs[row])
    minibatch = int(row - np.flatnonzero(epochs == epoch)[0])
    return ValueError(
        f"train(): the {columns[column]} was {rows[row, column]} at epoch {epoch}, minibatch {minibatch}; this "
        "train() call was undone (parameters, optimizer state and update count are as before it) and nothing "
        "non-finite was written into the model. Look for exploding values (learning rate, reward scale, a loss hook)."
    )
