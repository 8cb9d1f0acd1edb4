"""
:class:`LeanVecEnv`: SB3's ``DummyVecEnv`` (with the ``Monitor`` that ``make_vec_env`` puts around each env), the same
numbers, step for step and bit for bit, in less time.

What ``DummyVecEnv.step_wait`` spends its time on besides the envs, and what this class does instead:

- ``deepcopy`` of the list of info dicts, every step: each info dict is copied by :func:`fresh_info`, a shallow copy
  where every value is immutable (a step's info is usually ``{"TimeLimit.truncated": False}``), ``deepcopy`` where
  one is not (a ``terminal_observation``, an ``episode`` dict, whatever the env put there);
- ``deepcopy`` of the observation buffers: one ``ndarray.copy`` per buffer (the same values, dtype and layout);
- the Python calls of the wrapper stack: :class:`EnvStack` does the bookkeeping of SB3's ``Monitor`` (the outermost
  wrapper) and of the time limits beneath, on their own state with their arithmetic, and skips the wrappers that
  pass the step through (``OrderEnforcing`` and ``PassiveEnvChecker`` once the env is reset and checked, any
  wrapper that does not override ``step``). The wrappers stay in the stack: ``env_is_wrapped(Monitor)``,
  ``env_method("get_episode_rewards")``, the Monitor's CSV file (``monitor_dir``) and ``reset`` are theirs;
- per-env Python: one loop over the envs with everything looked up once.

Resets, seeding (``seed``, ``set_options``), ``render`` (but where the envs have no render mode: a ``ValueError``
that names the keyword, where ``DummyVecEnv`` warns and returns None), ``get_attr``, ``set_attr``, ``env_method`` and
``env_is_wrapped`` are ``DummyVecEnv``'s; the class is a ``DummyVecEnv``, built from the same env factories.
"""

from __future__ import annotations

import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from copy import deepcopy
from typing import TYPE_CHECKING, Any, SupportsFloat, cast

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn
from stable_baselines3.common.vec_env.util import dict_to_obs

from sb3_xppo.vec_env.replay import ActionRecorder

if TYPE_CHECKING:
    from gymnasium.wrappers import TimeLimit

#: the types of info values that :func:`fresh_info` shares rather than copies: immutable, so a shared one and
#: ``deepcopy``'s are the same to any reader (``deepcopy`` returns these very objects too)
IMMUTABLE_INFO_TYPES: frozenset[type] = frozenset(
    {bool, int, float, complex, str, bytes, type(None), np.bool_}
    | {np.dtype(code).type for code in "bBhHiIlLqQefdgFDG"}  # numpy's integer, float and complex scalars
)


def fresh_info(info: dict[str, Any]) -> dict[str, Any]:
    """
    A copy of an env's info dict that neither the env nor the next step touches, as ``DummyVecEnv`` returns it: a
    shallow copy of a plain dict whose values are all immutable (:data:`IMMUTABLE_INFO_TYPES`), ``deepcopy`` of any
    other. Unlike ``DummyVecEnv``, which deep-copies the list of all envs' infos at once, each dict is copied on its
    own: an object two envs' infos share is shared in ``DummyVecEnv``'s copy and copied twice here (equal values).

    :param info: the info dict of one env's step
    :return: the copy
    """
    if type(info) is dict:
        for value in info.values():
            if type(value) not in IMMUTABLE_INFO_TYPES:
                return deepcopy(info)
        return info.copy()
    return deepcopy(info)


def gymnasium_time_limit() -> type[TimeLimit]:
    """
    :return: gymnasium's own ``TimeLimit`` class, also where rl-zoo3 (``rl_zoo3.gym_patches``, imported with
        rl-zoo3) has put its ``PatchedTimeLimit`` subclass in gymnasium's modules
    """
    found = next(
        cls
        for cls in gym.wrappers.common.TimeLimit.__mro__
        if cls.__module__ == "gymnasium.wrappers.common" and cls.__name__ == "TimeLimit"
    )
    return cast("type[TimeLimit]", found)


def zoo_time_limit() -> type[gym.Wrapper] | None:
    """:return: rl-zoo3's ``PatchedTimeLimit`` where rl-zoo3 has been imported (this imports nothing), else None"""
    patches = sys.modules.get("rl_zoo3.gym_patches")
    return getattr(patches, "PatchedTimeLimit", None)


