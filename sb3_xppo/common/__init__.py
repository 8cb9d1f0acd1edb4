"""SB3-level machinery shared by every XPPO algorithm (L1: imports sb3_xppo.functional only)."""

from sb3_xppo.common.beta import BetaDistribution
from sb3_xppo.common.finite import TrainingSnapshot, VecNormalizeGuard, rollout_non_finite_error

__all__ = ["BetaDistribution", "TrainingSnapshot", "VecNormalizeGuard", "rollout_non_finite_error"]
