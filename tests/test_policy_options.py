"""XPPO's policy options, each against a hand-computed case and a plain reference: the classification critic
(``value_loss='hl_gauss'``, Farebrother et al. 2024), RPO (``policy_kwargs=dict(rpo_alpha=a)``, Rahman & Xue 2022),
SimBa networks (``policy_kwargs=dict(simba=...)``, Lee et al. 2024); alone and together, with value normalization,
multi-critic, MaskableXPPO and RecurrentXPPO, saved and loaded."""

from __future__ import annotations

import copy
import math
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from helpers import params_equal
from sb3_contrib.common.envs import InvalidActionEnvDiscrete
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.vec_env import VecNormalize
from torch import nn

from sb3_xppo import XPPO, MaskableXPPO, RecurrentXPPO
from sb3_xppo.common.policies import ReLU2, ResidualBlock, XPPOActorCriticPolicy
from sb3_xppo.common.value_heads import HLGaussConfig, HLGaussValueHead
from sb3_xppo.common.value_norm import ValueNormalizer
from sb3_xppo.core import MinibatchLosses
from sb3_xppo.functional import hl_gauss_probs, hl_gauss_value, hl_gauss_value_loss_fn

TINY = dict(n_steps=32, batch_size=16, n_epochs=2, seed=0, device="cpu")
NET = dict(net_arch=[16, 16])


# --- the HL-Gauss formulas -----------------------------------------------------------------------------------------


