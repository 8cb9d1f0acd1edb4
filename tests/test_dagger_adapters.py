"""SB3 adapters: each SB3 policy as torch distributions agrees with SB3's own log-probabilities and actions."""

import math

import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from sb3_contrib import TRPO, MaskablePPO
from sb3_contrib.common.envs import InvalidActionEnvMultiBinary, InvalidActionEnvMultiDiscrete
from stable_baselines3 import A2C, DQN, PPO, SAC, TD3
from stable_baselines3.common.envs import IdentityEnv, IdentityEnvBox, IdentityEnvMultiBinary, IdentityEnvMultiDiscrete
from stable_baselines3.common.utils import obs_as_tensor

from sb3_xppo import XPPO, best_action
from sb3_xppo.dagger_distill.actions import action_to_tree, same_action_space, tree_to_action
from sb3_xppo.dagger_distill.checkpoints import load_sb3_model
from sb3_xppo.dagger_distill.policy_adapter import PolicyAdapter
from sb3_xppo.dagger_distill.pytree import tree_leaves
from sb3_xppo.dagger_distill.teacher_obs import teacher_obs_keys


def kw(**extra):
    """Fresh keywords each time: SB3 writes into policy_kwargs (SAC adds use_sde)."""
    return dict(policy_kwargs=dict(net_arch=[16]), seed=0, device="cpu", **extra)


def _obs(model, n=6):
    return obs_as_tensor(np.stack([model.observation_space.sample() for _ in range(n)]), "cpu")


def _log_prob(tree, actions):
    """Sum of the heads' log-probabilities of env-format actions."""
    return sum(d.log_prob(a) for d, a in zip(tree_leaves(tree), tree_leaves(actions), strict=True))


ON_POLICY_CASES = [
    (PPO, lambda: IdentityEnv(5)),
    (PPO, lambda: IdentityEnvBox(low=-2.0, high=3.0)),
    (PPO, lambda: IdentityEnvMultiDiscrete(3)),
    (PPO, lambda: IdentityEnvMultiBinary(3)),
    (A2C, lambda: IdentityEnvBox()),
    (MaskablePPO, lambda: InvalidActionEnvMultiDiscrete(dims=[2, 3], n_invalid_actions=1)),
    (MaskablePPO, lambda: InvalidActionEnvMultiBinary(dims=3, n_invalid_actions=1)),
]


@pytest.mark.parametrize(("algo", "make_env"), ON_POLICY_CASES)
def test_on_policy_matches_sb3(algo, make_env):
    model = algo("MlpPolicy", make_env(), **kw())
    obs = _obs(model)
    with th.no_grad():
        tree = PolicyAdapter(model.policy)(obs)
        sb3_dist = model.policy.get_distribution(obs)
        actions = sb3_dist.sample()
        _, sb3_log_prob, sb3_entropy = model.policy.evaluate_actions(obs, actions)
        ours = _log_prob(tree, action_to_tree(actions, model.action_space))
        assert th.allclose(ours, sb3_log_prob, atol=1e-5)
        entropy = sum(d.entropy() for d in tree_leaves(tree))
        assert th.allclose(entropy, sb3_entropy, atol=1e-5)
    # The noise-free action is SB3's deterministic prediction (clipped to the bounds for Box, as SB3 executes it)
    best = tree_to_action(best_action(tree), model.action_space).numpy()
    if isinstance(model.action_space, spaces.Box):
        best = np.clip(best, model.action_space.low, model.action_space.high)
    predicted, _ = model.predict(obs.numpy(), deterministic=True)
    np.testing.assert_allclose(best.reshape(predicted.shape), predicted, atol=1e-6)


def test_gsde_squashed_policy_matches_sb3():
    model = PPO(
        "MlpPolicy", IdentityEnvBox(low=-2.0, high=2.0), use_sde=True, policy_kwargs=dict(net_arch=[16], squash_output=True)
    )
    obs = _obs(model)
    with th.no_grad():
        tree = PolicyAdapter(model.policy)(obs)
        squashed = model.policy.get_distribution(obs).get_actions(deterministic=True)
        # Squashed actions live in [-1, 1]; ours in the env's units (x2) and the affine map adds -log 2 per dim
        np.testing.assert_allclose(best_action(tree).numpy(), 2 * squashed.numpy(), atol=1e-6)
        _, sb3_log_prob, _ = model.policy.evaluate_actions(obs, squashed * 0.9)
        assert th.allclose(tree.log_prob(2 * squashed * 0.9), sb3_log_prob - math.log(2), atol=1e-3)


