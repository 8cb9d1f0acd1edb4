"""MaskableRecurrentXPPO: invalid-action masks with LSTM policies, XPPO's losses and loss hook."""

from typing import Any, ClassVar, TypeVar

import numpy as np
import torch as th
from sb3_contrib import RecurrentPPO
from sb3_contrib.common.maskable.distributions import MaybeMasks
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import MaybeCallback
from stable_baselines3.common.vec_env import VecEnv

from sb3_xppo.common.buffers import XPPOMaskableRecurrentDictRolloutBuffer, XPPOMaskableRecurrentRolloutBuffer
from sb3_xppo.common.policies import (
    MASKABLE_LSTM_ACTION_SPACES,
    MaskableRecurrentXPPOActorCriticCnnPolicy,
    MaskableRecurrentXPPOActorCriticPolicy,
    MaskableRecurrentXPPOMultiInputActorCriticPolicy,
)
from sb3_xppo.core.recurrent import RecurrentCoreMixin
from sb3_xppo.core.rollout import MaskedRecurrentPolicyCalls

SelfMaskableRecurrentXPPO = TypeVar("SelfMaskableRecurrentXPPO", bound="MaskableRecurrentXPPO")


class MaskableRecurrentXPPO(RecurrentCoreMixin, RecurrentPPO):
    """
    XPPO with invalid-action masks and LSTM policies: sb3-contrib's :class:`~sb3_contrib.RecurrentPPO` whose policy
    acts, and is trained, on the env's action masks as :class:`~sb3_contrib.MaskablePPO`'s does (Huang & Ontañón
    2022, A Closer Look at Invalid Action Masking in Policy Gradient Algorithms, https://arxiv.org/abs/2006.14171;
    asked for in sb3-contrib issues #80 and #101). The rollout stores each step's masks with its LSTM state; the
    padded sequence minibatches evaluate their actions under the masks they were taken with (a padded step allows
    every action and counts in no mean). The env gives its masks through an ``action_masks()`` method
    (``sb3_contrib.common.wrappers.ActionMasker``), as for ``MaskablePPO``; ``learn(use_masking=False)`` trains
    without them.

    Where the masks allow every action, the policy's distribution is the LSTM policy's own
    (:class:`~sb3_xppo.common.policies.ActionMaskingMixin`): with every action valid, or without masks, and PPO's
    options (``actor_loss='clip'``, ``value_loss=None``), it reproduces :class:`~sb3_xppo.RecurrentXPPO` (and so
    ``RecurrentPPO``) bit for bit. Discrete and MultiDiscrete action spaces; multi-critic (``reward_groups``) is not
    available with recurrent policies yet.

    Evaluate it with :func:`sb3_xppo.ppo_mask_recurrent.evaluate_policy` (masks and LSTM states both carried).

    :param policy: The policy model to use (MlpLstmPolicy, CnnLstmPolicy, MultiInputLstmPolicy)
    :param env: The environment to learn from (if registered in Gym, can be str)
    :param args: the parent's further arguments, positionally (``learning_rate``, ``n_steps``, ...)
    :param options: RecurrentXPPO's options (:class:`~sb3_xppo.RecurrentXPPOOptions`), also as plain keywords
    :param _init_setup_model: Whether or not to build the network at the creation of the instance
    :param kwargs: every keyword of :class:`~sb3_contrib.RecurrentPPO`, in its meaning and with its defaults
        (``clip_range`` also takes a ``(low, high)`` pair, ``normalize_advantage`` also ``'rollout'``)
    """

    policy_calls_class = MaskedRecurrentPolicyCalls
    sequence_buffer_classes = (XPPOMaskableRecurrentRolloutBuffer, XPPOMaskableRecurrentDictRolloutBuffer)
    # RecurrentXPPO's LSTM policies with action masks (the same networks)
    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpLstmPolicy": MaskableRecurrentXPPOActorCriticPolicy,
        "CnnLstmPolicy": MaskableRecurrentXPPOActorCriticCnnPolicy,
        "MultiInputLstmPolicy": MaskableRecurrentXPPOMultiInputActorCriticPolicy,
    }
    #: whether the running ``learn()`` reads the env's action masks (its ``use_masking``)
    _use_masking: bool = True

    def _setup_model(self) -> None:
        # Before any network is built (also for a model being loaded, whose spaces come from the file)
        if not isinstance(self.action_space, MASKABLE_LSTM_ACTION_SPACES):
            raise ValueError(
                f"MaskableRecurrentXPPO takes Discrete and MultiDiscrete action spaces (action masks), got {self.action_space}"
            )
        super()._setup_model()

    def _evaluate_actions(self, rollout_data: Any, actions: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor | None]:
        # RecurrentPPO's, the distribution masked by the masks stored with each step
        with self._sequence_passes():
            return self.policy.evaluate_actions(
                rollout_data.observations,
                actions,
                rollout_data.lstm_states,
                rollout_data.episode_starts,
                action_masks=rollout_data.action_masks,
            )

    def collect_rollouts(
        self,
        env: VecEnv,
        callback: BaseCallback,
        rollout_buffer: RolloutBuffer,
        n_rollout_steps: int,
        use_masking: bool | None = None,
    ) -> bool:
        """
        XPPO's rollout (:meth:`~sb3_xppo.core.XPPORolloutMixin.collect_rollouts`) with the masks and the LSTM states.

        :param env: the training environment
        :param callback: called at each step (and at the beginning and end of the rollout)
        :param rollout_buffer: the buffer to fill
        :param n_rollout_steps: the number of steps to collect per env
        :param use_masking: use the env's action masks (None: as the running ``learn()`` says, by default True)
        :return: True if the rollout completed, False if a callback stopped it
        """
        use_masking = self._use_masking if use_masking is None else use_masking
        return super().collect_rollouts(env, callback, rollout_buffer, n_rollout_steps, use_masking)

    def predict(  # type: ignore[override]
        self,
        observation: np.ndarray | dict[str, np.ndarray],
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
        action_masks: MaybeMasks = None,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]:
        """
        The policy's action and next LSTM state (``RecurrentPPO.predict``), the action one ``action_masks`` allows.

        :param observation: the input observation
        :param state: the LSTM states of the last step (None: zeros, an episode's start)
        :param episode_start: whether each observation starts an episode (the LSTM state is then reset)
        :param deterministic: the distribution's mode instead of a sample
        :param action_masks: ``(n_envs, mask size)`` bool, True where the action is allowed (None: no masking)
        :return: the action and the next LSTM state
        """
        return self.policy.predict(observation, state, episode_start, deterministic, action_masks=action_masks)

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "_use_masking"]

    def learn(
        self: SelfMaskableRecurrentXPPO,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 1,
        tb_log_name: str = "MaskableRecurrentXPPO",
        reset_num_timesteps: bool = True,
        use_masking: bool = True,
        progress_bar: bool = False,
    ) -> SelfMaskableRecurrentXPPO:
        # RecurrentPPO's learn() has no use_masking: the rollout reads it from the model while learn() runs
        self._use_masking = use_masking
        try:
            return super().learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)
        finally:
            del self._use_masking  # the class's default again
