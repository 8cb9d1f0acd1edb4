"""
:func:`xppo_recommended`: XPPO's recommended options over any PPO hyperparameters, the configuration of the
improvements benchmark (``docs/guide/benchmarks.md``, "Improvements over PPO at PPO's hyperparameters").

The options change the critic's targets and, for Gaussian policies, the update pass's action distribution, never
the rollouts or the hyperparameters, so they go on top of a tuned PPO entry (rl-zoo3's) unchanged:

- ``normalize_values=True``: value targets normalized with running return statistics, the head's outputs preserved
  (PopArt, van Hasselt et al. 2016; Andrychowicz et al. 2021, "What Matters in On-Policy Reinforcement Learning?").
- ``policy_kwargs=dict(rpo_alpha=0.5)`` for ``Box`` action spaces: uniform noise ``U(-0.5, 0.5)`` on the Gaussian's
  mean in the update pass (Rahman & Xue 2022, "Robust Policy Optimization in Deep Reinforcement Learning").
"""

from typing import Any

import gymnasium as gym
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnv

#: the options every env gets
RECOMMENDED_OPTIONS: dict[str, Any] = dict(normalize_values=True)
#: the policy options a ``Box`` action space (a Gaussian policy) gets on top
RECOMMENDED_BOX_POLICY_OPTIONS: dict[str, Any] = dict(rpo_alpha=0.5)


def _action_space(env: gym.Env | VecEnv | str | spaces.Space) -> spaces.Space:
    if isinstance(env, spaces.Space):
        return env
    if isinstance(env, str):
        made = gym.make(env)
        try:
            return made.action_space
        finally:
            made.close()
    action_space = getattr(env, "action_space", None)
    if not isinstance(action_space, spaces.Space):
        raise TypeError(
            f"xppo_recommended needs an env (gymnasium Env or SB3 VecEnv), an env id or an action space, got "
            f"{type(env).__name__}"
        )
    return action_space


def xppo_recommended(env: gym.Env | VecEnv | str | spaces.Space, **overrides: Any) -> dict[str, Any]:
    """
    XPPO's recommended options for ``env``, as keywords for the constructor:
    ``XPPO("MlpPolicy", env, **xppo_recommended(env))``, with any other hyperparameters beside them or in
    ``overrides`` (``xppo_recommended(env, n_steps=256, policy_kwargs=dict(net_arch=[64, 64]))``). The same
    keywords work for :class:`~sb3_xppo.MaskableXPPO` and :class:`~sb3_xppo.RecurrentXPPO`.

    .. warning::
        On HalfCheetah-v5 with rl-zoo3's PPO entry (``log_std_init=-2``, ``clip_range=0.1``) the preset falls far
        behind PPO (``docs/guide/benchmarks.md``, the confirmation). RPO's half-width is absolute, and there the mean's
        shift is up to 3.7 of the policy's initial standard deviations. ``policy_kwargs=dict(rpo_alpha=0.0)`` keeps
        value normalization alone.

    :param env: the env (or its id, or its action space): RPO is added for ``Box`` action spaces only
    :param overrides: keywords that win over the recommended ones; ``policy_kwargs`` are merged, the caller's
        keys winning
    :return: the keywords, ``policy_kwargs`` a fresh dict
    """
    action_space = _action_space(env)
    options: dict[str, Any] = dict(RECOMMENDED_OPTIONS)
    policy_kwargs: dict[str, Any] = dict(RECOMMENDED_BOX_POLICY_OPTIONS) if isinstance(action_space, spaces.Box) else {}
    user_policy_kwargs = overrides.pop("policy_kwargs", None) or {}
    if not isinstance(user_policy_kwargs, dict):
        raise TypeError(f"policy_kwargs must be a dict, got {type(user_policy_kwargs).__name__}")
    policy_kwargs.update(user_policy_kwargs)
    options.update(overrides)
    if policy_kwargs:
        options["policy_kwargs"] = policy_kwargs
    return options
