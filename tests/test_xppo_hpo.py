"""XPPO's ``actor_loss='hpo'`` and ``min_advantage_std`` (DAPO's skipping of minibatches without advantage signal)."""

import pytest
import torch as th
from stable_baselines3.common.env_util import make_vec_env

from sb3_xppo import XPPO, MaskableXPPO, RecurrentXPPO

TINY = dict(n_steps=32, batch_size=16, n_epochs=2, policy_kwargs=dict(net_arch=[16]), device="cpu", seed=0)


def actor_parameters(model: XPPO) -> list[th.Tensor]:
    policy = model.policy
    modules = [policy.mlp_extractor.policy_net, policy.action_net]
    params = [p.detach().clone() for m in modules for p in m.parameters()]
    return [*params, policy.log_std.detach().clone()] if hasattr(policy, "log_std") else params


@pytest.mark.parametrize(
    "algo, policy, env_id",
    [
        (XPPO, "MlpPolicy", "Pendulum-v1"),
        (XPPO, "MlpPolicy", "CartPole-v1"),
        (MaskableXPPO, "MlpPolicy", "CartPole-v1"),
        (RecurrentXPPO, "MlpLstmPolicy", "CartPole-v1"),
    ],
)
def test_hpo_trains_every_algorithm_and_logs_the_skipped_fraction(algo, policy, env_id):
    model = algo(policy, make_vec_env(env_id, n_envs=2, seed=0), actor_loss="hpo", **TINY)
    before = actor_parameters(model)
    kwargs = dict(use_masking=False) if algo is MaskableXPPO else {}
    model.learn(128, **kwargs)
    after = actor_parameters(model)
    assert all(th.isfinite(p).all() for p in model.policy.parameters())
    assert any(not th.equal(a, b) for a, b in zip(before, after))  # the actor learned
    # HPO's own default min_advantage_std=1e-6: on, and no minibatch of normalized advantages is degenerate here
    assert model.logger.name_to_value["train/skipped_minibatch_fraction"] == 0.0


@pytest.mark.parametrize("algo, policy", [(XPPO, "MlpPolicy"), (RecurrentXPPO, "MlpLstmPolicy")])
@pytest.mark.parametrize("actor_loss", ["clip", "hpo"])
def test_a_skipped_minibatch_leaves_the_actor_alone(algo, policy, actor_loss):
    # every variance is below 1e6 ** 2: each minibatch's actor loss is 0 (in the graph), the critic still learns
    model = algo(policy, make_vec_env("Pendulum-v1", n_envs=2, seed=0), actor_loss=actor_loss, min_advantage_std=1e6, **TINY)
    before, value_before = actor_parameters(model), [p.detach().clone() for p in model.policy.value_net.parameters()]
    model.learn(64)
    assert all(th.equal(a, b) for a, b in zip(before, actor_parameters(model)))
    assert any(not th.equal(a, b.detach()) for a, b in zip(value_before, model.policy.value_net.parameters()))
    assert model.logger.name_to_value["train/skipped_minibatch_fraction"] == 1.0
    assert model.logger.name_to_value["train/policy_gradient_loss"] == 0.0


def test_without_min_advantage_std_the_clip_loss_logs_no_skipping():
    model = XPPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=0), **TINY).learn(64)
    assert "train/skipped_minibatch_fraction" not in model.logger.name_to_value
    assert model.options.min_advantage_std is None


def test_hpo_options_are_checked_at_construction():
    with pytest.raises(ValueError, match="dual_clip cannot be combined with actor_loss='hpo'"):
        XPPO("MlpPolicy", "CartPole-v1", actor_loss="hpo", dual_clip=3.0)
    with pytest.raises(ValueError, match=r"must contain \(-0.6, 0.6\) = \(-2 eps, 2 eps\)"):
        XPPO("MlpPolicy", "CartPole-v1", actor_loss="hpo", clip_range=(0.2, 0.3), log_ratio_clamp=0.5)
    XPPO("MlpPolicy", "CartPole-v1", actor_loss="hpo", clip_range=(0.2, 0.3), log_ratio_clamp=0.6)
    XPPO("MlpPolicy", "CartPole-v1", actor_loss="clip", log_ratio_clamp=0.1)  # only HPO's targets need the room
    for bad in (-1.0, "small", float("nan")):
        with pytest.raises(ValueError, match="min_advantage_std must be None or a number >= 0"):
            XPPO("MlpPolicy", "CartPole-v1", min_advantage_std=bad)
    with pytest.raises(ValueError, match="actor_loss"):
        XPPO("MlpPolicy", "CartPole-v1", actor_loss="tpo")


def test_hpo_saves_and_loads(tmp_path):
    model = XPPO("MlpPolicy", "CartPole-v1", actor_loss="hpo", min_advantage_std=1e-3, **TINY).learn(64)
    model.save(tmp_path / "model")
    loaded = XPPO.load(tmp_path / "model")
    assert loaded.options.actor_loss == "hpo" and loaded.options.min_advantage_std == 1e-3
    loaded.set_env(make_vec_env("CartPole-v1", n_envs=1, seed=1))
    loaded.learn(64)
