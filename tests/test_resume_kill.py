"""
Resumable checkpoints under SIGKILL (docs/guide/resume.md): a real training process (``tests/resume_child.py``, forked
from the test so that it starts without importing anything) is killed with SIGKILL at random moments, the first time
in the middle of writing a checkpoint (its temporary file written and fsynced, the rename not done); each time it is
started again it resumes from its folder. The run it finishes ends with the parameters, Adam's state, VecNormalize's
statistics and the evaluation history of an uninterrupted run, bit for bit.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pathlib
import random
import signal
import sys
import time
from typing import Any

import numpy as np
import pytest
import torch as th

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import resume_child

KILLS = 5
ROLLOUTS = 24  # resume_child.py: 768 steps of 2 envs x 16
FORK = multiprocessing.get_context("fork")


def _run(connection: Any, *args: Any) -> None:
    os.setpgid(0, 0)  # its own process group, SubprocVecEnv's workers included: killed together, as when a node dies
    th.set_num_threads(1)  # (the test's setting, which a forked process does not keep)
    resume_child.main(*args, report=connection.send)


def start(*args: Any) -> tuple[Any, Any]:
    """:return: the forked run of ``resume_child.main(*args)`` and the end of the pipe it reports on"""
    receiver, sender = FORK.Pipe(duplex=False)
    process = FORK.Process(target=_run, args=(sender, *args))  # (not daemonic: SubprocVecEnv's workers are its children)
    process.start()
    sender.close()
    return process, receiver


def run_until(process: Any, receiver: Any, rollouts: int | None, delay: float) -> tuple[bool, list[str]]:
    """
    Follow the run's reports until its ``rollouts``-th ``ROLLOUT`` report (None: until ``WRITING``), then SIGKILL it
    (its process group) ``delay`` s later.

    :return: whether it was killed, and its reports
    """
    reports, seen = [], 0
    while True:
        try:
            report = receiver.recv()
        except EOFError:  # it ended (DONE) or failed
            process.join()
            return False, reports
        reports.append(report)
        seen += report.startswith("ROLLOUT ")
        if (rollouts is None and report == "WRITING") or (rollouts is not None and seen >= rollouts):
            time.sleep(delay)
            with contextlib.suppress(ProcessLookupError):  # (where it has not ended meanwhile)
                os.killpg(process.pid, signal.SIGKILL)
            process.join()
            try:
                while receiver.poll():
                    reports.append(receiver.recv())
            except EOFError:
                pass
            return process.exitcode == -9, reports


def arrays(path: pathlib.Path) -> dict[str, np.ndarray]:
    with np.load(path) as found:
        return {key: found[key] for key in found.files}


def differences(expected: pathlib.Path, got: pathlib.Path) -> list[str]:
    """:return: the fingerprint entries that differ bit for bit (or are missing)"""
    a, b = arrays(expected), arrays(got)
    return sorted(set(a) ^ set(b)) + [
        k for k in set(a) & set(b) if a[k].dtype != b[k].dtype or a[k].tobytes() != b[k].tobytes()
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    "config", ["ppo", "multi_critic", "vec_normalize", "subproc", "recurrent", "maskable", "mujoco", "eval_callback"]
)
def test_sigkill_at_random_moments_then_resume_is_bit_for_bit(config, tmp_path):
    rng = random.Random(f"resume-{config}")
    reference = start(config, str(tmp_path / "reference"), str(tmp_path / "reference.npz"), True)
    folder, out = tmp_path / "run", tmp_path / "run.npz"
    # the first kill in the middle of the first checkpoint's write; then each run is killed at a random moment of its
    # second or third rollout, once it has written a checkpoint of its own (so each resumes further on)
    targets = [None, *(rng.randint(2, 3) for _ in range(KILLS - 1))]
    killed, resumed, history = 0, 0, []
    for index, target in enumerate(targets):
        resumed += any(folder.glob("resume-*.ckpt"))
        process, receiver = start(config, str(folder), str(out), False, index == 0)
        was_killed, reports = run_until(process, receiver, target, rng.uniform(0.0, 0.05) if index else 0.0)
        assert was_killed or reports[-1:] == ["DONE"], (process.exitcode, reports)
        killed += was_killed
        history.append((target, process.exitcode, reports))
        if index == 0:  # killed between the temporary file and the rename: no checkpoint published
            assert not any(folder.glob("resume-*.ckpt")) and any(folder.glob(".resume-*.ckpt.*.tmp"))
    for process, receiver in (start(config, str(folder), str(out)), reference):
        reports = run_until(process, receiver, ROLLOUTS + 1, 0.0)[1]  # (to its end)
        assert process.exitcode == 0 and reports[-1:] == ["DONE"], (process.exitcode, reports)
    assert killed == KILLS and resumed == KILLS - 2, (killed, resumed, history)
    assert not differences(tmp_path / "reference.npz", out), f"{config}: differs from the uninterrupted run"
