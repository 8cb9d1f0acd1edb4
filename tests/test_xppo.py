"""XPPO: exact PPO reproduction, the GAE buffer, the selectable losses and their logs, validation, hooks, save/load."""

import copy
import pickle

import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from helpers import params_equal
from rl_zoo3.utils import linear_schedule
from stable_baselines3 import PPO
from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import (
    FakeImageEnv,
    IdentityEnv,
    IdentityEnvBox,
    IdentityEnvMultiBinary,
    IdentityEnvMultiDiscrete,
    SimpleMultiObsEnv,
)
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.type_aliases import RolloutBufferSamples
from stable_baselines3.common.utils import LinearSchedule

import sb3_xppo
from sb3_xppo import XPPO
from sb3_xppo.common.policies import XPPOPolicyMixin
from sb3_xppo.xppo import XPPODictRolloutBuffer, XPPORolloutBuffer
from sb3_xppo.xppo.buffers import rollout_gae

TINY = dict(n_steps=32, batch_size=16, n_epochs=2, policy_kwargs=dict(net_arch=[16]), device="cpu")


# --- exact reproduction of PPO ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
@pytest.mark.parametrize(
    "kwargs",
    [
        dict(),  # value_loss='mse' without clip_range_vf
        dict(value_loss="sb3", clip_range_vf=0.1),
        # PPO's meaning of clip_range_vf without value_loss, with a clip that bites on every sample
        dict(clip_range_vf=1e-3),
        # early stopping on target_kl; the last train() runs at progress 0, where the clip range is 0
        dict(clip_range=LinearSchedule(0.3, 0.0, 1.0), target_kl=0.001, learning_rate=3e-3, normalize_advantage=True),
    ],
)
def test_reproduces_ppo_exactly(env_id, kwargs):
    # 2 envs x 32 steps, minibatches of 24 (not a power of two, one truncated) and vf_coef 0.3 so that any change in
    # the order of floating-point operations would show
    config = dict(n_steps=32, batch_size=24, n_epochs=3, vf_coef=0.3, ent_coef=0.01, seed=5, policy_kwargs=dict(net_arch=[16]))
    ppo_kwargs = {k: v for k, v in kwargs.items() if k != "value_loss"}
    ppo = PPO("MlpPolicy", make_vec_env(env_id, n_envs=2, seed=0), device="cpu", **config, **ppo_kwargs).learn(192)
    with pytest.warns(UserWarning, match="truncated mini-batch of size 16"):  # PPO's warning is kept
        xppo = XPPO("MlpPolicy", make_vec_env(env_id, n_envs=2, seed=0), device="cpu", **config, **kwargs)
    xppo.learn(192)
    assert isinstance(xppo.rollout_buffer, XPPORolloutBuffer)
    assert params_equal(ppo.policy, xppo.policy)
    for key in ["train/policy_gradient_loss", "train/value_loss", "train/approx_kl", "train/clip_fraction", "train/loss"]:
        assert ppo.logger.name_to_value[key] == pytest.approx(xppo.logger.name_to_value[key], rel=1e-6, abs=1e-9), key


def test_clip_range_vf_bites():
    """Negative control for the clip_range_vf=1e-3 reproduction: without the clipping the parameters differ."""
    config = dict(n_steps=32, batch_size=32, n_epochs=2, seed=5, policy_kwargs=dict(net_arch=[16]), device="cpu")
    ppo = PPO("MlpPolicy", "Pendulum-v1", clip_range_vf=1e-3, **config).learn(64)
    with pytest.warns(UserWarning, match="clip_range_vf is ignored"):
        unclipped = XPPO("MlpPolicy", "Pendulum-v1", clip_range_vf=1e-3, value_loss="mse", **config)
    assert not params_equal(ppo.policy, unclipped.learn(64).policy)
    assert XPPO("MlpPolicy", "Pendulum-v1", clip_range_vf=1e-3, **config).options.value_loss == "sb3"
    assert XPPO("MlpPolicy", "Pendulum-v1", **config).options.value_loss == "mse"


def test_ppo_checkpoint_with_clip_range_vf_trains_as_ppo(tmp_path):
    """XPPO.load of a PPO checkpoint saved with clip_range_vf keeps PPO's value clipping."""
    config = dict(n_steps=32, batch_size=32, n_epochs=2, seed=1, policy_kwargs=dict(net_arch=[16]), device="cpu")
    PPO("MlpPolicy", "Pendulum-v1", clip_range_vf=1e-3, **config).learn(32).save(tmp_path / "ppo")
    ppo = PPO.load(tmp_path / "ppo", env=make_vec_env("Pendulum-v1", seed=0), device="cpu")
    xppo = XPPO.load(tmp_path / "ppo", env=make_vec_env("Pendulum-v1", seed=0), device="cpu")
    assert xppo.options.value_loss == "sb3"
    for model in (ppo, xppo):
        model.set_random_seed(3)
        model.learn(64, reset_num_timesteps=False)
    assert params_equal(ppo.policy, xppo.policy)
    # and saved again by XPPO, the resolved value loss comes back
    xppo.save(tmp_path / "xppo")
    assert XPPO.load(tmp_path / "xppo", device="cpu").options.value_loss == "sb3"


