"""
The training envs' state in a checkpoint, and their rebuilding by replay: for each env its
:class:`~sb3_xppo.vec_env.replay.ActionRecorder`'s record and SB3's ``Monitor`` counters, through the VecEnv's
``env_method`` / ``get_attr`` (so ``DummyVecEnv``, ``LeanVecEnv`` and ``SubprocVecEnv`` alike); ``VecNormalize``'s
statistics and per-env return accumulators; ``VecFrameStack``'s frames and ``VecMonitor``'s counters.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.vec_env import (
    DummyVecEnv,
    VecEnv,
    VecEnvWrapper,
    VecFrameStack,
    VecMonitor,
    VecNormalize,
    VecTransposeImage,
)
from stable_baselines3.common.vec_env.stacked_observations import StackedObservations

from sb3_xppo.vec_env.lean import MONITOR_STATE, LeanVecEnv
from sb3_xppo.vec_env.replay import ActionRecorder, found_in_stack

#: SB3 ``Monitor``'s counters a checkpoint keeps: its state as ``vec_env/lean.py`` declares it, but for its settings,
#: CSV writer and reset keywords (``tests/test_private_attributes.py`` checks them against SB3)
MONITOR_COUNTERS = tuple(
    name for name in MONITOR_STATE if name not in ("info_keywords", "results_writer", "current_reset_info")
)
#: SB3 ``VecEnv``'s own state: the seeds and options its next ``reset()`` passes on (``seed()``, ``set_options()``;
#: ``tests/test_private_attributes.py`` checks them against SB3)
VEC_ENV_STATE = ("_seeds", "_options")
#: SB3 ``VecMonitor``'s counters a checkpoint keeps (its CSV writer is the run's own)
VEC_MONITOR_COUNTERS = ("episode_returns", "episode_lengths", "episode_count", "t_start")
#: the VecEnv wrappers between the model and its envs that a replay restores: VecNormalize (its state saved,
#: :func:`vec_normalize_state`), VecFrameStack and VecMonitor (their state saved, :func:`layers_state`), the stateless
#: VecTransposeImage
REPLAYABLE_WRAPPERS = (VecNormalize, VecTransposeImage, VecFrameStack, VecMonitor)
#: VecNormalize's settings, to rebuild it where ``resume`` is given no env
VEC_NORMALIZE_SETTINGS = (
    "training",
    "norm_obs",
    "norm_reward",
    "clip_obs",
    "clip_reward",
    "gamma",
    "epsilon",
    "norm_obs_keys",
)


def reach_envs(venv: VecEnv) -> None:
    """
    Put an :class:`~sb3_xppo.vec_env.replay.ActionRecorder` around each env of a ``DummyVecEnv`` that has none (a
    VecEnv of your own, whose envs can be reached), so that it can be rebuilt by replay. Call it before the envs'
    next reset, which the recorder must see: a run's first (``learn()``'s, an evaluation's), or a replay's. Recorded
    at the top of the env's stack, the replay also steps the wrappers above its ``Monitor``, whose counters are put
    back after it.
    """
    layer: Any = venv
    while isinstance(layer, REPLAYABLE_WRAPPERS):
        layer = layer.venv
    if not isinstance(layer, DummyVecEnv) or isinstance(layer, LeanVecEnv):  # (a LeanVecEnv steps beneath its recorder)
        return
    for index, wrapped in enumerate(layer.env_is_wrapped(ActionRecorder)):
        if not wrapped:
            layer.envs[index] = ActionRecorder(layer.envs[index])


def not_replayable(venv: VecEnv) -> str | None:
    """:return: why ``venv``'s envs cannot be rebuilt by replay, or None where they can"""
    layer: Any = venv
    while isinstance(layer, VecEnvWrapper):
        if not isinstance(layer, REPLAYABLE_WRAPPERS):
            return f"its VecEnv wrapper {type(layer).__name__} keeps a state a replay does not rebuild"
        layer = layer.venv
    missing = [index for index, wrapped in enumerate(venv.env_is_wrapped(ActionRecorder)) if not wrapped]
    if missing:
        return (
            f"env {missing[0]} has no ActionRecorder to replay (build the envs with sb3_xppo.vec_env.make_vec_env, "
            "give XPPO an env id, or wrap each env in sb3_xppo.vec_env.replay.ActionRecorder beneath its Monitor)"
        )
    return None


