"""rl-zoo3 integration of MaskableXPPO (`xppo_mask`), RecurrentXPPO (`xppo_lstm`) and MaskableRecurrentXPPO
(`xppo_mask_lstm`): registration, the packaged configs, the optuna samplers, evaluation and `enjoy` with action masks,
`python -m sb3_xppo.train/enjoy`."""

from __future__ import annotations

import argparse
import contextlib
import re
from pathlib import Path

import numpy as np
import optuna
import pytest
import rl_zoo3
import rl_zoo3.enjoy
import rl_zoo3.hyperparams_opt
import rl_zoo3.utils
import stable_baselines3.common.callbacks as sb3_callbacks
import torch as th
import yaml
from helpers import masked_evaluation, run_with_argv
from rl_zoo3.callbacks import TrialEvalCallback
from rl_zoo3.exp_manager import ExperimentManager
from sb3_contrib import MaskablePPO, RecurrentPPO
from stable_baselines3.common.callbacks import EvalCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize
from test_zoo import PLAIN_KEYWORDS, keyword_value, run_module

from sb3_xppo import MaskableRecurrentXPPO, MaskableXPPO, RecurrentXPPO, zoo
from sb3_xppo.enjoy import main as enjoy_main
from sb3_xppo.envs import ACTION_NAMES, GRID_MAZE_ID, MEMORY_MAZE_ID
from sb3_xppo.train import main as train_main

UP = ACTION_NAMES.index("up")
DOWN = ACTION_NAMES.index("down")
MAZE_RUN = Path("logs") / "xppo_mask" / "sb3_xppo-GridMaze-v0_1"
MAZE_MODEL = MAZE_RUN / "sb3_xppo-GridMaze-v0.zip"


def load_config(algo: str) -> dict:
    with open(zoo.CONFIG_PATHS[algo]) as f:
        return yaml.safe_load(f)


def prefer_action(model: MaskablePPO, action: int) -> None:
    """Make ``action`` the deterministic choice in every state where it is legal (the action head ignores the state)."""
    with th.no_grad():
        model.policy.action_net.weight.zero_()
        model.policy.action_net.bias.zero_()
        model.policy.action_net.bias[action] = 10.0


def episode_lengths(enjoy_output: str) -> list[int]:
    return [int(length) for length in re.findall(r"^Episode Length (\d+)$", enjoy_output, re.MULTILINE)]


@pytest.fixture
def no_learning(monkeypatch: pytest.MonkeyPatch) -> None:
    """rl-zoo3 builds and saves the model as usual but `learn` does nothing."""
    monkeypatch.setattr(ExperimentManager, "learn", lambda self, model: None)


def test_register_makes_the_contrib_algorithms_known() -> None:
    import rl_zoo3.train

    zoo.register()
    for module in (rl_zoo3, rl_zoo3.utils, rl_zoo3.train, rl_zoo3.exp_manager, rl_zoo3.enjoy):
        assert module.ALGOS["xppo_mask"] is MaskableXPPO
        assert module.ALGOS["xppo_lstm"] is RecurrentXPPO
        assert module.ALGOS["xppo_mask_lstm"] is MaskableRecurrentXPPO
        assert module.ALGOS["ppo_lstm"] is RecurrentPPO  # rl-zoo3's own untouched
    for module in (rl_zoo3.hyperparams_opt, rl_zoo3.exp_manager):
        # rl-zoo3 has no MaskablePPO sampler; MaskablePPO's keywords are PPO's
        assert module.HYPERPARAMS_SAMPLER["xppo_mask"] is zoo.sample_xppo_params
        assert module.HYPERPARAMS_SAMPLER["xppo_lstm"] is zoo.sample_xppo_lstm_params
        assert module.HYPERPARAMS_SAMPLER["xppo_mask_lstm"] is zoo.sample_xppo_lstm_params
        assert module.HYPERPARAMS_CONVERTER["xppo_mask_lstm"] is zoo.convert_xppo_params
        assert module.HYPERPARAMS_SAMPLER["ppo_lstm"] is rl_zoo3.hyperparams_opt.sample_ppo_lstm_params
        assert module.HYPERPARAMS_CONVERTER["xppo_mask"] is zoo.convert_xppo_params
        assert module.HYPERPARAMS_CONVERTER["xppo_lstm"] is zoo.convert_xppo_params


# Configs


