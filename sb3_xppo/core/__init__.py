"""The XPPO core (L3): the train loop, options, loss hooks and checks every XPPO algorithm shares."""

from sb3_xppo.core.algorithm import LossHook, XPPOCoreMixin, valid_mean
from sb3_xppo.core.records import CHECKED_TERMS, TrainRecord, minibatch_ratio_statistics

__all__ = [
    "CHECKED_TERMS",
    "LossHook",
    "TrainRecord",
    "XPPOCoreMixin",
    "minibatch_ratio_statistics",
    "valid_mean",
]
