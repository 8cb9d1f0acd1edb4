"""rl-zoo3 integration: registration, the packaged config, the optuna sampler, `python -m sb3_xppo.train/enjoy`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import optuna
import pytest
import rl_zoo3
import yaml
from helpers import zoo_model
from rl_zoo3.exp_manager import ExperimentManager
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import ProgressBarCallback
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import VecNormalize

import sb3_xppo
from sb3_xppo import XPPO, XPPOOptions, zoo
from sb3_xppo.enjoy import main as enjoy_main
from sb3_xppo.train import main as train_main

REPO_ROOT = Path(__file__).resolve().parent.parent
ZOO_ENVS = [
    "CartPole-v1",
    "Acrobot-v1",
    "LunarLander-v3",
    "LunarLanderContinuous-v3",
    "Pendulum-v1",
    "BipedalWalker-v3",
    "mo-lunar-lander-v3",  # multi-critic, 4 reward groups
]
# config keys that are XPPO constructor keywords with a plain value, checked on the built model
PLAIN_KEYWORDS = (
    "n_steps",
    "batch_size",
    "n_epochs",
    "gamma",
    "gae_lambda",
    "ent_coef",
    "use_sde",
    "sde_sample_freq",
    "normalize_values",
)


def keyword_value(model: Any, key: str) -> Any:
    """A constructor keyword's value on the model: an XPPO option's in ``model.options``, a PPO keyword's on it."""
    return getattr(model.options if key in XPPOOptions.names() else model, key)


