"""``python -m sb3_xppo.dagger_distill``: checkpoint to checkpoint, loading with the student's own class."""

import subprocess
import sys

import numpy as np
import pytest
from stable_baselines3 import A2C, PPO, SAC, TD3
from stable_baselines3.common.env_util import make_vec_env
from test_dagger_callback import _agreement, _cartpole_obs, cartpole_teacher

from sb3_xppo.dagger_distill.checkpoints import load_sb3_model
from sb3_xppo.distill import main


@pytest.mark.slow
def test_fresh_student_from_the_command_line(tmp_path, capsys):
    cartpole_teacher().save(tmp_path / "teacher.zip")
    out = tmp_path / "student.zip"
    # the teacher's schedules are lambdas, code of the user's own pickled by value: it loads with --trust-code
    argv = ["--teacher", str(tmp_path / "teacher.zip"), "--student-algo", "ppo", "--env", "CartPole-v1", "--trust-code"]
    argv += ["--timesteps", "2048", "--out", str(out), "--eval-episodes", "2", "--n-envs", "4", "--seed", "1"]
    assert main(argv) == 0
    printed = capsys.readouterr()
    assert "DAgger" in printed.err  # the progress bar
    lines = {line.split()[0]: line.split() for line in printed.out.splitlines() if line.strip()}
    assert {"teacher", "student"} <= set(lines)
    teacher_return, student_return = float(lines["teacher"][1]), float(lines["student"][1])
    assert student_return >= 0.9 * teacher_return
    # OUT is a plain PPO checkpoint that stock SB3 loads and continues
    student = PPO.load(out, env=make_vec_env("CartPole-v1", n_envs=2), device="cpu")
    assert student.num_timesteps == 2048
    assert _agreement(student, cartpole_teacher(), _cartpole_obs()) > 0.9
    student.learn(128, reset_num_timesteps=False)


@pytest.mark.slow
def test_into_an_existing_checkpoint_keeps_its_class(tmp_path, capsys):
    cartpole_teacher().save(tmp_path / "teacher.zip")
    A2C("MlpPolicy", "CartPole-v1", seed=0, device="cpu").save(tmp_path / "a2c.zip")
    argv = ["--teacher", str(tmp_path / "teacher.zip"), "--student", str(tmp_path / "a2c.zip"), "--env", "CartPole-v1"]
    argv += ["--trust-code"]  # the teacher's lambda schedules
    argv += ["--timesteps", "1024", "--out", str(tmp_path / "out.zip"), "--eval-episodes", "0", "--no-progress-bar"]
    assert main(argv) == 0
    assert capsys.readouterr().err == ""
    student = A2C.load(tmp_path / "out.zip", device="cpu")
    assert type(load_sb3_model(tmp_path / "out.zip")) is A2C
    assert _agreement(student, cartpole_teacher(), _cartpole_obs()) > 0.8


def test_sac_student_with_a_td3_teacher(tmp_path):
    TD3("MlpPolicy", "Pendulum-v1", seed=0, device="cpu", policy_kwargs=dict(net_arch=[16])).save(tmp_path / "td3.zip")
    argv = ["--teacher", str(tmp_path / "td3.zip"), "--student-algo", "sac", "--env", "Pendulum-v1", "--n-envs", "2"]
    argv += ["--timesteps", "128", "--out", str(tmp_path / "sac.zip"), "--eval-episodes", "1", "--no-progress-bar"]
    argv += ["--policy-kwargs", "dict(net_arch=[16])", "--loss", "mse"]
    assert main(argv) == 0
    student = SAC.load(tmp_path / "sac.zip", device="cpu")
    assert student.policy.actor.latent_pi[0].out_features == 16
    assert np.all(np.abs(student.predict(np.zeros((3, 3), dtype=np.float32))[0]) <= 2)


def test_usage_errors(tmp_path, capsys):
    PPO("MlpPolicy", "CartPole-v1", device="cpu", policy_kwargs=dict(net_arch=[16])).save(tmp_path / "teacher.zip")
    base = ["--teacher", str(tmp_path / "teacher.zip"), "--timesteps", "64", "--out", str(tmp_path / "out.zip")]
    assert main([*base, "--student-algo", "ppo", "--env", "Acrobot-v1"]) == 2
    assert "the teacher acts in Discrete(2) but the student in Discrete(3)" in capsys.readouterr().err
    assert main([*base, "--env", "CartPole-v1"]) == 2
    assert "pass --student" in capsys.readouterr().err
    assert main([*base, "--student-algo", "nope", "--env", "CartPole-v1"]) == 2
    assert "unknown algorithm 'nope'" in capsys.readouterr().err
    assert main([*base, "--student-algo", "ppo", "--env", "CartPole-v1", "--timesteps", "0"]) == 2
    assert "--timesteps must be >= 1" in capsys.readouterr().err
    assert not (tmp_path / "out.zip").exists()


@pytest.mark.parametrize("module", ["sb3_xppo.distill", "sb3_xppo.dagger_distill"])
def test_module_entry_point(module):
    done = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "--teacher" in done.stdout and "--student-algo" in done.stdout
