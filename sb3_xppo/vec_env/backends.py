"""
:func:`make_vec_env`: SB3's ``make_vec_env`` with the vector env chosen by name, the one place a backend is chosen.

A backend is a builder (:data:`BACKEND_BUILDERS`): ``builder(env_id, n_envs, seed, **kwargs) -> VecEnv``. The
backends that are SB3 VecEnv classes (:data:`VEC_ENV_CLASSES`) are built by SB3's own ``make_vec_env``; so is EnvPool's,
whose VecEnv reads what to run from the env factories (:meth:`~sb3_xppo.vec_env.EnvPoolVecEnv.from_env_fns`); Ray's
(:class:`~sb3_xppo.vec_env.RayVecEnv`) makes SB3's env factories itself.

Envs are built for training: an env id is made without a render mode unless one is asked for
(:func:`with_render_mode`), where SB3's ``make_vec_env`` asks for ``"rgb_array"``. Rendering is decoration: the
numbers of every env gymnasium registers are the same both ways (``tests/test_render_modes.py``), and LunarLander
steps 2.5x faster without it, since with a render mode it simulates a Box2D particle per engine firing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol

import gymnasium as gym
from stable_baselines3.common import env_util
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv
from stable_baselines3.common.vec_env.patch_gym import _patch_env

from sb3_xppo.vec_env.envpool import EnvPoolVecEnv, envpool_task_id
from sb3_xppo.vec_env.lean import LeanVecEnv
from sb3_xppo.vec_env.ray_vec_env import RayVecEnv
from sb3_xppo.vec_env.replay import ActionRecorder

#: backend name -> the VecEnv class SB3's ``make_vec_env`` builds with it
VEC_ENV_CLASSES: dict[str, type[VecEnv]] = {"lean": LeanVecEnv, "dummy": DummyVecEnv, "subproc": SubprocVecEnv}


class BackendBuilder(Protocol):
    """Builds a backend's VecEnv: ``builder(env_id, n_envs, seed, **kwargs)``."""

    def __call__(self, env_id: str | Callable[..., gym.Env], n_envs: int, seed: int | None, /, **kwargs: Any) -> VecEnv: ...


def with_render_mode(
    env_id: str | Callable[..., gym.Env], render_mode: str | None, kwargs: dict[str, Any]
) -> tuple[Any, dict[str, Any]]:
    """
    What SB3's ``make_vec_env`` is given so that it builds the envs with ``render_mode``.

    - An env id with ``render_mode=None`` becomes ``functools.partial(gym.make, env_id)``: SB3 calls it with
      ``env_kwargs`` alone, so the env gets no render mode (an env whose constructor takes no ``render_mode`` still
      builds), where SB3 would add ``render_mode="rgb_array"``.
    - Any other ``render_mode`` joins ``env_kwargs``; so it does for an env class or factory, which SB3 calls as it is.
    - A ``render_mode`` in ``env_kwargs`` wins over the keyword.

    :param env_id: an env id, an env class or a function returning an env
    :param render_mode: the envs' render mode (None: none)
    :param kwargs: SB3's ``make_vec_env`` keywords
    :return: the env id or factory and the keywords to give SB3's ``make_vec_env``
    """
    env_kwargs = kwargs.get("env_kwargs") or {}
    if "render_mode" in env_kwargs:
        return env_id, kwargs
    if render_mode is None:
        return (functools.partial(gym.make, env_id) if isinstance(env_id, str) else env_id), kwargs
    return env_id, {**kwargs, "env_kwargs": {**env_kwargs, "render_mode": render_mode}}


def recorded_env(factory: Callable[..., Any], **env_kwargs: Any) -> gym.Env:
    """
    The env of an SB3 backend: ``factory(**env_kwargs)`` (patched to gymnasium's API as SB3 does) in an
    :class:`~sb3_xppo.vec_env.replay.ActionRecorder`, which SB3's ``make_vec_env`` then puts in its ``Monitor``: the
    env can be rebuilt by replay (docs/guide/resume.md).

    :param factory: an env class or a function returning an env
    :param env_kwargs: its keywords
    :return: the env
    """
    return ActionRecorder(_patch_env(factory(**env_kwargs)))


