"""normalize_values (PopArt): statistics against a plain computation, outputs preserved when they move, losses in
normalized units, per reward group, saved and loaded, and off by default."""

from __future__ import annotations

import numpy as np
import pytest
import torch as th
from sb3_contrib.common.envs import InvalidActionEnvDiscrete
from stable_baselines3.common.env_util import make_vec_env
from test_multi_critic import GroupEnv
from torch import nn

from sb3_xppo import XPPO, MaskableXPPO, RecurrentXPPO
from sb3_xppo.common.value_norm import ValueNormalizer
from sb3_xppo.multi_critic import SeparateCritics

TINY = dict(n_steps=32, batch_size=16, n_epochs=2, seed=0, policy_kwargs=dict(net_arch=[16]), device="cpu")


def heads() -> dict[str, nn.Module]:
    th.manual_seed(0)
    return {"linear": nn.Linear(5, 3), "separate": SeparateCritics(5, [4], 3)}


@pytest.mark.parametrize("kind", ["linear", "separate"])
def test_statistics_and_preserved_outputs(kind):
    normalizer = ValueNormalizer(heads()[kind], 3)
    latent = th.randn(10, 5)
    seen = []
    for scale, shift in [(100.0, -50.0), (1.0, 3.0), (0.01, 1000.0)]:
        returns = th.randn(64, 3) * th.tensor([scale, 1.0, 10.0]) + shift
        seen.append(returns)
        before = normalizer(latent)
        normalizer.update(returns)
        # PopArt's preserved outputs: the values in return units are the same, to float tolerance
        th.testing.assert_close(normalizer(latent), before, rtol=1e-5, atol=1e-3)
        # The running statistics are those of everything seen so far (a plain population mean and variance)
        everything = th.cat(seen).double()
        th.testing.assert_close(normalizer.mean.double(), everything.mean(0), rtol=1e-5, atol=1e-4)
        th.testing.assert_close(normalizer.var.double(), everything.var(0, unbiased=False), rtol=1e-4, atol=1e-4)
    # and the head predicts normalized values
    th.testing.assert_close(normalizer.head(latent), normalizer.normalize(normalizer(latent)), rtol=1e-4, atol=1e-4)


def test_hand_computed_rescaling():
    head = nn.Linear(1, 1)
    with th.no_grad():
        head.weight.fill_(2.0)
        head.bias.fill_(1.0)
    normalizer = ValueNormalizer(head, 1)
    normalizer.update(th.tensor([[4.0], [8.0]]))  # mean 6, var 4 (std 2): the first update replaces the prior
    assert normalizer.mean.item() == pytest.approx(6.0) and normalizer.std.item() == pytest.approx(2.0)
    # the value at x = 1 was 2 * 1 + 1 = 3; now head(1) = (3 - 6) / 2 = -1.5: weight 1, bias -2.5
    assert head.weight.item() == pytest.approx(1.0) and head.bias.item() == pytest.approx(-2.5)
    assert normalizer(th.ones(1, 1)).item() == pytest.approx(3.0)


def test_value_loss_in_normalized_units():
    model = XPPO("MlpPolicy", "Pendulum-v1", normalize_values=True, **TINY)
    seen = []

    def record(model, data, loss):
        values = model.policy.predict_values(data.observations).flatten()
        norm = model.policy.value_net
        seen.append((th.nn.functional.mse_loss(norm.normalize(values), norm.normalize(data.returns)).item(), loss.item()))
        return loss

    model.register_loss_hook(record)
    model.learn(32)
    # with vf_coef 0.5 and the policy loss and entropy, the loss holds 0.5 * the normalized MSE; with raw Pendulum
    # returns (hundreds) the raw MSE would be thousands
    raw = th.nn.functional.mse_loss(
        th.as_tensor(model.rollout_buffer.values.flatten()), th.as_tensor(model.rollout_buffer.returns.flatten())
    ).item()
    assert raw > 100
    assert model.logger.name_to_value["train/value_loss"] < 10
    assert seen[0][0] == pytest.approx(model.logger.name_to_value["train/value_loss"], rel=0.5)


def test_off_by_default_and_on_the_policy():
    assert isinstance(XPPO("MlpPolicy", "CartPole-v1", **TINY).policy.value_net, nn.Linear)
    model = XPPO("MlpPolicy", "CartPole-v1", normalize_values=True, **TINY)
    assert isinstance(model.policy.value_net, ValueNormalizer)
    # the optimizer still holds the head's parameters
    optimized = {id(p) for group in model.policy.optimizer.param_groups for p in group["params"]}
    assert {id(p) for p in model.policy.value_net.parameters()} <= optimized
    with pytest.raises(ValueError, match="normalize_values must be True or False"):
        XPPO("MlpPolicy", "CartPole-v1", normalize_values="yes")


@pytest.mark.parametrize("separate", [False, True])
def test_per_group_statistics_and_logs(separate):
    model = XPPO("MlpPolicy", GroupEnv(), reward_groups=["const", "action", "cost"], normalize_values=True,
                 n_steps=64, batch_size=32, n_epochs=2, seed=0, device="cpu",
                 policy_kwargs=dict(net_arch=[16], separate_critics=separate))  # fmt: skip
    model.learn(128)
    logs = model.logger.name_to_value
    returns = model.rollout_buffer.returns.reshape(-1, 3)
    for group in ["const", "action", "cost"]:
        assert f"train/value_mean/{group}" in logs and f"train/value_std/{group}" in logs
        assert logs[f"train/value_std/{group}"] > 0
    # each group has its own statistics: the constant reward's returns are far from the action's
    means = model.policy.value_net.mean
    assert len(means) == 3 and not th.allclose(means[0], means[1])
    assert np.isfinite(returns).all()