def test_lstm_config_is_rl_zoo3s_ppo_lstm_but_for_the_default_policy() -> None:
    with open(Path(rl_zoo3.__file__).parent / "hyperparams" / "ppo_lstm.yml") as f:
        ppo_lstm = yaml.safe_load(f)
    # rl-zoo3's default entry names 'MlpPolicy', which RecurrentPPO refuses ("Policy MlpPolicy unknown")
    assert ppo_lstm["default"]["policy"] == "MlpPolicy"
    assert load_config("xppo_lstm") == {**ppo_lstm, "default": {**ppo_lstm["default"], "policy": "MlpLstmPolicy"}}


def test_mask_lstm_config_has_the_memory_maze() -> None:
    config = load_config("xppo_mask_lstm")
    assert set(config) == {"default", MEMORY_MAZE_ID}
    assert config[MEMORY_MAZE_ID]["policy"] == "MlpLstmPolicy"


def test_mask_config_has_the_maze() -> None:
    config = load_config("xppo_mask")
    assert set(config) == {"default", GRID_MAZE_ID}
    assert config[GRID_MAZE_ID]["n_timesteps"] == 1e4


@pytest.mark.parametrize(
    ("algo", "env_id"),
    [
        ("xppo_lstm", "CartPoleNoVel-v1"),
        ("xppo_lstm", "PendulumNoVel-v1"),
        ("xppo_lstm", "MountainCar-v0"),  # no entry: rl-zoo3 uses 'default'
        ("xppo_mask", GRID_MAZE_ID),
        ("xppo_mask", "MountainCar-v0"),
        ("xppo_mask_lstm", MEMORY_MAZE_ID),
    ],
)
def test_config_entries_build_through_rl_zoo3(algo: str, env_id: str, tmp_path: Path) -> None:
    zoo.register()
    config = load_config(algo)
    entry = config.get(env_id, config["default"])
    manager = ExperimentManager(
        argparse.Namespace(),
        algo,
        env_id,
        str(tmp_path / "logs"),
        eval_freq=-1,
        config=str(zoo.CONFIG_PATHS[algo]),
        seed=0,
        device="cpu",
        verbose=0,
    )
    model, _ = manager.setup_experiment()
    classes = {"xppo_lstm": RecurrentXPPO, "xppo_mask": MaskableXPPO, "xppo_mask_lstm": MaskableRecurrentXPPO}
    assert type(model) is classes[algo]
    assert manager.n_timesteps == int(entry["n_timesteps"])
    assert model.n_envs == entry.get("n_envs", 1)
    for key in PLAIN_KEYWORDS:
        if key in entry:
            assert keyword_value(model, key) == entry[key], key
    assert isinstance(model.get_env(), VecNormalize) == bool(entry.get("normalize", False))
    model.env.close()


@pytest.mark.parametrize(
    ("algo", "model_class", "env_id", "n_timesteps"),
    [
        ("xppo_lstm", RecurrentXPPO, "CartPoleNoVel-v1", 100_000),
        ("xppo_mask", MaskableXPPO, GRID_MAZE_ID, 10_000),
        ("xppo_mask_lstm", MaskableRecurrentXPPO, MEMORY_MAZE_ID, 16_384),
    ],
)
def test_train_defaults(algo, model_class, env_id, n_timesteps, tmp_path, monkeypatch) -> None:
    managers: list[ExperimentManager] = []
    monkeypatch.setattr(ExperimentManager, "learn", lambda self, model: managers.append(self))
    monkeypatch.chdir(tmp_path)
    train_main(["--algo", algo])
    env_name = env_id.replace("/", "-")
    run_dir = tmp_path / "logs" / algo / f"{env_name}_1"
    saved_args = yaml.load((run_dir / env_name / "args.yml").read_text(), Loader=yaml.UnsafeLoader)
    assert (saved_args["env"], saved_args["conf_file"]) == (env_id, str(zoo.CONFIG_PATHS[algo]))
    assert managers[0].n_timesteps == n_timesteps
    assert type(model_class.load(run_dir / f"{env_name}.zip")) is model_class


# Optuna


