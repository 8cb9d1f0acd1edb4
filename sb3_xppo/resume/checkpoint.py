"""
:class:`ResumableCheckpoint`, the callback that writes resumable checkpoints (docs/guide/resume.md).

It writes at a rollout boundary: SB3's ``on_rollout_start`` event, which ``collect_rollouts`` fires after the previous
``train()`` (and the log dump, the progress update) and before the rollout's first step. Between the end of
``train()`` and that event nothing changes what the next update reads (the rollout buffer is emptied, the policy put
in eval mode) and nothing draws a random number but ``use_sde``'s noise for the rollout, which the checkpoint keeps. A
resumed run fires the event again at the same boundary: the callbacks before this one in the list see it twice, the
ones after it once; put it first (the zoo path does).

Where checkpoints are written does not change the run: writing one reads the state and draws no random number. So
the interval may be a count of rollouts or a wall-clock time, and a SIGTERM (a scheduler's preemption) may ask for
one at the next boundary, after which ``learn()`` stops. Nor does a write that fails (a full disk): it is said, once
per failure, and training goes on, the older checkpoints kept. One process writes a folder while ``learn()`` runs
(:class:`~sb3_xppo.resume.files.FolderLock`).
"""

from __future__ import annotations

import os
import pathlib
import signal
import threading
import time
import warnings
from typing import Any, cast

from stable_baselines3.common.callbacks import BaseCallback, EvalCallback

from sb3_xppo.common.distributed import SINGLE_PROCESS, DataParallel, SingleProcess, learner_of
from sb3_xppo.resume.callbacks import flattened
from sb3_xppo.resume.envs import reach_envs
from sb3_xppo.resume.files import FolderLock
from sb3_xppo.resume.ranks import write_rank_checkpoint
from sb3_xppo.resume.state import capture


def _positive(name: str, value: Any, kind: type | tuple[type, ...], what: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, kind) or cast(float, value) <= 0:
        raise ValueError(f"{name} must be {what} or None, got {value!r}")


