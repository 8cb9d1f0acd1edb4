"""MaskableXPPO: bit-for-bit MaskablePPO with PPO's options, XPPO's options with masks, save/load, multi-critic, errors."""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from helpers import ToDict, params_equal
from sb3_contrib import MaskablePPO
from sb3_contrib.common.envs import InvalidActionEnvDiscrete, InvalidActionEnvMultiBinary, InvalidActionEnvMultiDiscrete
from sb3_contrib.common.maskable.utils import get_action_masks
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import IdentityEnv
from stable_baselines3.common.utils import LinearSchedule
from stable_baselines3.common.vec_env import DummyVecEnv

from sb3_xppo import MaskableXPPO
from sb3_xppo.common.buffers import XPPOMaskableDictRolloutBuffer, XPPOMaskableRolloutBuffer
from sb3_xppo.multi_critic.buffers import MultiCriticMaskableRolloutBuffer
from sb3_xppo.multi_critic.policies import MaskableMultiCriticPolicy

TINY = dict(n_steps=32, batch_size=32, n_epochs=2, seed=0, policy_kwargs=dict(net_arch=[16]), device="cpu")
LOGGED = ["train/policy_gradient_loss", "train/value_loss", "train/entropy_loss", "train/approx_kl", "train/loss"]


# Masked envs of every discrete action space sb3-contrib supports; episodes of 20 steps end inside the rollouts
ENVS = {
    "discrete": lambda: InvalidActionEnvDiscrete(dim=8, ep_length=20, n_invalid_actions=5),
    "multi_discrete": lambda: InvalidActionEnvMultiDiscrete(dims=[3, 4], ep_length=20, n_invalid_actions=3),
    "multi_binary": lambda: InvalidActionEnvMultiBinary(dims=4, ep_length=20, n_invalid_actions=2),
    "dict": lambda: ToDict(InvalidActionEnvDiscrete(dim=8, ep_length=20, n_invalid_actions=5)),
}


def vec_env(name: str, seed: int = 0) -> DummyVecEnv:
    return make_vec_env(ENVS[name], n_envs=2, seed=seed)


def policy_for(name: str) -> str:
    return "MultiInputPolicy" if name == "dict" else "MlpPolicy"


# --- exact reproduction of MaskablePPO ---------------------------------------------------------------------------------

# 2 envs x 32 steps, minibatches of 24 (one truncated), vf_coef 0.3, ent_coef 0.01: any change in the order of
# floating-point operations would show. The learning rate is high enough for the clip range to bite (~15% clipped).
EXACT = dict(
    n_steps=32, batch_size=24, n_epochs=3, learning_rate=0.03, vf_coef=0.3, ent_coef=0.01, seed=5,
    policy_kwargs=dict(net_arch=[16]),
)  # fmt: skip
OPTIONS = {
    "default": dict(),
    "value_clipping": dict(value_loss="sb3", clip_range_vf=0.1),
    # PPO's meaning of clip_range_vf without value_loss, with a clip that bites on every sample
    "clip_range_vf_bites": dict(clip_range_vf=1e-3),
    # early stopping on target_kl; the last train() runs at progress 0, where the linear clip range is 0
    "schedule_target_kl": dict(
        clip_range=LinearSchedule(0.3, 0.0, 1.0), learning_rate=LinearSchedule(0.05, 0.01, 1.0), target_kl=0.01
    ),
    "no_advantage_normalization": dict(normalize_advantage=False),
}


def assert_same_training(parent: MaskablePPO, model: MaskableXPPO) -> None:
    assert params_equal(parent.policy, model.policy)
    for key in LOGGED:
        assert parent.logger.name_to_value[key] == pytest.approx(model.logger.name_to_value[key], rel=1e-6, abs=1e-9), key


@pytest.mark.parametrize("options", OPTIONS.values(), ids=OPTIONS.keys())
@pytest.mark.parametrize("env_name", ENVS)
def test_reproduces_maskable_ppo_exactly(env_name, options):
    parent_options = {k: v for k, v in options.items() if k != "value_loss"}
    config = {**EXACT, **parent_options}
    parent = MaskablePPO(policy_for(env_name), vec_env(env_name), device="cpu", **config).learn(192)
    model = MaskableXPPO(policy_for(env_name), vec_env(env_name), device="cpu", **{**EXACT, **options})
    model.learn(192)
    buffer_class = XPPOMaskableDictRolloutBuffer if env_name == "dict" else XPPOMaskableRolloutBuffer
    assert type(model.rollout_buffer) is buffer_class
    # the masks reached the buffer and hid some actions
    assert not model.rollout_buffer.action_masks.all()
    if "target_kl" in options:
        assert model._n_updates < 3 * EXACT["n_epochs"]  # early stopping happened
    assert_same_training(parent, model)


