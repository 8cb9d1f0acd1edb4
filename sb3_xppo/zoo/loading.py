"""
What a command's session puts in place of rl-zoo3's and SB3's loaders (docs/guide/security.md), so that ``enjoy``,
``record_video`` and ``train -i`` run no code from the agent they load: the algorithms' ``load()`` with the allowlist,
``VecNormalize.load`` and the replay buffer's pickle with the allowlist, ``config.yml`` / ``args.yml`` with
:class:`~sb3_xppo.loading.zoo_files.ZooConfigLoader` and ``normalize`` as a literal. :mod:`.session` installs them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from sb3_xppo.core.loading import SafeLoadMixin
from sb3_xppo.loading.archive import safe_load
from sb3_xppo.loading.files import load_pickle, load_vec_normalize


def algorithm_load(cls: type[BaseAlgorithm], trust_code: bool, for_training: bool = False) -> classmethod | None:
    """
    :param cls: an algorithm of rl-zoo3's table
    :param trust_code: the command's ``--trust-code``
    :param for_training: the agent is loaded to train on (``train -i``): a function pickled by value is refused
        (the package's algorithms refuse it when ``learn()`` starts)
    :return: the ``load`` to put on ``cls``: a stock class's checks the file (unless ``trust_code``), one of the
        package's passes ``trust_code`` (its own checks by default); None where the class's own does already
    """
    if issubclass(cls, SafeLoadMixin) != trust_code:
        return None
    original: Callable[..., Any] = cls.load.__func__  # type: ignore[attr-defined]

    def load(klass: type[BaseAlgorithm], path: Any, custom_objects: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        if trust_code:
            return original(klass, path, custom_objects=custom_objects, trust_code=True, **kwargs)
        return safe_load(functools.partial(original, klass), path, custom_objects, for_training=for_training, **kwargs)

    return classmethod(load)


def vec_normalize_load(load_path: str, venv: VecEnv) -> VecNormalize:
    """``VecNormalize.load`` with the allowlist (:func:`~sb3_xppo.load_vec_normalize`)."""
    return load_vec_normalize(load_path, venv)


def load_from_pkl(path: Any, verbose: int = 0) -> Any:
    """SB3's ``load_from_pkl`` (``load_replay_buffer``) with the allowlist."""
    return load_pickle(path)
