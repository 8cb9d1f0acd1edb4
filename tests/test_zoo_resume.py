"""
The main job's resumable runs (docs/guide/resume.md, :mod:`sb3_xppo.zoo.resuming`): ``python -m sb3_xppo.train`` run
as a real process, stopped by SIGTERM (it writes a checkpoint at the next rollout boundary and exits 0) and then
killed with SIGKILL at random moments, each time continued with ``--resume``. The run it finishes ends with the
model, Adam's state, VecNormalize's statistics, the ``evaluations.npz``, the Monitor files' episodes and the
TensorBoard steps of an uninterrupted run; so does a ``--distributed`` run on 2 ranks.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import pathlib
import random
import signal
import subprocess
import sys
import time
import zipfile
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch as th
from helpers import ROOT, page_blocks
from hostile import refused_by_command

from sb3_xppo.loading.files import load_vec_normalize
from sb3_xppo.loading.zoo_files import load_zoo_yaml
from sb3_xppo.train import main as train_main
from sb3_xppo.zoo.resuming import LATEST, ResumePlan, split_resume_args

RUN = "xppo/CartPole-v1_1"
#: 24 rollouts of 8 envs x 32 steps; the entry's VecNormalize, evaluations and TensorBoard on
COMMAND = [
    *("--env", "CartPole-v1", "-n", "6144", "--seed", "3", "--eval-freq", "1024", "--eval-episodes", "2"),
    *("-params", "normalize:True", "--checkpoint-rollouts", "1", "--no-progress", "--verbose", "0"),
]
KILLS = 5


#: ``--distributed`` on 2 ranks, under PyTorch's launcher
RANKS = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


def command(folder: pathlib.Path, *extra: str, ranks: bool = False) -> list[str]:
    """:return: the run's command; on ranks, 24 rollouts of 2 ranks x 8 envs x 32 steps"""
    if ranks:
        program = [*RANKS, "-m", "sb3_xppo.train", "--distributed"]
        arguments = [word if word != "6144" else "12288" for word in COMMAND]
    else:
        program, arguments = [sys.executable, "-m", "sb3_xppo.train"], COMMAND
    return [*program, *arguments, "-f", str(folder / "logs"), "-tb", str(folder / "tb"), *extra]


