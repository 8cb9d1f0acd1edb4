"""
XPPO's rollout: one ``collect_rollouts`` for :class:`~sb3_xppo.XPPO`, :class:`~sb3_xppo.MaskableXPPO` and
:class:`~sb3_xppo.RecurrentXPPO`, step for step the loop of their parents (SB3's ``OnPolicyAlgorithm``, sb3-contrib's
``MaskablePPO`` and ``RecurrentPPO``), with three things SB3's loop has no hook for:

- **multi-critic rewards as data**: each step's group rewards are read from ``info[vector_reward_key]`` into the
  buffer (:class:`~sb3_xppo.multi_critic.GroupRewards`); callbacks see SB3's numpy ``rewards`` (the scalar reward) and
  the group rewards as ``self.locals["group_rewards"]``;
- **action hooks** (:meth:`XPPORolloutMixin.register_action_hook`): code that replaces the executed actions (DAgger's
  teacher acting with probability beta), the stored log-probabilities staying the policy's own;
- **fast paths** (``fast_paths=True``): the policy's forward passes under ``torch.inference_mode`` and, where the
  observation and the parameters are finite, its distributions built without argument validation; never around a
  callback or a hook. The same numbers either way.

What differs between the parents, how the policy is called, lives in a :class:`PolicyCalls` class per algorithm;
:class:`MaskedRecurrentPolicyCalls` (``MaskableRecurrentXPPO``) is the masked and the recurrent ones combined.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from copy import deepcopy
from typing import Any, ClassVar

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.utils import obs_as_tensor
from stable_baselines3.common.vec_env import VecEnv
from torch.utils.hooks import RemovableHandle

from sb3_xppo.common.finite import VecNormalizeGuard, check_finite_observation, guarded_env, rollout_non_finite_error
from sb3_xppo.core.fast_paths import all_finite, library_modules_only, parameters_finite, trusted_policy_calls
from sb3_xppo.core.hooks import add_hook
from sb3_xppo.core.learner import LearnerState
from sb3_xppo.multi_critic.wrappers import GroupRewards

#: ``hook(model, obs, actions, action_masks) -> actions or None`` (see :meth:`XPPORolloutMixin.register_action_hook`)
ActionHook = Callable[[Any, Any, th.Tensor, "np.ndarray | None"], "th.Tensor | None"]


class PolicyCalls:
    """
    How PPO's rollout calls its policy (``OnPolicyAlgorithm.collect_rollouts``), one object per rollout.

    :param model: the algorithm
    :param env: the rollout's env
    :param use_masking: MaskablePPO's argument (unused here)
    """

    def __init__(self, model: Any, env: VecEnv, use_masking: bool = True) -> None:
        self.model, self.policy, self.env, self.device = model, model.policy, env, model.device
        #: the step's action masks (MaskablePPO), for the action hooks
        self.action_masks: np.ndarray | None = None

    def act(self, obs: Any) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        """:return: ``(actions, values, log_probs)`` of the policy for the step's observation"""
        return self.policy(obs, **self.mask_kwargs())

    def log_prob(self, obs: Any, actions: th.Tensor) -> th.Tensor:
        """The policy's log-probabilities of ``actions`` at this step (as :meth:`act` saw it)."""
        return self.policy.get_distribution(obs, **self.mask_kwargs()).log_prob(actions)

    def mask_kwargs(self) -> dict[str, Any]:
        """The keywords that give the policy's calls this step's action masks (none here)."""
        return {}

    def terminal_value(self, idx: int, terminal_obs: Any) -> th.Tensor:
        """The value of env ``idx``'s terminal observation, to bootstrap a truncated episode with."""
        return self.policy.predict_values(self.policy.obs_to_tensor(terminal_obs)[0])[0]

    def last_values(self, new_obs: Any, dones: np.ndarray) -> th.Tensor:
        """The values of the observation after the rollout's last step."""
        return self.policy.predict_values(obs_as_tensor(new_obs, self.device))

    def buffer_extras(self) -> dict[str, Any]:
        """The keywords of the buffer's ``add`` beyond PPO's."""
        return {}

    def end_step(self) -> None:
        """After the step is stored."""


class MaskedPolicyCalls(PolicyCalls):
    """How MaskablePPO's rollout calls its policy: each step's action masks from the env (``use_masking``)."""

    def __init__(self, model: Any, env: VecEnv, use_masking: bool = True) -> None:
        super().__init__(model, env, use_masking)
        if use_masking and not is_masking_supported(env):
            raise ValueError("Environment does not support action masking. Consider using ActionMasker wrapper")
        self.use_masking = use_masking

    def act(self, obs: Any) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        self.action_masks = get_action_masks(self.env) if self.use_masking else None
        return super().act(obs)

    def mask_kwargs(self) -> dict[str, Any]:
        return {"action_masks": self.action_masks}

    def buffer_extras(self) -> dict[str, Any]:
        return {**super().buffer_extras(), "action_masks": self.action_masks}


