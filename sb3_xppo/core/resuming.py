"""
``resume()`` of every XPPO algorithm, and the ``learn()`` that finishes a resumed run (docs/guide/resume.md): the
first ``learn()`` of a resumed model keeps its counters, rollout position and envs (SB3's ``_setup_learn`` with
``reset_num_timesteps=False``), takes ``total_timesteps`` as the run's total (not steps to add), continues the
TensorBoard run at its step with the values the logger held at the checkpoint, and puts the checkpoint's callback
states into the callbacks it is given.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, cast

from stable_baselines3.common.callbacks import BaseCallback

from sb3_xppo.resume import PendingResume, ResumableCheckpoint, resume_model
from sb3_xppo.resume.callbacks import flattened
from sb3_xppo.resume.envs import reach_envs


def _checkpointed(callback: Any) -> bool:
    """:return: whether ``learn()``'s ``callback`` (a callback, a list of them or None) holds a ResumableCheckpoint"""
    members = callback if isinstance(callback, list) else [callback]
    return any(isinstance(c, ResumableCheckpoint) for member in members for c in flattened(member))


class ResumeMixin:
    """The algorithm's ``resume()`` and the ``_setup_learn`` of a resumed model."""

    _pending_resume: PendingResume | None = None
    _total_timesteps: int

    @classmethod
    def resume(cls, folder: str | os.PathLike, env: Any = None, exact: bool = True, **kwargs: Any) -> Any:
        """
        The model at the newest good checkpoint that :class:`~sb3_xppo.ResumableCheckpoint` wrote in ``folder``.
        ``learn()`` with the run's arguments (the same ``total_timesteps``, its callbacks built afresh) then finishes
        the run, bit for bit.

        :param folder: the checkpoint folder, or one checkpoint file; a data-parallel run's resumes on as many ranks,
            each calling ``resume()`` under the launcher, at the newest step every rank has complete and good
        :param env: the run's env, built as it was (None: rebuilt where it is ``make_vec_env``'s of an env id)
        :param exact: rebuild the envs by replay, checked bit for bit (an env that does not replay exactly is a
            :class:`~sb3_xppo.resume.ReplayMismatchError` naming its index and step); False: reset them, as SB3 does
        :param kwargs: ``load()``'s keywords (``device``, ``trust_code``, ...)
        :return: the model
        :raises ~sb3_xppo.resume.CorruptCheckpointError: the newest checkpoint is corrupt (the previous good one named)
        :raises ValueError: a data-parallel run's checkpoint on another number of ranks, or without the launcher
        :raises FileNotFoundError: no checkpoint (on ranks: none that every rank has; every rank raises it alike)
        """
        return resume_model(cls, folder, env=env, exact=exact, **kwargs)

    def _setup_learn(
        self,
        total_timesteps: int,
        callback: Any = None,
        reset_num_timesteps: bool = True,
        tb_log_name: str = "run",
        progress_bar: bool = False,
    ) -> tuple[int, BaseCallback]:
        pending = self._pending_resume
        if pending is None:
            model = cast(Any, self)  # (a BaseAlgorithm)
            if (reset_num_timesteps or model._last_obs is None) and _checkpointed(callback):
                reach_envs(model.env)  # (a DummyVecEnv of your own: recorded from the reset that follows)
            return super()._setup_learn(total_timesteps, callback, reset_num_timesteps, tb_log_name, progress_bar)  # type: ignore[misc]
        self._pending_resume = None
        # the counters, the envs and the episode buffers kept; the TensorBoard run continued
        _, callback = super()._setup_learn(total_timesteps, callback, False, tb_log_name, progress_bar)  # type: ignore[misc]
        if total_timesteps != pending.total_timesteps:
            warnings.warn(
                f"learn(total_timesteps={total_timesteps}) of a resumed run whose total was {pending.total_timesteps}: "
                "the schedules follow the new total, so the run is not the original one",
                stacklevel=3,
            )
        self._total_timesteps = total_timesteps
        pending.restore_logger(cast(Any, self).logger)  # (BaseAlgorithm.logger, configured just now)
        pending.restore_callbacks(callback)
        pending.restore_rng(self)  # (the callbacks' setup above may have drawn: the original run drew it before)
        return total_timesteps, callback
