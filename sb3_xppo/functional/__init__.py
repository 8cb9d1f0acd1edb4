"""
The functional core: pure torch losses and advantage estimators that everything else computes through.

Shapes: ``b`` batch (sequences or envs), ``n`` time, ``g`` reward groups.
"""

from sb3_xppo.functional.actor_losses import ActorLossFunction, AdvantageStats, hpo_actor_loss, ppo_actor_loss, spo_actor_loss
from sb3_xppo.functional.advantages import (
    GAE,
    calc_gae,
    calc_returns,
    combine_grouped_advantages,
    dones_to_masks,
    reverse_linear_scan,
)
from sb3_xppo.functional.gradients import pcgrad_auxiliary, pcgrad_combine
from sb3_xppo.functional.masked import lens_to_mask, masked_mean, masked_sum, masked_zscore
from sb3_xppo.functional.value_losses import (
    clipped_value_loss_fn,
    hl_gauss_probs,
    hl_gauss_value,
    hl_gauss_value_loss_fn,
    improved_value_clipping_fn,
)

__all__ = [
    "GAE",
    "ActorLossFunction",
    "AdvantageStats",
    "calc_gae",
    "calc_returns",
    "clipped_value_loss_fn",
    "combine_grouped_advantages",
    "dones_to_masks",
    "hl_gauss_probs",
    "hl_gauss_value",
    "hl_gauss_value_loss_fn",
    "hpo_actor_loss",
    "improved_value_clipping_fn",
    "lens_to_mask",
    "masked_mean",
    "masked_sum",
    "masked_zscore",
    "pcgrad_auxiliary",
    "pcgrad_combine",
    "ppo_actor_loss",
    "reverse_linear_scan",
    "spo_actor_loss",
]
