"""
Resumable checkpoints of a data-parallel run (``distributed=True``, docs/guide/resume.md): two real gloo ranks, each
forked from the test with the launcher's environment (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``, as
tests/test_distributed.py sets it) and running ``tests/resume_child.py``'s ``ranks`` configuration, both in one process
group. The group is killed with SIGKILL at random moments, the first two times while rank 1 is in the middle of writing
a checkpoint that rank 0 has written; each time the ranks resume from the newest checkpoint they both have (or, where
they have none in common, start afresh). Both ranks
end with the parameters, Adam's state and VecNormalize's statistics of an uninterrupted 2-rank run, bit for bit.
Another number of ranks, a run without the launcher, and a checkpoint of one process on ranks are refused by name.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import pathlib
import random
import signal
import socket
import sys
import time
from typing import Any

import pytest
import torch as th
import torch.distributed as dist

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import resume_child
from test_resume_kill import differences

from sb3_xppo import XPPO, ResumableCheckpoint
from sb3_xppo.common.distributed import ProcessGroup
from sb3_xppo.resume import CorruptCheckpointError, checkpoints
from sb3_xppo.resume.files import checkpoint_name
from sb3_xppo.resume.ranks import agreed_step, any_rank, rank_folder
from sb3_xppo.vec_env import make_vec_env

FORK = multiprocessing.get_context("fork")
KILLS = 5
ROLLOUTS = 24  # resume_child.py's "ranks": 1536 steps of 2 ranks x 2 envs x 16
STEP = 64  # the global steps of one rollout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(connection: Any, launcher: dict[str, str], *args: Any, **kwargs: Any) -> None:
    os.environ.update(launcher)
    th.set_num_threads(1)  # (the test's setting, which a forked process does not keep)
    try:
        resume_child.main(*args, report=connection.send, **kwargs)
    except Exception as error:
        connection.send(f"ERROR {type(error).__name__}: {error}")
        raise


class Ranks:
    """
    ``world`` ranks of ``resume_child.main(config, folder, out, ...)``, forked as the launcher starts them, in one
    process group (killed together, as when a job is preempted); rank ``r`` writes ``out.format(rank=r)``.

    :param pause: which of rank 1's checkpoint writes stops before its rename (0: none)
    """

    def __init__(
        self,
        world: int,
        folder: pathlib.Path,
        out: str,
        plain: bool = False,
        pause: int = 0,
        sigterm: bool = False,
        config: str = "ranks",
    ) -> None:
        launcher = {"WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
        self.processes, self.receivers, self.reports = [], [], []
        for rank in range(world):
            receiver, sender = FORK.Pipe(duplex=False)
            args = (config, str(folder), out.format(rank=rank), plain, pause if rank == 1 else 0)
            environment = {**launcher, "RANK": str(rank), "LOCAL_RANK": str(rank)}
            process = FORK.Process(target=_rank, args=(sender, environment, *args), kwargs={"sigterm": sigterm})
            process.start()
            os.setpgid(process.pid, self.processes[0].pid if self.processes else process.pid)
            sender.close()
            self.processes.append(process)
            self.receivers.append(receiver)
            self.reports.append([])

    def follow(self, until: Any, delay: float = 0.0, timeout: float = 120.0) -> bool:
        """
        Take the ranks' reports until ``until(reports)`` holds (then SIGKILL the group ``delay`` s later) or every
        rank has ended.

        :return: whether the group was killed
        """
        if not self.collect(until, timeout):
            return False
        time.sleep(delay)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.processes[0].pid, signal.SIGKILL)
        for process in self.processes:
            process.join()
        return all(process.exitcode == -signal.SIGKILL for process in self.processes)

    def collect(self, until: Any, timeout: float = 120.0) -> bool:
        """
        Take the ranks' reports until ``until(reports)`` holds or every rank has ended.

        :return: whether ``until`` held with a rank still running
        """
        open_, deadline = list(self.receivers), time.monotonic() + timeout
        while open_ and not until(self.reports):
            assert time.monotonic() < deadline, self.reports
            for receiver in multiprocessing.connection.wait(open_, timeout=1.0):
                try:
                    self.reports[self.receivers.index(receiver)].append(receiver.recv())
                except EOFError:
                    open_.remove(receiver)
        if not open_:
            for process in self.processes:
                process.join()
            return False
        return True

    def finish(self) -> list[list[str]]:
        """:return: every rank's reports, once each has ended (each must end well)"""
        self.follow(lambda reports: False)
        for rank, (process, reports) in enumerate(zip(self.processes, self.reports, strict=True)):
            assert process.exitcode == 0 and reports[-1:] == ["DONE"], (rank, process.exitcode, reports)
        return self.reports


