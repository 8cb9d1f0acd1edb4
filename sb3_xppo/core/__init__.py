"""The XPPO core (L3): the rollout and train loops, options, loss and action hooks, checks every XPPO algorithm shares."""

from sb3_xppo.core.algorithm import LossHook, XPPOCoreMixin, valid_mean
from sb3_xppo.core.optimizer_step import OptimizerStep
from sb3_xppo.core.records import CHECKED_TERMS, TrainRecord, minibatch_ratio_statistics
from sb3_xppo.core.recurrent import RecurrentCoreMixin
from sb3_xppo.core.rollout import (
    ActionHook,
    MaskedPolicyCalls,
    MaskedRecurrentPolicyCalls,
    PolicyCalls,
    RecurrentPolicyCalls,
    XPPORolloutMixin,
)

__all__ = [
    "CHECKED_TERMS",
    "ActionHook",
    "LossHook",
    "MaskedPolicyCalls",
    "MaskedRecurrentPolicyCalls",
    "OptimizerStep",
    "PolicyCalls",
    "RecurrentCoreMixin",
    "RecurrentPolicyCalls",
    "TrainRecord",
    "XPPOCoreMixin",
    "XPPORolloutMixin",
    "minibatch_ratio_statistics",
    "valid_mean",
]
