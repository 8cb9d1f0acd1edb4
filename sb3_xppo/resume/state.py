"""
What a resumable checkpoint holds and how it is put back (docs/guide/resume.md): the model's file (SB3's ``save``:
the policy with its PopArt statistics, the optimizer, every option and ``adaptive_kl_lr``), and beside it, without
pickle (:mod:`sb3_xppo.resume.codec`), the rollout position and counters, ``use_sde``'s noise, the RNG states,
VecNormalize's state, the envs' replay records and the resumable callbacks' states.
"""

from __future__ import annotations

import io
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch as th
from sb3_contrib.common.recurrent.type_aliases import RNNStates
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.distributions import StateDependentNoiseDistribution

from sb3_xppo.resume.callbacks import callbacks_state, calls_state
from sb3_xppo.resume.codec import decode, encode
from sb3_xppo.resume.envs import envs_state, vec_normalize_state
from sb3_xppo.resume.files import CorruptCheckpointError

#: the model's counters and rollout position, as SB3 keeps them
COUNTERS = ("num_timesteps", "_n_updates", "_current_progress_remaining", "_total_timesteps", "_episode_num")
#: the member names of a checkpoint
MODEL, STATE, ARRAYS = "model.zip", "state.json", "arrays.npz"
#: the layout of ``state.json`` this version writes and reads (a checkpoint of another is refused, naming both)
FORMAT = 1


class CheckpointFormatError(ValueError):
    """A checkpoint written in a layout this version of the package does not read (:data:`FORMAT`)."""


def rng_state(model: BaseAlgorithm) -> dict[str, Any]:
    """:return: torch's (CPU and every CUDA device's), numpy's global, Python's and the model's spaces' RNG states"""
    spaces = {}
    for name in ("action_space", "observation_space"):
        generator = getattr(model, name)._np_random
        spaces[name] = None if generator is None else generator.bit_generator.state
    return {
        "torch": th.get_rng_state().numpy(),
        "cuda": [state.numpy() for state in th.cuda.get_rng_state_all()] if th.cuda.is_initialized() else [],
        "numpy": np.random.get_state(),
        "random": random.getstate(),
        "spaces": spaces,
    }


def restore_rng(model: BaseAlgorithm, state: dict[str, Any]) -> None:
    """Put the RNG states :func:`rng_state` returned back."""
    th.set_rng_state(th.from_numpy(state["torch"].copy()))
    if state["cuda"]:
        th.cuda.set_rng_state_all([th.from_numpy(s.copy()) for s in state["cuda"]])
    np.random.set_state(state["numpy"])
    version, internal, gauss = state["random"]
    random.setstate((version, tuple(internal), gauss))
    for name, space_state in state["spaces"].items():
        if space_state is not None:
            getattr(model, name).np_random.bit_generator.state = space_state


def sde_noise(model: BaseAlgorithm) -> list[np.ndarray] | None:
    """
    :return: ``use_sde``'s noise matrices (the single one and the per-env ones) that the rollout after the boundary
        explores with: ``collect_rollouts`` draws them before the boundary's event, so the RNG states kept are past
        them (None without ``use_sde``)
    """
    if not getattr(model, "use_sde", False):
        return None
    dist = cast(StateDependentNoiseDistribution, model.policy.action_dist)
    return [dist.exploration_mat.detach().cpu().numpy(), dist.exploration_matrices.detach().cpu().numpy()]


def restore_sde_noise(model: BaseAlgorithm, noise: list[np.ndarray] | None) -> None:
    """Put the noise :func:`sde_noise` kept back, for the resumed run's first rollout (which then draws none)."""
    if noise is None:
        return
    dist = cast(StateDependentNoiseDistribution, model.policy.action_dist)
    dist.exploration_mat, dist.exploration_matrices = (th.as_tensor(a.copy(), device=model.device) for a in noise)
    model._sde_noise_resumed = True  # type: ignore[attr-defined]  # (XPPORolloutMixin's)