def test_lstm_sampler_is_rl_zoo3s_recurrent_space_plus_xppo_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    zoo.register()  # CartPoleNoVel-v1 comes with rl-zoo3
    calls = []
    recurrent_sampler = rl_zoo3.hyperparams_opt.sample_ppo_lstm_params

    def spy(*args):
        calls.append(args)
        return recurrent_sampler(*args)

    monkeypatch.setattr(rl_zoo3.hyperparams_opt, "sample_ppo_lstm_params", spy)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(3):
        trial = study.ask()
        params = zoo.sample_xppo_lstm_params(trial, 0, 1, {})
        assert set(zoo.XPPO_SEARCH_KEYS) <= set(trial.params)
        assert zoo.convert_xppo_params(trial.params) == params
        model = RecurrentXPPO("MlpLstmPolicy", "CartPoleNoVel-v1", device="cpu", **params)
        assert (model.options.actor_loss, model.options.value_loss) == (params["actor_loss"], params["value_loss"])
        study.tell(trial, 0.0)
    assert len(calls) == 3


# Action masks in evaluation


@pytest.mark.parametrize("callback_class", [EvalCallback, TrialEvalCallback])
def test_eval_callbacks_use_the_masks(callback_class: type[EvalCallback], tmp_path: Path) -> None:
    """rl-zoo3 evaluates with SB3's EvalCallback (TrialEvalCallback under -optimize): without masks a model that prefers
    'up' walks off the grid at the first step of every episode; inside masked_evaluation it never moves illegally."""

    def evaluate() -> tuple[list[float], list[int]]:
        model = MaskableXPPO(
            "MlpPolicy",
            make_vec_env(GRID_MAZE_ID, n_envs=1, seed=0),
            n_steps=64,
            batch_size=64,
            n_epochs=1,
            policy_kwargs=dict(net_arch=[16]),
            seed=0,
            device="cpu",
        )
        prefer_action(model, UP)
        extra = {"trial": optuna.create_study().ask()} if callback_class is TrialEvalCallback else {}
        eval_env = make_vec_env(GRID_MAZE_ID, n_envs=1, seed=1)
        callback = callback_class(eval_env, n_eval_episodes=2, eval_freq=64, log_path=str(tmp_path), **extra)
        model.learn(64, callback=callback)  # one evaluation, at the rollout's last step
        return [float(r) for r in callback.evaluations_results[0]], list(callback.evaluations_length[0])

    assert evaluate() == ([-1.0, -1.0], [1, 1])  # rl-zoo3 alone: an illegal first move
    with masked_evaluation():
        # 'up' wherever it is legal: right along the top row, down at the wall, then up and down for good
        assert evaluate() == ([pytest.approx(-0.5)] * 2, [50, 50])


def test_masked_evaluation_puts_everything_back() -> None:
    originals = (
        sb3_callbacks.evaluate_policy,
        rl_zoo3.enjoy.create_test_env,
        rl_zoo3.utils.create_test_env,
        MaskablePPO.predict,
    )
    with contextlib.suppress(RuntimeError), masked_evaluation():
        assert MaskablePPO.predict is not originals[3]
        raise RuntimeError
    assert (
        sb3_callbacks.evaluate_policy,
        rl_zoo3.enjoy.create_test_env,
        rl_zoo3.utils.create_test_env,
        MaskablePPO.predict,
    ) == originals
    assert "predict" not in vars(MaskableXPPO)


def test_enjoy_uses_the_masks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, no_learning) -> None:
    monkeypatch.chdir(tmp_path)
    train_main(["--algo", "xppo_mask", "--seed", "0"])
    model = MaskableXPPO.load(MAZE_MODEL)
    prefer_action(model, UP)
    model.save(MAZE_MODEL)
    capsys.readouterr()

    args = ["--algo", "xppo_mask", "-n", "100", "--no-render"]
    # rl-zoo3's own enjoy: model.predict(obs) without masks walks off the grid at once, every episode
    run_with_argv(rl_zoo3.enjoy.enjoy, [*args, "--env", GRID_MAZE_ID, "-f", "logs"])
    lengths = episode_lengths(capsys.readouterr().out)
    assert len(lengths) == 100 and set(lengths) == {1}
    # python -m sb3_xppo.enjoy (the maze is xppo_mask's default env): no illegal move, the time limit ends each episode
    enjoy_main(args)
    assert episode_lengths(capsys.readouterr().out) == [50, 50]


# End to end


