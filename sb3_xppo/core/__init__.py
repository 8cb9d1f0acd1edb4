"""
The XPPO core (L3) every XPPO algorithm shares: its constructor and setup (``setup.py``), the rollout loop
(``rollout.py``), the train loop (``algorithm.py``) with its losses (``losses.py``), records and optimizer step, the
loss and action hooks.
"""

from sb3_xppo.core.algorithm import XPPOCoreMixin
from sb3_xppo.core.losses import MinibatchLosses, valid_mean
from sb3_xppo.core.optimizer_step import OptimizerStep
from sb3_xppo.core.records import CHECKED_TERMS, MinibatchTerms, TrainRecord, minibatch_ratio_statistics
from sb3_xppo.core.recurrent import RecurrentCoreMixin
from sb3_xppo.core.rollout import (
    ActionHook,
    MaskedPolicyCalls,
    MaskedRecurrentPolicyCalls,
    PolicyCalls,
    RecurrentPolicyCalls,
    XPPORolloutMixin,
)
from sb3_xppo.core.setup import LossHook, XPPOSetupMixin

__all__ = [
    "CHECKED_TERMS",
    "ActionHook",
    "LossHook",
    "MaskedPolicyCalls",
    "MaskedRecurrentPolicyCalls",
    "MinibatchLosses",
    "MinibatchTerms",
    "OptimizerStep",
    "PolicyCalls",
    "RecurrentCoreMixin",
    "RecurrentPolicyCalls",
    "TrainRecord",
    "XPPOCoreMixin",
    "XPPORolloutMixin",
    "XPPOSetupMixin",
    "minibatch_ratio_statistics",
    "valid_mean",
]