class RecurrentPolicyCalls(PolicyCalls):
    """How RecurrentPPO's rollout calls its policy: the LSTM states carried from step to step."""

    def __init__(self, model: Any, env: VecEnv, use_masking: bool = True) -> None:
        super().__init__(model, env, use_masking)
        self.lstm_states = deepcopy(model._last_lstm_states)
        self.input_states = self.lstm_states
        self.episode_starts: th.Tensor | None = None

    def act(self, obs: Any) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        self.input_states = self.lstm_states
        self.episode_starts = th.tensor(self.model._last_episode_starts, dtype=th.float32, device=self.device)
        actions, values, log_probs, self.lstm_states = self.policy(
            obs, self.lstm_states, self.episode_starts, **self.mask_kwargs()
        )
        return actions, values, log_probs

    def log_prob(self, obs: Any, actions: th.Tensor) -> th.Tensor:
        distribution, _ = self.policy.get_distribution(obs, self.input_states.pi, self.episode_starts, **self.mask_kwargs())
        return distribution.log_prob(actions)

    def terminal_value(self, idx: int, terminal_obs: Any) -> th.Tensor:
        terminal_obs = self.policy.obs_to_tensor(terminal_obs)[0]
        hidden, cell = self.lstm_states.vf
        terminal_lstm_state = (hidden[:, idx : idx + 1, :].contiguous(), cell[:, idx : idx + 1, :].contiguous())
        episode_starts = th.tensor([False], dtype=th.float32, device=self.device)
        return self.policy.predict_values(terminal_obs, terminal_lstm_state, episode_starts)[0]

    def last_values(self, new_obs: Any, dones: np.ndarray) -> th.Tensor:
        episode_starts = th.tensor(dones, dtype=th.float32, device=self.device)
        return self.policy.predict_values(obs_as_tensor(new_obs, self.device), self.lstm_states.vf, episode_starts)

    def buffer_extras(self) -> dict[str, Any]:
        return {**super().buffer_extras(), "lstm_states": self.model._last_lstm_states}

    def end_step(self) -> None:
        self.model._last_lstm_states = self.lstm_states


class MaskedRecurrentPolicyCalls(MaskedPolicyCalls, RecurrentPolicyCalls):
    """
    How MaskableRecurrentXPPO's rollout calls its policy: each step's action masks from the env (``use_masking``,
    :class:`MaskedPolicyCalls`) given to the LSTM policy, whose states are carried from step to step
    (:class:`RecurrentPolicyCalls`); the buffer stores both.
    """


