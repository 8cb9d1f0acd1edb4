"""
Safe loading (docs/guide/security.md): hostile files built here run no code and are refused naming the field; every
checkpoint SB3, sb3-contrib, rl-zoo3 and the package write loads without trust_code and acts as SB3's loader's does,
bit for bit; trust_code loads a user's own lambda schedule.
"""

from __future__ import annotations

import contextlib
import pathlib
import pickle
import re
import subprocess
import sys
import warnings
from collections import OrderedDict

import cloudpickle
import numpy as np
import pytest
import torch as th
import yaml
from gymnasium import spaces
from hostile import RunsCommand, refused_by_command, rewrite_data, serialized, unsigned, zoo_folder
from rl_zoo3.utils import linear_schedule
from sb3_contrib import ARS, QRDQN, TQC, TRPO, CrossQ, MaskablePPO, RecurrentPPO
from stable_baselines3 import A2C, DDPG, DQN, PPO, SAC, TD3
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import SimpleMultiObsEnv
from stable_baselines3.common.noise import NormalActionNoise
from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike
from stable_baselines3.common.utils import constant_fn, get_linear_fn
from stable_baselines3.common.vec_env import VecNormalize

import sb3_xppo.envs  # noqa: F401  (GridMaze)
from sb3_xppo import (
    XPPO,
    DaggerCallback,
    MaskableRecurrentXPPO,
    MaskableXPPO,
    RecurrentXPPO,
    UnsafeFileError,
    load_model,
    load_vec_normalize,
)
from sb3_xppo.loading.files import load_pickle
from sb3_xppo.loading.literals import python_literal
from sb3_xppo.loading.unpickler import restricted_loads
from sb3_xppo.loading.zoo_files import load_zoo_yaml, saved_hyperparams

DATA = pathlib.Path(__file__).parent / "data"


def small() -> dict:
    """Tiny networks; fresh dicts each time (SB3 writes into policy_kwargs)."""
    return dict(policy_kwargs=dict(net_arch=[16]), device="cpu", seed=0)


# ---------------------------------------------------------------------------------------------------------------------
# Hostile files: each payload, if it ran, would create the sentinel file
# ---------------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ppo_zip(tmp_path_factory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("ppo") / "ppo.zip"
    PPO("MlpPolicy", "CartPole-v1", n_steps=32, batch_size=32, **small()).save(path)
    return path


