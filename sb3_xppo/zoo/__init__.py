"""
XPPO in the RL Baselines3 Zoo (rl-zoo3).

rl-zoo3 looks algorithms up by name in ``rl_zoo3.ALGOS`` and their optuna search spaces in
``rl_zoo3.hyperparams_opt.HYPERPARAMS_SAMPLER`` / ``HYPERPARAMS_CONVERTER``; :func:`~sb3_xppo.zoo.register` adds XPPO
to all three under the name ``"xppo"``, ``MaskableXPPO`` as ``"xppo_mask"``, ``RecurrentXPPO`` as
``"xppo_lstm"`` and ``MaskableRecurrentXPPO`` as ``"xppo_mask_lstm"``, the way rl-zoo3's own ``train_sbx.py`` /
``enjoy_sbx.py`` plug in the SBX algorithms.
Everything else (configs, eval, checkpoints, tensorboard, optuna, enjoy) is rl-zoo3's own code, called
unchanged by ``python -m sb3_xppo.train`` / ``python -m sb3_xppo.enjoy``, but for what rl-zoo3 cannot do: give a
maskable model its env's action masks when it evaluates or watches it (:mod:`sb3_xppo.zoo.evaluation`),
read a trained agent's run for ``python -m sb3_xppo.distill`` without running its code (:mod:`sb3_xppo.zoo.agents`),
build its envs with the lean vector env, EnvPool or Ray (``--vec-env``, an entry's ``vec_env`` key:
:mod:`sb3_xppo.zoo.vec_envs`), and create optuna's tables before a distributed search. All of it is done to
rl-zoo3's and SB3's objects in one module, :mod:`sb3_xppo.zoo.session`, under one context manager,
:func:`~sb3_xppo.zoo.zoo_session`, that puts everything back.

One module per job (``agents``, ``algorithms``, ``registration``, ``search_space``, ``storage``, ``evaluation``,
``env_wrappers``, ``runs``, ``vec_envs``, ``session``), every public name re-exported here: ``sb3_xppo.zoo.<name>`` is
the path configs and code use (``env_wrapper: sb3_xppo.zoo.linear_reward``).

Only the command-line entry points import this package: it imports rl-zoo3 and optuna, which the
rest of the package does not need.
"""

from sb3_xppo.zoo.agents import AgentSettings, agent_settings
from sb3_xppo.zoo.algorithms import (
    ALGO_NAME,
    CONFIG_PATH,
    CONFIG_PATHS,
    DEFAULT_ENV,
    DEFAULT_ENVS,
    LSTM_ALGO_NAME,
    MASK_ALGO_NAME,
    MASK_LSTM_ALGO_NAME,
    default_env,
)
from sb3_xppo.zoo.env_wrappers import linear_reward
from sb3_xppo.zoo.runs import CURVE_FILENAME, find_run_dirs, plot_learning_curve, summarize_evaluations
from sb3_xppo.zoo.search_space import (
    ACTOR_LOSSES,
    CLIP_RANGE_VF,
    DUAL_CLIP_THRESHOLDS,
    NORMALIZE_ADVANTAGE,
    VALUE_LOSSES,
    XPPO_SEARCH_KEYS,
    add_xppo_choices,
    convert_xppo_params,
    sample_xppo_lstm_params,
    sample_xppo_params,
)
from sb3_xppo.zoo.session import register, zoo_session
from sb3_xppo.zoo.storage import prepare_storage
from sb3_xppo.zoo.vec_envs import DEFAULT_VEC_ENV, VEC_ENV_CHOICES, VEC_ENV_KEY, split_ray_args, split_vec_env_arg

__all__ = [
    "ACTOR_LOSSES",
    "ALGO_NAME",
    "CLIP_RANGE_VF",
    "CONFIG_PATH",
    "CONFIG_PATHS",
    "CURVE_FILENAME",
    "DEFAULT_ENV",
    "DEFAULT_ENVS",
    "DEFAULT_VEC_ENV",
    "DUAL_CLIP_THRESHOLDS",
    "LSTM_ALGO_NAME",
    "MASK_ALGO_NAME",
    "MASK_LSTM_ALGO_NAME",
    "NORMALIZE_ADVANTAGE",
    "VALUE_LOSSES",
    "VEC_ENV_CHOICES",
    "VEC_ENV_KEY",
    "XPPO_SEARCH_KEYS",
    "AgentSettings",
    "add_xppo_choices",
    "agent_settings",
    "convert_xppo_params",
    "default_env",
    "find_run_dirs",
    "linear_reward",
    "plot_learning_curve",
    "prepare_storage",
    "register",
    "sample_xppo_lstm_params",
    "sample_xppo_params",
    "split_ray_args",
    "split_vec_env_arg",
    "summarize_evaluations",
    "zoo_help",
    "zoo_session",
]