def test_reproduces_ppo_when_a_linear_clip_schedule_overshoots_the_budget():
    # 5000 is no multiple of the 256-step rollout: the last train() runs past the budget, where rl-zoo3's lin_0.2
    # (progress_remaining * 0.2, unclamped) is negative
    config = dict(n_steps=32, batch_size=64, n_epochs=2, seed=0, policy_kwargs=dict(net_arch=[16]), device="cpu")
    schedule = linear_schedule(0.2)
    ppo = PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=8, seed=0), clip_range=schedule, **config).learn(5000)
    xppo = XPPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=8, seed=0), clip_range=schedule, **config).learn(5000)
    assert ppo.clip_range(ppo._current_progress_remaining) < 0
    assert params_equal(ppo.policy, xppo.policy)


def test_long_rollouts():
    """Bit for bit at any rollout length, also with PPO's default 2048 steps (the buffer scans in SB3's float order)."""
    config = dict(n_steps=2048, batch_size=256, n_epochs=1, seed=2, policy_kwargs=dict(net_arch=[16]), device="cpu")
    ppo = PPO("MlpPolicy", "CartPole-v1", **config).learn(2048)
    xppo = XPPO("MlpPolicy", "CartPole-v1", **config).learn(2048)
    assert params_equal(ppo.policy, xppo.policy)


def test_other_losses_differ_from_ppo():
    """The reproduction test can fail: a different loss gives different parameters."""
    ppo = PPO("MlpPolicy", "CartPole-v1", seed=1, **TINY).learn(64)
    xppo = XPPO("MlpPolicy", "CartPole-v1", seed=1, actor_loss="spo", **TINY).learn(64)
    assert not params_equal(ppo.policy, xppo.policy)


# --- the rollout buffers' GAE (rollout_gae, not calc_gae) ------------------------------------------------------------


def _filled_buffers(classes, n_steps, n_envs, rng, obs_space=None):
    obs_space = obs_space or spaces.Box(-1, 1, (2,))
    buffers = [
        cls(n_steps, obs_space, spaces.Discrete(2), "cpu", gae_lambda=0.9, gamma=0.97, n_envs=n_envs) for cls in classes
    ]
    rewards = rng.normal(size=(n_steps, n_envs)).astype(np.float32)
    values = rng.normal(size=(n_steps, n_envs)).astype(np.float32)
    starts = (rng.random((n_steps, n_envs)) < 0.1).astype(np.float32)
    last_values = th.as_tensor(rng.normal(size=(n_envs, 1)).astype(np.float32))
    dones = rng.random(n_envs) < 0.5
    for buffer in buffers:
        buffer.rewards[:], buffer.values[:], buffer.episode_starts[:] = rewards, values, starts
        buffer.compute_returns_and_advantage(last_values, dones)
    return buffers


@pytest.mark.parametrize("n_steps, n_envs", [(1, 1), (7, 3), (64, 4), (65, 2), (2048, 8)])
def test_buffer_gae_equals_sb3(n_steps, n_envs):
    sb3, ours = _filled_buffers([RolloutBuffer, XPPORolloutBuffer], n_steps, n_envs, np.random.default_rng(n_steps))
    assert ours.advantages.dtype == ours.returns.dtype == np.float32
    assert np.array_equal(sb3.advantages, ours.advantages)
    assert np.array_equal(sb3.returns, ours.returns)


def test_dict_buffer_gae_equals_sb3():
    obs_space = spaces.Dict({"a": spaces.Box(-1, 1, (2,)), "b": spaces.Discrete(3)})
    sb3, ours = _filled_buffers([DictRolloutBuffer, XPPODictRolloutBuffer], 16, 2, np.random.default_rng(1), obs_space)
    assert np.array_equal(sb3.advantages, ours.advantages)
    assert np.array_equal(sb3.returns, ours.returns)


