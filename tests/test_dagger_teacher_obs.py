"""
What the teacher reads: its own VecNormalize statistics (callback and command line, rl-zoo3 runs), privileged keys the
student never sees, and non-finite observations caught where they enter.
"""

import io
import pickle
import sys
from contextlib import redirect_stdout
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch as th
import yaml
from gymnasium import spaces
from stable_baselines3 import PPO, SAC, TD3
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.vec_env import VecEnvWrapper, VecNormalize
from torch.distributions import Categorical

from sb3_xppo import XPPO, DaggerCallback, DaggerDistiller
from sb3_xppo import distill as cli
from sb3_xppo.dagger_distill import StudentObsWrapper

# A CartPole whose observations are scaled and shifted: a teacher trained there with VecNormalize(norm_obs=True) acts
# on (obs - SHIFT) / SCALE, the true state. Given the raw (shifted) observations it pushes one way whatever the state.
SCALE = np.array([5.0, 2.0, 10.0, 1.0], dtype=np.float32)
SHIFT = np.array([3.0, -2.0, 4.0, 2.0], dtype=np.float32)


class ShiftScale(gym.ObservationWrapper):
    """CartPole's observations times SCALE plus SHIFT (named by the rl-zoo3 config of the tests below)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        box = env.observation_space
        self.observation_space = spaces.Box(box.low * SCALE + SHIFT, box.high * SCALE + SHIFT, dtype=np.float32)

    def observation(self, observation):
        return (observation * SCALE + SHIFT).astype(np.float32)


def balancing_teacher() -> PPO:
    """
    A confident CartPole teacher with no training to wait for: a PPO policy whose logits are set to push towards
    angle + angular velocity (it balances for the full 500 steps). It acts on the true state.
    """
    teacher = PPO("MlpPolicy", "CartPole-v1", policy_kwargs=dict(net_arch=[]), seed=0, device="cpu")
    with th.no_grad():
        w = 20.0 * th.tensor([0.0, 0.0, 1.0, 1.0])
        teacher.policy.action_net.weight.copy_(th.stack([-w, w]))
        teacher.policy.action_net.bias.zero_()
    return teacher


def teacher_statistics() -> VecNormalize:
    """The VecNormalize of that teacher on ShiftScale(CartPole): its statistics map the raw observations back."""
    vec_normalize = VecNormalize(make_vec_env("CartPole-v1", n_envs=1, wrapper_class=ShiftScale), norm_reward=False)
    vec_normalize.obs_rms = RunningMeanStd(shape=(4,))
    vec_normalize.obs_rms.mean = SHIFT.astype(np.float64)
    vec_normalize.obs_rms.var = SCALE.astype(np.float64) ** 2 - vec_normalize.epsilon
    return vec_normalize


def states(n: int = 1000) -> np.ndarray:
    """True CartPole states around the upright pole, where the teacher's decision matters."""
    return np.random.default_rng(0).uniform([-1, -1, -0.2, -1], [1, 1, 0.2, 1], size=(n, 4)).astype(np.float32)


def agreement(student, student_obs: np.ndarray, teacher: PPO, true_states: np.ndarray) -> float:
    return float(np.mean(student.predict(student_obs, deterministic=True)[0] == teacher.predict(true_states)[0]))


