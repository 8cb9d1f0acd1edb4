"""rl-zoo3's tuned PPO hyperparameters and envs, built the zoo's way (one copy, for every benchmark that trains)."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import tempfile
from typing import Any

import rl_zoo3
from rl_zoo3.exp_manager import ExperimentManager
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv

from harness.layout import BENCHMARKS
from sb3_xppo.vec_env import VEC_ENV_FACTORIES

#: rl-zoo3's ppo.yml entries of the -v4 MuJoCo tasks under their v5 ids (ppo.yml has no v5 entries)
MUJOCO_V5_CONFIG = os.path.join(BENCHMARKS, "zoo_mujoco_v5.yml")
#: rl-zoo3's RecurrentPPO entries: the partially observed envs (velocities hidden) of the recurrent contenders
PPO_LSTM_CONFIG = os.path.join(os.path.dirname(rl_zoo3.__file__), "hyperparams", "ppo_lstm.yml")
#: the SPO paper's setup (Xie et al. 2025, the authors' MuJoCo code) on the MuJoCo v5 ids: the entries of the
#: contender ``xppo-paper`` (:mod:`harness.contenders`)
SPO_PAPER_CONFIG = os.path.join(BENCHMARKS, "spo_paper.yml")
ENV_CONFIGS = {
    "Hopper-v5": MUJOCO_V5_CONFIG,
    "HalfCheetah-v5": MUJOCO_V5_CONFIG,
    "Walker2d-v5": MUJOCO_V5_CONFIG,
    "Ant-v5": MUJOCO_V5_CONFIG,
    "CartPoleNoVel-v1": PPO_LSTM_CONFIG,
    "PendulumNoVel-v1": PPO_LSTM_CONFIG,
}


def zoo_budget(env_id: str) -> int:
    """The zoo's ``n_timesteps`` for ``env_id`` in rl-zoo3's ``ppo.yml`` (or the yml :data:`ENV_CONFIGS` names for it)."""
    return int(zoo_entry_of(None, env_id)["n_timesteps"])


def _zoo_manager(
    env_id: str, seed: int, log_folder: str, n_timesteps: int = 0, config: str | None = None
) -> ExperimentManager:
    """
    rl-zoo3's experiment manager on ``env_id``, quiet, without an eval callback (the benchmark has its own).

    :param config: the yml to read, rl-zoo3's ``ppo.yml`` when None (for the MuJoCo v5 ids, which it lacks, its
        -v4 entries in ``zoo_mujoco_v5.yml``)
    """
    if config is None:
        config = ENV_CONFIGS.get(env_id)
    with contextlib.redirect_stdout(io.StringIO()):
        return ExperimentManager(
            argparse.Namespace(),
            "ppo",
            env_id,
            log_folder,
            n_timesteps=n_timesteps,
            eval_freq=-1,
            seed=seed,
            verbose=0,
            device="cpu",
            config=config,
        )


def zoo_entry_of(config: str | None, env_id: str) -> dict[str, Any]:
    """The raw entry of ``env_id`` in the yml ``config`` (rl-zoo3's ``ppo.yml`` when None), as rl-zoo3 reads it."""
    with contextlib.redirect_stdout(io.StringIO()):
        return _zoo_manager(env_id, seed=0, log_folder=tempfile.gettempdir(), config=config).read_hyperparameters()[0]


def zoo_setup(
    env_id: str,
    seed: int,
    budget: int,
    log_folder: str,
    entry_overrides: dict[str, Any] | None = None,
    config: str | None = None,
    vec_env: str | None = None,
    render_mode: str | None = None,
) -> tuple[dict[str, Any], VecEnv, VecEnv, list[BaseCallback], dict[str, Any]]:
    """
    rl-zoo3's tuned PPO hyperparameters for ``env_id`` turned into objects, and the envs built the zoo's way.

    Uses ``ExperimentManager.read_hyperparameters`` / ``_preprocess_hyperparams`` / ``create_envs``: the steps of its
    ``setup_experiment`` up to the model, without its log folders and callbacks.

    :param entry_overrides: keys that replace the yml entry's before rl-zoo3 reads it (``normalize``, ``n_envs``...)
    :param config: the yml to read the entry from, rl-zoo3's ``ppo.yml`` when None
    :param vec_env: the training VecEnv's name (``sb3_xppo.zoo.VEC_ENV_CHOICES``; None: rl-zoo3's ``DummyVecEnv``);
        the evaluation VecEnv is rl-zoo3's ``DummyVecEnv`` whatever it is
    :param render_mode: the training envs' render mode (None: none, as rl-zoo3 makes them; ``"rgb_array"``: as SB3's
        ``make_vec_env(env_id)`` makes them)
    :return: model keywords (policy included), the training VecEnv, the evaluation VecEnv (no reward
        normalization, statistics synced by ``EvalCallback``), the entry's own callbacks and the raw yml entry
    """
    exp = _zoo_manager(env_id, seed, log_folder, n_timesteps=budget, config=config)
    with contextlib.redirect_stdout(io.StringIO()):
        raw, saved = exp.read_hyperparameters()
        raw.update(entry_overrides or {})
        hyperparams, exp.env_wrapper, callbacks, exp.vec_env_wrapper = exp._preprocess_hyperparams(raw)
        zoo_class = exp.vec_env_class
        if vec_env is not None:
            exp.vec_env_class = VEC_ENV_FACTORIES[vec_env]  # type: ignore[assignment]
        env_kwargs = exp.env_kwargs
        if render_mode is not None:
            exp.env_kwargs = {"render_mode": render_mode, **env_kwargs}
        env = exp.create_envs(exp.n_envs, no_log=True)
        exp.vec_env_class, exp.env_kwargs = zoo_class, env_kwargs
        eval_env = exp.create_envs(1, eval_env=True, no_log=True)
    return hyperparams, env, eval_env, callbacks, dict(saved)
