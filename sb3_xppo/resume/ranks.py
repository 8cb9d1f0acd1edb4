"""
The resumable checkpoints of a data-parallel run (``distributed=True``, docs/guide/resume.md).

Every rank writes its own checkpoint, at the same rollout boundary, into ``<folder>/rank-<r>/`` (:mod:`files`'s
atomic, checksummed file; the newest ``keep`` kept per rank): its envs, RNG states, VecNormalize's return
accumulators, rollout position and callbacks, and :data:`RANKS` (the rank, the number of ranks, the rank's seed). Only
rank 0's holds the model: ``save()`` writes on rank 0 only, and every rank holds the same model, bit for bit. At
resume rank 0's model reaches the other ranks over the process group, so each rank reads its own folder only, which
may be on its own machine.

The ranks write in lockstep, and one is at most one checkpoint ahead of another: a rank writing at a boundary has
taken the collectives of the rollout before it, which every rank enters only after its own write at the boundary
before. So with ``keep >= 2`` the ranks always share a checkpoint, even when a kill stops one in the middle of a
write; resume takes the newest step that every rank has complete and good, agreed over the process group.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import re
from collections.abc import Sequence
from typing import Any

from stable_baselines3.common.utils import get_device

from sb3_xppo.common.distributed import (
    LAUNCH_COMMAND,
    DataParallel,
    ProcessGroup,
    check_launched,
    launched_rank,
    learner_of,
    rank_device,
    rank_folder,
)
from sb3_xppo.common.options import XPPOOptions

# (rank_folder and any_rank stay importable here)
__all__ = ["RANKS", "any_rank", "rank_folder", "read_on_ranks", "restore_rank", "write_rank_checkpoint", "written_on_ranks"]
from sb3_xppo.resume.files import (
    CorruptCheckpointError,
    checkpoint_name,
    checkpoint_step,
    checkpoints,
    read_checkpoint,
    write_checkpoint,
)
from sb3_xppo.resume.state import MODEL

logger = logging.getLogger(__name__)

#: the member of a rank's checkpoint that names its rank: ``{"rank", "world_size", "seed", "distributed_timeout"}``
RANKS = "ranks.json"
#: a rank's subfolder of the checkpoint folder
RANK_FOLDER = re.compile(r"rank-(\d+)")


def any_rank(flag: bool, model: Any, what: str = "asking whether any rank raised a flag") -> bool:
    """
    Whether ``flag`` holds on any rank, so that all ranks act together (stop, or write a checkpoint, at the same
    rollout boundary): the model's learner's ``agree_any``, one collective on a data-parallel model (every rank calls
    it at the same point), ``flag`` itself in one process.
    """
    return learner_of(model).agree_any(flag, what)


def write_rank_checkpoint(model: Any, folder: str | os.PathLike, members: dict[str, bytes], keep: int) -> pathlib.Path:
    """
    Write a checkpoint of ``model``'s members where its learner writes: ``folder`` for a model in one process, this
    rank's subfolder for a data-parallel one (the model on rank 0 only, :data:`RANKS` added).

    :return: the checkpoint's path
    """
    learner = learner_of(model)
    own = learner.checkpoint_members(members, model, MODEL, RANKS)
    return write_checkpoint(learner.own_folder(folder), checkpoint_name(model.num_timesteps), own, keep)


def rank_folders(folder: str | os.PathLike) -> list[pathlib.Path]:
    """:return: the rank subfolders of a data-parallel run's checkpoint folder (none: a run in one process)"""
    source = pathlib.Path(folder)
    if not source.is_dir():
        return []
    return sorted(path for path in source.iterdir() if path.is_dir() and RANK_FOLDER.fullmatch(path.name))


def written_on_ranks(folder: str | os.PathLike) -> bool:
    """:return: whether ``folder`` (a checkpoint folder, or a checkpoint file) is a data-parallel run's"""
    source = pathlib.Path(folder)
    return RANK_FOLDER.fullmatch(source.parent.name) is not None if source.is_file() else bool(rank_folders(source))


def rank_of(members: dict[str, bytes]) -> dict[str, Any] | None:
    """:return: the :data:`RANKS` of a checkpoint's members (None: a checkpoint of a run in one process)"""
    return json.loads(members[RANKS]) if RANKS in members else None


def survey(folder: pathlib.Path, rank: int) -> tuple[dict[int, dict[str, bytes]], dict[str, Any]]:
    """
    Read and check every checkpoint of one rank's subfolder.

    :return: the good checkpoints' members by step, and what the ranks compare: the rank, the good steps, the bad
        ones with the reason, the numbers of ranks the good ones were written by, and their timeout
    """
    good: dict[int, dict[str, bytes]] = {}
    summary: dict[str, Any] = {"rank": rank, "good": [], "bad": {}, "worlds": [], "timeout": None}
    for path in checkpoints(folder):
        step = checkpoint_step(path)
        try:
            members = read_checkpoint(path)
            ranks = rank_of(members)
            if ranks is None or ranks["rank"] != rank:
                raise CorruptCheckpointError(f"{path} is not rank {rank}'s checkpoint ({RANKS}: {ranks})")
        except CorruptCheckpointError as error:
            summary["bad"][step] = str(error)
            continue
        good[step] = members
        summary["good"].append(step)
        summary["worlds"] = sorted({*summary["worlds"], ranks["world_size"]})
        summary["timeout"] = ranks["distributed_timeout"]
    return good, summary


