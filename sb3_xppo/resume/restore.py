"""``resume_model``: what ``XPPO.resume`` (and the sb3-contrib variants') does (docs/guide/resume.md)."""

from __future__ import annotations

import io
import logging
import os
import warnings
from typing import Any

from stable_baselines3.common.vec_env import VecEnv, VecNormalize, VecTransposeImage

from sb3_xppo.loading.gate import check_env_id
from sb3_xppo.resume.callbacks import restore_callbacks, restore_calls
from sb3_xppo.resume.envs import reach_envs, replay_envs, restore_vec_normalize
from sb3_xppo.resume.files import read_latest
from sb3_xppo.resume.ranks import read_on_ranks, restore_rank, written_on_ranks
from sb3_xppo.resume.state import MODEL, read_state, restore_logger, restore_model_state, restore_rng
from sb3_xppo.vec_env import make_vec_env

logger = logging.getLogger(__name__)

#: a VecEnv class name in a checkpoint -> the ``make_vec_env`` backend that rebuilds it
BACKENDS = {"LeanVecEnv": "lean", "DummyVecEnv": "dummy", "SubprocVecEnv": "subproc"}


class PendingResume:
    """
    What a resumed model's next ``learn()`` finishes: the run's total, its callbacks' states and counts, what the
    logger held at the checkpoint (the last ``train()``'s values, which the next log dump writes), and the RNG states
    again (the callbacks' setup in that ``learn()`` may draw, as a DaggerCallback's projector does: the original run
    drew those numbers before the checkpoint).
    """

    def __init__(self, state: dict[str, Any], exact: bool) -> None:
        self.total_timesteps: int = state["counters"]["_total_timesteps"]
        self.callbacks, self.calls, self.logger = state["callbacks"], state.get("callback_calls"), state.get("logger")
        self.rng = state["rng"]
        self.exact = exact

    def restore_callbacks(self, root: Any) -> None:
        restore_callbacks(root, self.callbacks, self.exact)
        restore_calls(root, self.calls)

    def restore_rng(self, model: Any) -> None:
        """Put the RNG states back again, after the callbacks' setup."""
        restore_rng(model, self.rng)

    def restore_logger(self, logger: Any) -> None:
        restore_logger(logger, self.logger)


def rebuilt_env(state: dict[str, Any], path: Any = "the checkpoint", trust_code: bool = False) -> VecEnv:
    """
    :param state: the checkpoint's state
    :param path: the checkpoint, for errors
    :param trust_code: let the recorded env id name any module for gymnasium to import
    :return: the run's VecEnv rebuilt from the checkpoint's record, where it is one ``make_vec_env`` builds
    :raises UnsafeFileError: for an env id whose module path is outside the allowlist (nothing imported)
    """
    envs = state["envs"]
    wrappers = [layer["wrapper"] for layer in envs.get("layers", [])]
    if envs["env_id"] is None or envs["vec_env"] not in BACKENDS:
        raise ValueError(
            f"resume() cannot rebuild the run's env (a {envs['vec_env']} of env id {envs['env_id']!r}): give it as env="
        )
    if set(wrappers) - {VecNormalize.__name__, VecTransposeImage.__name__}:
        raise ValueError(f"resume() cannot rebuild the run's VecEnv wrappers {wrappers}: give the env as env=")
    check_env_id(envs["env_id"], f"{path}: the env id", trust_code)
    venv = make_vec_env(envs["env_id"], envs["n_envs"], backend=BACKENDS[envs["vec_env"]])
    vec_normalize = state["vec_normalize"]
    if vec_normalize is not None:
        venv = VecNormalize(venv, **vec_normalize["settings"])
    return venv


def resume_model(cls: Any, folder: str | os.PathLike, env: Any = None, exact: bool = True, **kwargs: Any) -> Any:
    """
    :param cls: the algorithm class
    :param folder: a checkpoint folder (its newest checkpoint) or a checkpoint file; a data-parallel run's resumes on
        as many ranks, each calling this under the launcher (:func:`~sb3_xppo.resume.ranks.read_on_ranks`)
    :param env: the run's env, built as it was built (None: rebuilt from the checkpoint where it is a
        ``make_vec_env`` VecEnv of a registered env id)
    :param exact: rebuild the envs by replay, checked bit for bit; False: reset them afresh, as SB3 does
    :param kwargs: ``load()``'s further keywords (``device``, ``trust_code``, ...)
    :return: the model as it was at the checkpoint
    """
    if not isinstance(exact, bool):
        raise TypeError(f"exact must be a bool, got {exact!r}")
    if written_on_ranks(folder) or kwargs.get("distributed"):
        path, members, kwargs = read_on_ranks(folder, kwargs)
    else:
        path, members = read_latest(folder)
    state = read_state(members, path)
    if state["algorithm"] != cls.__name__:
        raise ValueError(f"{path} is a checkpoint of {state['algorithm']}: resume it with {state['algorithm']}.resume")
    if env is None:
        env = rebuilt_env(state, path, kwargs.get("trust_code", False))
    model = cls.load(io.BytesIO(members[MODEL]), env=env, force_reset=False, **kwargs)
    restore_model_state(model, state)
    restore_vec_normalize(model._vec_normalize_env, state["vec_normalize"], exact)
    if exact:
        reach_envs(model.env)  # (a DummyVecEnv of your own: its envs recorded as the run's were)
        replay_envs(model.env, state["envs"])
    else:
        model._last_obs = None  # the next learn() resets the envs, as SB3 does
        warnings.warn(
            f"resumed {path} with exact=False: the envs are reset afresh, as Stable-Baselines3 does; the run goes on, "
            "but not as the original one would have",
            stacklevel=3,
        )
    restore_rng(model, state["rng"])
    restore_rank(model, members)
    model._pending_resume = PendingResume(state, exact)
    logger.info("resumed %s at num_timesteps=%d", path, model.num_timesteps)
    return model