def recorded_above(wrapper_class: Callable[..., gym.Env], env: gym.Env, **wrapper_kwargs: Any) -> gym.Env:
    """
    A ``wrapper_class`` of SB3's ``make_vec_env`` with an :class:`~sb3_xppo.vec_env.replay.ActionRecorder` above it:
    a wrapper above the ``Monitor`` may keep a state (a frame buffer, a time feature), which a replay rebuilds only
    where it steps it.

    :param wrapper_class: the wrapper asked for
    :param env: the env in its ``Monitor``
    :param wrapper_kwargs: the wrapper's keywords
    :return: the wrapped env, recorded
    """
    return ActionRecorder(wrapper_class(env, **wrapper_kwargs))


def recording(env_id: Callable[..., Any], kwargs: dict[str, Any]) -> tuple[Callable[..., Any], dict[str, Any]]:
    """
    What SB3's ``make_vec_env`` (ours, rl-zoo3's) is given so that each env can be rebuilt by replay: an
    :class:`~sb3_xppo.vec_env.replay.ActionRecorder` directly beneath the ``Monitor`` (:func:`recorded_env`), and
    with a ``wrapper_class`` another above it (:func:`recorded_above`), which replays: it steps every wrapper, and the
    one beneath tells it which resets reset the env (Atari's lives wrapper makes some that do not).

    :param env_id: a function making the env (an env class, ``functools.partial(gym.make, env_id)``, rl-zoo3's)
    :param kwargs: SB3's ``make_vec_env`` keywords
    :return: the env factory and the keywords
    """
    wrapper_class = kwargs.get("wrapper_class")
    if wrapper_class is not None:
        kwargs = {**kwargs, "wrapper_class": functools.partial(recorded_above, wrapper_class)}
    return functools.partial(recorded_env, env_id), kwargs


def _sb3_builder(
    vec_env_cls: type[VecEnv], env_id: str | Callable[..., gym.Env], n_envs: int, seed: int | None, /, **kwargs: Any
) -> VecEnv:
    if "vec_env_cls" in kwargs:
        raise ValueError("make_vec_env chooses the VecEnv class by backend: pass backend=..., not vec_env_cls")
    render_mode = kwargs.pop("render_mode", None)
    env_id, kwargs = with_render_mode(env_id, render_mode, kwargs)
    if vec_env_cls in VEC_ENV_CLASSES.values():  # (EnvPool reads what to run from the env itself)
        env_id, kwargs = recording(env_id if callable(env_id) else functools.partial(gym.make, env_id), kwargs)
    return env_util.make_vec_env(env_id, n_envs=n_envs, seed=seed, vec_env_cls=vec_env_cls, **kwargs)  # type: ignore[arg-type]


def _envpool_builder(env_id: str | Callable[..., gym.Env], n_envs: int, seed: int | None, /, **kwargs: Any) -> VecEnv:
    # SB3's make_vec_env builds the env factories, EnvPoolVecEnv reads what to run from the first one's env; an id
    # EnvPool lacks is refused by name before gymnasium builds anything
    if isinstance(env_id, str):
        envpool_task_id(env_id)
    if kwargs.pop("render_mode", None) is not None:
        raise ValueError("EnvPool's envs do not render: build with backend='lean' to render, or leave render_mode out")
    return _sb3_builder(EnvPoolVecEnv.from_env_fns, env_id, n_envs, seed, **kwargs)  # type: ignore[arg-type]


def _ray_builder(env_id: str | Callable[..., gym.Env], n_envs: int, seed: int | None, /, **kwargs: Any) -> VecEnv:
    # RayVecEnv makes SB3's env factories itself and takes its own keywords (envs_per_actor, address, ...) and SB3's
    env_id, kwargs = with_render_mode(env_id, kwargs.pop("render_mode", None), kwargs)
    return RayVecEnv(env_id, n_envs, seed=seed, **kwargs)


#: backend name -> its builder, in the order the docs list them
BACKEND_BUILDERS: dict[str, BackendBuilder] = {
    **{name: functools.partial(_sb3_builder, vec_env_cls) for name, vec_env_cls in VEC_ENV_CLASSES.items()},
    "envpool": _envpool_builder,
    "ray": _ray_builder,
}


