"""Bad data never reaches an update: non-finite rewards and observations stop the rollout at the step where they
appear, a non-finite loss or gradient undoes the train() call, and the model stays exactly as it was."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import SimpleMultiObsEnv
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from sb3_xppo import XPPO
from sb3_xppo.common.finite import first_non_finite, non_finite_error, rollout_non_finite_error

TINY = dict(n_steps=16, batch_size=8, n_epochs=2, seed=0, policy_kwargs=dict(net_arch=[16]), device="cpu")


class Fault(gym.Wrapper):
    """Puts ``value`` into the reward or the observation (or one Dict key) at the ``at``-th step of this env."""

    def __init__(self, env: gym.Env, what: str, at: int, value: float = np.nan, key: str | None = None) -> None:
        super().__init__(env)
        self.what, self.at, self.value, self.key, self.steps = what, at, value, key, 0

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        if self.steps == self.at:
            if self.what == "reward":
                reward = self.value
            elif self.key is not None:
                obs = {**obs, self.key: np.full_like(obs[self.key], self.value)}
            else:
                obs = np.full_like(obs, self.value)
        return obs, reward, terminated, truncated, info


def faulty_env(what: str, at: int, value: float = np.nan, env_id: str = "CartPole-v1", **kwargs) -> DummyVecEnv:
    """Two envs; env 1 turns bad at its ``at``-th step."""
    envs = [lambda: gym.make(env_id), lambda: Fault(gym.make(env_id), what, at, value, **kwargs)]
    return DummyVecEnv(envs)


def model_state(model: XPPO) -> tuple[dict, dict, int]:
    return copy.deepcopy(model.policy.state_dict()), copy.deepcopy(model.policy.optimizer.state_dict()), model._n_updates


def assert_same_state(model: XPPO, state: tuple[dict, dict, int]) -> None:
    params, optimizer, n_updates = state
    assert all(th.equal(a, b) for a, b in zip(params.values(), model.policy.state_dict().values(), strict=True))
    now = model.policy.optimizer.state_dict()
    assert now["state"].keys() == optimizer["state"].keys()
    for key, state_of_param in optimizer["state"].items():
        assert all(th.equal(th.as_tensor(v), th.as_tensor(now["state"][key][k])) for k, v in state_of_param.items())
    assert now["param_groups"] == optimizer["param_groups"]
    assert model._n_updates == n_updates


def trained(env, **kwargs) -> tuple[XPPO, tuple[dict, dict, int]]:
    """A model trained for two rollouts on a good env, and its state."""
    model = XPPO("MlpPolicy", env, **{**TINY, **kwargs}).learn(64)
    return model, model_state(model)


# --- rollout data ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "what, value, match",
    [
        ("reward", np.nan, r"non-finite reward nan from env 1 at rollout step 4 \(num_timesteps \d+\)"),
        ("reward", -np.inf, r"non-finite reward -inf from env 1 at rollout step 4"),
        ("obs", np.inf, r"non-finite observation from env 1 at rollout step 4 .*: \[inf inf inf inf\]"),
    ],
)
def test_rollout_data_stops_at_the_step(what, value, match):
    model, state = trained(make_vec_env("CartPole-v1", n_envs=2, seed=0))
    # The bad value comes at the 5th step of the next rollout (so the rollout step is 4)
    model.set_env(faulty_env(what, at=5, value=value))
    with pytest.raises(ValueError, match=match) as error:
        model.learn(64, reset_num_timesteps=False)
    assert "The model is unchanged since its last update" in str(error.value)
    assert_same_state(model, state)
    # Fixed, the same model trains on and can be saved
    model.set_env(make_vec_env("CartPole-v1", n_envs=2, seed=1))
    model.learn(32)
    assert all(th.isfinite(p).all() for p in model.policy.parameters())


def test_dict_observation_names_the_key():
    env = DummyVecEnv([SimpleMultiObsEnv, lambda: Fault(SimpleMultiObsEnv(), "obs", at=3, key="vec")])
    model = XPPO("MultiInputPolicy", env, **TINY)
    state = model_state(model)
    with pytest.raises(ValueError, match=r"non-finite observation\['vec'\] from env 1 at rollout step 2"):
        model.learn(64)
    assert_same_state(model, state)


def test_terminal_observation_is_checked():
    """A truncated episode's terminal observation feeds the bootstrap: it is checked too."""

    class BadEnd(gym.Wrapper):
        def step(self, action):
            obs, reward, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                obs = np.full_like(obs, np.nan)  # DummyVecEnv stores it as info["terminal_observation"]
            return obs, reward, terminated, truncated, info

    env = DummyVecEnv([lambda: BadEnd(gym.make("Pendulum-v1", max_episode_steps=5))])
    with pytest.raises(ValueError, match=r"non-finite reward nan from env 0 at rollout step 4 .*terminal obs"):
        XPPO("MlpPolicy", env, **TINY).learn(64)


