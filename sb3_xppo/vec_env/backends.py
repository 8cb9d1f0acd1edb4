"""
:func:`make_vec_env`: SB3's ``make_vec_env`` with the vector env chosen by name, the one place a backend is chosen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
from stable_baselines3.common import env_util
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

from sb3_xppo.vec_env.lean import LeanVecEnv

#: backend name -> the VecEnv class SB3's ``make_vec_env`` builds with it
VEC_ENV_CLASSES: dict[str, type[VecEnv]] = {"lean": LeanVecEnv, "dummy": DummyVecEnv, "subproc": SubprocVecEnv}
#: backend names taken for backends to come, refused until then
PLANNED_BACKENDS: tuple[str, ...] = ("envpool", "ray")


def check_backend(backend: str) -> type[VecEnv]:
    """
    :param backend: a backend's name
    :return: its VecEnv class (:data:`VEC_ENV_CLASSES`)
    :raises ValueError: for a planned backend (:data:`PLANNED_BACKENDS`) or an unknown name, naming the backends there are
    """
    choices = ", ".join(repr(name) for name in VEC_ENV_CLASSES)
    if backend in PLANNED_BACKENDS:
        raise ValueError(f"backend {backend!r} is not available yet; the backends are {choices}")
    if backend not in VEC_ENV_CLASSES:
        raise ValueError(f"unknown backend {backend!r}: choose one of {choices}")
    return VEC_ENV_CLASSES[backend]


def make_vec_env(
    env_id: str | Callable[..., gym.Env], n_envs: int = 1, *, backend: str = "lean", seed: int | None = None, **kwargs: Any
) -> VecEnv:
    """
    SB3's ``make_vec_env`` (each env in a ``Monitor``, the action spaces seeded ``seed + rank`` and the envs at their
    first reset) with the VecEnv of ``backend``:

    - ``"lean"`` (default): :class:`~sb3_xppo.vec_env.LeanVecEnv`, ``DummyVecEnv``'s numbers bit for bit, faster;
    - ``"dummy"``: SB3's ``DummyVecEnv``;
    - ``"subproc"``: SB3's ``SubprocVecEnv``, one process per env.

    ``"envpool"`` and ``"ray"`` are reserved for backends to come and raise a ``ValueError`` today.

    :param env_id: an env id, an env class or a function returning an env
    :param n_envs: the number of envs
    :param backend: the VecEnv's backend, one of :data:`VEC_ENV_CLASSES`
    :param seed: the first env's seed (None: unseeded)
    :param kwargs: SB3's ``make_vec_env`` keywords: ``start_index``, ``monitor_dir``, ``wrapper_class``, ``env_kwargs``,
        ``vec_env_kwargs`` (for ``"subproc"``: ``start_method``), ``monitor_kwargs``, ``wrapper_kwargs``; the backend
        stands for ``vec_env_cls``
    :return: the VecEnv
    :raises ValueError: for an unknown or planned backend, or ``vec_env_cls`` given
    """
    vec_env_cls = check_backend(backend)
    if "vec_env_cls" in kwargs:
        raise ValueError("make_vec_env chooses the VecEnv class by backend: pass backend=..., not vec_env_cls")
    return env_util.make_vec_env(env_id, n_envs=n_envs, seed=seed, vec_env_cls=vec_env_cls, **kwargs)  # type: ignore[arg-type]
