"""
Where multi-critic XPPO gets its per-group rewards: ``info[vector_reward_key]`` of every step, a length-``G`` vector
(MO-Gymnasium's convention, written by ``mo_gymnasium.wrappers.LinearReward``). :class:`RewardGroups` builds that
vector from named reward terms in an env's info; :class:`GroupRewardVecEnv` reads and checks it during collection,
with the optional ``info[vector_reward_key + "_mask"]`` of groups that exist on some steps only.
"""

from collections.abc import Mapping, Sequence
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
import torch as th
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper, unwrap_vec_normalize
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn


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


class GroupRewardVecEnv(VecEnvWrapper):
    """
    Gives the rollout loop each step's group rewards ``info[vector_reward_key]`` (checked by
    :func:`read_vector_rewards`) in place of the scalar reward, as a ``(n_envs, G)`` tensor on the policy's device.
    SB3's ``collect_rollouts`` then bootstraps a truncated episode with ``rewards[idx] += gamma * V(terminal_obs)``,
    where a multi-critic policy's ``V`` is a row of ``G`` values: each group from its own value, on any device.
    The scalar reward is still recorded by the env's ``Monitor`` (episode returns).

    - **Reward normalization**: under ``VecNormalize(norm_reward=True)`` the group rewards are normalized as
      VecNormalize normalizes the scalar reward, with its own running statistics (the std of the discounted scalar
      return, saved with the VecNormalize) and its clipping: ``clip(r_g / sqrt(var + epsilon), -clip_reward,
      clip_reward)``. One scale for all groups: ``sum_g w_g r_g`` stays the normalized scalar reward when the
      weights reproduce it (clipping aside), where a scale per group would change the objective (``sum_g w_g r_g /
      s_g``); with ``normalize_groups=True`` the groups' advantages are rescaled each on its own anyway.
    - **Groups present on some steps only**: ``info[vector_reward_key + "_mask"]`` (``G`` bools), when the env
      gives it, goes to ``rollout_buffer.stage_group_masks`` (see
      :class:`~sb3_xppo.multi_critic.MultiCriticBufferMixin`); an env without it has every group at every step.

    :param venv: the vectorized environment
    :param n_groups: number of reward groups ``G``
    :param vector_reward_key: the info key of the reward vector
    :param device: where the rewards go (the policy's device)
    :param rollout_buffer: the buffer of the rollout, told each step's group masks (None: masks are refused)
    """

    def __init__(
        self,
        venv: VecEnv,
        n_groups: int,
        vector_reward_key: str = "vector_reward",
        device: th.device | str = "cpu",
        rollout_buffer: Any = None,
    ):
        super().__init__(venv)
        self.n_groups = n_groups
        self.vector_reward_key = vector_reward_key
        self.mask_key = f"{vector_reward_key}_mask"
        self.device = th.device(device)
        self.stage_group_masks = getattr(rollout_buffer, "stage_group_masks", None)
        self.vec_normalize = unwrap_vec_normalize(venv)

    def reset(self) -> VecEnvObs:
        return self.venv.reset()

    def step_wait(self) -> VecEnvStepReturn:
        obs, _, dones, infos = self.venv.step_wait()
        rewards = read_vector_rewards(infos, self.n_groups, self.vector_reward_key)
        if self.vec_normalize is not None:
            # VecNormalize's own formula and statistics (already updated with this step's scalar reward); a no-op
            # unless norm_reward
            rewards = self.vec_normalize.normalize_reward(rewards).astype(np.float32, copy=False)
        masks = read_group_masks(infos, self.n_groups, self.mask_key)
        if self.stage_group_masks is not None:
            self.stage_group_masks(masks)
        elif masks is not None:
            raise ValueError(
                f"info[{self.mask_key!r}] (reward groups present on some steps only) needs a multi-critic rollout buffer "
                "with stage_group_masks(), such as sb3_xppo.multi_critic.MultiCriticRolloutBuffer"
            )
        return obs, th.as_tensor(rewards, device=self.device), dones, infos  # type: ignore[return-value]
