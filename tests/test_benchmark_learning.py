"""The side-by-side learning benchmark (benchmarks/learning.py): contender names, rl-zoo3 setup, cache, end to end."""

import argparse
import glob
import json
import os
import subprocess
import sys
from dataclasses import replace

import harness.contenders
import harness.layout
import harness.reports
import harness.runs
import harness.zoo
import learning
import numpy as np
import pytest
from harness.layout import RESULTS
from rl_zoo3.utils import SimpleLinearSchedule
from stable_baselines3.common.vec_env import VecNormalize

from sb3_xppo.zoo import CONFIG_PATH

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "learning.py")


def test_parse_contender():
    assert harness.contenders.parse_contender("ppo") == harness.contenders.Contender("ppo", "ppo")
    assert harness.contenders.parse_contender("xppo").kwargs == {}
    c = harness.contenders.parse_contender("xppo-asymmetric_spo-improved-rollout+dual3+delight0.5+lrc20+cr0.2:0.28")
    assert c.algo == "xppo"
    assert c.kwargs == dict(
        actor_loss="asymmetric_spo",
        value_loss="improved",
        normalize_advantage="rollout",
        dual_clip=3.0,
        delightful=True,
        delight_temp=0.5,
        log_ratio_clamp=20.0,
        clip_range=(0.2, 0.28),
    )
    assert harness.contenders.parse_contender("xppo-clip-mse-none").kwargs["normalize_advantage"] is False
    assert harness.contenders.parse_contender("xppo-spo-mse-mb+delight").kwargs == dict(
        actor_loss="spo", value_loss="mse", normalize_advantage="minibatch", delightful=True
    )


def test_parse_contender_with_overrides():
    c = harness.contenders.parse_contender("xppo-spo-mse-mb+dual3@n_steps=256@n_epochs=10@learning_rate=1e-3")
    assert c.algo == "xppo" and c.name == "xppo-spo-mse-mb+dual3@n_steps=256@n_epochs=10@learning_rate=1e-3"
    assert c.kwargs == dict(
        actor_loss="spo", value_loss="mse", normalize_advantage="minibatch", dual_clip=3.0, n_steps=256, n_epochs=10,
        learning_rate=1e-3,
    )  # fmt: skip
    assert harness.contenders.parse_contender("ppo@batch_size=128") == harness.contenders.Contender(
        "ppo@batch_size=128", "ppo", dict(batch_size=128)
    )


@pytest.fixture
def built_xppo(monkeypatch):
    """The keywords the benchmark builds XPPO with."""
    built = {}
    real_xppo = harness.runs.XPPO

    def spy(**kwargs):
        built.update(kwargs)
        return real_xppo(**kwargs)

    monkeypatch.setattr(harness.runs, "XPPO", spy)
    return built


def test_overrides_reach_the_model(built_xppo):
    built = built_xppo
    task = harness.runs.Task(
        "CartPole-v1", 256, harness.contenders.parse_contender("xppo@n_steps=16@n_epochs=2"), 0, 1, 1, 1, 0.2
    )
    run = harness.runs.run_task(task)
    assert built["n_steps"] == 16 and built["n_epochs"] == 2 and built["batch_size"] == 256  # the rest is the zoo's
    assert run["budget"] == 256
    # train() is timed apart from collection: two rollouts of 128, each followed by a train() call
    assert 0 < run["train_seconds"] < run["learn_seconds"]
    assert harness.reports.train_cost(2.0, 4.0) == "2 (0.50x)" and harness.reports.train_cost(None, 4.0) == "-"
    assert harness.reports.train_cost(3.0, None) == "3"


#: a run killed with SIGKILL in its own process, which checkpoints at every rollout boundary
KILLED_RUN = """
import pickle, sys
import torch
from harness.runs import train_and_evaluate
torch.set_num_threads(1)  # (as the pool's workers)
train_and_evaluate(pickle.loads(bytes.fromhex(sys.argv[1])), sys.argv[2], every_seconds=1e-6)
"""


