"""
Pickle files read safely (docs/guide/security.md): ``VecNormalize`` statistics and replay buffers, through
:class:`~sb3_xppo.loading.unpickler.SafeUnpickler`, with what older stacks wrote (gym spaces) rebuilt and a warning
saying so.
"""

from __future__ import annotations

import io
import os
import pickle
import warnings
from typing import Any

from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from sb3_xppo.loading.errors import PICKLE_HINT, UnreadableFileError, UnsafeFileError
from sb3_xppo.loading.unpickler import ALLOCATION_BUDGET, SafeUnpickler


def load_pickle(path: str | os.PathLike, trust_code: bool = False) -> Any:
    """
    A pickle file (a replay buffer, ``VecNormalize`` statistics) read with the allowlist.

    :param path: the file
    :param trust_code: read it with ``pickle.load``, running whatever it names
    :return: the object
    :raises UnsafeFileError: when it asks for a global outside the allowlist (every one listed)
    """
    with open(path, "rb") as file:
        if trust_code:
            return pickle.load(file)
        data = file.read()
    unpickler = SafeUnpickler(io.BytesIO(data), os.fspath(path), PICKLE_HINT, ALLOCATION_BUDGET + 4 * len(data))
    try:
        loaded = unpickler.load()
    except UnsafeFileError:
        raise
    except (pickle.UnpicklingError, EOFError, IndexError, KeyError) as error:
        raise UnreadableFileError(
            f"{os.fspath(path)} is not a pickle the libraries write: {type(error).__name__}: {error}"
        ) from None
    if unpickler.notes:
        warnings.warn(f"{os.fspath(path)}: {'; '.join(dict.fromkeys(unpickler.notes))}", stacklevel=2)
    return loaded


def load_vec_normalize(path: str | os.PathLike, venv: VecEnv | None = None, trust_code: bool = False) -> VecNormalize:
    """
    ``VecNormalize.load`` without running the file's code: the statistics ``VecNormalize.save`` (and rl-zoo3) wrote,
    a gym-era file's spaces rebuilt as gymnasium's.

    :param path: the ``.pkl``
    :param venv: the env to wrap (None: statistics only, no env)
    :param trust_code: read it with ``pickle.load``
    :return: the ``VecNormalize``
    :raises UnsafeFileError: when the file asks for a global outside the allowlist
    :raises ValueError: when it holds something else than a ``VecNormalize``
    """
    loaded = load_pickle(path, trust_code)
    if not isinstance(loaded, VecNormalize):
        raise ValueError(f"{path} holds a {type(loaded).__name__}, not VecNormalize statistics")
    if venv is not None:
        loaded.set_venv(venv)
    return loaded