def _kept(value: Any) -> tuple[Any, Any]:
    """
    An observation, and its strides where they are not a copy's: the first step after the boundary reads it, and
    torch's kernels may round differently on another layout (``VecTransposeImage``'s transposed view of one-channel
    images has the strides of channels-last, which a convolution takes as such).

    :param value: an array, a dict of arrays (Dict observations) or None
    :return: the array(s), copied, and for each its strides (None: a copy's)
    """
    if value is None:
        return None, None
    if isinstance(value, dict):
        pairs = {key: _kept(array) for key, array in value.items()}
        return {key: pair[0] for key, pair in pairs.items()}, {key: pair[1] for key, pair in pairs.items()}
    copy = np.ascontiguousarray(value).copy()
    same = value.strides == copy.strides or min(value.strides, default=0) < 0  # (a reversed view: a copy's)
    return copy, None if same else list(value.strides)


def _restored(array: Any, strides: Any) -> Any:
    """:return: the value :func:`_kept` kept, with its strides"""
    if array is None:
        return None
    if isinstance(array, dict):
        return {key: _restored(value, None if strides is None else strides[key]) for key, value in array.items()}
    if strides is None:
        return array.copy()
    extent = sum((size - 1) * stride for size, stride in zip(array.shape, strides, strict=True)) + array.itemsize
    memory = np.empty(-(-extent // array.itemsize), dtype=array.dtype)
    laid_out = np.lib.stride_tricks.as_strided(memory, array.shape, strides, writeable=True)
    laid_out[...] = array
    return laid_out


@dataclass(frozen=True)
class ModelPart:
    """One part of the model that a checkpoint holds beside the model's file: its keys in ``state.json``, how
    :func:`capture` reads them off the model, and how :func:`restore_model_state` puts them back."""

    keys: tuple[str, ...]
    #: ``read(model) -> values``, one per key
    read: Callable[[BaseAlgorithm], tuple[Any, ...]]
    #: ``put(model, *values)``, the values as read
    put: Callable[..., None]


def _put_counters(model: BaseAlgorithm, counters: dict[str, Any]) -> None:
    for name, value in counters.items():  # (read_state let only COUNTERS through)
        setattr(model, name, value)


def _put_last_obs(model: BaseAlgorithm, last_obs: Any, strides: Any) -> None:
    model._last_obs = _restored(last_obs, strides)


def _put_last_original_obs(model: BaseAlgorithm, last_original_obs: Any, strides: Any) -> None:
    if last_original_obs is not None:
        model._last_original_obs = _restored(last_original_obs, strides)


def _lstm_states(model: BaseAlgorithm) -> tuple[list[np.ndarray] | None]:
    lstm = getattr(model, "_last_lstm_states", None)
    return (None if lstm is None else [t.cpu().numpy() for pair in lstm for t in pair],)


def _put_lstm_states(model: BaseAlgorithm, states: list[np.ndarray] | None) -> None:
    if states is not None:
        h_pi, c_pi, h_vf, c_vf = (th.as_tensor(a.copy(), device=model.device) for a in states)
        model._last_lstm_states = RNNStates((h_pi, c_pi), (h_vf, c_vf))  # type: ignore[attr-defined]


def _put_episode_buffers(model: BaseAlgorithm, infos: list[Any], successes: list[Any]) -> None:
    window = model._stats_window_size
    model.ep_info_buffer = deque(infos, maxlen=window)
    model.ep_success_buffer = deque(successes, maxlen=window)


#: what a checkpoint holds of the model beside its file, one row per part: :func:`capture` and
#: :func:`restore_model_state` both read this table
MODEL_PARTS = (
    ModelPart(("counters",), lambda model: ({name: getattr(model, name) for name in COUNTERS},), _put_counters),
    ModelPart(("last_obs", "last_obs_strides"), lambda model: _kept(model._last_obs), _put_last_obs),
    ModelPart(
        ("last_episode_starts",),
        lambda model: (np.array(model._last_episode_starts),),
        lambda model, starts: setattr(model, "_last_episode_starts", starts.copy()),
    ),
    ModelPart(
        ("last_original_obs", "last_original_obs_strides"),
        lambda model: _kept(getattr(model, "_last_original_obs", None)),
        _put_last_original_obs,
    ),
    ModelPart(("lstm_states",), _lstm_states, _put_lstm_states),
    ModelPart(("sde_noise",), lambda model: (sde_noise(model),), restore_sde_noise),
    ModelPart(
        ("ep_info_buffer", "ep_success_buffer"),
        lambda model: (list(model.ep_info_buffer or []), list(model.ep_success_buffer or [])),
        _put_episode_buffers,
    ),
)


def capture(model: BaseAlgorithm, root_callback: BaseCallback | None) -> dict[str, bytes]:
    """
    :param model: the model, at a rollout boundary (after ``train()``, before the next rollout)
    :param root_callback: the callback ``learn()`` runs (its resumable callbacks' states are kept)
    :return: the checkpoint's members
    """
    assert model.env is not None
    model_file = io.BytesIO()
    model.save(model_file)
    state: dict[str, Any] = {"format": FORMAT, "algorithm": type(model).__name__}
    for part in MODEL_PARTS:
        state.update(zip(part.keys, part.read(model), strict=True))
    state.update(
        {
            "rng": rng_state(model),
            "vec_normalize": vec_normalize_state(model._vec_normalize_env),
            "envs": envs_state(model.env),
            "callbacks": callbacks_state(root_callback),
            "callback_calls": calls_state(root_callback),
            "logger": logger_state(model),
        }
    )
    text, arrays = encode(state)
    return {MODEL: model_file.getvalue(), STATE: text, ARRAYS: arrays}


def logger_state(model: BaseAlgorithm) -> dict[str, Any] | None:
    """
    :return: what the model's logger holds for its next dump: the last ``train()``'s values, recorded after the
        previous dump (numbers and strings; SB3's other kinds, figures, videos, are not kept)
    """
    logger = getattr(model, "_logger", None)
    if logger is None:
        return None
    keys = [key for key, value in logger.name_to_value.items() if isinstance(value, (bool, int, float, str, np.generic))]
    return {
        "values": {key: logger.name_to_value[key] for key in keys},
        "counts": {key: logger.name_to_count[key] for key in keys if key in logger.name_to_count},
        "excluded": {key: logger.name_to_excluded[key] for key in keys if key in logger.name_to_excluded},
    }


def restore_logger(logger: Any, state: dict[str, Any] | None) -> None:
    """Put the values :func:`logger_state` kept into a resumed run's logger, for its first dump."""
    if state is None:
        return
    logger.name_to_value.update(state["values"])
    logger.name_to_count.update(state["counts"])
    logger.name_to_excluded.update(state["excluded"])


def read_state(members: dict[str, bytes], path: Any = "the checkpoint") -> dict[str, Any]:
    """
    :param members: the checkpoint's members
    :param path: the checkpoint, for errors
    :return: the state :func:`capture` wrote (no pickle)
    :raises CheckpointFormatError: for a checkpoint of another :data:`FORMAT`, naming it
    :raises CorruptCheckpointError: for counters other than the ones the package writes (a checkpoint sets no other
        attribute of the model), or a part of :data:`MODEL_PARTS` missing
    """
    try:
        state = decode(members[STATE], members[ARRAYS])
    except ValueError as error:
        raise CorruptCheckpointError(f"{path}: {error}") from None
    if not isinstance(state, dict):
        raise CorruptCheckpointError(f"{path}: its state is not a mapping")
    if state.get("format") != FORMAT:
        raise CheckpointFormatError(
            f"{path} is a checkpoint of format {state.get('format')!r}, and this version of sb3-xppo reads format "
            f"{FORMAT}: resume it with the version that wrote it"
        )
    missing = [key for part in MODEL_PARTS for key in part.keys if key not in state]
    if missing:
        raise CorruptCheckpointError(f"{path}: its state lacks {missing}")
    counters = state.get("counters")
    if not isinstance(counters, dict) or set(counters) != set(COUNTERS):
        names = sorted(counters) if isinstance(counters, dict) else counters
        raise CorruptCheckpointError(f"{path}: its counters are {names!r}, not the ones the package writes {list(COUNTERS)}")
    if not all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in counters.values()):
        raise CorruptCheckpointError(f"{path}: its counters are not numbers: {counters!r}")
    return state


def restore_model_state(model: BaseAlgorithm, state: dict[str, Any]) -> None:
    """
    Put the parts of :data:`MODEL_PARTS` back on a loaded model: the counters, the rollout position, the LSTM states,
    ``use_sde``'s noise and the episode buffers.
    """
    for part in MODEL_PARTS:
        part.put(model, *(state[key] for key in part.keys))
