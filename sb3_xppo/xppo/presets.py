"""
:func:`xppo_recommended`: XPPO's recommended options over any PPO hyperparameters, the configuration of the
improvements benchmark's confirmation (``docs/guide/benchmarks.md``, "Improvements over PPO at PPO's
hyperparameters").

The options change the critic's targets, never the rollouts, the policy or the hyperparameters, so they go on top
of a tuned PPO entry (rl-zoo3's) unchanged:

- ``normalize_values=True``: value targets normalized with running return statistics, the head's outputs preserved
  (PopArt, van Hasselt et al. 2016; Andrychowicz et al. 2021, "What Matters in On-Policy Reinforcement Learning?").

RPO (``policy_kwargs=dict(rpo_alpha=0.5)``, Rahman & Xue 2022) was part of the preset for ``Box`` actions until the
confirmation found the pair far behind PPO on HalfCheetah-v5, and RPO alone the cause there; it stays an option.
"""

from typing import Any

import gymnasium as gym
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnv

#: the options every env gets
RECOMMENDED_OPTIONS: dict[str, Any] = dict(normalize_values=True)


def xppo_recommended(env: gym.Env | VecEnv | str | spaces.Space, **overrides: Any) -> dict[str, Any]:
    """
    XPPO's recommended options for ``env``, as keywords for the constructor:
    ``XPPO("MlpPolicy", env, **xppo_recommended(env))``, with any other hyperparameters beside them or in
    ``overrides`` (``xppo_recommended(env, n_steps=256, policy_kwargs=dict(net_arch=[64, 64]))``). The same
    keywords work for :class:`~sb3_xppo.MaskableXPPO` and :class:`~sb3_xppo.RecurrentXPPO`.

    The options are value normalization for every action space (Andrychowicz et al. 2021). ``env`` is asked for so
    that a call stays the same where an option holds for some action spaces only, as RPO did for ``Box`` ones:
    ``xppo_recommended(env, policy_kwargs=dict(rpo_alpha=0.5))`` is that earlier preset.

    :param env: the env (a gymnasium ``Env`` or an SB3 ``VecEnv``), its id or its action space
    :param overrides: keywords that win over the recommended ones; ``policy_kwargs`` are passed on as a fresh dict
    :return: the keywords
    """
    if not isinstance(env, (gym.Env, VecEnv, str, spaces.Space)):
        raise TypeError(
            f"xppo_recommended needs an env (gymnasium Env or SB3 VecEnv), an env id or an action space, got "
            f"{type(env).__name__}"
        )
    options: dict[str, Any] = dict(RECOMMENDED_OPTIONS)
    policy_kwargs = overrides.pop("policy_kwargs", None)
    if policy_kwargs is not None and not isinstance(policy_kwargs, dict):
        raise TypeError(f"policy_kwargs must be a dict, got {type(policy_kwargs).__name__}")
    if policy_kwargs:
        options["policy_kwargs"] = dict(policy_kwargs)
    options.update(overrides)
    return options