def test_buffer_gae_hand_computed():
    # One env, 3 steps, an episode starts at step 2 (so step 1 does not bootstrap), the last step is not done
    rewards = np.array([[1.0], [2.0], [3.0]], dtype=np.float32)
    values = np.array([[0.5], [1.0], [1.5]], dtype=np.float32)
    starts = np.array([[1.0], [0.0], [1.0]], dtype=np.float32)
    gamma, lam, last = 0.5, 0.5, 2.0
    advantages, returns = rollout_gae(rewards, values, starts, th.tensor([[last]]), np.array([False]), gamma, lam)
    a2 = 3 + gamma * last - 1.5  # 2.5
    a1 = 2 - 1.0  # terminal: no bootstrap, no recursion
    a0 = (1 + gamma * 1.0 - 0.5) + gamma * lam * a1  # 1.0 + 0.25
    np.testing.assert_allclose(advantages[:, 0], [a0, a1, a2], rtol=1e-6)
    np.testing.assert_allclose(returns[:, 0], [a0 + 0.5, a1 + 1.0, a2 + 1.5], rtol=1e-6)


def test_rollout_gae_grouped_equals_per_group():
    rng = np.random.default_rng(2)
    n, b, g = 9, 3, 2
    rewards = rng.normal(size=(n, b, g)).astype(np.float32)
    values = rng.normal(size=(n, b, g)).astype(np.float32)
    starts = (rng.random((n, b)) < 0.2).astype(np.float32)
    last, dones = th.as_tensor(rng.normal(size=(b, g)).astype(np.float32)), rng.random(b) < 0.5
    advantages, returns = rollout_gae(rewards, values, starts, last, dones, 0.99, 0.95)
    assert advantages.shape == returns.shape == (n, b, g)
    for i in range(g):
        adv_i, ret_i = rollout_gae(rewards[..., i], values[..., i], starts, last[:, i], dones, 0.99, 0.95)
        assert np.array_equal(advantages[..., i], adv_i) and np.array_equal(returns[..., i], ret_i)


# --- the losses and their logs on a hand-computed minibatch ----------------------------------------------------------


class FixedBuffer:
    """A rollout buffer stand-in that yields one fixed minibatch (no shuffling)."""

    def __init__(self, samples: RolloutBufferSamples):
        self.samples = samples
        self.values, self.returns, self.advantages = (
            samples.old_values.numpy(),
            samples.returns.numpy(),
            samples.advantages.numpy(),
        )

    def get(self, batch_size=None):
        yield self.samples


RATIOS = th.tensor([0.5, 0.95, 1.05, 1.5])
ADVANTAGES = th.tensor([1.0, -1.0, 1.0, -1.0])
VALUES = th.tensor([0.5, -0.5, 0.1, 2.0])
RETURNS = th.tensor([1.0, 1.0, -1.0, 0.3])


def train_on_fixed_batch(new_values=VALUES, returns=RETURNS, old_values=None, hooks=(), **kwargs):
    """One ``train()`` on a 4-sample minibatch with old log-prob 0, ratios ``RATIOS``; returns the logged values."""
    kwargs = dict(dict(n_steps=4, batch_size=4, n_epochs=1, normalize_advantage=False, vf_coef=0.5), **kwargs)
    model = XPPO("MlpPolicy", IdentityEnvBox(-10, 10), policy_kwargs=dict(net_arch=[4]), device="cpu", **kwargs)
    model.set_logger(Logger(folder=None, output_formats=[]))
    old_values = th.zeros_like(returns) if old_values is None else old_values
    model.rollout_buffer = FixedBuffer(
        RolloutBufferSamples(th.zeros(4, 1), th.zeros(4, 1), old_values, th.zeros(4), ADVANTAGES, returns)
    )
    log_prob = th.log(RATIOS).requires_grad_()
    values = new_values.clone().reshape(4, -1).requires_grad_()
    model.policy.evaluate_actions = lambda obs, actions: (values, log_prob, th.zeros(4))
    for hook in hooks:
        model.register_loss_hook(hook)
    model.train()
    return model.logger.name_to_value


@pytest.mark.parametrize(
    "kwargs, policy_loss",
    [
        # surrogates, by hand: [0.5, -0.95, 1.05, min(-1.5, -1.2)]
        (dict(), 0.225),
        # dual clip c = 1.4 bounds the last one at -1.4
        (dict(dual_clip=1.4), 0.2),
        # SPO, eps 0.2: r A - |A| (r - 1)^2 / 0.4
        (dict(actor_loss="spo"), (0.125 + 0.95625 - 1.04375 + 2.125) / 4),
        # PPO where A > 0, SPO where A < 0
        (dict(actor_loss="asymmetric_spo"), (-0.5 + 0.95625 - 1.05 + 2.125) / 4),
        # decoupled range [0.4, 1.3]
        (dict(clip_range=(0.6, 0.3)), 0.225),
    ],
)
def test_actor_losses_and_clip_stats_hand_computed(kwargs, policy_loss):
    logs = train_on_fixed_batch(**kwargs)
    assert logs["train/policy_gradient_loss"] == pytest.approx(policy_loss, rel=1e-5)
    low_fraction = 0.0 if "clip_range" in kwargs else 0.25  # ratio 0.5 is inside [0.4, 1.3]
    assert logs["train/clip_fraction_low"] == pytest.approx(low_fraction)
    assert logs["train/clip_fraction_high"] == pytest.approx(0.25)
    assert logs["train/clip_fraction"] == pytest.approx(low_fraction + 0.25)
    assert logs["train/dual_clip_fraction"] == pytest.approx(0.25 if "dual_clip" in kwargs else 0.0)
    assert logs["train/ratio_deviation"] == pytest.approx(0.275, rel=1e-5)
    kl = np.mean([(r - 1) - np.log(r) for r in RATIOS.tolist()])
    assert logs["train/approx_kl"] == pytest.approx(kl, rel=1e-5)
    assert logs["train/loss"] == pytest.approx(policy_loss + 0.5 * logs["train/value_loss"], rel=1e-5)


