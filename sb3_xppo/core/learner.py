"""
What every part of an XPPO model reads, declared once: its options and its learner. The mixins that make up
:class:`~sb3_xppo.core.XPPOCoreMixin` (the rollout, ``learn()``, saving, the constructor) derive from
:class:`LearnerState` rather than each re-declaring them.
"""

from __future__ import annotations

from sb3_xppo.common.distributed import SINGLE_PROCESS, DataParallel, SingleProcess
from sb3_xppo.common.options import XPPOOptions


class LearnerState:
    """The options and the learner of an XPPO model."""

    #: XPPO's options, checked (set by the constructor, and again after ``load()``)
    options: XPPOOptions
    #: the collectives that keep the processes of ``distributed=True`` one learner, and the same calls doing one
    #: process's work otherwise (runtime state, never saved)
    _data_parallel: DataParallel | SingleProcess = SINGLE_PROCESS
