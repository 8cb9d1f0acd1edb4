"""
EnvPool as a backend (``sb3_xppo.vec_env.EnvPoolVecEnv``, ``make_vec_env(backend="envpool")``, ``--vec-env envpool``
and an entry's ``vec_env`` key): gymnasium's spaces, the same CartPole step for step, SB3's auto-reset
(``terminal_observation``) at termination and truncation, the Monitor's episode statistics, seeds, VecNormalize,
PPO and XPPO, and a clear error for everything it cannot run.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import yaml
from helpers import ToDict
from rl_zoo3.exp_manager import ExperimentManager
from stable_baselines3 import PPO
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.monitor import Monitor, load_results
from stable_baselines3.common.vec_env import VecNormalize

from sb3_xppo import XPPO, zoo
from sb3_xppo.train import main as train_main
from sb3_xppo.vec_env import BACKEND_BUILDERS, ENVPOOL_ENV_IDS, EnvPoolVecEnv, LeanVecEnv, make_vec_env

envpool = pytest.importorskip("envpool")


def random_actions(env: Any, steps: int, seed: int = 0) -> list[np.ndarray]:
    """``steps`` batches of actions, drawn from the env's action space seeded ``seed``."""
    space = env.action_space
    space.seed(seed)
    return [np.array([space.sample() for _ in range(env.num_envs)]) for _ in range(steps)]


# --- what runs, with gymnasium's spaces ---------------------------------------------------------------------------------


def test_env_ids_are_envpools_and_gymnasiums() -> None:
    available = set(envpool.list_all_envs())
    assert {"LunarLander-v3", "Hopper-v5", "CartPole-v1", "BipedalWalker-v3"} <= ENVPOOL_ENV_IDS.keys()
    for env_id, task_id in ENVPOOL_ENV_IDS.items():
        assert task_id in available and gym.spec(env_id) is not None


@pytest.mark.parametrize("env_id", ["CartPole-v1", "LunarLander-v3", "Pendulum-v1", "BipedalWalker-v3", "Hopper-v5"])
def test_spaces_and_steps_are_gymnasiums(env_id: str) -> None:
    env = make_vec_env(env_id, 3, backend="envpool", seed=0)
    with gym.make(env_id) as reference:
        assert env.observation_space == reference.observation_space and env.action_space == reference.action_space
    obs = env.reset()
    assert obs.shape == (3, *env.observation_space.shape) and obs.dtype == env.observation_space.dtype
    for actions in random_actions(env, 5):
        obs, rewards, dones, infos = env.step(actions)
        assert obs.shape == (3, *env.observation_space.shape) and obs.dtype == env.observation_space.dtype
        assert rewards.shape == (3,) and rewards.dtype == np.float32
        assert dones.shape == (3,) and dones.dtype == bool
        assert len(infos) == 3 and all(type(info["TimeLimit.truncated"]) is bool for info in infos)
    env.close()


def test_cartpole_steps_as_gymnasiums() -> None:
    """EnvPool's CartPole, its state set into gymnasium's, steps as gymnasium's: the same observations (to float32's
    rounding), rewards and terminations, for 300 steps across several episodes."""
    env = EnvPoolVecEnv("CartPole-v1", 1, seed=3)
    reference = gym.make("CartPole-v1").unwrapped
    reference.reset(seed=0)
    reference.state = env.reset()[0].astype(np.float64)
    episodes = 0
    for actions in random_actions(env, 300):
        obs, rewards, dones, infos = env.step(actions)
        expected, reward, terminated, _, _ = reference.step(int(actions[0]))
        last = infos[0]["terminal_observation"] if dones[0] else obs[0]
        np.testing.assert_allclose(last, expected, rtol=0, atol=1e-6)
        assert rewards[0] == reward and dones[0] == terminated
        if dones[0]:
            episodes += 1
            reference.reset()
            reference.state = obs[0].astype(np.float64)  # the reset observation, already returned
    assert episodes >= 5


# --- SB3's auto-reset, time limits and episode statistics --------------------------------------------------------------


