"""
The state of the callbacks that ask to be resumed. A callback opts in with two methods, ``resumable_state() -> dict``
(JSON-like: dicts, lists, numbers, strings, numpy arrays) and ``restore_state(state)``; SB3's ``EvalCallback`` is
resumed without them (:func:`eval_callback_state`), and so are the counters of SB3's and rl-zoo3's others that keep
some (:data:`COUNTERS`). When a resumed model's ``learn()`` starts, the states are put
into the callbacks it was given, matched in order and by type: the run's callbacks, built afresh the same way.

Every callback's ``n_calls`` is kept too (:func:`calls_state`): SB3's callbacks that act every so many steps count
them (``CheckpointCallback``, ``EvalCallback``), and a fresh count would shift them.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

from stable_baselines3.common.callbacks import (
    BaseCallback,
    CallbackList,
    EvalCallback,
    EventCallback,
)
from stable_baselines3.common.vec_env import unwrap_vec_normalize

from sb3_xppo.resume.envs import (
    envs_state,
    not_replayable,
    reach_envs,
    replay_envs,
    restore_vec_normalize,
    vec_normalize_state,
)

#: EvalCallback's counters and history, as SB3 keeps them
EVAL_FIELDS = (
    "n_calls",
    "num_timesteps",
    "best_mean_reward",
    "last_mean_reward",
    "evaluations_results",
    "evaluations_timesteps",
    "evaluations_length",
    "evaluations_successes",
    "_is_success_buffer",
)


def flattened(callback: BaseCallback | None) -> Iterator[BaseCallback]:
    """:return: every callback under ``callback``, in the order SB3 calls them (a list's members, an event's child)"""
    if callback is None:
        return
    if isinstance(callback, CallbackList):
        for member in callback.callbacks:
            yield from flattened(member)
        return
    yield callback
    if isinstance(callback, EventCallback):
        yield from flattened(callback.callback)


#: the counters of the callbacks from SB3 and rl-zoo3 that keep some, by class path and as they name them: without
#: them a resumed run would stop, act or log at other steps (``tests/test_private_attributes.py`` checks the names
#: against both libraries). A path, not a class, so that rl-zoo3 stays an extra this module does not import.
COUNTERS: dict[str, tuple[str, ...]] = {
    "stable_baselines3.common.callbacks.EveryNTimesteps": ("last_time_trigger",),
    "stable_baselines3.common.callbacks.StopTrainingOnMaxEpisodes": ("n_episodes",),
    "stable_baselines3.common.callbacks.StopTrainingOnNoModelImprovement": ("last_best_mean_reward", "no_improvement_evals"),
    "rl_zoo3.callbacks.RawStatisticsCallback": ("_timesteps_counter",),
}


def _counters(callback: BaseCallback) -> tuple[str, ...] | None:
    """:return: the counters :data:`COUNTERS` names for ``callback``'s class or a class it derives from, or None"""
    paths = (f"{cls.__module__}.{cls.__qualname__}" for cls in type(callback).__mro__)
    return next((COUNTERS[path] for path in paths if path in COUNTERS), None)


def resumable(callback: BaseCallback) -> bool:
    """:return: whether a checkpoint keeps ``callback``'s state"""
    if isinstance(callback, EvalCallback) or _counters(callback) is not None:
        return True
    return hasattr(callback, "resumable_state") and hasattr(callback, "restore_state")


def _state(callback: BaseCallback) -> dict[str, Any]:
    """:return: a resumable callback's state"""
    if isinstance(callback, EvalCallback):
        return eval_callback_state(callback)
    names = _counters(callback)
    if names is not None:
        return {name: getattr(callback, name) for name in names}
    return callback.resumable_state()  # type: ignore[attr-defined]


def eval_callback_state(callback: EvalCallback) -> dict[str, Any]:
    """:return: an EvalCallback's counters, evaluation history, best and last mean reward, and its eval env"""
    state: dict[str, Any] = {name: getattr(callback, name) for name in EVAL_FIELDS}
    env = callback.eval_env
    state["eval_env"] = envs_state(env) if not_replayable(env) is None else None
    state["eval_vec_normalize"] = vec_normalize_state(unwrap_vec_normalize(env))
    return state


def restore_eval_callback(callback: EvalCallback, state: dict[str, Any], exact: bool) -> None:
    """Put an EvalCallback's state back; its eval env rebuilt by replay (``exact``) or left fresh."""
    for name in EVAL_FIELDS:
        value = state[name]
        setattr(callback, name, list(value) if isinstance(value, list) else value)
    if exact and state["eval_env"] is not None:
        reach_envs(callback.eval_env)
        replay_envs(callback.eval_env, state["eval_env"])
    vec_normalize = unwrap_vec_normalize(callback.eval_env)
    if vec_normalize is not None and state["eval_vec_normalize"] is not None:
        restore_vec_normalize(vec_normalize, state["eval_vec_normalize"], exact)


def callbacks_state(root: BaseCallback | None) -> list[dict[str, Any]]:
    """:return: the type and state of each resumable callback under ``root``, in order"""
    return [
        {
            "type": type(callback).__qualname__,
            "state": _state(callback),
        }
        for callback in flattened(root)
        if resumable(callback)
    ]


def _types(callbacks: list[BaseCallback], saved: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """:return: the type names of the callbacks given and of those the checkpoint saved, in order, to compare"""
    return [type(c).__qualname__ for c in callbacks], [entry["type"] for entry in saved]


def calls_state(root: BaseCallback | None) -> list[dict[str, Any]]:
    """:return: the type and ``n_calls`` of every callback under ``root``, in order"""
    return [{"type": type(callback).__qualname__, "n_calls": callback.n_calls} for callback in flattened(root)]


def restore_calls(root: BaseCallback | None, saved: list[dict[str, Any]] | None) -> None:
    """
    Put every callback's ``n_calls`` back, where the callbacks under ``root`` are the checkpoint's in order and type;
    else warn that their counts start afresh (a progress bar added, say).
    """
    if saved is None:  # (a checkpoint written before the counts were kept)
        return
    callbacks = list(flattened(root))
    given, expected = _types(callbacks, saved)
    if given != expected:
        warnings.warn(
            f"the resumed learn() was given the callbacks {given}, the checkpoint's run had {expected}: their step "
            "counts (n_calls) start afresh, and the callbacks that act every so many steps act at other steps",
            stacklevel=4,
        )
        return
    for callback, entry in zip(callbacks, saved, strict=True):
        callback.n_calls = int(entry["n_calls"])


def restore_callbacks(root: BaseCallback | None, saved: list[dict[str, Any]], exact: bool) -> None:
    """
    Put the saved states into the resumable callbacks under ``root`` (the callbacks given to the resumed ``learn()``).

    :raises ValueError: where they are not the checkpoint's, in order and type (both lists named)
    """
    callbacks = [callback for callback in flattened(root) if resumable(callback)]
    given, expected = _types(callbacks, saved)
    if given != expected:
        raise ValueError(
            f"learn() of a resumed model must be given the run's callbacks: the checkpoint has the resumable callbacks "
            f"{expected}, learn() was given {given}"
        )
    for callback, entry in zip(callbacks, saved, strict=True):
        if isinstance(callback, EvalCallback):
            restore_eval_callback(callback, entry["state"], exact)
        elif _counters(callback) is not None:
            for name, value in entry["state"].items():
                setattr(callback, name, value)
        else:
            callback.restore_state(entry["state"])  # type: ignore[attr-defined]