def test_dual_clip_fraction_counts_the_clamped_ratio():
    # The last sample (A = -1, r = 1.5 > c = 1.4) is dual-clipped; with the log-ratio clamped to +-0.1 the loss
    # sees r = e^0.1 < 1.4, and the bound is never active
    assert train_on_fixed_batch(dual_clip=1.4)["train/dual_clip_fraction"] == pytest.approx(0.25)
    assert train_on_fixed_batch(dual_clip=1.4, log_ratio_clamp=0.1)["train/dual_clip_fraction"] == 0.0


@pytest.mark.parametrize("actor_loss", ["spo", "asymmetric_spo"])
@pytest.mark.parametrize("progress", [0.0, -0.03])
def test_spo_at_the_end_of_a_linear_clip_schedule(actor_loss, progress):
    """SPO divides by the clip range: once a linear schedule reaches 0 the actor is left alone, the critic learns."""
    model = XPPO("MlpPolicy", "Pendulum-v1", actor_loss=actor_loss, clip_range=linear_schedule(0.2), ent_coef=0.01,
                 n_steps=64, batch_size=16, n_epochs=4, seed=0, policy_kwargs=dict(net_arch=[16]), device="cpu")  # fmt: skip
    model.learn(64)
    before = copy.deepcopy(model.policy.state_dict())
    optimizer_steps = [s["step"].clone() for s in model.policy.optimizer.state.values()]
    model._current_progress_remaining = progress
    model.train()
    after = model.policy.state_dict()
    assert all(th.isfinite(p).all() for p in after.values())
    actor = [k for k in after if k.startswith(("mlp_extractor.policy_net", "action_net", "log_std"))]
    critic = [k for k in after if k.startswith(("mlp_extractor.value_net", "value_net"))]
    assert actor and critic
    assert all(th.equal(before[k], after[k]) for k in actor)
    assert all(not th.equal(before[k], after[k]) for k in critic)
    # the critic's steps are ordinary ones: Adam moves each parameter by at most ~lr per step
    steps = model.n_epochs * 64 // 16
    assert max((after[k] - before[k]).abs().max().item() for k in critic) <= 1.5 * steps * model.learning_rate
    assert np.isfinite(model.logger.name_to_value["train/loss"])
    assert model.logger.name_to_value["train/policy_gradient_loss"] == 0.0
    assert optimizer_steps  # the optimizer had state before; the model trains on afterwards
    model._current_progress_remaining = 0.5
    model.train()
    assert not th.equal(before["action_net.weight"], model.policy.state_dict()["action_net.weight"])


def test_clip_range_pair_logged():
    logs = train_on_fixed_batch(clip_range=(0.6, 0.3))
    assert logs["train/clip_range_low"] == pytest.approx(0.6)
    assert logs["train/clip_range_high"] == pytest.approx(0.3)
    assert logs["train/clip_range"] == pytest.approx(0.45)


@pytest.mark.parametrize(
    "value_loss, expected",
    [
        # (v - R)^2 = [0.25, 2.25, 1.21, 2.89]
        ("mse", 6.6 / 4),
        # clipped prediction clamp(v, -0.2, 0.2) = [0.2, -0.2, 0.1, 0.2]: [0.64, 1.44, 1.21, 0.01]
        ("sb3", 3.3 / 4),
        # max of both
        ("clipped", 6.99 / 4),
        # R_c = [0.2, 0.2, -0.2, 0.2]: first sample lies in (0.2, R) -> 0, then min(L, L_c) = [0.49, 0.09, 2.89]
        ("improved", 3.47 / 4),
    ],
)
def test_value_losses_hand_computed(value_loss, expected):
    clip_range_vf = None if value_loss == "mse" else 0.2
    logs = train_on_fixed_batch(value_loss=value_loss, clip_range_vf=clip_range_vf)
    assert logs["train/value_loss"] == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("value_loss", ["mse", "sb3", "clipped", "improved"])