def rollouts(reports: list[str]) -> int:
    return sum(report.startswith("ROLLOUT ") for report in reports)


def resumed_at(reports: list[list[str]]) -> set[str]:
    return {report for rank in reports for report in rank if report.startswith(("RESUMED", "ERROR"))}


@pytest.mark.slow
def test_two_ranks_killed_at_random_moments_resume_bit_for_bit(tmp_path: pathlib.Path) -> None:
    rng = random.Random("resume-ranks")
    reference = Ranks(2, tmp_path / "reference", str(tmp_path / "reference{rank}.npz"), plain=True)
    folder, out = tmp_path / "run", str(tmp_path / "run{rank}.npz")
    # rank 1 stopped in the middle of its first write, which rank 0 has made: no checkpoint both ranks have, so the next
    # run starts afresh (the ranks agree on it); that one stopped in the middle of rank 1's second write
    for pause, rank0, rank1 in ((1, [STEP], []), (2, [STEP, 2 * STEP], [STEP])):
        ranks = Ranks(2, folder, out, pause=pause)
        assert ranks.follow(lambda reports, pause=pause: "WRITING" in reports[1] and f"ROLLOUT {pause}" in reports[0])
        assert resumed_at(ranks.reports) == set(), ranks.reports
        assert [path.name for path in checkpoints(rank_folder(folder, 0))] == [checkpoint_name(step) for step in rank0]
        assert [path.name for path in checkpoints(rank_folder(folder, 1))] == [checkpoint_name(step) for step in rank1]
        assert list(rank_folder(folder, 1).glob(f".{checkpoint_name(pause * STEP)}.*.tmp"))
    # then each run killed at a random moment of its second or third rollout (once both have written one of their own)
    history = []
    for index in range(KILLS - 2):
        target, delay = rng.randint(2, 3), rng.uniform(0.0, 0.05)
        ranks = Ranks(2, folder, out)
        assert ranks.follow(lambda reports, target=target: rollouts(reports[0]) >= target, delay), ranks.reports
        history.append(resumed_at(ranks.reports))
        if index == 0:  # the newest checkpoint both ranks have, not rank 0's newest
            assert history[0] == {f"RESUMED {STEP}"}, ranks.reports
    assert all(len(resumed) == 1 and next(iter(resumed)).startswith("RESUMED") for resumed in history), history
    reports = Ranks(2, folder, out).finish()
    assert len(resumed_at(reports)) == 1 and next(iter(resumed_at(reports))).startswith("RESUMED"), reports
    for rank_reports in reference.finish():  # (any_rank: rank 1's flag reaches both ranks; no flag, neither)
        assert "ANY True False" in rank_reports, rank_reports
    for rank in range(2):
        got = pathlib.Path(out.format(rank=rank))
        assert not differences(tmp_path / f"reference{rank}.npz", got), f"rank {rank} differs from the uninterrupted run"
    # one model on both ranks (VecNormalize's statistics merged); each rank's own return accumulators
    assert differences(pathlib.Path(out.format(rank=0)), pathlib.Path(out.format(rank=1))) == ["returns"]


@pytest.mark.slow
def test_a_sigterm_to_one_rank_stops_every_rank_at_one_boundary(tmp_path: pathlib.Path) -> None:
    """Rank 1 alone is sent SIGTERM: both ranks write at the next boundary and stop there; resumed, they finish the run."""
    reference = Ranks(2, tmp_path / "reference", str(tmp_path / "reference{rank}.npz"), plain=True)
    folder, out = tmp_path / "run", str(tmp_path / "run{rank}.npz")
    ranks = Ranks(2, folder, out, sigterm=True)
    assert ranks.collect(lambda reports: rollouts(reports[1]) >= 2)
    os.kill(ranks.processes[1].pid, signal.SIGTERM)
    ranks.collect(lambda reports: False)
    stopped = [{report for report in rank if report.startswith("PREEMPTED")} for rank in ranks.reports]
    assert all(process.exitcode == 0 for process in ranks.processes) and stopped[0] == stopped[1], ranks.reports
    step = int(next(iter(stopped[0])).split()[1]) // STEP * STEP  # (stopped one step past the boundary written at)
    for rank in range(2):
        assert [path.name for path in checkpoints(rank_folder(folder, rank))] == [checkpoint_name(step)]
    reports = Ranks(2, folder, out, sigterm=True).finish()
    assert resumed_at(reports) == {f"RESUMED {step}"}, reports
    reference.finish()
    for rank in range(2):
        assert not differences(tmp_path / f"reference{rank}.npz", pathlib.Path(out.format(rank=rank))), f"rank {rank}"


