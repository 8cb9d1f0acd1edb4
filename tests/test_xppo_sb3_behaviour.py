"""
Stable-Baselines3's own PPO tests (tests/test_run.py, test_gae.py, test_save_load.py, test_dict_env.py, test_spaces.py,
test_predict.py, test_deterministic.py, test_callbacks.py, test_tensorboard.py, test_sde.py, test_custom_policy.py),
rewritten with XPPO in place of PPO and shrunk to tiny configs: the behaviour SB3 users rely on is kept.

Deliberate differences from PPO, each tested here: bad hyperparameters raise ``ValueError`` (PPO: ``AssertionError``),
and a minibatch of one is allowed with advantage normalization (PPO refuses it because its normalization gives NaN).
"""

import os
from copy import deepcopy

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3.common.callbacks import (
    BaseCallback,
    CallbackList,
    CheckpointCallback,
    EvalCallback,
    EveryNTimesteps,
    StopTrainingOnMaxEpisodes,
    StopTrainingOnNoModelImprovement,
    StopTrainingOnRewardThreshold,
)
from stable_baselines3.common.env_checker import check_env
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import FakeImageEnv, IdentityEnv, IdentityEnvBox, SimpleMultiObsEnv
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.logger import HParam
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.utils import get_device
from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack, VecNormalize

from sb3_xppo import XPPO

TINY = dict(n_steps=64, batch_size=32, n_epochs=2, policy_kwargs=dict(net_arch=[16]))


# --- test_run.py -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
@pytest.mark.parametrize("clip_range_vf", [None, 0.2, -0.2])
def test_run(env_id, clip_range_vf):
    value_loss = "mse" if clip_range_vf is None else "sb3"
    if clip_range_vf is not None and clip_range_vf < 0:
        with pytest.raises(ValueError, match="clip_range_vf"):
            XPPO("MlpPolicy", env_id, seed=0, clip_range_vf=clip_range_vf, value_loss=value_loss)
    else:
        model = XPPO("MlpPolicy", env_id, n_steps=128, seed=0, policy_kwargs=dict(net_arch=[16]), verbose=1,
                     clip_range_vf=clip_range_vf, value_loss=value_loss)  # fmt: skip
        model.learn(total_timesteps=256)