@pytest.mark.parametrize("env_name", ["discrete", "dict"])
def test_reproduces_maskable_ppo_without_masking(env_name):
    """``learn(use_masking=False)``: the masks are neither collected nor applied, also by MaskableXPPO."""
    parent = MaskablePPO(policy_for(env_name), vec_env(env_name), device="cpu", **EXACT).learn(192, use_masking=False)
    model = MaskableXPPO(policy_for(env_name), vec_env(env_name), device="cpu", **EXACT).learn(192, use_masking=False)
    assert model.rollout_buffer.action_masks.all()
    assert_same_training(parent, model)
    # negative control: with the masks, the same seeds train to other parameters
    masked = MaskableXPPO(policy_for(env_name), vec_env(env_name), device="cpu", **EXACT).learn(192)
    assert not params_equal(parent.policy, masked.policy)


def test_env_without_masks_needs_use_masking_false():
    """As MaskablePPO: an env without ``action_masks()`` is refused unless masking is off."""
    model = MaskableXPPO("MlpPolicy", IdentityEnv(dim=3), **TINY)
    with pytest.raises(ValueError, match="does not support action masking"):
        model.learn(32)
    parent = MaskablePPO("MlpPolicy", IdentityEnv(dim=3), **TINY).learn(64, use_masking=False)
    model = MaskableXPPO("MlpPolicy", IdentityEnv(dim=3), **TINY).learn(64, use_masking=False)
    assert params_equal(parent.policy, model.policy)


class MasksOnlyInRollouts(MaskableXPPO):
    """MaskableXPPO evaluating the actions without their masks in train() (the mistake the reproduction must catch)."""

    def _evaluate_actions(self, rollout_data: Any, actions: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor | None]:
        return self.policy.evaluate_actions(rollout_data.observations, actions)


@pytest.mark.parametrize(
    "model_class, options",
    [
        (MasksOnlyInRollouts, dict()),
        (MaskableXPPO, dict(actor_loss="spo")),
        (MaskableXPPO, dict(clip_range=(0.1, 0.3))),
        (MaskableXPPO, dict(dual_clip=1.1)),
        (MaskableXPPO, dict(value_loss="clipped", clip_range_vf=0.1)),
    ],
    ids=["masks_ignored_in_train", "spo", "decoupled_clip", "dual_clip", "clipped_value_loss"],
)
def test_changes_differ_from_maskable_ppo(model_class, options):
    """Negative controls for the reproduction tests: ignoring the masks, or a non-PPO option, changes the result."""
    parent_options = {"clip_range_vf": options["clip_range_vf"]} if "clip_range_vf" in options else {}
    parent = MaskablePPO("MlpPolicy", vec_env("discrete"), device="cpu", **EXACT, **parent_options).learn(192)
    model = model_class("MlpPolicy", vec_env("discrete"), device="cpu", **EXACT, **options).learn(192)
    assert not params_equal(parent.policy, model.policy)
    assert all(th.isfinite(p).all() for p in model.policy.parameters())


# --- save / load -----------------------------------------------------------------------------------------------------


def test_save_load_round_trip_with_xppo_options(tmp_path):
    options = dict(actor_loss="spo", clip_range=(0.1, 0.3), value_loss="improved", clip_range_vf=0.2, delightful=True)
    model = MaskableXPPO("MlpPolicy", vec_env("discrete"), **{**TINY, **options}).learn(64)
    model.save(tmp_path / "model")
    loaded = MaskableXPPO.load(tmp_path / "model", env=vec_env("discrete", seed=1), device="cpu")
    assert type(loaded) is MaskableXPPO
    assert params_equal(model.policy, loaded.policy)
    assert loaded.options.actor_loss == "spo" and loaded.options.value_loss == "improved" and loaded.options.delightful
    assert loaded.clip_range(1.0) == (0.1, 0.3)
    assert loaded.clip_range_vf(1.0) == 0.2

    env = ENVS["discrete"]()
    for _ in range(5):
        obs, masks = env.observation_space.sample(), get_action_masks(env)
        expected = model.predict(obs, action_masks=masks, deterministic=True)[0]
        assert np.array_equal(loaded.predict(obs, action_masks=masks, deterministic=True)[0], expected)

    # both continue training alike: the options, schedules and optimizer state came back
    model.set_env(vec_env("discrete", seed=1))
    for m in (model, loaded):
        m.set_random_seed(3)
        m.learn(64, reset_num_timesteps=False)
    assert params_equal(model.policy, loaded.policy)


