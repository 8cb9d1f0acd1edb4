"""
XPPO's optuna search space for rl-zoo3's ``-optimize``: the samplers of ``xppo`` / ``xppo_mask`` / ``xppo_lstm``
(rl-zoo3's PPO or RecurrentPPO space plus XPPO's loss choices) and the converter that turns a stored trial back
into constructor keywords.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sb3_xppo.common.loss_registry import ACTOR_LOSS_REGISTRY, ACTOR_LOSSES, VALUE_LOSS_REGISTRY
from sb3_xppo.common.loss_registry import VALUE_LOSSES as BUILT_IN_VALUE_LOSSES

if TYPE_CHECKING:
    import optuna

# XPPO's own search space, sampled on top of rl-zoo3's PPO space (the names are optuna parameter names); the losses
# are the registry's built-in ones (sb3_xppo.common.loss_registry), the value losses those it marks searched
# ('hl_gauss' is not: its support needs configuring).
VALUE_LOSSES = tuple(name for name in BUILT_IN_VALUE_LOSSES if VALUE_LOSS_REGISTRY[name].searched)
NORMALIZE_ADVANTAGE = {"minibatch": "minibatch", "rollout": "rollout", "off": False}
DUAL_CLIP_THRESHOLDS = (None, 2.0, 3.0, 5.0)
CLIP_RANGE_VF = (0.1, 0.2, 0.5, 1.0)
#: None: the actor loss's own default (1e-6 for HPO, no skipping for the others)
MIN_ADVANTAGE_STD = (None, 1e-6, 1e-3)
#: None: the learning rate is rl-zoo3's drawn one throughout; a float: the KL target of the KL-adaptive learning rate,
#: which starts from the drawn one (rsl_rl's target is 0.01, rl_games' and Sample Factory's 0.008)
ADAPTIVE_KL_TARGETS = (None, 0.005, 0.01, 0.02)
XPPO_SEARCH_KEYS = (
    "actor_loss",
    "value_loss",
    "clip_range_vf",
    "dual_clip",
    "delightful",
    "normalize_advantage",
    "min_advantage_std",
    "adaptive_kl",
)


def add_xppo_choices(trial: optuna.Trial, hyperparams: dict[str, Any]) -> dict[str, Any]:
    """
    Draw XPPO's loss choices in an optuna trial and add them to the keywords a PPO-family sampler drew.

    Every trial draws the actor loss (PPO clip, Schulman et al. 2017; SPO, Xie et al. 2025; asymmetric SPO; HPO,
    after Kaddour 2026), the skipping of minibatches without advantage signal (``min_advantage_std``, DAPO's dynamic
    sampling, Yu et al. 2025), the KL-adaptive learning rate's target (``adaptive_kl``, rsl_rl's rule, Rudin et al.
    2022; None: off), the value loss (plain MSE, SB3's clipping, the max-form clipping of Schulman et al.
    2017, improved clipping of Lee & Chung 2024) with its ``clip_range_vf``, dual clipping (Ye et al. 2020; used
    with the clip loss only), the delightful gate (Osband 2026) and where advantages are normalized. All of them are
    drawn in every trial (no conditional parameters), so that rl-zoo3's multivariate TPE sampler models them jointly.

    :param trial: the optuna trial
    :param hyperparams: the keywords drawn by a sampler of rl-zoo3's for the parent algorithm (PPO, RecurrentPPO)
    :return: ``hyperparams`` updated with XPPO's keywords
    """
    sampled = {
        "actor_loss": trial.suggest_categorical("actor_loss", ACTOR_LOSSES),
        "value_loss": trial.suggest_categorical("value_loss", VALUE_LOSSES),
        "clip_range_vf": trial.suggest_categorical("clip_range_vf", CLIP_RANGE_VF),
        "dual_clip": trial.suggest_categorical("dual_clip", DUAL_CLIP_THRESHOLDS),
        "delightful": trial.suggest_categorical("delightful", (False, True)),
        "normalize_advantage": trial.suggest_categorical("normalize_advantage", tuple(NORMALIZE_ADVANTAGE)),
        "min_advantage_std": trial.suggest_categorical("min_advantage_std", MIN_ADVANTAGE_STD),
        "adaptive_kl": trial.suggest_categorical("adaptive_kl", ADAPTIVE_KL_TARGETS),
    }
    hyperparams.update(_convert_xppo_choices(sampled))
    return hyperparams


def sample_xppo_params(trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict[str, Any]) -> dict[str, Any]:
    """
    Optuna sampler for XPPO and MaskableXPPO: rl-zoo3's PPO search space plus XPPO's loss choices
    (:func:`add_xppo_choices`).

    The PPO part is rl-zoo3's ``sample_ppo_params`` (batch size, n_steps, gamma, GAE lambda, learning rate,
    entropy coefficient, clip range, epochs, gradient clipping, network). rl-zoo3 has no sampler of its own for
    sb3-contrib's MaskablePPO, whose keywords are PPO's: ``xppo_mask`` searches this same space.

    The signature is the one rl-zoo3 calls every ``HYPERPARAMS_SAMPLER`` entry with.

    :param trial: the optuna trial
    :param n_actions: size of a continuous action (unused, part of rl-zoo3's signature)
    :param n_envs: number of parallel envs (unused, part of rl-zoo3's signature)
    :param additional_args: rl-zoo3's extra arguments (unused, part of rl-zoo3's signature)
    :return: keyword arguments for the ``XPPO`` (``MaskableXPPO``) constructor
    """
    from rl_zoo3.hyperparams_opt import sample_ppo_params

    return add_xppo_choices(trial, sample_ppo_params(trial, n_actions, n_envs, additional_args))


def sample_xppo_lstm_params(
    trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict[str, Any]
) -> dict[str, Any]:
    """
    Optuna sampler for RecurrentXPPO: rl-zoo3's RecurrentPPO search space (``sample_ppo_lstm_params``) plus XPPO's
    loss choices (:func:`add_xppo_choices`). Same signature as :func:`sample_xppo_params`.

    :param trial: the optuna trial
    :param n_actions: size of a continuous action (unused, part of rl-zoo3's signature)
    :param n_envs: number of parallel envs (unused, part of rl-zoo3's signature)
    :param additional_args: rl-zoo3's extra arguments (unused, part of rl-zoo3's signature)
    :return: keyword arguments for the ``RecurrentXPPO`` constructor
    """
    from rl_zoo3.hyperparams_opt import sample_ppo_lstm_params

    return add_xppo_choices(trial, sample_ppo_lstm_params(trial, n_actions, n_envs, additional_args))


def convert_xppo_params(sampled_params: dict[str, Any]) -> dict[str, Any]:
    """
    Turn the raw parameters of an optuna trial drawn by :func:`sample_xppo_params` or :func:`sample_xppo_lstm_params`
    into keywords of ``XPPO``, ``MaskableXPPO`` or ``RecurrentXPPO``.

    rl-zoo3 calls it when it loads a trial from a study (``--storage ... --study-name ... --trial-id N``).
    The PPO part goes through rl-zoo3's own ``convert_onpolicy_params`` (its converter for PPO and RecurrentPPO).

    :param sampled_params: ``trial.params``
    :return: keyword arguments for the ``XPPO`` constructor
    """
    from rl_zoo3.hyperparams_opt import convert_onpolicy_params

    ppo_params = {key: value for key, value in sampled_params.items() if key not in XPPO_SEARCH_KEYS}
    xppo_params = {key: value for key, value in sampled_params.items() if key in XPPO_SEARCH_KEYS}
    return {**convert_onpolicy_params(ppo_params), **_convert_xppo_choices(xppo_params)}


def _convert_xppo_choices(sampled: dict[str, Any]) -> dict[str, Any]:
    hyperparams = dict(sampled)
    if "normalize_advantage" in hyperparams:
        hyperparams["normalize_advantage"] = NORMALIZE_ADVANTAGE[hyperparams["normalize_advantage"]]
    if hyperparams.get("value_loss") == "mse":
        # plain MSE does not clip: the sampled clip range is dropped (left out, not None, which rl-zoo3's parsing of a
        # stored trial refuses; an entry's own clip_range_vf is ignored by 'mse', with a warning)
        hyperparams.pop("clip_range_vf", None)
    if not ACTOR_LOSS_REGISTRY[hyperparams.get("actor_loss", "clip")].dual_clip:
        # XPPO refuses dual clipping with a loss that does not take it (SPO's and HPO's restoring gradient): the drawn
        # threshold is dropped
        hyperparams["dual_clip"] = None
    return hyperparams