#: the state of SB3's ``Monitor`` that :meth:`EnvStack.step` does the bookkeeping of, as ``Monitor.step`` does (its
#: own attributes; ``tests/test_private_attributes.py`` fails, naming the attribute, when ``Monitor`` changes them)
MONITOR_STATE = (
    "needs_reset",
    "rewards",
    "t_start",
    "info_keywords",
    "episode_returns",
    "episode_lengths",
    "episode_times",
    "current_reset_info",
    "results_writer",
    "total_steps",
)
#: the private state of gymnasium's ``TimeLimit`` (and rl-zoo3's ``PatchedTimeLimit``) that :meth:`EnvStack.step`
#: counts and reads, in its one loop over the time limits
TIME_LIMIT_STATE = ("_elapsed_steps", "_max_episode_steps")
#: what :meth:`EnvStack._skippable` reads of gymnasium's ``OrderEnforcing`` and ``PassiveEnvChecker``
ORDER_ENFORCING_STATE = ("_has_reset",)
ENV_CHECKER_STATE = ("checked_step", "checked_data_reuse")

#: the ``step`` functions that, once the env is reset and checked, pass the step of the env beneath through:
#: ``gym.Wrapper``'s (a wrapper that does not override it), ``OrderEnforcing``'s and ``PassiveEnvChecker``'s
PASS_THROUGH_STEPS: frozenset[Callable[..., Any]] = frozenset({gym.Wrapper.step, OrderEnforcing.step, PassiveEnvChecker.step})


class EnvStack:
    """
    How :class:`LeanVecEnv` steps one env: ``env.step(action)``, the same results and the same state changes, in
    fewer Python calls.

    - Where ``env``'s outermost wrapper is exactly SB3's ``Monitor``, its bookkeeping is done here, on the Monitor's
      own state with the arithmetic of its ``step``: the rewards as a list of floats, the episode's ``r`` as
      ``round(sum(rewards), 6)``, ``l``, ``t`` as ``round(time.time() - t_start, 6)``, its ``info_keywords``,
      reset keywords and CSV row.
    - Beneath it, the wrappers whose ``step`` is one of :data:`PASS_THROUGH_STEPS` and the time limits (gymnasium's
      ``TimeLimit`` and rl-zoo3's ``PatchedTimeLimit``, their ``step`` not overridden) are skipped: the first other
      env beneath them (``core``) is stepped, and each time limit's count, truncation and (rl-zoo3's)
      ``TimeLimit.truncated`` info are done here, innermost first, as their ``step`` does them.
    - Until every ``OrderEnforcing`` beneath has seen a reset and every ``PassiveEnvChecker`` has run its checks (the
      first two steps), the wrappers are stepped as they are; so is a stack with nothing to skip.

    :param env: the env, as ``DummyVecEnv`` holds it
    """

    __slots__ = ("checkers", "core", "enforcers", "env", "monitor", "ready", "recorders", "time_limits", "top")

    def __init__(self, env: gym.Env) -> None:
        self.env = env
        self.monitor: Monitor | None = env if type(env) is Monitor else None
        #: what is stepped while the wrappers beneath cannot be skipped
        self.top: gym.Env = env.env if self.monitor is not None else env  # type: ignore[attr-defined]
        plain, zoo = gymnasium_time_limit(), zoo_time_limit()
        time_limit_steps: dict[Any, bool] = {plain.step: False, **({zoo.step: True} if zoo is not None else {})}
        #: (wrapper, whether it is rl-zoo3's), innermost first
        self.time_limits: list[tuple[Any, bool]] = []
        self.enforcers: list[OrderEnforcing] = []
        self.checkers: list[PassiveEnvChecker] = []
        #: the replay recorders beneath (sb3_xppo.vec_env.replay), skipped like the others: each records the step
        self.recorders: list[ActionRecorder] = []
        core = self.top
        while isinstance(core, gym.Wrapper):
            step = type(core).step
            if step is ActionRecorder.step:
                self.recorders.append(core)  # type: ignore[arg-type]
            elif step in time_limit_steps:
                self.time_limits.insert(0, (core, time_limit_steps[step]))
            elif step not in PASS_THROUGH_STEPS:
                break
            if isinstance(core, OrderEnforcing):
                self.enforcers.append(core)
            if isinstance(core, PassiveEnvChecker):
                self.checkers.append(core)
            core = core.env
        self.core: gym.Env = core
        self.ready = core is self.top

    def _skippable(self) -> bool:
        """:return: whether the wrappers between ``top`` and ``core`` may be skipped now (once so, always so)"""
        self.ready = all(e._has_reset for e in self.enforcers) and all(
            c.checked_step and c.checked_data_reuse for c in self.checkers
        )
        return self.ready

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """
        :param action: the action
        :return: what ``env.step(action)`` returns
        """
        monitor = self.monitor
        if monitor is not None and monitor.needs_reset:
            raise RuntimeError("Tried to step environment that needs reset")
        if self.ready or self._skippable():
            observation, reward, terminated, truncated, info = self.core.step(action)
            for recorder in self.recorders:
                recorder.record_step(action, observation)
            for time_limit, zoo in self.time_limits:
                time_limit._elapsed_steps += 1
                if time_limit._elapsed_steps >= time_limit._max_episode_steps:
                    if zoo:
                        episode_truncated = not (truncated or terminated) or info.get("TimeLimit.truncated", False)
                        info["TimeLimit.truncated"] = episode_truncated
                        truncated = truncated or episode_truncated
                    else:
                        truncated = True
        else:
            observation, reward, terminated, truncated, info = self.top.step(action)
        if monitor is None:
            return observation, reward, terminated, truncated, info
        monitor.rewards.append(float(reward))
        if terminated or truncated:
            monitor.needs_reset = True
            ep_rew = sum(monitor.rewards)
            ep_len = len(monitor.rewards)
            ep_info = {"r": round(ep_rew, 6), "l": ep_len, "t": round(time.time() - monitor.t_start, 6)}
            for key in monitor.info_keywords:
                ep_info[key] = info[key]
            monitor.episode_returns.append(ep_rew)
            monitor.episode_lengths.append(ep_len)
            monitor.episode_times.append(time.time() - monitor.t_start)
            ep_info.update(monitor.current_reset_info)
            if monitor.results_writer:
                monitor.results_writer.write_row(ep_info)
            info["episode"] = ep_info
        monitor.total_steps += 1
        return observation, reward, terminated, truncated, info


