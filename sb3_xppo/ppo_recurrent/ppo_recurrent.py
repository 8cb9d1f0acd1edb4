"""RecurrentXPPO: sb3-contrib's RecurrentPPO (LSTM policies) with XPPO's losses and loss hook."""

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

import torch as th
from sb3_contrib import RecurrentPPO
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback

from sb3_xppo.common.options import (
    check_xppo_options,
    declare_xppo_options,
    parent_keywords,
    ppo_keywords,
    xppo_arguments,
)
from sb3_xppo.common.policies import (
    RecurrentXPPOActorCriticCnnPolicy,
    RecurrentXPPOActorCriticPolicy,
    RecurrentXPPOMultiInputActorCriticPolicy,
)
from sb3_xppo.common.sequences import check_sequence_batching
from sb3_xppo.core.recurrent import RecurrentCoreMixin, reject_reward_groups

SelfRecurrentXPPO = TypeVar("SelfRecurrentXPPO", bound="RecurrentXPPO")


@declare_xppo_options(
    notes={
        "reward_groups": "RecurrentXPPO takes None only: its LSTM policies have one value output.",
        "group_value_weights": "RecurrentXPPO takes None only: it weighs the value losses of reward groups.",
        "group_gradients": "RecurrentXPPO takes None only: it splits the actor's loss by reward group.",
    }
)
class RecurrentXPPO(RecurrentCoreMixin, RecurrentPPO):
    """
    XPPO with LSTM policies: sb3-contrib's :class:`~sb3_contrib.RecurrentPPO` trained by XPPO's core, so XPPO's losses
    work under partial observability. Minibatches are sequences padded on the right; every mean is taken over the
    valid steps only (``x[mask].mean()``, as ``RecurrentPPO``), so that with PPO's options (``actor_loss='clip'``,
    ``value_loss=None``) it reproduces ``RecurrentPPO`` bit for bit.

    Multi-critic (``reward_groups``) is not available with recurrent policies yet: the LSTM policies have one value
    output.

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

    # sb3-contrib's LSTM policies with XPPO's options (the same networks with the defaults)
    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpLstmPolicy": RecurrentXPPOActorCriticPolicy,
        "CnnLstmPolicy": RecurrentXPPOActorCriticCnnPolicy,
        "MultiInputLstmPolicy": RecurrentXPPOMultiInputActorCriticPolicy,
    }

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
        reject_reward_groups(reward_groups, "RecurrentXPPO")
        kwargs = parent_keywords(RecurrentPPO, args, kwargs)
        # Bad hyperparameters fail here, before any environment or network is built
        options = check_xppo_options(**ppo_keywords(RecurrentPPO, kwargs), **xppo_arguments(locals()))
        super().__init__(policy, env, **{**kwargs, "normalize_advantage": False}, _init_setup_model=False)
        self._init_xppo(options)
        if _init_setup_model:
            self._setup_model()

    def learn(
        self: SelfRecurrentXPPO,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 1,
        tb_log_name: str = "RecurrentXPPO",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfRecurrentXPPO:
        return super().learn(
            total_timesteps=total_timesteps,
            callback=callback,
            log_interval=log_interval,
            tb_log_name=tb_log_name,
            reset_num_timesteps=reset_num_timesteps,
            progress_bar=progress_bar,
        )
