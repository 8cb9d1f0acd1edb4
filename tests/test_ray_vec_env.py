"""
:class:`~sb3_xppo.vec_env.RayVecEnv` on a real Ray cluster: a head node and a worker node on 127.0.0.1 (one CPU each,
100 MB object stores), started once for this module and stopped at its end. The steps and the parameters after
``learn()`` (XPPO, MaskableXPPO, stock SAC) are those of SB3's ``make_vec_env`` (``DummyVecEnv``) for the same seeds; a
killed actor and a step past ``step_timeout`` raise named errors within the timeout, the model intact; a closed one
refuses.

The cluster is Ray's own test cluster (``ray.cluster_utils.Cluster``): the nodes' processes (GCS, raylets, workers)
are those of ``ray start --head`` and ``ray start --address``, started by this process, and they die with it even where
it is killed. Under pytest-xdist each worker that runs these tests starts a cluster of its own, once (its GCS and
dashboard-agent ports chosen free, the others picked by Ray, its own session folder): two clusters side by side do not
meet. (xdist's ``--dist loadgroup``, which would put them on one worker, does not group under pytest 9.)
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

# Ray turns 127.0.0.1 into the machine's network address unless it runs as a single machine (its Windows and macOS
# mode); in that mode every connection of the cluster stays on the loopback interface. Read when Ray is imported.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import helpers
import torch as th
import yaml
from helpers import ToDict, params_equal
from rl_zoo3.exp_manager import ExperimentManager
from stable_baselines3 import SAC
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env as sb3_make_vec_env
from stable_baselines3.common.monitor import Monitor
from test_vec_env import assert_same_value, random_actions

from sb3_xppo import XPPO, MaskableXPPO, zoo
from sb3_xppo.train import main as train_main
from sb3_xppo.vec_env import RayEnvActorError, RayEnvTimeoutError, RayVecEnv, make_vec_env
from sb3_xppo.vec_env.ray_vec_env import import_ray

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

# the actors unpickle the envs of these modules by value: the cluster's workers do not have tests/ on their path
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
ray.cloudpickle.register_pickle_by_value(helpers)

LOOPBACK = "127.0.0.1"
#: each node's object store, bytes
OBJECT_STORE = 100 * 1024 * 1024


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def cluster() -> Iterator[str]:
    """A head node and a worker node on 127.0.0.1, this process connected to them; :return: (yields) its address"""
    nodes = Cluster()
    try:
        node = dict(num_cpus=1, node_ip_address=LOOPBACK, object_store_memory=OBJECT_STORE, include_dashboard=False)
        nodes.add_node(**node, gcs_server_port=free_port(), dashboard_agent_listen_port=free_port())
        nodes.add_node(**node)
        ray.init(address=nodes.address, log_to_driver=False)
        yield nodes.address
    finally:
        ray.shutdown()
        nodes.shutdown()
        # the Cluster wrote its address where a plain `ray.init()` looks for this machine's cluster: take it back
        address_file = Path(ray._common.utils.get_ray_address_file(None))
        if nodes.address is not None and address_file.exists() and address_file.read_text().strip() == nodes.address:
            address_file.unlink()


class Sleepy(gym.Wrapper):
    """An env whose steps sleep ``delay`` seconds (``env_method("set_delay", ...)``)."""

    delay = 0.0

    def set_delay(self, delay: float) -> None:
        self.delay = delay

    def step(self, action: Any) -> Any:
        time.sleep(self.delay)
        return self.env.step(action)


def sleepy_cartpole() -> gym.Env:
    return Sleepy(gym.make("CartPole-v1"))


def grid_maze() -> gym.Env:
    from sb3_xppo.envs import GRID_MAZE_ID

    return gym.make(GRID_MAZE_ID)


def sorted_items(infos: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """:return: the info dicts with their keys sorted"""
    return [dict(sorted(info.items())) for info in infos]


def assert_released(env: RayVecEnv, timeout: float = 60.0) -> None:
    """
    Every actor of ``env`` is gone within ``timeout`` seconds: ``ray.kill`` is asynchronous, so a call made just
    after it may still be answered.
    """
    deadline = time.monotonic() + timeout
    for handle in env.actors:
        while True:
            try:
                ray.get(handle.describe.remote(), timeout=timeout)
            except ray.exceptions.RayActorError:
                break
            assert time.monotonic() < deadline, f"an actor still answers {timeout} s after its release"
            time.sleep(0.1)


# --- without a cluster: the arguments ---------------------------------------------------------------------------------


def unpicklable_factory() -> Any:
    lock = threading.Lock()
    return lambda: (lock, gym.make("CartPole-v1"))[1]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(env=gym.make("CartPole-v1")), TypeError, "env must be an env id or a picklable env factory"),
        (dict(env=42), TypeError, "env must be an env id"),
        (dict(env=unpicklable_factory()), TypeError, "cannot be pickled for the Ray actors"),
        (dict(n_envs=0), ValueError, "n_envs must be at least 1, got 0"),
        (dict(n_envs=2.0), TypeError, "n_envs must be an int"),
        (dict(envs_per_actor=0), ValueError, "envs_per_actor must be at least 1"),
        (dict(step_timeout=0), ValueError, "step_timeout must be a positive, finite number of seconds, got 0"),
        (dict(step_timeout=float("inf")), ValueError, "step_timeout must be a positive, finite"),
        (dict(step_timeout="60"), TypeError, "step_timeout must be a number of seconds"),
        (dict(start_timeout=-1.0), ValueError, "start_timeout must be a positive"),
        (dict(seed="0"), TypeError, "seed must be an int or None"),
        (dict(address=6379), TypeError, "address must be None or a Ray cluster's address"),
        (dict(actor_options=["num_cpus"]), TypeError, "actor_options must be a dict"),
        (dict(actor_options=dict(max_restarts=2)), ValueError, "may not set max_restarts: RayVecEnv never restarts"),
        (dict(vec_env_cls=None), TypeError, "RayVecEnv got vec_env_cls"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    arguments = dict(env="CartPole-v1", n_envs=2) | kwargs
    connected = ray.is_initialized()
    with pytest.raises(error, match=match):
        RayVecEnv(**arguments)
    with pytest.raises(error, match=match):
        make_vec_env(arguments.pop("env"), arguments.pop("n_envs"), backend="ray", **arguments)
    assert ray.is_initialized() == connected  # refused before Ray is started or joined


def test_env_fns_are_functions() -> None:
    for env_fns in ([], "CartPole-v1", [gym.make("CartPole-v1")]):
        with pytest.raises(TypeError, match="env_fns must be a non-empty list of functions that build an env"):
            RayVecEnv.from_env_fns(env_fns)


def test_ray_is_an_optional_dependency(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r'pip install "sb3-xppo\[ray\]"'):
        import_ray()


# --- on the cluster ---------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_steps_attributes_and_render_are_dummy_vec_envs(cluster: str) -> None:
    # a Dict observation space; episodes that end terminated and truncated
    kwargs = dict(seed=0, wrapper_class=ToDict, env_kwargs=dict(max_episode_steps=20))
    # an actor that holds a CPU: one on each node (one CPU each)
    env = make_vec_env(
        "CartPole-v1", 3, backend="ray", envs_per_actor=2, actor_options=dict(num_cpus=1), render_mode="rgb_array", **kwargs
    )
    dummy = sb3_make_vec_env("CartPole-v1", 3, **kwargs)
    assert type(env) is RayVecEnv
    assert [p.env_indices for p in env.placements] == [(0, 1), (2,)]
    assert all(p.node_ip == LOOPBACK for p in env.placements)
    assert {p.node_id for p in env.placements} == {node["NodeID"] for node in ray.nodes() if node["Alive"]}
    assert_same_value(env.reset(), dummy.reset(), "reset")
    assert_same_value(env.reset_infos, dummy.reset_infos, "reset_infos")
    ends = []
    for t, action in enumerate(random_actions(dummy, 150)):
        (*ray_step, ray_infos), (*dummy_step, dummy_infos) = env.step(action), dummy.step(action)
        assert_same_value(ray_step, dummy_step, f"step {t}")
        # rl-zoo3, imported here, puts its TimeLimit in gymnasium (rl_zoo3.gym_patches), which writes the info's
        # "TimeLimit.truncated" first; the actors' processes have gymnasium's: the same items, in another order
        assert_same_value(sorted_items(ray_infos), sorted_items(dummy_infos), f"infos {t}")
        assert_same_value(env.reset_infos, dummy.reset_infos, f"reset_infos {t}")
        ends += [info["TimeLimit.truncated"] for info in dummy.buf_infos if "terminal_observation" in info]
    assert any(ends) and not all(ends)
    assert env.env_method("get_episode_lengths", indices=[2, 0]) == dummy.env_method("get_episode_lengths", indices=[2, 0])
    assert env.get_attr("gravity", indices=-1) == [9.8]
    env.set_attr("spam", 1, indices=[1, 2])
    assert env.get_attr("spam", indices=[2, 1]) == [1, 1]
    assert env.env_is_wrapped(Monitor) == [True] * 3 and env.has_attr("gravity") and not env.has_attr("action_masks")
    with pytest.raises(AttributeError):
        env.get_attr("no_such_attribute")
    assert env.render_mode == "rgb_array" and np.array_equal(env.render(), dummy.render())
    # seeds and reset options of the next reset, as make_vec_env's
    assert env.seed(7) == dummy.seed(7)
    for venv in (env, dummy):
        venv.set_options({"low": -0.01, "high": 0.01})
    assert_same_value(env.reset(), dummy.reset(), "seeded reset with options")
    env.close()
    env.close()  # a second close does nothing
    assert_released(env)
    for call in (env.reset, lambda: env.step(random_actions(dummy, 1)[0]), lambda: env.get_attr("gravity")):
        with pytest.raises(RuntimeError, match="this RayVecEnv is closed and its actors are released"):
            call()


@pytest.mark.slow
def test_xppo_learns_as_over_dummy_vec_env_and_refuses_after_close(cluster: str) -> None:
    config = dict(n_steps=64, batch_size=64, n_epochs=2, seed=0, device="cpu", policy_kwargs=dict(net_arch=[32]))
    env = RayVecEnv("CartPole-v1", 4, envs_per_actor=2, address=cluster, seed=0)
    models = [XPPO("MlpPolicy", venv, **config).learn(512) for venv in (env, sb3_make_vec_env("CartPole-v1", 4, seed=0))]
    assert params_equal(models[0].policy, models[1].policy)
    episodes = [[{k: v for k, v in info.items() if k != "t"} for info in model.ep_info_buffer] for model in models]
    assert len(episodes[0]) > 0 and episodes[0] == episodes[1]
    env.close()
    for reset_num_timesteps in (True, False):
        with pytest.raises(RuntimeError, match="closed"):
            models[0].learn(64, reset_num_timesteps=reset_num_timesteps)


@pytest.mark.slow
def test_sac_learns_as_over_dummy_vec_env(cluster: str) -> None:
    config = dict(learning_starts=20, batch_size=32, buffer_size=1000, seed=0, device="cpu", policy_kwargs=dict(net_arch=[16]))
    env = RayVecEnv("Pendulum-v1", 2, seed=0)  # one env per actor
    models = [SAC("MlpPolicy", venv, **config).learn(200) for venv in (env, sb3_make_vec_env("Pendulum-v1", 2, seed=0))]
    env.close()
    assert params_equal(models[0].policy, models[1].policy)
    assert np.array_equal(models[0].replay_buffer.next_observations, models[1].replay_buffer.next_observations)


@pytest.mark.slow
def test_maskable_xppo_acts_on_the_actors_action_masks(cluster: str) -> None:
    config = dict(n_steps=64, batch_size=64, n_epochs=2, seed=0, device="cpu", policy_kwargs=dict(net_arch=[16]))
    env = RayVecEnv(grid_maze, 2, envs_per_actor=2, seed=0)
    models = [MaskableXPPO("MlpPolicy", venv, **config).learn(256) for venv in (env, sb3_make_vec_env(grid_maze, 2, seed=0))]
    env.close()
    assert params_equal(models[0].policy, models[1].policy)


class KillActor(BaseCallback):
    """Kills actor ``actor`` of the training env at the ``at``-th step of the rollout."""

    def __init__(self, actor: int, at: int) -> None:
        super().__init__()
        self.actor, self.at, self.killed_at = actor, at, 0.0

    def _on_step(self) -> bool:
        if self.n_calls == self.at:
            ray.kill(self.training_env.unwrapped.actors[self.actor])
            self.killed_at = time.monotonic()
        return True


@pytest.mark.slow
def test_a_killed_actor_is_a_named_error_and_the_model_stays_intact(cluster: str) -> None:
    env = RayVecEnv("CartPole-v1", 2, step_timeout=30.0, seed=0)
    model = XPPO("MlpPolicy", env, n_steps=64, batch_size=64, n_epochs=2, seed=0, device="cpu")
    parameters = {k: v.clone() for k, v in model.policy.state_dict().items()}
    kill = KillActor(actor=1, at=10)
    with pytest.raises(
        RayEnvActorError, match=r"actor 1 on node 127\.0\.0\.1 \(\w{8}\), pid \d+, holding envs \[1\]: died"
    ) as caught:
        model.learn(256, callback=kill)
    assert time.monotonic() - kill.killed_at < env.step_timeout
    error = caught.value
    assert (error.actor, error.env_indices, error.node) == (1, (1,), env.placements[1].node)
    assert not isinstance(error, RayEnvTimeoutError)
    assert all(th.equal(value, parameters[key]) for key, value in model.policy.state_dict().items())
    assert model._n_updates == 0 and model.policy.optimizer.state == {}
    assert_released(env)  # the other actor too: no actor is restarted
    with pytest.raises(RuntimeError, match="this RayVecEnv failed and has released its actors"):
        model.learn(64, reset_num_timesteps=False)
    env.close()


@pytest.mark.slow
def test_a_step_past_the_timeout_is_a_named_error(cluster: str) -> None:
    env = RayVecEnv(sleepy_cartpole, 2, step_timeout=2.0, seed=0)
    env.reset()
    env.step(np.array([0, 1]))
    env.env_method("set_delay", 600.0, indices=[1])
    start = time.monotonic()
    with pytest.raises(RayEnvTimeoutError, match=r"actor 1 on node .* holding envs \[1\]: step took longer than 2 s"):
        env.step(np.array([0, 1]))
    assert time.monotonic() - start < 2.0 + 10.0
    assert_released(env)
    with pytest.raises(RuntimeError, match="failed"):
        env.step(np.array([0, 1]))


def test_one_cluster_per_process(cluster: str) -> None:
    with pytest.raises(ValueError, match="this process is connected to the Ray cluster at"):
        RayVecEnv("CartPole-v1", 1, address="127.0.0.1:1")


# --- rl-zoo3: --vec-env ray, --ray-address, an entry's vec_env: ray ---------------------------------------------------


def test_train_ray_arguments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert zoo.split_ray_args(["-n", "5", "--ray-address=auto", "--ray-envs-per-actor", "4"]) == (
        dict(address="auto", envs_per_actor=4),
        ["-n", "5"],
    )
    assert zoo.split_ray_args(["-n", "5"]) == ({}, ["-n", "5"])
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="--ray-address and --ray-envs-per-actor are options of --vec-env ray"):
        train_main(["--env", "CartPole-v1", "--vec-env", "lean", "--ray-address", "auto"])


@pytest.mark.slow
def test_train_builds_its_envs_on_the_cluster(cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    models: list[Any] = []  # rl-zoo3 builds and saves the model, and learn() does nothing
    monkeypatch.setattr(ExperimentManager, "learn", lambda self, model: models.append(model))
    monkeypatch.chdir(tmp_path)
    entry = dict(n_envs=2, n_timesteps=256, policy="MlpPolicy", n_steps=64, batch_size=64, vec_env="ray")
    (tmp_path / "conf.yml").write_text(yaml.safe_dump({"CartPole-v1": entry}))
    args = ["--env", "CartPole-v1", "--conf-file", "conf.yml", "--eval-freq", "-1", "--seed", "3"]
    train_main([*args, "--ray-address", cluster, "--ray-envs-per-actor", "2"])
    env = models[0].get_env()
    assert type(env) is RayVecEnv and [p.env_indices for p in env.placements] == [(0, 1)]
    assert env.env_is_wrapped(Monitor) == [True, True]
    assert ExperimentManager.default_vec_env_cls is None
    saved = yaml.load((tmp_path / "logs/xppo/CartPole-v1_1/CartPole-v1/config.yml").read_text(), Loader=yaml.UnsafeLoader)
    assert saved["vec_env"] == "ray"
    env.close()
