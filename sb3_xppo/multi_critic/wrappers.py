"""
Where multi-critic XPPO gets its per-group rewards: ``info[vector_reward_key]`` of every step, a length-``G`` vector
(MO-Gymnasium's convention, written by ``mo_gymnasium.wrappers.LinearReward``). :class:`RewardGroups` builds that
vector from named reward terms in an env's info; :class:`GroupRewards` reads and checks it during XPPO's rollout,
with the optional ``info[vector_reward_key + "_mask"]`` of groups that exist on some steps only.
"""

from collections.abc import Mapping, Sequence
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import VecEnv, unwrap_vec_normalize


class RewardGroups(gym.Wrapper):
    """
    Puts a vector of reward groups into each step's ``info[vector_reward_key]``, built from named reward terms that
    the env already reports in its info (e.g. MuJoCo's ``reward_forward`` / ``reward_ctrl``), for multi-critic
    XPPO (``XPPO(..., reward_groups=wrapper.group_names)``). The scalar reward is left as it is.

    :param env: the environment
    :param groups: the info keys of the terms, one group each (``["reward_run", "reward_ctrl"]``), or a mapping from
        group name to one info key or a list of info keys summed into that group
        (``{"task": "reward_forward", "energy": ["reward_ctrl", "reward_contact"]}``)
    :param remainder: None, or the name of one more group, last, holding the env's reward minus the sum of the
        listed terms (whatever the terms do not cover)
    :param vector_reward_key: the info key written, XPPO's ``vector_reward_key``
    """

    def __init__(
        self,
        env: gym.Env,
        groups: Sequence[str] | Mapping[str, str | Sequence[str]],
        remainder: str | None = None,
        vector_reward_key: str = "vector_reward",
    ) -> None:
        super().__init__(env)
        if isinstance(groups, Mapping):
            terms = {name: [keys] if isinstance(keys, str) else list(keys) for name, keys in groups.items()}
        elif isinstance(groups, Sequence) and not isinstance(groups, str):
            terms = {key: [key] for key in groups}
        else:
            raise TypeError(f"groups must be a list of info keys or a dict group name -> info key(s), got {groups!r}")
        if not terms or not all(isinstance(key, str) for keys in terms.values() for key in keys):
            raise ValueError(f"groups must name at least one group, each made of info keys (strings), got {groups!r}")
        if remainder is not None and remainder in terms:
            raise ValueError(f"remainder={remainder!r} is already a group name: {list(terms)}")
        self.terms = terms
        self.remainder = remainder
        self.vector_reward_key = vector_reward_key
        #: the group names, in the order of the reward vector (pass them as XPPO's ``reward_groups``)
        self.group_names = [*terms, *([remainder] if remainder is not None else [])]

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        groups = []
        for name, keys in self.terms.items():
            missing = [key for key in keys if key not in info]
            if missing:
                raise ValueError(
                    f"RewardGroups: group {name!r} needs info[{missing[0]!r}], not in the step's info {list(info)}"
                )
            groups.append(sum(float(info[key]) for key in keys))
        if self.remainder is not None:
            groups.append(float(reward) - sum(groups))
        info[self.vector_reward_key] = np.asarray(groups, dtype=np.float32)
        return obs, reward, terminated, truncated, info


def read_vector_rewards(infos: list[dict[str, Any]], n_groups: int, vector_reward_key: str) -> np.ndarray:
    """
    Each env's ``info[vector_reward_key]`` of one step, checked.

    :param infos: the step's infos, one per env
    :param n_groups: the expected vector length ``G``
    :param vector_reward_key: the info key
    :return: ``(n_envs, G)`` float32 rewards
    :raises ValueError: naming the env index and the key, when the key is missing, the vector does not have ``G``
        numbers, or one is not finite
    """
    rewards = np.empty((len(infos), n_groups), dtype=np.float32)
    for idx, info in enumerate(infos):
        where = f"env {idx}: info[{vector_reward_key!r}]"
        if vector_reward_key not in info:
            raise ValueError(
                f"{where} is missing: multi-critic XPPO reads each step's {n_groups} group rewards there "
                "(wrap the env in mo_gymnasium.wrappers.LinearReward or sb3_xppo.RewardGroups)"
            )
        try:
            vector = np.asarray(info[vector_reward_key], dtype=np.float64)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{where} must be {n_groups} numbers, got {info[vector_reward_key]!r}") from error
        if vector.ndim > 1 or vector.size != n_groups:
            raise ValueError(f"{where} must hold {n_groups} rewards (one per reward group), got shape {vector.shape}")
        rewards[idx] = vector.reshape(n_groups)
        if not np.isfinite(rewards[idx]).all():
            raise ValueError(f"{where} has a non-finite reward: {vector.tolist()}")
    return rewards


