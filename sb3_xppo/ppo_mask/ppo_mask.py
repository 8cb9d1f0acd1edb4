"""MaskableXPPO: sb3-contrib's MaskablePPO (invalid-action masking) with XPPO's losses, multi-critic and loss hook."""

from typing import Any, ClassVar

import torch as th
from sb3_contrib import MaskablePPO
from stable_baselines3.common.policies import BasePolicy

from sb3_xppo.common.buffers import XPPOMaskableDictRolloutBuffer, XPPOMaskableRolloutBuffer
from sb3_xppo.common.policies import (
    MaskableXPPOActorCriticCnnPolicy,
    MaskableXPPOActorCriticPolicy,
    MaskableXPPOMultiInputActorCriticPolicy,
)
from sb3_xppo.core import MaskedPolicyCalls, XPPOCoreMixin
from sb3_xppo.multi_critic.buffers import MultiCriticMaskableDictRolloutBuffer, MultiCriticMaskableRolloutBuffer


class MaskableXPPO(XPPOCoreMixin, MaskablePPO):
    """
    XPPO for invalid-action masking: sb3-contrib's :class:`~sb3_contrib.MaskablePPO` (Huang & Ontañón 2022, A Closer
    Look at Invalid Action Masking in Policy Gradient Algorithms, https://arxiv.org/abs/2006.14171) trained by XPPO's
    core, so every XPPO option works with masks. With PPO's options (``actor_loss='clip'``, ``value_loss=None``) it
    reproduces ``MaskablePPO`` bit for bit. The env gives its masks through an ``action_masks()`` method
    (``sb3_contrib.common.wrappers.ActionMasker``), as for ``MaskablePPO``.

    :param policy: The policy model to use (MlpPolicy, CnnPolicy, MultiInputPolicy: sb3-contrib's maskable ones)
    :param env: The environment to learn from (if registered in Gym, can be str)
    :param args: the parent's further arguments, positionally (``learning_rate``, ``n_steps``, ...)
    :param options: XPPO's options, :class:`~sb3_xppo.XPPOOptions`; each is also a plain keyword, which wins
    :param _init_setup_model: Whether or not to build the network at the creation of the instance
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

    def _evaluate_actions(self, rollout_data: Any, actions: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor | None]:
        # MaskablePPO's: the distribution sees the masks stored with the rollout
        return self.policy.evaluate_actions(rollout_data.observations, actions, action_masks=rollout_data.action_masks)