def test_maskable_ppo_checkpoint_trains_on_as_maskable_ppo(tmp_path):
    """``MaskableXPPO.load`` of a MaskablePPO checkpoint (with value clipping) continues exactly as MaskablePPO."""
    MaskablePPO("MlpPolicy", vec_env("discrete"), clip_range_vf=0.05, **TINY).learn(64).save(tmp_path / "parent")
    parent = MaskablePPO.load(tmp_path / "parent", env=vec_env("discrete", seed=1), device="cpu")
    model = MaskableXPPO.load(tmp_path / "parent", env=vec_env("discrete", seed=1), device="cpu")
    assert model.options.value_loss == "sb3" and model.normalize_advantage == "minibatch"
    for m in (parent, model):
        m.set_random_seed(3)
        m.learn(128, reset_num_timesteps=False)
    assert params_equal(parent.policy, model.policy)
    assert_same_training(parent, model)


# --- multi-critic with masks -------------------------------------------------------------------------------------------


class MaskedGroupEnv(InvalidActionEnvDiscrete):
    """A masked env whose info holds two reward groups: the identity reward, and a cost for high actions."""

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = super().step(action)
        cost = -float(action) / self.action_space.n
        info["vector_reward"] = np.array([reward, cost], dtype=np.float32)
        return obs, reward + cost, terminated, truncated, info


def test_reward_groups_with_masks():
    env = make_vec_env(lambda: MaskedGroupEnv(dim=6, ep_length=20, n_invalid_actions=3), n_envs=2, seed=0)
    model = MaskableXPPO("MlpPolicy", env, reward_groups=["task", "cost"], **TINY)
    assert type(model.policy) is MaskableMultiCriticPolicy
    assert type(model.rollout_buffer) is MultiCriticMaskableRolloutBuffer
    model.learn(64)
    assert model.rollout_buffer.returns.shape == (64, 2)  # flattened by get()
    assert not model.rollout_buffer.action_masks.all()
    logged = model.logger.name_to_value
    for name in ("task", "cost"):
        assert np.isfinite(logged[f"train/value_loss/{name}"])
        assert np.isfinite(logged[f"train/explained_variance/{name}"])
    # the policy never picked a masked action during the rollout
    buffer = model.rollout_buffer
    masks = buffer.action_masks.reshape(-1, 6)
    actions = buffer.actions.reshape(-1).astype(int)
    assert masks[np.arange(len(actions)), actions].all()


# --- errors ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options, match",
    [
        (dict(actor_loss="ppo"), "actor_loss"),
        (dict(value_loss="huber"), "value_loss"),
        (dict(value_loss="clipped"), "clip_range_vf"),
        (dict(dual_clip=1.0), "dual_clip"),
        (dict(actor_loss="spo", dual_clip=2.0), "dual_clip"),
        (dict(clip_range=1.5), "clip_range"),
        (dict(clip_range=(0.1, -0.2)), "clip_range"),
        (dict(normalize_advantage="batch"), "normalize_advantage"),
        (dict(delight_temp=0.0), "delight_temp"),
        (dict(reward_groups=["a", "b"], group_weights=[1.0]), "group_weights"),
    ],
)
def test_bad_options_raise_at_construction(options, match):
    with pytest.raises(ValueError, match=match):
        MaskableXPPO("MlpPolicy", vec_env("discrete"), **{**TINY, **options})


class NaNRewardAt(gym.Wrapper):
    """A NaN reward at the ``at``-th step of this env (``action_masks()`` still reaches the env)."""

    def __init__(self, env: gym.Env, at: int) -> None:
        super().__init__(env)
        self.at, self.steps = at, 0

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        return obs, np.nan if self.steps == self.at else reward, terminated, truncated, info


def test_non_finite_reward_is_caught():
    model = MaskableXPPO("MlpPolicy", vec_env("discrete"), **TINY).learn(64)
    params = copy.deepcopy(model.policy.state_dict())
    model.set_env(DummyVecEnv([ENVS["discrete"], lambda: NaNRewardAt(ENVS["discrete"](), at=5)]))
    with pytest.raises(ValueError, match=r"non-finite reward nan from env 1 at rollout step 4"):
        model.learn(64, reset_num_timesteps=False)
    assert all(th.equal(a, b) for a, b in zip(params.values(), model.policy.state_dict().values(), strict=True))


def test_positional_arguments_as_maskable_ppo():
    """A drop-in takes MaskablePPO's arguments positionally too, and refuses one given twice."""
    model = MaskableXPPO("MlpPolicy", InvalidActionEnvDiscrete(dim=5, n_invalid_actions=2), 1e-3, 64, 16, device="cpu")
    assert (model.learning_rate, model.n_steps, model.batch_size) == (1e-3, 64, 16)
    with pytest.raises(TypeError, match="multiple values for argument 'learning_rate'"):
        MaskableXPPO("MlpPolicy", InvalidActionEnvDiscrete(dim=5, n_invalid_actions=2), 1e-3, learning_rate=1e-2)