class LeanVecEnv(DummyVecEnv):
    """
    A ``DummyVecEnv`` whose ``step`` returns the same observations, rewards, dones and infos (``terminal_observation``,
    ``TimeLimit.truncated``, the Monitor's ``episode``) bit for bit, in less time; see :mod:`sb3_xppo.vec_env.lean`
    for how. Build it as a ``DummyVecEnv`` (or with :func:`sb3_xppo.vec_env.make_vec_env`, the default backend).

    The returned infos are new dicts each step, which a callback may keep and change; the values in them are the
    env's own where immutable and copies otherwise (:func:`fresh_info`). The env stacks are fixed when it is built.

    :param env_fns: functions that each build a new environment
    """

    def __init__(self, env_fns: list[Callable[[], gym.Env]]) -> None:
        super().__init__(env_fns)
        self._stacks = [EnvStack(env) for env in self.envs]
        # a single observation buffer (Box, Discrete, ...): written in place of DummyVecEnv._save_obs's key loop
        # (SB3 keys a single buffer None, and annotates the keys str)
        self._single_buf: np.ndarray | None = self.buf_obs[None] if self.keys == [None] else None  # type: ignore[index]
        # ndarray.copy is deepcopy's copy but for object arrays, whose elements deepcopy copies too
        self._plain_buffers = all(buf.dtype != object for buf in self.buf_obs.values())

    def step_wait(self) -> VecEnvStepReturn:
        actions = self.actions
        buf_rews, buf_dones, buf_infos, reset_infos = self.buf_rews, self.buf_dones, self.buf_infos, self.reset_infos
        single_buf = self._single_buf
        for env_idx, stack in enumerate(self._stacks):
            obs, buf_rews[env_idx], terminated, truncated, info = stack.step(actions[env_idx])
            # convert to SB3's VecEnv API, as DummyVecEnv does
            done = buf_dones[env_idx] = terminated or truncated
            info["TimeLimit.truncated"] = truncated and not terminated
            if done:
                info["terminal_observation"] = obs
                obs, reset_infos[env_idx] = self.envs[env_idx].reset()
            buf_infos[env_idx] = info
            if single_buf is not None:
                single_buf[env_idx] = obs
            else:
                self._save_obs(env_idx, obs)
        return self._obs_from_buf(), buf_rews.copy(), buf_dones.copy(), [fresh_info(info) for info in buf_infos]

    def _obs_from_buf(self) -> VecEnvObs:
        if not self._plain_buffers:
            return super()._obs_from_buf()
        if self._single_buf is not None:
            return self._single_buf.copy()
        return dict_to_obs(self.observation_space, OrderedDict((key, buf.copy()) for key, buf in self.buf_obs.items()))

    def _check_render_mode(self) -> None:
        if self.render_mode is None:
            raise ValueError(
                "render(): the envs were built without a render mode, which training does not need. Build them with "
                "one: sb3_xppo.vec_env.make_vec_env(env_id, n_envs, render_mode='rgb_array') (or env_kwargs="
                "{'render_mode': 'rgb_array'}); XPPO given an env id makes it without one, give it that VecEnv instead"
            )

    def render(self, mode: str | None = None) -> np.ndarray | None:
        self._check_render_mode()
        return super().render(mode)

    def get_images(self) -> Sequence[np.ndarray | None]:
        self._check_render_mode()
        return super().get_images()