class XPPORolloutMixin(LearnerState):
    """XPPO's ``collect_rollouts`` (see the module's docstring), with the non-finite checks of ``check_finite``."""

    #: how this algorithm's rollout calls its policy
    policy_calls_class: ClassVar[type[PolicyCalls]] = PolicyCalls
    # Set by the SB3 algorithm
    policy: Any
    device: th.device
    action_space: spaces.Space
    gamma: float
    use_sde: bool
    sde_sample_freq: int
    num_timesteps: int
    check_finite: bool
    _last_obs: Any
    _last_episode_starts: Any
    #: a resumed run's first rollout keeps ``use_sde``'s noise from its checkpoint, drawn there before the boundary
    #: (runtime state, never saved; sb3_xppo/resume/state.py)
    _sde_noise_resumed: bool = False
    _action_hooks: OrderedDict[int, ActionHook]
    _learn_hooks: list[RemovableHandle]

    def register_action_hook(self, hook: ActionHook, until_learn_ends: bool = False) -> RemovableHandle:
        """
        Add ``hook(model, obs, actions, action_masks) -> actions or None`` to every step of ``collect_rollouts``:
        called after the policy chose ``actions`` (its forward's output, before clipping to a Box's bounds, shape
        ``(n_envs, ...)`` on the policy's device) for ``obs`` (the observation tensor the policy read); ``action_masks``
        is the step's masks (MaskableXPPO), else None. It returns the actions to execute, of the same shape, dtype and
        device, or None to keep them. When a hook replaces actions, the stored log-probabilities are the policy's own
        of the executed actions (under the same LSTM state and masks), so that PPO's ratios stay valid; the stored
        values are the policy's. Hooks run in registration order under ``torch.no_grad()``, with the policy's plain
        (validated) calls; they are runtime state, never saved with the model nor pickled.

        :param hook: the action hook
        :param until_learn_ends: remove the hook when the running ``learn()`` returns or raises (for a callback,
            which SB3 does not tell of an exception)
        :return: a handle whose ``remove()`` removes the hook
        """
        signature = "(model, obs, actions, action_masks) -> actions or None"
        return add_hook(self._action_hooks, hook, signature, self._learn_hooks if until_learn_ends else None)

    def collect_rollouts(
        self,
        env: VecEnv,
        callback: BaseCallback,
        rollout_buffer: RolloutBuffer,
        n_rollout_steps: int,
        use_masking: bool = True,
    ) -> bool:
        """
        Collect experiences with the current policy and fill ``rollout_buffer``, as the parent algorithm does (see the
        module's docstring for what XPPO adds). With ``check_finite``, the rollout's rewards and observations are
        checked once, vectorised, before any update reads them, and a ``ValueError`` names the env, the step and the
        Dict key; a training ``VecNormalize``'s statistics are then put back.

        :param env: the training environment
        :param callback: called at each step (and at the beginning and end of the rollout)
        :param rollout_buffer: the buffer to fill
        :param n_rollout_steps: the number of steps to collect per env
        :param use_masking: MaskableXPPO: use the env's invalid-action masks
        :return: True if the rollout completed, False if a callback stopped it
        """
        go_on = self._checked_collect(env, callback, rollout_buffer, n_rollout_steps, use_masking)
        # (data-parallel: the run goes on only if every rollout did; a callback's stop on one process stops all)
        return self._data_parallel.agree_to_go_on(go_on)

    def _checked_collect(
        self, env: VecEnv, callback: BaseCallback, rollout_buffer: RolloutBuffer, n_rollout_steps: int, use_masking: bool
    ) -> bool:
        """The rollout, with ``check_finite``'s checks."""
        if not self.check_finite:
            return self._collect(env, callback, rollout_buffer, n_rollout_steps, use_masking)
        start = self.num_timesteps
        check_finite_observation(self._last_obs, f"the rollout starts from (num_timesteps {start})")
        env = guarded_env(env, start)  # the raw values of a VecNormalize, step by step
        try:
            result = self._collect(env, callback, rollout_buffer, n_rollout_steps, use_masking)
        except BaseException as exception:
            # e.g. the policy's distribution refusing a NaN observation at the step after it arrived
            error = self._rollout_non_finite_error(rollout_buffer, start)
            if error is not None:
                _restore_normalization(env)
                raise error from exception
            raise
        error = self._rollout_non_finite_error(rollout_buffer, start)
        if error is not None:
            _restore_normalization(env)
            raise error
        return result

    def _rollout_non_finite_error(self, rollout_buffer: RolloutBuffer, start_timesteps: int) -> ValueError | None:
        """The first non-finite reward or observation of the rollout being collected (see ``rollout_non_finite_error``)."""
        steps = rollout_buffer.buffer_size if rollout_buffer.full else rollout_buffer.pos
        return rollout_non_finite_error(
            rollout_buffer.rewards, rollout_buffer.observations, steps, self._last_obs, start_timesteps
        )

    def _collect(
        self, env: VecEnv, callback: BaseCallback, rollout_buffer: RolloutBuffer, n_rollout_steps: int, use_masking: bool
    ) -> bool:
        """The rollout loop, the parent's step for step."""
        assert self._last_obs is not None, "No previous observation was provided"
        # Switch to eval mode (this affects batch norm / dropout)
        self.policy.set_training_mode(False)
        n_steps = 0
        rollout_buffer.reset()
        calls = self.policy_calls_class(self, env, use_masking)
        group_reader = None
        groups = self.options.groups
        if groups is not None:
            group_reader = GroupRewards(env, len(groups), self.options.vector_reward_key)
        # Sample new weights for the state dependent exploration
        if self.use_sde and not self._sde_noise_resumed:
            self.policy.reset_noise(env.num_envs)
        self._sde_noise_resumed = False
        fast = self._fast_policy_calls()
        # num_timesteps counts every process's steps (data-parallel: they step alike)
        step_timesteps = env.num_envs * self._data_parallel.n_processes

        callback.on_rollout_start()

        while n_steps < n_rollout_steps:
            if self.use_sde and self.sde_sample_freq > 0 and n_steps % self.sde_sample_freq == 0:
                # Sample a new noise matrix
                self.policy.reset_noise(env.num_envs)

            with th.no_grad():
                # Convert to pytorch tensor or to TensorDict
                obs_tensor = obs_as_tensor(self._last_obs, self.device)
            with fast(obs_tensor):
                action_tensor, values, log_probs = calls.act(obs_tensor)
            action_masks = calls.action_masks  # (MaskablePPO's local)
            if self._action_hooks:
                action_tensor, log_probs = self._apply_action_hooks(calls, obs_tensor, action_tensor, log_probs)
            actions = action_tensor.cpu().numpy()  # (the callbacks' locals: SB3's numpy actions)

            # Rescale and perform action
            clipped_actions = actions
            if isinstance(self.action_space, spaces.Box):
                if self.policy.squash_output:
                    # Unscale the actions to match env bounds if they were previously squashed (scaled in [-1, 1])
                    clipped_actions = self.policy.unscale_action(clipped_actions)
                else:
                    # Otherwise, clip the actions to avoid out of bound error, as the Gaussian is unbounded
                    clipped_actions = np.clip(actions, self.action_space.low, self.action_space.high)

            new_obs, rewards, dones, infos = env.step(clipped_actions)
            # Multi-critic: (n_envs, G) float32, checked, normalized as VecNormalize normalizes the scalar reward
            group_rewards, group_masks = (None, None) if group_reader is None else group_reader.read(infos)

            self.num_timesteps += step_timesteps

            # Give access to local variables
            callback.update_locals(locals())
            if not callback.on_step():
                return False

            self._update_info_buffer(infos, dones)  # type: ignore[attr-defined]
            n_steps += 1

            if isinstance(self.action_space, spaces.Discrete):
                # Reshape in case of discrete action
                actions = actions.reshape(-1, 1)

            # Handle timeout by bootstrapping with value function (SB3 issue #633); multi-critic: each group from its
            # own value of the terminal observation
            for idx, done in enumerate(dones):
                if (
                    done
                    and infos[idx].get("terminal_observation") is not None
                    and infos[idx].get("TimeLimit.truncated", False)
                ):
                    with fast(None):
                        terminal_value = calls.terminal_value(idx, infos[idx]["terminal_observation"])
                    if group_rewards is None:
                        rewards[idx] += self.gamma * terminal_value  # SB3's own operation (its dtypes, its rounding)
                    else:
                        group_rewards[idx] += (self.gamma * terminal_value).cpu().numpy()
            stored_rewards = rewards if group_rewards is None else group_rewards

            extras = calls.buffer_extras()
            if group_reader is not None:
                extras["group_masks"] = group_masks
            rollout_buffer.add(self._last_obs, actions, stored_rewards, self._last_episode_starts, values, log_probs, **extras)
            self._last_obs = new_obs
            self._last_episode_starts = dones
            calls.end_step()

        with fast(None):
            # Compute value for the last timestep
            values = calls.last_values(new_obs, dones)

        rollout_buffer.compute_returns_and_advantage(last_values=values, dones=dones)

        callback.update_locals(locals())

        callback.on_rollout_end()

        return True

    def _fast_policy_calls(self) -> Callable[[Any], Any]:
        """
        This rollout's way of calling the policy: ``fast(obs)`` is the block to call it in. SB3's is
        ``torch.no_grad()``; with ``fast_paths``, ``torch.inference_mode()`` where every module of the policy is
        torch's, SB3's or this package's (a user's module might keep a tensor for a later graph), and the policy's
        distributions built without argument checks where the observation (None: no distribution is built) and the
        parameters are finite, which ``check_finite`` guarantees for the observations acted on.
        """
        if not self.options.fast_paths:
            return lambda obs: th.no_grad()
        grad_mode = th.inference_mode if library_modules_only(self.policy) else th.no_grad
        parameters_ok = self.check_finite and parameters_finite(self.policy)

        @contextmanager
        def fast(obs: Any) -> Iterator[None]:
            trusted = parameters_ok and obs is not None and all_finite(obs)
            with grad_mode(), trusted_policy_calls(self.policy, trusted):
                yield

        return fast

    def _apply_action_hooks(
        self, calls: PolicyCalls, obs: Any, actions: th.Tensor, log_probs: th.Tensor
    ) -> tuple[th.Tensor, th.Tensor]:
        """The actions the hooks execute, and the policy's log-probabilities of them."""
        replaced = False
        with th.no_grad():
            for hook in list(self._action_hooks.values()):
                new_actions = hook(self, obs, actions, calls.action_masks)
                if new_actions is not None:
                    actions, replaced = new_actions, True
            if replaced:
                log_probs = calls.log_prob(obs, actions)
        return actions, log_probs


def _restore_normalization(env: VecEnv) -> None:
    if isinstance(env, VecNormalizeGuard):
        env.restore()
