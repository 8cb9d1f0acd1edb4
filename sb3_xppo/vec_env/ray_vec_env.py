"""
:class:`RayVecEnv`: SB3's ``VecEnv`` whose envs live in Ray actors, ``envs_per_actor`` to an actor, on any node of a
Ray cluster. Each actor holds a :class:`~sb3_xppo.vec_env.LeanVecEnv` of its envs (``DummyVecEnv``'s numbers), so
``terminal_observation``, ``TimeLimit.truncated``, the ``Monitor``'s ``episode``, seeding and reset options are
``DummyVecEnv``'s; a step is one remote call per actor, all actors stepping at once, gathered with ``ray.wait``.

Faults are bounded and named: an actor that dies, or a call that takes longer than ``step_timeout`` seconds, raises a
:class:`RayEnvActorError` (:class:`RayEnvTimeoutError`) that names the actor, its node and its env indices. Actors are
never restarted (a restarted actor's envs would splice two episodes into one rollout): the failed ``RayVecEnv``
releases its actors and refuses every later call, as a closed one does.

Ray is an optional dependency (``pip install "sb3-xppo[ray]"``), imported when a ``RayVecEnv`` is built.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from stable_baselines3.common import env_util
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvObs, VecEnvStepReturn
from stable_baselines3.common.vec_env.util import dict_to_obs, obs_space_info

from sb3_xppo.vec_env.lean import LeanVecEnv, fresh_info

#: Ray actor options that :class:`RayVecEnv` sets itself: an actor is never restarted, nor a call retried
NO_RESTART_OPTIONS: dict[str, int] = {"max_restarts": 0, "max_task_retries": 0}


def import_ray() -> ModuleType:
    """
    :return: the ``ray`` module
    :raises ImportError: where Ray is not installed, naming the extra that installs it
    """
    try:
        import ray
    except ImportError as error:
        raise ImportError('RayVecEnv needs Ray: pip install "sb3-xppo[ray]"') from error
    return ray


@dataclass(frozen=True)
class ActorPlacement:
    """
    Where one actor of a :class:`RayVecEnv` runs, for its error messages.

    :param actor: the actor's index
    :param env_indices: the indices (in the ``RayVecEnv``) of the envs it holds
    :param node_ip: the IP address of its node (None until it has started)
    :param node_id: its node's Ray id (None until it has started)
    :param pid: its worker process's id (None until it has started)
    """

    actor: int
    env_indices: tuple[int, ...]
    node_ip: str | None = None
    node_id: str | None = None
    pid: int | None = None

    @property
    def node(self) -> str:
        """:return: the node, as the messages name it: ``"<ip> (<node id, 8 digits>)"``, or ``"not placed yet"``"""
        if self.node_id is None:
            return "not placed yet"
        return f"{self.node_ip} ({self.node_id[:8]})"

    def __str__(self) -> str:
        pid = "" if self.pid is None else f", pid {self.pid}"
        return f"actor {self.actor} on node {self.node}{pid}, holding envs {list(self.env_indices)}"


class RayEnvActorError(RuntimeError):
    """
    An actor of a :class:`RayVecEnv` died (or its node did); the ``RayVecEnv`` has released its actors.

    :param placement: the actor
    :param what: what happened, for the message
    """

    def __init__(self, placement: ActorPlacement, what: str) -> None:
        self.placement, self.what = placement, what
        #: the actor's index, its node (as :attr:`ActorPlacement.node`) and the indices of its envs
        self.actor, self.node, self.env_indices = placement.actor, placement.node, placement.env_indices
        super().__init__(f"RayVecEnv {placement}: {what}")

    def __reduce__(self) -> tuple[type, tuple[ActorPlacement, str]]:
        return type(self), (self.placement, self.what)


class RayEnvTimeoutError(RayEnvActorError, TimeoutError):
    """A call to an actor of a :class:`RayVecEnv` took longer than its ``step_timeout`` (or ``start_timeout``)."""


class EnvActor:
    """
    What one Ray actor of a :class:`RayVecEnv` runs: a :class:`~sb3_xppo.vec_env.LeanVecEnv` of its envs, whose
    methods take the envs' indices within the actor. Observations travel as the LeanVecEnv's buffers (one array per
    key of the observation space).

    :param env_fns: functions that each build one of its envs
    """

    def __init__(self, env_fns: list[Callable[[], gym.Env]]) -> None:
        self.venv = LeanVecEnv(env_fns)

    def describe(self) -> tuple[spaces.Space, spaces.Space, str, str, int]:
        """:return: the observation and action spaces, the node's IP address and Ray id, the process id"""
        import os

        ray = import_ray()
        node_id = ray.get_runtime_context().get_node_id()
        return self.venv.observation_space, self.venv.action_space, ray.util.get_node_ip_address(), node_id, os.getpid()

    def reset(
        self, seeds: list[int | None], options: list[dict[str, Any]]
    ) -> tuple[OrderedDict[str, np.ndarray], list[dict[str, Any]]]:
        """:return: the observation buffers after a reset with these seeds and options, and the reset infos"""
        # the seeds and options of the next reset, as VecEnv.seed and VecEnv.set_options keep them
        self.venv._seeds, self.venv._options = seeds, options
        self.venv.reset()
        return self.venv.buf_obs, self.venv.reset_infos

    def step(
        self, actions: np.ndarray
    ) -> tuple[OrderedDict[str, np.ndarray], np.ndarray, np.ndarray, list[dict[str, Any]], list[dict[str, Any]]]:
        """:return: the observation buffers, rewards, dones, infos and reset infos after stepping with ``actions``"""
        self.venv.step_async(actions)
        _, rewards, dones, infos = self.venv.step_wait()
        return self.venv.buf_obs, rewards, dones, infos, self.venv.reset_infos

    def get_images(self) -> Sequence[np.ndarray | None]:
        return self.venv.get_images()

    def has_attr(self, attr_name: str) -> bool:
        return self.venv.has_attr(attr_name)

    def get_attr(self, indices: list[int], attr_name: str) -> list[Any]:
        return self.venv.get_attr(attr_name, indices)

    def set_attr(self, indices: list[int], attr_name: str, value: Any) -> list[None]:
        self.venv.set_attr(attr_name, value, indices)
        return [None] * len(indices)

    def env_method(self, indices: list[int], method_name: str, args: tuple, kwargs: dict[str, Any]) -> list[Any]:
        return self.venv.env_method(method_name, *args, indices=indices, **kwargs)

    def env_is_wrapped(self, indices: list[int], wrapper_class: type[gym.Wrapper]) -> list[bool]:
        return self.venv.env_is_wrapped(wrapper_class, indices)

    def close(self) -> None:
        self.venv.close()