def test_grouped_values_per_group_loss(value_loss):
    """With (batch, G) values, returns and old values the value loss is taken per group, logged, and summed."""
    clip_range_vf = None if value_loss == "mse" else 0.2
    other_values, other_returns = th.tensor([1.0, 2.0, 0.0, -1.0]), th.tensor([0.0, 2.5, 0.3, -1.0])
    singles = [
        train_on_fixed_batch(v, r, value_loss=value_loss, clip_range_vf=clip_range_vf)["train/value_loss"]
        for v, r in [(VALUES, RETURNS), (other_values, other_returns)]
    ]
    grouped = train_on_fixed_batch(
        th.stack([VALUES, other_values], 1),
        th.stack([RETURNS, other_returns], 1),
        old_values=th.zeros(4, 2),
        value_loss=value_loss,
        clip_range_vf=clip_range_vf,
    )
    assert grouped["train/value_loss/0"] == pytest.approx(singles[0], rel=1e-6)
    assert grouped["train/value_loss/1"] == pytest.approx(singles[1], rel=1e-6)
    assert grouped["train/value_loss"] == pytest.approx(sum(singles), rel=1e-6)
    assert "train/explained_variance/1" in grouped


def test_logs_every_ppo_key():
    model = XPPO("MlpPolicy", "Pendulum-v1", clip_range_vf=0.2, value_loss="sb3", **TINY).learn(32)
    ppo_keys = ["policy_gradient_loss", "value_loss", "entropy_loss", "approx_kl", "clip_fraction", "loss"]
    ppo_keys += ["explained_variance", "std", "n_updates", "clip_range", "clip_range_vf"]
    xppo_keys = ["clip_fraction_low", "clip_fraction_high", "dual_clip_fraction", "ratio_deviation"]
    logs = model.logger.name_to_value
    for key in ppo_keys + xppo_keys:
        assert f"train/{key}" in logs, key
        assert np.isfinite(logs[f"train/{key}"]), key


# --- advantage normalization -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("normalize_advantage", [True, "minibatch", "rollout", False])
def test_minibatch_of_one_never_nan(normalize_advantage):
    # batch_size=1 with minibatch normalization is refused (PPO's assert), but a rollout of 9 in minibatches of 8 ends
    # with a minibatch of one
    model = XPPO("MlpPolicy", "CartPole-v1", n_steps=9, batch_size=8, n_epochs=1, normalize_advantage=normalize_advantage)
    model.learn(16)
    assert all(th.isfinite(p).all() for p in model.policy.parameters())
    assert np.isfinite(model.logger.name_to_value["train/loss"])


def test_normalize_advantage_modes():
    assert XPPO("MlpPolicy", "CartPole-v1", normalize_advantage=True).normalize_advantage == "minibatch"
    model = XPPO("MlpPolicy", "CartPole-v1", normalize_advantage="rollout", seed=0, **TINY)
    seen = []
    model.register_loss_hook(lambda m, data, loss: seen.append(data.advantages.clone()) or loss)
    model.learn(32)
    # Each minibatch sees the rollout's z-scored advantages: over the whole rollout mean 0 and (population) std 1
    epoch = th.cat(seen[:2])
    assert epoch.mean().item() == pytest.approx(0.0, abs=1e-5)
    assert epoch.std(unbiased=False).item() == pytest.approx(1.0, abs=1e-3)
    # The minibatch mode is PPO's (checked bit for bit above); False leaves the advantages alone
    raw = XPPO("MlpPolicy", "CartPole-v1", normalize_advantage=False, seed=0, **TINY)
    raw_seen = []
    raw.register_loss_hook(lambda m, data, loss: raw_seen.append(data.advantages.clone()) or loss)
    raw.learn(32)
    assert th.cat(raw_seen[:2]).mean().item() > 1.0  # CartPole returns are positive and large