def normal_cdf(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def reference_probs(y: float, v_min: float, v_max: float, n_bins: int, sigma_ratio: float) -> list[float]:
    """HL-Gauss targets, a plain loop over the bins (Farebrother et al. 2024, section 3.1)."""
    width = (v_max - v_min) / n_bins
    sigma = sigma_ratio * width
    y = min(max(y, v_min), v_max)
    edges = [v_min + k * width for k in range(n_bins + 1)]
    total = normal_cdf((v_max - y) / sigma) - normal_cdf((v_min - y) / sigma)
    return [(normal_cdf((edges[k + 1] - y) / sigma) - normal_cdf((edges[k] - y) / sigma)) / total for k in range(n_bins)]


def test_hl_gauss_probs_hand_computed():
    # support [0, 2], two bins of width 1, sigma = 1, target 0.5: Phi(-0.5), Phi(0.5), Phi(1.5)
    phi = [0.3085375387, 0.6914624613, 0.9331927987]
    expected = [(phi[1] - phi[0]) / (phi[2] - phi[0]), (phi[2] - phi[1]) / (phi[2] - phi[0])]
    probs = hl_gauss_probs(th.tensor([0.5], dtype=th.float64), 0.0, 2.0, 2, sigma_ratio=1.0)
    th.testing.assert_close(probs[0], th.tensor(expected, dtype=th.float64))
    assert expected[0] == pytest.approx(0.613018, abs=1e-6)


def test_hl_gauss_probs_against_a_plain_loop():
    generator = th.Generator().manual_seed(0)
    targets = th.empty(3, 4, dtype=th.float64).uniform_(-7, 7, generator=generator)  # some beyond the support
    probs = hl_gauss_probs(targets, -5.0, 5.0, 11, sigma_ratio=0.75)
    assert probs.shape == (3, 4, 11)
    for index in np.ndindex(3, 4):
        expected = reference_probs(targets[index].item(), -5.0, 5.0, 11, 0.75)
        th.testing.assert_close(probs[index], th.tensor(expected, dtype=th.float64))
    th.testing.assert_close(probs.sum(-1), th.ones(3, 4, dtype=th.float64))


def test_hl_gauss_value_is_the_expected_bin_center():
    # two bins of [0, 2]: centers 0.5 and 1.5
    assert hl_gauss_value(th.zeros(2), 0.0, 2.0).item() == pytest.approx(1.0)
    logits = th.log(th.tensor([0.25, 0.75]))
    assert hl_gauss_value(logits, 0.0, 2.0).item() == pytest.approx(0.25 * 0.5 + 0.75 * 1.5)
    # the encoding of an interior target decodes to it (the Gaussian is symmetric away from the ends)
    targets = th.tensor([-2.0, 0.3, 1.7], dtype=th.float64)
    decoded = hl_gauss_value(th.log(hl_gauss_probs(targets, -10.0, 10.0, 101)), -10.0, 10.0)
    th.testing.assert_close(decoded, targets, atol=1e-6, rtol=0)


def test_hl_gauss_loss_is_the_cross_entropy_and_clips_in_scalar_space():
    logits = th.tensor([[0.2, -0.1, 0.5], [1.0, 0.0, -1.0]], dtype=th.float64)
    returns = th.tensor([0.4, 2.5], dtype=th.float64)
    loss = hl_gauss_value_loss_fn(logits, returns, 0.0, 3.0, sigma_ratio=0.75, reduction="none")
    for i in range(2):
        target = reference_probs(returns[i].item(), 0.0, 3.0, 3, 0.75)
        log_softmax = [x - math.log(sum(math.exp(z) for z in logits[i].tolist())) for x in logits[i].tolist()]
        assert loss[i].item() == pytest.approx(-sum(p * q for p, q in zip(target, log_softmax, strict=True)))
    assert hl_gauss_value_loss_fn(logits, returns, 0.0, 3.0).item() == pytest.approx(loss.mean().item())
    # clipping moves the target, not the prediction: R = 2.5 around old 1.0 with clip 0.5 is the target 1.5
    old = th.tensor([0.3, 1.0], dtype=th.float64)
    clipped = hl_gauss_value_loss_fn(logits, returns, 0.0, 3.0, old_values=old, clip=0.5, reduction="none")
    unclipped_at = hl_gauss_value_loss_fn(logits, th.tensor([0.4, 1.5], dtype=th.float64), 0.0, 3.0, reduction="none")
    th.testing.assert_close(clipped, unclipped_at)


def test_hl_gauss_bad_support_is_a_value_error():
    with pytest.raises(ValueError, match="v_min < v_max"):
        hl_gauss_probs(th.zeros(2), 1.0, 1.0, 5)
    with pytest.raises(ValueError, match="n_bins"):
        HLGaussConfig(n_bins=1)
    with pytest.raises(ValueError, match="unknown hl_gauss option"):
        HLGaussConfig.from_kwargs(dict(bins=5))
    with pytest.raises(ValueError, match="bins dim"):
        hl_gauss_value_loss_fn(th.zeros(4, 1), th.zeros(4), 0.0, 1.0)


def test_value_head_consumes_its_logits():
    head = HLGaussValueHead(nn.Linear(4, 2 * 5), 2, HLGaussConfig(n_bins=5, v_min=-1.0, v_max=1.0))
    with pytest.raises(RuntimeError, match="forward pass in training mode"):
        head.loss(th.zeros(3, 2))
    values = head(th.randn(3, 4))
    assert values.shape == (3, 2)
    copy.deepcopy(head)  # a graph held between the forward pass and the loss is not copied
    loss = head.loss(th.zeros(3, 2))
    assert loss.shape == (3, 2) and head._last_logits is None
    head.eval()
    head(th.randn(3, 4))
    assert head._last_logits is None  # collection keeps nothing


# --- XPPO with value_loss='hl_gauss' --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "extra",
    [
        dict(normalize_values=True),
        dict(normalize_values=True, clip_range_vf=0.5),
        dict(normalize_values=True, reward_groups=2, policy_kwargs=dict(separate_critics=True, **NET)),
        dict(normalize_values=True, reward_groups=2),
        dict(policy_kwargs=dict(hl_gauss=dict(v_min=-200.0, v_max=0.0, n_bins=21), **NET)),
    ],
    ids=["vn", "vn-clip", "groups-separate", "groups-shared", "support"],
)
def test_hl_gauss_trains_saves_and_loads(extra, tmp_path):
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    if "reward_groups" in extra:
        env = make_vec_env(GroupedPendulum, n_envs=2, seed=0)
    kwargs = {**TINY, "policy_kwargs": NET, **extra}
    model = XPPO("MlpPolicy", env, value_loss="hl_gauss", **kwargs)
    head = model.policy.value_net.head if model.options.normalize_values else model.policy.value_net
    assert isinstance(head, HLGaussValueHead)
    groups = 2 if "reward_groups" in extra else 1
    obs = th.as_tensor(env.observation_space.sample()[None])
    assert model.policy.predict_values(obs).shape == (1, groups)
    before = copy.deepcopy(model.policy.state_dict())
    model.learn(128)
    assert not all(th.equal(before[k], v) for k, v in model.policy.state_dict().items())
    assert np.isfinite(model.logger.name_to_value["train/value_loss"])
    model.save(tmp_path / "model")
    loaded = XPPO.load(tmp_path / "model", env=env)
    assert params_equal(model.policy, loaded.policy)
    th.testing.assert_close(loaded.policy.predict_values(obs), model.policy.predict_values(obs))
    loaded.learn(64)  # trains on after loading