@pytest.mark.parametrize("low_high", [(-1.0, 1.0), (-2.0, 3.0)])
def test_sac_matches_sb3(low_high):
    model = SAC("MlpPolicy", IdentityEnvBox(*low_high), **kw())
    obs = _obs(model)
    with th.no_grad():
        tree = PolicyAdapter(model.policy)(obs)
        squashed, sb3_log_prob = model.actor.action_log_prob(obs)
        env_actions = th.as_tensor(model.policy.unscale_action(squashed.numpy()))
        half = (low_high[1] - low_high[0]) / 2
        # (SB3 adds 1e-6 inside log(1 - tanh^2): a few 1e-3 apart near the bounds)
        assert th.allclose(tree.log_prob(env_actions), sb3_log_prob - math.log(half), atol=5e-3)
        predicted, _ = model.predict(obs.numpy(), deterministic=True)
        np.testing.assert_allclose(best_action(tree).numpy().reshape(predicted.shape), predicted, atol=1e-5)
        # A label on the bound keeps a finite log-probability
        assert th.isfinite(tree.log_prob(th.full_like(env_actions, low_high[1]))).all()


def test_td3_and_dqn_best_actions_are_sb3_predictions():
    td3 = TD3("MlpPolicy", IdentityEnvBox(-2.0, 3.0), **kw())
    obs = _obs(td3)
    predicted, _ = td3.predict(obs.numpy(), deterministic=True)
    np.testing.assert_allclose(best_action(PolicyAdapter(td3.policy)(obs)).detach().numpy(), predicted, atol=1e-5)
    dqn = DQN("MlpPolicy", IdentityEnv(4), **kw())
    obs = _obs(dqn)
    predicted, _ = dqn.predict(obs.numpy(), deterministic=True)
    assert best_action(PolicyAdapter(dqn.policy)(obs)).tolist() == predicted.tolist()


@pytest.mark.parametrize("algo", [PPO, A2C, TRPO, XPPO, SAC, TD3, DQN])
def test_load_infers_the_algorithm(algo, tmp_path):
    env = IdentityEnv(3) if algo is DQN else (IdentityEnvBox() if algo in (SAC, TD3) else IdentityEnv(3))
    kwargs = kw(n_steps=64) if algo in (PPO, A2C, TRPO, XPPO) else kw(buffer_size=100)
    if algo is TRPO:
        kwargs["batch_size"] = 64
    algo("MlpPolicy", env, **kwargs).save(tmp_path / "model")
    loaded = load_sb3_model(tmp_path / "model")  # the .zip suffix is optional, as in SB3
    assert type(loaded) is algo
    with pytest.raises(ValueError, match="no SB3 checkpoint"):
        load_sb3_model(tmp_path / "missing.zip")


def test_load_infers_maskable_ppo(tmp_path):
    MaskablePPO("MlpPolicy", InvalidActionEnvMultiBinary(dims=3, n_invalid_actions=1), n_steps=64, **kw()).save(
        tmp_path / "m.zip"
    )
    assert type(load_sb3_model(tmp_path / "m.zip")) is MaskablePPO


def test_space_checks():
    assert same_action_space(spaces.Box(-1, 1, (2,)), spaces.Box(-1.0, 1.0, (2,), dtype=np.float64))
    assert not same_action_space(spaces.Box(-1, 1, (2,)), spaces.Box(-2, 2, (2,)))
    assert not same_action_space(spaces.Discrete(2), spaces.Discrete(3))
    assert not same_action_space(spaces.Discrete(2), spaces.MultiBinary(2))
    assert same_action_space(spaces.MultiDiscrete([2, 3]), spaces.MultiDiscrete([2, 3]))
    full = spaces.Dict({"obs": spaces.Box(-1, 1, (2,)), "privileged": spaces.Box(-1, 1, (4,))})
    assert teacher_obs_keys(full, spaces.Box(-5, 5, (4,)), "privileged") == "privileged"
    assert teacher_obs_keys(full, spaces.Dict({"privileged": spaces.Box(-1, 1, (4,))})) == ["privileged"]
    assert teacher_obs_keys(full, full) is None
    with pytest.raises(ValueError, match="pass teacher_obs_keys"):
        teacher_obs_keys(full, spaces.Box(-1, 1, (4,)))
    with pytest.raises(ValueError, match="no key"):
        teacher_obs_keys(full, spaces.Box(-1, 1, (4,)), "state")
    with pytest.raises(ValueError, match="the teacher reads"):
        teacher_obs_keys(full, spaces.Box(-1, 1, (3,)), "privileged")
    with pytest.raises(ValueError, match="not a Dict"):
        teacher_obs_keys(spaces.Box(-1, 1, (4,)), spaces.Box(-1, 1, (4,)), "privileged")


def test_multidiscrete_actions_round_trip():
    space = spaces.MultiDiscrete([2, 3, 4])
    actions = th.tensor([[1, 2, 3], [0, 0, 1]])
    tree = action_to_tree(actions, space)
    assert isinstance(tree, tuple) and len(tree) == 3
    assert th.equal(tree_to_action(tree, space), actions)