#: backend name -> what builds its VecEnv from env factories, as SB3's ``make_vec_env(vec_env_cls=...)`` and rl-zoo3
#: call it: ``factory(env_fns)``
VEC_ENV_FACTORIES: dict[str, Callable[[list[Callable[[], gym.Env]]], VecEnv]] = {
    **VEC_ENV_CLASSES,
    "envpool": EnvPoolVecEnv.from_env_fns,
    "ray": RayVecEnv.from_env_fns,
}


def check_backend(backend: str) -> BackendBuilder:
    """
    :param backend: a backend's name
    :return: its builder (:data:`BACKEND_BUILDERS`)
    :raises TypeError: for a backend that is not a string (e.g. a seed given third, where SB3's ``make_vec_env``
        takes it)
    :raises ValueError: for an unknown name, naming the backends there are
    """
    choices = ", ".join(repr(name) for name in BACKEND_BUILDERS)
    if not isinstance(backend, str):
        raise TypeError(
            f"backend must be a string, one of {choices}; got {type(backend).__name__} {backend!r} (the third positional "
            "argument is the backend, where SB3's make_vec_env takes the seed: pass seed=...)"
        )
    if backend not in BACKEND_BUILDERS:
        raise ValueError(f"unknown backend {backend!r}: choose one of {choices}")
    return BACKEND_BUILDERS[backend]


def make_vec_env(
    env_id: str | Callable[..., gym.Env],
    n_envs: int = 1,
    backend: str = "lean",
    seed: int | None = None,
    render_mode: str | None = None,
    **kwargs: Any,
) -> VecEnv:
    """
    SB3's ``make_vec_env`` (each env in a ``Monitor``, the action spaces seeded ``seed + rank`` and the envs at their
    first reset) with the VecEnv of ``backend``, its envs built for training: without a render mode unless
    ``render_mode`` asks for one (SB3's asks for ``"rgb_array"``; the numbers are the same, the steps faster):

    - ``"lean"`` (default): :class:`~sb3_xppo.vec_env.LeanVecEnv`, ``DummyVecEnv``'s numbers bit for bit, faster;
    - ``"dummy"``: SB3's ``DummyVecEnv``;
    - ``"subproc"``: SB3's ``SubprocVecEnv``, one process per env;
    - ``"envpool"``: :class:`~sb3_xppo.vec_env.EnvPoolVecEnv`, the env id's EnvPool twin (C++), for the ids of
      :data:`~sb3_xppo.vec_env.envpool.ENVPOOL_ENV_IDS`; ``vec_env_kwargs`` are EnvPool's options (``num_threads``),
      and what it cannot apply (``wrapper_class``, ``monitor_kwargs``, env keywords but ``max_episode_steps``) is a
      ``ValueError`` (:meth:`~sb3_xppo.vec_env.EnvPoolVecEnv.from_env_fns`);
    - ``"ray"``: :class:`~sb3_xppo.vec_env.RayVecEnv`, the envs in Ray actors on the nodes of a Ray cluster,
      ``DummyVecEnv``'s numbers; its keywords (``envs_per_actor``, ``address``, ``step_timeout``, ...) are passed as
      keywords here, beside SB3's (``vec_env_kwargs`` is refused).

    :param env_id: an env id, an env class or a function returning an env
    :param n_envs: the number of envs
    :param backend: the VecEnv's backend, one of :data:`BACKEND_BUILDERS`
    :param seed: the first env's seed (None: unseeded)
    :param render_mode: the envs' render mode, e.g. ``"rgb_array"`` for ``render()`` and ``VecVideoRecorder``
        (None: none; ``env_kwargs["render_mode"]`` wins over it); :func:`with_render_mode`
    :param kwargs: the backend's keywords; for the SB3 backends, SB3's ``make_vec_env`` keywords: ``start_index``,
        ``monitor_dir``, ``wrapper_class``, ``env_kwargs``, ``vec_env_kwargs`` (for ``"subproc"``: ``start_method``),
        ``monitor_kwargs``, ``wrapper_kwargs``; the backend stands for ``vec_env_cls``
    :return: the VecEnv
    :raises ValueError: for an unknown or planned backend, ``vec_env_cls`` given, or what the backend cannot run
    """
    return check_backend(backend)(env_id, n_envs, seed, render_mode=render_mode, **kwargs)
