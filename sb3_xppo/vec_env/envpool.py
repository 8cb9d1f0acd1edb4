"""
:class:`EnvPoolVecEnv`: SB3's ``VecEnv`` over an EnvPool env (the ``envpool`` package: the envs re-implemented in C++
and stepped in its threads), with the results SB3's ``DummyVecEnv`` + ``Monitor`` give:

- **auto-reset**: EnvPool resets an env that finished on the *next* step it is sent (the action is ignored and the
  reset observation comes back). SB3 wants the reset observation in the same step, with the last observation of the
  episode in ``info["terminal_observation"]``: so the envs that finished are reset at once, in the same step, with
  EnvPool's partial ``reset(env_ids)``, after which EnvPool steps them normally;
- **time limits**: EnvPool's own, ``max_episode_steps`` (gymnasium's by default). A truncated episode has
  ``info["TimeLimit.truncated"] = True`` and is bootstrapped by SB3's PPO; EnvPool reports an episode that ends on
  its last allowed step as truncated, even where the env also terminated there;
- **episode statistics**: ``info["episode"] = {"r", "l", "t"}`` at an episode's end, as SB3's ``Monitor`` writes it
  (the return summed in float64 and rounded to 6 decimals, the length, the seconds since the env was built), and
  its CSV files with ``monitor_dir``: SB3's ``ep_info_buffer``, the logger's ``rollout/ep_rew_mean`` and
  ``evaluate_policy`` (``env_is_wrapped(Monitor)`` is true) work as with a ``Monitor``;
- **seeds**: EnvPool fixes its envs' seeds when it builds them, so ``seed(s)`` (SB3's: the next reset) builds the
  pool again at the next ``reset()`` with env ``i`` seeded ``(s + i) mod 2**31``, SB3's ``seed + rank``. The same seed
  gives the same episodes; EnvPool's random streams are its own, not gymnasium's;
- **spaces**: gymnasium's own (those of the env the id makes), so that a model trained here loads and runs on
  gymnasium's env; EnvPool's observations have the same shape and dtype (checked when the pool is first built).

What has no meaning for C++ envs is refused with a ``ValueError`` or ``NotImplementedError``, never done otherwise:
an env id EnvPool lacks (:data:`ENVPOOL_ENV_IDS`), a wrapper or env keyword it cannot apply, reset options,
``render``, ``set_attr``, ``env_method``. ``get_attr`` answers ``render_mode`` (None), ``observation_space`` and
``action_space``.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker
from stable_baselines3.common.monitor import Monitor, ResultsWriter
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvObs, VecEnvStepReturn

from sb3_xppo.vec_env.lean import gymnasium_time_limit

#: gymnasium env id -> EnvPool task id, the envs this backend runs (EnvPool's classic control, Box2D and MuJoCo v5)
ENVPOOL_ENV_IDS: dict[str, str] = {
    env_id: env_id
    for env_id in (
        "CartPole-v1",
        "Acrobot-v1",
        "MountainCar-v0",
        "MountainCarContinuous-v0",
        "Pendulum-v1",
        "LunarLander-v3",
        "LunarLanderContinuous-v3",
        "BipedalWalker-v3",
        "BipedalWalkerHardcore-v3",
        *(
            f"{name}-v5"
            for name in (
                "Ant",
                "HalfCheetah",
                "Hopper",
                "Humanoid",
                "HumanoidStandup",
                "InvertedDoublePendulum",
                "InvertedPendulum",
                "Pusher",
                "Reacher",
                "Swimmer",
                "Walker2d",
            )
        ),
    )
}
#: EnvPool options the adapter sets itself: an ``envpool_kwargs`` key among them is a ``ValueError``
RESERVED_ENVPOOL_OPTIONS: frozenset[str] = frozenset(
    {"num_envs", "batch_size", "seed", "env_seed", "max_episode_steps", "gym_reset_return_info", "render_mode", "from_pixels"}
)
#: EnvPool takes int32 seeds: env ``i`` of ``seed(s)`` is seeded ``(s + i) % SEED_MODULUS``
SEED_MODULUS = 2**31


def envpool_task_id(env_id: str) -> str:
    """
    :param env_id: a gymnasium env id
    :return: EnvPool's task id for it (:data:`ENVPOOL_ENV_IDS`)
    :raises ValueError: for an env EnvPool does not run here, naming those it does
    """
    if not isinstance(env_id, str) or env_id not in ENVPOOL_ENV_IDS:
        raise ValueError(
            f"the EnvPool backend has no env {env_id!r}; it runs {', '.join(ENVPOOL_ENV_IDS)} "
            "(choose another backend for other envs)"
        )
    return ENVPOOL_ENV_IDS[env_id]


def _import_envpool() -> Any:
    try:
        import envpool
    except ImportError as error:
        raise ImportError("the EnvPool backend needs the envpool package: pip install envpool (or sb3-xppo[extra])") from error
    return envpool


class EnvPoolVecEnv(VecEnv):
    """
    SB3's ``VecEnv`` over a synchronous EnvPool env: ``DummyVecEnv`` + ``Monitor``'s observations, dones and infos
    (``terminal_observation``, ``TimeLimit.truncated``, ``episode``) from envs EnvPool steps in C++. See
    :mod:`sb3_xppo.vec_env.envpool` for how auto-reset, time limits, episode statistics and seeds map. Build it with
    :func:`sb3_xppo.vec_env.make_vec_env` (``backend="envpool"``) or directly.

    :param env_id: a gymnasium env id among :data:`ENVPOOL_ENV_IDS`
    :param n_envs: the number of envs
    :param seed: the first env's seed (env ``i`` gets ``seed + i``); None: a random one
    :param max_episode_steps: the time limit (None: gymnasium's for the env id)
    :param monitor_dir: where to write the ``Monitor`` CSV files ``<rank>.monitor.csv`` (None: none)
    :param envpool_kwargs: EnvPool options of the task (e.g. ``num_threads``), not those in
        :data:`RESERVED_ENVPOOL_OPTIONS`
    :param spaces: the observation and action spaces (None: those of ``gym.make(env_id)``)
    :raises ValueError: for an env id EnvPool lacks, a bad ``n_envs``, seed or ``max_episode_steps``, an unknown or
        reserved EnvPool option, or spaces EnvPool's observations do not fit
    """

    def __init__(
        self,
        env_id: str,
        n_envs: int = 1,
        seed: int | None = None,
        *,
        max_episode_steps: int | None = None,
        monitor_dir: str | None = None,
        envpool_kwargs: dict[str, Any] | None = None,
        spaces: tuple[gym.Space, gym.Space] | None = None,
    ) -> None:
        self.task_id = envpool_task_id(env_id)
        if isinstance(n_envs, bool) or not isinstance(n_envs, (int, np.integer)) or n_envs < 1:
            raise ValueError(f"n_envs must be an int >= 1, got {n_envs!r}")
        if max_episode_steps is not None and (not isinstance(max_episode_steps, (int, np.integer)) or max_episode_steps < 1):
            raise ValueError(f"max_episode_steps must be None or an int >= 1, got {max_episode_steps!r}")
        envpool = _import_envpool()
        self.env_id = env_id
        spec_config = envpool.make_spec(self.task_id).config
        options = dict(envpool_kwargs or {})
        reserved = sorted(RESERVED_ENVPOOL_OPTIONS & options.keys())
        unknown = sorted(options.keys() - set(spec_config._fields))
        if reserved or unknown:
            allowed = sorted(set(spec_config._fields) - RESERVED_ENVPOOL_OPTIONS)
            raise ValueError(
                f"envpool_kwargs {reserved + unknown} cannot be given for {env_id!r}"
                + (f" ({reserved} are set by EnvPoolVecEnv)" if reserved else "")
                + f"; EnvPool's options of the task are {allowed}"
            )
        if max_episode_steps is None:
            max_episode_steps = gym.spec(env_id).max_episode_steps or spec_config.max_episode_steps
        #: the EnvPool options the pool is built with, besides the seeds
        self.envpool_options: dict[str, Any] = {
            **options,
            "num_envs": int(n_envs),
            "batch_size": int(n_envs),
            "max_episode_steps": int(max_episode_steps),
        }
        if spaces is None:
            with gym.make(env_id) as env:
                observation_space, action_space = env.observation_space, env.action_space
        else:
            observation_space, action_space = spaces
        super().__init__(int(n_envs), observation_space, action_space)
        self._pool: Any = None
        self._next_seed: int | None = None
        self.seed(seed)
        self._actions: np.ndarray | None = None
        self._returns = np.zeros(self.num_envs)
        self._lengths = np.zeros(self.num_envs, dtype=np.int64)
        self.t_start = time.time()
        self._writers: list[ResultsWriter] = []
        if monitor_dir is not None:
            os.makedirs(monitor_dir, exist_ok=True)
            header: dict[str, float | str] = {"t_start": self.t_start, "env_id": env_id}
            self._writers = [ResultsWriter(os.path.join(monitor_dir, str(i)), header=header) for i in range(self.num_envs)]

    @classmethod
    def from_env_fns(cls, env_fns: list[Callable[[], gym.Env]], **envpool_kwargs: Any) -> EnvPoolVecEnv:
        """
        The EnvPool envs standing for the envs ``env_fns`` build, as SB3's ``make_vec_env`` and rl-zoo3 hand a VecEnv
        class its env factories: the first factory's env is built to read what to run, then closed. Its stack must
        be SB3's ``Monitor`` (no ``info_keywords``/``reset_keywords``; its CSV folder becomes ``monitor_dir``) over
        ``gym.make``'s env (time limits, ``OrderEnforcing``, ``PassiveEnvChecker``), with the env id's registered
        keywords (``render_mode`` aside) and any time limit; its spaces, seeded as the factory seeded them, become
        the VecEnv's. The seeds come with ``seed()``, as ``make_vec_env`` gives them.

        :param env_fns: the env factories, one per env
        :param envpool_kwargs: EnvPool options of the task (``vec_env_kwargs``)
        :return: the VecEnv, seeded at random until ``seed()``
        :raises ValueError: for a wrapper EnvPool cannot apply (``wrapper_class``, rl-zoo3's ``env_wrapper``),
            ``monitor_kwargs``, env keywords, or an env EnvPool lacks, each named
        """
        if not env_fns:
            raise ValueError("env_fns is empty: EnvPoolVecEnv needs at least one env")
        env = env_fns[0]()
        try:
            env_id, max_episode_steps, monitor_dir = _read_env_stack(env)
            spaces = (env.observation_space, env.action_space)
        finally:
            env.close()
        return cls(
            env_id,
            len(env_fns),
            max_episode_steps=max_episode_steps,
            monitor_dir=monitor_dir,
            envpool_kwargs=envpool_kwargs,
            spaces=spaces,
        )

    # --- the pool -----------------------------------------------------------------------------------------------------

    def _build_pool(self, seed: int) -> None:
        envpool = _import_envpool()
        if self._pool is not None:
            self._pool.close()
        seeds = [(seed + i) % SEED_MODULUS for i in range(self.num_envs)]
        with warnings.catch_warnings():  # EnvPool's Box2D spaces: gymnasium warns about their float64 bounds
            warnings.simplefilter("ignore", UserWarning)
            self._pool = envpool.make(self.task_id, env_type="gymnasium", seed=seeds, **self.envpool_options)
            pool_space = self._pool.observation_space
        ours = self.observation_space
        if pool_space.shape != ours.shape or pool_space.dtype != ours.dtype:
            raise ValueError(
                f"EnvPool's {self.task_id} observations are {pool_space.shape} {pool_space.dtype}, the observation space "
                f"is {ours.shape} {ours.dtype}"
            )

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        """
        The seeds of the next ``reset()``, which builds the pool again: env ``i`` gets ``(seed + i) mod 2**31``.

        :param seed: the first env's seed; None: a random one
        :return: the envs' seeds, ``seed + i``
        :raises ValueError: for a negative seed
        """
        if seed is None:
            seed = int(np.random.randint(0, SEED_MODULUS))
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be None or an int >= 0, got {seed!r}")
        self._next_seed = int(seed)
        return [int(seed) + i for i in range(self.num_envs)]

    def set_options(self, options: list[dict] | dict | None = None) -> None:
        """
        :param options: None or empty: EnvPool's reset takes no options
        :raises ValueError: for any option
        """
        given = options if isinstance(options, list) else [options or {}]
        if any(given):
            raise ValueError(f"EnvPool's envs take no reset options, got {options!r}")

    # --- stepping -----------------------------------------------------------------------------------------------------

    def reset(self) -> VecEnvObs:
        if self._next_seed is not None:
            self._build_pool(self._next_seed)
            self._next_seed = None
        obs, _ = self._pool.reset()
        self._returns[:] = 0.0
        self._lengths[:] = 0
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        if self._pool is None or self._actions is None:
            raise RuntimeError("EnvPoolVecEnv: call reset() before step()")
        obs, rewards, terminated, truncated, _ = self._pool.step(np.asarray(self._actions))
        self._actions = None
        dones = terminated | truncated
        self._returns += rewards
        self._lengths += 1
        infos: list[dict[str, Any]] = [{"TimeLimit.truncated": False} for _ in range(self.num_envs)]
        finished = np.flatnonzero(dones)
        if finished.size:
            now = time.time()
            for i in finished.tolist():
                info = infos[i]
                info["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
                info["terminal_observation"] = obs[i].copy()
                episode = {
                    "r": round(float(self._returns[i]), 6),
                    "l": int(self._lengths[i]),
                    "t": round(now - self.t_start, 6),
                }
                info["episode"] = episode
                if self._writers:
                    self._writers[i].write_row(episode)
            self._returns[finished] = 0.0
            self._lengths[finished] = 0
            reset_obs, _ = self._pool.reset(finished.astype(np.int32))
            obs[finished] = reset_obs
        return obs, rewards, dones, infos

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        for writer in self._writers:
            writer.close()
        self._writers = []

    # --- what C++ envs do not have ------------------------------------------------------------------------------------

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """
        :param attr_name: ``render_mode`` (None: EnvPoolVecEnv does not render), ``observation_space`` or
            ``action_space``
        :raises AttributeError: for any other name: EnvPool's envs are C++ objects
        """
        values = {"render_mode": None, "observation_space": self.observation_space, "action_space": self.action_space}
        if attr_name not in values:
            raise AttributeError(
                f"EnvPool's envs are C++ objects: EnvPoolVecEnv.get_attr knows {sorted(values)}, not {attr_name!r}"
            )
        return [values[attr_name] for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """:raises NotImplementedError: EnvPool's envs are C++ objects"""
        raise NotImplementedError(f"EnvPool's envs are C++ objects: their attributes cannot be set ({attr_name!r})")

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any
    ) -> list[Any]:
        """:raises NotImplementedError: EnvPool's envs are C++ objects"""
        raise NotImplementedError(f"EnvPool's envs are C++ objects: their methods cannot be called ({method_name!r})")

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        """:return: true for SB3's ``Monitor`` (this VecEnv writes its episode statistics), false for any other"""
        return [wrapper_class is Monitor for _ in self._get_indices(indices)]

    def render(self, mode: str | None = None) -> np.ndarray | None:
        """:raises NotImplementedError: EnvPoolVecEnv does not render; render a gymnasium env of the same id"""
        raise NotImplementedError("EnvPoolVecEnv does not render: render a gymnasium env of the same id")

    def get_images(self) -> Sequence[np.ndarray | None]:
        """:raises NotImplementedError: EnvPoolVecEnv does not render"""
        raise NotImplementedError("EnvPoolVecEnv does not render: render a gymnasium env of the same id")


def _read_env_stack(env: gym.Env) -> tuple[str, int | None, str | None]:
    """
    :param env: an env as SB3's ``make_vec_env`` builds it
    :return: its env id, its time limit (None: none) and its Monitor's CSV folder (None: none)
    :raises ValueError: for what EnvPool cannot run (see :meth:`EnvPoolVecEnv.from_env_fns`)
    """
    if type(env) is not Monitor:
        raise ValueError(
            f"EnvPool steps its envs in C++ and cannot apply the wrapper {type(env).__name__} (wrapper_class, rl-zoo3's "
            "env_wrapper): the env must be SB3's Monitor over gym.make's env"
        )
    if env.info_keywords or env.reset_keywords:
        raise ValueError(
            f"EnvPool's infos carry no keys for the Monitor's info_keywords {env.info_keywords} or reset_keywords "
            f"{env.reset_keywords} (monitor_kwargs)"
        )
    monitor_dir = None
    if env.results_writer is not None:
        path = env.results_writer.file_handler.name
        if os.path.basename(path) != f"0.{Monitor.EXT}":
            raise ValueError(f"EnvPoolVecEnv writes the Monitor files <rank>.{Monitor.EXT} from rank 0, not {path!r}")
        monitor_dir = os.path.dirname(path)
    time_limit = gymnasium_time_limit()
    max_episode_steps: int | None = None
    inner = env.env
    while isinstance(inner, gym.Wrapper):
        if isinstance(inner, time_limit):
            limit = inner._max_episode_steps
            max_episode_steps = limit if max_episode_steps is None else min(max_episode_steps, limit)
        elif type(inner) not in (OrderEnforcing, PassiveEnvChecker):
            raise ValueError(f"EnvPool steps its envs in C++ and cannot apply the wrapper {type(inner).__name__}")
        inner = inner.env
    spec = inner.spec
    if spec is None:
        raise ValueError(f"the env {type(inner).__name__} has no env id (gym.make's spec): EnvPool runs envs by id")
    envpool_task_id(spec.id)
    registered = gym.spec(spec.id).kwargs
    changed = sorted(k for k, v in spec.kwargs.items() if k != "render_mode" and (k not in registered or registered[k] != v))
    if changed:
        raise ValueError(f"EnvPool cannot apply the env keywords {changed} of {spec.id!r} (env_kwargs)")
    return spec.id, max_episode_steps, monitor_dir