def run_module(module: str, *args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-m", module, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, f"{module} {' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    return result


def load_config() -> dict:
    with open(zoo.CONFIG_PATH) as f:
        return yaml.safe_load(f)


def write_config(path: Path, entries: dict) -> str:
    path.write_text(yaml.safe_dump(entries))
    return str(path)


@pytest.fixture
def no_learning(monkeypatch: pytest.MonkeyPatch) -> list[ExperimentManager]:
    """rl-zoo3 builds and saves the model as usual but `learn` does nothing; the managers are recorded."""
    managers: list[ExperimentManager] = []
    monkeypatch.setattr(ExperimentManager, "learn", lambda self, model: managers.append(self))
    return managers


def test_register_makes_xppo_known_everywhere_rl_zoo3_looks() -> None:
    import rl_zoo3.enjoy
    import rl_zoo3.hyperparams_opt
    import rl_zoo3.train
    import rl_zoo3.utils

    zoo.register()
    zoo.register()  # idempotent
    for module in (rl_zoo3, rl_zoo3.utils, rl_zoo3.train, rl_zoo3.exp_manager, rl_zoo3.enjoy):
        assert module.ALGOS["xppo"] is XPPO
        assert module.ALGOS["ppo"] is PPO  # rl-zoo3's own algorithms untouched
    for module in (rl_zoo3.hyperparams_opt, rl_zoo3.exp_manager):
        assert module.HYPERPARAMS_SAMPLER["xppo"] is zoo.sample_xppo_params
        assert module.HYPERPARAMS_CONVERTER["xppo"] is zoo.convert_xppo_params
    assert "mo-lunar-lander-v3" in gym.envs.registry


def test_config_ships_inside_the_package(tmp_path: Path) -> None:
    # what a non-editable `pip install .` copies: setuptools' build_py with setup.py's package_data
    build_lib = tmp_path / "build"
    subprocess.run(
        [sys.executable, "setup.py", "--quiet", "build_py", "--build-lib", str(build_lib)],
        cwd=REPO_ROOT,
        check=True,
        capture_output=True,
    )
    assert set(zoo.CONFIG_PATHS) == {"xppo", "xppo_mask", "xppo_lstm", "xppo_mask_lstm"}
    for algo, config_path in zoo.CONFIG_PATHS.items():
        assert config_path.name == f"{algo}.yml"
        assert (build_lib / "sb3_xppo" / "zoo_configs" / config_path.name).read_text() == config_path.read_text()
        assert config_path.parent.parent == Path(sb3_xppo.__file__).resolve().parent
        assert (REPO_ROOT / "zoo_configs" / config_path.name).resolve() == config_path
    assert zoo.CONFIG_PATHS["xppo"] == zoo.CONFIG_PATH


def test_config_has_the_promised_entries() -> None:
    config = load_config()
    assert set(ZOO_ENVS) | {"default"} <= set(config)
    assert config["LunarLander-v3"]["n_timesteps"] == 1e6


# Where xppo.yml departs from rl-zoo3's ppo.yml, and why: the learning benchmark's evidence (README, Benchmarks).
# Every other key of every entry that ppo.yml also has is rl-zoo3's own value.
LUNAR_LANDER_TUNING = {"normalize": "dict(norm_obs=False, norm_reward=True)", "n_steps": 256, "n_epochs": 10}
TUNED_FOR_XPPO = {
    # kept over xppo_recommended on ppo.yml's entry: the same final return, an earlier curve (learning_confirmation_zoo)
    "LunarLander-v3": LUNAR_LANDER_TUNING,
    "LunarLanderContinuous-v3": {**LUNAR_LANDER_TUNING, "learning_rate": "lin_3e-4"},
    # value normalization with RPO (the first preset), confirmed on ppo.yml's entry
    # (benchmarks/results/campaigns/archive/confirmation_rpo/report.md)
    "Pendulum-v1": {"normalize_values": True, "policy_kwargs": "dict(rpo_alpha=0.5)"},
}


@pytest.mark.parametrize("env_id", [e for e in ZOO_ENVS if not e.startswith("mo-")])
def test_config_is_rl_zoo3s_ppo_entry_but_for_the_benchmarked_changes(env_id: str) -> None:
    with open(Path(rl_zoo3.__file__).parent / "hyperparams" / "ppo.yml") as f:
        ppo_entry = yaml.safe_load(f)[env_id]
    assert load_config()[env_id] == {**ppo_entry, **TUNED_FOR_XPPO.get(env_id, {})}


@pytest.mark.parametrize("env_id", [*ZOO_ENVS, "MountainCar-v0"])
def test_every_config_entry_builds_an_xppo_through_rl_zoo3(env_id: str, tmp_path: Path) -> None:
    zoo.register()
    config = load_config()
    entry = config.get(env_id, config["default"])  # MountainCar-v0 has no entry: rl-zoo3 uses 'default'
    model, manager = zoo_model("xppo", env_id, tmp_path, zoo.CONFIG_PATH)
    assert type(model) is XPPO
    assert manager.n_timesteps == int(entry["n_timesteps"])
    assert model.n_envs == entry.get("n_envs", 1)
    for key in PLAIN_KEYWORDS:
        if key in entry:
            assert keyword_value(model, key) == entry[key], key
    if "reward_groups" in entry:
        assert list(model.options.reward_groups) == entry["reward_groups"]
    if "rpo_alpha" in str(entry.get("policy_kwargs", "")):  # an XPPO policy option reaches the policy
        assert model.policy.rpo_alpha == eval(entry["policy_kwargs"])["rpo_alpha"]
    assert isinstance(model.get_env(), VecNormalize) == bool(entry.get("normalize", False))
    model.env.close()


@pytest.mark.parametrize(
    ("args", "algo", "env_id", "conf_file", "n_timesteps"),
    [
        ([], "xppo", "LunarLander-v3", str(zoo.CONFIG_PATH), 1_000_000),
        (["--env", "CartPole-v1", "-n", "5000"], "xppo", "CartPole-v1", str(zoo.CONFIG_PATH), 5000),
        (["--env=CartPole-v1", "--algo", "ppo"], "ppo", "CartPole-v1", None, 100_000),
    ],
)
def test_train_defaults(args, algo, env_id, conf_file, n_timesteps, tmp_path, monkeypatch, no_learning) -> None:
    monkeypatch.chdir(tmp_path)
    train_main(args)
    run_dir = tmp_path / "logs" / algo / f"{env_id}_1"
    saved_args = yaml.load((run_dir / env_id / "args.yml").read_text(), Loader=yaml.UnsafeLoader)
    assert (saved_args["algo"], saved_args["env"], saved_args["conf_file"]) == (algo, env_id, conf_file)
    assert no_learning[0].n_timesteps == n_timesteps
    model_class = {"xppo": XPPO, "ppo": PPO}[algo]
    assert type(model_class.load(run_dir / f"{env_id}.zip")) is model_class


@pytest.mark.parametrize(("args", "shown"), [([], True), (["--no-progress"], False), (["-P", "--no-progress"], True)])
def test_training_shows_a_progress_bar_unless_told_not_to(args, shown, tmp_path, monkeypatch, no_learning) -> None:
    # rl-zoo3's -P is the default; --no-progress (ours) turns it off, and an explicit -P still wins
    monkeypatch.chdir(tmp_path)
    train_main(["--env", "CartPole-v1", "-n", "64", *args])
    assert no_learning[0].show_progress is shown
    callbacks = no_learning[0].callbacks
    assert any(isinstance(c, ProgressBarCallback) for c in callbacks) is shown


def test_sampler_draws_xppo_options_and_the_converter_agrees() -> None:
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = set()
    for _ in range(8):
        trial = study.ask()
        params = zoo.sample_xppo_params(trial, 0, 1, {})
        assert set(zoo.XPPO_SEARCH_KEYS) <= set(trial.params)
        # rl-zoo3's --trial-id path rebuilds the keywords from trial.params alone
        assert zoo.convert_xppo_params(trial.params) == params
        assert 0 < params["gamma"] < 1 and params["n_steps"] == 2 ** trial.params["n_steps_pow"]
        model = XPPO("MlpPolicy", "CartPole-v1", device="cpu", **params)
        assert (model.options.actor_loss, model.options.value_loss) == (params["actor_loss"], params["value_loss"])
        seen.add(params["actor_loss"])
        study.tell(trial, 0.0)
    assert len(seen) > 1


def test_converter_by_hand() -> None:
    raw = {
        "batch_size_pow": 6,
        "n_steps_pow": 9,
        "one_minus_gamma": 0.01,
        "one_minus_gae_lambda": 0.05,
        "learning_rate": 1e-3,
        "ent_coef": 0.01,
        "clip_range": 0.2,
        "n_epochs": 5,
        "max_grad_norm": 0.5,
        "net_arch": "tiny",
        "activation_fn": "tanh",
        "actor_loss": "spo",
        "value_loss": "mse",
        "clip_range_vf": 0.5,
        "dual_clip": 3.0,
        "delightful": True,
        "normalize_advantage": "off",
    }
    params = zoo.convert_xppo_params(raw)
    assert (params["batch_size"], params["n_steps"]) == (64, 512)
    assert params["gamma"] == pytest.approx(0.99) and params["gae_lambda"] == pytest.approx(0.95)
    assert params["policy_kwargs"]["net_arch"] == {"pi": [64], "vf": [64]}
    assert params["normalize_advantage"] is False
    assert "clip_range_vf" not in params  # 'mse' does not clip: the drawn clip range is dropped
    # SPO refuses dual clipping: the drawn threshold is dropped; the clip loss keeps it
    assert (params["actor_loss"], params["dual_clip"], params["delightful"]) == ("spo", None, True)
    assert zoo.convert_xppo_params({**raw, "actor_loss": "clip"})["dual_clip"] == 3.0
    clipped = zoo.convert_xppo_params({**raw, "value_loss": "improved", "normalize_advantage": "rollout"})
    assert (clipped["clip_range_vf"], clipped["normalize_advantage"]) == (0.5, "rollout")


def test_linear_reward_goes_beneath_rl_zoo3_monitor() -> None:
    zoo.register()
    weight = [1.0, 1.0, 0.3, 0.03]
    monitor = Monitor(gym.make("mo-lunar-lander-v3"))
    env = zoo.linear_reward(monitor, weight=weight)
    assert env is monitor
    env.reset(seed=0)
    env.action_space.seed(0)
    episode_return, terminated, truncated = 0.0, False, False
    while not (terminated or truncated):
        _, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert np.ndim(reward) == 0
        assert reward == pytest.approx(float(np.dot(info["vector_reward"], weight)), rel=1e-5, abs=1e-6)
        episode_return += reward
    # the Monitor saw the scalarized rewards
    assert info["episode"]["r"] == pytest.approx(episode_return, rel=1e-5, abs=1e-5)
    plain = zoo.linear_reward(gym.make("mo-lunar-lander-v3"))
    plain.reset(seed=0)
    _, reward, *_, info = plain.step(0)
    assert reward == pytest.approx(float(np.sum(info["vector_reward"])))


def test_summarize_evaluations_by_hand(tmp_path: Path) -> None:
    results = np.array([[100.0, 120.0], [190.0, 215.0], [250.0, 230.0], [180.0, 170.0]])
    np.savez(tmp_path / "evaluations.npz", timesteps=np.array([25_000, 50_000, 75_000, 100_000]), results=results)
    line = zoo.summarize_evaluations(str(tmp_path), "LunarLander-v3")
    # means: 110, 202.5, 240, 175 -> first >= 200 at 50k, best 240 at 75k
    assert line == (
        "eval: last mean return 175.0 at 100000 steps, best 240.0 at 75000 steps, threshold 200 first reached at 50000 steps"
    )
    assert zoo.summarize_evaluations(str(tmp_path / "missing"), "LunarLander-v3") is None
    assert zoo.plot_learning_curve(str(tmp_path / "missing"), "LunarLander-v3") is None


# Bad input


def test_unknown_env_is_rl_zoo3s_error(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="CartPol-v1 not found in gym registry, you maybe meant CartPole-v1"):
        train_main(["--env", "CartPol-v1"])


def test_env_missing_from_a_config_is_rl_zoo3s_error(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = write_config(tmp_path / "only_pendulum.yml", {"Pendulum-v1": {"policy": "MlpPolicy", "n_timesteps": 100}})
    with pytest.raises(ValueError, match="Hyperparameters not found for xppo-CartPole-v1"):
        train_main(["--env", "CartPole-v1", "--conf-file", config])


def test_unknown_config_key_fails_when_the_model_is_built(tmp_path, monkeypatch, no_learning) -> None:
    monkeypatch.chdir(tmp_path)
    entry = {"policy": "MlpPolicy", "n_timesteps": 100, "not_an_option": 1}
    config = write_config(tmp_path / "typo.yml", {"CartPole-v1": entry})
    with pytest.raises(TypeError, match="not_an_option"):
        train_main(["--env", "CartPole-v1", "--conf-file", config])
    assert not no_learning


@pytest.mark.parametrize(
    ("option", "value", "match"),
    [
        ("actor_loss", "ppo2", "actor_loss"),
        ("value_loss", "clipped", "clip_range_vf"),
        ("dual_clip", 0.5, "dual_clip"),
        ("normalize_advantage", "batch", "normalize_advantage"),
    ],
)
@pytest.mark.parametrize("source", ["config", "command line"])
def test_wrong_xppo_option_fails_at_construction(option, value, match, source, tmp_path, monkeypatch, no_learning) -> None:
    monkeypatch.chdir(tmp_path)
    if source == "config":
        entry = {"policy": "MlpPolicy", "n_timesteps": 100_000, option: value}
        args = ["--conf-file", write_config(tmp_path / "bad.yml", {"CartPole-v1": entry})]
    else:
        args = ["-params", f"{option}:{value!r}"]
    with pytest.raises(ValueError, match=match):
        train_main(["--env", "CartPole-v1", *args])
    assert not no_learning  # raised by XPPO's constructor, before rl-zoo3 starts training
    assert not list(tmp_path.glob("logs/xppo/*/*.zip"))


def test_clip_range_pair_needs_python_not_yaml(tmp_path, monkeypatch, no_learning) -> None:
    # as the README says: rl-zoo3 turns clip_range into a schedule and accepts only a number or 'lin_<x>'
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="Invalid value for clip_range"):
        train_main(["--env", "CartPole-v1", "-params", "clip_range:(0.2, 0.28)"])


# End to end, in a fresh process and a temporary directory, as a user runs them


@pytest.mark.slow
def test_train_then_enjoy_from_a_temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run_module("sb3_xppo.train", "--env", "CartPole-v1", "-n", "4000", "--seed", "0", cwd=tmp_path)
    run_dir = tmp_path / "logs" / "xppo" / "CartPole-v1_1"
    model_path = run_dir / "CartPole-v1.zip"
    curve = run_dir / zoo.CURVE_FILENAME
    assert model_path.is_file()
    assert curve.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"Learning curve: {curve.relative_to(tmp_path)}" in result.stdout
    model = XPPO.load(model_path)
    assert model.num_timesteps >= 4000

    result = run_module("sb3_xppo.enjoy", "--env", "CartPole-v1", "-f", "logs", "-n", "300", "--no-render", cwd=tmp_path)
    assert f"Loading {model_path.relative_to(tmp_path)}" in result.stdout

    # rl-zoo3's record_video, in this process
    monkeypatch.chdir(tmp_path)
    enjoy_main(["--record-video", "--env", "CartPole-v1", "-n", "50"])
    assert len(list((run_dir / "videos").glob("*.mp4"))) == 1


@pytest.mark.slow
def test_multi_critic_config_trains_and_logs_each_group(tmp_path, monkeypatch, capsys) -> None:
    # the reward vectors reach XPPO through the config's env_wrapper, beneath rl-zoo3's Monitor
    monkeypatch.chdir(tmp_path)
    train_main(["--env", "mo-lunar-lander-v3", "-n", "512", "--seed", "0", "-params", "n_envs:2", "n_steps:128"])
    out = capsys.readouterr().out
    for group in load_config()["mo-lunar-lander-v3"]["reward_groups"]:
        assert f"value_loss/{group}" in out
    assert (tmp_path / "logs" / "xppo" / "mo-lunar-lander-v3_1" / "mo-lunar-lander-v3.zip").is_file()


@pytest.mark.slow
def test_optimize_two_trials_against_an_rdb_storage(tmp_path: Path, monkeypatch, no_learning) -> None:
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    common = ("--env", "CartPole-v1", "-optimize", "-n", "1000", "--n-evaluations", "1", "--eval-episodes", "2")
    common += ("--storage", storage, "--study-name", "xppo-test", "--sampler", "random", "--pruner", "none")
    common += ("--no-optim-plots", "-params", "n_envs:2")
    run_module("sb3_xppo.train", *common, "--n-trials", "2", "--seed", "0", cwd=tmp_path)
    # a second process on the same storage and study name joins the study, as another machine would;
    # --max-total-trials counts the trials of the whole study
    run_module("sb3_xppo.train", *common, "--max-total-trials", "3", "--seed", "1", cwd=tmp_path)
    study = optuna.load_study(storage=storage, study_name="xppo-test")
    assert [trial.state for trial in study.trials] == [optuna.trial.TrialState.COMPLETE] * 3
    assert all(set(zoo.XPPO_SEARCH_KEYS) <= set(trial.params) for trial in study.trials)

    # train with trial 1's parameters, converted back by rl-zoo3 through HYPERPARAMS_CONVERTER
    monkeypatch.chdir(tmp_path)
    trial = study.trials[1]
    train_main(["--env", "CartPole-v1", "--storage", storage, "--study-name", "xppo-test", "--trial-id", "1"])
    (model_path,) = tmp_path.glob("logs/xppo/CartPole-v1_*/CartPole-v1.zip")  # -optimize saves no model
    model = XPPO.load(model_path)
    assert (model.options.actor_loss, model.options.value_loss) == (trial.params["actor_loss"], trial.params["value_loss"])
    assert model.n_steps == 2 ** trial.params["n_steps_pow"]
