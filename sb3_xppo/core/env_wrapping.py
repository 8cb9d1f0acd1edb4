"""
How an XPPO algorithm wraps the env it is given: SB3's ``BaseAlgorithm._wrap_env``, but an env that SB3 would put in
a ``DummyVecEnv`` goes in a :class:`~sb3_xppo.vec_env.LeanVecEnv` (the same numbers, faster), with an
:class:`~sb3_xppo.vec_env.replay.ActionRecorder` beneath the ``Monitor`` it adds (docs/guide/resume.md).
"""

from typing import Any

from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.env_util import is_wrapped
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.patch_gym import _patch_env

from sb3_xppo.vec_env import LeanVecEnv
from sb3_xppo.vec_env.replay import ActionRecorder


class EnvWrappingMixin:
    """The algorithm's ``_wrap_env``."""

    @staticmethod
    def _wrap_env(env: Any, verbose: int = 0, monitor_wrapper: bool = True) -> VecEnv:
        # SB3's BaseAlgorithm._wrap_env, but an env that it would put in a DummyVecEnv (an env id, made into an env;
        # a gymnasium env) goes in a LeanVecEnv, which returns the same numbers faster; a VecEnv is kept as it is
        if not isinstance(env, VecEnv):
            env = _patch_env(env)
            if monitor_wrapper and not is_wrapped(env, Monitor):
                if verbose >= 1:
                    print("Wrapping the env with a `Monitor` wrapper")
                # beneath the Monitor, the recorder that lets a resumed run rebuild the env by replay
                env = Monitor(env if is_wrapped(env, ActionRecorder) else ActionRecorder(env))
            if verbose >= 1:
                print("Wrapping the env in a LeanVecEnv.")
            env = LeanVecEnv([lambda: env])
        return BaseAlgorithm._wrap_env(env, verbose, monitor_wrapper)
