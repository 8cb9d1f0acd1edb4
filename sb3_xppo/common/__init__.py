"""SB3-level machinery shared by every XPPO algorithm (L1: imports sb3_xppo.functional only)."""

from sb3_xppo.common.beta import BetaDistribution
from sb3_xppo.common.finite import TrainingSnapshot, VecNormalizeGuard, rollout_non_finite_error
from sb3_xppo.common.loss_registry import ActorLoss, LossKeyword, ValueLoss, register_actor_loss, register_value_loss

__all__ = [
    "ActorLoss",
    "BetaDistribution",
    "LossKeyword",
    "TrainingSnapshot",
    "ValueLoss",
    "VecNormalizeGuard",
    "register_actor_loss",
    "register_value_loss",
    "rollout_non_finite_error",
]