# --- constructor validation ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(actor_loss="ppo"), "actor_loss must be one of"),
        (dict(value_loss="huber"), "value_loss must be one of"),
        (dict(value_loss="sb3"), "value_loss='sb3' clips the value function and needs clip_range_vf"),
        (dict(value_loss="clipped"), "needs clip_range_vf"),
        (dict(value_loss="improved"), "needs clip_range_vf"),
        (dict(dual_clip=1.0), "dual_clip must be None or a number > 1"),
        (dict(dual_clip=0.5), "dual_clip must be None or a number > 1"),
        (dict(dual_clip=True), "dual_clip must be None or a number > 1"),
        (dict(actor_loss="spo", dual_clip=3.0), "removes SPO's restoring gradient"),
        (dict(actor_loss="asymmetric_spo", dual_clip=3.0), "dual_clip cannot be combined with actor_loss='asymmetric_spo'"),
        (dict(clip_range=0.0), r"clip_range must be a number in \(0, 1\)"),
        (dict(clip_range=1.0), r"clip_range must be a number in \(0, 1\)"),
        (dict(clip_range=-0.2), r"clip_range must be a number in \(0, 1\)"),
        (dict(clip_range="0.2"), r"clip_range must be a number in \(0, 1\)"),
        (dict(clip_range=(0.1, 0.2, 0.3)), r"clip_range must be a float in \(0, 1\), a schedule or a \(low, high\) pair"),
        (dict(clip_range=(0.2, 1.5)), r"clip_range \(high\) must be a number in \(0, 1\)"),
        (dict(clip_range=(0.0, 0.2)), r"clip_range \(low\) must be a number in \(0, 1\)"),
        (dict(clip_range_vf=-0.2), "clip_range_vf must be None"),
        (dict(normalize_advantage="batch"), "normalize_advantage must be one of"),
        (dict(delight_temp=0.0), "delight_temp must be a number > 0"),
        (dict(log_ratio_clamp=(1.0, -1.0)), "log_ratio_clamp must be None"),
        (dict(log_ratio_clamp=-2.0), "log_ratio_clamp must be None"),
    ],
)
def test_constructor_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        XPPO("MlpPolicy", "CartPole-v1", **kwargs)


def test_mse_with_clip_range_vf_warns():
    with pytest.warns(UserWarning, match="clip_range_vf is ignored by value_loss='mse'"):
        XPPO("MlpPolicy", "CartPole-v1", clip_range_vf=0.2, value_loss="mse")


def test_log_ratio_clamp_forms():
    assert XPPO("MlpPolicy", "CartPole-v1", log_ratio_clamp=2).options.log_ratio_clamp == (-2.0, 2.0)
    assert XPPO("MlpPolicy", "CartPole-v1", log_ratio_clamp=[-1, 3]).options.log_ratio_clamp == (-1.0, 3.0)


def test_log_ratio_clamp_bounds_the_ratio():
    # log ratios [-0.69, -0.05, 0.05, 0.41] clamped to +-0.1: ratios [e^-0.1, 0.95, 1.05, e^0.1], all inside the clip range
    logs = train_on_fixed_batch(log_ratio_clamp=0.1)
    expected = -(np.exp(-0.1) - 0.95 + 1.05 - np.exp(0.1)) / 4
    assert logs["train/policy_gradient_loss"] == pytest.approx(expected, rel=1e-5)


def test_delightful_gate_changes_the_loss():
    plain = train_on_fixed_batch()["train/policy_gradient_loss"]
    gated = train_on_fixed_batch(delightful=True, delight_temp=0.5)["train/policy_gradient_loss"]
    # Each advantage times sigmoid(-logp * A / T), by hand
    logp = np.log(RATIOS.numpy())
    adv = ADVANTAGES.numpy() / (1 + np.exp(logp * ADVANTAGES.numpy() / 0.5))
    ratio = RATIOS.numpy()
    expected = -np.mean(np.minimum(ratio * adv, np.clip(ratio, 0.8, 1.2) * adv))
    assert gated == pytest.approx(expected, rel=1e-5)
    assert gated != pytest.approx(plain)


# --- loss hook -------------------------------------------------------------------------------------------------------


def test_loss_hook_called_per_minibatch_and_removable():
    calls = []

    def hook(model, rollout_data, loss):
        calls.append((model, len(rollout_data.advantages), loss.detach().clone()))
        return loss

    model = XPPO("MlpPolicy", "CartPole-v1", seed=0, **TINY)
    handle = model.register_loss_hook(hook)
    model.learn(32)
    assert len(calls) == 4  # 2 epochs x 2 minibatches
    assert all(m is model and n == 16 for m, n, _ in calls)
    assert calls[-1][2].item() == pytest.approx(model.logger.name_to_value["train/loss"])
    # An identity hook leaves training as it was
    reference = XPPO("MlpPolicy", "CartPole-v1", seed=0, **TINY).learn(32)
    assert params_equal(reference.policy, model.policy)
    handle.remove()
    model.learn(32)
    assert len(calls) == 4


