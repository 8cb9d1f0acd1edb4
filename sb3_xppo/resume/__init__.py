"""
Resumable checkpoints (docs/guide/resume.md): :class:`ResumableCheckpoint` writes them, ``XPPO.resume`` (and the
sb3-contrib variants') reads them (:func:`resume_model`); the envs are rebuilt by replay
(:mod:`sb3_xppo.vec_env.replay`); on a data-parallel run each rank writes and reads its own
(:mod:`sb3_xppo.resume.ranks`).

Layer 2: imports ``common`` and ``vec_env``.
"""

from sb3_xppo.resume.checkpoint import ResumableCheckpoint
from sb3_xppo.resume.files import CorruptCheckpointError, checkpoints, read_checkpoint, read_latest
from sb3_xppo.resume.restore import PendingResume, resume_model
from sb3_xppo.resume.state import CheckpointFormatError
from sb3_xppo.vec_env.replay import ActionRecorder, ReplayMismatchError

__all__ = [
    "ActionRecorder",
    "CheckpointFormatError",
    "CorruptCheckpointError",
    "PendingResume",
    "ReplayMismatchError",
    "ResumableCheckpoint",
    "checkpoints",
    "read_checkpoint",
    "read_latest",
    "resume_model",
]
