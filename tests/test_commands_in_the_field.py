"""
What a user meets in the field (docs/guide/resume.md, docs/guide/rl_zoo.md): envs whose ``reset()`` takes no
``options``; a VecNormalize of other settings on resume; a corrupt newest checkpoint under ``--resume`` and
``--resume FILE``; a full disk; two processes writing one checkpoint folder; the commands' ``--help``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import zipfile

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from sb3_xppo import XPPO, ResumableCheckpoint
from sb3_xppo.resume import checkpoints
from sb3_xppo.resume.files import FolderInUseError, FolderLock
from sb3_xppo.train import main as train_main
from sb3_xppo.vec_env import make_vec_env

SMALL = dict(n_steps=16, batch_size=16, n_epochs=1, policy_kwargs=dict(net_arch=[8]), device="cpu", seed=0)


class SeedOnlyEnv(gym.Env):
    """An env of the wild: its ``reset()`` takes a seed and no ``options`` (SB3's test_subclassed_space_env)."""

    observation_space = spaces.Box(-1, 1, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, seed=None):  # (no options: the point)
        super().reset(seed=seed)
        self.steps = 0
        return self.np_random.uniform(-1, 1, 2).astype(np.float32), {}

    def step(self, action):
        self.steps += 1
        return self.np_random.uniform(-1, 1, 2).astype(np.float32), 1.0, False, self.steps >= 10, {}


def test_an_env_whose_reset_takes_no_options(tmp_path):
    """Trained on the package's lean env (each env recorded for replay) and resumed: options are passed where given."""
    model = XPPO("MlpPolicy", make_vec_env(SeedOnlyEnv, n_envs=2, seed=0), **SMALL)
    model.learn(64, callback=ResumableCheckpoint(tmp_path, every_rollouts=1))
    resumed = XPPO.resume(tmp_path, env=make_vec_env(SeedOnlyEnv, n_envs=2, seed=0))
    assert resumed.learn(64, callback=ResumableCheckpoint(tmp_path / "again")).num_timesteps == 64


def test_resume_compares_the_vec_normalize_settings(tmp_path):
    def env(**settings) -> VecNormalize:
        return VecNormalize(make_vec_env("CartPole-v1", n_envs=2, seed=0), **settings)

    XPPO("MlpPolicy", env(), **SMALL).learn(64, callback=ResumableCheckpoint(tmp_path, every_rollouts=1))
    with pytest.raises(
        ValueError, match=r"other settings than the run's \(norm_reward: True in the checkpoint, False in the env"
    ):
        XPPO.resume(tmp_path, env=env(norm_reward=False))
    with pytest.raises(
        ValueError,
        match=r"clip_obs: 10\.0 in the checkpoint, 1\.0 in the env given; gamma: 0\.99 in the checkpoint, 0\.9 in the env",
    ):
        XPPO.resume(tmp_path, env=env(gamma=0.9, clip_obs=1.0))
    XPPO.resume(tmp_path, env=env())  # the same settings: resumes


def small_run(folder, *extra: str) -> list[str]:
    run = ["--env", "CartPole-v1", "-n", "768", "--seed", "3", "--eval-freq", "-1", "--no-progress", "--verbose", "0"]
    return [
        *run,
        "-params",
        "n_envs:2",
        "n_steps:64",
        "batch_size:64",
        "--checkpoint-rollouts",
        "1",
        "-f",
        str(folder),
        *extra,
    ]


def test_resume_goes_on_from_the_newest_checkpoint_that_verifies(tmp_path, capsys):
    train_main(small_run(tmp_path))
    folder = tmp_path / "xppo" / "CartPole-v1_1" / "resume"
    older, newest = checkpoints(folder)[-2:]
    newest.write_bytes(newest.read_bytes()[:200])  # truncated by a crash
    with pytest.warns(
        UserWarning, match=rf"skipped 1 newer checkpoint.*{newest.name} is truncated or corrupt.*going on from .*{older.name}"
    ):
        train_main(small_run(tmp_path, "--resume"))
    assert "Resuming" in capsys.readouterr().out
    # --resume FILE: the checkpoint named, whichever is newest
    named = checkpoints(folder)[0]
    train_main(small_run(tmp_path, "--resume", str(named)))
    assert f"at {int(named.name.removeprefix('resume-').removesuffix('.ckpt'))} steps" in capsys.readouterr().out


def test_a_failed_checkpoint_write_warns_and_training_goes_on(tmp_path):
    """A file-size limit (a full disk) makes every write fail: each says so, training ends, the older checkpoints stay."""
    model = XPPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=0), **SMALL)
    model.learn(64, callback=ResumableCheckpoint(tmp_path, every_rollouts=1))
    before = checkpoints(tmp_path)
    script = textwrap.dedent(
        f"""
        import resource, signal, warnings
        from sb3_xppo import XPPO, ResumableCheckpoint
        from sb3_xppo.vec_env import make_vec_env
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # (a write past the limit fails with EFBIG)
        model = XPPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=0), n_steps=16, batch_size=16, n_epochs=1)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            model.learn(128, callback=ResumableCheckpoint({str(tmp_path)!r}, every_rollouts=1))
        print(model.num_timesteps, sum("could not write a checkpoint" in str(w.message) for w in said))
        print([str(w.message) for w in said if "could not write" in str(w.message)][0])
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    steps, failures = done.stdout.splitlines()[0].split()
    assert steps == "128" and int(failures) == 3  # (one per boundary: after each of the first 3 rollouts)
    assert f"in {tmp_path} (OSError: [Errno 27] File too large" in done.stdout and "training goes on" in done.stdout
    assert checkpoints(tmp_path) == before and not list(tmp_path.glob(".*.tmp"))  # the older ones kept, no half file


def test_two_writers_of_one_folder(tmp_path):
    """A second process writing checkpoints into a folder another process writes: refused by name, nothing written."""
    hold = f"FolderLock({str(tmp_path)!r}).acquire(); print('held', flush=True); time.sleep(60)"
    code = f"import time; from sb3_xppo.resume.files import FolderLock; {hold}"
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        model = XPPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=0), **SMALL)
        with pytest.raises(FolderInUseError, match=rf"{tmp_path} is being written by another process \(pid {holder.pid}\)"):
            model.learn(64, callback=ResumableCheckpoint(tmp_path, every_rollouts=1))
        assert not checkpoints(tmp_path)
    finally:
        holder.kill()
        holder.wait()
    lock = FolderLock(tmp_path)  # the holder died: the operating system released its lock
    lock.acquire()
    lock.release()


def test_the_temporary_file_is_named_by_its_writer(tmp_path, monkeypatch):
    """Two processes never share a temporary name (the lock aside): it carries the writer's process id."""
    import os

    from sb3_xppo.resume.files import write_checkpoint

    seen = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (seen.append(str(src)), real_replace(src, dst)))
    write_checkpoint(tmp_path, "resume-000000000001.ckpt", {"a": b"1"}, keep=2)
    assert seen == [str(tmp_path / f".resume-000000000001.ckpt.{os.getpid()}.tmp")]
    with zipfile.ZipFile(tmp_path / "resume-000000000001.ckpt") as archive:
        assert archive.read("a") == b"1"