def read_group_masks(infos: list[dict[str, Any]], n_groups: int, mask_key: str) -> np.ndarray | None:
    """
    Each env's ``info[mask_key]`` of one step: which reward groups exist at that step.

    :param infos: the step's infos, one per env
    :param n_groups: the expected length ``G``
    :param mask_key: the info key (``vector_reward_key + "_mask"``)
    :return: ``(n_envs, G)`` bools (all True for an env whose info has no mask), or None when no info has one
    :raises ValueError: naming the env index and the key, when a mask does not have ``G`` entries of 0/1
    """
    if not any(mask_key in info for info in infos):
        return None
    masks = np.ones((len(infos), n_groups), dtype=bool)
    for idx, info in enumerate(infos):
        if mask_key not in info:
            continue
        try:
            mask = np.asarray(info[mask_key], dtype=np.float64)
        except (TypeError, ValueError) as error:
            raise ValueError(f"env {idx}: info[{mask_key!r}] must be {n_groups} bools, got {info[mask_key]!r}") from error
        if mask.ndim > 1 or mask.size != n_groups or not np.isin(mask, (0.0, 1.0)).all():
            raise ValueError(
                f"env {idx}: info[{mask_key!r}] must hold {n_groups} bools (which reward groups exist at this step), "
                f"got {info[mask_key]!r}"
            )
        masks[idx] = mask.reshape(n_groups) != 0
    return masks


class GroupRewards:
    """
    Reads each step's group rewards for XPPO's rollout (``collect_rollouts``), from the infos the env returned: the
    rewards ``info[vector_reward_key]`` (checked by :func:`read_vector_rewards`) and the groups present
    ``info[vector_reward_key + "_mask"]`` (:func:`read_group_masks`). The rollout stores them in the multi-critic
    buffer in place of the scalar reward, and bootstraps a truncated episode's groups each from its own value of the
    terminal observation. The scalar reward is left as it is (callbacks and the env's ``Monitor`` see it).

    **Reward normalization**: under ``VecNormalize(norm_reward=True)`` the group rewards are normalized as VecNormalize
    normalizes the scalar reward, with its own running statistics (the std of the discounted scalar return, saved
    with the VecNormalize) and its clipping: ``clip(r_g / sqrt(var + epsilon), -clip_reward, clip_reward)``. One
    scale for all groups: ``sum_g w_g r_g`` stays the normalized scalar reward when the weights reproduce it (clipping
    aside), where a scale per group would change the objective (``sum_g w_g r_g / s_g``); with
    ``normalize_groups=True`` the groups' advantages are rescaled each on its own anyway.

    :param env: the rollout's vectorized environment (its ``VecNormalize``, if any, is found in its chain)
    :param n_groups: number of reward groups ``G``
    :param vector_reward_key: the info key of the reward vector
    """

    def __init__(self, env: VecEnv, n_groups: int, vector_reward_key: str = "vector_reward") -> None:
        self.n_groups = n_groups
        self.vector_reward_key = vector_reward_key
        self.mask_key = f"{vector_reward_key}_mask"
        self.vec_normalize = unwrap_vec_normalize(env)

    def read(self, infos: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray | None]:
        """
        :param infos: the step's infos, one per env
        :return: ``(n_envs, G)`` float32 group rewards (normalized under a reward-normalizing ``VecNormalize``), and
            ``(n_envs, G)`` bools of the groups present, or None when every group is
        :raises ValueError: naming the env index and the key, for a missing key, a vector of the wrong length, a
            non-finite reward or a malformed mask
        """
        rewards = read_vector_rewards(infos, self.n_groups, self.vector_reward_key)
        if self.vec_normalize is not None:
            # VecNormalize's own formula and statistics (already updated with this step's scalar reward); a no-op
            # unless norm_reward
            rewards = self.vec_normalize.normalize_reward(rewards).astype(np.float32, copy=False)
        return rewards, read_group_masks(infos, self.n_groups, self.mask_key)
