"""
DAgger distillation (Ross et al. 2011, https://arxiv.org/abs/1011.0686): distill any teacher policy into any student.

- :class:`DaggerDistiller`: env-free loss ``loss, student_out = distiller(states)`` and the full DAgger loop, for any
  callables ``state -> Distribution`` (or pytrees of distributions);
- :class:`DaggerCallback`: distillation into the SB3 model being trained, during ``learn()``;
- :class:`DistillOptions`: the options of both and of the command, declared once;
- :class:`StudentObsWrapper`: a student that never sees the privileged keys of a Dict observation its teacher reads;
- ``python -m sb3_xppo.distill`` (or ``python -m sb3_xppo.dagger_distill``): checkpoint to checkpoint from the command
  line (:mod:`sb3_xppo.distill`).
"""

from sb3_xppo.dagger_distill.callback import DaggerCallback
from sb3_xppo.dagger_distill.distiller import DaggerDistiller, DistillOutput
from sb3_xppo.dagger_distill.objectives import LossBreakdown, cosine_alignment_loss, kl_loss, mse_loss, nll_loss
from sb3_xppo.dagger_distill.options import DistillOptions
from sb3_xppo.dagger_distill.pytree import best_action
from sb3_xppo.dagger_distill.wrappers import StudentObsWrapper

__all__ = [
    "DaggerCallback",
    "DaggerDistiller",
    "DistillOptions",
    "DistillOutput",
    "LossBreakdown",
    "StudentObsWrapper",
    "best_action",
    "cosine_alignment_loss",
    "kl_loss",
    "mse_loss",
    "nll_loss",
]