@pytest.mark.parametrize("command", ["train", "enjoy"])
def test_help_lists_the_packages_flags(command, capsys):
    """``--help`` lists every flag the package adds with its default, and --vec-env's choices as the command takes
    them (not rl-zoo3's)."""
    from sb3_xppo import enjoy, train

    main = {"train": train.main, "enjoy": enjoy.main}[command]
    main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    flags = {
        "train": ["--resume", "--checkpoint-minutes", "--checkpoint-rollouts", "--inexact", "--distributed"],
        "enjoy": ["--record-video"],
    }[command]
    for flag in [*flags, "--trust-code", "--debug"]:
        assert f" {flag}" in text, flag
    if command == "train":
        assert "--vec-env {lean,dummy,subproc,envpool,ray}" in text and "{dummy,subproc}" not in text
        assert "(default: 5; 0: none by time)" in text and "--no-progress" in text
    assert "rl-zoo3's flags" in text and "xppo_mask_lstm" in text


def test_a_dummy_vec_env_of_seed_only_envs_resumes(tmp_path):
    """A DummyVecEnv of the user's own: its envs reached and recorded; reset without options on replay too."""
    env = DummyVecEnv([SeedOnlyEnv, SeedOnlyEnv])
    model = XPPO("MlpPolicy", env, **SMALL)
    model.learn(64, callback=ResumableCheckpoint(tmp_path, every_rollouts=1))
    resumed = XPPO.resume(tmp_path, env=DummyVecEnv([SeedOnlyEnv, SeedOnlyEnv]))
    assert resumed.num_timesteps == 32  # (the boundary before the second of the two rollouts)
