"""RecurrentXPPO: bit-for-bit RecurrentPPO with PPO's options (padded minibatches included), XPPO's options with
LSTM policies, save/load, errors."""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from helpers import ToDict, params_equal
from sb3_contrib import RecurrentPPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.utils import LinearSchedule
from stable_baselines3.common.vec_env import DummyVecEnv

from sb3_xppo import RecurrentXPPO
from sb3_xppo.common.buffers import XPPORecurrentDictRolloutBuffer, XPPORecurrentRolloutBuffer

TINY = dict(n_steps=32, batch_size=32, n_epochs=2, seed=0, policy_kwargs=dict(net_arch=[16], lstm_hidden_size=8), device="cpu")
LOGGED = ["train/policy_gradient_loss", "train/value_loss", "train/entropy_loss", "train/loss"]


# Episodes end inside every rollout: CartPole's fail early, Pendulum's are truncated at 20 steps (bootstrapped)
ENVS = {
    "cartpole": lambda seed=0: make_vec_env("CartPole-v1", n_envs=2, seed=seed),
    "pendulum": lambda seed=0: make_vec_env("Pendulum-v1", n_envs=2, seed=seed, env_kwargs=dict(max_episode_steps=20)),
    "dict": lambda seed=0: make_vec_env("CartPole-v1", n_envs=2, seed=seed, wrapper_class=ToDict),
}
POLICY = {"cartpole": "MlpLstmPolicy", "pendulum": "MlpLstmPolicy", "dict": "MultiInputLstmPolicy"}
LSTMS = {
    "critic_lstm": dict(),  # RecurrentPPO's default: actor and critic each have their own LSTM
    "no_critic_lstm": dict(enable_critic_lstm=False),
    "shared_lstm": dict(shared_lstm=True, enable_critic_lstm=False),
}

# 2 envs x 32 steps, minibatches of 24 samples (before padding), vf_coef 0.3, ent_coef 0.01: any change in the order
# of floating-point operations would show. The learning rate is high enough for the clip range to bite (4-25% clipped).
EXACT = dict(n_steps=32, batch_size=24, n_epochs=3, learning_rate=0.03, vf_coef=0.3, ent_coef=0.01, seed=5)
OPTIONS = {
    "default": dict(),
    "value_clipping": dict(value_loss="sb3", clip_range_vf=0.1),
    # PPO's meaning of clip_range_vf without value_loss, with a clip that bites on every sample
    "clip_range_vf_bites": dict(clip_range_vf=1e-3),
    # early stopping on target_kl; the last train() runs at progress 0, where the linear clip range is 0
    "schedule_target_kl": dict(
        clip_range=LinearSchedule(0.3, 0.0, 1.0), learning_rate=LinearSchedule(0.05, 0.02, 1.0), target_kl=0.01
    ),
    "no_advantage_normalization": dict(normalize_advantage=False),
}


def config(lstm: str = "critic_lstm", **options: Any) -> dict[str, Any]:
    return {**EXACT, "policy_kwargs": dict(net_arch=[16], lstm_hidden_size=8, **LSTMS[lstm]), "device": "cpu", **options}


class PaddingSeen:
    """A loss hook (leaves the loss as it is) counting the minibatches that hold padding (``mask == 0``)."""

    def __init__(self) -> None:
        self.padded = 0

    def __call__(self, model: RecurrentXPPO, rollout_data: Any, loss: th.Tensor) -> th.Tensor:
        self.padded += int((rollout_data.mask < 1e-8).any())
        return loss


def assert_same_training(parent: RecurrentPPO, model: RecurrentXPPO) -> None:
    assert params_equal(parent.policy, model.policy)
    for key in LOGGED:
        assert parent.logger.name_to_value[key] == pytest.approx(model.logger.name_to_value[key], rel=1e-6, abs=1e-9), key


