"""
What a teacher reads of the student's observations: the keys of a Dict observation (:func:`select_obs`,
:func:`teacher_obs_keys`), normalized with the teacher's own frozen ``VecNormalize`` statistics (:class:`TeacherObs`).
"""

from __future__ import annotations

import copy
import os
import pathlib
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.utils import obs_as_tensor
from stable_baselines3.common.vec_env import VecNormalize

from sb3_xppo.dagger_distill.pytree import Tree, tree_map
from sb3_xppo.loading.files import load_vec_normalize

ObsKeys = str | list[str] | tuple[str, ...] | None


def select_obs(obs: Tree, keys: ObsKeys) -> Tree:
    """
    The part of a (Dict) observation a policy reads.

    :param obs: observation, a tensor or a dict of tensors
    :param keys: None (all of it), one key (its value) or several (a dict of those)
    :return: the selected observation
    """
    if keys is None:
        return obs
    if isinstance(keys, str):
        return obs[keys]
    return {k: obs[k] for k in keys}


def select_space(space: spaces.Space, keys: ObsKeys) -> spaces.Space:
    """
    The observation space of :func:`select_obs` 's result.

    :param space: the full observation space
    :param keys: as in :func:`select_obs`
    :return: the selected space
    """
    if keys is None:
        return space
    if not isinstance(space, spaces.Dict):
        raise ValueError(f"teacher_obs_keys={keys!r} selects keys, but the observations are not a Dict: {space}")
    names = [keys] if isinstance(keys, str) else list(keys)
    missing = [k for k in names if k not in space.spaces]
    if missing:
        raise ValueError(f"teacher_obs_keys={keys!r}: no key {missing} in the observations; the keys are {list(space.spaces)}")
    return space.spaces[keys] if isinstance(keys, str) else spaces.Dict({k: space.spaces[k] for k in names})


def teacher_obs_keys(student_space: spaces.Space, teacher_space: spaces.Space, keys: ObsKeys = None) -> ObsKeys:
    """
    The keys a teacher reads from the student's observations, checked against the teacher's observation space.
    Without ``keys``, a Dict teacher reads its own keys (a privileged teacher may read keys the student ignores).

    :param student_space: the observations the student (and so the teacher) receives
    :param teacher_space: the observation space the teacher was trained on
    :param keys: explicit keys (see :func:`select_obs`)
    :return: the keys to select (None: the whole observation)
    """
    if keys is None and isinstance(student_space, spaces.Dict):
        if isinstance(teacher_space, spaces.Dict):
            keys = None if list(teacher_space.spaces) == list(student_space.spaces) else list(teacher_space.spaces)
        else:
            raise ValueError(
                f"the observations are a Dict with keys {list(student_space.spaces)} but the teacher reads {teacher_space}: "
                "pass teacher_obs_keys, the key (or keys) the teacher reads"
            )
    selected = select_space(student_space, keys)
    if not same_obs_space(selected, teacher_space):
        raise ValueError(f"the teacher reads {teacher_space} but receives {selected} (teacher_obs_keys={keys!r})")
    return keys


def same_obs_space(a: spaces.Space, b: spaces.Space) -> bool:
    """Observation spaces of the same type and shapes (bounds may differ)."""
    if isinstance(a, spaces.Dict) and isinstance(b, spaces.Dict):
        return set(a.spaces) == set(b.spaces) and all(same_obs_space(a.spaces[k], b.spaces[k]) for k in a.spaces)
    if isinstance(a, spaces.Discrete) and isinstance(b, spaces.Discrete):
        return a.n == b.n
    return type(a) is type(b) and a.shape == b.shape


def frozen_vec_normalize(vec_normalize: VecNormalize | str | os.PathLike, trust_code: bool = False) -> VecNormalize:
    """
    A teacher's observation statistics, frozen: a ``VecNormalize`` (a snapshot of it: the object passed in is not
    touched and may go on training) or the ``.pkl`` that ``VecNormalize.save`` (and rl-zoo3) wrote, loaded without
    an environment. It only serves ``normalize_obs``: ``training`` and ``norm_reward`` are off.

    :param vec_normalize: a ``VecNormalize`` or the path of its ``.pkl`` (read without running its code,
        :func:`~sb3_xppo.load_vec_normalize`), as ``DistillOptions.teacher_vec_normalize`` checked it
    :param trust_code: read the ``.pkl`` with ``pickle.load``, as SB3 does
    :return: a ``VecNormalize`` detached from any environment, never updated
    """
    if isinstance(vec_normalize, (str, os.PathLike)):
        if not pathlib.Path(vec_normalize).is_file():
            raise ValueError(f"teacher_vec_normalize: no VecNormalize statistics at {vec_normalize}")
        frozen = load_vec_normalize(vec_normalize, trust_code=trust_code)
    else:
        # What VecNormalize pickles, without pickling (a loaded, unattached one has no venv to drop)
        skip = ("venv", "class_attributes", "returns", "old_obs", "old_reward")
        frozen = VecNormalize.__new__(VecNormalize)
        frozen.__dict__.update(copy.deepcopy({k: v for k, v in vars(vec_normalize).items() if k not in skip}))
        frozen.venv = None  # type: ignore[assignment]
    frozen.training = False
    frozen.norm_reward = False
    return frozen


class TeacherObs:
    """
    What a teacher reads of the raw observations: its keys of a Dict observation (see :func:`select_obs`), then
    normalized with its own frozen ``VecNormalize`` statistics (:func:`frozen_vec_normalize`), as in the env it was
    trained in.

    :param keys: keys of a Dict observation the teacher reads (None: all of it)
    :param vec_normalize: the teacher's statistics (None: no normalization)
    """

    def __init__(self, keys: ObsKeys = None, vec_normalize: VecNormalize | None = None) -> None:
        self.keys = keys
        self.vec_normalize = vec_normalize

    def numpy(self, raw: Any) -> Any:
        """
        :param raw: raw observations (numpy arrays or tensors, or a dict of them), the batch first
        :return: the teacher's observations as numpy arrays (or a dict of them)
        """
        obs = select_obs(tree_map(lambda x: x.cpu().numpy() if isinstance(x, th.Tensor) else np.asarray(x), raw), self.keys)
        return obs if self.vec_normalize is None else self.vec_normalize.normalize_obs(obs)

    def __call__(self, raw: Any, device: th.device | str = "cpu") -> Tree:
        """
        :param raw: raw observations (numpy arrays or tensors, or a dict of them), the batch first
        :param device: device of the result
        :return: the teacher's observations as tensors
        """
        return obs_as_tensor(self.numpy(raw), th.device(device))