def test_warnings_and_small_batches():
    # PPO asserts on n_steps=1 and on batch_size=1 with normalized advantages (NaN), and so does XPPO (its error is
    # also a ValueError); without normalization both train
    for kwargs in (dict(n_steps=1), dict(n_steps=16, batch_size=1)):
        with pytest.raises(AssertionError, match=r"n_steps|batch_size"):
            XPPO("MlpPolicy", "Pendulum-v1", n_epochs=1, **kwargs)
    model = XPPO("MlpPolicy", "Pendulum-v1", n_epochs=1, n_steps=1, batch_size=1, normalize_advantage=False).learn(16)
    assert all(th.isfinite(p).all() for p in model.policy.parameters())
    # Minibatch not a multiple of the rollout buffer size: PPO's warning
    with pytest.warns(UserWarning, match="there will be a truncated mini-batch of size 1"):
        XPPO("MlpPolicy", "Pendulum-v1", n_steps=64, batch_size=63)
    with pytest.warns(UserWarning, match="there will be a truncated mini-batch of size 1"):
        XPPO("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=2), n_steps=64, batch_size=127)
    # PPO's recommendation of the CPU for an MLP policy on the GPU, for XPPO's own MlpPolicy class
    model = XPPO("MlpPolicy", "Pendulum-v1")
    model.device = th.device("cuda")  # (as SB3's test pretends)
    with pytest.warns(UserWarning, match=r"You are trying to run XPPO on the GPU.*using XPPOActorCriticPolicy"):
        model._maybe_recommend_cpu()


# --- test_gae.py -----------------------------------------------------------------------------------------------------


class EpisodeEnv(gym.Env):
    """Reward 1 on the last of ``max_steps`` steps, then terminated (SB3's test_gae CustomEnv)."""

    def __init__(self, max_steps: int = 8):
        super().__init__()
        self.observation_space = spaces.Box(low=-1, high=1, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Box(low=-1, high=1, shape=(2,), dtype=np.float32)
        self.max_steps = max_steps
        self.n_steps = 0

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.observation_space.seed(seed)
        self.n_steps = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.n_steps += 1
        terminated = self.n_steps >= self.max_steps
        return self.observation_space.sample(), float(terminated), terminated, False, {}


class InfiniteHorizonEnv(gym.Env):
    """Reward 1 at every step, never terminates (SB3's test_gae InfiniteHorizonEnv)."""

    def __init__(self, n_states: int = 4):
        super().__init__()
        self.n_states = n_states
        self.observation_space = spaces.Discrete(n_states)
        self.action_space = spaces.Box(low=-1, high=1, shape=(2,), dtype=np.float32)
        self.current_state = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.current_state = 0
        return self.current_state, {}

    def step(self, action):
        self.current_state = (self.current_state + 1) % self.n_states
        return self.current_state, 1.0, False, False, {}


class CheckGAECallback(BaseCallback):
    """Recompute the lambda-returns and advantages of a constant-value policy by hand at the end of each rollout."""

    def _on_rollout_end(self):
        buffer = self.model.rollout_buffer
        rollout_size = buffer.size()
        max_steps = self.training_env.envs[0].unwrapped.max_steps
        gamma, gae_lambda, value = self.model.gamma, self.model.gae_lambda, self.model.policy.constant_value
        rewards = np.zeros(rollout_size)
        rewards[max_steps - 1 :: max_steps] = 1.0
        episode_starts = np.zeros(rollout_size)
        episode_starts[::max_steps] = 1.0
        advantages = np.zeros(rollout_size)
        advantages[-1] = rewards[-1] - value  # the final step is always terminal
        for n in reversed(range(rollout_size - 1)):
            not_start = 1.0 - episode_starts[n + 1]
            delta = rewards[n] + gamma * value * not_start - value
            advantages[n] = delta + gamma * gae_lambda * advantages[n + 1] * not_start
        assert np.allclose(buffer.advantages.flatten(), advantages)
        assert np.allclose(buffer.returns.flatten(), advantages + value)

    def _on_step(self):
        return True


class ConstantValuePolicy(ActorCriticPolicy):
    """Actor-critic policy whose value is a constant."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.constant_value = 0.0

    def forward(self, obs, deterministic=False):
        actions, values, log_prob = super().forward(obs, deterministic)
        return actions, th.ones_like(values) * self.constant_value, log_prob


def test_gae_envs():
    check_env(EpisodeEnv(), skip_render_check=True)
    check_env(InfiniteHorizonEnv(), skip_render_check=True)


@pytest.mark.parametrize("gae_lambda", [1.0, 0.9])
@pytest.mark.parametrize("gamma", [1.0, 0.99])
@pytest.mark.parametrize("num_episodes", [1, 3])
def test_gae_computation(gae_lambda, gamma, num_episodes):
    rollout_size = 64 * num_episodes
    model = XPPO(ConstantValuePolicy, EpisodeEnv(max_steps=64), seed=1, gamma=gamma, n_steps=rollout_size,
                 gae_lambda=gae_lambda, n_epochs=1)  # fmt: skip
    model.learn(rollout_size, callback=CheckGAECallback())
    # A constant value != 0, so that advantages != returns
    model.policy.constant_value = 1.0
    model.learn(rollout_size, callback=CheckGAECallback())


def test_infinite_horizon():
    # Truncation bootstraps from the value of the terminal observation: V(s0) = 1 / (1 - gamma)
    gamma = 0.98
    env = gym.wrappers.TimeLimit(InfiniteHorizonEnv(n_states=4), 8)
    model = XPPO("MlpPolicy", env, gamma=gamma, seed=1, n_steps=32, batch_size=32, n_epochs=4, gae_lambda=1.0,
                 learning_rate=0.005, policy_kwargs=dict(net_arch=[64]))  # fmt: skip
    model.learn(1500)
    value = model.policy.predict_values(model.policy.obs_to_tensor(0)[0]).item()
    assert abs(1 / (1 - gamma) - value) < 1.0


# --- test_save_load.py -----------------------------------------------------------------------------------------------


def test_save_load(tmp_path):
    env = DummyVecEnv([lambda: IdentityEnvBox(-10, 10)])
    model = XPPO("MlpPolicy", env, policy_kwargs=dict(net_arch=[16]), n_steps=64, verbose=1).learn(64)
    env.reset()
    observations = np.concatenate([env.step([env.action_space.sample()])[0] for _ in range(10)], axis=0)
    params = deepcopy(model.get_parameters())

    # set_parameters error cases
    invalid = deepcopy(params)
    invalid["I_should_not_be_a_valid_object"] = "and_I_am_an_invalid_tensor"
    with pytest.raises(ValueError):
        model.set_parameters(invalid, exact_match=True)
    with pytest.raises(ValueError):
        model.set_parameters({k: v for k, v in list(params.items())[:-1]}, exact_match=True)

    selected_actions, _ = model.predict(observations, deterministic=True)
    model.save(tmp_path / "test_save.zip")
    del model
    devices = ["auto", "cpu"] + (["cuda"] if th.cuda.is_available() else [])
    for device in devices:
        model = XPPO.load(str(tmp_path / "test_save.zip"), env=env, device=device)
        assert model.device.type == get_device(device).type
        assert model.policy.device.type == get_device(device).type
        new_params = model.get_parameters()
        for key in params["policy"]:
            assert th.allclose(params["policy"][key], new_params["policy"][key].to("cpu"))
        new_selected_actions, _ = model.predict(observations, deterministic=True)
        assert np.allclose(selected_actions, new_selected_actions, 1e-4)
        model.learn(64)


def test_set_env(tmp_path):
    env, env2, env3 = DummyVecEnv([IdentityEnvBox]), DummyVecEnv([IdentityEnvBox]), IdentityEnvBox()
    env4 = DummyVecEnv([IdentityEnvBox for _ in range(2)])
    model = XPPO("MlpPolicy", env, **TINY).learn(64)
    model.set_env(env2, force_reset=True)
    assert model._last_obs is None
    model.learn(64, reset_num_timesteps=True)
    assert model.num_timesteps == 64
    model.set_env(env3)
    model.learn(64)
    with pytest.raises(AssertionError):
        model.set_env(env4)  # num_envs must be the same
    model.set_env(model.get_env(), force_reset=False)
    model.learn(64, reset_num_timesteps=False)
    assert model.num_timesteps == 2 * 64
    model.save(tmp_path / "test_save.zip")
    model = XPPO.load(tmp_path / "test_save.zip", env=model.get_env(), force_reset=False)
    assert model._last_obs is not None
    model.learn(64, reset_num_timesteps=False)
    assert model.num_timesteps == 3 * 64
    XPPO.load(tmp_path / "test_save.zip", env=env4).learn(64)  # another number of envs


def test_exclude_include_saved_params(tmp_path):
    model = XPPO("MlpPolicy", IdentityEnvBox(), policy_kwargs=dict(net_arch=[16]), verbose=2, actor_loss="spo")
    model.save(tmp_path / "test_save", exclude=["verbose", "options"])
    model = XPPO.load(str(tmp_path / "test_save.zip"))
    assert model.verbose != 2 and model.options.actor_loss == "clip"
    model.verbose = 2
    model.save(tmp_path / "test_save", exclude=["verbose"], include=["verbose"])
    model = XPPO.load(str(tmp_path / "test_save.zip"), custom_objects=dict(learning_rate=2e-5, dummy=1.0))
    assert model.verbose == 2
    assert model.learning_rate == 2e-5
    assert not hasattr(model, "dummy")


def test_save_load_env_cnn(tmp_path):
    env = FakeImageEnv(screen_height=40, screen_width=40, n_channels=2, discrete=False)
    kwargs = dict(policy_kwargs=dict(net_arch=[32]), n_steps=64, batch_size=32, n_epochs=1)
    XPPO("CnnPolicy", env, **kwargs).learn(64).save(tmp_path / "test_save")
    XPPO.load(str(tmp_path / "test_save.zip"), env=env, **kwargs).learn(64)


def test_save_load_policy(tmp_path):
    model = XPPO("MlpPolicy", "CartPole-v1", **TINY).learn(64)
    obs = np.zeros((3, 4), dtype=np.float32)
    actions, _ = model.predict(obs, deterministic=True)
    model.policy.save(tmp_path / "policy.pkl")
    policy = ActorCriticPolicy.load(tmp_path / "policy.pkl")
    assert np.array_equal(policy.predict(obs, deterministic=True)[0], actions)


# --- test_dict_env.py ------------------------------------------------------------------------------------------------


class VecDictEnv(gym.Env):
    """Dict observation holding a single vector (SB3's DummyDictEnv with vec_only=True)."""

    def __init__(self, nested: bool = False):
        super().__init__()
        self.action_space = spaces.Box(low=-1, high=1, shape=(2,), dtype=np.float32)
        obs = {"vec": spaces.Box(low=-1, high=1, shape=(2,), dtype=np.float32)}
        if nested:
            obs["nested-dict"] = spaces.Dict({"nested-dict-discrete": spaces.Discrete(4)})
        self.observation_space = spaces.Dict(obs)

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.observation_space.seed(seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


def test_dict_consistency():
    """A dict observation with one vector and the flattened observation give the same network and training."""
    dict_env = gym.wrappers.TimeLimit(VecDictEnv(), 100)
    env = gym.wrappers.FlattenObservation(dict_env)
    obs, _ = dict_env.reset(seed=10)
    # Each model seeds torch when it is built: build and train one after the other
    dict_model = XPPO("MultiInputPolicy", dict_env, gamma=0.5, seed=1, n_steps=64)
    action_before_1 = dict_model.predict(obs, deterministic=True)[0]
    dict_model.learn(128)
    normal_model = XPPO("MlpPolicy", env, gamma=0.5, seed=1, n_steps=64)
    action_before_2 = normal_model.predict(obs["vec"], deterministic=True)[0]
    normal_model.learn(128)
    assert np.allclose(action_before_1, action_before_2)
    assert np.allclose(dict_model.predict(obs, deterministic=True)[0], normal_model.predict(obs["vec"], deterministic=True)[0])


@pytest.mark.parametrize("channel_last", [False, True])
@pytest.mark.parametrize("discrete_actions", [False, True])
def test_dict_spaces(channel_last, discrete_actions):
    env = SimpleMultiObsEnv(random_start=True, discrete_actions=discrete_actions, channel_last=channel_last)
    policy_kwargs = dict(net_arch=[32], features_extractor_kwargs=dict(cnn_output_dim=32))
    model = XPPO("MultiInputPolicy", env, gamma=0.5, seed=1, n_steps=64, n_epochs=2, policy_kwargs=policy_kwargs)
    model.learn(128)
    evaluate_policy(model, env, n_eval_episodes=2, warn=False)


def test_dict_vec_framestack_and_normalize():
    channels_order = {"vec": None, "img": "last"}
    env = VecFrameStack(DummyVecEnv([lambda: SimpleMultiObsEnv(random_start=True)]), n_stack=3, channels_order=channels_order)
    XPPO("MultiInputPolicy", env, n_steps=64, n_epochs=1, policy_kwargs=dict(net_arch=[32])).learn(64)
    env = VecNormalize(DummyVecEnv([lambda: gym.wrappers.TimeLimit(VecDictEnv(), 100)]), norm_obs_keys=["vec"])
    model = XPPO("MultiInputPolicy", env, n_steps=64, n_epochs=1, policy_kwargs=dict(net_arch=[32])).learn(64)
    evaluate_policy(model, env, n_eval_episodes=2, warn=False)


def test_dict_nested():
    with pytest.raises(NotImplementedError):
        XPPO("MultiInputPolicy", VecDictEnv(nested=True), seed=1)


# --- test_spaces.py / test_predict.py --------------------------------------------------------------------------------


class MultidimensionalActionEnv(gym.Env):
    def __init__(self, observation_space=None):
        super().__init__()
        self.observation_space = observation_space or spaces.Box(low=-1, high=1, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Box(low=-1, high=1, shape=(2, 2), dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


@pytest.mark.parametrize("env", ["Pendulum-v1", "CartPole-v1", "multidim"])
def test_action_spaces(env):
    env = MultidimensionalActionEnv() if env == "multidim" else env
    XPPO("MlpPolicy", env, **TINY).learn(64)


@pytest.mark.parametrize(
    "observation_space", [spaces.MultiDiscrete([4, 3]), spaces.MultiBinary(8), spaces.MultiBinary((3, 2)), spaces.Discrete(5)]
)
def test_observation_spaces(observation_space):
    env = gym.wrappers.TimeLimit(MultidimensionalActionEnv(observation_space), max_episode_steps=32)
    model = XPPO("MlpPolicy", env, gamma=0.5, seed=1, **TINY).learn(64)
    evaluate_policy(model, env, n_eval_episodes=2, warn=False)


def test_discrete_obs_space():
    XPPO("MlpPolicy", make_vec_env("Taxi-v4", n_envs=2, seed=0), n_steps=64, n_epochs=1).learn(128)


def test_float64_action_space():
    env = gym.wrappers.TimeLimit(IdentityEnvBox(-1, 1), 16)
    env.action_space = spaces.Box(low=-1, high=1, shape=(1,), dtype=np.float64)
    model = XPPO("MlpPolicy", env, **TINY).learn(64)
    action, _ = model.predict(env.observation_space.sample())
    assert action.dtype == np.float64


def test_unsupported_action_space():
    env = IdentityEnv(3)
    env.action_space = spaces.Dict({"a": spaces.Discrete(2)})
    with pytest.raises(AssertionError):
        XPPO("MlpPolicy", env)


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "CartPole-v1"])
def test_predict(env_id):
    model = XPPO("MlpPolicy", env_id, **TINY)  # auto-wraps the env into a VecEnv
    env = gym.make(env_id)
    obs, _ = env.reset()
    action, state = model.predict(obs)
    assert state is None
    assert isinstance(action, np.ndarray) and action.shape == env.action_space.shape
    assert env.action_space.contains(action)
    vec_env = DummyVecEnv([lambda: gym.make(env_id), lambda: gym.make(env_id)])
    vec_obs = vec_env.reset()
    action, _ = model.predict(vec_obs, deterministic=True)
    assert action.shape[0] == vec_obs.shape[0]
    assert np.array_equal(model.predict(vec_obs, deterministic=True)[0], action)


# --- test_deterministic.py -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs", [dict(), dict(actor_loss="spo", value_loss="improved", clip_range_vf=0.5), dict(dual_clip=3.0)]
)
def test_deterministic_training(kwargs):
    results, rewards = [[], []], [[], []]
    for i in range(2):
        model = XPPO("MlpPolicy", "CartPole-v1", seed=0, n_steps=128, policy_kwargs=dict(net_arch=[64]), **kwargs)
        model.learn(256)
        env = model.get_env()
        obs = env.reset()
        for _ in range(50):
            action, _ = model.predict(obs, deterministic=False)
            obs, reward, _, _ = env.step(action)
            results[i].append(action)
            rewards[i].append(reward)
    assert sum(results[0]) == sum(results[1]), results
    assert sum(rewards[0]) == sum(rewards[1]), rewards


# --- test_callbacks.py -----------------------------------------------------------------------------------------------


def test_callbacks(tmp_path):
    log_folder = tmp_path / "logs/callbacks/"
    model = XPPO("MlpPolicy", "Pendulum-v1", **TINY)
    checkpoint_callback = CheckpointCallback(save_freq=64, save_path=log_folder, name_prefix="xppo")
    eval_env = gym.make("Pendulum-v1")
    stop = StopTrainingOnRewardThreshold(reward_threshold=-1200, verbose=1)
    no_improvement = StopTrainingOnNoModelImprovement(max_no_improvement_evals=2, min_evals=1)
    eval_callback = EvalCallback(
        eval_env,
        callback_on_new_best=stop,
        callback_after_eval=no_improvement,
        best_model_save_path=log_folder,
        log_path=log_folder,
        eval_freq=64,
        warn=False,
        n_eval_episodes=1,
    )
    event_callback = EveryNTimesteps(
        n_steps=64, callback=CheckpointCallback(save_freq=1, save_path=log_folder, name_prefix="event")
    )
    callback = CallbackList([checkpoint_callback, eval_callback, event_callback, StopTrainingOnMaxEpisodes(max_episodes=1)])
    model.learn(256, callback=callback)
    assert os.path.exists(log_folder / "xppo_64_steps.zip")
    assert os.path.exists(log_folder / "best_model.zip")
    assert os.path.exists(log_folder / "evaluations.npz")
    assert isinstance(XPPO.load(log_folder / "xppo_64_steps.zip"), XPPO)
    # StopTrainingOnMaxEpisodes: Pendulum episodes last 200 steps, so training stops in the 4th rollout at the latest
    assert model.num_timesteps <= 256


class TrainModeCallback(BaseCallback):
    """The policy collects in eval mode (test_train_eval_mode.py)."""

    def _on_step(self) -> bool:
        assert not self.model.policy.training
        return True


def test_train_eval_mode():
    model = XPPO("MlpPolicy", "CartPole-v1", **TINY)
    modes = []
    model.register_loss_hook(lambda m, data, loss: modes.append(m.policy.training) or loss)
    model.learn(64, callback=TrainModeCallback())
    assert modes and all(modes)


# --- test_tensorboard.py ---------------------------------------------------------------------------------------------


class HParamCallback(BaseCallback):
    def _on_training_start(self) -> None:
        hparams = {
            "algorithm": self.model.__class__.__name__,
            "actor_loss": self.model.options.actor_loss,
            "gamma": self.model.gamma,
        }
        self.logger.record("hparams", HParam(hparams, {"rollout/ep_len_mean": 0}), exclude=("stdout", "log", "json", "csv"))

    def _on_step(self) -> bool:
        return True


def test_tensorboard(tmp_path):
    pytest.importorskip("tensorboard")
    model = XPPO("MlpPolicy", "CartPole-v1", n_steps=64, verbose=1, tensorboard_log=tmp_path)
    model.learn(64, callback=HParamCallback())
    model.learn(64, reset_num_timesteps=False)
    assert os.path.isdir(tmp_path / "XPPO_1")
    assert not os.path.isdir(tmp_path / "XPPO_2")
    model.learn(64, tb_log_name="tb_multiple_runs")
    model.learn(64, tb_log_name="tb_multiple_runs")
    assert os.path.isdir(tmp_path / "tb_multiple_runs_1")
    assert os.path.isdir(tmp_path / "tb_multiple_runs_2")


# --- test_sde.py / test_custom_policy.py -----------------------------------------------------------------------------


@pytest.mark.parametrize("use_expln", [False, True])
def test_state_dependent_noise(use_expln):
    model = XPPO("MlpPolicy", "Pendulum-v1", use_sde=True, sde_sample_freq=4, seed=0, n_steps=64, batch_size=32,
                 policy_kwargs=dict(log_std_init=-2, use_expln=use_expln, net_arch=[16]))  # fmt: skip
    model.learn(128)
    assert "train/std" in model.logger.name_to_value


@pytest.mark.parametrize(
    "policy_kwargs",
    [
        dict(net_arch=dict(pi=[8], vf=[16])),
        dict(net_arch=[8, 8], activation_fn=th.nn.ReLU, share_features_extractor=False),
        dict(optimizer_class=th.optim.RMSprop, optimizer_kwargs=dict(eps=1e-5, alpha=0.99), ortho_init=False),
    ],
)
def test_custom_policy(policy_kwargs):
    XPPO("MlpPolicy", "CartPole-v1", policy_kwargs=policy_kwargs, n_steps=64, n_epochs=1).learn(64)


# --- test_identity.py ------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_identity_discrete():
    env = DummyVecEnv([lambda: IdentityEnv(4)])
    model = XPPO("MlpPolicy", env, gamma=0.4, seed=3, n_steps=256, learning_rate=1e-3).learn(5000)
    evaluate_policy(model, env, n_eval_episodes=20, reward_threshold=90, warn=False)