class ResumableCheckpoint(BaseCallback):
    """
    Writes a resumable checkpoint at rollout boundaries, after ``train()``: atomic, checksummed, the newest ``keep``
    kept. ``XPPO.resume(folder, env=...)`` (and the sb3-contrib variants') returns the model as it was there;
    ``learn()`` with the original arguments then finishes the original run, bit for bit.

    :param folder: where the checkpoints go (``resume-<num_timesteps>.ckpt``; a data-parallel run's in rank 0's
        folder's ``rank-<r>/``, each rank writing its own at the same boundary: give every rank the callback)
    :param every_rollouts: write after every this many rollouts (and their update); None: not by count
    :param keep: how many checkpoints to keep (>= 1; per rank, >= 2, on a data-parallel run)
    :param verbose: 1: print where each checkpoint went
    :param every_seconds: also write at the first boundary this many seconds of wall-clock time after the last write
        (or the start of ``learn()``); None: not by time
    :param stop_on_sigterm: on SIGTERM (a scheduler's preemption), write a checkpoint at the next rollout boundary and
        stop ``learn()`` there (:attr:`preempted` then says so). The handler is installed for the time ``learn()``
        runs, in the main thread, and the previous one put back after.
    """

    def __init__(
        self,
        folder: str | os.PathLike,
        every_rollouts: int | None = 10,
        keep: int = 2,
        verbose: int = 0,
        every_seconds: float | None = None,
        stop_on_sigterm: bool = False,
    ) -> None:
        super().__init__(verbose)
        if not isinstance(folder, (str, os.PathLike)):
            raise TypeError(f"folder must be a path, got {type(folder).__name__}")
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise ValueError(f"keep must be an int >= 1, got {keep!r}")
        _positive("every_rollouts", every_rollouts, int, "an int >= 1")
        _positive("every_seconds", every_seconds, (int, float), "a number > 0")
        if every_rollouts is None and every_seconds is None and not stop_on_sigterm:
            raise ValueError("ResumableCheckpoint would never write: give every_rollouts, every_seconds or stop_on_sigterm")
        self.folder = pathlib.Path(folder)
        self.every_rollouts, self.every_seconds, self.keep = every_rollouts, every_seconds, keep
        self.stop_on_sigterm = stop_on_sigterm
        #: rollouts started in the run, and the count at which this callback was resumed (not written again)
        self.rollouts, self._resumed_at = 0, -1
        self._root: BaseCallback | None = None
        self.last_path: pathlib.Path | None = None
        #: whether a SIGTERM stopped ``learn()`` after its checkpoint was written
        self.preempted = False
        self._sigterm = False
        self._previous_handler: Any = None
        self._last_write = time.monotonic()
        #: failed writes since the last good one, and when that was (or ``learn()`` started)
        self.failed_writes, self._last_good = 0, time.monotonic()
        self._lock: FolderLock | None = None
        #: the model's learner (set when training starts)
        self.learner: SingleProcess | DataParallel = SINGLE_PROCESS

    def _on_training_start(self) -> None:
        # the model's learner, called as the loop calls it: one process's decides alone, a data-parallel one's ranks agree
        self.learner = learner_of(self.model)
        if self.keep < self.learner.min_keep:
            raise ValueError(
                f"ResumableCheckpoint(keep={self.keep}) on a data-parallel run: keep must be >= {self.learner.min_keep}, "
                "since a rank killed while writing leaves the others one checkpoint ahead, and resume takes the newest "
                "one every rank has"
            )
        self.folder = self.learner.shared_folder(self.folder)
        self._lock = FolderLock(self.learner.own_folder(self.folder))
        self._lock.acquire()  # (a second writer of the folder: FolderInUseError, before anything is written)
        # the callback learn() runs, whose resumable members are saved (learn()'s local, as SB3 hands it over)
        self._root = self.locals.get("callback", self)
        for callback in flattened(self._root):  # (evaluation envs of your own, before their first reset)
            if isinstance(callback, EvalCallback):
                reach_envs(callback.eval_env)
        self._last_write, self.preempted, self._sigterm = time.monotonic(), False, False
        self.failed_writes, self._last_good = 0, time.monotonic()
        if self.stop_on_sigterm and threading.current_thread() is threading.main_thread():
            self._previous_handler = signal.signal(signal.SIGTERM, self._on_sigterm)

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        self._sigterm = True

    def _due(self, done: int) -> bool:
        """
        :return: whether the boundary after ``done`` rollouts is one to write at. What a rank's own clock or signal
            decides is agreed by all the ranks of a data-parallel run (a collective each, at every boundary), so that
            they write, and stop, at the same one.
        """
        if self.stop_on_sigterm:
            self.preempted = self.learner.agree_any(self._sigterm, "agreeing to stop on SIGTERM")
        if done == 0 or self.rollouts == self._resumed_at:
            return self.preempted
        by_time = self.every_seconds is not None and self.learner.agree_any(
            time.monotonic() - self._last_write >= self.every_seconds, "agreeing on a checkpoint by time"
        )
        by_count = self.every_rollouts is not None and done % self.every_rollouts == 0
        return by_count or by_time or self.preempted

    def _on_rollout_start(self) -> None:
        self.rollouts += 1
        if self._due(self.rollouts - 1):  # (rollouts collected and trained on)
            self.write()

    def _on_step(self) -> bool:
        return not self.preempted

    def _on_training_end(self) -> None:
        if self._previous_handler is not None:
            signal.signal(signal.SIGTERM, self._previous_handler)
            self._previous_handler = None
        if self._lock is not None:
            self._lock.release()

    def write(self) -> pathlib.Path | None:
        """
        Write a checkpoint now (at a rollout boundary). A write that fails (a full disk, a file-size limit) is said in
        a warning naming the folder and the reason, and training goes on, the older checkpoints kept; when none could
        be written for longer than the interval (or 10 minutes), the model's log says so too.

        :return: its path (None: the write failed)
        """
        self.rollouts -= 1  # (saved as before this boundary's event, which a resumed run fires again)
        try:
            members = capture(self.model, self._root)
        finally:
            self.rollouts += 1
        self._last_write = time.monotonic()
        try:
            path = write_rank_checkpoint(self.model, self.folder, members, self.keep)
        except OSError as error:
            self._failed(error)
            return None
        self.last_path, self.failed_writes, self._last_good = path, 0, time.monotonic()
        if self.verbose >= 1:
            print(f"ResumableCheckpoint: wrote {self.last_path}")
        return self.last_path

    def _failed(self, error: OSError) -> None:
        self.failed_writes += 1
        kept = f"the newest kept is {self.last_path}" if self.last_path is not None else "none written yet"
        warnings.warn(
            f"ResumableCheckpoint: could not write a checkpoint in {self.folder} ({type(error).__name__}: {error}); "
            f"training goes on ({kept})",
            stacklevel=2,
        )
        minutes = (time.monotonic() - self._last_good) / 60
        if minutes > max(10.0, 2 * (self.every_seconds or 0) / 60):
            self.model.logger.log(
                f"ResumableCheckpoint: no checkpoint written for {minutes:.0f} minutes ({self.failed_writes} failed "
                f"writes in {self.folder}): a run stopped now resumes from {self.last_path or 'nothing'}"
            )

    def resumable_state(self) -> dict[str, Any]:
        """:return: the count of rollouts (a checkpoint keeps this callback's state)"""
        return {"rollouts": self.rollouts}

    def restore_state(self, state: dict[str, Any]) -> None:
        """Resume the count; the boundary written at is not written again."""
        self.rollouts = int(state["rollouts"])
        self._resumed_at = self.rollouts + 1