@pytest.mark.parametrize(
    "config",
    [
        # each rank's checkpoint keeps the noise that rank drew for the rollout after the boundary (sde_sample_freq=4)
        "ranks_sde",
        # each rank's checkpoint keeps its DAgger dataset and the projector, which the ranks train as one
        "ranks_dagger",
    ],
)
def test_use_sde_and_dagger_on_two_ranks_resume_bit_for_bit(tmp_path: pathlib.Path, config: str) -> None:
    reference = Ranks(2, tmp_path / "reference", str(tmp_path / "reference{rank}.npz"), plain=True, config=config)
    folder, out = tmp_path / "run", str(tmp_path / "run{rank}.npz")
    ranks = Ranks(2, folder, out, config=config)
    assert ranks.follow(lambda reports: rollouts(reports[0]) >= 4 and rollouts(reports[1]) >= 4), ranks.reports
    reports = Ranks(2, folder, out, config=config).finish()
    assert len(resumed_at(reports)) == 1 and next(iter(resumed_at(reports))).startswith("RESUMED"), reports
    reference.finish()
    for rank in range(2):
        assert not differences(tmp_path / f"reference{rank}.npz", pathlib.Path(out.format(rank=rank))), f"rank {rank}"
    # the ranks explored apart and hold one model (and one projector); VecNormalize's returns are each rank's own
    assert set(differences(pathlib.Path(out.format(rank=0)), pathlib.Path(out.format(rank=1)))) <= {"returns"}