class GroupedPendulum(gym.Wrapper):
    """Pendulum-v1 with its reward split into two groups (its cost halves), in ``info['vector_reward']``."""

    def __init__(self) -> None:
        super().__init__(gym.make("Pendulum-v1"))

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        info["vector_reward"] = np.array([reward / 2, reward / 2], dtype=np.float32)
        return obs, reward, terminated, truncated, info


def test_hl_gauss_value_loss_is_the_heads_cross_entropy():
    """The logged value loss is the cross-entropy of the minibatch's logits against its encoded normalized returns."""
    model = XPPO("MlpPolicy", "Pendulum-v1", value_loss="hl_gauss", normalize_values=True, **TINY, policy_kwargs=NET)
    model.learn(32)
    data = next(model.rollout_buffer.get(16))
    model.policy.set_training_mode(True)
    values, _, _ = model.policy.evaluate_actions(data.observations, data.actions)
    loss = MinibatchLosses(model.options, model.policy, 0.2, 0.2, None).value(values.flatten(), data.old_values, data.returns)
    normalizer = model.policy.value_net
    features = model.policy.mlp_extractor.forward_critic(model.policy.extract_features(data.observations))
    logits = normalizer.head.logits(features)[:, 0]
    targets = hl_gauss_probs(normalizer.normalize(data.returns), -10.0, 10.0, 101)
    expected = -(targets * th.log_softmax(logits, -1)).sum(-1).mean()
    th.testing.assert_close(loss, expected)


def test_hl_gauss_under_value_normalization_keeps_the_support_fixed():
    normalizer_model = XPPO("MlpPolicy", "Pendulum-v1", value_loss="hl_gauss", normalize_values=True, **TINY)
    normalizer = normalizer_model.policy.value_net
    assert isinstance(normalizer, ValueNormalizer) and not normalizer.preserve_outputs
    weight_before = normalizer.head.logits_net.weight.clone()
    normalizer.update(th.randn(64, 1) * 50 - 100)
    assert th.equal(normalizer.head.logits_net.weight, weight_before)  # the bins are not rescaled
    assert normalizer.mean.item() == pytest.approx(-100, abs=20)


def test_hl_gauss_options_are_checked():
    with pytest.raises(ValueError, match=r"policy_kwargs\['hl_gauss'\]"):
        XPPO("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(hl_gauss={}))
    with pytest.raises(ValueError, match="needs one of XPPO's policies"):
        XPPO(ActorCriticPolicy, "Pendulum-v1", value_loss="hl_gauss", normalize_values=True)
    with pytest.raises(ValueError, match="unknown hl_gauss option"):
        XPPO("MlpPolicy", "Pendulum-v1", value_loss="hl_gauss", policy_kwargs=dict(hl_gauss=dict(vmin=0)))
    with pytest.warns(UserWarning, match="default support"):
        XPPO("MlpPolicy", "Pendulum-v1", value_loss="hl_gauss")
    # under a reward-normalizing VecNormalize the default support fits: no warning
    env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=1))
    with warnings.catch_warnings():
        warnings.filterwarnings("error", "value_loss='hl_gauss' without")
        XPPO("MlpPolicy", env, value_loss="hl_gauss")


# --- RPO -----------------------------------------------------------------------------------------------------------