def test_loss_hook_replaces_the_loss():
    model = XPPO("MlpPolicy", "CartPole-v1", seed=0, **TINY)
    before = copy.deepcopy(model.policy.state_dict())
    # rl_coef = 0 and no other term: nothing to optimise (Adam's step of a zero gradient is exactly 0)
    model.register_loss_hook(lambda m, data, loss: 0.0 * loss)
    model.learn(32)
    assert all(th.equal(before[k], v) for k, v in model.policy.state_dict().items())
    # The hook's loss is the one logged
    logs = train_on_fixed_batch(hooks=[lambda m, data, loss: 2.0 * loss + 1.0])
    plain = train_on_fixed_batch()
    assert logs["train/loss"] == pytest.approx(2 * plain["train/loss"] + 1, rel=1e-6)


def test_loss_hooks_run_in_order():
    plain = train_on_fixed_batch()["train/loss"]
    logs = train_on_fixed_batch(hooks=[lambda m, d, loss: loss + 1.0, lambda m, d, loss: loss * 2.0])
    assert logs["train/loss"] == pytest.approx(2.0 * (plain + 1.0), rel=1e-6)


def test_loss_hook_not_saved_nor_pickled(tmp_path):
    model = XPPO("MlpPolicy", "CartPole-v1", **TINY)
    model.register_loss_hook(lambda m, d, loss: loss)
    model.save(tmp_path / "model")
    assert len(XPPO.load(tmp_path / "model")._loss_hooks) == 0
    assert len(copy.deepcopy(model)._loss_hooks) == 0
    assert len(model._loss_hooks) == 1
    assert pickle.loads(pickle.dumps(model.__getstate__()["_loss_hooks"])) == {}
    with pytest.raises(TypeError, match="hook must be a callable"):
        model.register_loss_hook("not a hook")


# --- save / load -----------------------------------------------------------------------------------------------------

ENVS = {
    "box": lambda: IdentityEnvBox(-1, 1, ep_length=10),
    "discrete": lambda: IdentityEnv(3, ep_length=10),
    "multidiscrete": lambda: IdentityEnvMultiDiscrete(2, ep_length=10),
    "multibinary": lambda: IdentityEnvMultiBinary(2, ep_length=10),
    "image": lambda: FakeImageEnv(screen_height=36, screen_width=36, n_channels=1, discrete=True),
    "dict": lambda: SimpleMultiObsEnv(random_start=True),
}
POLICIES = {"image": "CnnPolicy", "dict": "MultiInputPolicy"}
# Every loss option appears at least once, each bundle on every space
LOSS_OPTIONS = [
    dict(actor_loss="clip", value_loss="mse"),
    dict(actor_loss="spo", value_loss="sb3", clip_range_vf=0.2, normalize_advantage="rollout"),
    dict(dual_clip=2.0, clip_range_vf=0.2),
    dict(actor_loss="asymmetric_spo", value_loss="clipped", clip_range_vf=0.5, delightful=True, clip_range=(0.1, 0.3)),
    dict(value_loss="improved", clip_range_vf=LinearSchedule(0.5, 0.1, 1.0), log_ratio_clamp=5.0, normalize_advantage=False,
         clip_range=(LinearSchedule(0.3, 0.1, 0.5), 0.25)),
]  # fmt: skip


@pytest.mark.parametrize("env_name", ENVS)
@pytest.mark.parametrize("options", range(len(LOSS_OPTIONS)))
def test_save_load_every_space_and_loss(tmp_path, env_name, options):
    env = ENVS[env_name]()
    kwargs = LOSS_OPTIONS[options]
    policy = POLICIES.get(env_name, "MlpPolicy")
    model = XPPO(policy, env, n_steps=16, batch_size=8, n_epochs=1, policy_kwargs=dict(net_arch=[8]), seed=0, **kwargs)
    model.learn(16)
    observations = [env.observation_space.sample() for _ in range(5)]
    actions = [model.predict(obs, deterministic=True)[0] for obs in observations]
    model.save(tmp_path / "xppo")

    loaded = XPPO.load(tmp_path / "xppo", env=env, device="cpu")
    assert params_equal(model.policy, loaded.policy)
    for obs, action in zip(observations, actions, strict=True):
        assert np.array_equal(loaded.predict(obs, deterministic=True)[0], action)
    assert loaded.options == model.options and loaded.normalize_advantage == model.normalize_advantage
    assert loaded.clip_range(0.5) == model.clip_range(0.5)
    assert type(loaded.rollout_buffer) is type(model.rollout_buffer)
    loaded.learn(16)


def identity_box(seed: int = 0) -> IdentityEnvBox:
    env = IdentityEnvBox(-1, 1, ep_length=10)
    env.action_space.seed(seed)  # the env draws its states from its action space
    return env