# ----------------------------------------------------------------------------------------------------------------------
# teacher_vec_normalize in the callback
# ----------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("with_statistics", [True, False])
def test_a_normalizing_teacher_distills_only_with_its_statistics(with_statistics):
    """
    The student (itself under VecNormalize) on ShiftScale(CartPole): with teacher_vec_normalize the teacher reads
    its normalized observations, computed from the raw ones, and the student agrees with it; without, it does not.
    """
    teacher, statistics = balancing_teacher(), teacher_statistics()
    env = VecNormalize(make_vec_env("CartPole-v1", n_envs=4, seed=0, wrapper_class=ShiftScale), norm_reward=False)
    student = PPO("MlpPolicy", env, n_steps=64, seed=0, device="cpu")
    callback = DaggerCallback(teacher, teacher_vec_normalize=statistics if with_statistics else None)
    student.learn(4096, callback=callback)
    env.training = False
    true_states = states()
    score = agreement(student, env.normalize_obs(true_states * SCALE + SHIFT), teacher, true_states)
    if with_statistics:
        assert score >= 0.95
        # The teacher read its own normalization of the raw observations: the true state, not the student's input
        stored = callback.dataset.get(th.arange(len(callback.dataset)))
        assert stored["states"].abs().max() < 10 and not th.allclose(stored["states"], stored["teacher_states"], atol=0.1)
        assert stored["teacher_states"][:, 2].abs().max() < 0.25  # the pole angle of an upright CartPole, in radians
        # The statistics given were snapshotted, never updated nor switched to evaluation
        assert statistics.training and np.array_equal(statistics.obs_rms.mean, SHIFT)
    else:
        assert score <= 0.7  # the raw observations look alike to the teacher: it pushes one way
        # It read the raw observations (not the student's normalized ones): around SHIFT
        assert callback.dataset.get(th.arange(len(callback.dataset)))["teacher_states"][:, 2].min() > 1


def test_teacher_vec_normalize_from_a_pkl_and_its_errors(tmp_path):
    teacher = balancing_teacher()
    teacher_statistics().save(str(tmp_path / "vecnormalize.pkl"))
    env = make_vec_env("CartPole-v1", n_envs=2, seed=0, wrapper_class=ShiftScale)  # a raw student this time
    student = PPO("MlpPolicy", env, n_steps=32, seed=0, device="cpu", policy_kwargs=dict(net_arch=[16]))
    callback = DaggerCallback(teacher, teacher_vec_normalize=tmp_path / "vecnormalize.pkl", beta=1.0)
    student.learn(64, callback=callback)
    stored = callback.dataset.get(th.arange(len(callback.dataset)))
    th.testing.assert_close(stored["teacher_states"], (stored["states"] - th.as_tensor(SHIFT)) / th.as_tensor(SCALE))
    # beta = 1: every executed action is the teacher's on its normalized observations
    actions = student.rollout_buffer.actions.reshape(-1)
    observations = student.rollout_buffer.observations.reshape(-1, 4)
    np.testing.assert_array_equal(actions, teacher.predict((observations - SHIFT) / SCALE, deterministic=True)[0])

    # A student under VecNormalize (here frozen with the teacher's own statistics): the teacher reads the original
    # observations of the very steps the student acted on, so both read the same here, and acts on them
    env = VecNormalize(make_vec_env("CartPole-v1", n_envs=2, seed=1, wrapper_class=ShiftScale), training=False)
    env.obs_rms = teacher_statistics().obs_rms
    student = PPO("MlpPolicy", env, n_steps=32, seed=0, device="cpu", policy_kwargs=dict(net_arch=[16]))
    callback = DaggerCallback(teacher, teacher_vec_normalize=tmp_path / "vecnormalize.pkl", beta=1.0)
    student.learn(64, callback=callback)
    stored = callback.dataset.get(th.arange(len(callback.dataset)))
    th.testing.assert_close(stored["teacher_states"], stored["states"])
    observations = student.rollout_buffer.observations.reshape(-1, 4)  # normalized: the true state
    np.testing.assert_array_equal(
        student.rollout_buffer.actions.reshape(-1), teacher.predict(observations, deterministic=True)[0]
    )

    with pytest.raises(ValueError, match="no VecNormalize statistics at"):
        DaggerCallback(teacher, teacher_vec_normalize=tmp_path / "missing.pkl")
    with pytest.raises(TypeError, match="teacher_vec_normalize must be None, a VecNormalize or the path"):
        DaggerCallback(teacher, teacher_vec_normalize=42)
    pendulum = VecNormalize(make_vec_env("Pendulum-v1", n_envs=1))
    with pytest.raises(ValueError, match=r"teacher_vec_normalize normalizes Box.*but the teacher reads Box"):
        student.learn(32, callback=DaggerCallback(teacher, teacher_vec_normalize=pendulum))