def _rms_state(rms: RunningMeanStd | dict[str, RunningMeanStd]) -> Any:
    if isinstance(rms, dict):
        return {key: _rms_state(value) for key, value in rms.items()}
    return {"mean": rms.mean, "var": rms.var, "count": rms.count}


def _restore_rms(rms: RunningMeanStd | dict[str, RunningMeanStd], state: Any) -> None:
    if isinstance(rms, dict):
        for key, value in rms.items():
            _restore_rms(value, state[key])
        return
    rms.mean, rms.var, rms.count = state["mean"].copy(), state["var"].copy(), state["count"]


def vec_normalize_state(vec_normalize: VecNormalize | None) -> dict[str, Any] | None:
    """:return: a VecNormalize's statistics, return accumulators, last raw observation and reward, and settings"""
    if vec_normalize is None:
        return None
    return {
        "obs_rms": _rms_state(vec_normalize.obs_rms) if vec_normalize.norm_obs else None,
        "ret_rms": _rms_state(vec_normalize.ret_rms),
        "returns": vec_normalize.returns,
        # (set at its first reset or step: an eval env's is not before its first evaluation)
        "old_obs": vars(vec_normalize).get("old_obs"),
        "old_reward": vars(vec_normalize).get("old_reward"),
        "settings": {name: getattr(vec_normalize, name) for name in VEC_NORMALIZE_SETTINGS},
    }


def restore_vec_normalize(vec_normalize: VecNormalize | None, state: dict[str, Any] | None, exact: bool) -> None:
    """
    Put a VecNormalize's state back (with ``exact=False``, its return accumulators start at zero, as after a reset).

    :raises ValueError: where the checkpoint and the env disagree on having one, or on its settings (each one that
        differs named, with both values), as the spaces are compared
    """
    if (vec_normalize is None) != (state is None):
        raise ValueError(
            "the checkpoint was written with a VecNormalize and the env given has none, or the other way round: "
            "give resume() the env the run was built with"
        )
    if vec_normalize is None or state is None:
        return
    saved = state.get("settings", {})
    differ = [
        f"{name}: {saved[name]!r} in the checkpoint, {getattr(vec_normalize, name)!r} in the env given"
        for name in VEC_NORMALIZE_SETTINGS
        if name in saved and not _same_setting(saved[name], getattr(vec_normalize, name))
    ]
    if differ:
        raise ValueError(
            "the env given has a VecNormalize of other settings than the run's (" + "; ".join(differ) + "): give "
            "resume() the env the run was built with"
        )
    if state["obs_rms"] is not None:
        _restore_rms(vec_normalize.obs_rms, state["obs_rms"])
    _restore_rms(vec_normalize.ret_rms, state["ret_rms"])
    if exact:
        vec_normalize.returns = state["returns"].copy()
        if state["old_obs"] is not None:
            vec_normalize.old_obs, vec_normalize.old_reward = state["old_obs"], state["old_reward"]
    else:
        vec_normalize.returns = np.zeros(vec_normalize.num_envs)


def _same_setting(saved: Any, given: Any) -> bool:
    """A VecNormalize setting as the checkpoint holds it (numbers, lists of keys) against the env's."""
    if isinstance(saved, (list, tuple)) or isinstance(given, (list, tuple)):
        return list(saved or []) == list(given or [])
    return bool(saved == given)


def _stacked_state(stacked: StackedObservations) -> Any:
    """:return: a ``VecFrameStack``'s frames (per key for a Dict space)"""
    if isinstance(stacked.observation_space, spaces.Dict):
        return {key: sub.stacked_obs.copy() for key, sub in stacked.sub_stacked_observations.items()}
    return stacked.stacked_obs.copy()


def _restore_stacked(stacked: StackedObservations, state: Any) -> None:
    if isinstance(stacked.observation_space, spaces.Dict):
        for key, sub in stacked.sub_stacked_observations.items():
            sub.stacked_obs = state[key].copy()
    else:
        stacked.stacked_obs = state.copy()


def layers_state(venv: VecEnv) -> list[dict[str, Any]]:
    """
    :return: the VecEnv wrappers between the model and its envs, outermost first, each with its state where a
        checkpoint keeps it here: ``VecFrameStack``'s frames, ``VecMonitor``'s counters (VecNormalize's is
        :func:`vec_normalize_state`'s)
    """
    layers, layer = [], venv
    while isinstance(layer, VecEnvWrapper):
        state: Any = None
        if isinstance(layer, VecFrameStack):
            state = _stacked_state(layer.stacked_obs)
        elif isinstance(layer, VecMonitor):
            state = {name: getattr(layer, name) for name in VEC_MONITOR_COUNTERS}
        layers.append({"wrapper": type(layer).__name__, "state": state})
        layer = layer.venv
    return layers