@functools.cache
def remote_env_actor() -> Any:
    """:return: :class:`EnvActor` as a Ray actor class (made once per process)"""
    return import_ray().remote(EnvActor)


def connect(address: str | None) -> None:
    """
    Connect this process to Ray: ``ray.init(address=address)``, unless it is connected already.

    :param address: None (start or join a local Ray instance, or the cluster ``RAY_ADDRESS`` names), ``"auto"`` or
        a cluster's address (``"host:port"`` of its head, ``"ray://..."``)
    :raises ValueError: where this process is connected to a cluster other than ``address`` (Ray allows one)
    """
    ray = import_ray()
    if not ray.is_initialized():
        ray.init(address=address)
        return
    current = ray.get_runtime_context().gcs_address
    if address not in (None, "auto", current):
        raise ValueError(
            f"RayVecEnv(address={address!r}): this process is connected to the Ray cluster at {current!r}, and a "
            "process joins one cluster; pass address=None to use it, or call ray.shutdown() first"
        )


class _EnvFactories(list):
    """Stands for the VecEnv class in SB3's ``make_vec_env``: keeps the env factories it makes, and calls none."""

    def seed(self, seed: int | None = None) -> list[int | None]:
        return []


def _positive(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, got {value!r}")
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a positive, finite number of seconds, got {value!r}")
    return float(value)


def _count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    return int(value)


class RayVecEnv(VecEnv):
    """
    An SB3 ``VecEnv`` whose envs live in Ray actors, ``envs_per_actor`` to an actor, on any node of a Ray cluster;
    for any SB3 or sb3-contrib algorithm, on- or off-policy. The envs are SB3's ``make_vec_env``'s (each in a
    ``Monitor``, its action space seeded ``seed + rank``, the first reset seeded ``seed + rank``), and each actor
    steps its envs as ``DummyVecEnv`` does: the observations, rewards, dones and infos are ``DummyVecEnv``'s for the
    same seed, and so a model's parameters after ``learn()``. ``env_method``, ``get_attr``, ``set_attr``,
    ``env_is_wrapped``, ``has_attr`` and ``render`` reach the envs where they live; MaskableXPPO's action masks are
    ``env_method("action_masks")``.

    A step is one remote call per actor, all actors stepping at once. A call that an actor does not answer within
    ``step_timeout`` seconds raises :class:`RayEnvTimeoutError`, an actor that dies :class:`RayEnvActorError`; both
    name the actor, its node and its env indices. Actors are never restarted: the ``RayVecEnv`` then releases its
    actors and refuses every later call, as after :meth:`close`; ``learn()`` stops with the error, the model keeping
    the parameters of its last complete update. An exception raised by an env's own code reaches the caller as that
    exception.

    Every node needs the Python environment of this process (sb3-xppo, the env's packages), or a Ray ``runtime_env``
    that brings it (``actor_options=dict(runtime_env=...)``). ``ray.init`` is called where this process is not
    connected to Ray yet; call it first to start Ray with options of your own. ``close()`` releases the actors and
    leaves the connection.

    :param env: an env id, or a picklable env factory (an env class or a function returning an env), built in the
        actors
    :param n_envs: the number of envs
    :param envs_per_actor: the number of envs each actor holds (the last actor holds the rest)
    :param address: the Ray cluster to join: None starts or joins a local Ray instance (``ray.init()``; the cluster
        ``RAY_ADDRESS`` names, where set), ``"auto"`` joins the cluster ``ray start`` started on this machine,
        ``"host:port"`` the cluster whose head is there (``ray start --head`` elsewhere)
    :param step_timeout: seconds a step (or reset, ``env_method``, ...) may take before :class:`RayEnvTimeoutError`
    :param seed: the first env's seed, as in SB3's ``make_vec_env`` (None: random seeds)
    :param start_timeout: seconds the actors may take to start (a worker process each, the envs built)
    :param actor_options: Ray actor options for the actors (``num_cpus``, ``resources``, ``scheduling_strategy``,
        ``runtime_env``, ...); by default they are spread over the cluster's nodes (``"SPREAD"``). Restarts are off.
    :param make_vec_env_kwargs: SB3's ``make_vec_env`` keywords: ``start_index``, ``monitor_dir``, ``wrapper_class``,
        ``env_kwargs``, ``monitor_kwargs``, ``wrapper_kwargs`` (picklable, as the factory)
    :raises TypeError: for an env that is neither an id nor a factory or cannot be pickled, or an argument of the wrong
        type
    :raises ValueError: for a count below 1, a timeout that is not a positive number, an ``address`` other than the
        cluster this process is connected to, or restart options in ``actor_options``
    """

    def __init__(
        self,
        env: str | Callable[..., gym.Env],
        n_envs: int,
        envs_per_actor: int = 1,
        address: str | None = None,
        step_timeout: float = 60.0,
        seed: int | None = None,
        *,
        start_timeout: float = 120.0,
        actor_options: Mapping[str, Any] | None = None,
        **make_vec_env_kwargs: Any,
    ) -> None:
        if isinstance(env, gym.Env) or not (isinstance(env, str) or callable(env)):
            raise TypeError(
                f"env must be an env id or a picklable env factory (an env class or a function returning an env), got "
                f"{env!r}: the envs are built in the actors"
            )
        n_envs = _count("n_envs", n_envs)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise TypeError(f"seed must be an int or None, got {seed!r}")
        for name in ("vec_env_cls", "vec_env_kwargs"):
            if name in make_vec_env_kwargs:
                raise TypeError(f"RayVecEnv got {name}: it is the VecEnv, its keywords are its own")
        # SB3's make_vec_env makes the env factories (Monitor, the action space seeded seed + rank, wrapper_class)
        env_fns = env_util.make_vec_env(env, n_envs, seed=seed, vec_env_cls=_EnvFactories, **make_vec_env_kwargs)  # type: ignore[arg-type]
        # (make_vec_env is annotated to return a VecEnv; with vec_env_cls=_EnvFactories it returns the factories)
        self._start(list(env_fns), envs_per_actor, address, step_timeout, start_timeout, actor_options)  # type: ignore[call-overload]
        # the seeds of the first reset, as make_vec_env prepares them
        self.seed(seed)

    @classmethod
    def from_env_fns(
        cls,
        env_fns: list[Callable[[], gym.Env]],
        envs_per_actor: int = 1,
        address: str | None = None,
        step_timeout: float = 60.0,
        *,
        start_timeout: float = 120.0,
        actor_options: Mapping[str, Any] | None = None,
    ) -> RayVecEnv:
        """
        A ``RayVecEnv`` of the envs that picklable functions build, as SB3's ``DummyVecEnv(env_fns)`` and
        ``SubprocVecEnv(env_fns)`` take them: what SB3's ``make_vec_env(..., vec_env_cls=...)`` and rl-zoo3 call
        (``functools.partial(RayVecEnv.from_env_fns, address=...)``). The other parameters are the constructor's.

        :param env_fns: functions that each build one env (wrapped as it should be: SB3's ``make_vec_env`` adds the
            ``Monitor`` and seeds the action space)
        :return: the ``RayVecEnv``
        """
        if not isinstance(env_fns, Sequence) or not env_fns or not all(callable(fn) for fn in env_fns):
            raise TypeError(f"env_fns must be a non-empty list of functions that build an env, got {env_fns!r}")
        self = cls.__new__(cls)
        # (make_vec_env is annotated to return a VecEnv; with vec_env_cls=_EnvFactories it returns the factories)
        self._start(list(env_fns), envs_per_actor, address, step_timeout, start_timeout, actor_options)  # type: ignore[call-overload]
        return self

    def _start(
        self,
        env_fns: list[Callable[[], gym.Env]],
        envs_per_actor: int,
        address: str | None,
        step_timeout: float,
        start_timeout: float,
        actor_options: Mapping[str, Any] | None,
    ) -> None:
        """Check the arguments, connect to Ray, start the actors, then VecEnv's ``__init__``."""
        self.envs_per_actor = _count("envs_per_actor", envs_per_actor)
        self.step_timeout = _positive("step_timeout", step_timeout)
        start_timeout = _positive("start_timeout", start_timeout)
        if address is not None and not (isinstance(address, str) and address):
            raise TypeError(f"address must be None or a Ray cluster's address (a non-empty str), got {address!r}")
        if actor_options is not None and not isinstance(actor_options, Mapping):
            raise TypeError(f"actor_options must be a dict of Ray actor options, got {actor_options!r}")
        restarts = sorted(set(actor_options or {}) & set(NO_RESTART_OPTIONS))
        if restarts:
            raise ValueError(
                f"actor_options may not set {', '.join(restarts)}: RayVecEnv never restarts an actor (a restarted "
                "actor's envs would splice two episodes into one rollout)"
            )
        ray = import_ray()
        try:
            ray.cloudpickle.dumps(env_fns[0])
        except Exception as error:
            raise TypeError(
                f"the env factory cannot be pickled for the Ray actors ({error}): pass an env id or a "
                "module-level function or class"
            ) from error
        connect(address)
        self._closed = False
        #: the fault that released the actors, raised again (as the cause) by every later call
        self._failure: RayEnvActorError | None = None
        self._pending: dict[int, Any] | None = None
        n_envs = len(env_fns)
        starts = range(0, n_envs, self.envs_per_actor)
        #: where each actor runs (filled in once it has started)
        self.placements: list[ActorPlacement] = [
            ActorPlacement(actor, tuple(range(start, min(start + self.envs_per_actor, n_envs))))
            for actor, start in enumerate(starts)
        ]
        options = {"scheduling_strategy": "SPREAD", **(actor_options or {}), **NO_RESTART_OPTIONS}
        actor_class = remote_env_actor().options(**options)
        #: the actors' handles, in the order of their envs
        self.actors: list[Any] = [actor_class.remote(env_fns[start : start + self.envs_per_actor]) for start in starts]
        described = self._gather(
            {actor: handle.describe.remote() for actor, handle in enumerate(self.actors)}, "start", start_timeout
        )
        self.placements = [ActorPlacement(p.actor, p.env_indices, *described[p.actor][2:]) for p in self.placements]
        observation_space, action_space = described[0][:2]
        self._keys, _, _ = obs_space_info(observation_space)
        super().__init__(n_envs, observation_space, action_space)

    # --- calls to the actors ---------------------------------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._failure is not None:
            raise RuntimeError(
                f"this RayVecEnv failed and has released its actors ({self._failure}); build a new RayVecEnv"
            ) from self._failure
        if self._closed:
            raise RuntimeError(
                "this RayVecEnv is closed and its actors are released; build a new RayVecEnv (model.set_env(...)) to "
                "learn again"
            )

    def _fail(self, error: RayEnvActorError) -> RayEnvActorError:
        """Release every actor (none is restarted) and keep ``error`` for the calls to come; :return: ``error``"""
        self._failure = error
        self._release()
        return error

    def _release(self) -> None:
        ray = import_ray()
        for handle in self.actors:
            ray.kill(handle, no_restart=True)
        self._pending = None

    def _gather(self, calls: dict[int, Any], what: str, timeout: float | None = None) -> dict[int, Any]:
        """
        :param calls: actor index -> the object ref of a remote call to it
        :param what: the call, for the messages
        :param timeout: seconds to wait for all of them (default: ``step_timeout``)
        :return: actor index -> the call's result
        :raises RayEnvTimeoutError: for the first actor (in index order) that did not answer in time
        :raises RayEnvActorError: for the first actor that died
        """
        ray = import_ray()
        timeout = self.step_timeout if timeout is None else timeout
        refs = list(calls.values())
        try:
            return dict(zip(calls, ray.get(refs, timeout=timeout), strict=True))
        except ray.exceptions.RayTaskError:
            raise  # the env's own exception (an instance of its class)
        except ray.exceptions.RayError:
            pass  # a fault: whose is looked for below, among the answers there are now
        ready, late = ray.wait(refs, num_returns=len(refs), timeout=0)
        for actor, ref in calls.items():
            if ref in ready:
                try:
                    ray.get(ref, timeout=0)
                except ray.exceptions.RayTaskError:
                    raise
                except ray.exceptions.RayError as error:
                    raise self._fail(RayEnvActorError(self.placements[actor], f"died during {what}: {error}")) from error
        if not late:  # the last ones answered just after the timeout
            return dict(zip(calls, ray.get(refs, timeout=0), strict=True))
        actor, *others = [actor for actor, ref in calls.items() if ref in late]
        also = f" (nor did actors {others})" if others else ""
        raise self._fail(RayEnvTimeoutError(self.placements[actor], f"{what} took longer than {timeout:g} s{also}"))

    def _call_envs(self, method: str, indices: VecEnvIndices, *args: Any) -> list[Any]:
        """``EnvActor.<method>(local indices, *args)`` for the envs ``indices`` names; :return: the results in its order"""
        self._check_usable()
        wanted = [range(self.num_envs)[i] for i in self._get_indices(indices)]
        local: dict[int, list[int]] = {}
        for i in wanted:
            local.setdefault(i // self.envs_per_actor, []).append(i % self.envs_per_actor)
        calls = {actor: getattr(self.actors[actor], method).remote(envs, *args) for actor, envs in local.items()}
        results = {actor: iter(values) for actor, values in self._gather(calls, method).items()}
        return [next(results[i // self.envs_per_actor]) for i in wanted]

    def _observations(self, buffers: list[OrderedDict[str | None, np.ndarray]]) -> VecEnvObs:
        """:return: the observations of all envs from the actors' buffers, as ``DummyVecEnv`` returns them"""
        return dict_to_obs(
            self.observation_space, OrderedDict((key, np.concatenate([b[key] for b in buffers])) for key in self._keys)
        )

    # --- VecEnv ------------------------------------------------------------------------------------------------------

    def reset(self) -> VecEnvObs:
        self._check_usable()
        calls = {
            actor: handle.reset.remote(
                [self._seeds[i] for i in placement.env_indices], [self._options[i] for i in placement.env_indices]
            )
            for actor, (handle, placement) in enumerate(zip(self.actors, self.placements, strict=True))
        }
        self._pending = None
        results = [result for _, result in sorted(self._gather(calls, "reset").items())]
        self.reset_infos = [info for _, reset_infos in results for info in reset_infos]
        # seeds and options are used once
        self._reset_seeds()
        self._reset_options()
        return self._observations([buffers for buffers, _ in results])

    def step_async(self, actions: np.ndarray) -> None:
        self._check_usable()
        self._pending = {
            actor: handle.step.remote(actions[placement.env_indices[0] : placement.env_indices[-1] + 1])
            for actor, (handle, placement) in enumerate(zip(self.actors, self.placements, strict=True))
        }

    def step_wait(self) -> VecEnvStepReturn:
        self._check_usable()
        if self._pending is None:
            raise RuntimeError("RayVecEnv.step_wait() without a step_async() before it")
        calls, self._pending = self._pending, None
        results = [result for _, result in sorted(self._gather(calls, "step").items())]
        self.reset_infos = [info for *_, reset_infos in results for info in reset_infos]
        # the infos' values that Ray deserialized (read-only arrays) are copied, as DummyVecEnv's are
        infos = [fresh_info(info) for _, _, _, actor_infos, _ in results for info in actor_infos]
        rewards = np.concatenate([r for _, r, *_ in results])
        dones = np.concatenate([d for _, _, d, *_ in results])
        return self._observations([buffers for buffers, *_ in results]), rewards, dones, infos

    def close(self) -> None:
        """Close the envs and release every actor (the Ray connection stays); a second call does nothing."""
        if self._closed:
            return
        self._closed = True
        if self._failure is not None:
            return  # released when it failed
        try:
            self._gather({actor: handle.close.remote() for actor, handle in enumerate(self.actors)}, "close")
        except RayEnvActorError:
            pass  # released
        else:
            self._release()

    def get_images(self) -> Sequence[np.ndarray | None]:
        if self.render_mode != "rgb_array":
            warnings.warn(
                f"The render mode is {self.render_mode}, but this method assumes it is `rgb_array` to obtain images."
            )
            return [None] * self.num_envs
        self._check_usable()
        results = self._gather({actor: handle.get_images.remote() for actor, handle in enumerate(self.actors)}, "render")
        return [image for _, images in sorted(results.items()) for image in images]

    def has_attr(self, attr_name: str) -> bool:
        self._check_usable()
        results = self._gather(
            {actor: handle.has_attr.remote(attr_name) for actor, handle in enumerate(self.actors)}, "has_attr"
        )
        return all(results.values())

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return self._call_envs("get_attr", indices, attr_name)

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        self._call_envs("set_attr", indices, attr_name, value)

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any
    ) -> list[Any]:
        return self._call_envs("env_method", indices, method_name, method_args, method_kwargs)

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        return self._call_envs("env_is_wrapped", indices, wrapper_class)