def test_terminal_observation_at_termination(tmp_path: Path) -> None:
    env = make_vec_env("CartPole-v1", 2, backend="envpool", seed=0, monitor_dir=str(tmp_path))
    env.reset()
    step, dones = 0, np.zeros(2, dtype=bool)
    while not dones.any():
        obs, _, dones, infos = env.step(np.zeros(2, dtype=np.int64))  # always left: falls within ~10 steps
        step += 1
    for i in np.flatnonzero(dones):
        info = infos[i]
        terminal = info["terminal_observation"]
        assert abs(terminal[0]) > 2.4 or abs(terminal[2]) > 12 * 2 * np.pi / 360  # out of CartPole's bounds
        assert info["TimeLimit.truncated"] is False
        assert np.abs(obs[i]).max() <= 0.05  # the reset observation, in the same step
        assert info["episode"]["r"] == info["episode"]["l"] == step and info["episode"]["t"] >= 0
    for i in np.flatnonzero(~dones):
        assert "terminal_observation" not in infos[i] and "episode" not in infos[i]
    env.close()
    rows = load_results(str(tmp_path))  # the Monitor's CSV files, one per env
    assert len(rows) == dones.sum() and set(rows["l"]) == {step}


def test_terminal_observation_at_truncation() -> None:
    env = make_vec_env("CartPole-v1", 3, backend="envpool", seed=1, env_kwargs=dict(max_episode_steps=5))
    first = env.reset()
    previous = first
    for step in range(1, 6):
        obs, _, dones, infos = env.step(np.array([0, 1, 0]))
        assert dones.all() == (step == 5)
        if step < 5:
            previous = obs
    for i, info in enumerate(infos):
        assert info["TimeLimit.truncated"] is True and info["episode"]["l"] == 5 and info["episode"]["r"] == 5.0
        assert not np.array_equal(info["terminal_observation"], previous[i]) and not np.array_equal(obs[i], first[i])
    env.close()


def test_episode_statistics_reach_sb3() -> None:
    env = make_vec_env("CartPole-v1", 4, backend="envpool", seed=0, env_kwargs=dict(max_episode_steps=50))
    model = PPO("MlpPolicy", env, n_steps=64, batch_size=64, n_epochs=1, policy_kwargs=dict(net_arch=[16]), seed=0)
    model.learn(512)
    episodes = list(model.ep_info_buffer)
    assert len(episodes) >= 10 and all(e["r"] == e["l"] for e in episodes)  # CartPole: a reward of 1 per step
    assert env.env_is_wrapped(Monitor) == [True] * 4 and env.env_is_wrapped(gym.Wrapper) == [False] * 4
    returns, lengths = evaluate_policy(model, env, n_eval_episodes=4, return_episode_rewards=True)
    assert returns == lengths  # whole episodes, from the episode infos
    env.close()


# --- seeds --------------------------------------------------------------------------------------------------------------


def trajectory(env: Any, steps: int = 60) -> list[np.ndarray]:
    out = [env.reset()]
    for actions in random_actions(env, steps):
        out.append(env.step(actions)[0])
    return out


def test_seeds() -> None:
    a, b, c = (EnvPoolVecEnv("LunarLander-v3", 3, seed=seed) for seed in (7, 7, 8))
    ta, tb, tc = trajectory(a), trajectory(b), trajectory(c)
    assert all(np.array_equal(x, y) for x, y in zip(ta, tb, strict=True))
    assert not np.array_equal(ta[0], tc[0])
    assert np.array_equal(ta[0][1], tc[0][0])  # env i of seed s is seeded s + i, as env 0 of seed s + i
    assert a.seed(8) == [8, 9, 10]  # SB3's: the next reset
    assert np.array_equal(a.reset(), tc[0])
    assert not np.array_equal(b.reset(), tb[0])  # without seed(): the random streams go on
    for env in (a, b, c):
        env.close()


# --- VecNormalize, PPO, XPPO --------------------------------------------------------------------------------------------


def test_vec_normalize_on_top() -> None:
    env = VecNormalize(make_vec_env("Pendulum-v1", 2, backend="envpool", seed=0, env_kwargs=dict(max_episode_steps=20)))
    env.reset()
    for actions in random_actions(env, 20):
        obs, _, dones, infos = env.step(actions)
    assert dones.all()  # the 20th step: the time limit
    for info in infos:
        terminal = info["terminal_observation"]  # normalized, as VecNormalize does to a DummyVecEnv's
        assert terminal.shape == (3,) and np.abs(terminal).max() <= env.clip_obs
    assert env.obs_rms.count > 40 and np.abs(obs).max() <= env.clip_obs
    assert env.ret_rms.count > 40
    env.close()