@pytest.mark.slow
def test_a_campaign_run_killed_with_sigkill_resumes_to_the_same_record(tmp_path):
    # Pendulum's zoo entry (use_sde, VecNormalize, 4 envs) with its evaluations: killed after a few checkpoints, the
    # campaign's next start resumes the run from them, and its record is the uninterrupted run's
    import pickle
    import shutil
    import signal
    import time

    contender = harness.contenders.parse_contender("xppo@n_steps=32@n_epochs=2")
    task = harness.runs.Task("Pendulum-v1", 32 * 4 * 24, contender, 0, 4, 1, 2, 0.2)
    assert harness.runs.resumable(task)
    reference = harness.runs.run_task(task)  # (one torch thread, as the pool's runs)
    partial = os.path.join(harness.layout.partial_runs(str(tmp_path)), f"{task.key()}-{harness.runs.fingerprint(task)}")
    benchmarks = os.path.dirname(SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([benchmarks, os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, "-c", KILLED_RUN, pickle.dumps(task).hex(), partial], env=env)
    deadline = time.monotonic() + 120
    while len(glob.glob(os.path.join(partial, "resume-*.ckpt"))) < 2:
        assert child.poll() is None and time.monotonic() < deadline, "the run ended before it was killed"
        time.sleep(0.005)
    child.send_signal(signal.SIGKILL)
    child.wait()
    shutil.copytree(partial, tmp_path / "kept")
    harness.runs.run_all([task], str(tmp_path), workers=1, time_limit_s=None)  # (the pool's runner: it resumes)
    with open(task.path(str(tmp_path))) as f:
        resumed = json.load(f)
    assert resumed["resumed_at"] and 0 < resumed["resumed_at"][0] < task.budget and reference["resumed_at"] is None
    for key in ("eval_steps", "eval_means", "eval_stds", "final_returns", "train_logs"):
        assert resumed[key] == reference[key], key
    assert not os.path.exists(partial)  # the run is in the cache: its checkpoints are gone
    # checkpoints of code that trains differently (another fingerprint in the folder's name) are not resumed
    os.remove(task.path(str(tmp_path)))
    shutil.copytree(tmp_path / "kept", os.path.join(os.path.dirname(partial), f"{task.key()}-{'0' * 16}"))
    harness.runs.run_all([task], str(tmp_path), workers=1, time_limit_s=None)
    with open(task.path(str(tmp_path))) as f:
        afresh = json.load(f)
    assert afresh["resumed_at"] is None and afresh["eval_means"] == reference["eval_means"]
    assert os.listdir(os.path.dirname(partial)) == []


def test_env_key_overrides_reach_the_envs(built_xppo):
    """normalize and n_envs are the zoo entry's: they replace the yml's before rl-zoo3 builds the envs."""
    built = built_xppo
    name = "xppo@n_envs=2@normalize={'norm_obs':False,'norm_reward':True}@n_steps=16"
    run = harness.runs.run_task(
        harness.runs.Task("CartPole-v1", 64, harness.contenders.parse_contender(name), 0, 1, 1, 1, 0.2)
    )
    env = built["env"]
    assert isinstance(env, VecNormalize) and env.norm_reward and not env.norm_obs and env.num_envs == 2
    assert "normalize" not in built and "n_envs" not in built and built["n_steps"] == 16
    assert run["kwargs"]["normalize"] == {"norm_obs": False, "norm_reward": True}


def test_schedule_overrides_are_rl_zoo3s(built_xppo):
    """A quoted 'lin_<x>' goes through the zoo entry and becomes rl-zoo3's linear schedule; a float stays constant."""
    name = "xppo@n_steps=16@learning_rate='lin_1e-3'@clip_range=0.1"
    harness.runs.run_task(harness.runs.Task("CartPole-v1", 128, harness.contenders.parse_contender(name), 0, 1, 1, 1, 0.2))
    assert isinstance(built_xppo["learning_rate"], SimpleLinearSchedule)
    assert built_xppo["learning_rate"](0.5) == pytest.approx(5e-4) and built_xppo["clip_range"] == 0.1


def test_policy_options_merge_into_the_zoo_policy_kwargs(built_xppo):
    """@rpo_alpha and friends join the entry's policy_kwargs (the zoo's net_arch kept); hl_gauss gets no clip_range_vf."""
    name = "xppo@n_steps=64@rpo_alpha=0.3@simba='critic'@value_loss='hl_gauss'@normalize_values=True"
    harness.runs.run_task(harness.runs.Task("Pendulum-v1", 256, harness.contenders.parse_contender(name), 0, 1, 1, 1, 0.2))
    assert built_xppo["policy_kwargs"] == dict(rpo_alpha=0.3, simba="critic")
    assert "clip_range_vf" not in built_xppo and built_xppo["value_loss"] == "hl_gauss"
    assert harness.zoo.zoo_entry_of(None, "Hopper-v5")["policy_kwargs"].startswith("dict(")  # rl-zoo3's -v4 entry


def test_a_mujoco_task_runs_on_rl_zoo3s_entry(built_xppo):
    """Hopper-v5 (gymnasium[mujoco], a real MuJoCo simulation) on rl-zoo3's Hopper entry: normalized envs, its net."""
    name = "xppo@n_steps=64@batch_size=32@rpo_alpha=0.5"
    run = harness.runs.run_task(harness.runs.Task("Hopper-v5", 128, harness.contenders.parse_contender(name), 0, 1, 1, 1, 0.2))
    assert isinstance(built_xppo["env"], VecNormalize) and built_xppo["env"].observation_space.shape == (11,)
    assert built_xppo["policy_kwargs"]["rpo_alpha"] == 0.5 and "net_arch" in built_xppo["policy_kwargs"]
    assert run["budget"] == 128 and np.isfinite(run["final_returns"]).all() and run["zoo_entry"]["gamma"] == "0.999"


@pytest.mark.parametrize(
    "override",
    [
        "n_steps",
        "env=Pong",
        "learning_rate='cos_1e-3'",
        "clip_range='lin_x'",
        "n_timesteps=1000",
        "2x=3",
        "learning_rate=lin_1e-3",
    ],
)
def test_bad_override(override):
    with pytest.raises(ValueError, match="bad override"):
        harness.contenders.parse_contender(f"ppo@{override}")


@pytest.mark.parametrize("name", ["a2c", "xppo-clip-mse", "xppo-foo-mse-mb", "xppo-clip-huber-mb", "xppo-clip-mse-batch"])
def test_unknown_contender(name):
    with pytest.raises(ValueError, match="unknown contender"):
        harness.contenders.parse_contender(name)


def test_unknown_toggle():
    with pytest.raises(ValueError, match="unknown toggle 'triple'"):
        harness.contenders.parse_contender("xppo-clip-mse-mb+triple")


def test_contender_sets():
    grid = [c.name for c in harness.contenders.expand_contenders("grid")]
    # PPO plus the 3 x 3 grid, without the cell that is PPO itself
    assert grid[0] == "ppo" and len(grid) == 9 and "xppo-clip-mse-mb" not in grid
    assert {"xppo-spo-clipped-mb", "xppo-asymmetric_spo-improved-mb", "xppo-clip-improved-mb"} <= set(grid)
    assert len(harness.contenders.expand_contenders("grid-rollout")) == 10
    toggles = [c.name for c in harness.contenders.expand_contenders("defaults,toggles:xppo-spo-mse-mb,ppo")]
    assert toggles == [
        "ppo",
        "xppo",
        "xppo-spo-mse-mb",
        "xppo-spo-mse-mb+dual3",
        "xppo-spo-mse-mb+delight",
        "xppo-spo-mse-mb+dual3+delight",
    ]


def test_recommended_takes_the_presets_options_for_the_env(built_xppo):
    """``xppo-recommended`` runs with xppo_recommended's options for the env; they are in its cache key."""
    assert [c.name for c in harness.contenders.expand_contenders("recommended")] == ["ppo", "xppo-recommended"]
    contender = harness.contenders.parse_contender("xppo-recommended@n_steps=64")
    box = harness.contenders.for_env(contender, "Pendulum-v1")
    assert box.kwargs == dict(normalize_values=True, n_steps=64)
    assert harness.contenders.for_env(contender, "CartPole-v1").kwargs == dict(normalize_values=True, n_steps=64)
    assert harness.contenders.for_env(harness.contenders.parse_contender("xppo@n_steps=64"), "Pendulum-v1").kwargs == dict(
        n_steps=64
    )
    # a policy option given to the preset becomes an override (merged into the entry's policy_kwargs)
    with_rpo = harness.contenders.for_env(harness.contenders.parse_contender("xppo-recommended@rpo_alpha=0.5"), "Pendulum-v1")
    assert with_rpo.kwargs == dict(normalize_values=True, rpo_alpha=0.5)
    task = harness.runs.Task("Pendulum-v1", 128, with_rpo, 0, 1, 1, 1, 0.2)
    assert task.key() != harness.runs.Task("Pendulum-v1", 128, box, 0, 1, 1, 1, 0.2).key()
    # the preset's options are in the key
    assert (
        harness.runs.Task("Pendulum-v1", 128, box, 0, 1, 1, 1, 0.2).key()
        != harness.runs.Task("Pendulum-v1", 128, contender, 0, 1, 1, 1, 0.2).key()
    )
    harness.runs.run_task(task)
    assert built_xppo["normalize_values"] and built_xppo["policy_kwargs"]["rpo_alpha"] == 0.5


def test_commas_inside_an_override_do_not_split():
    spec = "ppo,xppo@normalize={'norm_obs':False,'norm_reward':True}@policy_kwargs={'net_arch':[8,8]},xppo-spo-mse-mb"
    contenders = harness.contenders.expand_contenders(spec)
    assert [c.algo for c in contenders] == ["ppo", "xppo", "xppo"]
    assert contenders[1].kwargs == {
        "normalize": {"norm_obs": False, "norm_reward": True},
        "policy_kwargs": {"net_arch": [8, 8]},
    }


def test_zoo_setup_is_rl_zoo3s(tmp_path):
    """Hyperparameters and envs come from rl-zoo3's ppo.yml, turned into objects by its ExperimentManager."""
    assert harness.zoo.zoo_budget("CartPole-v1") == 100_000
    hyperparams, env, eval_env, callbacks, entry = harness.zoo.zoo_setup("CartPole-v1", 3, 1000, str(tmp_path))
    assert callbacks == []
    assert entry["learning_rate"] == "lin_0.001" and entry["n_envs"] == 8
    assert isinstance(hyperparams["learning_rate"], SimpleLinearSchedule)
    assert hyperparams["learning_rate"](0.5) == pytest.approx(0.0005)
    assert hyperparams["n_steps"] == 32 and hyperparams["policy"] == "MlpPolicy"
    assert "n_envs" not in hyperparams and "n_timesteps" not in hyperparams
    assert env.num_envs == 8 and eval_env.num_envs == 1
    # Acrobot's entry normalizes: a VecNormalize for training, one without reward normalization for evaluation
    _, env, eval_env, _, _ = harness.zoo.zoo_setup("Acrobot-v1", 0, 1000, str(tmp_path))
    assert isinstance(env, VecNormalize) and env.norm_reward and env.gamma == 0.99
    assert isinstance(eval_env, VecNormalize) and not eval_env.norm_reward and not eval_env.training


def test_xppo_zoo_reads_our_own_config(tmp_path):
    """``xppo-zoo`` trains what ``python -m sb3_xppo.train`` would: XPPO with its entry in zoo_configs/xppo.yml."""
    contender = harness.contenders.parse_contender("xppo-zoo")
    assert contender.algo == "xppo" and contender.kwargs == {} and contender.config == str(CONFIG_PATH)
    config = tmp_path / "xppo.yml"
    config.write_text("CartPole-v1:\n  n_envs: 2\n  n_timesteps: 1000\n  policy: MlpPolicy\n  n_steps: 8\n  actor_loss: spo\n")
    hyperparams, env, _, _, _ = harness.zoo.zoo_setup("CartPole-v1", 0, 1000, str(tmp_path), config=str(config))
    assert hyperparams == {"policy": "MlpPolicy", "n_steps": 8, "actor_loss": "spo"} and env.num_envs == 2
    # the cache key follows the entry: a run from an older entry is not reused
    task = harness.runs.Task(
        "CartPole-v1", 1000, harness.contenders.Contender("xppo-zoo", "xppo", config=str(config)), 0, 2, 2, 3, 0.2
    )
    key = task.key()
    config.write_text(config.read_text().replace("n_steps: 8", "n_steps: 16"))
    assert task.key() != key


def test_cache_key(tmp_path):
    contender = harness.contenders.parse_contender("xppo-spo-mse-mb")
    task = harness.runs.Task("CartPole-v1", 1000, contender, 0, 2, 2, 3, 0.2)
    assert task.key() == harness.runs.Task("CartPole-v1", 1000, contender, 0, 2, 2, 3, 0.2).key()
    assert task.key() != harness.runs.Task("CartPole-v1", 1000, contender, 1, 2, 2, 3, 0.2).key()
    assert task.key() != harness.runs.Task("CartPole-v1", 2000, contender, 0, 2, 2, 3, 0.2).key()
    other = harness.contenders.parse_contender("xppo-spo-mse-mb+dual3")
    assert task.key() != harness.runs.Task("CartPole-v1", 1000, other, 0, 2, 2, 3, 0.2).key()
    assert harness.runs.load_cached(task, str(tmp_path)) is None
    harness.runs.save_run(dict(key="stale", final_mean=1.0), task.path(str(tmp_path)))
    assert harness.runs.load_cached(task, str(tmp_path)) is None  # another configuration: run again
    harness.runs.save_run(dict(key=task.key(), final_mean=1.0), task.path(str(tmp_path)))
    assert harness.runs.load_cached(task, str(tmp_path))["final_mean"] == 1.0


def test_a_run_is_found_under_any_name_with_its_configuration(tmp_path):
    """The key is the configuration: the preset finds the runs of the option it is, under its own name."""
    out = str(tmp_path)
    option = harness.runs.Task(
        "CartPole-v1", 1000, harness.contenders.parse_contender("xppo@normalize_values=True"), 0, 2, 2, 3, 0.2
    )
    preset = harness.runs.Task(
        "CartPole-v1",
        1000,
        harness.contenders.for_env(harness.contenders.parse_contender("xppo-recommended"), "CartPole-v1"),
        0,
        2,
        2,
        3,
        0.2,
    )
    assert preset.key() == option.key() and preset.path(out) != option.path(out)
    harness.runs.save_run(dict(key=option.key(), contender=option.contender.name, final_mean=2.0), option.path(out))
    file = os.path.relpath(option.path(out), out)
    assert harness.runs.load_cached(preset, out) == dict(
        key=option.key(), contender="xppo-recommended", final_mean=2.0, file=file
    )
    # another seed, or a stale file of the task's own, is not it
    assert harness.runs.load_cached(replace(preset, seed=1), out) is None
    harness.runs.save_run(dict(key="stale", final_mean=3.0), preset.path(out))
    assert harness.runs.load_cached(preset, out)["final_mean"] == 2.0
    other = harness.runs.Task(
        "CartPole-v1", 1000, harness.contenders.parse_contender("xppo@normalize_values=False"), 0, 2, 2, 3, 0.2
    )
    assert harness.runs.load_cached(other, out) is None


@pytest.mark.slow
def test_quick_end_to_end(tmp_path, capsys):
    out = str(tmp_path)
    subprocess.run([sys.executable, SCRIPT, "--quick", "--out-dir", out], check=True, capture_output=True, timeout=300)
    for ext in ("json", "md", "png"):
        assert os.path.getsize(harness.reports.campaign_files(out, "quick")[ext]) > 0
    with open(harness.reports.campaign_files(out, "quick")["json"]) as f:
        result = json.load(f)
    # the report names its runs; the run cache holds them
    runs = {}
    for named in result["runs"]:
        with open(os.path.join(out, named["file"])) as f:
            runs[named["contender"]] = json.load(f)
        assert runs[named["contender"]]["key"] == named["key"] and named["seed"] == 0
    assert set(runs) == {"ppo", "xppo"}
    for run in runs.values():
        assert run["env"] == "CartPole-v1" and run["seed"] == 0 and run["budget"] == 5000
        assert run["eval_steps"] == [2496, 4992]  # SB3's EvalCallback every 312 calls of 8 envs
        assert len(run["final_returns"]) == 3 and run["final_mean"] == pytest.approx(np.mean(run["final_returns"]))
        assert 8 <= run["final_mean"] <= 500 and run["learn_seconds"] > 0
    assert runs["ppo"]["algo"] == "ppo" and runs["xppo"]["algo"] == "xppo"
    row = result["summary"]["CartPole-v1"]["contenders"]["ppo"]
    # One seed: the IQM and both ends of its bootstrap CI are that seed's return
    assert row["final_iqm"] == pytest.approx(runs["ppo"]["final_mean"])
    assert row["final_iqm_ci"] == pytest.approx([runs["ppo"]["final_mean"]] * 2)
    with open(harness.reports.campaign_files(out, "quick")["md"]) as f:
        table = f.read()
    assert "| **ppo (zoo)** | 0 |" in table and "| xppo | 0 |" in table
    # each run records the code that made it, and the report verified it against today's
    for run in runs.values():
        assert len(run["fingerprint"]) == 16 and set(run["code"]) == {"commit", "dirty", "versions"}
        assert run["code"]["versions"]["stable-baselines3"] and run["code"]["versions"]["torch"]
    assert "Provenance: 2 runs current" in table and result["provenance"]["stale"] == []

    # A second run finds both runs cached and trains nothing; the report is the same
    learning.main(["--quick", "--out-dir", out])
    assert "2 of 2 runs cached, 0 to run" in capsys.readouterr().out
    with open(harness.reports.campaign_files(out, "quick")["json"]) as f:
        assert json.load(f)["summary"] == result["summary"]


def test_iqm_and_its_ci_are_reproducible():
    """The IQM is the mean of the middle half; the bootstrap CI is the same on every call and for any other rows."""
    a, b = np.array([1.0, 5, 3, 8, 2, 9, 4, 4]), np.array([0.0, 10, 2, 2])
    estimates = harness.reports.iqm_with_ci({"a": a, "b": b}, reps=500)
    assert estimates["a"][0] == pytest.approx((3 + 4 + 4 + 5) / 4)  # sorted 1 2 3 4 4 5 8 9: the middle four
    assert estimates["b"][0] == pytest.approx(2.0)  # sorted 0 2 2 10: the middle two
    for iqm, low, high in estimates.values():
        assert low <= iqm <= high
    np.random.seed(123)
    assert harness.reports.iqm_with_ci({"b": b, "a": a}, reps=500) == estimates
    assert harness.reports.iqm_with_ci({"a": a}, reps=500)["a"] == estimates["a"]
    assert np.random.randint(1 << 30) == np.random.RandomState(123).randint(1 << 30)  # the caller's state is kept


def test_the_reported_command_leaves_out_the_scheduling_flags():
    """A campaign run in sittings, each with its own ``--time-limit``, or reported with ``--report-only``, is one command."""
    expected = "python benchmarks/learning.py --envs Pendulum-v1 --seeds 10 11 --workers 2 --name c"
    for argv in (
        ["--envs", "Pendulum-v1", "--seeds", "10", "11", "--workers", "2", "--name", "c"],
        ["--envs", "Pendulum-v1", "--time-limit", "105", "--seeds", "10", "11", "--workers", "2", "--name", "c"],
        ["--report-only", "--envs", "Pendulum-v1", "--seeds", "10", "11", "--time-limit=4", "--workers", "2", "--name", "c"],
    ):
        assert harness.reports.reproducing_command("benchmarks/learning.py", argv) == expected
    assert harness.reports.reproducing_command("b.py", ["--name", "a b"]) == "python b.py --name 'a b'"  # quoted for a shell


def test_reports_come_from_the_committed_results():
    """Each learning campaign's report.md is the one its committed report.json produces."""
    reports = glob.glob(os.path.join(RESULTS, "campaigns", "*", "report.json"))
    assert reports, "no learning campaign has a report"
    for path in reports:
        with open(path) as f:
            result = json.load(f)
        if not result["command"].startswith("python benchmarks/learning.py "):
            continue  # another script's campaign
        name = os.path.basename(os.path.dirname(path))
        note = result.get("provenance", {}).get("note", "")
        table = harness.reports.markdown(result["summary"], name, result["command"], note, result.get("question", ""))
        with open(os.path.join(os.path.dirname(path), "report.md")) as f:
            assert f.read() == table, f"{name}: report.md differs from its report.json"


def test_a_report_writes_one_seeds_numbers_alone():
    """One seed: its IQMs and mean without a degenerate interval or a zero spread; two seeds: both with theirs."""
    row = dict(final_iqm=3213.9, final_iqm_ci=[3213.9, 3213.9], final_mean=3213.9, final_std=0.0, reached=0)
    row.update(curve_iqm=2431.8, curve_iqm_ci=[2431.8, 2431.8], curve_mean=2431.8, median_steps_to_threshold=None)
    one = dict(row, seeds=[0], learn_seconds=3410.0)
    two = dict(row, seeds=[0, 1], final_iqm_ci=[3000.0, 3400.0], final_std=200.0, learn_seconds=3410.0)
    two.update(curve_iqm_ci=[2400.0, 2500.0])
    summary = {"Ant-v5": dict(budget=5_000_000, threshold=None, contenders={"spo": one, "clip": two})}
    table = harness.reports.markdown(summary, "spo_paper", "python benchmarks/learning.py")
    assert "| spo | 0 | 3213.9 | 3213.9 | 0/1 | - | 2431.8 | 3410 |" in table
    assert "| clip | 0,1 | 3213.9 [3000.0, 3400.0] | 3213.9 ± 200.0 | 0/2 | - | 2431.8 [2400.0, 2500.0] | 3410 |" in table


def test_a_slice_of_a_campaign_makes_the_same_runs():
    """
    A campaign run in slices (the same command with fewer envs, contenders or seeds) asks for runs of the whole
    campaign's cache keys, so that ``--report-only`` with the whole command reports them.
    """
    whole = [
        "--envs",
        "Walker2d-v5",
        "Ant-v5",
        "--contenders",
        "xppo,ppo",
        "--seeds",
        "0",
        "1",
        "2",
        "--budget-scale",
        "5",
        "--name",
        "spo_paper",
    ]
    part = [
        "--envs",
        "Ant-v5",
        "--contenders",
        "ppo",
        "--seeds",
        "2",
        "--budget-scale",
        "5",
        "--workers",
        "1",
        "--name",
        "spo_paper",
    ]

    def keys(argv: list[str]) -> list[str]:
        args = learning.parse_args(argv)
        return [task.key() for task in learning.campaign_tasks(args, harness.contenders.expand_contenders(args.contenders))]

    sliced = keys(part)
    assert len(sliced) == 1 and set(sliced) < set(keys(whole)) and len(keys(whole)) == 12
    assert keys([*part, "--budget-scale", "3"]) != sliced  # the budget is in the key (argparse: the last one given)


def test_the_fingerprint_is_the_codes_behaviour():
    """Seed 0 whatever the run's seed; the same bits recomputed; a bit-exact switch keeps it, a new value changes it."""
    task = harness.runs.Task("CartPole-v1", 5000, harness.contenders.parse_contender("xppo"), 3, 2, 2, 3, 0.2)
    fingerprint = harness.runs.fingerprint(task)
    assert harness.runs.fingerprint(replace(task, seed=7)) == fingerprint
    harness.runs._FINGERPRINTS.clear()
    assert harness.runs.fingerprint(task) == fingerprint
    exact = replace(task, contender=harness.contenders.parse_contender("xppo@fast_paths=False"))
    assert exact.key() != task.key() and harness.runs.fingerprint(exact) == fingerprint
    changed = replace(task, contender=harness.contenders.parse_contender("xppo@learning_rate=1e-3"))
    assert harness.runs.fingerprint(changed) != fingerprint


def test_reports_tell_current_stale_and_unverified_runs_apart():
    task = harness.runs.Task("CartPole-v1", 5000, harness.contenders.parse_contender("ppo"), 0, 2, 2, 3, 0.2)
    run = dict(key=task.key(), env="CartPole-v1", contender="ppo")
    runs = [
        dict(run, seed=0, fingerprint=harness.runs.fingerprint(task)),
        dict(run, seed=1, fingerprint="0" * 16),
        dict(run, seed=2),
    ]
    status = harness.runs.verify_runs([task], runs)
    assert [[r["seed"] for r in status[k]] for k in ("current", "stale", "unverified")] == [[0], [1], [2]]
    note = harness.reports.provenance_note(status, unverified_included=True)
    assert note.startswith("Provenance: 1 runs current") and "1 unverified" in note and "included" in note
    assert "1 stale and left out" in note and "CartPole-v1 ppo seed 1" in note
    # a configuration today's code refuses (its options were valid when the run was made) would not train the run
    refused = harness.runs.Task(
        "CartPole-v1", 5000, harness.contenders.parse_contender("xppo-asymmetric_spo-mse-mb+dual3"), 0, 2, 2, 3, 0.2
    )
    status = harness.runs.verify_runs(
        [refused], [dict(key=refused.key(), env="CartPole-v1", contender="x", seed=0, fingerprint="1" * 16)]
    )
    assert [len(status[k]) for k in ("current", "stale", "unverified")] == [0, 1, 0]


# --- @vec_env: the training VecEnv (EnvPool's learning equivalence) ------------------------------------------------------


def test_vec_env_override_trains_on_envpool(built_xppo):
    """@vec_env='envpool' trains on EnvPool's envs (VecNormalize on top, as the entry says) and evaluates on gymnasium's."""
    pytest.importorskip("envpool")
    from stable_baselines3.common.vec_env import DummyVecEnv

    from sb3_xppo.vec_env import EnvPoolVecEnv

    name = "xppo@vec_env='envpool'@n_steps=64@batch_size=32"
    eval_envs = []
    real_run = harness.runs.EvalCallback

    def spy(eval_env, **kwargs):
        eval_envs.append(eval_env)
        return real_run(eval_env, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(harness.runs, "EvalCallback", spy)
        run = harness.runs.run_task(
            harness.runs.Task("Hopper-v5", 128, harness.contenders.parse_contender(name), 0, 1, 1, 1, 0.2)
        )
    env = built_xppo["env"]
    assert isinstance(env, VecNormalize) and type(env.unwrapped) is EnvPoolVecEnv and "vec_env" not in built_xppo
    assert type(eval_envs[0].unwrapped) is DummyVecEnv  # every contender is evaluated on gymnasium's env
    assert run["budget"] == 128 and np.isfinite(run["final_returns"]).all() and run["kwargs"]["vec_env"] == "envpool"


def test_vec_env_override_keeps_the_other_cache_keys():
    """A run without @vec_env keeps its key (a committed run is found); with it, the key is another."""
    ppo = harness.runs.Task("LunarLander-v3", 1_000_000, harness.contenders.parse_contender("ppo"), 0, 20, 10, 20, 0.2)
    run = harness.runs.load_cached(ppo, RESULTS)  # the committed run cache
    assert run["file"] == os.path.join("runs", "LunarLander-v3_1000000", "ppo", "seed0.json") and ppo.key() == run["key"]
    envpool = replace(ppo, contender=harness.contenders.parse_contender("ppo@vec_env='envpool'"))
    assert envpool.key() != ppo.key() and envpool.contender.kwargs == {"vec_env": "envpool"}
    with pytest.raises(ValueError, match=r"bad override .*vec_env is one of \('lean', 'dummy', 'subproc', 'envpool'"):
        harness.contenders.parse_contender("ppo@vec_env='pool'")


def test_a_report_keeps_its_question_and_kind(tmp_path):
    """--question and --kind state what a campaign is; a rewrite without them keeps the last report's."""
    out = str(tmp_path)
    args = argparse.Namespace(question="q?", kind="screen")
    assert harness.reports.report_words(args, out, "c") == dict(question="q?", kind="screen")
    os.makedirs(os.path.dirname(harness.reports.campaign_files(out, "c")["json"]))
    with open(harness.reports.campaign_files(out, "c")["json"], "w") as f:
        json.dump(dict(question="q?", kind="screen"), f)
    assert harness.reports.report_words(argparse.Namespace(question="", kind=None), out, "c") == dict(
        question="q?", kind="screen"
    )
    assert harness.reports.report_words(argparse.Namespace(question="", kind=None), out, "new") == dict(question="")


def test_recurrent_contenders_run_on_ppo_lstm_entries(tmp_path):
    """``recurrentppo`` and ``xppo-lstm`` (issue 48: ``@sequence_batching=True``) train on rl-zoo3's ppo_lstm.yml entries."""
    from sb3_contrib import RecurrentPPO

    from sb3_xppo import RecurrentXPPO

    assert harness.contenders.parse_contender("recurrentppo").algo == "recurrentppo"
    contender = harness.contenders.parse_contender("xppo-lstm@sequence_batching=True")
    assert contender.algo == "xppo_lstm" and contender.kwargs == {"sequence_batching": True}
    assert harness.zoo.zoo_budget("CartPoleNoVel-v1") == 100_000  # ppo_lstm.yml's entry, not ppo.yml's (it has none)
    for name, algo in (("recurrentppo", RecurrentPPO), ("xppo-lstm@sequence_batching=True", RecurrentXPPO)):
        task = harness.runs.Task("CartPoleNoVel-v1", 256, harness.contenders.parse_contender(name), 0, 1, 1, 1, 0.2)
        model, env, eval_env, _, hyperparams, _ = harness.runs.build_run(task, str(tmp_path))
        assert type(model) is algo and model.n_steps == 32 and env.num_envs == 8
        assert hyperparams["policy_kwargs"]["lstm_hidden_size"] == 64
        options = getattr(model, "options", None)
        assert getattr(options, "sequence_batching", False) is (algo is RecurrentXPPO)
        env.close()
        eval_env.close()
