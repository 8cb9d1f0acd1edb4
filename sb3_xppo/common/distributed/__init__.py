"""
Everything ``distributed=True`` adds (docs/guide/distributed.md), in one folder: the process group and its counted,
heartbeat-guarded collectives (``process_group.py``), and the data-parallel learner that keeps the ranks one learner
(``data_parallel.py``), whose single-process form, :class:`SingleProcess`, every other model holds. The rollout and
``train()`` (``sb3_xppo/core/``) call the learner the same way in both cases and never mention ranks.
"""

from sb3_xppo.common.distributed.data_parallel import SINGLE_PROCESS, DataParallel, SingleProcess, learner_of, rank_folder
from sb3_xppo.common.distributed.process_group import (
    LAUNCH_COMMAND,
    LAUNCHER_VARIABLES,
    ProcessGroup,
    RankFailure,
    check_launched,
    launched_rank,
    merge_running_stats,
    moments_since,
    process_device,
    rank_device,
    running_stats_vector,
    set_running_stats,
)

__all__ = [
    "LAUNCHER_VARIABLES",
    "LAUNCH_COMMAND",
    "SINGLE_PROCESS",
    "DataParallel",
    "ProcessGroup",
    "RankFailure",
    "SingleProcess",
    "check_launched",
    "launched_rank",
    "learner_of",
    "merge_running_stats",
    "moments_since",
    "process_device",
    "rank_device",
    "rank_folder",
    "running_stats_vector",
    "set_running_stats",
]
