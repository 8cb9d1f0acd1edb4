"""
Resumable checkpoints (docs/guide/resume.md), in one process: a resumed run ends where the uninterrupted one does,
bit for bit (and with ``exact=False`` does not: the negative control); an env that does not replay exactly is named
with its step; a corrupt or truncated newest checkpoint is skipped, named, for the newest that verifies; the state is
written without pickle; bad arguments are refused by name. The SIGKILL tests are in tests/test_resume_kill.py.
"""

from __future__ import annotations

import math
import os
import signal
import zipfile

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from stable_baselines3.common import logger as sb3_logger
from stable_baselines3.common.callbacks import BaseCallback, CheckpointCallback, EvalCallback
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnvWrapper, VecFrameStack, VecMonitor

import sb3_xppo.envs  # noqa: F401  (registers the package's envs)
from sb3_xppo import XPPO, MaskableXPPO, ResumableCheckpoint
from sb3_xppo.resume import CorruptCheckpointError, ReplayMismatchError, checkpoints, read_checkpoint
from sb3_xppo.resume.codec import decode, encode
from sb3_xppo.resume.files import write_checkpoint
from sb3_xppo.resume.state import FORMAT, MODEL_PARTS, STATE, CheckpointFormatError, read_state
from sb3_xppo.vec_env import make_vec_env

SMALL = dict(n_steps=16, batch_size=32, n_epochs=2, seed=1, device="cpu", policy_kwargs=dict(net_arch=[8]))
TOTAL = 192  # 6 rollouts of 2 envs x 16


def cartpole():
    return make_vec_env("CartPole-v1", 2, seed=0)


def parameters(model) -> np.ndarray:
    return th.cat([t.detach().flatten().float() for t in model.policy.state_dict().values()]).numpy()


def adam(model) -> list[np.ndarray]:
    return [t.numpy() for s in model.policy.optimizer.state_dict()["state"].values() for t in s.values()]


def same(a, b) -> bool:
    return all(x.tobytes() == y.tobytes() for x, y in zip([parameters(a), *adam(a)], [parameters(b), *adam(b)], strict=True))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """An uninterrupted run with a checkpoint after each rollout (all kept)."""
    folder = tmp_path_factory.mktemp("run")
    model = XPPO("MlpPolicy", cartpole(), **SMALL).learn(
        TOTAL, callback=ResumableCheckpoint(folder, every_rollouts=1, keep=99)
    )
    return model, folder


def test_checkpoints_do_not_change_the_run(run):
    model, _ = run
    assert same(model, XPPO("MlpPolicy", cartpole(), **SMALL).learn(TOTAL))


def test_resume_then_learn_finishes_the_run_bit_for_bit(run, tmp_path):
    model, folder = run
    found = checkpoints(folder)
    assert [p.name for p in found] == [f"resume-{n:012d}.ckpt" for n in range(32, TOTAL, 32)]
    resumed = XPPO.resume(found[2], env=cartpole())
    assert resumed.num_timesteps == 96 and resumed._n_updates == 3 * SMALL["n_epochs"]
    resumed.learn(TOTAL, callback=ResumableCheckpoint(tmp_path, every_rollouts=1))
    assert resumed.num_timesteps == TOTAL and same(resumed, model)
    # written again on the way, but not at the boundary it resumed from
    assert [p.name for p in checkpoints(tmp_path)] == [f"resume-{n:012d}.ckpt" for n in (128, 160)]


def test_resume_without_env_rebuilds_it(run):
    model, folder = run
    resumed = XPPO.resume(checkpoints(folder)[1])  # a LeanVecEnv of CartPole-v1: rebuilt
    assert same(resumed.learn(TOTAL, callback=ResumableCheckpoint(folder / "again")), model)


def test_exact_false_resets_the_envs_and_differs(run):
    model, folder = run
    with pytest.warns(UserWarning, match="exact=False"):
        resumed = XPPO.resume(checkpoints(folder)[1], env=cartpole(), exact=False)
    resumed.learn(TOTAL, callback=ResumableCheckpoint(folder / "inexact"))
    assert resumed.num_timesteps == TOTAL and not same(resumed, model)