def test_xppo_mask_trains_and_evaluates_with_masks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    train_main(["--algo", "xppo_mask", "-n", "512", "--seed", "0", "--eval-freq", "256", "--eval-episodes", "2"])
    with np.load(MAZE_RUN / "evaluations.npz") as evaluations:
        assert len(evaluations["timesteps"]) == 2
        # every move of the evaluations was legal: an illegal one ends the episode at -1 (the time limit at -0.5)
        assert (evaluations["results"] >= -0.5 - 1e-6).all()
    assert type(MaskableXPPO.load(MAZE_MODEL)) is MaskableXPPO


@pytest.mark.slow
def test_xppo_lstm_train_then_enjoy_from_a_temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    # the command as a user types it, in a fresh process
    run_module("sb3_xppo.train", "--algo", "xppo_lstm", "--env", "CartPoleNoVel-v1", "-n", "2000", cwd=tmp_path)
    model_path = Path("logs") / "xppo_lstm" / "CartPoleNoVel-v1_1" / "CartPoleNoVel-v1.zip"
    model = RecurrentXPPO.load(tmp_path / model_path)
    assert model.num_timesteps >= 2000
    monkeypatch.chdir(tmp_path)
    enjoy_main(["--algo", "xppo_lstm", "-n", "200", "--no-render"])  # CartPoleNoVel-v1 is xppo_lstm's default env
    out = capsys.readouterr().out
    assert f"Loading {model_path}" in out
    assert episode_lengths(out)


# MaskableRecurrentXPPO (xppo_mask_lstm)


def memory_maze_model_preferring_down() -> MaskableRecurrentXPPO:
    """An untrained MaskableRecurrentXPPO that goes down wherever it may: an illegal first move without masks (the
    start is a dead end), up and down the corridor until the time limit (30 steps, -0.30) with them."""
    model = MaskableRecurrentXPPO(
        "MlpLstmPolicy",
        make_vec_env(MEMORY_MAZE_ID, n_envs=1, seed=0),
        n_steps=64,
        batch_size=64,
        n_epochs=1,
        policy_kwargs=dict(net_arch=[16], lstm_hidden_size=8),
        seed=0,
        device="cpu",
    )
    prefer_action(model, DOWN)
    return model


def test_eval_callback_uses_the_masks_and_the_lstm_state_for_xppo_mask_lstm(tmp_path: Path) -> None:
    def evaluate() -> tuple[list[float], list[int]]:
        model = memory_maze_model_preferring_down()
        eval_env = make_vec_env(MEMORY_MAZE_ID, n_envs=1, seed=1)
        callback = EvalCallback(eval_env, n_eval_episodes=2, eval_freq=64, log_path=str(tmp_path))
        model.learn(64, callback=callback)  # one evaluation, after the rollout
        return [round(float(r), 6) for r in callback.evaluations_results[0]], list(callback.evaluations_length[0])

    assert evaluate() == ([-1.0, -1.0], [1, 1])  # rl-zoo3 alone: an illegal first move
    with masked_evaluation():
        assert evaluate() == ([-0.3, -0.3], [30, 30])
    assert "predict" in vars(MaskableRecurrentXPPO)  # its own method, put back
    assert MaskableRecurrentXPPO.predict.__name__ == "predict"


def test_xppo_mask_lstm_trains_and_enjoys_with_masks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """`python -m sb3_xppo.train --algo xppo_mask_lstm` on its default env (the memory maze), then `enjoy`."""
    monkeypatch.chdir(tmp_path)
    train_main(["--algo", "xppo_mask_lstm", "-n", "512", "--seed", "0", "--eval-freq", "256", "--eval-episodes", "2"])
    run_dir = Path("logs") / "xppo_mask_lstm" / "sb3_xppo-MemoryMaze-v0_1"
    with np.load(run_dir / "evaluations.npz") as evaluations:
        assert len(evaluations["timesteps"]) == 2  # every 256 steps (rl-zoo3 divides --eval-freq by the 8 envs)
    model_path = run_dir / "sb3_xppo-MemoryMaze-v0.zip"
    model = MaskableRecurrentXPPO.load(model_path)
    assert type(model) is MaskableRecurrentXPPO and model.num_timesteps == 512
    prefer_action(model, DOWN)
    model.save(model_path)
    capsys.readouterr()
    enjoy_main(["--algo", "xppo_mask_lstm", "-n", "60", "--no-render"])
    # no illegal move: the time limit ends each episode
    assert episode_lengths(capsys.readouterr().out) == [30, 30]