def agreed_step(
    summaries: Sequence[dict[str, Any]], world_size: int, where: Any, only: int | None = None
) -> tuple[int, list[str]]:
    """
    The step to resume, from every rank's :func:`survey` (the same on every rank: every rank decides alike).

    :param summaries: each rank's summary, in rank order
    :param world_size: the number of ranks resuming
    :param where: the checkpoint folder (for the messages)
    :param only: the one step to consider (a checkpoint file given), or None for any
    :return: the newest step every rank has complete and good, and what was passed over (newer checkpoints)
    :raises ValueError: the checkpoints were written by another number of ranks
    :raises FileNotFoundError: no step every rank has (:class:`CorruptCheckpointError` where a bad one is the reason)
    """
    written_by = sorted({world for summary in summaries for world in summary["worlds"]})
    if written_by and written_by != [world_size]:
        counts = " and ".join(str(world) for world in written_by)
        raise ValueError(
            f"the checkpoints in {where} were written by a data-parallel run on {counts} ranks, and this run has "
            f"{world_size}: resume it on {written_by[0]} ranks, launched as the run was"
        )
    steps = [{step for step in summary["good"] if only is None or step == only} for summary in summaries]
    common = set.intersection(*steps)
    if not common:
        shown = "; ".join(
            f"rank {summary['rank']}: {sorted(found) or 'none'}"
            + (f" (bad: {sorted(summary['bad'])})" if summary["bad"] else "")
            for summary, found in zip(summaries, steps, strict=True)
        )
        error = CorruptCheckpointError if any(summary["bad"] for summary in summaries) else FileNotFoundError
        raise error(
            f"no checkpoint in {where} that every rank has complete and good{'' if only is None else f' at {only}'} ({shown})"
        )
    step = max(common)
    passed = [
        f"rank {summary['rank']}'s checkpoint at {newer} ({summary['bad'].get(newer, 'another rank has none there')})"
        for summary in summaries
        for newer in sorted({*summary["good"], *summary["bad"]})
        if only is None and newer > step
    ]
    return step, passed


def read_on_ranks(folder: str | os.PathLike, kwargs: dict[str, Any]) -> tuple[pathlib.Path, dict[str, bytes], dict[str, Any]]:
    """
    This rank's part of a data-parallel run's checkpoint: each rank reads and checks its own subfolder, the ranks
    agree on the newest step every one has complete and good, and rank 0's model reaches every rank. The process
    group is joined here (the model's learner, handed to ``load()``).

    :param folder: the checkpoint folder, or one rank's checkpoint file (its step, on every rank)
    :param kwargs: ``resume()``'s keywords for ``load()``
    :return: this rank's checkpoint path, its members (rank 0's model among them), and ``load()``'s keywords
    :raises ValueError: a checkpoint of a run in one process with ``distributed=True``; a data-parallel one without a
        launcher, with ``distributed=False`` or on another number of ranks
    """
    source = pathlib.Path(folder)
    root, only = (source.parent.parent, checkpoint_step(source)) if source.is_file() else (source, None)
    written = len(rank_folders(root))
    if not written:
        raise ValueError(f"{folder} holds the checkpoints of a run in one process: resume it without distributed=True")
    if kwargs.get("distributed", True) is not True:
        raise ValueError(
            f"{folder} holds the checkpoints of a data-parallel run ({written} rank folders): it resumes on as many ranks, "
            "with distributed=True (the default for such a checkpoint)"
        )
    try:
        check_launched()
    except ValueError:
        raise ValueError(
            f"{folder} holds the checkpoints of a data-parallel run ({written} rank folders): resume it on as many ranks, "
            f"each calling resume() under PyTorch's launcher: {LAUNCH_COMMAND}"
        ) from None
    rank = launched_rank()
    good, summary = survey(rank_folder(root, rank), rank)
    device = rank_device(kwargs.get("device", "auto"))
    timeout = kwargs.get("distributed_timeout", summary["timeout"] or XPPOOptions.distributed_timeout)
    learner = DataParallel(ProcessGroup.join(timeout, get_device(device)))
    try:
        every = learner.group.all_gather_object(summary, "agreeing on the checkpoint to resume")
        step, passed = agreed_step(every, learner.world_size, root, only)
        members = dict(good[step])
        members[MODEL] = learner.group.broadcast_object(members.get(MODEL), "taking rank 0's model")
    except BaseException:
        learner.group.close()  # (the model that a caller builds instead joins again, with a heartbeat of its own)
        raise
    for what in passed:
        logger.warning("resume: passed over %s", what)
    load_kwargs = {**kwargs, "distributed": True, "device": device, "_data_parallel": learner}
    return rank_folder(root, rank) / checkpoint_name(step), members, load_kwargs


def restore_rank(model: Any, members: dict[str, bytes]) -> None:
    """Put a rank's own seed back on a model loaded from rank 0's file (``seed + rank * n_envs``, as it was)."""
    ranks = rank_of(members)
    if ranks is not None:
        model.seed = ranks["seed"]
