"""
The KL-adaptive learning rate, ``adaptive_kl``: the rule against a plain-Python loop, the per-epoch update inside
``train()``, its logging, saving and resuming, ``target_kl`` beside it, the three algorithms, the checks, PPO's bits
when off, and rl-zoo3's yml and search space.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest
import torch as th
import yaml
from helpers import params_equal
from reference import adaptive_lr_loop, approx_kl_loop
from rl_zoo3.exp_manager import ExperimentManager
from sb3_contrib.common.envs import InvalidActionEnvDiscrete
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.utils import LinearSchedule

import sb3_xppo.core.algorithm as core
from sb3_xppo import XPPO, MaskableXPPO, RecurrentXPPO, zoo
from sb3_xppo.common.adaptive_lr import ADAPTIVE_KL_DEFAULTS, adapt_learning_rate, check_adaptive_kl, mean_approx_kl

TINY = dict(n_steps=64, batch_size=16, n_epochs=3, policy_kwargs=dict(net_arch=[16]), device="cpu", seed=0)


def rule(**kwargs: float) -> dict[str, float]:
    return {**ADAPTIVE_KL_DEFAULTS, **kwargs}


class Spy:
    """Records the epochs' KLs that train() hands the rule, and the learning rate each minibatch steps with."""

    def __init__(self, model: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.kls: list[float] = []
        self.step_lrs: list[float] = []

        def spy(log_ratios: Any, valid: Any) -> float:
            self.kls.append(mean_approx_kl(log_ratios, valid))
            return self.kls[-1]

        monkeypatch.setattr(core, "mean_approx_kl", spy)
        model.register_loss_hook(self.hook)

    def hook(self, model: Any, rollout_data: Any, loss: th.Tensor) -> th.Tensor:
        self.step_lrs.append(model.policy.optimizer.param_groups[0]["lr"])
        return loss


def quiet(model: Any) -> Any:
    model.set_logger(Logger(folder=None, output_formats=[]))
    return model


# --- the rule ----------------------------------------------------------------------------------------------------------


def test_rule_by_hand_and_against_the_loop() -> None:
    # d = 0.01 (bounds 2d = 0.02, d/2 = 0.005), f = 2, lr in [2e-4, 4e-3]
    kls = [0.05, 0.03, 0.03, 0.01, 0.001, 0.004, 0.0, 0.0, 0.0, 0.02, 0.005, math.nan, 0.0201]
    by_hand = [5e-4, 2.5e-4, 2e-4, 2e-4, 4e-4, 8e-4, 1.6e-3, 3.2e-3, 4e-3, 4e-3, 4e-3, 4e-3, 2e-3]
    params = dict(target=0.01, factor=2.0, lr_min=2e-4, lr_max=4e-3)
    lr, ours = 1e-3, []
    for kl in kls:
        lr = adapt_learning_rate(lr, kl, **params)
        ours.append(lr)
    assert ours == adaptive_lr_loop(1e-3, kls, **params)
    assert ours == pytest.approx(by_hand, rel=1e-12)


def test_epoch_kl_against_the_loop() -> None:
    rng = np.random.default_rng(0)
    sizes = [5, 7, 3]
    xs = [rng.normal(0, 0.3, n).astype(np.float32) for n in sizes]
    masks = [np.ones(5, bool), rng.random(7) < 0.6, np.array([True, False, True])]
    masks[1][0] = True
    xs[2][1] = np.nan  # padding may hold anything
    ours = mean_approx_kl([th.as_tensor(x) for x in xs], [None, th.as_tensor(masks[1]), th.as_tensor(masks[2])])
    reference = approx_kl_loop([x.astype(np.float64).tolist() for x in xs], [m.tolist() for m in masks])
    assert ours == pytest.approx(reference, rel=1e-5)


# --- the keyword -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        (False, None),
        (True, rule()),
        (0.02, rule(target=0.02)),
        (np.float32(0.25), rule(target=0.25)),
        (dict(target=0.02, factor=2, lr_max=1e-3), rule(target=0.02, factor=2.0, lr_max=1e-3)),
        ({}, rule()),
        ("dict(target=0.02, lr_min=1e-6)", rule(target=0.02, lr_min=1e-6)),  # rl-zoo3 yml
        ("{'factor': 3}", rule(factor=3.0)),
        ("0.05", rule(target=0.05)),
        ("None", None),
    ],
)
def test_accepted_values_and_their_canonical_form(value: Any, expected: Any) -> None:
    canonical = check_adaptive_kl(value)
    assert canonical == expected
    assert canonical is None or all(type(v) is float for v in canonical.values())


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (0.0, "target must be > 0"),
        (-0.01, "target must be > 0"),
        (dict(target=0.0), "target must be > 0"),
        (dict(factor=1.0), "factor must be > 1"),
        (dict(factor=0.5), "factor must be > 1"),
        (dict(lr_min=1e-2, lr_max=1e-3), "lr_min <= lr_max"),
        (dict(lr_min=-1e-5), "lr_min <= lr_max"),
        (dict(target=0.01, step=2), "unknown keys \\['step'\\]"),
        (dict(target=math.nan), "finite numbers"),
        (dict(target="0.01"), "finite numbers"),
        ([0.01], "must be None, True"),
        ("dict(target=", "literal"),
        ("__import__('os').getcwd()", "literal"),
        ("dict(**{'target': 0.01})", "literal"),
    ],
)
def test_bad_values_raise_at_construction(value: Any, match: str) -> None:
    for algo, policy in ((XPPO, "MlpPolicy"), (MaskableXPPO, "MlpPolicy"), (RecurrentXPPO, "MlpLstmPolicy")):
        # raised before the environment is made (the id does not exist)
        with pytest.raises(ValueError, match=f"adaptive_kl.*{match}"):
            algo(policy, "NoSuchEnv-v0", adaptive_kl=value)


