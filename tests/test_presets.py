"""``xppo_recommended``: the recommended options, merged with the caller's keywords, and the models they build
(XPPO, MaskableXPPO, RecurrentXPPO) training, saving and loading."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from sb3_contrib.common.envs import InvalidActionEnvDiscrete
from stable_baselines3.common.env_util import make_vec_env

from sb3_xppo import XPPO, MaskableXPPO, RecurrentXPPO, xppo_recommended
from sb3_xppo.common.value_norm import ValueNormalizer

TINY = dict(n_steps=32, batch_size=16, n_epochs=2, seed=0, device="cpu")


@pytest.mark.parametrize(
    "space",
    [spaces.Box(-1, 1, (2,), np.float32), spaces.Discrete(3), spaces.MultiDiscrete([2, 3]), spaces.MultiBinary(4)],
)
def test_every_action_space_gets_value_normalization(space):
    assert xppo_recommended(space) == dict(normalize_values=True)


def test_an_env_an_env_id_and_a_vec_env_are_taken():
    assert xppo_recommended("Pendulum-v1") == dict(normalize_values=True)
    assert xppo_recommended(gym.make("Pendulum-v1")) == xppo_recommended(make_vec_env("Pendulum-v1", n_envs=2))


def test_overrides_win_and_policy_kwargs_pass_through_as_a_fresh_dict():
    box = spaces.Box(-1, 1, (1,), np.float32)
    policy_kwargs = dict(net_arch=[8], rpo_alpha=0.1)
    options = xppo_recommended(box, n_steps=64, normalize_values=False, policy_kwargs=policy_kwargs)
    assert options == dict(normalize_values=False, n_steps=64, policy_kwargs=dict(net_arch=[8], rpo_alpha=0.1))
    options["policy_kwargs"]["rpo_alpha"] = 9.0  # the caller's dict is not the result's
    assert policy_kwargs["rpo_alpha"] == 0.1
    assert xppo_recommended(box, policy_kwargs=None) == xppo_recommended(box, policy_kwargs={}) == xppo_recommended(box)
    # fresh dicts: a caller editing the result does not edit the preset
    xppo_recommended(box)["normalize_values"] = False
    assert xppo_recommended(box) == dict(normalize_values=True)


@pytest.mark.parametrize("bad", [3, None, object()])
def test_not_an_env_is_a_type_error(bad):
    with pytest.raises(TypeError, match="xppo_recommended needs an env"):
        xppo_recommended(bad)


def test_policy_kwargs_must_be_a_dict():
    with pytest.raises(TypeError, match="policy_kwargs must be a dict"):
        xppo_recommended(spaces.Discrete(2), policy_kwargs=[("net_arch", [8])])


def test_xppo_with_the_preset_trains_saves_and_loads(tmp_path):
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    # the earlier preset (RPO on top for Box actions), as its docstring gives it
    model = XPPO("MlpPolicy", env, **xppo_recommended(env, policy_kwargs=dict(rpo_alpha=0.5), **TINY))
    model.learn(64)
    assert model.options.normalize_values and isinstance(model.policy.value_net, ValueNormalizer)
    assert model.policy.rpo_alpha == 0.5
    model.save(tmp_path / "model")
    loaded = XPPO.load(tmp_path / "model", env=env)
    assert loaded.options.normalize_values and loaded.policy.rpo_alpha == 0.5
    obs = env.reset()
    np.testing.assert_array_equal(model.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0])


def test_the_contrib_algorithms_take_the_preset():
    masked = InvalidActionEnvDiscrete(dim=4, n_invalid_actions=1)
    MaskableXPPO("MlpPolicy", masked, **xppo_recommended(masked, **TINY)).learn(32)
    recurrent = RecurrentXPPO("MlpLstmPolicy", "Pendulum-v1", **xppo_recommended("Pendulum-v1", **TINY))
    assert recurrent.options.normalize_values and recurrent.policy.rpo_alpha == 0.0
    recurrent.learn(32)