def start(folder: pathlib.Path, *extra: str, ranks: bool = False) -> subprocess.Popen:
    return subprocess.Popen(
        command(folder, *extra, ranks=ranks),
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def kill(process: subprocess.Popen) -> None:
    """SIGKILL the run, as when its machine dies: its process group and, under the launcher, each rank's (the launcher
    starts every rank in a session of its own)."""
    children = pathlib.Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
    for pid in [process.pid, *map(int, children)]:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    process.communicate()


def checkpoints(folder: pathlib.Path, logs: str = "logs") -> list[str]:
    """:return: the run's checkpoints (rank 1's, for a run on ranks)"""
    found = folder / logs / RUN / "resume"
    return sorted(path.name for path in ((found / "rank-1") if (found / "rank-1").is_dir() else found).glob("resume-*.ckpt"))


def wait_for_progress(process: subprocess.Popen, folder: pathlib.Path, past: list[str], logs: str = "logs") -> None:
    """Until the run has written a checkpoint newer than ``past``'s newest (it is under way again)."""
    deadline = time.monotonic() + 120
    while not (checkpoints(folder, logs) and (not past or checkpoints(folder, logs)[-1] > past[-1])):
        assert process.poll() is None, f"the run ended before it was stopped:\n{process.communicate()[0][-3000:]}"
        assert time.monotonic() < deadline, "no checkpoint in 120 s"
        time.sleep(0.01)


def outcome(folder: pathlib.Path, logs: str = "logs") -> dict[str, Any]:
    run = folder / logs / RUN
    with zipfile.ZipFile(run / "CartPole-v1.zip") as archive:
        policy = th.load(io.BytesIO(archive.read("policy.pth")), weights_only=True)
        adam = th.load(io.BytesIO(archive.read("policy.optimizer.pth")), weights_only=True)
    statistics = load_vec_normalize(str(run / "CartPole-v1" / "vecnormalize.pkl"))
    with np.load(run / "evaluations.npz") as evaluations:
        evals = {key: evaluations[key] for key in evaluations.files}
    monitors = [pd.read_csv(run / f"{i}.monitor.csv", skiprows=1)[["r", "l"]] for i in range(8)]
    return {"policy": policy, "adam": adam, "vec_normalize": statistics, "evals": evals, "monitors": monitors}


def tensorboard_steps(folder: pathlib.Path) -> tuple[list[str], set[int]]:
    """:return: the TensorBoard run folders and the steps at which ``train/loss`` was logged in them"""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    runs = sorted(path.name for path in (folder / "tb" / "CartPole-v1").iterdir())
    steps: set[int] = set()
    for events in (folder / "tb" / "CartPole-v1").rglob("events.out.tfevents.*"):
        accumulator = EventAccumulator(str(events))
        accumulator.Reload()
        if "train/loss" in accumulator.Tags()["scalars"]:
            steps.update(event.step for event in accumulator.Scalars("train/loss"))
    return runs, steps


def assert_same_outcome(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    assert ours["policy"].keys() == theirs["policy"].keys()
    assert all(th.equal(ours["policy"][k], theirs["policy"][k]) for k in ours["policy"])
    for a, b in zip(ours["adam"]["state"].values(), theirs["adam"]["state"].values(), strict=True):
        assert all(th.equal(a[k], b[k]) for k in a)
    x, y = ours["vec_normalize"], theirs["vec_normalize"]
    assert np.array_equal(x.obs_rms.mean, y.obs_rms.mean) and np.array_equal(x.ret_rms.var, y.ret_rms.var)
    assert ours["evals"].keys() == theirs["evals"].keys()
    assert all(np.array_equal(ours["evals"][k], theirs["evals"][k]) for k in ours["evals"])
    assert all(a.equals(b) for a, b in zip(ours["monitors"], theirs["monitors"], strict=True))


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    folder = tmp_path_factory.mktemp("uninterrupted")
    subprocess.run(command(folder), cwd=folder, check=True, capture_output=True, timeout=300)
    return folder


def slurm_script() -> str:
    """:return: resume.md's batch script, as it is written there"""
    scripts = [code for _, code in page_blocks(ROOT / "docs" / "guide" / "resume.md", "bash") if "#SBATCH" in code]
    assert len(scripts) == 1
    return scripts[0]


#: the Slurm job of the test: its log folder is ``logs/xppo-7`` (the script's ``logs/<job name>-<job id>``)
JOB, JOB_LOGS = {"SLURM_JOB_NAME": "xppo", "SLURM_JOB_ID": "7"}, "logs/xppo-7"


def start_job(folder: pathlib.Path) -> subprocess.Popen:
    """A start of the job: resume.md's script run by bash, in a session of its own (a SIGKILL takes the whole job)."""
    path = f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"  # (the script's `python`: this one)
    return subprocess.Popen(
        ["bash", "xppo.sbatch", *COMMAND, "-tb", str(folder / "tb")],
        cwd=folder,
        env={**os.environ, **JOB, "PATH": path},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


@pytest.mark.slow
def test_a_job_stopped_by_sigterm_then_killed_resumes_bit_for_bit(uninterrupted, tmp_path):
    """
    The main job under resume.md's Slurm script, run as it is written there: TERM to the batch shell (Slurm's
    ``--signal=B:TERM``) reaches the run, which writes a checkpoint at the next rollout boundary and exits 0, and so
    does the shell. Each requeued start continues the job's own run (not another run of the algorithm) and is killed
    with SIGKILL at 5 random moments; the last one ends as the uninterrupted run does, bit for bit, TensorBoard's run
    continued.
    """
    (tmp_path / "xppo.sbatch").write_text(slurm_script())
    decoy = tmp_path / "logs" / "xppo" / "CartPole-v1_1"  # another run of the algorithm, where a bare command writes
    decoy.mkdir(parents=True)
    rng = random.Random(0)
    shell = start_job(tmp_path)
    wait_for_progress(shell, tmp_path, [], JOB_LOGS)
    shell.send_signal(signal.SIGTERM)  # to the batch shell only
    output, _ = shell.communicate(timeout=120)
    assert shell.returncode == 0, output[-3000:]
    assert "SIGTERM: stopped at a rollout boundary" in output
    assert not (tmp_path / JOB_LOGS / RUN / "CartPole-v1.zip").exists()  # no final model: the run is not over
    for _ in range(KILLS):
        past = checkpoints(tmp_path, JOB_LOGS)
        process = start_job(tmp_path)
        wait_for_progress(process, tmp_path, past, JOB_LOGS)
        time.sleep(rng.uniform(0, 0.3))
        kill(process)
    done = start_job(tmp_path)
    output, _ = done.communicate(timeout=300)
    assert done.returncode == 0 and f"Resuming {JOB_LOGS}/{RUN}" in output, output[-3000:]
    assert_same_outcome(outcome(tmp_path, JOB_LOGS), outcome(uninterrupted))
    assert sorted(path.name for path in (tmp_path / JOB_LOGS / "xppo").iterdir()) == ["CartPole-v1_1"]  # no new run
    assert not any(decoy.iterdir())
    runs, steps = tensorboard_steps(tmp_path)
    assert (runs, steps) == tensorboard_steps(uninterrupted)  # one TensorBoard run, continued at the right steps
    assert runs == ["XPPO_1"]


@pytest.fixture(scope="module")
def uninterrupted_on_ranks(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    folder = tmp_path_factory.mktemp("uninterrupted_on_ranks")
    subprocess.run(command(folder, ranks=True), cwd=folder, check=True, capture_output=True, timeout=300)
    return folder


@pytest.mark.slow
def test_a_run_on_two_ranks_stopped_by_sigterm_resumes_bit_for_bit(uninterrupted_on_ranks, tmp_path):
    """
    The launcher passes SIGTERM on to both ranks; they agree on a boundary, each writes its checkpoint there, and the
    run resumes on 2 ranks (SIGKILL of 2 ranks, 5 times: tests/test_resume_ranks.py).
    """
    process = start(tmp_path, ranks=True)
    wait_for_progress(process, tmp_path, [])
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=120)
    assert "SIGTERM: stopped at a rollout boundary" in output, output[-3000:]
    run = tmp_path / "logs" / RUN / "resume"
    assert [p.name for p in (run / "rank-0").iterdir()] == [p.name for p in (run / "rank-1").iterdir()]  # one boundary
    done = subprocess.run(command(tmp_path, "--resume", ranks=True), cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert_same_outcome(outcome(tmp_path), outcome(uninterrupted_on_ranks))


def test_resume_refuses_a_command_that_is_not_the_runs(tmp_path, capsys):
    """A changed hyperparameter, or another --seed than the run's: one line naming each, exit status 2."""
    run = ["--env", "CartPole-v1", "-n", "512", "--eval-freq", "-1", "--checkpoint-rollouts", "1", "--no-progress"]
    train_main([*run, "--verbose", "0", "-f", str(tmp_path), "--seed", "3"])
    other = [*run, "--verbose", "0", "-f", str(tmp_path), "--resume"]
    other[other.index("512")] = "1024"
    refused_by_command(capsys, train_main, other, r"not the run's .*n_timesteps: 512 then, 1024 now")
    seeded = [*run, "--verbose", "0", "-f", str(tmp_path), "--resume", "--seed", "4"]
    refused_by_command(capsys, train_main, seeded, r"not the run's .*seed: 3 then, 4 now")
    args = load_zoo_yaml(tmp_path / "xppo" / "CartPole-v1_1" / "CartPole-v1" / "args.yml")
    assert args["seed"] == 3  # (not rewritten by the refused command)
    with pytest.raises(ValueError, match="seed: 3 then, 4 now"):  # --debug: the error itself, with its traceback
        train_main([*seeded, "--debug"])


def test_resume_names_what_is_missing(tmp_path, capsys):
    refused = functools.partial(refused_by_command, capsys, train_main)
    refused(["--env", "CartPole-v1", "-f", str(tmp_path), "--resume"], "no run of xppo on CartPole-v1")
    (tmp_path / "xppo" / "CartPole-v1_1").mkdir(parents=True)
    refused(["--env", "CartPole-v1", "-f", str(tmp_path), "--resume"], "has no resumable checkpoint")
    refused(["--env", "CartPole-v1", "--resume", str(tmp_path / "nowhere")], "is neither a run folder nor a checkpoint")
    (tmp_path / "notes.txt").write_text("")
    refused(["--env", "CartPole-v1", "--resume", str(tmp_path / "notes.txt")], "is not a checkpoint of a run")
    for flag in (["-optimize"], ["-i", "agent.zip"]):
        refused(["--env", "CartPole-v1", "-f", str(tmp_path), *flag, "--resume"], "not with -optimize nor -i")


def test_resume_arguments():
    plan, rest = split_resume_args(["--env", "X", "--resume", "--checkpoint-rollouts=3"])
    assert (plan.resume, plan.minutes, plan.rollouts, rest) == (LATEST, 5.0, 3, ["--env", "X"])
    plan, rest = split_resume_args(["--resume", "logs/xppo/X_2", "--checkpoint-minutes", "0"])
    assert (plan.resume, plan.minutes, rest) == ("logs/xppo/X_2", None, [])
    assert split_resume_args([])[0] == ResumePlan()
    assert ResumePlan(minutes=None).describe() == "on SIGTERM"
    with pytest.raises(ValueError, match="--checkpoint-minutes must be >= 0"):
        split_resume_args(["--checkpoint-minutes", "-1"])
    with pytest.raises(ValueError, match="--checkpoint-rollouts >= 1"):
        split_resume_args(["--checkpoint-rollouts", "0"])
    assert not split_resume_args(["--resume", "--inexact"])[0].exact
    with pytest.raises(ValueError, match="--inexact is an option of --resume"):
        split_resume_args(["--inexact"])


def test_envs_that_cannot_be_replayed_resume_inexactly(tmp_path):
    """A run on EnvPool's envs (no ActionRecorder): --resume names --inexact, which resumes with fresh envs."""
    pytest.importorskip("envpool")
    args = [*("--env", "CartPole-v1", "-n", "1024", "--eval-freq", "-1", "--checkpoint-rollouts", "2", "--no-progress")]
    args += ["--verbose", "0", "-f", str(tmp_path), "--vec-env", "envpool"]
    train_main(args)
    with pytest.raises(ValueError, match=r"env 0 has no ActionRecorder.*add --inexact to --resume"):
        train_main([*args, "--resume"])
    with pytest.warns(UserWarning, match="exact=False: the envs are reset afresh"):
        train_main([*args, "--resume", "--inexact"])
    assert (tmp_path / RUN / "CartPole-v1.zip").is_file()


def test_use_sde_and_an_env_wrapper_resume_bit_for_bit(tmp_path):
    """
    Pendulum-v1's entry (``use_sde``, ``sde_sample_freq: 4``) with an ``env_wrapper`` that keeps a state above the
    Monitor: the finished run, resumed from its last checkpoint, ends with the same model and Monitor episodes.
    """
    args = [*("--env", "Pendulum-v1", "-n", "4096", "--seed", "2", "--eval-freq", "-1", "--checkpoint-rollouts", "1")]
    args += [*("--no-progress", "--verbose", "0", "-f", str(tmp_path), "-params", "n_steps:256", "n_epochs:2")]
    args += ["env_wrapper:'sb3_contrib.common.wrappers.TimeFeatureWrapper'"]
    run = tmp_path / "xppo" / "Pendulum-v1_1"

    def finished() -> tuple[dict[str, th.Tensor], list[pd.DataFrame]]:
        with zipfile.ZipFile(run / "Pendulum-v1.zip") as archive:
            policy = th.load(io.BytesIO(archive.read("policy.pth")), weights_only=True)
        return policy, [pd.read_csv(run / f"{i}.monitor.csv", skiprows=1)[["r", "l"]] for i in range(4)]

    train_main(args)
    policy, monitors = finished()
    assert sum(len(m) for m in monitors) == 20  # (4 envs of 1024 steps, 200-step episodes)
    train_main([*args, "--resume"])  # (from the checkpoint before the last rollout, in place)
    resumed_policy, resumed_monitors = finished()
    assert all(th.equal(policy[k], resumed_policy[k]) for k in policy)
    assert all(a.equals(b) for a, b in zip(monitors, resumed_monitors, strict=True))
    assert not (tmp_path / "xppo" / "Pendulum-v1_2").exists()