def test_a_non_constant_schedule_starts_the_rule_and_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    schedule = LinearSchedule(2e-3, 0.0, 1.0)
    with pytest.warns(UserWarning, match="adaptive_kl: the learning-rate schedule gives the starting learning rate only"):
        model = quiet(XPPO("MlpPolicy", "CartPole-v1", learning_rate=schedule, adaptive_kl=0.01, **TINY))
    spy = Spy(model, monkeypatch)
    model.learn(128)
    # the first call starts at the schedule's value at progress 1; after that only the rule moves the learning rate
    assert spy.step_lrs[0] == 2e-3
    assert model.adaptive_kl_lr == adaptive_lr_loop(2e-3, spy.kls, **rule(target=0.01))[-1]


# --- inside train() --------------------------------------------------------------------------------------------------


def test_train_adapts_after_each_epoch_and_logs_the_optimizers_lr(monkeypatch: pytest.MonkeyPatch) -> None:
    params = dict(target=0.003, factor=1.5, lr_min=1e-4, lr_max=5e-3)
    model = quiet(XPPO("MlpPolicy", "CartPole-v1", learning_rate=1e-3, adaptive_kl=params, **TINY))
    spy = Spy(model, monkeypatch)
    expected_lr, steps_per_epoch = 1e-3, 64 // 16
    for call in range(3):
        model.learn(64, reset_num_timesteps=call == 0)
        kls = spy.kls[3 * call : 3 * call + 3]
        lrs = adaptive_lr_loop(expected_lr, kls, **params)
        # each epoch's minibatches step with the learning rate the previous epochs left
        assert spy.step_lrs[12 * call : 12 * call + 12] == [
            lr for lr in [expected_lr, *lrs[:-1]] for _ in range(steps_per_epoch)
        ]
        expected_lr = lrs[-1]
        actual = model.policy.optimizer.param_groups[0]["lr"]
        assert actual == expected_lr == model.adaptive_kl_lr == model.logger.name_to_value["train/learning_rate"]
        # the rule reads the last epoch's KL as train/approx_kl logs it
        assert kls[-1] == pytest.approx(model.logger.name_to_value["train/approx_kl"], rel=1e-9)
    assert len(set(spy.step_lrs)) > 1  # the rule moved it


