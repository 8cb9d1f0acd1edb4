"""
Registration of the package's algorithms with rl-zoo3: ``xppo`` (XPPO), ``xppo_mask`` (MaskableXPPO),
``xppo_lstm`` (RecurrentXPPO) and ``xppo_mask_lstm`` (MaskableRecurrentXPPO) in ``rl_zoo3.ALGOS`` and, with their
optuna samplers and converter, in ``rl_zoo3.hyperparams_opt.HYPERPARAMS_SAMPLER`` / ``HYPERPARAMS_CONVERTER``, written
through every rl-zoo3 module that binds those tables (``train``, ``exp_manager``, ``enjoy``).
"""

from __future__ import annotations

import contextlib

from sb3_xppo.ppo_mask import MaskableXPPO
from sb3_xppo.ppo_mask_recurrent import MaskableRecurrentXPPO
from sb3_xppo.ppo_recurrent import RecurrentXPPO
from sb3_xppo.xppo import XPPO
from sb3_xppo.zoo.algorithms import ALGO_NAME, LSTM_ALGO_NAME, MASK_ALGO_NAME, MASK_LSTM_ALGO_NAME
from sb3_xppo.zoo.search_space import convert_xppo_params, sample_xppo_lstm_params, sample_xppo_params


def register() -> None:
    """
    Make ``xppo``, ``xppo_mask``, ``xppo_lstm`` and ``xppo_mask_lstm`` known to rl-zoo3: the algorithms, their optuna
    samplers and converters. Idempotent.

    The package's own environments (``sb3_xppo/GridMaze-v0``) are registered with gymnasium when this module
    is imported. This also imports MO-Gymnasium when it is installed, so that its environments
    (``mo-lunar-lander-v3``) are in gymnasium's registry, the way rl-zoo3's ``import_envs`` does for other env
    packages.
    """
    import rl_zoo3
    import rl_zoo3.enjoy
    import rl_zoo3.exp_manager
    import rl_zoo3.hyperparams_opt
    import rl_zoo3.train
    import rl_zoo3.utils

    algorithms = {
        ALGO_NAME: XPPO,
        MASK_ALGO_NAME: MaskableXPPO,
        LSTM_ALGO_NAME: RecurrentXPPO,
        MASK_LSTM_ALGO_NAME: MaskableRecurrentXPPO,
    }
    # MaskableRecurrentXPPO's keywords are RecurrentPPO's: it searches RecurrentXPPO's space
    samplers = {
        ALGO_NAME: sample_xppo_params,
        MASK_ALGO_NAME: sample_xppo_params,
        LSTM_ALGO_NAME: sample_xppo_lstm_params,
        MASK_LSTM_ALGO_NAME: sample_xppo_lstm_params,
    }
    # train, exp_manager and enjoy import ALGOS (and exp_manager the optuna tables) by name. Today they all
    # bind the dicts defined in rl_zoo3.utils / rl_zoo3.hyperparams_opt, so this writes one dict each; writing
    # through every module keeps it right if a module ever binds its own copy.
    for module in (rl_zoo3, rl_zoo3.utils, rl_zoo3.train, rl_zoo3.exp_manager, rl_zoo3.enjoy):
        module.ALGOS.update(algorithms)
    for module in (rl_zoo3.hyperparams_opt, rl_zoo3.exp_manager):
        module.HYPERPARAMS_SAMPLER.update(samplers)
        module.HYPERPARAMS_CONVERTER.update(dict.fromkeys(algorithms, convert_xppo_params))

    with contextlib.suppress(ImportError):
        import mo_gymnasium  # noqa: F401  (registers the MO-Gymnasium environments)
