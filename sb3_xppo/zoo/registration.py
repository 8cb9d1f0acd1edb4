"""
The package's algorithms as rl-zoo3 knows them: ``xppo`` (XPPO), ``xppo_mask`` (MaskableXPPO), ``xppo_lstm``
(RecurrentXPPO) and ``xppo_mask_lstm`` (MaskableRecurrentXPPO), with their optuna samplers and converter
(:func:`algorithm_tables`). :mod:`sb3_xppo.zoo.session` writes them in rl-zoo3's tables.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sb3_xppo.ppo_mask import MaskableXPPO
from sb3_xppo.ppo_mask_recurrent import MaskableRecurrentXPPO
from sb3_xppo.ppo_recurrent import RecurrentXPPO
from sb3_xppo.xppo import XPPO
from sb3_xppo.zoo.algorithms import ALGO_NAME, LSTM_ALGO_NAME, MASK_ALGO_NAME, MASK_LSTM_ALGO_NAME
from sb3_xppo.zoo.search_space import convert_xppo_params, sample_xppo_lstm_params, sample_xppo_params


def algorithm_tables() -> tuple[dict[str, type], dict[str, Callable[..., Any]], dict[str, Callable[..., Any]]]:
    """
    What rl-zoo3 is told of the package's algorithms (:func:`sb3_xppo.zoo.session.install_algorithms` tells it).

    :return: name -> algorithm (``ALGOS``), name -> optuna sampler (``HYPERPARAMS_SAMPLER``) and name -> converter
        (``HYPERPARAMS_CONVERTER``)
    """
    algorithms: dict[str, type] = {
        ALGO_NAME: XPPO,
        MASK_ALGO_NAME: MaskableXPPO,
        LSTM_ALGO_NAME: RecurrentXPPO,
        MASK_LSTM_ALGO_NAME: MaskableRecurrentXPPO,
    }
    # MaskableRecurrentXPPO's keywords are RecurrentPPO's: it searches RecurrentXPPO's space
    samplers: dict[str, Callable[..., Any]] = {
        ALGO_NAME: sample_xppo_params,
        MASK_ALGO_NAME: sample_xppo_params,
        LSTM_ALGO_NAME: sample_xppo_lstm_params,
        MASK_LSTM_ALGO_NAME: sample_xppo_lstm_params,
    }
    return algorithms, samplers, dict.fromkeys(algorithms, convert_xppo_params)