# ----------------------------------------------------------------------------------------------------------------------
# The command line and rl-zoo3 runs
# ----------------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def zoo_run(tmp_path_factory) -> Path:
    """A real rl-zoo3 run (a short one): normalize, an env wrapper (TimeFeatureWrapper: 5 observations) and env kwargs."""
    import rl_zoo3.train

    folder = tmp_path_factory.mktemp("zoo") / "logs"
    argv = ["train", "--algo", "ppo", "--env", "CartPole-v1", "-n", "128", "--seed", "0", "--eval-freq", "-1"]
    argv += [
        "-f",
        str(folder),
        "--env-kwargs",
        "sutton_barto_reward:True",
        "-params",
        "n_envs:2",
        "n_steps:32",
        "batch_size:64",
    ]
    argv += ["normalize:True", "env_wrapper:'rl_zoo3.wrappers.TimeFeatureWrapper'", "policy_kwargs:dict(net_arch=[16])"]
    old, sys.argv = sys.argv, argv
    try:
        with redirect_stdout(io.StringIO()):
            rl_zoo3.train.train()
    finally:
        sys.argv = old
    return folder / "ppo" / "CartPole-v1_1"


class _Capture:
    """Records what the command builds: the distiller and make_vec_env's arguments."""

    def __init__(self, monkeypatch) -> None:
        import rl_zoo3.utils

        self.distillers, self.envs = [], []
        capture = self

        class Distiller(DaggerDistiller):
            def __init__(self, *args, **kwargs) -> None:
                super().__init__(*args, **kwargs)
                capture.distillers.append(self)

        def make_vec_env_spy(env_id, **kwargs):
            capture.envs.append(kwargs)
            return make_vec_env(env_id, **kwargs)

        monkeypatch.setattr(cli, "DaggerDistiller", Distiller)
        # the command builds the env itself without rl-zoo3, else by rl-zoo3's create_test_env (through sb3_xppo.zoo)
        monkeypatch.setattr(cli, "make_vec_env", make_vec_env_spy)
        monkeypatch.setattr(rl_zoo3.utils, "make_vec_env", make_vec_env_spy)


def test_the_command_reads_the_zoo_run_beside_the_teacher(zoo_run, tmp_path, monkeypatch, capsys):
    capture = _Capture(monkeypatch)
    base = ["--teacher", str(zoo_run / "CartPole-v1.zip"), "--student-algo", "ppo", "--env", "CartPole-v1"]
    base += ["--timesteps", "64", "--n-envs", "2", "--eval-episodes", "1", "--no-progress-bar"]
    assert cli.main([*base, "--out", str(tmp_path / "a.zip")]) == 0
    assert f"normalized by {zoo_run / 'CartPole-v1' / 'vecnormalize.pkl'}" in capsys.readouterr().out
    # The env as rl-zoo3 built it: its wrapper (a time feature) and env kwargs, for the student and the evaluation
    assert capture.envs and all(kwargs["env_kwargs"] == {"sutton_barto_reward": True} for kwargs in capture.envs)
    assert PPO.load(tmp_path / "a.zip", device="cpu").observation_space.shape == (5,)
    # The teacher reads the raw observations normalized by the run's statistics, frozen
    with open(zoo_run / "CartPole-v1" / "vecnormalize.pkl", "rb") as file:
        statistics = pickle.load(file)
    stored = capture.distillers[0].dataset.get(th.arange(64))
    expected = statistics.normalize_obs(stored["states"].numpy())
    np.testing.assert_allclose(stored["teacher_states"].numpy(), expected, atol=1e-6)

    # --env-kwargs overrides the run's; --no-teacher-vec-normalize: raw observations for the teacher
    args = [*base, "--out", str(tmp_path / "b.zip"), "--env-kwargs", "sutton_barto_reward:False", "--no-teacher-vec-normalize"]
    assert cli.main(args) == 0
    assert "normalized by" not in capsys.readouterr().out
    assert capture.envs[-1]["env_kwargs"] == {"sutton_barto_reward": False}
    assert "teacher_states" not in capture.distillers[-1].dataset.get(th.arange(1))
    # --teacher-vec-normalize names the statistics; --no-zoo-config builds the bare env, which the teacher cannot read
    args = [*base, "--out", str(tmp_path / "c.zip"), "--teacher-vec-normalize", str(tmp_path / "none.pkl")]
    assert cli.main(args) == 2
    assert "no VecNormalize statistics at" in capsys.readouterr().err
    assert cli.main([*base, "--out", str(tmp_path / "d.zip"), "--no-zoo-config"]) == 2
    assert "the teacher reads Box(" in capsys.readouterr().err
    # ... unless told everything by hand
    pkl = str(zoo_run / "CartPole-v1" / "vecnormalize.pkl")
    by_hand = ["--no-zoo-config", "--env-wrapper", "rl_zoo3.wrappers.TimeFeatureWrapper", "--teacher-vec-normalize", pkl]
    assert cli.main([*base, "--out", str(tmp_path / "e.zip"), *by_hand]) == 0
    assert f"normalized by {pkl}" in capsys.readouterr().out and capture.envs[-1]["env_kwargs"] == {}
    assert cli.main([*base, "--out", str(tmp_path / "f.zip"), "--env-kwargs", "sutton_barto_reward"]) == 2
    assert "--env-kwargs takes key:value pairs" in capsys.readouterr().err