class NoisyEnv(gym.Env):
    """Deterministic observations; rewards from fresh entropy, not from ``np_random``: it does not replay."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,))
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        return np.full(1, self.t / 100, dtype=np.float32), float(np.random.default_rng().random()), False, self.t >= 50, {}


def test_an_env_that_does_not_replay_is_named_and_exact_false_resumes(tmp_path):
    env = make_vec_env(NoisyEnv, 2, seed=0)
    XPPO("MlpPolicy", env, **SMALL).learn(64, callback=ResumableCheckpoint(tmp_path, every_rollouts=1))
    with pytest.raises(ReplayMismatchError, match=r"env 0 does not replay exactly: at step 1 of the \d+ since .*exact=False"):
        XPPO.resume(tmp_path, env=make_vec_env(NoisyEnv, 2, seed=0))
    with pytest.warns(UserWarning, match="exact=False"):
        resumed = XPPO.resume(tmp_path, env=make_vec_env(NoisyEnv, 2, seed=0), exact=False)
    assert resumed.learn(64, callback=ResumableCheckpoint(tmp_path)).num_timesteps == 64


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_corrupt_newest_checkpoint_is_skipped_naming_it(run, tmp_path, damage):
    model, folder = run
    for path in checkpoints(folder)[:2]:
        (tmp_path / path.name).write_bytes(path.read_bytes())
    older, newest = checkpoints(tmp_path)
    data = bytearray(newest.read_bytes())
    if damage == "flip":
        data[len(data) // 3] ^= 0xFF
    else:
        data = data[: len(data) // 2]
    newest.write_bytes(bytes(data))
    with pytest.warns(
        UserWarning,
        match=f"skipped 1 newer checkpoint.*{newest.name} is (truncated or )?corrupt.*going on from .*{older.name}",
    ):
        resumed = XPPO.resume(tmp_path, env=cartpole())
    assert same(resumed.learn(TOTAL, callback=ResumableCheckpoint(tmp_path / "again")), model)
    older.write_bytes(older.read_bytes()[:100])  # none verifies: each named
    with pytest.raises(CorruptCheckpointError, match=f"no checkpoint of .* verifies: .*{newest.name}.*{older.name}"):
        XPPO.resume(tmp_path, env=cartpole())


def test_writes_are_atomic_and_the_newest_are_kept(tmp_path):
    (tmp_path / ".resume-000000000001.ckpt.tmp").write_bytes(b"half a write")  # what a crash leaves
    XPPO("MlpPolicy", cartpole(), **SMALL).learn(TOTAL, callback=ResumableCheckpoint(tmp_path, every_rollouts=2, keep=2))
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", "resume-000000000064.ckpt", "resume-000000000128.ckpt"]
    members = read_checkpoint(tmp_path / "resume-000000000128.ckpt")
    assert set(members) == {"model.zip", "state.json", "arrays.npz"}
    with zipfile.ZipFile(tmp_path / "resume-000000000128.ckpt") as archive:
        assert archive.namelist()[-1] == "manifest.json"


def test_the_state_is_written_without_pickle():
    state = {
        "floats": [0.1, -0.0, math.inf, 1e-310],
        "tuple": ("MT19937", np.arange(3, dtype=np.uint32), 2, 0, 0.0),
        "scalar": np.float32(1.5),
        "nested": {"none": None, "big": 2**100, "bools": np.array([True, False])},
    }
    text, npz = encode(state)
    back = decode(text, npz)
    assert back["floats"][1] == 0.0 and math.copysign(1, back["floats"][1]) == -1 and back["floats"][3] == 1e-310
    assert isinstance(back["tuple"], tuple) and back["tuple"][1].dtype == np.uint32
    assert type(back["scalar"]) is np.float32 and back["nested"]["big"] == 2**100
    with pytest.raises(TypeError, match=r"state\.bad: an array of Python objects"):
        encode({"bad": np.array([object()])})
    with pytest.raises(TypeError, match=r"state\.fn: cannot save a function"):
        encode({"fn": len if False else (lambda: 0)})


@pytest.mark.parametrize("written", [0, FORMAT + 1, None])
def test_a_checkpoint_of_another_format_is_refused_by_name(run, tmp_path, written):
    """``state.json``'s format is read and checked: an older (or newer, or missing) one is refused, naming both."""
    members = read_checkpoint(checkpoints(run[1])[-1])
    state = decode(members[STATE], members["arrays.npz"])
    assert state["format"] == FORMAT
    if written is None:
        del state["format"]
    else:
        state["format"] = written
    members[STATE], members["arrays.npz"] = encode(state)
    path = write_checkpoint(tmp_path, checkpoints(run[1])[-1].name, members, keep=1)
    with pytest.raises(CheckpointFormatError, match=rf"is a checkpoint of format {written!r}, .* reads format {FORMAT}"):
        read_state(members, path)
    with pytest.raises(CheckpointFormatError, match=f"format {written!r}"):
        XPPO.resume(path)


def test_one_table_writes_and_restores_the_model_s_parts(run):
    """capture() writes exactly the keys of MODEL_PARTS (beside the environment's), and restore puts each back."""
    state = decode(*(read_checkpoint(checkpoints(run[1])[-1])[name] for name in (STATE, "arrays.npz")))
    table = [key for part in MODEL_PARTS for key in part.keys]
    assert set(state) == {
        "format",
        "algorithm",
        *table,
        "rng",
        "vec_normalize",
        "envs",
        "callbacks",
        "callback_calls",
        "logger",
    }
    restored = XPPO("MlpPolicy", cartpole(), **SMALL)
    for part in MODEL_PARTS:
        part.put(restored, *(state[key] for key in part.keys))
        again = part.read(restored)
        for key, value in zip(part.keys, again, strict=True):
            assert encode({key: value}) == encode({key: state[key]}), key