def test_reset_observation_is_checked():
    class BadReset(gym.Wrapper):
        def reset(self, **kwargs):
            obs, info = self.env.reset(**kwargs)
            return np.full_like(obs, np.nan), info

    env = DummyVecEnv([lambda: gym.make("CartPole-v1"), lambda: BadReset(gym.make("CartPole-v1"))])
    with pytest.raises(ValueError, match=r"non-finite observation from env 1 the rollout starts from"):
        XPPO("MlpPolicy", env, **TINY).learn(64)


def test_vec_normalize_statistics_stay_clean():
    """Under VecNormalize the raw values are checked (an inf would be clipped) and its statistics put back."""
    model, state = trained(VecNormalize(make_vec_env("CartPole-v1", n_envs=2, seed=0)))
    vec_normalize = model.get_vec_normalize_env()
    obs_rms, ret_rms = copy.deepcopy(vec_normalize.obs_rms), copy.deepcopy(vec_normalize.ret_rms)
    bad = VecNormalize(faulty_env("obs", at=5, value=np.inf))
    bad.obs_rms, bad.ret_rms = copy.deepcopy(obs_rms), copy.deepcopy(ret_rms)
    model.set_env(bad)

    class AtRolloutStart(BaseCallback):
        def _on_rollout_start(self) -> None:
            self.statistics = copy.deepcopy((bad.obs_rms, bad.ret_rms))

        def _on_step(self) -> bool:
            return True

    callback = AtRolloutStart()
    with pytest.raises(ValueError, match="non-finite observation from env 1 at rollout step 4"):
        model.learn(64, reset_num_timesteps=False, callback=callback)
    assert_same_state(model, state)
    # Its statistics are as at the start of the rollout (not as after its 4 good steps), and the chain is as it was
    obs_rms, ret_rms = callback.statistics
    assert np.array_equal(bad.obs_rms.mean, obs_rms.mean) and bad.obs_rms.count == obs_rms.count
    assert np.array_equal(bad.ret_rms.var, ret_rms.var)
    assert type(bad.venv) is DummyVecEnv


def test_vec_normalize_of_rewards_only():
    env = VecNormalize(faulty_env("reward", at=3), norm_obs=False)
    with pytest.raises(ValueError, match="non-finite reward nan from env 1 at rollout step 2"):
        XPPO("MlpPolicy", env, **TINY).learn(64)
    assert np.isfinite(env.ret_rms.var).all()


def test_eval_callback_with_vec_normalize():
    """SB3's sync_envs_normalization walks the train and eval chains in step: the checks leave the chain alone."""
    from stable_baselines3.common.callbacks import EvalCallback

    env = VecNormalize(make_vec_env("CartPole-v1", n_envs=2, seed=0))
    eval_env = VecNormalize(make_vec_env("CartPole-v1", n_envs=1, seed=1), training=False, norm_reward=False)
    callback = EvalCallback(eval_env, eval_freq=8, n_eval_episodes=1)
    XPPO("MlpPolicy", env, **TINY).learn(64, callback=callback)
    assert np.isfinite(callback.last_mean_reward)  # it evaluated


def test_vector_reward_keeps_the_model():
    class BadVector(gym.Wrapper):
        def step(self, action):
            obs, reward, terminated, truncated, info = self.env.step(action)
            info["vector_reward"] = np.array([reward, np.nan if self.np_random.random() < 0.2 else 0.0])
            return obs, reward, terminated, truncated, info

    env = DummyVecEnv([lambda: BadVector(gym.make("CartPole-v1"))])
    model = XPPO("MlpPolicy", env, reward_groups=2, **TINY)
    state = model_state(model)
    with pytest.raises(ValueError, match=r"env 0: info\['vector_reward'\] has a non-finite reward"):
        model.learn(64)
    assert_same_state(model, state)


def test_helpers():
    assert first_non_finite(np.array([[1.0, 2.0], [3.0, np.nan]])) == (1, pytest.approx(np.array([3.0, np.nan]), nan_ok=True))
    assert first_non_finite(np.array([[1, 2]])) is None  # integers are always finite
    assert first_non_finite(np.ones((3, 2), dtype=np.float32)) is None
    rows = np.array([[1.0, 1.0], [1.0, 1.0], [np.inf, np.nan]])
    error = non_finite_error(rows, ("a", "b"), np.array([0, 1, 1]))
    assert "the a was inf at epoch 1, minibatch 1" in str(error)
    assert non_finite_error(rows[:2], ("a", "b"), np.array([0, 1])) is None


