"""MaskableXPPO: sb3-contrib's MaskablePPO (invalid-action masking) with XPPO's losses, multi-critic and loss hook."""

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

import torch as th
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback

from sb3_xppo.common.buffers import XPPOMaskableDictRolloutBuffer, XPPOMaskableRolloutBuffer
from sb3_xppo.common.options import check_xppo_options, parent_keywords, ppo_keywords
from sb3_xppo.common.policies import (
    MaskableXPPOActorCriticCnnPolicy,
    MaskableXPPOActorCriticPolicy,
    MaskableXPPOMultiInputActorCriticPolicy,
)
from sb3_xppo.core import XPPOCoreMixin
from sb3_xppo.multi_critic.buffers import MultiCriticMaskableDictRolloutBuffer, MultiCriticMaskableRolloutBuffer

SelfMaskableXPPO = TypeVar("SelfMaskableXPPO", bound="MaskableXPPO")


class MaskableXPPO(XPPOCoreMixin, MaskablePPO):
    """
    XPPO for invalid-action masking: sb3-contrib's :class:`~sb3_contrib.MaskablePPO` (Huang & Ontañón 2022, A Closer
    Look at Invalid Action Masking in Policy Gradient Algorithms, https://arxiv.org/abs/2006.14171) trained by XPPO's
    core, so every XPPO option works with masks. With PPO's options (``actor_loss='clip'``, ``value_loss=None``) it
    reproduces ``MaskablePPO`` bit for bit. The env gives its masks through an ``action_masks()`` method
    (``sb3_contrib.common.wrappers.ActionMasker``), as for ``MaskablePPO``.

    :param policy: The policy model to use (MlpPolicy, CnnPolicy, MultiInputPolicy: sb3-contrib's maskable ones)
    :param env: The environment to learn from (if registered in Gym, can be str)
    :param actor_loss: ``'clip'``, ``'spo'`` or ``'asymmetric_spo'`` (see :class:`~sb3_xppo.XPPO`)
    :param value_loss: None (PPO's meaning), ``'mse'``, ``'sb3'``, ``'clipped'`` or ``'improved'``
    :param dual_clip: None or the dual clip constant ``c > 1`` (Ye et al. 2020), with ``actor_loss='clip'``
    :param delightful: gate each advantage by ``sigmoid(-log_prob * A / delight_temp)`` (Osband 2026)
    :param delight_temp: temperature of the delightful gate, > 0
    :param log_ratio_clamp: None, or clamp the log-ratio to ``(-c, c)`` or a ``(low, high)`` pair
    :param reward_groups: None, or the number or names of reward groups: one critic per group (Mysore et al. 2022)
    :param group_weights: ``G`` weights >= 0 of the groups' advantages (None: all equal)
    :param group_reduce: ``'mean'``, ``'sum'``, ``'max'``, ``'min'`` or a callable
    :param normalize_groups: z-score each group's advantages over the rollout before weighting them
    :param vector_reward_key: the info key holding each step's reward vector
    :param normalize_values: PopArt value normalization (van Hasselt et al. 2016; Andrychowicz et al. 2021): each
        critic output regresses returns normalized by running statistics (per reward group), the last layer is
        rescaled so that values in return units are preserved when the statistics move, and the value losses (and
        ``clip_range_vf``) are in normalized units. The statistics are saved with the model; logged as
        ``train/value_mean`` and ``train/value_std`` (``/<group>`` per reward group)
    :param group_value_weights: None (``"squared"`` in "scalarize" mode without ``normalize_values``, else
        ``"equal"``), ``"squared"``, ``"equal"`` or ``G`` weights of the groups' value losses (see
        :class:`~sb3_xppo.XPPO`)
    :param _init_setup_model: Whether or not to build the network at the creation of the instance
    :param args: the parent's further arguments, positionally (``learning_rate``, ``n_steps``, ...)
    :param kwargs: every keyword of :class:`~sb3_contrib.MaskablePPO`, in its meaning and with its defaults
        (``clip_range`` also takes a ``(low, high)`` pair, ``normalize_advantage`` also ``'rollout'``)
    """

    xppo_buffer_classes = (XPPOMaskableRolloutBuffer, XPPOMaskableDictRolloutBuffer)
    multi_critic_buffer_classes = (MultiCriticMaskableRolloutBuffer, MultiCriticMaskableDictRolloutBuffer)
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
        reward_groups: int | Sequence[str] | None = None,
        group_weights: Sequence[float] | None = None,
        group_reduce: str | Callable[[th.Tensor], th.Tensor] = "mean",
        normalize_groups: bool = True,
        vector_reward_key: str = "vector_reward",
        normalize_values: bool = False,
        group_value_weights: str | Sequence[float] | None = None,
        _init_setup_model: bool = True,
        **kwargs: Any,
    ):
        kwargs = parent_keywords(MaskablePPO, args, kwargs)
        # Bad hyperparameters fail here, before any environment or network is built
        options = check_xppo_options(
            **ppo_keywords(MaskablePPO, kwargs),
            actor_loss=actor_loss,
            value_loss=value_loss,
            dual_clip=dual_clip,
            delightful=delightful,
            delight_temp=delight_temp,
            log_ratio_clamp=log_ratio_clamp,
            reward_groups=reward_groups,
            group_weights=group_weights,
            group_reduce=group_reduce,
            normalize_groups=normalize_groups,
            vector_reward_key=vector_reward_key,
            normalize_values=normalize_values,
            group_value_weights=group_value_weights,
        )
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
