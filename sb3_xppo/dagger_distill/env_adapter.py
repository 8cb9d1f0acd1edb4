"""
An SB3 ``VecEnv`` in the API :class:`~sb3_xppo.dagger_distill.DaggerDistiller` drives (:class:`SB3VecEnvAdapter`):
torch tensors in and out, actions as pytrees of heads, and a maskable or recurrent student's :class:`.PolicyInput`
with each observation.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.utils import obs_as_tensor
from stable_baselines3.common.vec_env import VecEnv

from sb3_xppo.dagger_distill.actions import tree_to_action
from sb3_xppo.dagger_distill.policy_input import (
    PolicyInput,
    batch_first_lstm_states,
    initial_lstm_states,
    is_maskable,
    is_recurrent,
)
from sb3_xppo.dagger_distill.pytree import Tree


class SB3VecEnvAdapter:
    """
    An SB3 ``VecEnv`` in the API :class:`~sb3_xppo.dagger_distill.DaggerDistiller` drives: ``reset() -> (obs, info)``
    and ``step(action_tree) -> (obs, reward, terminated, truncated, info)``, with torch tensors on ``device``.
    Actions come as the pytree a :class:`.PolicyAdapter` samples, and Box actions are clipped to the bounds.

    With the student's ``policy``, a maskable or recurrent student's states are :class:`.PolicyInput`: the env's
    action masks (``get_action_masks``, as MaskablePPO reads them), and the LSTM state the student saw before each
    observation, advanced here at every step with the student's current weights from the observation it acted on
    (reset where an episode starts), as RecurrentPPO's rollouts do. A :class:`.PolicyAdapter` teacher reads what it
    needs of them; a callable teacher gets the observations through ``teacher_state_fn=lambda s, info, step:
    obs_of(s)``.

    :param venv: the vectorised environment
    :param device: device of the returned tensors
    :param policy: the student's policy, for the masks and LSTM state its states carry (None: bare observations)
    """

    def __init__(self, venv: VecEnv, device: th.device | str = "cpu", policy: BasePolicy | None = None) -> None:
        self.venv = venv
        self.num_envs = venv.num_envs
        self.device = th.device(device)
        self.action_space = venv.action_space
        self.policy: Any = policy
        self._masks = is_maskable(policy)
        self._recurrent = is_recurrent(policy)
        if self._masks and not is_masking_supported(venv):
            raise ValueError("the student is maskable but the env has no action_masks() method (sb3-contrib's ActionMasker)")
        self._obs: Tree = None
        self._lstm_states: tuple[th.Tensor, th.Tensor] | None = None
        self._episode_starts: th.Tensor | None = None

    def reset(self) -> tuple[Tree, None]:
        obs: Any = self.venv.reset()  # an array or a dict of arrays (SB3 has no tuple observations)
        if self._recurrent:
            self._lstm_states = initial_lstm_states(self.policy, self.num_envs, self.device)
            self._episode_starts = th.ones(self.num_envs, device=self.device)
        return self._inputs(obs), None

    def step(self, action: Tree) -> tuple[Tree, th.Tensor, th.Tensor, th.Tensor, list[dict[str, Any]]]:
        if self._recurrent:  # the state after the observation just acted on (it does not depend on the action)
            assert self._lstm_states is not None and self._episode_starts is not None, "reset() first"
            with th.no_grad():
                lstm_states = batch_first_lstm_states(self._lstm_states)
                _, after = self.policy.get_distribution(self._obs, lstm_states, self._episode_starts)
            self._lstm_states = batch_first_lstm_states(after)
        actions = tree_to_action(action, self.action_space).cpu().numpy()
        if isinstance(self.action_space, spaces.Box):
            actions = np.clip(actions, self.action_space.low, self.action_space.high)
        obs: Any
        obs, rewards, dones, infos = self.venv.step(actions)
        dones_t = th.as_tensor(dones, device=self.device)
        if self._recurrent:
            self._episode_starts = dones_t.float()
        return (
            self._inputs(obs),
            th.as_tensor(rewards, device=self.device),
            dones_t,
            th.zeros_like(dones_t),
            infos,
        )

    def _inputs(self, obs: Any) -> Tree:
        self._obs = obs_as_tensor(obs, self.device)
        if not (self._masks or self._recurrent):
            return self._obs
        inputs = PolicyInput(obs=self._obs)
        if self._masks:
            inputs["action_masks"] = th.as_tensor(get_action_masks(self.venv), device=self.device).bool()
        if self._recurrent:
            assert self._lstm_states is not None and self._episode_starts is not None
            inputs["lstm_states"] = self._lstm_states
            inputs["episode_starts"] = self._episode_starts
        return inputs