class Counter(BaseCallback):
    """A callback that asks to be resumed."""

    def __init__(self):
        super().__init__()
        self.steps = 0

    def _on_step(self) -> bool:
        self.steps += 1
        return True

    def resumable_state(self):
        return {"steps": self.steps}

    def restore_state(self, state):
        self.steps = state["steps"]


def test_callbacks_that_ask_are_resumed_and_must_be_the_runs(tmp_path):
    XPPO("MlpPolicy", cartpole(), **SMALL).learn(96, callback=[ResumableCheckpoint(tmp_path, every_rollouts=1), Counter()])
    resumed, counter = XPPO.resume(tmp_path, env=cartpole()), Counter()
    resumed.learn(96, callback=[ResumableCheckpoint(tmp_path, every_rollouts=1), counter])
    assert counter.steps == 96 // 2  # one call per step of the VecEnv, over the whole run
    with pytest.raises(
        ValueError,
        match=r"the resumable callbacks \['ResumableCheckpoint', 'Counter'\], learn\(\) was given \['ResumableCheckpoint'\]",
    ):
        XPPO.resume(tmp_path, env=cartpole()).learn(96, callback=ResumableCheckpoint(tmp_path))


class SigtermDuringRollout(BaseCallback):
    """Sends this process a SIGTERM at the ``at``-th step, in the middle of a rollout (as a scheduler would)."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at = at

    def _on_step(self) -> bool:
        if self.n_calls == self.at:
            os.kill(os.getpid(), signal.SIGTERM)
        return True


def test_sigterm_writes_at_the_next_boundary_and_stops(run, tmp_path):
    model, _ = run
    before = signal.getsignal(signal.SIGTERM)
    checkpoint = ResumableCheckpoint(tmp_path, every_rollouts=None, stop_on_sigterm=True)
    stopped = XPPO("MlpPolicy", cartpole(), **SMALL).learn(TOTAL, callback=[checkpoint, SigtermDuringRollout(40)])
    assert checkpoint.preempted and signal.getsignal(signal.SIGTERM) is before  # the handler put back
    # step 40 of the VecEnv is in the third rollout: written after it, at 96 steps; learn() stopped one step on
    assert [p.name for p in checkpoints(tmp_path)] == ["resume-000000000096.ckpt"] and stopped.num_timesteps == 98
    resumed = XPPO.resume(tmp_path, env=cartpole())
    resumed.learn(
        TOTAL, callback=[ResumableCheckpoint(tmp_path, every_rollouts=None, stop_on_sigterm=True), SigtermDuringRollout(0)]
    )
    assert same(resumed, model)


def test_a_checkpoint_by_wall_clock_time(run, tmp_path):
    model, _ = run
    checkpoint = ResumableCheckpoint(tmp_path, every_rollouts=None, every_seconds=1e-9, keep=99)
    XPPO("MlpPolicy", cartpole(), **SMALL).learn(TOTAL, callback=checkpoint)
    assert [p.name for p in checkpoints(tmp_path)] == [f"resume-{n:012d}.ckpt" for n in range(32, TOTAL, 32)]
    resumed = XPPO.resume(checkpoints(tmp_path)[1], env=cartpole())
    assert same(resumed.learn(TOTAL, callback=ResumableCheckpoint(tmp_path / "again", every_seconds=3600)), model)


def test_step_counting_callbacks_and_the_logger_go_on(tmp_path):
    """SB3's CheckpointCallback saves every 5 calls; the first log dump after resuming has the last train()'s values."""

    def learn(model, folder):
        saves = CheckpointCallback(5, str(folder / "saves"))
        return model.learn(TOTAL, callback=[ResumableCheckpoint(folder, every_rollouts=2), saves])

    logs = []
    model = XPPO("MlpPolicy", cartpole(), **SMALL)
    learn(model, tmp_path / "run")
    resumed = XPPO.resume(checkpoints(tmp_path / "run")[0], env=cartpole())
    resumed.set_logger(sb3_logger.Logger(None, [Recorder(logs)]))
    learn(resumed, tmp_path / "resumed")
    assert sorted(p.name for p in (tmp_path / "resumed" / "saves").iterdir()) == [
        name for name in sorted(p.name for p in (tmp_path / "run" / "saves").iterdir()) if int(name.split("_")[2]) > 64
    ]
    assert "train/loss" in logs[0] and logs[0]["time/total_timesteps"] == 96


class Recorder(sb3_logger.KVWriter):
    def __init__(self, logs: list) -> None:
        self.logs = logs

    def write(self, key_values, key_excluded, step=0) -> None:
        self.logs.append(dict(key_values))


def test_another_total_is_warned_of(run, tmp_path):
    _, folder = run
    with pytest.warns(UserWarning, match=r"learn\(total_timesteps=256\) of a resumed run whose total was 192"):
        XPPO.resume(folder, env=cartpole()).learn(256, callback=ResumableCheckpoint(tmp_path))


def test_bad_arguments_are_refused_by_name(run, tmp_path):
    _, folder = run
    with pytest.raises(ValueError, match="every_rollouts must be an int >= 1"):
        ResumableCheckpoint(tmp_path, every_rollouts=0)
    with pytest.raises(ValueError, match="keep must be an int >= 1"):
        ResumableCheckpoint(tmp_path, keep=True)
    with pytest.raises(ValueError, match="every_seconds must be a number > 0 or None, got 0"):
        ResumableCheckpoint(tmp_path, every_seconds=0)
    with pytest.raises(ValueError, match="would never write"):
        ResumableCheckpoint(tmp_path, every_rollouts=None)
    with pytest.raises(TypeError, match="folder must be a path"):
        ResumableCheckpoint(3)
    with pytest.raises(TypeError, match="exact must be a bool"):
        XPPO.resume(folder, env=cartpole(), exact="yes")
    with pytest.raises(ValueError, match=r"a checkpoint of XPPO: resume it with XPPO\.resume"):
        MaskableXPPO.resume(folder)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        XPPO.resume(tmp_path)
    with pytest.raises(ValueError, match="the checkpoint has 2 envs and the env given has 1"):
        XPPO.resume(folder, env=make_vec_env("CartPole-v1", 1, seed=0))


class CountingVecEnv(VecEnvWrapper):
    """A VecEnv wrapper of your own, with a state of its own (a step count)."""

    def reset(self):
        self.steps = 0
        return self.venv.reset()

    def step_wait(self):
        self.steps += 1
        return self.venv.step_wait()


def test_a_vec_env_that_cannot_replay_is_refused_and_exact_false_resumes(tmp_path):
    def own_env():  # a user's VecEnv wrapper, whose state a checkpoint does not know
        return CountingVecEnv(make_vec_env("CartPole-v1", 2, seed=0))

    XPPO("MlpPolicy", own_env(), **SMALL).learn(64, callback=ResumableCheckpoint(tmp_path, every_rollouts=1))
    with pytest.raises(
        ValueError, match=r"VecEnv wrapper CountingVecEnv keeps a state a replay does not rebuild.*exact=False"
    ):
        XPPO.resume(tmp_path, env=own_env())
    with pytest.warns(UserWarning, match="exact=False"):
        assert XPPO.resume(tmp_path, env=own_env(), exact=False).learn(64, callback=ResumableCheckpoint(tmp_path))


def dict_cartpole() -> gym.Env:
    env = gym.make("CartPole-v1")
    return gym.wrappers.TransformObservation(env, lambda obs: {"x": obs}, gym.spaces.Dict({"x": env.observation_space}))


@pytest.mark.parametrize("dict_observations", [False, True])
def test_vec_frame_stack_and_vec_monitor_resume_bit_for_bit(dict_observations, tmp_path):
    # their state (the frames, the episode counters) kept beside the envs' replay; Dict observations stacked per key
    def env():
        return VecMonitor(VecFrameStack(make_vec_env(dict_cartpole if dict_observations else "CartPole-v1", 2, seed=0), 3))

    policy = "MultiInputPolicy" if dict_observations else "MlpPolicy"
    reference = XPPO(policy, env(), **SMALL).learn(TOTAL)
    XPPO(policy, env(), **SMALL).learn(TOTAL, callback=ResumableCheckpoint(tmp_path, every_rollouts=1, keep=9))
    resumed = XPPO.resume(checkpoints(tmp_path)[2], env=env())
    assert same(resumed.learn(TOTAL, callback=ResumableCheckpoint(tmp_path / "b", 1)), reference)
    assert resumed.env.episode_count == reference.env.episode_count > 0
    assert np.array_equal(resumed.env.episode_returns, reference.env.episode_returns)
    with pytest.raises(ValueError, match=r"VecEnv wrappers are \['VecMonitor', 'VecFrameStack'\] and the env given has"):
        XPPO.resume(checkpoints(tmp_path)[2], env=VecMonitor(env()))
    with pytest.raises(ValueError, match=r"cannot rebuild the run's VecEnv wrappers"):
        XPPO.resume(checkpoints(tmp_path)[2])


class HalfReward(gym.RewardWrapper):
    def reward(self, reward):
        return 0.5 * reward


def time_feature_half_reward(env):  # a state above the Monitor (the time feature) and rewards other than the Monitor's
    from sb3_contrib.common.wrappers import TimeFeatureWrapper

    return HalfReward(TimeFeatureWrapper(env))


@pytest.mark.parametrize("backend", ["lean", "dummy", "subproc"])
def test_a_wrapper_class_above_the_monitor_is_replayed(backend, tmp_path):
    # the recorder sits above it (vec_env/backends.py's recording): a replay beneath the Monitor would leave its state
    from sb3_contrib.common.wrappers import TimeFeatureWrapper

    from sb3_xppo.vec_env.replay import ActionRecorder

    wrapper_class = TimeFeatureWrapper if backend == "subproc" else time_feature_half_reward  # (subproc: importable)

    def env():
        return make_vec_env("Pendulum-v1", 2, seed=0, backend=backend, wrapper_class=wrapper_class)

    def monitors(venv):
        return [venv.get_attr(name) for name in ("episode_returns", "episode_lengths", "total_steps", "rewards")]

    reference = XPPO("MlpPolicy", env(), **SMALL).learn(512)  # (an episode ends at 200 steps after the checkpoint)
    XPPO("MlpPolicy", env(), **SMALL).learn(512, callback=ResumableCheckpoint(tmp_path, every_rollouts=1, keep=9))
    resumed = XPPO.resume(checkpoints(tmp_path)[2], env=env())
    assert resumed.env.env_method("class_name") == ["ActionRecorder"] * 2
    assert all(resumed.env.env_is_wrapped(ActionRecorder)) and all(resumed.env.env_is_wrapped(TimeFeatureWrapper))
    resumed.learn(512, callback=ResumableCheckpoint(tmp_path / "b", 1))
    assert same(resumed, reference) and monitors(resumed.env) == monitors(reference.env)
    assert monitors(reference.env)[0] != [[], []]


class LivesEnv(gym.Env):
    """An Atari-like env for ``AtariWrapper``'s lives and no-op wrappers: 3 lives, one lost every 7 steps."""

    observation_space = gym.spaces.Box(-10.0, 10.0, (2,))
    action_space = gym.spaces.Discrete(2)

    def __init__(self):
        self.ale = self  # (EpisodicLifeEnv reads env.unwrapped.ale.lives())

    def lives(self):
        return self.remaining

    def get_action_meanings(self):
        return ["NOOP", "RIGHT"]

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.remaining, self.t, self.x = 3, 0, self.np_random.normal()
        return np.array([self.x, self.remaining], dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        self.x += 0.1 * (action - 0.5) + 0.01 * self.np_random.normal()
        self.remaining -= self.t % 7 == 0
        return np.array([self.x, self.remaining], dtype=np.float32), float(action), self.remaining == 0, False, {}


def atari_like(env):
    from stable_baselines3.common.atari_wrappers import EpisodicLifeEnv, MaxAndSkipEnv, NoopResetEnv

    return EpisodicLifeEnv(MaxAndSkipEnv(NoopResetEnv(env, noop_max=5), skip=2))


@pytest.mark.parametrize("backend", ["lean", "dummy"])
def test_resets_that_do_not_reset_the_env_are_replayed(backend, tmp_path):
    # after a lost life, EpisodicLifeEnv's reset steps instead: the recorder above keeps it in the record under way
    def env():
        return make_vec_env(LivesEnv, 2, seed=0, backend=backend, wrapper_class=atari_like)

    reference = XPPO("MlpPolicy", env(), **SMALL).learn(TOTAL)
    XPPO("MlpPolicy", env(), **SMALL).learn(TOTAL, callback=ResumableCheckpoint(tmp_path, every_rollouts=1, keep=9))
    states = [read_state(read_checkpoint(path)) for path in checkpoints(tmp_path)]
    assert any(state["envs"]["snapshots"][0]["inner_resets"] for state in states)  # (the premise: some hold one)
    for index, path in enumerate(checkpoints(tmp_path)):
        resumed = XPPO.resume(path, env=env())
        assert same(resumed.learn(TOTAL, callback=ResumableCheckpoint(tmp_path / str(index), 1)), reference)


class ImageEnv(gym.Env):
    """Images drawn from the env's own ``np_random`` (so it replays), ``n_channels`` channels last."""

    action_space = gym.spaces.Discrete(3)

    def __init__(self, n_channels: int = 1):
        self.observation_space = gym.spaces.Box(0, 255, (36, 36, n_channels), np.uint8)

    def image(self):
        return (self.np_random.random(self.observation_space.shape) * 255).astype(np.uint8)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.image(), {}

    def step(self, action):
        self.t += 1
        return self.image(), float(action == 1), False, self.t >= 20, {}


CNN = dict(SMALL, policy_kwargs=dict(net_arch=[8], features_extractor_kwargs=dict(features_dim=8)))


@pytest.mark.parametrize("n_channels", [1, 3])
@pytest.mark.parametrize("share_features_extractor", [True, False])
def test_image_observations_resume_bit_for_bit(n_channels, share_features_extractor, tmp_path):
    # VecTransposeImage hands the policy a transposed view; a convolution rounds differently on a C-order copy (and
    # takes one channel's view as channels-last), so the checkpoint keeps the observation's strides
    keywords = dict(CNN, policy_kwargs=dict(CNN["policy_kwargs"], share_features_extractor=share_features_extractor))

    def env():
        return make_vec_env(ImageEnv, 2, seed=0, env_kwargs=dict(n_channels=n_channels))

    reference = XPPO("CnnPolicy", env(), **keywords).learn(128)
    XPPO("CnnPolicy", env(), **keywords).learn(128, callback=ResumableCheckpoint(tmp_path, every_rollouts=1, keep=9))
    resumed = XPPO.resume(checkpoints(tmp_path)[0], env=env())
    assert resumed._last_obs.strides == resumed.env.reset().strides != resumed._last_obs.copy(order="C").strides
    resumed = XPPO.resume(checkpoints(tmp_path)[0], env=env())
    assert same(resumed.learn(128, callback=ResumableCheckpoint(tmp_path / "b", 1)), reference)


class DictImageEnv(ImageEnv):
    """A Dict of a one-channel image and a vector, both from the env's ``np_random``."""

    def __init__(self):
        super().__init__(1)
        self.image_space = self.observation_space
        self.observation_space = gym.spaces.Dict({"img": self.image_space, "vec": gym.spaces.Box(-1.0, 1.0, (3,))})

    def image(self):
        image = (self.np_random.random(self.image_space.shape) * 255).astype(np.uint8)
        return {"img": image, "vec": np.asarray(self.np_random.uniform(-1, 1, 3), dtype=np.float32)}


def test_dict_observations_with_an_image_resume_bit_for_bit(tmp_path):
    # the strides are kept per key (VecTransposeImage transposes the image key only)
    reference = XPPO("MultiInputPolicy", make_vec_env(DictImageEnv, 2, seed=0), **SMALL).learn(128)
    XPPO("MultiInputPolicy", make_vec_env(DictImageEnv, 2, seed=0), **SMALL).learn(
        128, callback=ResumableCheckpoint(tmp_path, 1, keep=9)
    )
    resumed = XPPO.resume(checkpoints(tmp_path)[0], env=make_vec_env(DictImageEnv, 2, seed=0))
    assert resumed._last_obs["img"].strides == (1296, 1, 36, 1)  # (the transposed view's, not a copy's)
    assert same(resumed.learn(128, callback=ResumableCheckpoint(tmp_path / "b", 1)), reference)


@pytest.mark.slow
def test_atari_resumes_bit_for_bit_from_every_checkpoint(tmp_path):
    """Breakout with rl-zoo3's Atari set-up (SB3's AtariWrapper, 4 frames stacked): lives lost, fire and no-op resets."""
    ale_py = pytest.importorskip("ale_py")
    from stable_baselines3.common.atari_wrappers import AtariWrapper

    gym.register_envs(ale_py)

    def env():
        return VecFrameStack(make_vec_env("BreakoutNoFrameskip-v4", 2, seed=0, wrapper_class=AtariWrapper), 4)

    features = dict(net_arch=[16], features_extractor_kwargs=dict(features_dim=16))
    keywords = dict(SMALL, n_steps=32, batch_size=64, n_epochs=1, policy_kwargs=features)
    reference = XPPO("CnnPolicy", env(), **keywords).learn(384)
    XPPO("CnnPolicy", env(), **keywords).learn(384, callback=ResumableCheckpoint(tmp_path, every_rollouts=1, keep=9))
    states = [read_state(read_checkpoint(path)) for path in checkpoints(tmp_path)]
    assert any(snapshot["inner_resets"] for state in states for snapshot in state["envs"]["snapshots"])  # (lives lost)
    for index, path in enumerate(checkpoints(tmp_path)):
        resumed = XPPO.resume(path, env=env())
        assert same(resumed.learn(384, callback=ResumableCheckpoint(tmp_path / str(index), 1)), reference), path.name


def test_a_dummy_vec_env_of_recorded_envs_replays(tmp_path):
    from stable_baselines3.common.monitor import Monitor

    from sb3_xppo.vec_env.replay import ActionRecorder

    def own_env():
        return DummyVecEnv([lambda: Monitor(ActionRecorder(gym.make("CartPole-v1")))] * 2)

    reference = XPPO("MlpPolicy", own_env(), **SMALL).learn(128)
    XPPO("MlpPolicy", own_env(), **SMALL).learn(128, callback=ResumableCheckpoint(tmp_path, every_rollouts=2, keep=9))
    resumed = XPPO.resume(checkpoints(tmp_path)[0], env=own_env())
    assert same(resumed.learn(128, callback=ResumableCheckpoint(tmp_path / "b")), reference)


@pytest.mark.parametrize("monitored", [True, False])
def test_a_dummy_vec_env_of_your_own_is_reached_and_replays(monitored, tmp_path):
    """Its envs get an ActionRecorder before learn()'s first reset, the eval env's before its first evaluation."""
    from stable_baselines3.common.monitor import Monitor

    def own_env(seed: int = 0):
        env = DummyVecEnv([(lambda: Monitor(gym.make("CartPole-v1"))) if monitored else (lambda: gym.make("CartPole-v1"))] * 2)
        env.seed(seed)
        return env

    def learn(model, folder):
        evaluations = EvalCallback(own_env(100), eval_freq=20, n_eval_episodes=2, warn=False, log_path=str(folder), verbose=0)
        model.learn(TOTAL, callback=[ResumableCheckpoint(folder, every_rollouts=1, keep=9), evaluations])
        return model, evaluations.evaluations_results

    reference, results = learn(XPPO("MlpPolicy", own_env(), **SMALL), tmp_path / "run")
    resumed, resumed_results = learn(XPPO.resume(checkpoints(tmp_path / "run")[2], env=own_env(7)), tmp_path / "again")
    assert same(resumed, reference) and resumed_results == results and len(results) == TOTAL // 2 // 20


@pytest.mark.parametrize(
    "algorithm, env_id, policy",
    [
        ("RecurrentXPPO", "CartPole-v1", "MlpLstmPolicy"),
        ("MaskableXPPO", "sb3_xppo/GridMaze-v0", "MlpPolicy"),
        ("MaskableRecurrentXPPO", "sb3_xppo/MemoryMaze-v0", "MlpLstmPolicy"),
    ],
)
def test_the_contrib_variants_resume_bit_for_bit(algorithm, env_id, policy, tmp_path):
    import sb3_xppo

    cls = getattr(sb3_xppo, algorithm)
    keywords = {**SMALL, "policy_kwargs": dict(net_arch=[8], **({"lstm_hidden_size": 8} if "Lstm" in policy else {}))}
    reference = cls(policy, make_vec_env(env_id, 2, seed=0), **keywords).learn(128)
    cls(policy, make_vec_env(env_id, 2, seed=0), **keywords).learn(128, callback=ResumableCheckpoint(tmp_path, 1, keep=9))
    resumed = cls.resume(checkpoints(tmp_path)[1], env=make_vec_env(env_id, 2, seed=0))
    assert same(resumed.learn(128, callback=ResumableCheckpoint(tmp_path / "b", 1)), reference)


@pytest.mark.parametrize(
    "algorithm, policy, sde_sample_freq",
    [("XPPO", "MlpPolicy", -1), ("XPPO", "MlpPolicy", 4), ("RecurrentXPPO", "MlpLstmPolicy", -1)],
)
def test_use_sde_resumes_bit_for_bit(algorithm, policy, sde_sample_freq, tmp_path):
    # the noise the resumed rollout explores with was drawn before the boundary: the checkpoint keeps it
    import sb3_xppo

    cls = getattr(sb3_xppo, algorithm)
    keywords = {**SMALL, "use_sde": True, "sde_sample_freq": sde_sample_freq}
    if policy == "MlpLstmPolicy":
        keywords["policy_kwargs"] = dict(net_arch=[8], lstm_hidden_size=8)
    reference = cls(policy, make_vec_env("Pendulum-v1", 2, seed=0), **keywords).learn(128)
    cls(policy, make_vec_env("Pendulum-v1", 2, seed=0), **keywords).learn(
        128, callback=ResumableCheckpoint(tmp_path, 1, keep=9)
    )
    resumed = cls.resume(checkpoints(tmp_path)[1], env=make_vec_env("Pendulum-v1", 2, seed=0))
    assert resumed._sde_noise_resumed and "_sde_noise_resumed" in resumed._excluded_save_params()
    assert same(resumed.learn(128, callback=ResumableCheckpoint(tmp_path / "b", 1)), reference)
    assert not resumed._sde_noise_resumed


@pytest.mark.parametrize("algorithm", ["XPPO", "RecurrentXPPO", "MaskableXPPO"])
def test_a_dagger_run_resumes_bit_for_bit(algorithm, tmp_path):
    # the callback's aggregated dataset (a ring that wraps), its warm-up, a trained projector with the gradient its
    # next step takes, and the random numbers its setup draws (the projector's initialisation) are kept
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import PPO

    import sb3_xppo
    from sb3_xppo import DaggerCallback

    cls = getattr(sb3_xppo, algorithm)
    options: dict = dict(buffer_size=100, beta=0.3, pretrain_steps=4)
    if algorithm == "MaskableXPPO":
        teacher: object = MaskablePPO("MlpPolicy", "sb3_xppo/GridMaze-v0", seed=5, device="cpu")

        def env():
            return make_vec_env("sb3_xppo/GridMaze-v0", 2, seed=0)

        policy, keywords = "MlpPolicy", SMALL
    else:
        teacher = PPO("MlpPolicy", "CartPole-v1", seed=5, device="cpu")
        env = cartpole
        if algorithm == "XPPO":
            policy, keywords = "MlpPolicy", SMALL
            layers = dict(student_layer="mlp_extractor.policy_net.0", teacher_layer="mlp_extractor.policy_net.2")
            options.update(layers, rep_align_projector=True, rep_align_weight=0.5)
        else:
            policy, keywords = "MlpLstmPolicy", dict(SMALL, policy_kwargs=dict(net_arch=[8], lstm_hidden_size=8))

    def learn(model, folder):
        callback = DaggerCallback(teacher, **options)
        model.learn(TOTAL, callback=[ResumableCheckpoint(folder, every_rollouts=1, keep=9), callback])
        return model, callback

    reference, distillation = learn(cls(policy, env(), **keywords), tmp_path / "run")
    assert len(distillation.dataset) == 100  # (the ring wrapped: 192 states went in)
    resumed, resumed_distillation = learn(cls.resume(checkpoints(tmp_path / "run")[2], env=env()), tmp_path / "again")
    assert same(resumed, reference)
    rows, resumed_rows = distillation.dataset.state(), resumed_distillation.dataset.state()
    assert rows["pos"] == resumed_rows["pos"] and str(rows["rows"]) == str(resumed_rows["rows"])
    if algorithm == "XPPO":
        assert th.equal(distillation.distiller.projector.weight, resumed_distillation.distiller.projector.weight)


class Triggers(BaseCallback):
    """Records the steps at which EveryNTimesteps calls it."""

    def __init__(self):
        super().__init__()
        self.steps: list[int] = []

    def _on_step(self) -> bool:
        self.steps.append(self.num_timesteps)
        return True


def test_sb3_callbacks_with_counters_resume(tmp_path):
    # EveryNTimesteps' last trigger, StopTrainingOnMaxEpisodes' episodes and StopTrainingOnNoModelImprovement's
    # evaluations without improvement are kept: the resumed run acts and stops at the original's steps
    from stable_baselines3.common.callbacks import EveryNTimesteps, StopTrainingOnMaxEpisodes, StopTrainingOnNoModelImprovement

    def learn(model, folder):
        triggers = Triggers()
        patience = StopTrainingOnNoModelImprovement(max_no_improvement_evals=100, min_evals=0)
        evaluations = EvalCallback(cartpole(), eval_freq=8, n_eval_episodes=1, callback_after_eval=patience, warn=False)
        callbacks = [ResumableCheckpoint(folder, every_rollouts=1, keep=9), StopTrainingOnMaxEpisodes(max_episodes=8)]
        model.learn(10 * TOTAL, callback=[*callbacks, EveryNTimesteps(n_steps=50, callback=triggers), evaluations])
        return model, triggers.steps, patience.no_improvement_evals

    reference, steps, patience = learn(XPPO("MlpPolicy", cartpole(), **SMALL), tmp_path / "run")
    assert reference.num_timesteps < 10 * TOTAL and len(steps) > 2 and patience > 0  # (the premise: each acted)
    path = checkpoints(tmp_path / "run")[-2]
    resumed, resumed_steps, resumed_patience = learn(XPPO.resume(path, env=cartpole()), tmp_path / "again")
    assert resumed.num_timesteps == reference.num_timesteps and same(resumed, reference)
    assert resumed_steps == [step for step in steps if step > int(path.stem.split("-")[1])]
    assert resumed_patience == patience


def test_rl_zoo3s_raw_statistics_callback_resumes(tmp_path):
    # rl-zoo3's RawStatisticsCallback (a zoo entry's `callback:`) logs each episode at its own step count: kept, the
    # resumed run logs on at the original's steps instead of from 0
    from rl_zoo3.callbacks import RawStatisticsCallback

    def learn(model, folder):
        raw = RawStatisticsCallback()
        model.learn(TOTAL, callback=[ResumableCheckpoint(folder, every_rollouts=1, keep=9), raw])
        return model, raw._timesteps_counter

    reference, counted = learn(XPPO("MlpPolicy", cartpole(), tensorboard_log=str(tmp_path / "tb"), **SMALL), tmp_path / "run")
    path = checkpoints(tmp_path / "run")[-2]
    (saved,) = [entry["state"] for entry in read_state(read_checkpoint(path))["callbacks"] if "Raw" in entry["type"]]
    assert 0 < saved["_timesteps_counter"] < counted  # (the premise: episodes ended before and after the checkpoint)
    resumed, resumed_counted = learn(XPPO.resume(path, env=cartpole()), tmp_path / "again")
    assert same(resumed, reference) and resumed_counted == counted
