"""MaskableRecurrentXPPO: invalid-action masks with LSTM policies, XPPO's losses and loss hook."""

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

import numpy as np
import torch as th
from sb3_contrib import RecurrentPPO
from sb3_contrib.common.maskable.distributions import MaybeMasks
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback
from stable_baselines3.common.vec_env import VecEnv

from sb3_xppo.common.buffers import XPPOMaskableRecurrentDictRolloutBuffer, XPPOMaskableRecurrentRolloutBuffer
from sb3_xppo.common.options import (
    check_xppo_options,
    declare_xppo_options,
    parent_keywords,
    ppo_keywords,
    xppo_arguments,
)
from sb3_xppo.common.policies import (
    MASKABLE_LSTM_ACTION_SPACES,
    MaskableRecurrentXPPOActorCriticCnnPolicy,
    MaskableRecurrentXPPOActorCriticPolicy,
    MaskableRecurrentXPPOMultiInputActorCriticPolicy,
)
from sb3_xppo.common.sequences import check_sequence_batching
from sb3_xppo.core.recurrent import RecurrentCoreMixin, reject_reward_groups
from sb3_xppo.core.rollout import MaskedRecurrentPolicyCalls

SelfMaskableRecurrentXPPO = TypeVar("SelfMaskableRecurrentXPPO", bound="MaskableRecurrentXPPO")


@declare_xppo_options(
    notes={
        "reward_groups": "MaskableRecurrentXPPO takes None only: its LSTM policies have one value output.",
        "group_value_weights": "MaskableRecurrentXPPO takes None only: it weighs the value losses of reward groups.",
        "group_gradients": "MaskableRecurrentXPPO takes None only: it splits the actor's loss by reward group.",
    }
)
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
    :param _init_setup_model: Whether or not to build the network at the creation of the instance
    :param sequence_batching: ``train()`` runs the LSTMs over each minibatch's sequences in whole-sequence calls, the
        states reset where an episode starts (:mod:`sb3_xppo.common.sequences`; sb3-contrib issue #113, PR #118): several
        times faster, the same computation to float tolerance but not bit for bit (the sums run in another order).
        False (default): ``RecurrentPPO``'s step-by-step loop, bit for bit. The rollout is step by step either way.
    :param args: the parent's further arguments, positionally (``learning_rate``, ``n_steps``, ...)
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

    def __init__(
        self,
        policy: str | type[RecurrentActorCriticPolicy],
        env: GymEnv | str,
        *args: Any,
        actor_loss: str = "clip",
        value_loss: str | None = None,
        dual_clip: float | None = None,
        delightful: bool = False,
        delight_temp: float = 1.0,
        log_ratio_clamp: float | tuple[float, float] | None = None,
        min_advantage_std: float | None = None,
        adaptive_kl: float | dict[str, float] | None = None,
        reward_groups: int | Sequence[str] | None = None,
        group_weights: Sequence[float] | None = None,
        group_reduce: str | Callable[[th.Tensor], th.Tensor] = "mean",
        normalize_groups: bool = True,
        vector_reward_key: str = "vector_reward",
        normalize_values: bool = False,
        group_value_weights: str | Sequence[float] | None = None,
        group_gradients: str | None = None,
        fast_paths: bool = True,
        _init_setup_model: bool = True,
        sequence_batching: bool = False,
        **kwargs: Any,
    ):
        self.sequence_batching = check_sequence_batching(sequence_batching)
        reject_reward_groups(reward_groups, "MaskableRecurrentXPPO")
        kwargs = parent_keywords(RecurrentPPO, args, kwargs)
        # Bad hyperparameters fail here, before any environment or network is built
        options = check_xppo_options(**ppo_keywords(RecurrentPPO, kwargs), **xppo_arguments(locals()))
        super().__init__(policy, env, **{**kwargs, "normalize_advantage": False}, _init_setup_model=False)
        self._init_xppo(options)
        if _init_setup_model:
            self._setup_model()

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
        self._use_masking = use_masking
        try:
            return super().learn(
                total_timesteps=total_timesteps,
                callback=callback,
                log_interval=log_interval,
                tb_log_name=tb_log_name,
                reset_num_timesteps=reset_num_timesteps,
                progress_bar=progress_bar,
            )
        finally:
            del self._use_masking  # the class's default again