def write_zoo_layout(folder: Path, teacher: PPO, statistics: VecNormalize) -> Path:
    """rl-zoo3's layout of a run: <run>/<env>.zip beside <run>/<env>/{config.yml, args.yml, vecnormalize.pkl}."""
    settings = folder / "CartPole-v1"
    settings.mkdir(parents=True)
    teacher.save(folder / "CartPole-v1.zip")
    statistics.save(str(settings / "vecnormalize.pkl"))
    config = dict(normalize=True, env_wrapper="test_dagger_teacher_obs.ShiftScale", policy="MlpPolicy")
    (settings / "config.yml").write_text(yaml.dump(config))
    (settings / "args.yml").write_text(yaml.dump(dict(env="CartPole-v1", env_kwargs=None)))
    return folder / "CartPole-v1.zip"


def test_the_command_evaluates_the_teacher_with_its_statistics(tmp_path):
    """The final evaluation runs the teacher as it was trained: it balances with its statistics, falls without them.
    (The run's config names a wrapper of the user's own, this module's: code, so --trust-code.)"""
    teacher_path = write_zoo_layout(tmp_path / "logs" / "ppo" / "CartPole-v1_1", balancing_teacher(), teacher_statistics())
    returns = {}
    for flag in ([], ["--no-teacher-vec-normalize"]):
        argv = ["--teacher", str(teacher_path), "--student-algo", "ppo", "--env", "CartPole-v1", "--timesteps", "64"]
        argv += ["--trust-code"]
        argv += ["--out", str(tmp_path / "student.zip"), "--eval-episodes", "2", "--no-progress-bar", *flag]
        returns[bool(flag)] = cli.distill(cli.parse_args(argv))["teacher_return"]
    assert returns[False] == 500 and returns[True] < 50, returns


# ----------------------------------------------------------------------------------------------------------------------
# Privileged teachers: the student never sees the privileged key
# ----------------------------------------------------------------------------------------------------------------------


