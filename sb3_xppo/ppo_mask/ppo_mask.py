"""MaskableXPPO: sb3-contrib's MaskablePPO (invalid-action masking) with XPPO's losses, multi-critic and loss hook."""

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

import torch as th
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback

from sb3_xppo.common.buffers import XPPOMaskableDictRolloutBuffer, XPPOMaskableRolloutBuffer
from sb3_xppo.common.options import (
    check_xppo_options,
    declare_xppo_options,
    parent_keywords,
    ppo_keywords,
    xppo_arguments,
)
from sb3_xppo.common.policies import (
    MaskableXPPOActorCriticCnnPolicy,
    MaskableXPPOActorCriticPolicy,
    MaskableXPPOMultiInputActorCriticPolicy,
)
from sb3_xppo.core import MaskedPolicyCalls, XPPOCoreMixin
from sb3_xppo.multi_critic.buffers import MultiCriticMaskableDictRolloutBuffer, MultiCriticMaskableRolloutBuffer

SelfMaskableXPPO = TypeVar("SelfMaskableXPPO", bound="MaskableXPPO")


@declare_xppo_options()
class MaskableXPPO(XPPOCoreMixin, MaskablePPO):
    """
    XPPO for invalid-action masking: sb3-contrib's :class:`~sb3_contrib.MaskablePPO` (Huang & Ontañón 2022, A Closer
    Look at Invalid Action Masking in Policy Gradient Algorithms, https://arxiv.org/abs/2006.14171) trained by XPPO's
    core, so every XPPO option works with masks. With PPO's options (``actor_loss='clip'``, ``value_loss=None``) it
    reproduces ``MaskablePPO`` bit for bit. The env gives its masks through an ``action_masks()`` method
    (``sb3_contrib.common.wrappers.ActionMasker``), as for ``MaskablePPO``.

    :param policy: The policy model to use (MlpPolicy, CnnPolicy, MultiInputPolicy: sb3-contrib's maskable ones)
    :param env: The environment to learn from (if registered in Gym, can be str)
    :param _init_setup_model: Whether or not to build the network at the creation of the instance
    :param args: the parent's further arguments, positionally (``learning_rate``, ``n_steps``, ...)
    :param kwargs: every keyword of :class:`~sb3_contrib.MaskablePPO`, in its meaning and with its defaults
        (``clip_range`` also takes a ``(low, high)`` pair, ``normalize_advantage`` also ``'rollout'``)
    """

    xppo_buffer_classes = (XPPOMaskableRolloutBuffer, XPPOMaskableDictRolloutBuffer)
    multi_critic_buffer_classes = (MultiCriticMaskableRolloutBuffer, MultiCriticMaskableDictRolloutBuffer)
    policy_calls_class = MaskedPolicyCalls
    # sb3-contrib's maskable policies with XPPO's options (the same networks with the defaults)
    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": MaskableXPPOActorCriticPolicy,
        "CnnPolicy": MaskableXPPOActorCriticCnnPolicy,
        "MultiInputPolicy": MaskableXPPOMultiInputActorCriticPolicy,
    }

    def __init__(
        self,
        policy: str | type[MaskableActorCriticPolicy],
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
        **kwargs: Any,
    ):
        kwargs = parent_keywords(MaskablePPO, args, kwargs)
        # Bad hyperparameters fail here, before any environment or network is built
        options = check_xppo_options(**ppo_keywords(MaskablePPO, kwargs), **xppo_arguments(locals()))
        super().__init__(policy, env, **{**kwargs, "normalize_advantage": False}, _init_setup_model=False)
        self._init_xppo(options)
        if _init_setup_model:
            self._setup_model()

    def _evaluate_actions(self, rollout_data: Any, actions: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor | None]:
        # MaskablePPO's: the distribution sees the masks stored with the rollout
        return self.policy.evaluate_actions(rollout_data.observations, actions, action_masks=rollout_data.action_masks)

    def learn(  # type: ignore[override]
        self: SelfMaskableXPPO,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 1,
        tb_log_name: str = "MaskableXPPO",
        reset_num_timesteps: bool = True,
        use_masking: bool = True,
        progress_bar: bool = False,
    ) -> SelfMaskableXPPO:
        return super().learn(
            total_timesteps=total_timesteps,
            callback=callback,
            log_interval=log_interval,
            tb_log_name=tb_log_name,
            reset_num_timesteps=reset_num_timesteps,
            use_masking=use_masking,
            progress_bar=progress_bar,
        )
