"""
:class:`ResumableCheckpoint`, the callback that writes resumable checkpoints (docs/guide/resume.md).

It writes at a rollout boundary: SB3's ``on_rollout_start`` event, which ``collect_rollouts`` fires after the previous
``train()`` (and the log dump, the progress update) and before the rollout's first step. Between the end of
``train()`` and that event nothing draws a random number nor changes what the next update reads (the rollout buffer
is emptied, the policy put in eval mode; ``use_sde``'s noise is drawn before it, so ``use_sde`` is refused). A
resumed run fires the event again at the same boundary: the callbacks before this one in the list see it twice, the
ones after it once; put it first (the zoo path does).
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

from stable_baselines3.common.callbacks import BaseCallback

from sb3_xppo.resume.ranks import check_keep, write_rank_checkpoint
from sb3_xppo.resume.state import capture


class ResumableCheckpoint(BaseCallback):
    """
    Writes a resumable checkpoint every ``every_rollouts`` rollouts, after ``train()``: atomic, checksummed, the
    newest ``keep`` kept. ``XPPO.resume(folder, env=...)`` (and the sb3-contrib variants') returns the model as it was
    there; ``learn()`` with the original arguments then finishes the original run, bit for bit.

    :param folder: where the checkpoints go (``resume-<num_timesteps>.ckpt``; a data-parallel run's in ``rank-<r>/``,
        each rank writing its own at the same boundary: give every rank the callback)
    :param every_rollouts: write after every this many rollouts (and their update)
    :param keep: how many checkpoints to keep (>= 1; per rank, >= 2, on a data-parallel run)
    :param verbose: 1: print where each checkpoint went
    """

    def __init__(self, folder: str | os.PathLike, every_rollouts: int = 10, keep: int = 2, verbose: int = 0) -> None:
        super().__init__(verbose)
        if not isinstance(folder, (str, os.PathLike)):
            raise TypeError(f"folder must be a path, got {type(folder).__name__}")
        for name, value in (("every_rollouts", every_rollouts), ("keep", keep)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        self.folder = pathlib.Path(folder)
        self.every_rollouts, self.keep = every_rollouts, keep
        #: rollouts started in the run, and the count at which this callback was resumed (not written again)
        self.rollouts, self._resumed_at = 0, -1
        self._root: BaseCallback | None = None
        self.last_path: pathlib.Path | None = None

    def _on_training_start(self) -> None:
        if getattr(self.model, "use_sde", False):
            raise ValueError("ResumableCheckpoint: use_sde draws its noise before the rollout boundary; not supported yet")
        check_keep(self.model, self.keep)  # (a data-parallel run: each rank writes its own, sb3_xppo/resume/ranks.py)
        # the callback learn() runs, whose resumable members are saved (learn()'s local, as SB3 hands it over)
        self._root = self.locals.get("callback", self)

    def _on_rollout_start(self) -> None:
        self.rollouts += 1
        done = self.rollouts - 1  # rollouts collected and trained on
        if done > 0 and done % self.every_rollouts == 0 and self.rollouts != self._resumed_at:
            self.write()

    def _on_step(self) -> bool:
        return True

    def write(self) -> pathlib.Path:
        """Write a checkpoint now (at a rollout boundary). :return: its path"""
        self.rollouts -= 1  # (saved as before this boundary's event, which a resumed run fires again)
        try:
            members = capture(self.model, self._root)
        finally:
            self.rollouts += 1
        self.last_path = write_rank_checkpoint(self.model, self.folder, members, self.keep)
        if self.verbose >= 1:
            print(f"ResumableCheckpoint: wrote {self.last_path}")
        return self.last_path

    def resumable_state(self) -> dict[str, Any]:
        """:return: the count of rollouts (a checkpoint keeps this callback's state)"""
        return {"rollouts": self.rollouts}

    def restore_state(self, state: dict[str, Any]) -> None:
        """Resume the count; the boundary written at is not written again."""
        self.rollouts = int(state["rollouts"])
        self._resumed_at = self.rollouts + 1
