"""
What the student sees and what the teacher sees: a privileged teacher reads observations its student never receives.

:class:`StudentObsWrapper` hides keys of a Dict observation from the student (the model trained on the wrapped env),
while :class:`~sb3_xppo.dagger_distill.DaggerCallback` hands its teacher the full observation. :func:`raw_obs_source`
finds, in a student's ``VecEnv`` stack, where the teacher's (raw, full) observations come from.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper, VecNormalize
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn

from sb3_xppo.dagger_distill.teacher_obs import select_obs, select_space


class StudentObsWrapper(VecEnvWrapper):
    """
    The student's view of a Dict observation: only ``student_keys``. The student's policy is built on (and only ever
    receives) that part, so it deploys where the other keys (privileged state: true positions, contacts, the map)
    do not exist; a :class:`~sb3_xppo.dagger_distill.DaggerCallback` teacher still reads the full observation
    (:meth:`get_full_obs`), e.g. a teacher trained on the whole Dict.

    One key gives its own space (a Box student: ``MlpPolicy``); several give a Dict of them (``MultiInputPolicy``).
    ``terminal_observation`` in the infos is cut the same way. Put ``VecNormalize`` around this wrapper, not inside:
    then the student's observations are normalized and the teacher's stay raw.

    :param venv: the vectorized environment with Dict observations (privileged keys included)
    :param student_keys: the key (or keys) the student sees
    """

    def __init__(self, venv: VecEnv, student_keys: str | list[str] | tuple[str, ...]) -> None:
        if not isinstance(venv.observation_space, spaces.Dict):
            raise ValueError(f"StudentObsWrapper needs Dict observations, got {venv.observation_space}")
        if not isinstance(student_keys, str) and not (
            isinstance(student_keys, (list, tuple)) and student_keys and all(isinstance(k, str) for k in student_keys)
        ):
            raise TypeError(f"student_keys must be a key or a non-empty list of keys, got {student_keys!r}")
        keys: str | list[str] = student_keys if isinstance(student_keys, str) else list(student_keys)
        missing = [k for k in ([keys] if isinstance(keys, str) else keys) if k not in venv.observation_space.spaces]
        if missing:
            raise ValueError(
                f"student_keys={student_keys!r}: no key {missing} in the observations; the keys are "
                f"{list(venv.observation_space.spaces)}"
            )
        space = select_space(venv.observation_space, keys)
        super().__init__(venv, observation_space=space)
        self.student_keys = keys
        #: the full (Dict) observation space the teacher reads
        self.full_observation_space: spaces.Dict = venv.observation_space
        self._full_obs: Any = None

    def reset(self) -> VecEnvObs:
        self._full_obs = self.venv.reset()
        return select_obs(self._full_obs, self.student_keys)

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, dones, infos = self.venv.step_wait()
        self._full_obs = obs
        for info in infos:
            if "terminal_observation" in info:
                info["terminal_observation"] = select_obs(info["terminal_observation"], self.student_keys)
        return select_obs(obs, self.student_keys), rewards, dones, infos

    def get_full_obs(self) -> Any:
        """
        :return: the full observations (a dict of arrays, the batch first) of the most recent step or reset
        """
        if self._full_obs is None:
            raise ValueError("StudentObsWrapper has no observation yet: reset the environment first")
        return self._full_obs


def raw_obs_source(venv: VecEnv) -> tuple[Callable[[], Any], spaces.Space] | None:
    """
    Where a teacher's observations come from when they are not the student's: the full observations of a
    :class:`StudentObsWrapper`, else the original (unnormalized) observations of a ``VecNormalize``.

    :param venv: the student's environment
    :return: ``(get, space)``: ``get()`` gives the observations of the most recent step or reset, in ``space``;
        None when the student's observations are the raw ones
    """
    env: Any = venv
    normalize: VecNormalize | None = None
    while isinstance(env, VecEnvWrapper):
        if isinstance(env, StudentObsWrapper):
            inner: Any = env.venv
            while isinstance(inner, VecEnvWrapper):
                if isinstance(inner, VecNormalize) and inner.norm_obs:
                    raise ValueError(
                        "VecNormalize lies inside StudentObsWrapper, so the teacher would read observations normalized "
                        "by the student's statistics: wrap VecNormalize around StudentObsWrapper instead"
                    )
                inner = inner.venv
            return env.get_full_obs, env.full_observation_space
        if isinstance(env, VecNormalize) and normalize is None and env.norm_obs:
            normalize = env
        env = env.venv
    if normalize is not None:
        return normalize.get_original_obs, normalize.observation_space
    return None