def test_xppo_loads_ppo_checkpoint(tmp_path):
    env = identity_box()
    ppo = PPO("MlpPolicy", env, n_steps=16, batch_size=8, n_epochs=2, clip_range=LinearSchedule(0.3, 0.1, 1.0), seed=0)
    ppo.learn(16)
    ppo.save(tmp_path / "ppo")
    xppo = XPPO.load(tmp_path / "ppo", env=identity_box(), device="cpu")
    assert params_equal(ppo.policy, xppo.policy)
    assert xppo.options.actor_loss == "clip" and xppo.normalize_advantage == "minibatch"
    obs = np.array([0.3], dtype=np.float32)
    assert np.array_equal(ppo.predict(obs, deterministic=True)[0], xppo.predict(obs, deterministic=True)[0])
    # Training on continues exactly as PPO's would
    ppo = PPO.load(tmp_path / "ppo", env=identity_box(), device="cpu")
    for model in (ppo, xppo):
        model.set_random_seed(3)
        model.learn(32, reset_num_timesteps=False)
    assert params_equal(ppo.policy, xppo.policy)


def test_ppo_loads_xppo_checkpoint(tmp_path):
    env = IdentityEnvBox(-1, 1, ep_length=10)
    xppo = XPPO("MlpPolicy", env, n_steps=16, batch_size=8, actor_loss="spo", seed=0).learn(16)
    xppo.save(tmp_path / "xppo")
    # A symmetric clip range: stock PPO loads and trains it (with PPO's loss)
    ppo = PPO.load(tmp_path / "xppo", env=env, device="cpu")
    assert params_equal(ppo.policy, xppo.policy)
    obs = np.array([0.3], dtype=np.float32)
    assert np.array_equal(ppo.predict(obs, deterministic=True)[0], xppo.predict(obs, deterministic=True)[0])
    ppo.learn(16)
    # A (low, high) clip range: PPO loads it for prediction, training fails with a clear message
    XPPO("MlpPolicy", env, n_steps=16, batch_size=8, clip_range=(0.1, 0.3)).save(tmp_path / "pair")
    ppo = PPO.load(tmp_path / "pair", env=env, device="cpu")
    ppo.predict(obs)
    with pytest.raises(TypeError, match=r"load this checkpoint with sb3_xppo\.XPPO"):
        ppo.learn(16)


def test_schedules_pickle_and_load_with_zoo_custom_objects(tmp_path):
    rl_zoo3_utils = pytest.importorskip("rl_zoo3.utils")
    clip_range = (rl_zoo3_utils.linear_schedule(0.2), LinearSchedule(0.3, 0.1, 1.0))
    model = XPPO("MlpPolicy", "CartPole-v1", clip_range=clip_range, **TINY)
    assert model.clip_range(1.0) == (0.2, 0.3)
    assert model.clip_range(0.5) == pytest.approx((0.1, 0.2))
    model.learn(64)
    # 64 steps in rollouts of 32: the last train() runs at progress_remaining 0, where the zoo schedule is 0
    assert model.logger.name_to_value["train/clip_range_low"] == 0.0
    assert model.logger.name_to_value["train/clip_range_high"] == pytest.approx(0.1)
    model.save(tmp_path / "model")
    assert XPPO.load(tmp_path / "model").clip_range(0.5) == pytest.approx((0.1, 0.2))
    assert pickle.loads(pickle.dumps(model.clip_range))(0.25) == model.clip_range(0.25)
    # rl-zoo3's enjoy replaces the schedules by constants when it loads a model
    custom_objects = {"learning_rate": 0.0, "lr_schedule": lambda _: 0.0, "clip_range": lambda _: 0.0}
    loaded = XPPO.load(tmp_path / "model", custom_objects=custom_objects)
    obs = np.zeros(4, dtype=np.float32)
    assert np.array_equal(loaded.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])


def test_policy_aliases_and_exports():
    assert set(XPPO.policy_aliases) == {"MlpPolicy", "CnnPolicy", "MultiInputPolicy"}
    # PPO's policies with XPPO's options (RPO, SimBa, the classification critic), the same networks by default
    for name, policy_class in XPPO.policy_aliases.items():
        assert issubclass(policy_class, PPO.policy_aliases[name]) and issubclass(policy_class, XPPOPolicyMixin)
    assert sb3_xppo.XPPO is XPPO
    model = XPPO("MultiInputPolicy", SimpleMultiObsEnv(), n_steps=16, batch_size=8)
    assert isinstance(model.rollout_buffer, XPPODictRolloutBuffer)


@pytest.mark.skipif(not th.cuda.is_available(), reason="needs CUDA")
def test_cuda_train():
    model = XPPO("MlpPolicy", "Pendulum-v1", device="cuda", actor_loss="spo", value_loss="improved", clip_range_vf=0.5,
                 log_ratio_clamp=5.0, n_steps=64, batch_size=32)  # fmt: skip
    model.learn(128)
    assert model.policy.device.type == "cuda"
    assert np.isfinite(model.logger.name_to_value["train/loss"])