def test_rpo_noise_is_uniform_on_the_mean_in_the_update_pass_only():
    th.manual_seed(0)
    env = gym.make("Pendulum-v1")
    policy = XPPOActorCriticPolicy(env.observation_space, env.action_space, lambda _: 3e-4, rpo_alpha=0.5, **NET)
    plain = XPPOActorCriticPolicy(env.observation_space, env.action_space, lambda _: 3e-4, **NET)
    plain.load_state_dict(policy.state_dict())
    obs = th.as_tensor(np.stack([env.observation_space.sample() for _ in range(256)]))
    actions = th.zeros(256, 1)
    # collection and predict() (eval mode): the policy without RPO
    policy.set_training_mode(False)
    plain.set_training_mode(False)
    th.testing.assert_close(policy.evaluate_actions(obs, actions)[1], plain.evaluate_actions(obs, actions)[1])
    # the update pass: log N(a; mu + u, sigma) with u ~ U(-0.5, 0.5), drawn from the same generator state
    policy.set_training_mode(True)
    state = th.get_rng_state()
    _, log_prob, entropy = policy.evaluate_actions(obs, actions)
    th.set_rng_state(state)
    mean = plain.action_net(plain.mlp_extractor.forward_actor(obs))
    noise = th.empty_like(mean).uniform_(-0.5, 0.5)
    std = plain.log_std.exp()
    expected = th.distributions.Normal(mean + noise, std).log_prob(actions).sum(-1)
    th.testing.assert_close(log_prob, expected)
    assert noise.abs().max() <= 0.5 and noise.std() > 0.2  # uniform on (-0.5, 0.5): std 0.29
    # the Gaussian's entropy does not depend on its mean
    th.testing.assert_close(entropy, plain.evaluate_actions(obs, actions)[2])