@pytest.fixture(scope="module")
def xppo_zip(tmp_path_factory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("xppo") / "xppo.zip"
    XPPO("MlpPolicy", "CartPole-v1", n_steps=32, batch_size=32, actor_loss="spo", **small()).save(path)
    return path


#: a payload in each kind of field: a schedule, a space, policy_kwargs (nested in a dict), the policy class
HOSTILE_FIELDS = {
    "clip_range": lambda sentinel: RunsCommand(sentinel),
    "lr_schedule": lambda sentinel: RunsCommand(sentinel, via_subprocess=True),
    "observation_space": lambda sentinel: RunsCommand(sentinel),
    "policy_kwargs": lambda sentinel: {"net_arch": [16], "activation_fn": RunsCommand(sentinel)},
    "policy_class": lambda sentinel: RunsCommand(sentinel, via_subprocess=True),
}


@pytest.mark.parametrize("field", sorted(HOSTILE_FIELDS))
def test_a_payload_in_any_field_runs_no_code_and_is_named(field, ppo_zip, xppo_zip, tmp_path):
    sentinel = tmp_path / "ran"
    payload = serialized(HOSTILE_FIELDS[field](sentinel))
    evil_xppo = rewrite_data(xppo_zip, tmp_path / "evil_xppo.zip", **{field: payload})
    evil_ppo = rewrite_data(ppo_zip, tmp_path / "evil_ppo.zip", **{field: payload})
    asked = r"(posix\.system|subprocess\.call)"
    for load in (lambda: XPPO.load(evil_xppo), lambda: load_model(evil_ppo), lambda: load_model(PPO, evil_ppo)):
        with pytest.raises(UnsafeFileError, match=rf"data\['{field}'\] asks for {asked}") as refused:
            load()
        assert isinstance(refused.value, ValueError) and isinstance(refused.value, pickle.UnpicklingError)
        assert "trust_code=True" in str(refused.value) and "custom_objects" in str(refused.value)
        assert str(pickle.loads(pickle.dumps(refused.value))) == str(refused.value)  # crosses processes
        assert not sentinel.exists()
    # Negative control: SB3's own loader runs the payload (whatever fails after it)
    with contextlib.suppress(Exception):
        PPO.load(evil_ppo, device="cpu")
    assert sentinel.exists()


def test_custom_objects_replace_a_field_unread(ppo_zip, tmp_path):
    """SB3's custom_objects: a field given there is never unpickled, so a hostile one is simply not read."""
    sentinel = tmp_path / "ran"
    evil = rewrite_data(ppo_zip, tmp_path / "evil.zip", clip_range=serialized(RunsCommand(sentinel)))
    model = load_model(PPO, evil, custom_objects={"clip_range": 0.1})
    assert model.clip_range(1.0) == 0.1 and not sentinel.exists()


def test_a_nested_torch_pickle_is_read_as_weights_only(tmp_path):
    """torch's _load_from_bytes (a pickled tensor's storage) would run torch.load unchecked: here weights_only."""
    sentinel = tmp_path / "ran"

    class Storage:
        def __reduce__(self):
            import torch.storage

            return torch.storage._load_from_bytes, (pickle.dumps(RunsCommand(sentinel)),)

    with pytest.raises(UnsafeFileError, match=r"field asks for torch\.storage\._load_from_bytes"):
        restricted_loads(cloudpickle.dumps(Storage()), "field")
    assert not sentinel.exists()
    # the real thing, a tensor SB3 pickles so (ARS's weights), loads
    tensor = th.arange(5.0)
    assert th.equal(restricted_loads(cloudpickle.dumps(tensor), "weights"), tensor)


@pytest.mark.parametrize("asked", ["builtins.eval", "builtins.getattr", "os.system", "torch.load", "numpy.load"])
def test_the_allowlist_refuses_the_usual_escapes(asked):
    module, name = asked.rsplit(".", 1)
    blob = f"c{module}\n{name}\n.".encode()  # protocol 0: GLOBAL
    with pytest.raises(UnsafeFileError, match="f asks for " + re.escape(asked)):
        restricted_loads(blob, "f")


def test_a_hostile_vec_normalize_pickle(tmp_path):
    sentinel = tmp_path / "ran"
    path = tmp_path / "vecnormalize.pkl"
    path.write_bytes(pickle.dumps(RunsCommand(sentinel, via_subprocess=True)))
    with pytest.raises(UnsafeFileError, match=r"vecnormalize\.pkl asks for subprocess\.call"):
        load_vec_normalize(path)
    with pytest.raises(UnsafeFileError, match=r"vecnormalize\.pkl asks for subprocess\.call"):
        DaggerCallback(lambda obs: obs, teacher_vec_normalize=str(path))
    assert not sentinel.exists()
    load_pickle(path, trust_code=True)  # negative control: pickle.load runs it
    assert sentinel.exists()


def test_hostile_yaml_and_normalize(tmp_path):
    sentinel = tmp_path / "ran"
    tag = f"!!python/object/apply:os.system [\"touch '{sentinel}'\"]"
    folder = zoo_folder(tmp_path, config_yml=f"normalize: {tag}\n", args_yml=f"env_kwargs: {tag}\n")
    for name in ("config.yml", "args.yml"):
        with pytest.raises(UnsafeFileError, match=rf"{name} asks for !!python/object/apply:os\.system"):
            load_zoo_yaml(folder / name)
    with pytest.raises(UnsafeFileError, match=r"config\.yml asks for !!python/object/apply:os\.system"):
        saved_hyperparams(str(folder))
    (folder / "config.yml").write_text(f"normalize: \"__import__('os').system('touch {sentinel}')\"\n")
    with pytest.raises(UnsafeFileError, match=r"config\.yml: normalize asks for __import__"):
        saved_hyperparams(str(folder))
    assert not sentinel.exists()
    with open(folder / "args.yml") as file:  # negative control: PyYAML's unsafe loader runs it
        yaml.load(file, Loader=yaml.UnsafeLoader)
    assert sentinel.exists()


def test_a_hostile_teacher_for_the_callback(ppo_zip, tmp_path):
    sentinel = tmp_path / "ran"
    evil = rewrite_data(ppo_zip, tmp_path / "evil.zip", lr_schedule=serialized(RunsCommand(sentinel)))
    with pytest.raises(UnsafeFileError, match=r"data\['lr_schedule'\] asks for posix\.system"):
        DaggerCallback(str(evil))
    assert not sentinel.exists()


def test_a_hostile_teacher_for_the_command(ppo_zip, tmp_path):
    """``python -m sb3_xppo.dagger_distill --teacher evil.zip``, a real process: refused before anything is built."""
    sentinel = tmp_path / "ran"
    evil = rewrite_data(ppo_zip, tmp_path / "evil.zip", clip_range=serialized(RunsCommand(sentinel)))
    out = tmp_path / "out.zip"
    command = [sys.executable, "-m", "sb3_xppo.dagger_distill", "--teacher", str(evil), "--student-algo", "ppo"]
    command += ["--env", "CartPole-v1", "--timesteps", "64", "--out", str(out), "--eval-episodes", "0"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=150, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "data['clip_range'] asks for posix.system" in done.stderr and "--trust-code" in done.stderr
    assert not sentinel.exists() and not out.exists()


def test_a_hostile_zoo_folder_for_the_command(ppo_zip, tmp_path):
    """The DAgger command reads the teacher's rl-zoo3 folder: a Python tag in its args.yml is refused."""
    from sb3_xppo.distill import main

    sentinel = tmp_path / "ran"
    zoo_folder(tmp_path, args_yml=f"env_kwargs: !!python/object/apply:os.system [\"touch '{sentinel}'\"]\n")
    teacher = tmp_path / "ppo" / "CartPole-v1_1" / "CartPole-v1.zip"
    teacher.write_bytes(ppo_zip.read_bytes())
    argv = ["--teacher", str(teacher), "--student-algo", "ppo", "--env", "CartPole-v1", "--timesteps", "8"]
    assert main([*argv, "--out", str(tmp_path / "out.zip"), "--eval-episodes", "0", "--no-progress-bar"]) == 2
    assert not sentinel.exists()


def test_enjoy_and_train_continue_refuse_a_hostile_agent(ppo_zip, tmp_path, monkeypatch, capsys):
    """rl-zoo3's enjoy (through ``python -m sb3_xppo.enjoy``) and ``train -i`` load the agent safely (enjoy replaces
    learning_rate, lr_schedule and clip_range with custom_objects: those fields it never reads at all); a refusal is
    one line and exit status 2."""
    from sb3_xppo import enjoy, train

    monkeypatch.chdir(tmp_path)
    sentinel = tmp_path / "ran"
    folder = zoo_folder(tmp_path / "logs")
    evil = rewrite_data(ppo_zip, folder.parent / "CartPole-v1.zip", policy_kwargs=serialized(RunsCommand(sentinel)))
    watch = ["--algo", "ppo", "--env", "CartPole-v1", "-f", "logs", "--no-render", "-n", "5"]
    refused_by_command(capsys, enjoy.main, watch, r"data\['policy_kwargs'\] asks for posix\.system.*--trust-code")
    go_on = ["--algo", "ppo", "--env", "CartPole-v1", "-i", str(evil), "-n", "64", "--no-progress", "-f", "out"]
    refused_by_command(capsys, train.main, go_on, r"data\['policy_kwargs'\] asks for posix\.system")
    with pytest.raises(UnsafeFileError):  # --debug: the traceback, the error itself
        enjoy.main([*watch, "--debug"])
    assert not sentinel.exists()
    (folder / "vecnormalize.pkl").write_bytes(pickle.dumps(RunsCommand(sentinel)))
    (folder / "config.yml").write_text("normalize: true\n")
    rewrite_data(ppo_zip, folder.parent / "CartPole-v1.zip")  # a benign agent, its statistics hostile
    refused_by_command(capsys, enjoy.main, watch, r"vecnormalize\.pkl asks for posix\.system")
    assert not sentinel.exists()


class OwnActivation(th.nn.ReLU):
    """A user's own class in policy_kwargs: named by reference, outside the allowlist."""


def test_enjoy_with_trust_code_loads_a_users_own_class(tmp_path, monkeypatch, capsys):
    from sb3_xppo import enjoy

    monkeypatch.chdir(tmp_path)
    folder = zoo_folder(tmp_path / "logs")
    kwargs = dict(policy_kwargs=dict(net_arch=[16], activation_fn=OwnActivation), device="cpu")
    PPO("MlpPolicy", "CartPole-v1", n_steps=32, batch_size=32, **kwargs).save(folder.parent / "CartPole-v1.zip")
    argv = ["--algo", "ppo", "--env", "CartPole-v1", "-f", "logs", "--no-render", "-n", "5"]
    asked = re.escape(f"data['policy_kwargs'] asks for {OwnActivation.__module__}.OwnActivation")
    refused_by_command(capsys, enjoy.main, argv, asked)
    enjoy.main([*argv, "--trust-code"])


# ---------------------------------------------------------------------------------------------------------------------
# Benign: what the libraries write loads without trust_code, and acts as SB3's loader's model does, bit for bit
# ---------------------------------------------------------------------------------------------------------------------

ZOO = {
    "ppo": lambda: PPO(
        "MlpPolicy",
        "CartPole-v1",
        n_steps=32,
        batch_size=32,
        learning_rate=linear_schedule(3e-4),  # rl-zoo3's lin_3e-4
        clip_range=0.2,
        policy_kwargs=dict(activation_fn=th.nn.ReLU, net_arch=dict(pi=[16], vf=[16]), ortho_init=False),
        device="cpu",
        seed=0,
    ),
    "a2c": lambda: A2C(
        "MlpPolicy",
        "Pendulum-v1",
        n_steps=8,
        use_sde=True,
        policy_kwargs=dict(optimizer_class=RMSpropTFLike, optimizer_kwargs=dict(eps=1e-5), log_std_init=-2, net_arch=[16]),
        device="cpu",
        seed=0,
    ),
    "dqn": lambda: DQN("MlpPolicy", "CartPole-v1", learning_starts=8, buffer_size=64, **small()),
    "sac": lambda: SAC("MlpPolicy", "Pendulum-v1", learning_starts=8, buffer_size=64, use_sde=True, **small()),
    "td3": lambda: TD3(
        "MlpPolicy",
        "Pendulum-v1",
        learning_starts=8,
        buffer_size=64,
        action_noise=NormalActionNoise(np.zeros(1), np.ones(1)),
        **small(),
    ),
    "ddpg": lambda: DDPG("MlpPolicy", "Pendulum-v1", learning_starts=8, buffer_size=64, **small()),
    "trpo": lambda: TRPO("MlpPolicy", "CartPole-v1", n_steps=32, batch_size=32, **small()),
    "qrdqn": lambda: QRDQN("MlpPolicy", "CartPole-v1", learning_starts=8, buffer_size=64, **small()),
    "tqc": lambda: TQC("MlpPolicy", "Pendulum-v1", learning_starts=8, buffer_size=64, **small()),
    "ars": lambda: ARS("LinearPolicy", "Pendulum-v1", n_delta=2, device="cpu", seed=0),
    "crossq": lambda: CrossQ("MlpPolicy", "Pendulum-v1", learning_starts=8, buffer_size=64, **small()),
    "ppo_mask": lambda: MaskablePPO("MlpPolicy", "sb3_xppo/GridMaze-v0", n_steps=32, batch_size=32, **small()),
    "ppo_lstm": lambda: RecurrentPPO("MlpLstmPolicy", "CartPole-v1", n_steps=32, batch_size=32, device="cpu", seed=0),
    "ppo_dict": lambda: PPO("MultiInputPolicy", SimpleMultiObsEnv(random_start=False), n_steps=32, batch_size=32, **small()),
    "xppo": lambda: XPPO(
        "MlpPolicy", "CartPole-v1", n_steps=32, batch_size=32, actor_loss="spo", clip_range=(0.1, 0.3), **small()
    ),
    "xppo_mask": lambda: MaskableXPPO("MlpPolicy", "sb3_xppo/GridMaze-v0", n_steps=32, batch_size=32, **small()),
    "xppo_lstm": lambda: RecurrentXPPO("MlpLstmPolicy", "CartPole-v1", n_steps=32, batch_size=32, device="cpu", seed=0),
    "xppo_mask_lstm": lambda: MaskableRecurrentXPPO(
        "MlpLstmPolicy", "sb3_xppo/GridMaze-v0", n_steps=32, batch_size=32, seed=0
    ),
}


def same_actions(model, reference, n: int = 16) -> None:
    """Both models' deterministic and sampled actions on the same observations, bit for bit (and their parameters)."""
    for (name, a), b in zip(model.policy.state_dict().items(), reference.policy.state_dict().values(), strict=True):
        assert th.equal(a, b), name
    space = model.observation_space
    space.seed(0)
    samples = [space.sample() for _ in range(n)]
    obs = {k: np.stack([s[k] for s in samples]) for k in space.spaces} if isinstance(space, spaces.Dict) else np.stack(samples)
    extra = {}
    if isinstance(model, (MaskablePPO, MaskableRecurrentXPPO)):  # every action allowed but the first
        masks = np.ones((n, int(model.action_space.n)), bool)
        masks[:, 0] = False
        extra["action_masks"] = masks
    for deterministic in (True, False):
        th.manual_seed(1)
        ours = model.predict(obs, deterministic=deterministic, **extra)
        th.manual_seed(1)
        theirs = reference.predict(obs, deterministic=deterministic, **extra)
        assert np.array_equal(ours[0], theirs[0])
        if ours[1] is not None:
            assert all(np.array_equal(x, y) for x, y in zip(ours[1], theirs[1], strict=True))


@pytest.mark.parametrize("name", sorted(ZOO))
def test_what_the_libraries_write_loads_safely_and_acts_the_same(name, tmp_path):
    model = ZOO[name]()
    model.learn(64)
    path = tmp_path / f"{name}.zip"
    model.save(path)
    cls = type(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no field dropped or rebuilt
        safe = load_model(cls, path, device="cpu")
    reference = cls.load(path, device="cpu", **({"trust_code": True} if hasattr(cls, "options_class") else {}))
    assert type(safe) is cls
    same_actions(safe, reference)
    if hasattr(model, "replay_buffer") and model.replay_buffer is not None:
        model.save_replay_buffer(tmp_path / "buffer.pkl")
        buffer = load_pickle(tmp_path / "buffer.pkl")
        assert np.array_equal(buffer.observations, model.replay_buffer.observations)


@pytest.mark.parametrize("name", sorted(set(ZOO) - {"ppo_dict"}))
def test_the_class_is_told_from_the_checkpoint(name, tmp_path):
    """Every SB3 and sb3-contrib algorithm (and the package's), by its rl-zoo3 name: told from the file alone."""
    model = ZOO[name]()
    model.save(tmp_path / "m.zip")
    assert type(load_model(tmp_path / "m.zip")) is type(model)
    assert type(load_model(name, tmp_path / "m.zip")) is type(model)
    with pytest.raises(TypeError, match="path of the checkpoint"):
        load_model(PPO)


def test_the_package_writes_what_stock_sb3_loads(xppo_zip):
    """No new format: an XPPO checkpoint loads with SB3's PPO.load, and its network is XPPO's."""
    stock = PPO.load(xppo_zip, device="cpu")
    same_actions(XPPO.load(xppo_zip, device="cpu"), stock)


def test_vec_normalize_statistics(tmp_path):
    venv = VecNormalize(make_vec_env("Pendulum-v1", n_envs=2, seed=0))
    venv.reset()
    for _ in range(5):
        venv.step(np.zeros((2, 1), np.float32))
    venv.save(tmp_path / "vecnormalize.pkl")
    ours = load_vec_normalize(tmp_path / "vecnormalize.pkl", make_vec_env("Pendulum-v1", n_envs=2))
    theirs = VecNormalize.load(str(tmp_path / "vecnormalize.pkl"), make_vec_env("Pendulum-v1", n_envs=2))
    assert np.array_equal(ours.obs_rms.mean, theirs.obs_rms.mean) and np.array_equal(ours.obs_rms.var, theirs.obs_rms.var)
    assert ours.venv is not None and load_vec_normalize(tmp_path / "vecnormalize.pkl").venv is None
    (tmp_path / "other.pkl").write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(ValueError, match="not VecNormalize statistics"):
        load_vec_normalize(tmp_path / "other.pkl")


@pytest.mark.parametrize("fixture", ["xppo_v0_clip_pair", "xppo_v0_multi_critic"])
def test_old_checkpoints_in_tests_data(fixture):
    """Both fixtures are the benign case: every pickled field is within the allowlist (schedule objects, the clip
    pair, the policy and buffer classes, spaces), no function by value; they load safely as SB3's loader loads them."""
    path = DATA / f"{fixture}.zip"
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        safe = XPPO.load(path, device="cpu")
    same_actions(safe, XPPO.load(path, device="cpu", trust_code=True))
    if fixture == "xppo_v0_clip_pair":  # and the actions recorded when it was saved (to another CPU's rounding)
        obs = np.linspace(-1, 1, 5, dtype=np.float32)[:, None]
        recorded = np.load(DATA / f"{fixture}_actions.npy")
        np.testing.assert_allclose(safe.predict(obs, deterministic=True)[0], recorded, rtol=1e-6, atol=1e-8)


def test_a_users_lambda_schedule(tmp_path):
    """The common honest case: the user's own schedule is code pickled by value. The user's own file (signed) loads as
    SB3 loads it; the same file from elsewhere acts with an inert stand-in, and training with it is refused, named."""
    model = XPPO("MlpPolicy", "CartPole-v1", n_steps=32, batch_size=32, learning_rate=lambda p: 1e-3 * p, **small())
    model.save(tmp_path / "mine.zip")
    own = XPPO.load(tmp_path / "mine.zip", device="cpu", env=make_vec_env("CartPole-v1"))
    assert own.learning_rate(0.5) == pytest.approx(5e-4)
    same_actions(load_model(tmp_path / "mine.zip", device="cpu"), own)
    own.learn(32)  # the user's own file trains on
    theirs = unsigned(tmp_path / "mine.zip", tmp_path / "theirs.zip")
    with pytest.warns(UserWarning, match=r"data\['learning_rate'\]: a function pickled by value \(.*<lambda>\).*inert"):
        acting = XPPO.load(theirs, device="cpu")
    same_actions(acting, own)
    with pytest.raises(
        UnsafeFileError, match=r"theirs\.zip: data\['learning_rate'\] asks for .*<lambda> \(a function pickled by value"
    ):
        acting.learn(32)
    with pytest.raises(UnsafeFileError, match="learning_rate"):
        load_model(PPO, theirs, device="cpu", env=make_vec_env("CartPole-v1")).learn(64)  # stock SB3: where it calls it
    trusted = XPPO.load(theirs, trust_code=True, device="cpu")
    assert trusted.learning_rate(0.5) == pytest.approx(5e-4)
    # custom_objects replaces the field instead (SB3's way); lr_schedule is then rebuilt from it, nothing to say
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        assert XPPO.load(theirs, custom_objects={"learning_rate": 1e-4}).lr_schedule(0.5) == 1e-4


def test_old_schedule_closures_are_rebuilt_from_their_numbers(tmp_path):
    """Older SB3 pickled its schedules as closures (constant_fn, get_linear_fn): each is rebuilt from the numbers in its
    closure, never run, as the class that replaced it, with a warning naming the field and what it became."""
    model = PPO("MlpPolicy", "CartPole-v1", n_steps=32, batch_size=32, **small())
    model.save(tmp_path / "new.zip")
    old = rewrite_data(tmp_path / "new.zip", tmp_path / "old.zip", lr_schedule=serialized(constant_fn(3e-4)))
    with pytest.warns(
        UserWarning, match=r"data\['lr_schedule'\]: Stable-Baselines3's constant_fn .*ConstantSchedule\(val=0.0003\)"
    ):
        safe = load_model(PPO, old)
    same_actions(safe, PPO.load(old, device="cpu"))
    assert safe.lr_schedule(0.3) == 3e-4
    dqn = DQN("MlpPolicy", "CartPole-v1", **small())
    dqn.save(tmp_path / "dqn.zip")
    schedule = serialized(get_linear_fn(1.0, 0.05, 0.1))
    old_dqn = rewrite_data(tmp_path / "dqn.zip", tmp_path / "old_dqn.zip", exploration_schedule=schedule)
    with pytest.warns(UserWarning, match="exploration_schedule"):
        assert load_model(DQN, old_dqn).exploration_schedule(0.95) == pytest.approx(0.525)
    old_clip = rewrite_data(tmp_path / "new.zip", tmp_path / "clip.zip", clip_range=serialized(constant_fn(0.3)))
    with pytest.warns(
        UserWarning, match=r"data\['clip_range'\]: Stable-Baselines3's constant_fn .*ConstantSchedule\(val=0\.3\)"
    ):
        assert load_model(PPO, old_clip).clip_range(0.5) == 0.3


# ---------------------------------------------------------------------------------------------------------------------
# rl-zoo3's files and literals
# ---------------------------------------------------------------------------------------------------------------------


def test_what_rl_zoo3_writes_reads_as_its_unsafe_loader_reads_it(tmp_path):
    """rl-zoo3 dumps OrderedDicts, tuples and activation classes (its _save_config): the same values, read safely."""
    saved = OrderedDict(
        [
            ("normalize", "dict(norm_obs=True, norm_reward=False)"),
            ("policy_kwargs", {"activation_fn": th.nn.Tanh, "net_arch": [64, 64]}),
            ("frame", (1, 2)),
            ("env_wrapper", [{"gymnasium.wrappers.TimeLimit": {"max_episode_steps": 100}}]),
        ]
    )
    folder = zoo_folder(tmp_path, config_yml=yaml.dump(saved), args_yml=yaml.dump(OrderedDict(env="CartPole-v1")))
    with open(folder / "config.yml") as file:
        assert load_zoo_yaml(folder / "config.yml") == yaml.load(file, Loader=yaml.UnsafeLoader)
    from rl_zoo3.utils import get_saved_hyperparams

    assert saved_hyperparams(str(folder), test_mode=True) == get_saved_hyperparams(str(folder), test_mode=True)
    assert saved_hyperparams(str(tmp_path / "none")) == ({}, None)


@pytest.mark.parametrize(
    "text, value",
    [
        ("0.5", 0.5),
        ("-3", -3),
        ("[64, 64]", [64, 64]),
        ("{'a': (1, 2)}", {"a": (1, 2)}),
        ("dict(norm_obs=True, norm_reward=False)", {"norm_obs": True, "norm_reward": False}),
        (
            "dict(net_arch=dict(pi=[8], vf=[8]), activation_fn=nn.ReLU)",
            {"net_arch": {"pi": [8], "vf": [8]}, "activation_fn": th.nn.ReLU},
        ),
        (
            "dict(activation_fn=th.nn.Tanh, optimizer_class=th.optim.RMSprop)",
            {"activation_fn": th.nn.Tanh, "optimizer_class": th.optim.RMSprop},
        ),
        ("dict(optimizer_class=RMSpropTFLike)", {"optimizer_class": RMSpropTFLike}),
    ],
)
def test_literals(text, value):
    assert python_literal(text, "f") == value


@pytest.mark.parametrize(
    "text",
    ["__import__('os').system('true')", "os.system", "nn.Linear", "dict(**x)", "dict(a=print('x'))", "1 + 1", "lambda: 0"],
)
def test_literals_refuse_code(text):
    with pytest.raises(UnsafeFileError, match=r"^field asks for"):
        python_literal(text, "field")


def test_literals_refuse_what_is_not_python():
    with pytest.raises(ValueError, match="--policy-kwargs: cannot read"):
        python_literal("dict(", "--policy-kwargs")


def test_same_actions_can_fail():
    """Negative control of the comparison: two differently seeded models are told apart."""
    with pytest.raises(AssertionError):
        same_actions(PPO("MlpPolicy", "CartPole-v1", **small()), PPO("MlpPolicy", "CartPole-v1", **{**small(), "seed": 1}))


@pytest.mark.slow
def test_a_zoo_run_is_watched_and_continued_safely(tmp_path, monkeypatch):
    """A run rl-zoo3 saved (its config.yml and args.yml, VecNormalize statistics): enjoy and train -i, no trust
    needed; a continued agent with a lambda schedule of the user's own needs --trust-code."""
    from sb3_xppo import enjoy, train

    monkeypatch.chdir(tmp_path)
    vec_normalize_load = vars(VecNormalize)["load"]
    common = ["--algo", "ppo", "--env", "CartPole-v1", "--no-progress", "--eval-freq", "-1", "-f", "logs"]
    params = ["-params", "n_envs:2", "n_steps:32", "batch_size:32", "normalize:True"]
    params += ["policy_kwargs:dict(activation_fn=nn.Tanh, net_arch=[16])"]
    train.main([*common, "-n", "64", *params])
    run = tmp_path / "logs" / "ppo" / "CartPole-v1_1"
    assert (run / "CartPole-v1" / "vecnormalize.pkl").is_file()
    assert "python/name:torch.nn.modules.activation.Tanh" in (run / "CartPole-v1" / "config.yml").read_text()
    enjoy.main(["--algo", "ppo", "--env", "CartPole-v1", "-f", "logs", "--no-render", "-n", "20"])
    same_actions(load_model(run / "CartPole-v1.zip"), PPO.load(run / "CartPole-v1.zip", device="cpu"))
    train.main([*common, "-n", "64", *params, "-i", str(run / "CartPole-v1.zip")])

    model = PPO("MlpPolicy", "CartPole-v1", n_steps=32, batch_size=32, clip_range=lambda p: 0.2 * p, **small())
    model.save(tmp_path / "mine.zip")  # (stock SB3's save: not signed)
    with pytest.raises(SystemExit, match="2"):
        train.main([*common, "-n", "64", *params, "-i", str(tmp_path / "mine.zip")])
    train.main([*common, "-n", "64", *params, "-i", str(tmp_path / "mine.zip"), "--trust-code"])
    # the sessions put everything back
    assert "load" not in vars(PPO) and vars(VecNormalize)["load"] is vec_normalize_load
    assert yaml.UnsafeLoader.__module__.startswith("yaml")


def test_the_commands_loads_by_trust(tmp_path):
    """What a command's session puts on each algorithm of rl-zoo3's table (sb3_xppo/zoo/loading.py): a stock class
    checks unless --trust-code, the package's classes (which check themselves) trust with it."""
    from sb3_xppo.zoo.loading import algorithm_load

    assert algorithm_load(XPPO, trust_code=False) is None and algorithm_load(PPO, trust_code=True) is None
    XPPO("MlpPolicy", "CartPole-v1", n_steps=32, batch_size=32, clip_range=lambda p: 0.2 * p, **small()).save(
        tmp_path / "mine.zip"
    )
    trusting = algorithm_load(XPPO, trust_code=True).__get__(None, XPPO)
    assert trusting(tmp_path / "mine.zip", device="cpu").clip_range(0.5) == pytest.approx(0.1)
    theirs = unsigned(tmp_path / "mine.zip", tmp_path / "theirs.zip")
    acting = algorithm_load(PPO, trust_code=False).__get__(None, PPO)
    with pytest.warns(UserWarning, match="inert"):
        acting(theirs, device="cpu")
    training = algorithm_load(PPO, trust_code=False, for_training=True).__get__(None, PPO)
    with pytest.raises(
        UnsafeFileError, match=r"data\['clip_range'\] asks for .*<lambda> \(a function pickled by value, which training"
    ):
        training(theirs)