def reproduce(env_name: str, lstm: str, options: dict[str, Any]) -> tuple[RecurrentPPO, RecurrentXPPO]:
    parent_options = {k: v for k, v in options.items() if k != "value_loss"}
    parent = RecurrentPPO(POLICY[env_name], ENVS[env_name](), **config(lstm, **parent_options)).learn(192)
    model = RecurrentXPPO(POLICY[env_name], ENVS[env_name](), **config(lstm, **options))
    padding = PaddingSeen()
    model.register_loss_hook(padding)
    model.learn(192)
    # sequences of unequal length shared minibatches: their padding had to be left out of every mean
    assert padding.padded > 0
    return parent, model


@pytest.mark.parametrize("lstm", LSTMS)
@pytest.mark.parametrize("env_name", ["cartpole", "pendulum"])
def test_reproduces_recurrent_ppo_exactly(env_name, lstm):
    parent, model = reproduce(env_name, lstm, {})
    assert type(model.rollout_buffer) is XPPORecurrentRolloutBuffer
    assert_same_training(parent, model)


@pytest.mark.parametrize("options", [v for k, v in OPTIONS.items() if k != "default"], ids=list(OPTIONS)[1:])
@pytest.mark.parametrize("env_name", ["cartpole", "pendulum"])
def test_reproduces_recurrent_ppo_exactly_with_options(env_name, options):
    parent, model = reproduce(env_name, "critic_lstm", options)
    if "target_kl" in options:
        assert model._n_updates < 3 * EXACT["n_epochs"]  # early stopping happened
    assert_same_training(parent, model)


@pytest.mark.parametrize("lstm", ["critic_lstm", "shared_lstm"])
def test_reproduces_recurrent_ppo_exactly_with_dict_observations(lstm):
    parent, model = reproduce("dict", lstm, {})
    assert type(model.rollout_buffer) is XPPORecurrentDictRolloutBuffer
    assert_same_training(parent, model)


class CountsPadding(RecurrentXPPO):
    """RecurrentXPPO with the padding counted in the means (the mistake the reproduction tests must catch)."""

    def _valid_samples(self, rollout_data: Any) -> None:
        return None


@pytest.mark.parametrize(
    "model_class, options",
    [
        (CountsPadding, dict()),
        (RecurrentXPPO, dict(actor_loss="spo")),
        (RecurrentXPPO, dict(clip_range=(0.1, 0.3))),
        (RecurrentXPPO, dict(value_loss="improved", clip_range_vf=0.1)),
    ],
    ids=["padding_counted", "spo", "decoupled_clip", "improved_value_clipping"],
)
def test_changes_differ_from_recurrent_ppo(model_class, options):
    """Negative controls for the reproduction tests: counting the padding, or a non-PPO option, changes the result."""
    parent_options = {"clip_range_vf": options["clip_range_vf"]} if "clip_range_vf" in options else {}
    parent = RecurrentPPO("MlpLstmPolicy", ENVS["cartpole"](), **config(**parent_options)).learn(192)
    model = model_class("MlpLstmPolicy", ENVS["cartpole"](), **config(**options)).learn(192)
    assert not params_equal(parent.policy, model.policy)
    assert all(th.isfinite(p).all() for p in model.policy.parameters())


# --- save / load -----------------------------------------------------------------------------------------------------


def predictions(model: RecurrentXPPO, observations: np.ndarray) -> list[np.ndarray]:
    """Deterministic actions along a sequence of (1-env) observations, carrying the LSTM state."""
    state, actions = None, []
    for i, obs in enumerate(observations):
        action, state = model.predict(obs[None], state=state, episode_start=np.array([i == 0]), deterministic=True)
        actions.append(action)
    return actions


def test_save_load_round_trip_with_xppo_options(tmp_path):
    options = dict(actor_loss="spo", clip_range=(0.1, 0.3), value_loss="improved", clip_range_vf=0.2)
    model = RecurrentXPPO("MlpLstmPolicy", ENVS["pendulum"](), **{**TINY, **options}).learn(64)
    model.save(tmp_path / "model")
    loaded = RecurrentXPPO.load(tmp_path / "model", env=ENVS["pendulum"](seed=1), device="cpu")
    assert type(loaded) is RecurrentXPPO
    assert params_equal(model.policy, loaded.policy)
    assert loaded.options.actor_loss == "spo" and loaded.options.value_loss == "improved"
    assert loaded.clip_range(1.0) == (0.1, 0.3)
    assert loaded.clip_range_vf(1.0) == 0.2
    observations = np.random.default_rng(0).uniform(-1, 1, (6, 3)).astype(np.float32)
    for expected, action in zip(predictions(model, observations), predictions(loaded, observations), strict=True):
        assert np.array_equal(expected, action)

    # both continue training alike: the options, schedules and optimizer state came back
    model.set_env(ENVS["pendulum"](seed=1))
    for m in (model, loaded):
        m.set_random_seed(3)
        m.learn(64, reset_num_timesteps=False)
    assert params_equal(model.policy, loaded.policy)


