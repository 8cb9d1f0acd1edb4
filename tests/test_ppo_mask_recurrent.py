"""MaskableRecurrentXPPO: bit-for-bit RecurrentXPPO when every action is valid, masks at collection, in train() and at
evaluation, save/load, errors."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from helpers import ToDict, params_equal
from sb3_contrib.common.envs import InvalidActionEnvDiscrete, InvalidActionEnvMultiBinary, InvalidActionEnvMultiDiscrete
from sb3_contrib.common.wrappers import ActionMasker
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv

import sb3_xppo.envs
from sb3_xppo import MaskableRecurrentXPPO, RecurrentXPPO
from sb3_xppo.common.buffers import XPPOMaskableRecurrentDictRolloutBuffer, XPPOMaskableRecurrentRolloutBuffer
from sb3_xppo.common.policies import MaskableRecurrentXPPOActorCriticPolicy
from sb3_xppo.ppo_mask_recurrent import evaluate_policy

TINY = dict(n_steps=32, batch_size=32, n_epochs=2, seed=0, policy_kwargs=dict(net_arch=[16], lstm_hidden_size=8), device="cpu")
LOGGED = ["train/policy_gradient_loss", "train/value_loss", "train/entropy_loss", "train/loss"]
# 2 envs x 32 steps, minibatches of 24 samples (before padding), a learning rate high enough for the clip range to bite:
# any change in the order of floating-point operations would show (as tests/test_ppo_recurrent.py)
EXACT = dict(n_steps=32, batch_size=24, n_epochs=3, learning_rate=0.03, vf_coef=0.3, ent_coef=0.01, seed=5, device="cpu")


class OneHot(gym.ObservationWrapper):
    """A MultiDiscrete observation one-hot encoded in a Box (sb3-contrib's LSTM policies take no MultiDiscrete one)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.nvec = env.observation_space.nvec
        self.observation_space = gym.spaces.Box(0.0, 1.0, (int(self.nvec.sum()),), dtype=np.float32)

    def observation(self, obs: np.ndarray) -> np.ndarray:
        return np.concatenate([np.eye(n, dtype=np.float32)[o] for n, o in zip(self.nvec, obs, strict=True)])


def all_valid(env: Any) -> ActionMasker:
    """CartPole with masks that allow both actions."""
    return ActionMasker(env, lambda e: np.ones(2, dtype=bool))


# Episodes end inside every rollout (CartPole's fail early, the invalid-action envs last 20 steps)
ENVS = {
    "no_masks": lambda seed=0: make_vec_env("CartPole-v1", n_envs=2, seed=seed),
    "all_valid_masks": lambda seed=0: make_vec_env("CartPole-v1", n_envs=2, seed=seed, wrapper_class=all_valid),
    "multi_discrete_all_valid": lambda seed=0: make_vec_env(
        lambda: OneHot(InvalidActionEnvMultiDiscrete(dims=[3, 4], ep_length=20, n_invalid_actions=0)), n_envs=2, seed=seed
    ),
    "dict_all_valid": lambda seed=0: make_vec_env(
        lambda: ToDict(InvalidActionEnvDiscrete(dim=6, ep_length=20, n_invalid_actions=0)), n_envs=2, seed=seed
    ),
}
MASKED_ENVS = {
    "discrete": lambda seed=0: make_vec_env(
        lambda: InvalidActionEnvDiscrete(dim=8, ep_length=20, n_invalid_actions=5), n_envs=2, seed=seed
    ),
    "multi_discrete": lambda seed=0: make_vec_env(
        lambda: OneHot(InvalidActionEnvMultiDiscrete(dims=[3, 4], ep_length=20, n_invalid_actions=3)), n_envs=2, seed=seed
    ),
    "memory_maze": lambda seed=0: make_vec_env(sb3_xppo.envs.MEMORY_MAZE_ID, n_envs=2, seed=seed),
}
LSTMS = {"critic_lstm": dict(), "shared_lstm": dict(shared_lstm=True, enable_critic_lstm=False)}


def config(lstm: str = "critic_lstm", **options: Any) -> dict[str, Any]:
    return {**EXACT, "policy_kwargs": dict(net_arch=[16], lstm_hidden_size=8, **LSTMS[lstm]), **options}


def policy_for(env_name: str) -> str:
    return "MultiInputLstmPolicy" if env_name.startswith("dict") else "MlpLstmPolicy"


def assert_same_training(parent: RecurrentXPPO, model: MaskableRecurrentXPPO) -> None:
    assert params_equal(parent.policy, model.policy)
    for key in LOGGED:
        assert parent.logger.name_to_value[key] == model.logger.name_to_value[key], key


# --- exact reproduction of RecurrentXPPO -------------------------------------------------------------------------------


@pytest.mark.parametrize("lstm", LSTMS)
@pytest.mark.parametrize("env_name", ENVS)
def test_reproduces_recurrent_xppo_exactly_when_every_action_is_valid(env_name, lstm):
    parent = RecurrentXPPO(policy_for(env_name), ENVS[env_name](), **config(lstm)).learn(192)
    model = MaskableRecurrentXPPO(policy_for(env_name), ENVS[env_name](), **config(lstm))
    model.learn(192, use_masking=env_name != "no_masks")
    box, dict_obs = XPPOMaskableRecurrentRolloutBuffer, XPPOMaskableRecurrentDictRolloutBuffer
    assert type(model.rollout_buffer) is (dict_obs if env_name.startswith("dict") else box)
    assert_same_training(parent, model)


def test_reproduces_recurrent_xppo_exactly_with_xppo_options():
    options = dict(actor_loss="spo", clip_range=(0.1, 0.3), value_loss="improved", clip_range_vf=0.2)
    parent = RecurrentXPPO("MlpLstmPolicy", ENVS["all_valid_masks"](), **config(**options)).learn(192)
    model = MaskableRecurrentXPPO("MlpLstmPolicy", ENVS["all_valid_masks"](), **config(**options)).learn(192)
    assert_same_training(parent, model)


def test_masks_change_the_training():
    """Negative control: masks that forbid actions change what is learnt (the same seed, the same env otherwise)."""
    forbid_one = lambda env: ActionMasker(env, lambda e: np.array([True, False]))  # noqa: E731
    parent = RecurrentXPPO("MlpLstmPolicy", ENVS["no_masks"](), **config()).learn(192)
    model = MaskableRecurrentXPPO(
        "MlpLstmPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=0, wrapper_class=forbid_one), **config()
    ).learn(192)
    assert not params_equal(parent.policy, model.policy)
    assert (model.rollout_buffer.actions == 0).all()  # the one action allowed, at every step


@pytest.mark.parametrize("fast_paths", [True, False])
def test_fast_paths_give_the_same_bits_with_masks(fast_paths):
    reference = MaskableRecurrentXPPO("MlpLstmPolicy", MASKED_ENVS["memory_maze"](), **config(fast_paths=False)).learn(192)
    model = MaskableRecurrentXPPO("MlpLstmPolicy", MASKED_ENVS["memory_maze"](), **config(fast_paths=fast_paths)).learn(192)
    assert params_equal(reference.policy, model.policy)


# --- masks at collection, in train() and at evaluation ------------------------------------------------------------------


class RecordsActions:
    """An action hook (changes nothing) recording each step's executed actions and the env's masks for them, which it
    reads from the env itself: the same with and without ``use_masking``."""

    def __init__(self) -> None:
        self.masks: list[np.ndarray] = []
        self.actions: list[np.ndarray] = []

    def __call__(self, model: Any, obs: Any, actions: th.Tensor, action_masks: Any) -> None:
        self.masks.append(np.stack(model.env.env_method("action_masks")).reshape(len(actions), -1))
        self.actions.append(actions.cpu().numpy().reshape(len(actions), -1))

    def all_allowed(self, action_dims: list[int]) -> bool:
        offsets = np.cumsum([0, *action_dims[:-1]])
        masks, actions = np.concatenate(self.masks), np.concatenate(self.actions)
        return bool(np.take_along_axis(masks, offsets + actions, axis=1).all())


@pytest.mark.parametrize("env_name, action_dims", [("discrete", [8]), ("multi_discrete", [3, 4]), ("memory_maze", [4])])
def test_invalid_actions_are_never_sampled(env_name, action_dims):
    model = MaskableRecurrentXPPO("MlpLstmPolicy", MASKED_ENVS[env_name](), **TINY)
    record = RecordsActions()
    model.register_action_hook(record)
    model.learn(256)
    assert len(record.actions) == 128
    assert not np.concatenate(record.masks).all()  # some actions were forbidden
    assert record.all_allowed(action_dims)


def test_invalid_actions_are_sampled_without_masks():
    """Negative control: trained with use_masking=False, the policy takes actions the masks forbid."""
    model = MaskableRecurrentXPPO("MlpLstmPolicy", MASKED_ENVS["discrete"](), **TINY)
    record = RecordsActions()
    model.register_action_hook(record)
    model.learn(256, use_masking=False)
    assert not record.all_allowed([8])


class RatioAtFirstMinibatch:
    """A loss hook recording, at the first minibatch of a train() call, how far the policy's log-probabilities of the
    stored actions are from those stored at collection (the same parameters: 0, if evaluated under the same masks)."""

    def __init__(self, with_masks: bool) -> None:
        self.with_masks, self.gaps = with_masks, []
        self.seen = False

    def __call__(self, model: MaskableRecurrentXPPO, data: Any, loss: th.Tensor) -> th.Tensor:
        if not self.seen:
            self.seen = True
            masks = data.action_masks if self.with_masks else None
            with th.no_grad():
                _, log_prob, _ = model.policy.evaluate_actions(
                    data.observations, data.actions.long().flatten(), data.lstm_states, data.episode_starts, action_masks=masks
                )
            valid = data.mask > 1e-8
            self.gaps.append((log_prob - data.old_log_prob)[valid].abs().max().item())
        return loss


def test_train_evaluates_actions_under_their_masks():
    model = MaskableRecurrentXPPO("MlpLstmPolicy", MASKED_ENVS["discrete"](), **TINY)
    masked, unmasked = RatioAtFirstMinibatch(True), RatioAtFirstMinibatch(False)
    model.register_loss_hook(masked)
    model.register_loss_hook(unmasked)
    model.learn(64)
    assert masked.gaps[0] < 1e-5
    assert unmasked.gaps[0] > 1e-2  # negative control: the same minibatch without its masks


def test_padded_steps_allow_every_action():
    model = MaskableRecurrentXPPO("MlpLstmPolicy", MASKED_ENVS["memory_maze"](), **TINY).learn(64)
    padded = 0
    for data in model.rollout_buffer.get(24):
        assert data.action_masks.shape == (len(data.mask), 4)
        padded += int((data.mask < 1e-8).sum())
        assert (data.action_masks[data.mask < 1e-8] == 1).all()
        assert not (data.action_masks[data.mask > 1e-8] == 1).all()
    assert padded > 0


class SpyModel:
    """Records the LSTM states ``predict`` is called with."""

    def __init__(self, model: MaskableRecurrentXPPO) -> None:
        self.model, self.states = model, []

    def predict(self, observation, state=None, episode_start=None, deterministic=False, action_masks=None):
        self.states.append(state)
        return self.model.predict(observation, state, episode_start, deterministic, action_masks=action_masks)


@pytest.mark.parametrize("use_masking", [True, False])
def test_evaluate_policy_uses_masks_and_carries_lstm_states(use_masking):
    model = MaskableRecurrentXPPO("MlpLstmPolicy", MASKED_ENVS["memory_maze"](), **TINY)
    spy, illegal = SpyModel(model), []
    rewards, lengths = evaluate_policy(
        spy,
        make_vec_env(sb3_xppo.envs.MEMORY_MAZE_ID, n_envs=1, seed=3),
        n_eval_episodes=20,
        deterministic=False,
        return_episode_rewards=True,
        callback=lambda local, _: illegal.append(local["info"]["illegal_action"]),
        use_masking=use_masking,
    )
    assert len(rewards) == len(lengths) == 20
    assert spy.states[0] is None and all(state is not None for state in spy.states[1:])
    # an untrained policy without its masks soon walks into a wall; with them, never
    assert any(illegal) != use_masking


def test_predict_takes_masks():
    model = MaskableRecurrentXPPO("MlpLstmPolicy", MASKED_ENVS["discrete"](), **TINY)
    obs = model.env.reset()
    start = np.ones(2, dtype=bool)
    free, state = model.predict(obs, episode_start=start, deterministic=True)
    masks = np.ones((2, 8), dtype=bool)
    masks[np.arange(2), free] = False
    masked, masked_state = model.predict(obs, episode_start=start, deterministic=True, action_masks=masks)
    assert (masked != free).all()
    # the masks change the action, not the LSTM state
    assert all(np.array_equal(a, b) for a, b in zip(state, masked_state, strict=True))
    # one observation (not vectorized), its masks one row
    single, _ = model.predict(obs[0], deterministic=True, action_masks=masks[0])
    assert single.shape == () and single != free[0]


# --- save / load -----------------------------------------------------------------------------------------------------


def masked_predictions(model: MaskableRecurrentXPPO, seed: int = 4) -> list[np.ndarray]:
    """Sampled actions along one env's episodes, with its masks and the LSTM state carried."""
    env = MASKED_ENVS["memory_maze"](seed)
    obs, state, start, actions = env.reset(), None, np.ones(2, dtype=bool), []
    th.manual_seed(0)
    for _ in range(40):
        masks = np.stack(env.env_method("action_masks"))
        action, state = model.predict(obs, state, start, deterministic=False, action_masks=masks)
        obs, _, start, _ = env.step(action)
        actions.append(action)
    return actions


def test_save_load_round_trip(tmp_path):
    options = dict(actor_loss="spo", clip_range=(0.1, 0.3), value_loss="improved", clip_range_vf=0.2)
    model = MaskableRecurrentXPPO("MlpLstmPolicy", MASKED_ENVS["memory_maze"](), **{**TINY, **options}).learn(64)
    model.save(tmp_path / "model")
    loaded = MaskableRecurrentXPPO.load(tmp_path / "model", env=MASKED_ENVS["memory_maze"](seed=1), device="cpu")
    assert type(loaded) is MaskableRecurrentXPPO and type(loaded.policy) is MaskableRecurrentXPPOActorCriticPolicy
    assert type(loaded.rollout_buffer) is XPPOMaskableRecurrentRolloutBuffer
    assert params_equal(model.policy, loaded.policy)
    assert loaded.options.actor_loss == "spo" and loaded.clip_range(1.0) == (0.1, 0.3)
    for expected, action in zip(masked_predictions(model), masked_predictions(loaded), strict=True):
        assert np.array_equal(expected, action)
    model.set_env(MASKED_ENVS["memory_maze"](seed=1))
    for m in (model, loaded):
        m.set_random_seed(3)
        m.learn(64, reset_num_timesteps=False)
    assert params_equal(model.policy, loaded.policy)


# --- errors ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "env", ["Pendulum-v1", lambda: InvalidActionEnvMultiBinary(dims=4, ep_length=20, n_invalid_actions=2)]
)
def test_action_spaces_without_masks_refused(env):
    with pytest.raises(ValueError, match="Discrete and MultiDiscrete"):
        MaskableRecurrentXPPO("MlpLstmPolicy", env if isinstance(env, str) else DummyVecEnv([env]), **TINY)


def test_policy_refuses_other_action_spaces():
    with pytest.raises(ValueError, match="Discrete and MultiDiscrete"):
        MaskableRecurrentXPPOActorCriticPolicy(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-1, 1, (2,)), lambda _: 1e-3)


def test_reward_groups_refused():
    with pytest.raises(ValueError, match="reward_groups"):
        MaskableRecurrentXPPO("MlpLstmPolicy", "CartPole-v1", reward_groups=2, **TINY)


def test_env_without_masks_needs_use_masking_false():
    model = MaskableRecurrentXPPO("MlpLstmPolicy", ENVS["no_masks"](), **TINY)
    with pytest.raises(ValueError, match="action masking"):
        model.learn(64)
    model.learn(64, use_masking=False)
    with pytest.raises(ValueError, match="action_masks"):
        evaluate_policy(model, ENVS["no_masks"](), n_eval_episodes=1)