def test_save_and_load_resume_the_adapted_lr(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = quiet(XPPO("MlpPolicy", "CartPole-v1", learning_rate=1e-3, adaptive_kl=dict(target=1e-8), **TINY))
    model.learn(128)
    adapted = model.adaptive_kl_lr
    assert adapted is not None and adapted < 1e-3 / 1.5**4  # far below the schedule's 1e-3
    model.save(tmp_path / "model.zip")

    loaded = quiet(XPPO.load(tmp_path / "model.zip", env=make_vec_env("CartPole-v1", n_envs=1, seed=1), device="cpu"))
    assert loaded.options.adaptive_kl == rule(target=1e-8) and loaded.adaptive_kl_lr == adapted
    spy = Spy(loaded, monkeypatch)
    loaded.learn(64, reset_num_timesteps=False)
    assert spy.step_lrs[0] == adapted  # not lr_schedule's 1e-3
    assert loaded.adaptive_kl_lr == adaptive_lr_loop(adapted, spy.kls, **rule(target=1e-8))[-1]

    # load(..., adaptive_kl=...) takes the canonical form; the saved lr is then kept within the new bounds
    relaxed = XPPO.load(tmp_path / "model.zip", device="cpu", adaptive_kl="dict(target=0.02, lr_min=1e-3)")
    assert relaxed.options.adaptive_kl == rule(target=0.02, lr_min=1e-3)
    relaxed._update_learning_rate(relaxed.policy.optimizer)
    assert relaxed.policy.optimizer.param_groups[0]["lr"] == 1e-3


def test_a_model_saved_before_the_keyword_loads_with_the_rule_off() -> None:
    model = XPPO.load(Path(__file__).parent / "data" / "xppo_v0_clip_pair.zip", device="cpu")
    assert model.options.adaptive_kl is None and model.adaptive_kl_lr is None


def test_combined_with_target_kl(monkeypatch: pytest.MonkeyPatch) -> None:
    params = rule(target=0.001)
    config = {**TINY, "n_epochs": 10}
    model = quiet(XPPO("MlpPolicy", "CartPole-v1", learning_rate=3e-3, target_kl=0.002, adaptive_kl=params, **config))
    spy = Spy(model, monkeypatch)
    model.learn(64)
    # early stopping cut the epochs short, and the rule still saw every epoch begun, the stopped one too
    assert 1 <= model._n_updates < 10
    assert len(spy.kls) == model._n_updates
    assert model.adaptive_kl_lr == adaptive_lr_loop(3e-3, spy.kls, **params)[-1]
    assert model.logger.name_to_value["train/learning_rate"] == model.adaptive_kl_lr


def test_an_undone_call_keeps_the_rules_lr() -> None:
    model = quiet(XPPO("MlpPolicy", "CartPole-v1", learning_rate=1e-3, adaptive_kl=dict(target=1e-6), **TINY))
    model.learn(64)
    adapted = model.adaptive_kl_lr
    model.register_loss_hook(lambda model, rollout_data, loss: loss * math.nan)
    with pytest.raises(ValueError, match="this train\\(\\) call was undone"):
        model.learn(64, reset_num_timesteps=False)
    assert model.adaptive_kl_lr == adapted


@pytest.mark.parametrize(
    ("algo", "policy", "env"),
    [
        (XPPO, "MlpPolicy", "Pendulum-v1"),
        (MaskableXPPO, "MlpPolicy", lambda: InvalidActionEnvDiscrete(dim=8, ep_length=20, n_invalid_actions=5)),
        (RecurrentXPPO, "MlpLstmPolicy", "CartPole-v1"),
    ],
)
def test_the_three_algorithms_adapt(algo: type, policy: str, env: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    params = rule(target=1e-5)
    env = make_vec_env(env, n_envs=2, seed=0)
    model = quiet(algo(policy, env, learning_rate=1e-3, adaptive_kl=1e-5, **{**TINY, "n_steps": 32}))
    spy = Spy(model, monkeypatch)
    model.learn(128)
    assert len(spy.kls) == 2 * 3  # two calls of three epochs
    assert model.adaptive_kl_lr == adaptive_lr_loop(1e-3, spy.kls, **params)[-1] != 1e-3
    assert model.logger.name_to_value["train/learning_rate"] == model.policy.optimizer.param_groups[0]["lr"]


def test_off_is_ppo_bit_for_bit() -> None:
    config = dict(n_steps=32, batch_size=24, n_epochs=3, seed=5, policy_kwargs=dict(net_arch=[16]), device="cpu")
    schedule = LinearSchedule(1e-3, 1e-4, 1.0)
    # (each model seeds torch's global generator when built: PPO learns before XPPO is built)
    with pytest.warns(UserWarning, match="truncated mini-batch"):
        ppo = PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=0), learning_rate=schedule, **config).learn(192)
    with pytest.warns(UserWarning, match="truncated mini-batch"):
        xppo = XPPO(
            "MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=0), learning_rate=schedule, adaptive_kl=None, **config
        )
    xppo.learn(192)
    assert params_equal(ppo.policy, xppo.policy)
    assert ppo.logger.name_to_value["train/learning_rate"] == xppo.logger.name_to_value["train/learning_rate"]
    assert xppo.adaptive_kl_lr is None


# --- rl-zoo3 -----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", ["dict(target=0.02, factor=2.0)", {"target": 0.02, "factor": 2.0}], ids=["string", "mapping"]
)
def test_an_rl_zoo3_yml_entry(value: Any, tmp_path: Path) -> None:
    zoo.register()
    config = tmp_path / "config.yml"
    entry = {"policy": "MlpPolicy", "n_timesteps": 100, "learning_rate": 1e-3, "adaptive_kl": value}
    config.write_text(yaml.safe_dump({"CartPole-v1": entry}))
    if isinstance(value, str):
        assert "adaptive_kl: dict(target=0.02, factor=2.0)\n" in config.read_text()  # as one writes it by hand
    manager = ExperimentManager(
        argparse.Namespace(), "xppo", "CartPole-v1", str(tmp_path / "logs"), config=str(config), device="cpu"
    )
    model, _ = manager.setup_experiment()
    assert type(model) is XPPO and model.options.adaptive_kl == rule(target=0.02, factor=2.0)
    model.env.close()


@pytest.mark.filterwarnings("ignore:You have specified a mini-batch size")
def test_the_sampler_draws_it_and_the_converter_agrees() -> None:
    assert "adaptive_kl" in zoo.XPPO_SEARCH_KEYS
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = set()
    for _ in range(12):
        trial = study.ask()
        params = zoo.sample_xppo_params(trial, 0, 1, {})
        assert zoo.convert_xppo_params(trial.params) == params
        seen.add(params["adaptive_kl"])
        model = XPPO("MlpPolicy", "CartPole-v1", device="cpu", **params)
        assert model.options.adaptive_kl == check_adaptive_kl(params["adaptive_kl"])
        study.tell(trial, 0.0)
    assert None in seen and len(seen) > 2
