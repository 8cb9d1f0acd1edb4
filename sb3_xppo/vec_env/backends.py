"""
:func:`make_vec_env`: SB3's ``make_vec_env`` with the vector env chosen by name, the one place a backend is chosen.

A backend is a builder (:data:`BACKEND_BUILDERS`): ``builder(env_id, n_envs, seed, **kwargs) -> VecEnv``. The
backends that are SB3 VecEnv classes (:data:`VEC_ENV_CLASSES`) are built by SB3's own ``make_vec_env``; the others
(EnvPool, Ray) build their envs themselves.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol

import gymnasium as gym
from stable_baselines3.common import env_util
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

from sb3_xppo.vec_env.lean import LeanVecEnv

#: backend name -> the VecEnv class SB3's ``make_vec_env`` builds with it
VEC_ENV_CLASSES: dict[str, type[VecEnv]] = {"lean": LeanVecEnv, "dummy": DummyVecEnv, "subproc": SubprocVecEnv}
#: backend names taken for backends to come, refused until then
PLANNED_BACKENDS: tuple[str, ...] = ("envpool", "ray")


class BackendBuilder(Protocol):
    """Builds a backend's VecEnv: ``builder(env_id, n_envs, seed, **kwargs)``."""

    def __call__(self, env_id: str | Callable[..., gym.Env], n_envs: int, seed: int | None, **kwargs: Any) -> VecEnv: ...


def _sb3_builder(
    vec_env_cls: type[VecEnv], env_id: str | Callable[..., gym.Env], n_envs: int, seed: int | None, /, **kwargs: Any
) -> VecEnv:
    if "vec_env_cls" in kwargs:
        raise ValueError("make_vec_env chooses the VecEnv class by backend: pass backend=..., not vec_env_cls")
    return env_util.make_vec_env(env_id, n_envs=n_envs, seed=seed, vec_env_cls=vec_env_cls, **kwargs)  # type: ignore[arg-type]


#: backend name -> its builder, in the order the docs list them
BACKEND_BUILDERS: dict[str, BackendBuilder] = {
    name: functools.partial(_sb3_builder, vec_env_cls) for name, vec_env_cls in VEC_ENV_CLASSES.items()
}


def check_backend(backend: str) -> BackendBuilder:
    """
    :param backend: a backend's name
    :return: its builder (:data:`BACKEND_BUILDERS`)
    :raises ValueError: for a planned backend (:data:`PLANNED_BACKENDS`) or an unknown name, naming the backends there are
    """
    choices = ", ".join(repr(name) for name in BACKEND_BUILDERS)
    if backend in PLANNED_BACKENDS and backend not in BACKEND_BUILDERS:
        raise ValueError(f"backend {backend!r} is not available yet; the backends are {choices}")
    if backend not in BACKEND_BUILDERS:
        raise ValueError(f"unknown backend {backend!r}: choose one of {choices}")
    return BACKEND_BUILDERS[backend]


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
    :param backend: the VecEnv's backend, one of :data:`BACKEND_BUILDERS`
    :param seed: the first env's seed (None: unseeded)
    :param kwargs: the backend's keywords; for the SB3 backends, SB3's ``make_vec_env`` keywords: ``start_index``,
        ``monitor_dir``, ``wrapper_class``, ``env_kwargs``, ``vec_env_kwargs`` (for ``"subproc"``: ``start_method``),
        ``monitor_kwargs``, ``wrapper_kwargs``; the backend stands for ``vec_env_cls``
    :return: the VecEnv
    :raises ValueError: for an unknown or planned backend, or ``vec_env_cls`` given
    """
    return check_backend(backend)(env_id, n_envs, seed, **kwargs)