@pytest.mark.parametrize(("algo", "env_id"), [(XPPO, "LunarLander-v3"), (PPO, "Hopper-v5")])
def test_learn(algo: type[PPO], env_id: str) -> None:
    env = VecNormalize(make_vec_env(env_id, 2, backend="envpool", seed=0))
    model = algo("MlpPolicy", env, n_steps=64, batch_size=64, n_epochs=2, policy_kwargs=dict(net_arch=[32]), seed=0)
    model.learn(256)
    assert model.num_timesteps == 256 and isinstance(model.get_env().unwrapped, EnvPoolVecEnv)
    env.close()


def test_same_trained_parameters_for_the_same_seed() -> None:
    states = []
    for _ in range(2):
        env = make_vec_env("CartPole-v1", 2, backend="envpool", seed=5)
        model = XPPO("MlpPolicy", env, n_steps=32, batch_size=32, n_epochs=1, policy_kwargs=dict(net_arch=[8]), seed=5)
        states.append(model.learn(128).policy.state_dict())
        env.close()
    assert all(np.array_equal(x.numpy(), y.numpy()) for x, y in zip(states[0].values(), states[1].values(), strict=True))


# --- what EnvPool cannot do: refused, never done otherwise -------------------------------------------------------------


def test_envpool_is_a_backend() -> None:
    assert "envpool" in BACKEND_BUILDERS
    assert type(make_vec_env("CartPole-v1", 2, backend="envpool")) is EnvPoolVecEnv


@pytest.mark.parametrize("env_id", ["FrozenLake-v1", "CarRacing-v3", "Hopper-v4", "NoSuchEnv-v0"])
def test_unknown_env(env_id: str) -> None:
    with pytest.raises(ValueError, match=rf"the EnvPool backend has no env '{env_id}'; it runs CartPole-v1, .*Hopper-v5"):
        make_vec_env(env_id, 2, backend="envpool")
    with pytest.raises(ValueError, match=f"no env '{env_id}'"):
        EnvPoolVecEnv(env_id)


def custom_env() -> gym.Env:
    return ToDict(gym.make("CartPole-v1"))


@pytest.mark.parametrize(
    ("env_id", "kwargs", "match"),
    [
        ("CartPole-v1", dict(wrapper_class=ToDict), "cannot apply the wrapper ToDict"),
        (custom_env, {}, "cannot apply the wrapper ToDict"),
        ("Pendulum-v1", dict(env_kwargs=dict(g=9.0)), r"cannot apply the env keywords \['g'\]"),
        ("CartPole-v1", dict(monitor_kwargs=dict(info_keywords=("x",))), "info_keywords"),
        (
            "CartPole-v1",
            dict(vec_env_kwargs=dict(seed=3)),
            r"envpool_kwargs \['seed'\] cannot be given .*set by EnvPoolVecEnv",
        ),
        ("CartPole-v1", dict(vec_env_kwargs=dict(threads=3)), r"\['threads'\] cannot be given.*'num_threads'"),
        ("CartPole-v1", dict(start_index=2, monitor_dir="unused"), "from rank 0"),
        ("CartPole-v1", dict(vec_env_cls=LeanVecEnv), "pass backend="),
    ],
)
def test_what_envpool_cannot_run(env_id: Any, kwargs: dict[str, Any], match: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=match):
        make_vec_env(env_id, 2, backend="envpool", **kwargs)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="n_envs must be an int >= 1"):
        EnvPoolVecEnv("CartPole-v1", 0)
    with pytest.raises(ValueError, match="max_episode_steps must be None or an int >= 1"):
        EnvPoolVecEnv("CartPole-v1", 1, max_episode_steps=0)
    with pytest.raises(ValueError, match="seed must be None or an int >= 0"):
        EnvPoolVecEnv("CartPole-v1", 1, seed=-1)
    with pytest.raises(ValueError, match="env_fns is empty"):
        EnvPoolVecEnv.from_env_fns([])


def test_no_fallback_without_envpool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "envpool", None)  # `import envpool` fails
    with pytest.raises(ImportError, match="the EnvPool backend needs the envpool package"):
        make_vec_env("CartPole-v1", 2, backend="envpool")


