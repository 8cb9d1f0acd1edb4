"""sb3-xppo: recent improvements to PPO for Stable-Baselines3."""

import os

from sb3_xppo.common.options import RecurrentXPPOOptions, XPPOOptions
from sb3_xppo.dagger_distill import (
    DaggerCallback,
    DaggerDistiller,
    DistillOptions,
    LossBreakdown,
    best_action,
    kl_loss,
    mse_loss,
    nll_loss,
)
from sb3_xppo.dagger_distill.checkpoints import load_model
from sb3_xppo.functional import (
    GAE,
    calc_gae,
    calc_returns,
    clipped_value_loss_fn,
    combine_grouped_advantages,
    dones_to_masks,
    hpo_actor_loss,
    improved_value_clipping_fn,
    pcgrad_auxiliary,
    pcgrad_combine,
    ppo_actor_loss,
    spo_actor_loss,
)
from sb3_xppo.loading.errors import UnsafeFileError
from sb3_xppo.loading.files import load_vec_normalize
from sb3_xppo.multi_critic import MultiCriticPolicy, MultiCriticRolloutBuffer, RewardGroups
from sb3_xppo.ppo_mask import MaskableXPPO
from sb3_xppo.ppo_mask_recurrent import MaskableRecurrentXPPO
from sb3_xppo.ppo_recurrent import RecurrentXPPO
from sb3_xppo.resume import ResumableCheckpoint
from sb3_xppo.xppo import XPPO, LossHook, xppo_recommended

with open(os.path.join(os.path.dirname(__file__), "version.txt")) as _file_handler:
    __version__ = _file_handler.read().strip()

__all__ = [
    "GAE",
    "XPPO",
    "DaggerCallback",
    "DaggerDistiller",
    "DistillOptions",
    "LossBreakdown",
    "LossHook",
    "MaskableRecurrentXPPO",
    "MaskableXPPO",
    "MultiCriticPolicy",
    "MultiCriticRolloutBuffer",
    "RecurrentXPPO",
    "RecurrentXPPOOptions",
    "ResumableCheckpoint",
    "RewardGroups",
    "UnsafeFileError",
    "XPPOOptions",
    "best_action",
    "calc_gae",
    "calc_returns",
    "clipped_value_loss_fn",
    "combine_grouped_advantages",
    "dones_to_masks",
    "hpo_actor_loss",
    "improved_value_clipping_fn",
    "kl_loss",
    "load_model",
    "load_vec_normalize",
    "mse_loss",
    "nll_loss",
    "pcgrad_auxiliary",
    "pcgrad_combine",
    "ppo_actor_loss",
    "spo_actor_loss",
    "xppo_recommended",
]