def restore_layers(venv: VecEnv, layers: list[dict[str, Any]]) -> None:
    """
    Put the state :func:`layers_state` kept back on the same VecEnv wrappers.

    :raises ValueError: where the env's wrappers are not the run's (both named)
    """
    found = [layer["wrapper"] for layer in layers_state(venv)]
    if found != [layer["wrapper"] for layer in layers]:
        raise ValueError(
            f"the checkpoint's VecEnv wrappers are {[layer['wrapper'] for layer in layers]} and the env given has "
            f"{found}: give resume() the env the run was built with"
        )
    layer: Any = venv
    for kept in layers:
        if isinstance(layer, VecFrameStack):
            _restore_stacked(layer.stacked_obs, kept["state"])
        elif isinstance(layer, VecMonitor):
            for name, value in kept["state"].items():
                setattr(layer, name, value.copy() if isinstance(value, np.ndarray) else value)
        layer = layer.venv


def envs_state(venv: VecEnv) -> dict[str, Any]:
    """:return: each env's replay record and Monitor counters, and what rebuilds the VecEnv where none is given"""
    reason = not_replayable(venv)
    n_envs = venv.num_envs
    state: dict[str, Any] = {"n_envs": n_envs, "vec_env": type(venv.unwrapped).__name__, "not_replayable": reason}
    try:
        spec = venv.get_attr("spec", indices=[0])[0]
    except AttributeError:  # (EnvPool's envs are C++ objects, without one)
        spec = None
    state["env_id"] = spec.id if spec is not None else None
    state["pending"] = {name: getattr(venv.unwrapped, name) for name in VEC_ENV_STATE}
    if reason is None:
        state["layers"] = layers_state(venv)
        state["snapshots"] = [venv.env_method("replay_snapshot", indices=[i])[0] for i in range(n_envs)]
        state["monitors"] = [
            {name: venv.get_attr(name, indices=[i])[0] for name in MONITOR_COUNTERS} if wrapped else None
            for i, wrapped in enumerate(venv.env_is_wrapped(Monitor))
        ]
    return state


def _set_monitor(venv: VecEnv, index: int, counters: dict[str, Any]) -> None:
    """
    Put an env's Monitor counters back: on the Monitor itself (``DummyVecEnv``: found in the stack; else the outermost
    wrapper, or through the recorder at the top of the stack, above the wrappers over the Monitor).
    """
    base = venv.unwrapped
    if isinstance(base, DummyVecEnv):
        monitor = found_in_stack(base.envs[index], Monitor)
        for name, value in counters.items():
            setattr(monitor, name, value)
    elif venv.env_method("class_name", indices=[index])[0] == Monitor.__name__:
        for name, value in counters.items():
            venv.set_attr(name, value, indices=[index])
    else:
        venv.env_method("restore_monitor", counters, indices=[index])


def replay_envs(venv: VecEnv, state: dict[str, Any]) -> None:
    """
    Rebuild each env by replay, checked bit for bit, and put its Monitor counters back.

    :raises ValueError: the envs cannot be replayed (the reason named), or their number differs
    :raises ~sb3_xppo.vec_env.replay.ReplayMismatchError: an env that does not replay exactly (its index and step named)
    """
    if venv.num_envs != state["n_envs"]:
        raise ValueError(f"the checkpoint has {state['n_envs']} envs and the env given has {venv.num_envs}")
    reason = state["not_replayable"] or not_replayable(venv)
    if reason is not None:
        raise ValueError(f"the envs cannot be rebuilt exactly: {reason}. Resume with exact=False to reset them afresh")
    for name, value in state["pending"].items():
        setattr(venv.unwrapped, name, list(value))
    if "layers" in state:  # (written since VecFrameStack and VecMonitor resume)
        restore_layers(venv, state["layers"])
    for index, (snapshot, monitor) in enumerate(zip(state["snapshots"], state["monitors"], strict=True)):
        rewards = list(monitor["rewards"]) if monitor is not None else None
        venv.env_method("replay", snapshot, rewards, index, indices=[index])
        if monitor is not None:
            _set_monitor(venv, index, {k: (list(v) if isinstance(v, list) else v) for k, v in monitor.items()})