def test_rpo_leaves_rollouts_unchanged_and_changes_the_update():
    # (each model built and trained in turn: seed=0 seeds torch's global generator, which collection draws from)
    plain, rpo = (
        XPPO("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(rpo_alpha=alpha, **NET), **TINY).learn(32) for alpha in (0.0, 0.5)
    )
    np.testing.assert_array_equal(plain.rollout_buffer.actions, rpo.rollout_buffer.actions)
    np.testing.assert_array_equal(plain.rollout_buffer.observations, rpo.rollout_buffer.observations)
    assert not params_equal(plain.policy, rpo.policy)


def test_rpo_at_zero_is_ppo():
    """rpo_alpha=0 is off: XPPO's policy is PPO's, bit for bit."""
    xppo = XPPO("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(rpo_alpha=0.0, **NET), **TINY).learn(64)
    ppo = PPO("MlpPolicy", "Pendulum-v1", policy_kwargs=NET, **TINY).learn(64)
    assert params_equal(xppo.policy, ppo.policy)


def test_rpo_needs_a_gaussian_policy():
    with pytest.raises(ValueError, match="needs a Box action space"):
        XPPO("MlpPolicy", "CartPole-v1", policy_kwargs=dict(rpo_alpha=0.5))
    with pytest.raises(ValueError, match="rpo_alpha must be a float >= 0"):
        XPPO("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(rpo_alpha=-0.1))


# --- SimBa ---------------------------------------------------------------------------------------------------------


def test_residual_block_hand_computed():
    th.manual_seed(0)
    block = ResidualBlock(4)
    x = th.randn(3, 4)
    normed = (x - x.mean(-1, keepdim=True)) / th.sqrt(x.var(-1, unbiased=False, keepdim=True) + 1e-5)
    first, _, second = block.inner
    expected = x + second(th.relu(first(normed)))
    th.testing.assert_close(block(x), expected)
    assert th.equal(ReLU2()(th.tensor([-2.0, 3.0])), th.tensor([0.0, 9.0]))


@pytest.mark.parametrize("simba, simba_nets", [("actor", ("pi",)), ("critic", ("vf",)), (True, ("pi", "vf"))])
def test_simba_networks(simba, simba_nets):
    model = XPPO("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(simba=simba, net_arch=[32, 32]), **TINY)
    extractor = model.policy.mlp_extractor
    for name, net in (("pi", extractor.policy_net), ("vf", extractor.value_net)):
        is_simba = any(isinstance(m, ResidualBlock) for m in net.modules())
        assert is_simba == (name in simba_nets)
        if is_simba:
            assert sum(isinstance(m, ResidualBlock) for m in net) == 2 and isinstance(net[-1], nn.LayerNorm)
    assert extractor.latent_dim_pi == extractor.latent_dim_vf == 32
    model.learn(64)
    assert model.policy.predict_values(th.zeros(1, 3)).shape == (1, 1)


def test_simba_options_are_checked():
    with pytest.raises(ValueError, match="one width"):
        XPPO("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(simba=True, net_arch=[64, 32]))
    with pytest.raises(ValueError, match="simba must be"):
        XPPO("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(simba="value"))
    with pytest.raises(ValueError, match="simba_activation"):
        XPPO("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(simba=True, simba_activation="gelu"))
    with pytest.raises(ValueError, match="separate_critics"):
        XPPO(
            "MlpPolicy",
            make_vec_env(GroupedPendulum, n_envs=1),
            reward_groups=2,
            policy_kwargs=dict(simba="critic", separate_critics=True),
        )


# --- together, and in the contrib algorithms -----------------------------------------------------------------------

ALL = dict(rpo_alpha=0.5, simba=True, simba_activation="relu2", net_arch=[16, 16])


def test_all_options_together_save_and_load(tmp_path):
    model = XPPO("MlpPolicy", "Pendulum-v1", value_loss="hl_gauss", normalize_values=True, policy_kwargs=ALL, **TINY)
    model.learn(96)
    model.save(tmp_path / "model")
    loaded = XPPO.load(tmp_path / "model")
    assert loaded.policy.rpo_alpha == 0.5 and loaded.policy.simba == "both" and loaded.policy.hl_gauss is not None
    assert params_equal(model.policy, loaded.policy)
    obs = np.zeros((1, 3), dtype=np.float32)
    assert model.predict(obs, deterministic=True)[0] == loaded.predict(obs, deterministic=True)[0]
    # the policy alone (SB3's policy save) round-trips with its options (normalize_values is the algorithm's)
    policy = XPPO("MlpPolicy", "Pendulum-v1", value_loss="hl_gauss", policy_kwargs=ALL, **TINY).policy
    policy.save(tmp_path / "policy")
    assert params_equal(policy, XPPOActorCriticPolicy.load(tmp_path / "policy"))


def test_recurrent_xppo_takes_the_options():
    model = RecurrentXPPO(
        "MlpLstmPolicy",
        "Pendulum-v1",
        value_loss="hl_gauss",
        normalize_values=True,
        policy_kwargs=dict(rpo_alpha=0.5, simba="actor", net_arch=[16], lstm_hidden_size=8),
        **TINY,
    )
    assert any(isinstance(m, ResidualBlock) for m in model.policy.mlp_extractor.policy_net.modules())
    model.learn(64)
    assert np.isfinite(model.logger.name_to_value["train/value_loss"])


def test_maskable_xppo_takes_the_classification_critic():
    env = InvalidActionEnvDiscrete(dim=20, n_invalid_actions=10)
    model = MaskableXPPO(
        "MlpPolicy", env, value_loss="hl_gauss", normalize_values=True, policy_kwargs=dict(simba=True, **NET), **TINY
    )
    model.learn(64)
    assert isinstance(model.policy.value_net.head, HLGaussValueHead)
    with pytest.raises(ValueError, match="needs a Box action space"):
        MaskableXPPO("MlpPolicy", env, policy_kwargs=dict(rpo_alpha=0.5))


@pytest.mark.skipif(not th.cuda.is_available(), reason="needs CUDA")
def test_options_on_cuda():
    model = XPPO(
        "MlpPolicy",
        "Pendulum-v1",
        value_loss="hl_gauss",
        normalize_values=True,
        policy_kwargs=ALL,
        **{**TINY, "device": "cuda"},
    )
    model.learn(64)
    assert all(p.device.type == "cuda" for p in model.policy.parameters())


@pytest.mark.slow
def test_hl_gauss_learns_cartpole():
    """The classification critic with value normalization learns CartPole in 10 of PPO's default rollouts."""
    model = XPPO("MlpPolicy", "CartPole-v1", value_loss="hl_gauss", normalize_values=True, seed=0, device="cpu")
    model.learn(20_480)
    mean, _ = evaluate_policy(model, model.get_env(), n_eval_episodes=10)
    assert mean >= 300