def test_what_cpp_envs_lack() -> None:
    env = EnvPoolVecEnv("CartPole-v1", 2, seed=0)
    with pytest.raises(RuntimeError, match=r"call reset\(\) before step\(\)"):
        env.step(np.zeros(2, dtype=np.int64))
    assert env.get_attr("render_mode") == [None, None] and env.render_mode is None
    assert env.get_attr("action_space", indices=[1]) == [env.action_space]
    assert env.has_attr("render_mode") and not env.has_attr("gravity")
    with pytest.raises(AttributeError, match=r"get_attr knows .* not 'gravity'"):
        env.get_attr("gravity")
    with pytest.raises(NotImplementedError, match="cannot be set"):
        env.set_attr("gravity", 1.0)
    with pytest.raises(NotImplementedError, match="cannot be called"):
        env.env_method("get_episode_rewards")
    with pytest.raises(NotImplementedError, match="does not render"):
        env.render()
    with pytest.raises(NotImplementedError, match="does not render"):
        env.get_images()
    env.set_options(None)
    env.set_options([{}, {}])
    with pytest.raises(ValueError, match="take no reset options"):
        env.set_options({"low": -0.1})
    env.close()


# --- rl-zoo3: --vec-env envpool and an entry's vec_env key -------------------------------------------------------------


@pytest.fixture
def built_models(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """rl-zoo3 builds and saves the model as usual but ``learn`` does nothing; the models are recorded."""
    models: list[Any] = []
    monkeypatch.setattr(ExperimentManager, "learn", lambda self, model: models.append(model))
    return models


def zoo_config(tmp_path: Path, **keys: Any) -> str:
    """A one-entry config for CartPole-v1 (2 envs, 64 steps) with ``keys`` added."""
    entry = dict(n_envs=2, n_timesteps=256, policy="MlpPolicy", n_steps=64, batch_size=64, **keys)
    path = tmp_path / "conf.yml"
    path.write_text(yaml.safe_dump({"CartPole-v1": entry}))
    return str(path)


@pytest.mark.parametrize(
    ("keys", "args", "vec_env_class"),
    [
        ({}, ["--vec-env", "envpool"], EnvPoolVecEnv),
        ({"normalize": True}, ["--vec-env=envpool"], EnvPoolVecEnv),
        ({"vec_env": "envpool"}, [], EnvPoolVecEnv),
        ({"vec_env": "envpool"}, ["--vec-env", "lean"], LeanVecEnv),  # the command line wins
        ({"vec_env": "lean"}, [], LeanVecEnv),
    ],
)
def test_train_vec_env_envpool(keys, args, vec_env_class, tmp_path, monkeypatch, built_models) -> None:
    monkeypatch.chdir(tmp_path)
    preprocess = ExperimentManager._preprocess_hyperparams
    train_main(["--env", "CartPole-v1", "--conf-file", zoo_config(tmp_path, **keys), "--eval-freq", "64", *args])
    env = built_models[0].get_env()
    assert type(env.unwrapped) is vec_env_class and isinstance(env, VecNormalize) == keys.get("normalize", False)
    assert ExperimentManager.default_vec_env_cls is None and ExperimentManager._preprocess_hyperparams is preprocess
    saved = yaml.load((tmp_path / "logs/xppo/CartPole-v1_1/CartPole-v1/config.yml").read_text(), Loader=yaml.UnsafeLoader)
    assert saved.get("vec_env") == keys.get("vec_env")  # the run's config keeps the entry's key


def test_train_vec_env_key_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, built_models) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"vec_env: 'pool' is not a VecEnv .*'envpool'"):
        train_main(["--env", "CartPole-v1", "--conf-file", zoo_config(tmp_path, vec_env="pool")])
    with pytest.raises(ValueError, match="cannot apply the wrapper ToDict"):
        train_main(
            ["--env", "CartPole-v1", "--conf-file", zoo_config(tmp_path, env_wrapper="helpers.ToDict"), "--vec-env", "envpool"]
        )
    assert zoo.split_vec_env_arg(["--vec-env", "envpool", "-n", "5"]) == ("envpool", ["-n", "5"])
    assert zoo.split_vec_env_arg(["-n", "5"], default=None) == (None, ["-n", "5"])


@pytest.mark.slow
def test_train_with_envpool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real (tiny) run: training, evaluation on EnvPool envs, the Monitor files, VecNormalize's statistics saved."""
    monkeypatch.chdir(tmp_path)
    config = zoo_config(tmp_path, normalize=True, vec_env="envpool")
    train_main(
        [
            "--env",
            "CartPole-v1",
            "--conf-file",
            config,
            "-n",
            "256",
            "--seed",
            "0",
            "--eval-freq",
            "128",
            "--eval-episodes",
            "2",
        ]
    )
    run_dir = tmp_path / "logs" / "xppo" / "CartPole-v1_1"
    assert len(load_results(str(run_dir))) > 0
    assert (run_dir / "CartPole-v1" / "vecnormalize.pkl").exists() and (run_dir / "evaluations.npz").exists()
