"""Multi-critic that learns (issue 13): the scalarize identity, the scale floor, masked statistics for groups that
exist on some samples only, per-group logs, group rewards under VecNormalize, and the gradient-norm diagnostics."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from reference import zscore_loop
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import FakeImageEnv
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize
from test_multi_critic import GroupEnv, RolloutRecorder, VectorFromReward

from sb3_xppo import XPPO, RecurrentXPPO, calc_gae, combine_grouped_advantages
from sb3_xppo.common.buffers import rollout_gae
from sb3_xppo.common.grad_norms import grad_norm_log_values, split_parameters
from sb3_xppo.common.options import resolve_group_value_weights
from sb3_xppo.functional.advantages import group_statistics
from sb3_xppo.multi_critic import MultiCriticPolicy, MultiCriticRolloutBuffer
from sb3_xppo.multi_critic.buffers import GROUP_SCALE_FLOOR

TINY = dict(n_steps=32, batch_size=16, n_epochs=2, seed=0, policy_kwargs=dict(net_arch=[16]), device="cpu")


def rand(*shape: int, seed: int = 0) -> th.Tensor:
    return th.randn(*shape, generator=th.Generator().manual_seed(seed))


# --- "scalarize": the weighted sum of the groups' GAE is the single critic's GAE -----------------------------------


@pytest.mark.parametrize("bootstrap", [False, True])
def test_weighted_group_gae_is_the_gae_of_the_weighted_reward_and_value(bootstrap):
    # sum_g w_g GAE(r_g, V_g) = GAE(sum_g w_g r_g, sum_g w_g V_g): GAE is linear in the rewards and the values
    b, g, n = 3, 4, 11
    rewards, values = rand(b, g, n, seed=1) * th.tensor([100.0, 1.0, 0.3, 0.03])[:, None], rand(b, g, n, seed=2)
    weights = th.tensor([1.0, 1.0, 0.3, 0.03])
    masks = (rand(b, n, seed=3) > -1.0).float()
    done_masks = masks * (rand(b, n, seed=4) > -1.2).float()
    next_value = rand(b, g, seed=5) if bootstrap else None
    grouped = calc_gae(rewards, values, masks=masks, done_masks=done_masks, next_value=next_value, gamma=0.99, lam=0.95,
                       group_dim=1, return_advantages=True)  # fmt: skip
    scalar = calc_gae((weights[:, None] * rewards).sum(1), (weights[:, None] * values).sum(1), masks=masks,
                      done_masks=done_masks, next_value=None if next_value is None else next_value @ weights, gamma=0.99,
                      lam=0.95, return_advantages=True)  # fmt: skip
    combined = combine_grouped_advantages(grouped.advantages, weights=weights, normalize=False, reduce="sum", group_dim=1)
    th.testing.assert_close(combined, scalar.advantages, rtol=1e-5, atol=1e-4)
    th.testing.assert_close((weights[:, None] * grouped.returns).sum(1), scalar.returns, rtol=1e-5, atol=1e-4)


def test_scalarize_buffer_advantages_are_the_single_critic_gae_of_the_scalar_reward():
    # Through the rollout: truncations bootstrap each group from its own value, the sum of which is the scalar value
    weights = np.array([2.0, 0.5, 1.0], dtype=np.float32)
    env = DummyVecEnv([lambda: gym.wrappers.TimeLimit(GroupEnv(terminate_prob=0.1), max_episode_steps=6)] * 2)
    model = XPPO("MlpPolicy", env, reward_groups=3, group_weights=weights.tolist(), group_reduce="sum",
                 normalize_groups=False, n_steps=40, batch_size=40, gamma=0.9, gae_lambda=0.8,
                 policy_kwargs=dict(net_arch=[16]), seed=0, device="cpu")  # fmt: skip
    model.learn(80, callback=(recorder := RolloutRecorder()))
    buf = recorder.buffer
    assert np.asarray(recorder.truncated).any()
    scalar_advantages, _ = rollout_gae(
        buf["rewards"] @ weights, buf["values"] @ weights, buf["episode_starts"],
        th.as_tensor(recorder.last_values @ weights), recorder.last_dones, 0.9, 0.8,
    )  # fmt: skip
    np.testing.assert_allclose(buf["advantages"], scalar_advantages, rtol=1e-5, atol=1e-5)
    logs = model.logger.name_to_value
    # nothing rescaled: the effective weights are the weights
    for i in range(3):
        assert logs[f"train/advantage_scale/{i}"] == 1.0
        assert logs[f"train/effective_weight/{i}"] == pytest.approx(float(weights[i]))


# --- the scale floor ---------------------------------------------------------------------------------------------------


def test_scale_floor_by_hand():
    # three groups of spreads 10, 0.5 and 1e-4 (pure noise): the floor 0.01 lifts only the last one to 0.1
    adv = th.stack([th.tensor([-10.0, 10.0]), th.tensor([-0.5, 0.5]), th.tensor([-1e-4, 1e-4])])[None]  # (b=1, g=3, n=2)
    mean, scale = group_statistics(adv, eps=0.0, scale_floor=0.01)
    th.testing.assert_close(mean, th.zeros(3))
    th.testing.assert_close(scale, th.tensor([10.0, 0.5, 0.1]))
    out = combine_grouped_advantages(adv, normalize=True, eps=0.0, scale_floor=0.01, reduce="sum")
    th.testing.assert_close(out, th.tensor([[-1.0 - 1.0 - 1e-3, 1.0 + 1.0 + 1e-3]]))
    # without the floor the noise weighs as much as the others
    plain = combine_grouped_advantages(adv, normalize=True, eps=0.0, reduce="sum")
    th.testing.assert_close(plain, th.tensor([[-3.0, 3.0]]))
    # 1 divides every group by the largest scale: the raw advantages, rescaled together
    th.testing.assert_close(group_statistics(adv, eps=0.0, scale_floor=1.0)[1], th.full((3,), 10.0))
    with pytest.raises(ValueError, match=r"scale_floor must be in \[0, 1\]"):
        combine_grouped_advantages(adv, scale_floor=2.0)


def filled_buffer(rewards: np.ndarray, values: np.ndarray, **kwargs) -> MultiCriticRolloutBuffer:
    """A multi-critic buffer of ``(n_steps, n_envs, G)`` rewards and values, its GAE computed (no episode ends)."""
    n_steps, n_envs, n_groups = rewards.shape
    space = gym.spaces.Box(-1, 1, (1,))
    buffer = MultiCriticRolloutBuffer(n_steps, space, space, n_envs=n_envs, n_groups=n_groups, gamma=0.9, gae_lambda=0.8,
                                      **kwargs)  # fmt: skip
    buffer.rewards, buffer.values = rewards.astype(np.float32), values.astype(np.float32)
    buffer.compute_returns_and_advantage(th.zeros(n_envs, n_groups), np.zeros(n_envs))
    return buffer


def test_buffer_floors_a_group_without_signal():
    # a task group, a clean cost 30x smaller, and a group 1e-4 of the task's (e.g. a critic's residual noise)
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=(64, 2, 3)) * np.array([1000.0, 1000 / 30, 0.1])
    buffer = filled_buffer(rewards, np.zeros_like(rewards), group_weights=[1.0, 1.0, 1.0])
    stats, group_adv = buffer.group_stats, buffer.group_advantages.reshape(-1, 3).astype(np.float64)
    np.testing.assert_allclose(stats["std"], np.sqrt(group_adv.var(0) + 1e-5), rtol=1e-4)
    largest = stats["std"].max()
    # the noise group spreads less than the floor: its scale is GROUP_SCALE_FLOOR times the largest, not its own;
    # the clean cost keeps its own
    assert stats["std"][2] < GROUP_SCALE_FLOOR * largest < stats["std"][1]
    np.testing.assert_allclose(stats["scale"], [largest, stats["std"][1], GROUP_SCALE_FLOOR * largest], rtol=1e-6)
    np.testing.assert_allclose(stats["weight"], 1 / stats["scale"], rtol=1e-6)
    z = (group_adv - group_adv.mean(0)) / stats["scale"]
    np.testing.assert_allclose(buffer.advantages.ravel(), z.mean(1), rtol=1e-4, atol=1e-5)
    # the floor is a buffer keyword (XPPO: rollout_buffer_kwargs); 0 turns it off: the noise becomes a unit group
    off = filled_buffer(rewards, np.zeros_like(rewards), group_scale_floor=0.0)
    assert off.group_stats["scale"][2] == off.group_stats["std"][2]
    assert np.abs(off.advantages - buffer.advantages).max() > 0.1


def test_group_logs_of_a_model():
    names = ["task", "action", "cost"]
    model = XPPO("MlpPolicy", GroupEnv(), reward_groups=names, group_weights=[2.0, 1.0, 1.0], **TINY).learn(32)
    logs, stats = model.logger.name_to_value, model.rollout_buffer.group_stats
    for i, name in enumerate(names):
        assert logs[f"train/advantage_std/{name}"] == pytest.approx(stats["std"][i])
        assert logs[f"train/advantage_scale/{name}"] == pytest.approx(stats["scale"][i])
        assert logs[f"train/effective_weight/{name}"] == pytest.approx([2.0, 1.0, 1.0][i] / stats["scale"][i])


@pytest.mark.parametrize("floor, error", [(-0.1, ValueError), (1.5, ValueError), ("0.1", TypeError), (True, TypeError)])
def test_bad_scale_floor(floor, error):
    with pytest.raises(error, match="group_scale_floor must be"):
        XPPO("MlpPolicy", GroupEnv(), reward_groups=3, rollout_buffer_kwargs=dict(group_scale_floor=floor), **TINY)


# --- groups present on some samples only -------------------------------------------------------------------------------


@pytest.mark.parametrize("reduce", ["mean", "sum", "max", "min"])
def test_grouped_mask_statistics_and_combination_by_loop(reduce):
    b, g, n = 2, 3, 9
    adv = rand(b, g, n) * th.tensor([1.0, 100.0, 0.01])[:, None]
    # disjoint styles for the first two groups, the third everywhere but one sample, one sample with no group at all
    style = (rand(b, n, seed=1) > 0).long()
    mask = th.stack([style == 0, style == 1, th.ones(b, n, dtype=th.bool)], dim=1)
    mask[0, :, 0] = False
    mask[1, 2, 4] = False
    adv[~mask] = th.nan  # what an absent group holds never matters
    weights = [1.0, 2.0, 0.5]
    out = combine_grouped_advantages(adv, weights=weights, mask=mask, reduce=reduce, group_dim=1)
    flat = [adv[:, k].flatten().nan_to_num().tolist() for k in range(g)]
    flat_masks = [mask[:, k].flatten().float().tolist() for k in range(g)]
    z = [zscore_loop(flat[k], flat_masks[k]) for k in range(g)]
    expected = []
    for i in range(b * n):
        present = [k for k in range(g) if flat_masks[k][i]]
        vals = [weights[k] * z[k][i] for k in present]
        if not present:
            expected.append(0.0)
        else:
            total = sum(weights[k] for k in present)
            expected.append(dict(mean=sum(vals) / total, sum=sum(vals), max=max(vals), min=min(vals))[reduce])
    th.testing.assert_close(out.flatten(), th.tensor(expected), atol=1e-5, rtol=1e-5)


def test_mask_applies_without_normalization_too():
    adv = th.tensor([[[1.0, 2.0], [10.0, 20.0]]])  # (b=1, g=2, n=2)
    mask = th.tensor([[[True, False], [False, True]]])
    out = combine_grouped_advantages(adv, weights=[1.0, 3.0], normalize=False, mask=mask)
    # each sample takes its own group: the mean over the groups present is that group's advantage
    th.testing.assert_close(out, th.tensor([[1.0, 20.0]]))
    # a mask of the non-group dims: masked-out samples give 0
    out = combine_grouped_advantages(adv, weights=[1.0, 3.0], normalize=False, mask=th.tensor([[True, False]]))
    th.testing.assert_close(out, th.tensor([[(1.0 + 30.0) / 4, 0.0]]))


class StyleEnv(GroupEnv):
    """
    Two styles drawn per episode (obs ``u`` replaced by the style, 0 or 1); style 0 pays ``action``, style 1 pays
    ``0.01 * (1 - action)``: disjoint support, scales 100x apart, conflicting.
    """

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        self.style = int(self.np_random.integers(2))
        return self._with_style(obs), info

    def _with_style(self, obs):
        return np.array([obs[0], self.style], dtype=np.float32)

    def step(self, action):
        obs, _, terminated, truncated, info = super().step(action)
        mask = np.array([self.style == 0, self.style == 1])
        vector = np.where(mask, [float(action), 0.01 * (1.0 - float(action))], 0.0).astype(np.float32)
        info = {"vector_reward": vector, "vector_reward_mask": mask}
        return self._with_style(obs), float(vector.sum()), terminated, truncated, info


def test_buffer_masked_statistics_per_style():
    model = XPPO("MlpPolicy", StyleEnv(terminate_prob=0.2), reward_groups=["a", "b"], n_steps=128, batch_size=64,
                 n_epochs=1, seed=0, policy_kwargs=dict(net_arch=[16]), device="cpu")  # fmt: skip
    model.learn(128, callback=(recorder := RolloutRecorder()))
    buffer = model.rollout_buffer
    style = recorder.buffer["observations"][..., 1].astype(int)
    assert 0 < style.mean() < 1
    # the masks are the styles of the stored observations
    np.testing.assert_array_equal(buffer.group_masks[..., 0], style == 0)
    np.testing.assert_array_equal(buffer.group_masks[..., 1], style == 1)
    # each style z-scored over its own samples, and each sample takes its style's advantage
    group_adv = recorder.buffer["group_advantages"]
    expected = np.zeros(style.shape)
    for s in (0, 1):
        own = group_adv[..., s][style == s].astype(np.float64)
        expected[style == s] = (own - own.mean()) / np.sqrt(own.var() + 1e-5)
        assert buffer.group_stats["std"][s] == pytest.approx(np.sqrt(own.var() + 1e-5), rel=1e-4)
    np.testing.assert_allclose(recorder.buffer["advantages"], expected, rtol=1e-4, atol=1e-5)
    logs = model.logger.name_to_value
    assert logs["train/group_support/a"] == pytest.approx((style == 0).mean())
    assert logs["train/group_support/a"] + logs["train/group_support/b"] == pytest.approx(1.0)
    # without masks (support everywhere) no support is logged
    plain = XPPO("MlpPolicy", GroupEnv(), reward_groups=3, **TINY).learn(32)
    assert not any(key.startswith("train/group_support") for key in plain.logger.name_to_value)


class BadMaskEnv(StyleEnv):
    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        info["vector_reward_mask"] = np.array([1, 0, 1])
        return obs, reward, terminated, truncated, info


def test_bad_group_mask_raises_naming_env_and_key():
    env = DummyVecEnv([StyleEnv, BadMaskEnv])
    with pytest.raises(ValueError, match=r"env 1: info\['vector_reward_mask'\] must hold 2 bools"):
        XPPO("MlpPolicy", env, reward_groups=2, **TINY).learn(32)


# --- VecNormalize ------------------------------------------------------------------------------------------------------


class StepRewards(BaseCallback):
    """Each step's group rewards as the buffer receives them, and VecNormalize's normalized scalar reward."""

    def _on_rollout_start(self) -> None:
        self.groups, self.scalar = [], []

    def _on_step(self) -> bool:
        # callbacks see SB3's scalar numpy rewards, and the group rewards under their own name
        assert self.locals["rewards"].shape == (self.model.n_envs,)
        self.groups.append(self.locals["group_rewards"].copy())
        vec_normalize = self.model.get_vec_normalize_env()
        self.scalar.append(vec_normalize.normalize_reward(vec_normalize.get_original_reward()))
        return True


@pytest.mark.parametrize("norm_reward", [True, False])
def test_group_rewards_follow_vec_normalize(norm_reward):
    # GroupEnv's scalar reward is the sum of its three terms: with weights [1, 1, 1] the groups reproduce it
    env = VecNormalize(make_vec_env(GroupEnv, n_envs=2, seed=0), norm_obs=False, norm_reward=norm_reward, gamma=0.9)
    model = XPPO("MlpPolicy", env, reward_groups=3, gamma=0.9, **TINY)
    model.learn(64, callback=(steps := StepRewards()))
    groups, scalar = np.asarray(steps.groups), np.asarray(steps.scalar)
    raw = np.asarray(steps.groups) * (np.sqrt(env.ret_rms.var + env.epsilon) if norm_reward else 1.0)
    if norm_reward:
        assert env.ret_rms.var != 1.0 and np.abs(groups.sum(-1)).max() < np.abs(raw.sum(-1)).max() / 2
    # the groups sum to the scalar reward a single critic would learn from (normalized or not)
    np.testing.assert_allclose(groups.sum(-1), scalar, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.rollout_buffer.rewards.reshape(-1, 2, 3), groups[-32:], rtol=1e-6)


# --- gradient norms of the actor and the critics --------------------------------------------------------------------


def test_split_parameters_by_part():
    env = GroupEnv()
    shared = MultiCriticPolicy(env.observation_space, env.action_space, lambda _: 1e-3, n_groups=3, net_arch=[8])
    separate = MultiCriticPolicy(env.observation_space, env.action_space, lambda _: 1e-3, n_groups=3, net_arch=[8],
                                 separate_critics=True)  # fmt: skip
    for policy in (shared, separate):
        parts = split_parameters(policy)
        assert set(parts) == {"actor", "critic"}
        named = {id(p): name for name, p in policy.named_parameters()}
        assert all(named[id(p)].startswith(("value_net.", "mlp_extractor.value_net.")) for p in parts["critic"])
        assert sum(len(v) for v in parts.values()) == len(list(policy.parameters()))
    image = XPPO(
        "CnnPolicy", FakeImageEnv(screen_height=36, screen_width=36, n_channels=1, discrete=True), n_steps=16, batch_size=16
    )
    parts = split_parameters(image.policy)
    assert {"actor", "critic", "shared"} == set(parts)  # the CNN features extractor serves both
    unshared = XPPO("CnnPolicy", FakeImageEnv(screen_height=36, screen_width=36, n_channels=1, discrete=True),
                    n_steps=16, batch_size=16, policy_kwargs=dict(share_features_extractor=False))  # fmt: skip
    assert set(split_parameters(unshared.policy)) == {"actor", "critic"}


def test_grad_norm_logs_against_the_gradients_clip_grad_norm_sees(monkeypatch):
    seen = []
    real_clip = th.nn.utils.clip_grad_norm_

    def spy(parameters, max_norm, *args, **kwargs):
        parameters = list(parameters)
        parts = split_parameters(model.policy)
        seen.append({name: th.linalg.vector_norm(th.cat([p.grad.flatten() for p in ps])).item() for name, ps in parts.items()})
        return real_clip(parameters, max_norm, *args, **kwargs)

    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0, wrapper_class=VectorFromReward)
    model = XPPO("MlpPolicy", env, reward_groups=1, max_grad_norm=0.5, **TINY)
    monkeypatch.setattr(th.nn.utils, "clip_grad_norm_", spy)
    model.learn(32)
    logs = model.logger.name_to_value
    assert len(seen) == 4  # 2 epochs of 2 minibatches
    assert logs["train/grad_norm_actor"] == pytest.approx(np.mean([s["actor"] for s in seen]), rel=1e-4)
    assert logs["train/grad_norm_critic"] == pytest.approx(np.mean([s["critic"] for s in seen]), rel=1e-4)
    totals = [np.hypot(s["actor"], s["critic"]) for s in seen]
    assert logs["train/grad_clip_coef"] == pytest.approx(np.mean([min(1, 0.5 / (t + 1e-6)) for t in totals]), rel=1e-4)
    # the coefficient with the critics is never above the actor's own
    assert logs["train/grad_clip_coef"] <= logs["train/grad_clip_coef_actor_alone"]


@pytest.mark.parametrize("per_part", [None, False])
def test_actor_and_critics_clipped_apart_with_two_groups_or_more(per_part):
    model = XPPO("MlpPolicy", GroupEnv(), reward_groups=3, max_grad_norm=0.05, **TINY)
    model.clip_grad_per_part = per_part
    parts = split_parameters(model.policy)
    before, after = [], []
    real_clip, real_step = th.nn.utils.clip_grad_norm_, model.policy.optimizer.step

    def norms() -> dict[str, float]:
        return {name: th.linalg.vector_norm(th.cat([p.grad.flatten() for p in ps])).item() for name, ps in parts.items()}

    def spy_clip(parameters, max_norm, *args, **kwargs):
        if not before or len(before) == len(after):  # the first clip of this minibatch
            before.append(norms())
        return real_clip(parameters, max_norm, *args, **kwargs)

    def spy_step(*args, **kwargs):
        after.append(norms())
        return real_step(*args, **kwargs)

    model.policy.optimizer.step = spy_step
    th.nn.utils.clip_grad_norm_ = spy_clip
    try:
        model.learn(32)
    finally:
        th.nn.utils.clip_grad_norm_ = real_clip
    assert len(before) == len(after) == 4
    for pre, post in zip(before, after, strict=True):
        joint = np.hypot(pre["actor"], pre["critic"])
        assert pre["critic"] > 0.05 and pre["actor"] < pre["critic"]
        if per_part is None:  # the default for 3 groups: each part on its own
            assert post["actor"] == pytest.approx(min(pre["actor"], 0.05), rel=1e-4)
            assert post["critic"] == pytest.approx(0.05, rel=1e-4)
        else:  # one joint norm: the critics' gradient shrinks the actor's
            assert post["actor"] == pytest.approx(pre["actor"] * 0.05 / joint, rel=1e-4)
    assert model.logger.name_to_value["train/grad_clip_coef"] < model.logger.name_to_value["train/grad_clip_coef_actor_alone"]


def test_grad_norms_logged_for_multi_critic_only_unless_asked():
    single = XPPO("MlpPolicy", "CartPole-v1", **TINY).learn(32)
    assert "train/grad_norm_actor" not in single.logger.name_to_value
    single.log_grad_norms = True
    single.learn(32)
    assert single.logger.name_to_value["train/grad_norm_actor"] > 0
    multi = XPPO("MlpPolicy", GroupEnv(), reward_groups=3, **TINY)
    multi.log_grad_norms = False
    multi.learn(32)
    assert "train/grad_norm_actor" not in multi.logger.name_to_value


def test_grad_norm_log_values_by_hand():
    values = grad_norm_log_values(["actor", "critic"], th.tensor([[0.3, 0.4], [3.0, 4.0]]), th.tensor([0.5, 5.0]), 1.0)
    assert values["train/grad_norm_actor"] == pytest.approx(1.65)
    assert values["train/grad_clip_coef"] == pytest.approx((1.0 + 1.0 / (5.0 + 1e-6)) / 2)
    assert values["train/grad_clip_coef_actor_alone"] == pytest.approx((1.0 + 1.0 / (3.0 + 1e-6)) / 2)


# --- the weights of the groups' value losses (group_value_weights) ---------------------------------------------------


def test_group_value_weights_resolved_by_hand():
    # None (the plain sum) where every weight is 1
    assert resolve_group_value_weights("equal", [1.0, 2.0], 2, scalarize=True) is None
    assert resolve_group_value_weights("squared", [1.0, 2.0, 0.5], 3, scalarize=False) == [1.0, 4.0, 0.25]
    assert resolve_group_value_weights("squared", None, 2, scalarize=True) is None
    assert resolve_group_value_weights("squared", [1.0, -1.0], 2, scalarize=True) is None
    assert resolve_group_value_weights((0.5, 0), None, 2, scalarize=False) == [0.5, 0.0]
    # the mode's default: the scalar reward's units in "scalarize", equal otherwise
    assert resolve_group_value_weights(None, [1.0, 0.3], 2, scalarize=True) == pytest.approx([1.0, 0.09])
    assert resolve_group_value_weights(None, [1.0, 0.3], 2, scalarize=False) is None


NAN = float("nan")


@pytest.mark.parametrize("spec", ["sqaured", [1.0], [1, -1, 1], [1, NAN, 1], [0, 0, 0], [[1, 2, 3]], ["a", "b", "c"]])
def test_bad_group_value_weights(spec):
    match = r"group_value_weights must be None, one of \('equal', 'squared'\) or"
    with pytest.raises(ValueError, match=match):
        resolve_group_value_weights(spec, None, 3, scalarize=True)
    # refused by the constructor, before anything is built
    with pytest.raises(ValueError, match=match):
        XPPO("MlpPolicy", GroupEnv(), reward_groups=3, group_value_weights=spec, **TINY)
    # and, set on a model afterwards (unchecked), by train() before any update
    model = XPPO("MlpPolicy", GroupEnv(), reward_groups=3, **TINY)
    model.options = dataclasses.replace(model.options, group_value_weights=spec)
    before = [p.detach().clone() for p in model.policy.parameters()]
    with pytest.raises(ValueError, match=match):
        model.learn(32)
    assert all(th.equal(p, q) for p, q in zip(before, model.policy.parameters(), strict=True))


def test_group_value_weights_need_reward_groups():
    with pytest.raises(ValueError, match="group_value_weights needs reward_groups"):
        XPPO("MlpPolicy", "CartPole-v1", group_value_weights="squared", **TINY)
    with pytest.raises(ValueError, match="group_value_weights needs reward_groups"):
        RecurrentXPPO("MlpLstmPolicy", "CartPole-v1", group_value_weights="equal", **TINY)


def test_group_value_weights_weigh_the_logged_value_losses():
    weights = [1.0, 0.3, 0.03]
    model = XPPO("MlpPolicy", GroupEnv(), reward_groups=3, group_weights=weights, normalize_groups=False,
                 group_value_weights="squared", **TINY)  # fmt: skip
    model.learn(32)
    logs = model.logger.name_to_value
    expected = sum(w**2 * logs[f"train/value_loss/{g}"] for g, w in enumerate(weights))
    assert logs["train/value_loss"] == pytest.approx(expected, rel=1e-5)
    # the plain sum without them
    model.options = dataclasses.replace(model.options, group_value_weights="equal")
    model.learn(32)
    logs = model.logger.name_to_value
    assert logs["train/value_loss"] == pytest.approx(sum(logs[f"train/value_loss/{g}"] for g in range(3)), rel=1e-5)


@pytest.mark.parametrize(
    "options, squared",
    [
        (dict(normalize_groups=False), True),
        (dict(normalize_groups=False, normalize_values=True), False),
        (dict(normalize_groups=True), False),
    ],
)
def test_group_value_weights_default_follows_the_mode(options, squared):
    weights = [1.0, 0.3, 0.03]
    model = XPPO("MlpPolicy", GroupEnv(), reward_groups=3, group_weights=weights, **options, **TINY).learn(32)
    logs = model.logger.name_to_value
    coefs = [w**2 for w in weights] if squared else [1.0] * 3
    expected = sum(c * logs[f"train/value_loss/{g}"] for g, c in enumerate(coefs))
    assert logs["train/value_loss"] == pytest.approx(expected, rel=1e-5)


def test_a_group_of_value_weight_zero_leaves_its_head_untouched():
    model = XPPO("MlpPolicy", GroupEnv(), reward_groups=3, group_value_weights=(1, 0, 0), **TINY)
    assert model.options.group_value_weights == [1.0, 0.0, 0.0]
    head = model.policy.value_net
    weight, bias = head.weight.detach().clone(), head.bias.detach().clone()
    model.learn(64)
    assert not th.equal(head.weight[0], weight[0])
    th.testing.assert_close(head.weight[1:], weight[1:], rtol=0, atol=0)
    th.testing.assert_close(head.bias[1:], bias[1:], rtol=0, atol=0)


def test_group_value_weights_saved_with_the_model(tmp_path):
    model = XPPO("MlpPolicy", GroupEnv(), reward_groups=3, group_value_weights="squared", **TINY)
    model.save(tmp_path / "model.zip")
    assert XPPO.load(tmp_path / "model.zip", env=GroupEnv()).options.group_value_weights == "squared"