class Privileged(gym.ObservationWrapper):
    """CartPole as a Dict: 'obs' (a noisy view) and 'privileged' (the true state, marked by +100)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        box = env.observation_space
        self.observation_space = spaces.Dict({"obs": box, "privileged": spaces.Box(box.low + 100, box.high + 100)})

    def observation(self, observation):
        noise = self.np_random.normal(0.0, 0.05, size=observation.shape).astype(np.float32)
        return {"obs": observation + noise, "privileged": observation + 100}


def _record_inputs(module: th.nn.Module) -> list:
    """The inputs of every forward call of ``module`` (a features extractor)."""
    seen = []
    module.register_forward_pre_hook(lambda _, inputs: seen.append(inputs[0]))
    return seen


def test_the_student_never_sees_the_privileged_key():
    """The common setup: a teacher reading both keys; a student whose policy reads (and is built on) 'obs' only."""
    teacher = PPO("MultiInputPolicy", make_vec_env("CartPole-v1", wrapper_class=Privileged), seed=0, device="cpu")
    env = StudentObsWrapper(make_vec_env("CartPole-v1", n_envs=2, seed=0, wrapper_class=Privileged), "obs")
    student = PPO("MlpPolicy", env, n_steps=64, seed=0, device="cpu", policy_kwargs=dict(net_arch=[16]))
    assert student.observation_space == Privileged(gym.make("CartPole-v1")).observation_space["obs"]
    teacher_inputs = _record_inputs(teacher.policy.features_extractor)
    student_inputs = _record_inputs(student.policy.features_extractor)
    callback = DaggerCallback(teacher, beta=0.5)
    student.learn(256, callback=callback)  # episodes end on the way: terminal observations are cut too

    assert teacher_inputs and all(set(x) == {"obs", "privileged"} for x in teacher_inputs)
    assert any((x["privileged"] > 50).all() for x in teacher_inputs)  # the teacher read the privileged state
    assert student_inputs and all(isinstance(x, th.Tensor) and x.shape[1:] == (4,) for x in student_inputs)
    assert all((x.abs() < 50).all() for x in student_inputs)  # and the student's policy never did
    # Teacher and student states of each stored step are the same moment: the noisy view of the same true state
    stored = callback.dataset.get(th.arange(len(callback.dataset)))
    th.testing.assert_close(stored["states"], stored["teacher_states"]["obs"])
    assert (stored["teacher_states"]["privileged"] - 100 - stored["states"]).abs().max() < 0.5


def test_student_obs_wrapper_errors():
    dict_env = make_vec_env("CartPole-v1", wrapper_class=Privileged)
    with pytest.raises(ValueError, match="needs Dict observations"):
        StudentObsWrapper(make_vec_env("CartPole-v1"), "obs")
    with pytest.raises(ValueError, match="no key \\['nope'\\]"):
        StudentObsWrapper(dict_env, "nope")
    with pytest.raises(TypeError, match="student_keys must be a key"):
        StudentObsWrapper(dict_env, [])
    # VecNormalize inside the wrapper would give the teacher the student's normalization
    inside = StudentObsWrapper(VecNormalize(make_vec_env("CartPole-v1", wrapper_class=Privileged)), "obs")
    student = PPO("MlpPolicy", inside, n_steps=32, batch_size=32, device="cpu")
    teacher = PPO("MultiInputPolicy", dict_env, device="cpu")
    with pytest.raises(ValueError, match="wrap VecNormalize around StudentObsWrapper"):
        student.learn(32, callback=DaggerCallback(teacher))
    # Around it, the student's observations are normalized and the teacher's stay raw
    around = VecNormalize(StudentObsWrapper(make_vec_env("CartPole-v1", n_envs=2, wrapper_class=Privileged), "obs"))
    student = PPO("MlpPolicy", around, n_steps=32, device="cpu", policy_kwargs=dict(net_arch=[16]))
    callback = DaggerCallback(teacher)
    student.learn(64, callback=callback)
    assert (callback.dataset.get(th.arange(64))["teacher_states"]["privileged"] > 50).all()


# ----------------------------------------------------------------------------------------------------------------------
# Non-finite observations (issue 17)
# ----------------------------------------------------------------------------------------------------------------------


class _Poison(VecEnvWrapper):
    """Puts ``value`` into env ``index``'s observation (under ``key``) at vector step ``at``."""

    def __init__(self, venv, at: int, index: int, value: float, key: str | None = None) -> None:
        super().__init__(venv)
        self.at, self.index, self.value, self.key, self.steps = at, index, value, key, 0

    def reset(self):
        return self.venv.reset()

    def step_wait(self):
        obs, rewards, dones, infos = self.venv.step_wait()
        self.steps += 1
        if self.steps == self.at:
            target = obs if self.key is None else obs[self.key]
            target[self.index, 1] = self.value
        return obs, rewards, dones, infos