def test_rollout_check_by_hand():
    """Buffer row t holds step t's reward and the observation step t - 1 returned; the earliest step is reported."""
    rewards = np.zeros((5, 3), dtype=np.float32)
    observations = np.zeros((5, 3, 2), dtype=np.float32)
    last = np.zeros((3, 2), dtype=np.float32)
    assert rollout_non_finite_error(rewards, observations, 5, last, 100) is None
    rewards[3, 2] = np.inf
    error = rollout_non_finite_error(rewards, observations, 5, last, 100)
    # step 3 of a rollout of 3 envs that started at num_timesteps 100: the step that took it to 112
    assert "non-finite reward inf from env 2 at rollout step 3 (num_timesteps 112)" in str(error)
    observations[2, 1, 0] = np.nan  # returned by step 1: earlier than the reward
    assert "non-finite observation from env 1 at rollout step 1 (num_timesteps 106): [nan  0.]" in str(
        rollout_non_finite_error(rewards, observations, 5, last, 100)
    )
    # rows past the filled ones are not looked at; the last observation counts as the last filled step's
    assert rollout_non_finite_error(rewards, observations, 2, last, 100) is None
    last[0, 1] = -np.inf
    assert "observation from env 0 at rollout step 1" in str(rollout_non_finite_error(rewards, observations, 2, last, 100))
    # Dict observations name the key; integer arrays are always finite
    dict_obs = {"pos": np.zeros((5, 3, 2)), "id": np.zeros((5, 3), dtype=np.int64)}
    dict_obs["pos"][4, 0, 1] = np.nan
    dict_last = {"pos": np.zeros((3, 2)), "id": np.zeros(3, dtype=np.int64)}
    assert "observation['pos'] from env 0 at rollout step 3" in str(
        rollout_non_finite_error(np.zeros((5, 3)), dict_obs, 5, dict_last, 0)
    )


# --- train() ---------------------------------------------------------------------------------------------------------


def nan_at(epoch: int, minibatch: int, make_bad):
    """A loss hook that lets ``make_bad(model, loss)`` spoil the loss of one minibatch."""
    calls = []

    def hook(model, rollout_data, loss):
        calls.append(None)
        n_minibatches = model.n_steps * model.n_envs // model.batch_size
        return make_bad(model, loss) if len(calls) - 1 == epoch * n_minibatches + minibatch else loss

    return hook


@pytest.mark.parametrize(
    "make_bad, term",
    [
        (lambda model, loss: loss * np.nan, r"total loss \(after the loss hooks\) was nan"),
        (lambda model, loss: loss + th.tensor(np.inf), r"total loss \(after the loss hooks\) was inf"),
        # A finite loss whose gradient is not: d sqrt(0 * w) / dw = 0.5 / sqrt(0) * 0 = nan
        (lambda model, loss: loss + (0 * model.policy.action_net.weight).sqrt().sum(), "gradient norm was nan"),
    ],
)
def test_non_finite_loss_or_gradient_undoes_train(make_bad, term):
    model, state = trained(make_vec_env("CartPole-v1", n_envs=2, seed=0))
    model.register_loss_hook(nan_at(1, 2, make_bad))
    with pytest.raises(ValueError, match=rf"{term} at epoch 1, minibatch 2; this train\(\) call was undone"):
        model.learn(32, reset_num_timesteps=False)
    assert_same_state(model, state)


def test_exploding_value_target_names_the_value_loss():
    model, state = trained(make_vec_env("Pendulum-v1", n_envs=2, seed=0))
    model.rollout_buffer.returns[3] = np.inf  # as a diverging critic or reward scale would give (buffer is flattened)
    with pytest.raises(ValueError, match=r"the value loss was inf at epoch 0, minibatch \d"):
        model.train()
    assert_same_state(model, state)


def test_policy_loss_is_named():
    model, state = trained(make_vec_env("Pendulum-v1", n_envs=2, seed=0), normalize_advantage=False)
    model.rollout_buffer.advantages[0] = np.nan
    with pytest.raises(ValueError, match=r"the policy loss was nan at epoch 0"):
        model.train()
    assert_same_state(model, state)


def test_first_train_is_undone_to_an_empty_optimizer_state():
    model = XPPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=0), **TINY)
    state = model_state(model)
    assert not state[1]["state"]  # Adam creates its state on the first step
    model.register_loss_hook(nan_at(0, 1, lambda model, loss: loss * np.nan))
    with pytest.raises(ValueError, match="at epoch 0, minibatch 1"):
        model.learn(16)
    assert_same_state(model, state)


def test_any_exception_inside_train_undoes_it():
    model, state = trained(make_vec_env("CartPole-v1", n_envs=2, seed=0))

    def interrupt(model, rollout_data, loss):
        if model._n_updates > state[2]:
            raise KeyboardInterrupt
        return loss

    model.register_loss_hook(interrupt)
    with pytest.raises(KeyboardInterrupt):
        model.learn(32, reset_num_timesteps=False)
    assert_same_state(model, state)


def test_checks_can_be_turned_off():
    """Negative control: without the checks a NaN reward trains into the parameters (SB3's own behaviour)."""
    model = XPPO("MlpPolicy", faulty_env("reward", at=5), **TINY)
    model.check_finite = False
    with pytest.raises(ValueError, match="Expected parameter"):  # the distribution refuses NaN logits, later
        model.learn(64)
    assert not all(th.isfinite(p).all() for p in model.policy.parameters())