def test_recurrent_ppo_checkpoint_trains_on_as_recurrent_ppo(tmp_path):
    """``RecurrentXPPO.load`` of a RecurrentPPO checkpoint (with value clipping) continues exactly as RecurrentPPO."""
    RecurrentPPO("MlpLstmPolicy", ENVS["cartpole"](), clip_range_vf=0.05, **TINY).learn(64).save(tmp_path / "parent")
    parent = RecurrentPPO.load(tmp_path / "parent", env=ENVS["cartpole"](seed=1), device="cpu")
    model = RecurrentXPPO.load(tmp_path / "parent", env=ENVS["cartpole"](seed=1), device="cpu")
    assert model.options.value_loss == "sb3" and model.normalize_advantage == "minibatch"
    assert type(model.rollout_buffer) is XPPORecurrentRolloutBuffer
    for m in (parent, model):
        m.set_random_seed(3)
        m.learn(128, reset_num_timesteps=False)
    assert_same_training(parent, model)


# --- errors ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("reward_groups", [2, ["task", "cost"]])
def test_reward_groups_refused(reward_groups):
    with pytest.raises(ValueError, match="reward_groups"):
        RecurrentXPPO("MlpLstmPolicy", "CartPole-v1", reward_groups=reward_groups, **TINY)


@pytest.mark.parametrize(
    "options, match",
    [
        (dict(actor_loss="ppo"), "actor_loss"),
        (dict(value_loss="huber"), "value_loss"),
        (dict(value_loss="improved"), "clip_range_vf"),
        (dict(dual_clip=0.5), "dual_clip"),
        (dict(actor_loss="asymmetric_spo", dual_clip=2.0), "dual_clip"),
        (dict(clip_range=0.0), "clip_range"),
        (dict(clip_range=(0.3, 0.1, 0.2)), "clip_range"),
        (dict(normalize_advantage="batch"), "normalize_advantage"),
        (dict(log_ratio_clamp=-1.0), "log_ratio_clamp"),
    ],
)
def test_bad_options_raise_at_construction(options, match):
    with pytest.raises(ValueError, match=match):
        RecurrentXPPO("MlpLstmPolicy", "CartPole-v1", **{**TINY, **options})


class NaNRewardAt(gym.Wrapper):
    """A NaN reward at the ``at``-th step of this env."""

    def __init__(self, env: gym.Env, at: int) -> None:
        super().__init__(env)
        self.at, self.steps = at, 0

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        return obs, np.nan if self.steps == self.at else reward, terminated, truncated, info


def test_non_finite_reward_is_caught():
    model = RecurrentXPPO("MlpLstmPolicy", ENVS["cartpole"](), **TINY).learn(64)
    params = copy.deepcopy(model.policy.state_dict())
    model.set_env(DummyVecEnv([lambda: gym.make("CartPole-v1"), lambda: NaNRewardAt(gym.make("CartPole-v1"), at=5)]))
    with pytest.raises(ValueError, match=r"non-finite reward nan from env 1 at rollout step 4"):
        model.learn(64, reset_num_timesteps=False)
    assert all(th.equal(a, b) for a, b in zip(params.values(), model.policy.state_dict().values(), strict=True))


def test_positional_arguments_as_recurrent_ppo():
    model = RecurrentXPPO("MlpLstmPolicy", "CartPole-v1", 1e-3, 32, device="cpu")
    assert (model.learning_rate, model.n_steps, model.batch_size) == (1e-3, 32, 128)