@pytest.fixture(scope="module")
def two_rank_checkpoints(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A 2-rank run's checkpoints after its second rollout (it is killed there)."""
    folder = tmp_path_factory.mktemp("ranks") / "run"
    ranks = Ranks(2, folder, str(folder.parent / "unused{rank}.npz"))
    assert ranks.follow(lambda reports: all(rollouts(rank) >= 2 for rank in reports))
    return folder


@pytest.mark.parametrize("world", [1, 3])
def test_another_number_of_ranks_is_refused_naming_both(two_rank_checkpoints: pathlib.Path, world: int) -> None:
    ranks = Ranks(world, two_rank_checkpoints, str(two_rank_checkpoints.parent / "other{rank}.npz"))
    ranks.follow(lambda reports: False)
    expected = (
        f"ERROR ValueError: the checkpoints in {two_rank_checkpoints} were written by a data-parallel run on 2 ranks, "
        f"and this run has {world}: resume it on 2 ranks"
    )
    for rank, reports in enumerate(ranks.reports):
        assert any(report.startswith(expected) for report in reports), (rank, reports)
        assert ranks.processes[rank].exitcode == 1


def test_a_checkpoint_of_ranks_is_refused_in_one_process_and_the_reverse(
    two_rank_checkpoints: pathlib.Path, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    env = make_vec_env("CartPole-v1", 2, seed=0)
    with pytest.raises(
        ValueError,
        match=r"run \(2 rank folders\): resume it on as many ranks, each calling resume\(\) under PyTorch's launcher: python",
    ):
        XPPO.resume(two_rank_checkpoints, env=env)
    with pytest.raises(ValueError, match=r"data-parallel run \(2 rank folders\).*with distributed=True"):
        XPPO.resume(two_rank_checkpoints, env=env, distributed=False)
    rank_file = checkpoints(rank_folder(two_rank_checkpoints, 0))[-1]
    with pytest.raises(ValueError, match=r"data-parallel run \(2 rank folders\)"):  # one rank's file alone, too
        XPPO.resume(rank_file, env=env)
    model = XPPO("MlpPolicy", env, **resume_child.SMALL)
    model.learn(64, callback=ResumableCheckpoint(tmp_path, every_rollouts=1))
    with pytest.raises(ValueError, match="holds the checkpoints of a run in one process: resume it without distributed=True"):
        XPPO.resume(tmp_path, env=make_vec_env("CartPole-v1", 2, seed=0), distributed=True)


def summary(rank: int, good: list[int], bad: dict[int, str] | None = None, worlds: list[int] | None = None) -> dict[str, Any]:
    return {"rank": rank, "good": good, "bad": bad or {}, "worlds": [2] if worlds is None else worlds, "timeout": 60.0}


def test_the_step_agreed_on_is_the_newest_every_rank_has_complete_and_good() -> None:
    # rank 0 one ahead (rank 1 killed while writing 128): 64, and 128 named as passed over
    step, passed = agreed_step([summary(0, [64, 128]), summary(1, [0, 64])], 2, "run")
    assert step == 64 and passed == ["rank 0's checkpoint at 128 (another rank has none there)"]
    # a corrupt newest on rank 1: the step before, with the reason
    step, passed = agreed_step([summary(0, [64, 128]), summary(1, [64], {128: "truncated"})], 2, "run")
    assert step == 64 and passed == [
        "rank 0's checkpoint at 128 (another rank has none there)",
        "rank 1's checkpoint at 128 (truncated)",
    ]
    assert agreed_step([summary(0, [64, 128]), summary(1, [64, 128])], 2, "run") == (128, [])
    assert agreed_step([summary(0, [64, 128]), summary(1, [64, 128])], 2, "run", only=64) == (64, [])
    with pytest.raises(FileNotFoundError, match=r"every rank has complete and good \(rank 0: \[64\]; rank 1: none\)"):
        agreed_step([summary(0, [64]), summary(1, [], worlds=[])], 2, "run")
    with pytest.raises(CorruptCheckpointError, match=r"rank 1: none \(bad: \[64\]\)"):
        agreed_step([summary(0, [64]), summary(1, [], {64: "truncated"}, worlds=[])], 2, "run")
    with pytest.raises(
        ValueError, match="written by a data-parallel run on 2 ranks, and this run has 3: resume it on 2 ranks"
    ):
        agreed_step([summary(0, [64]), summary(1, [64]), summary(2, [], worlds=[])], 3, "run")


def test_any_rank_in_one_process_is_the_flag() -> None:
    model = XPPO("MlpPolicy", make_vec_env("CartPole-v1", 1, seed=0), n_steps=16, batch_size=16)
    assert any_rank(True, model) is True and any_rank(False, model) is False


def _keep_1_on_one_rank(connection: Any, folder: str) -> None:
    os.environ.update({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1"})
    os.environ["MASTER_PORT"] = str(free_port())
    th.set_num_threads(1)
    model = XPPO("MlpPolicy", make_vec_env("CartPole-v1", 2, seed=0), **resume_child.SMALL, distributed=True)
    try:
        model.learn(64, callback=ResumableCheckpoint(folder, every_rollouts=1, keep=1))
    except ValueError as error:
        connection.send(str(error))


def test_keep_1_is_refused_on_ranks_only(tmp_path: pathlib.Path) -> None:
    receiver, sender = FORK.Pipe(duplex=False)
    process = FORK.Process(target=_keep_1_on_one_rank, args=(sender, str(tmp_path / "ranks")))
    process.start()
    sender.close()
    process.join(60)
    assert receiver.poll() and receiver.recv().startswith(
        "ResumableCheckpoint(keep=1) on a data-parallel run: keep must be >= 2, since a rank killed while writing"
    )
    model = XPPO("MlpPolicy", make_vec_env("CartPole-v1", 2, seed=0), **resume_child.SMALL)
    model.learn(64, callback=ResumableCheckpoint(tmp_path / "one", every_rollouts=1, keep=1))  # in one process: fine
    assert len(checkpoints(tmp_path / "one")) == 1


def _heartbeats(connection: Any) -> None:
    """One rank: its heartbeat's times while beating, then after :meth:`ProcessGroup.close`."""
    os.environ.update({"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())})
    dist.init_process_group("gloo")
    group = ProcessGroup(30.0, heartbeat=0.05)
    beats = [group._read_beat(0)[0]]
    time.sleep(0.3)
    beats.append(group._read_beat(0)[0])
    group.close()
    time.sleep(0.1)  # (a beat under way when it closed)
    beats.append(group._read_beat(0)[0])
    time.sleep(0.3)
    beats.append(group._read_beat(0)[0])
    connection.send(beats)


def test_a_closed_process_group_stops_its_heartbeat() -> None:
    """(a resume that fails after joining closes its group: the model built instead beats alone)"""
    receiver, sender = FORK.Pipe(duplex=False)
    process = FORK.Process(target=_heartbeats, args=(sender,))
    process.start()
    sender.close()
    process.join(60)
    before, beating, closed, later = receiver.recv()
    assert beating > before and later == closed  # it beat every 0.05 s, then no more