def test_save_load_round_trip(tmp_path):
    model = XPPO("MlpPolicy", "Pendulum-v1", normalize_values=True, **TINY).learn(64)
    model.save(tmp_path / "model")
    loaded = XPPO.load(tmp_path / "model", device="cpu")
    assert loaded.options.normalize_values
    th.testing.assert_close(loaded.policy.value_net.mean, model.policy.value_net.mean, rtol=0, atol=0)
    obs = th.randn(4, 3)
    th.testing.assert_close(loaded.policy.predict_values(obs), model.policy.predict_values(obs), rtol=0, atol=0)
    loaded.set_env(make_vec_env("Pendulum-v1"))
    loaded.learn(32)


@pytest.mark.parametrize(
    "algo, extra",
    [
        (XPPO, {}),
        (XPPO, dict(reward_groups=["const", "action", "cost"])),
        (XPPO, dict(value_loss="hl_gauss")),
        (RecurrentXPPO, dict(policy="MlpLstmPolicy")),
    ],
    ids=["single", "multi-critic", "hl_gauss", "recurrent"],
)
def test_a_policy_saved_on_its_own_loads_with_its_statistics(tmp_path, algo, extra):
    """``policy.save`` / ``Policy.load`` (no algorithm): the normalizer and its statistics come back."""
    extra = dict(extra)
    env = GroupEnv() if "reward_groups" in extra else "Pendulum-v1"
    model = algo(extra.pop("policy", "MlpPolicy"), env, normalize_values=True, **extra, **TINY).learn(64)
    model.policy.save(tmp_path / "policy.pth")
    loaded = type(model.policy).load(tmp_path / "policy.pth", device="cpu")
    assert isinstance(loaded.value_net, ValueNormalizer) and loaded.value_net.count.item() == 64
    th.testing.assert_close(loaded.value_net.var, model.policy.value_net.var, rtol=0, atol=0)
    assert loaded.value_net.preserve_outputs == (extra.get("value_loss") != "hl_gauss")
    assert loaded.state_dict().keys() == model.policy.state_dict().keys()


def test_a_policy_without_normalize_values_saves_no_such_parameter():
    model = XPPO("MlpPolicy", "Pendulum-v1", **TINY)
    assert "normalize_values" not in model.policy._get_constructor_parameters()
    assert not isinstance(model.policy.value_net, ValueNormalizer)


def test_contrib_algorithms():
    masked = MaskableXPPO("MlpPolicy", InvalidActionEnvDiscrete(dim=6, n_invalid_actions=3), normalize_values=True, **TINY)
    masked.learn(64)
    assert "train/value_std" in masked.logger.name_to_value
    lstm = dict(lstm_hidden_size=8, net_arch=[8])
    recurrent = RecurrentXPPO("MlpLstmPolicy", "Pendulum-v1", normalize_values=True, n_steps=32, batch_size=16,
                              n_epochs=2, seed=0, policy_kwargs=lstm, device="cpu")  # fmt: skip
    recurrent.learn(64)
    assert recurrent.policy.value_net.count.item() == 64


def test_statistics_roll_back_with_a_failed_train():
    model = XPPO("MlpPolicy", "Pendulum-v1", normalize_values=True, **TINY).learn(32)
    mean, var = model.policy.value_net.mean.clone(), model.policy.value_net.var.clone()
    model.register_loss_hook(lambda m, data, loss: loss * np.nan)
    with pytest.raises(ValueError, match="this train\\(\\) call was undone"):
        model.learn(32, reset_num_timesteps=False)
    assert th.equal(model.policy.value_net.mean, mean) and th.equal(model.policy.value_net.var, var)


@pytest.mark.parametrize("kind", ["linear", "separate"])
def test_fixed_statistics_give_the_same_numbers_and_follow_changes(kind):
    normalizer = ValueNormalizer(heads()[kind], 3)
    normalizer.update(th.randn(64, 3) * th.tensor([100.0, 1.0, 0.01]) + 5.0)
    latent, values, column = th.randn(10, 5), th.randn(10, 3) * 50, th.randn(10) * 50

    def outputs() -> list[th.Tensor]:
        return [normalizer(latent), normalizer.normalize(values), normalizer.normalize(column), normalizer.std]

    expected = outputs()
    normalizer.fix_statistics()
    try:
        assert all(th.equal(a, b) for a, b in zip(outputs(), expected, strict=True))
        assert normalizer.std is normalizer.std  # computed once
        # a change of the statistics (here update(), or anything in place) is seen at the next call
        normalizer.update(th.randn(64, 3) * 3.0)
        moved = normalizer.var.sqrt().clamp_min(1e-4)
        assert th.equal(normalizer.std, moved) and not th.equal(moved, expected[3])
        normalizer.var.mul_(4.0)
        assert th.equal(normalizer.std, normalizer.var.sqrt().clamp_min(1e-4))
        assert th.equal(normalizer.normalize(values), (values - normalizer.mean) / normalizer.var.sqrt().clamp_min(1e-4))
    finally:
        normalizer.release_statistics()
    assert normalizer._fixed is None
    with th.inference_mode():  # no cached tensor made under inference mode (it could not be saved for backward)
        normalizer.fix_statistics()
    assert normalizer._fixed is None
