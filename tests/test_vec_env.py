"""
The lean vector env (``sb3_xppo.vec_env``): step for step and bit for bit SB3's ``make_vec_env`` (``DummyVecEnv`` +
``Monitor``), the same trained parameters, fresh infos; the backends of ``make_vec_env``; where XPPO and
``python -m sb3_xppo.train`` use it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pandas
import pytest
import yaml
from gymnasium import spaces
from helpers import ToDict, assert_same_value, params_equal, random_actions
from rl_zoo3.exp_manager import ExperimentManager
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env as sb3_make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.monitor import Monitor, load_results
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecNormalize

from sb3_xppo import XPPO, MaskableXPPO, RecurrentXPPO, zoo
from sb3_xppo.train import main as train_main
from sb3_xppo.vec_env import EnvStack, LeanVecEnv, fresh_info, make_vec_env
from sb3_xppo.vec_env.lean import gymnasium_time_limit, zoo_time_limit


class Pair(gym.Wrapper):
    """The observation as a ``(obs, step parity)`` Tuple; the info keeps a list the env mutates in place."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.observation_space = spaces.Tuple((env.observation_space, spaces.Discrete(2)))
        self.trace: list[int] = []
        self.info: dict[str, Any] = {"trace": self.trace}  # the same dict every step, as some envs do

    def reset(self, **kwargs: Any) -> tuple[tuple[Any, int], dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self.trace.clear()
        return (obs, 0), info

    def step(self, action: Any) -> tuple[tuple[Any, int], Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, _ = self.env.step(action)
        self.trace.append(int(action))
        self.info["parity"] = len(self.trace) % 2
        return (obs, len(self.trace) % 2), reward, terminated, truncated, self.info


def dict_cartpole() -> gym.Env:
    return ToDict(gym.make("CartPole-v1"))


def tuple_cartpole() -> gym.Env:
    return Pair(gym.make("CartPole-v1", max_episode_steps=15))


def plain_time_limit_pendulum() -> gym.Env:
    """Pendulum in gymnasium's own TimeLimit (``gym.make`` uses rl-zoo3's ``PatchedTimeLimit`` once rl-zoo3 is imported)."""
    inner = gym.wrappers.OrderEnforcing(gym.wrappers.PassiveEnvChecker(gym.make("Pendulum-v1").unwrapped))
    return gymnasium_time_limit()(inner, max_episode_steps=60)


#: name -> (env id or factory, n_envs, vector steps, make_vec_env keywords)
CASES: dict[str, tuple[str | Callable[[], gym.Env], int, int, dict[str, Any]]] = {
    "CartPole-v1": ("CartPole-v1", 4, 300, {}),
    "LunarLander-v3": ("LunarLander-v3", 4, 400, {}),
    "Pendulum-v1": ("Pendulum-v1", 3, 450, {}),  # truncated at 200 steps
    "gymnasium-TimeLimit": (plain_time_limit_pendulum, 2, 130, {}),
    "dict-obs": (dict_cartpole, 3, 200, {}),
    "tuple-obs": (tuple_cartpole, 2, 100, {}),
    "discrete-obs": ("FrozenLake-v1", 3, 200, {}),
    # a wrapper above the Monitor (the env stack is stepped as it is), a start index, env keywords
    "wrapper_class": ("CartPole-v1", 2, 200, dict(wrapper_class=ToDict, start_index=3)),
    "env_kwargs": ("Pendulum-v1", 2, 120, dict(env_kwargs=dict(g=9.0, max_episode_steps=50))),
}


def both(env_id: str | Callable[[], gym.Env], n_envs: int, seed: int = 0, **kwargs: Any) -> tuple[VecEnv, VecEnv]:
    """:return: the lean env and SB3's ``make_vec_env``'s, built alike"""
    return make_vec_env(env_id, n_envs, seed=seed, **kwargs), sb3_make_vec_env(env_id, n_envs, seed=seed, **kwargs)


@pytest.mark.parametrize("case", list(CASES))
def test_steps_equal_make_vec_env(case: str) -> None:
    env_id, n_envs, steps, kwargs = CASES[case]
    lean, dummy = both(env_id, n_envs, **kwargs)
    assert type(lean) is LeanVecEnv and type(dummy) is DummyVecEnv
    assert_same_value(lean.reset(), dummy.reset(), "reset")
    assert_same_value(lean.reset_infos, dummy.reset_infos, "reset_infos")
    ends = truncations = 0
    for t, action in enumerate(random_actions(dummy, steps)):
        assert_same_value(lean.step(action), dummy.step(action), f"step {t}")
        ends += sum("episode" in info for info in dummy.buf_infos)
        truncations += sum(info["TimeLimit.truncated"] for info in dummy.buf_infos)
    assert ends > 0
    if case in ("Pendulum-v1", "gymnasium-TimeLimit"):
        assert truncations == ends
    # the Monitors' own statistics (env_method, as for DummyVecEnv) and the episode times, to the clock's precision
    assert lean.env_method("get_episode_rewards") == dummy.env_method("get_episode_rewards")
    assert lean.env_method("get_episode_lengths") == dummy.env_method("get_episode_lengths")
    assert lean.env_method("get_total_steps") == dummy.env_method("get_total_steps") == [steps] * n_envs
    # seeding and options of the next reset, as make_vec_env's
    assert lean.seed(7) == dummy.seed(7)
    assert_same_value(lean.reset(), dummy.reset(), "seeded reset")
    lean.close()
    dummy.close()


def test_env_stack_skips_the_pass_through_wrappers() -> None:
    import rl_zoo3.gym_patches  # noqa: F401  (imported above through rl_zoo3.exp_manager)

    for make in (lambda: Monitor(gym.make("CartPole-v1")), lambda: Monitor(plain_time_limit_pendulum())):
        env = make()
        stack = EnvStack(env)
        assert stack.core is env.unwrapped and len(stack.time_limits) == 1 and not stack.ready
        assert stack.time_limits[0][1] == (type(env.env) is zoo_time_limit())
        env.reset(seed=0)
        for _ in range(3):
            stack.step(env.action_space.sample())
        assert stack.ready
    wrapped = EnvStack(ToDict(Monitor(gym.make("CartPole-v1"))))  # a wrapper of its own on top: stepped as it is
    assert wrapped.monitor is None and wrapped.core is wrapped.top and wrapped.ready


def test_reset_options_render_and_attributes() -> None:
    lean, dummy = both("CartPole-v1", 2, seed=3)
    for env in (lean, dummy):
        env.set_options({"low": -0.01, "high": 0.01})
    assert_same_value(lean.reset(), dummy.reset(), "reset with options")
    assert_same_value(lean.reset(), dummy.reset(), "reset without them")  # options are used once
    assert lean.render_mode is None and dummy.render_mode == "rgb_array"  # SB3's asks for one, the lean env does not
    drawn, dummy = make_vec_env("CartPole-v1", 2, seed=3, render_mode="rgb_array"), sb3_make_vec_env("CartPole-v1", 2, seed=3)
    drawn.reset(), dummy.reset()
    assert drawn.render_mode == "rgb_array" and np.array_equal(drawn.render(), dummy.render())
    assert lean.get_attr("gravity") == dummy.get_attr("gravity")
    lean.set_attr("spam", 1, indices=[1])
    assert lean.get_attr("spam", indices=1) == [1]
    assert lean.env_is_wrapped(Monitor) == [True, True]
    assert lean.env_is_wrapped(gym.wrappers.TimeLimit) == [True, True]


def test_infos_are_fresh_dicts() -> None:
    env = make_vec_env(tuple_cartpole, 2, seed=0)
    env.reset()
    actions = random_actions(env, 40)
    kept = env.step(actions[0])[3]
    kept[0]["TimeLimit.truncated"] = "changed"
    kept[0]["mine"] = 1
    kept[0]["trace"].append(99)  # a mutable value of the env's is a copy
    for action in actions[1:]:
        infos = env.step(action)[3]
        assert "mine" not in infos[0] and infos[0]["TimeLimit.truncated"] in (True, False)
        assert 99 not in infos[0]["trace"] and infos[0] is not kept[0]
        if "terminal_observation" in infos[1]:
            terminal = infos[1]["terminal_observation"]
            terminal[0][:] = np.nan  # the terminal observation is a copy too
            assert not np.isnan(env.buf_obs[0]).any()
    assert kept[0]["mine"] == 1


def test_fresh_info_copies_only_what_is_mutable() -> None:
    info = {"TimeLimit.truncated": False, "x": np.float32(1.5), "name": "a", "n": None}
    copy = fresh_info(info)
    assert copy == info and copy is not info and all(copy[k] is info[k] for k in info)
    array = {"a": np.zeros(2), "TimeLimit.truncated": True}
    copy = fresh_info(array)
    assert copy["a"] is not array["a"] and np.array_equal(copy["a"], array["a"])


class KeepInfos(BaseCallback):
    """Keeps every step's infos and scribbles on them."""

    def __init__(self) -> None:
        super().__init__()
        self.kept: list[list[dict[str, Any]]] = []

    def _on_step(self) -> bool:
        for info in self.locals["infos"]:
            assert "scribbled" not in info
            info["scribbled"] = True
            info.pop("TimeLimit.truncated")
        self.kept.append(self.locals["infos"])
        return True


#: PPO's settings, small
TRAIN_CASES = {
    "CartPole-v1": (4, dict(n_steps=64, batch_size=64, n_epochs=2), 512),
    "LunarLander-v3": (4, dict(n_steps=128, batch_size=128, n_epochs=2), 1024),
    "Pendulum-v1": (2, dict(n_steps=256, batch_size=128, n_epochs=2), 1024),
}


@pytest.mark.parametrize("normalize", [False, True], ids=["plain", "VecNormalize"])
@pytest.mark.parametrize("env_id", list(TRAIN_CASES))
def test_learn_gives_the_parameters_of_make_vec_env(env_id: str, normalize: bool) -> None:
    if normalize and env_id == "LunarLander-v3":
        pytest.skip("VecNormalize: CartPole-v1 and Pendulum-v1")
    n_envs, config, budget = TRAIN_CASES[env_id]
    models = []
    for env in both(env_id, n_envs, seed=0):
        env = VecNormalize(env) if normalize else env
        model = XPPO("MlpPolicy", env, seed=0, device="cpu", policy_kwargs=dict(net_arch=[32]), **config)
        model.learn(budget, callback=KeepInfos())
        models.append(model)
    lean, dummy = models
    assert isinstance(lean.get_env().unwrapped, LeanVecEnv) and type(dummy.get_env().unwrapped) is DummyVecEnv
    assert params_equal(lean.policy, dummy.policy)
    assert len(lean.ep_info_buffer) > 0
    drop_t = [[{k: v for k, v in info.items() if k != "t"} for info in model.ep_info_buffer] for model in models]
    assert drop_t[0] == drop_t[1]
    if normalize:
        assert np.array_equal(lean.get_env().obs_rms.mean, dummy.get_env().obs_rms.mean)
        assert np.array_equal(lean.get_env().ret_rms.var, dummy.get_env().ret_rms.var)


def test_algorithms_vectorize_an_env_id_leanly() -> None:
    for model in (
        XPPO("MlpPolicy", "CartPole-v1", n_steps=16, batch_size=16, device="cpu"),
        MaskableXPPO("MlpPolicy", "CartPole-v1", n_steps=16, batch_size=16, device="cpu"),
        RecurrentXPPO("MlpLstmPolicy", "CartPole-v1", n_steps=16, batch_size=16, device="cpu"),
        XPPO("MlpPolicy", gym.make("Pendulum-v1"), n_steps=16, batch_size=16, device="cpu"),
    ):
        assert type(model.get_env()) is LeanVecEnv
        assert model.get_env().env_is_wrapped(Monitor) == [True]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        evaluate_policy(model, model.get_env(), n_eval_episodes=1)
    assert not [w for w in caught if "Monitor" in str(w.message)]  # it warns of an env without a Monitor


def test_a_users_vec_env_is_kept() -> None:
    for env in (DummyVecEnv([lambda: gym.make("CartPole-v1")]), sb3_make_vec_env("CartPole-v1", 2)):
        model = XPPO("MlpPolicy", env, n_steps=16, batch_size=16, device="cpu")
        assert model.get_env() is env
        model.set_env(env)
        assert model.get_env() is env


def test_one_env_from_an_id_learns_as_sb3s_dummy_vec_env() -> None:
    config = dict(n_steps=64, batch_size=32, n_epochs=2, seed=3, device="cpu", policy_kwargs=dict(net_arch=[16]))
    lean = XPPO("MlpPolicy", "CartPole-v1", **config).learn(256)
    dummy = XPPO("MlpPolicy", DummyVecEnv([lambda: Monitor(gym.make("CartPole-v1"))]), **config).learn(256)
    assert type(lean.get_env()) is LeanVecEnv and params_equal(lean.policy, dummy.policy)


def test_backends() -> None:
    assert type(make_vec_env("CartPole-v1")) is LeanVecEnv
    assert type(make_vec_env("CartPole-v1", 2, backend="dummy")) is DummyVecEnv
    # the contract's order: (env_id, n_envs, backend, seed)
    positional, keywords = make_vec_env("CartPole-v1", 2, "dummy", 3), make_vec_env("CartPole-v1", 2, backend="dummy", seed=3)
    assert type(positional) is DummyVecEnv and np.array_equal(positional.reset(), keywords.reset())


def test_a_seed_where_sb3_takes_it_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"backend must be a string.*got int 0.*pass seed=\.\.\."):
        make_vec_env("CartPole-v1", 2, 0)


@pytest.mark.slow
def test_subproc_backend() -> None:
    subproc = make_vec_env("CartPole-v1", 2, backend="subproc", seed=0, vec_env_kwargs=dict(start_method="spawn"))
    lean = make_vec_env("CartPole-v1", 2, seed=0)
    assert type(subproc) is SubprocVecEnv
    assert np.array_equal(subproc.reset(), lean.reset())
    for action in random_actions(lean, 30):
        # SubprocVecEnv's rewards are float64, DummyVecEnv's float32
        for x, y in zip(subproc.step(action)[:3], lean.step(action)[:3], strict=True):
            assert np.array_equal(x, y)
    subproc.close()


@pytest.mark.parametrize(
    ("backend", "match"),
    [
        ("Lean", r"unknown backend 'Lean': choose one of 'lean', 'dummy', 'subproc', 'envpool', 'ray'"),
    ],
)
def test_backend_errors(backend: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make_vec_env("CartPole-v1", 2, backend=backend)


def test_vec_env_cls_is_the_backends() -> None:
    with pytest.raises(ValueError, match="pass backend="):
        make_vec_env("CartPole-v1", 2, vec_env_cls=DummyVecEnv)


def test_monitor_files_are_the_monitors(tmp_path: Path) -> None:
    lean, dummy = (
        make_vec_env("CartPole-v1", 2, seed=0, backend=backend, monitor_dir=str(tmp_path / backend))
        for backend in ("lean", "dummy")
    )
    lean.reset(), dummy.reset()
    for action in random_actions(lean, 100):
        lean.step(action), dummy.step(action)
    lean.close(), dummy.close()
    for rank in range(2):
        lean_rows, dummy_rows = (
            pandas.read_csv(tmp_path / backend / f"{rank}.monitor.csv", skiprows=1) for backend in ("lean", "dummy")
        )
        assert len(lean_rows) > 0 and lean_rows.drop(columns="t").equals(dummy_rows.drop(columns="t"))


# --- rl-zoo3: python -m sb3_xppo.train --vec-env lean -----------------------------------------------------------------


@pytest.fixture
def built_models(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """rl-zoo3 builds and saves the model as usual but ``learn`` does nothing; the models are recorded."""
    models: list[Any] = []
    monkeypatch.setattr(ExperimentManager, "learn", lambda self, model: models.append(model))
    return models


@pytest.mark.parametrize(
    ("args", "vec_env_class"),
    [([], LeanVecEnv), (["--vec-env", "lean"], LeanVecEnv), (["--vec-env=dummy"], DummyVecEnv)],
)
def test_train_vec_env(args: list[str], vec_env_class: type, tmp_path, monkeypatch, built_models) -> None:
    monkeypatch.chdir(tmp_path)
    train_main(["--env", "CartPole-v1", *args])
    assert type(built_models[0].get_env().unwrapped) is vec_env_class
    assert ExperimentManager.default_vec_env_cls is None
    saved_args = yaml.load((tmp_path / "logs/xppo/CartPole-v1_1/CartPole-v1/args.yml").read_text(), Loader=yaml.UnsafeLoader)
    assert saved_args["vec_env"] == "dummy"  # rl-zoo3's name: the same numbers


def test_train_vec_env_arguments() -> None:
    assert zoo.split_vec_env_arg(["--env", "X", "--vec-env", "subproc", "-n", "5"]) == ("subproc", ["--env", "X", "-n", "5"])
    assert zoo.split_vec_env_arg(["--vec-env=dummy", "--vec-env", "lean"]) == ("lean", [])
    assert zoo.split_vec_env_arg(["--verbose", "0"]) == ("lean", ["--verbose", "0"])
    with pytest.raises(SystemExit):
        zoo.split_vec_env_arg(["--vec-env", "Lean"])


@pytest.mark.slow
def test_train_with_lean_envs_writes_monitor_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    train_main(["--env", "CartPole-v1", "-n", "512", "--seed", "0", "--eval-freq", "-1", "-params", "n_envs:2", "n_steps:128"])
    run_dir = tmp_path / "logs" / "xppo" / "CartPole-v1_1"
    assert len(load_results(str(run_dir))) > 0  # the Monitors' CSV files, written from the lean env's steps
    assert ExperimentManager.default_vec_env_cls is None


def test_vec_env_names_have_reference_entries() -> None:
    from test_docs import documented_objects

    import sb3_xppo.vec_env

    entries = [obj for _, obj in documented_objects()]
    missing = [name for name in sb3_xppo.vec_env.__all__ if not any(getattr(sb3_xppo.vec_env, name) is e for e in entries)]
    missing += [name for name in ["split_vec_env_arg"] if not any(getattr(zoo, name) is e for e in entries)]
    assert not missing
