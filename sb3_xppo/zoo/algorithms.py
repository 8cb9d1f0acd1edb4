"""
The package's algorithms as rl-zoo3 knows them: their names, their packaged configs and the environment
``python -m sb3_xppo.train`` / ``enjoy`` use for each when no ``--env`` is given.
"""

from __future__ import annotations

from pathlib import Path

from sb3_xppo.envs import GRID_MAZE_ID, MEMORY_MAZE_ID

ALGO_NAME = "xppo"
MASK_ALGO_NAME = "xppo_mask"
LSTM_ALGO_NAME = "xppo_lstm"
MASK_LSTM_ALGO_NAME = "xppo_mask_lstm"
#: The packaged default configs (rl-zoo3's yaml format), one per algorithm; ``setup.py`` ships them as package data.
CONFIG_PATHS = {
    name: Path(__file__).resolve().parent.parent / "zoo_configs" / f"{name}.yml"
    for name in (ALGO_NAME, MASK_ALGO_NAME, LSTM_ALGO_NAME, MASK_LSTM_ALGO_NAME)
}
CONFIG_PATH = CONFIG_PATHS[ALGO_NAME]
#: The environment ``python -m sb3_xppo.train`` / ``enjoy`` use when no ``--env`` is given, for XPPO and for
#: any algorithm not in :data:`DEFAULT_ENVS`.
DEFAULT_ENV = "LunarLander-v3"
#: The default environment of each of the package's algorithms: a masked one for ``xppo_mask``, a partially
#: observable one (rl-zoo3's CartPole without velocities) for ``xppo_lstm``, one that takes both for
#: ``xppo_mask_lstm``.
DEFAULT_ENVS = {
    ALGO_NAME: DEFAULT_ENV,
    MASK_ALGO_NAME: GRID_MAZE_ID,
    LSTM_ALGO_NAME: "CartPoleNoVel-v1",
    MASK_LSTM_ALGO_NAME: MEMORY_MAZE_ID,
}


def default_env(algo: str) -> str:
    """
    :param algo: an rl-zoo3 algorithm name
    :return: the environment ``python -m sb3_xppo.train`` / ``enjoy`` use for it when no ``--env`` is given
    """
    return DEFAULT_ENVS.get(algo, DEFAULT_ENV)