@pytest.mark.parametrize("algo", [PPO, XPPO, SAC])
def test_a_non_finite_observation_stops_learn_before_any_update(algo):
    """Found where it arrives (after env.step, before the policy or the dataset sees it); the model is restored."""
    env_id, teacher = ("Pendulum-v1", TD3("MlpPolicy", "Pendulum-v1", device="cpu")) if algo is SAC else ("CartPole-v1", None)
    env = _Poison(make_vec_env(env_id, n_envs=3, seed=0), at=5, index=2, value=np.nan)
    kwargs = dict(learning_starts=0) if algo is SAC else dict(n_steps=32, batch_size=32)
    student = algo("MlpPolicy", env, seed=0, device="cpu", policy_kwargs=dict(net_arch=[16]), **kwargs)
    before = th.nn.utils.parameters_to_vector(student.policy.parameters()).clone()
    match = r"non-finite student observation \(nan\) from env 2 at step 15"
    if algo is XPPO:  # XPPO may find it first itself, with its own message
        match = r"non-finite (student )?observation.*from env 2"
    with pytest.raises(ValueError, match=match):
        student.learn(256, callback=DaggerCallback(teacher or balancing_teacher(), gradient_steps=1))
    if algo is not SAC:  # SAC trains at every step from the first
        assert th.equal(before, th.nn.utils.parameters_to_vector(student.policy.parameters()))
    assert not {"forward", "collect_rollouts", "_sample_action"} & (set(vars(student.policy)) | set(vars(student)))


def test_a_non_finite_privileged_observation_names_its_key():
    env = _Poison(
        make_vec_env("CartPole-v1", n_envs=2, wrapper_class=Privileged), at=3, index=1, value=-np.inf, key="privileged"
    )
    student = PPO("MlpPolicy", StudentObsWrapper(env, "obs"), n_steps=32, device="cpu", policy_kwargs=dict(net_arch=[16]))
    teacher = PPO("MultiInputPolicy", make_vec_env("CartPole-v1", wrapper_class=Privileged), device="cpu")
    with pytest.raises(ValueError, match=r"non-finite teacher observation \(-inf\) from env 1 at step 6, key 'privileged'"):
        student.learn(64, callback=DaggerCallback(teacher))


def test_the_distiller_refuses_non_finite_student_states():
    student = th.nn.Linear(4, 2)
    distiller = DaggerDistiller(lambda s: Categorical(logits=student(s)), lambda s: Categorical(logits=th.zeros(len(s), 2)))
    states_ = th.randn(8, 4)
    states_[3, 2] = np.inf
    with pytest.raises(ValueError, match=r"non-finite student state \(inf\) from row 3 of the batch, entry 2"):
        distiller(states_)
    with pytest.raises(ValueError, match=r"from row 1 of the batch, key 'b'"):
        distiller({"a": th.zeros(2, 1), "b": th.tensor([[0.0], [np.nan]])})

    # In the DAgger loop: the env index and the step
    loop = DaggerDistiller(
        lambda s: Categorical(logits=student(s)),
        lambda s: Categorical(logits=th.zeros(len(s), 2)),
        env=_NanFromStep3(),
        params=student.parameters(),
    )
    with pytest.raises(ValueError, match=r"non-finite student observation \(nan\) from env 1 at step 3, entry 0"):
        loop.collect(10)
    assert len(loop.dataset) == 3 * 2  # the finite steps only


class _NanFromStep3:
    """Two envs (gymnasium's vector API) of zero observations; env 1's turn NaN from the third step on."""

    def __init__(self) -> None:
        self.t = 0

    def reset(self):
        return np.zeros((2, 4), dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        obs = np.zeros((2, 4), dtype=np.float32)
        if self.t >= 3:
            obs[1, 0] = np.nan
        return obs, np.zeros(2), np.zeros(2, dtype=bool), np.zeros(2, dtype=bool), {}
