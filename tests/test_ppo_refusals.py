"""PPO's refusals kept, and nonsense refused at the door (sb3_xppo/common/keywords.py): one table of settings, each
tried on the four algorithms and their SB3 / sb3-contrib parents side by side, at construction."""

from __future__ import annotations

import warnings
from pathlib import Path

import gymnasium as gym
import pytest
import yaml
from sb3_contrib import MaskablePPO, RecurrentPPO
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env

from sb3_xppo import XPPO, MaskableRecurrentXPPO, MaskableXPPO, RecurrentXPPO
from sb3_xppo.common.keywords import PPOSettingError

#: (algorithm, its parent, the policy both take)
ALGORITHMS = [
    (XPPO, PPO, "MlpPolicy"),
    (MaskableXPPO, MaskablePPO, "MlpPolicy"),
    (RecurrentXPPO, RecurrentPPO, "MlpLstmPolicy"),
    (MaskableRecurrentXPPO, RecurrentPPO, "MlpLstmPolicy"),
]
A, T, V = AssertionError, TypeError, ValueError
#: (keywords, the keyword named, what the parents raise at construction: PPO, MaskablePPO, RecurrentPPO; None: accept)
REFUSED = [
    # the grid
    (dict(n_steps=0), "n_steps", (A, None, None)),
    (dict(n_steps=1), "n_steps", (A, None, None)),
    (dict(batch_size=1), "batch_size", (A, None, None)),
    (dict(n_epochs=0), "n_epochs", (None, None, None)),
    (dict(gamma=1.5), "gamma", (None, None, None)),
    (dict(gae_lambda=2), "gae_lambda", (None, None, None)),
    (dict(vf_coef=-1), "vf_coef", (None, None, None)),
    (dict(max_grad_norm=-1), "max_grad_norm", (None, None, None)),
    (dict(target_kl=-0.1), "target_kl", (None, None, None)),
    (dict(ent_coef="auto"), "ent_coef", (None, None, None)),
    # more of our own
    (dict(n_steps=-4, normalize_advantage=False), "n_steps", (V, V, V)),  # (numpy's, building the buffer)
    (dict(n_steps=2.5), "n_steps", (T, T, T)),
    (dict(batch_size=0), "batch_size", (A, None, None)),
    (dict(batch_size=1, normalize_advantage=True), "batch_size", (A, None, None)),
    (dict(n_epochs=-1), "n_epochs", (None, None, None)),
    (dict(n_epochs=True), "n_epochs", (None, None, None)),
    (dict(gamma=0.0), "gamma", (None, None, None)),
    (dict(gamma=-0.9), "gamma", (None, None, None)),
    (dict(gae_lambda=-0.1), "gae_lambda", (None, None, None)),
    (dict(gae_lambda="0.95"), "gae_lambda", (None, None, None)),
    (dict(ent_coef=None), "ent_coef", (None, None, None)),
    (dict(learning_rate=-3e-4), "learning_rate", (V, V, V)),  # (torch's Adam's)
    (dict(clip_range_vf=-0.2), "clip_range_vf", (A, A, A)),
    (dict(clip_range_vf=0), "clip_range_vf", (A, A, A)),
    (dict(clip_range=1.5), "clip_range", (None, None, None)),
]
#: settings that stay valid: "refuse nonsense", not "narrow what PPO allows"
ACCEPTED = [
    dict(ent_coef=-0.01),
    dict(gamma=1.0),
    dict(gae_lambda=0.0),
    dict(gae_lambda=1.0),
    dict(target_kl=None),
    dict(target_kl=0.02),
    dict(vf_coef=0.0),
    dict(max_grad_norm=float("inf")),
    dict(n_steps=1, normalize_advantage=False),
    dict(batch_size=1, normalize_advantage=False),
    dict(batch_size=1, normalize_advantage="rollout"),
    dict(n_epochs=1),
    dict(learning_rate=lambda progress: 3e-4 * progress),
]
PARENT_INDEX = {PPO: 0, MaskablePPO: 1, RecurrentPPO: 2}


def build(cls: type, policy: str, **kwargs) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PPO's truncated mini-batch warning
        cls(policy, "CartPole-v1", **{"n_steps": 8, "batch_size": 4, **kwargs})


@pytest.mark.parametrize("kwargs, keyword, parents", REFUSED, ids=[str(row[0]) for row in REFUSED])
@pytest.mark.parametrize("algorithm, parent, policy", ALGORITHMS, ids=[row[0].__name__ for row in ALGORITHMS])
def test_refused_at_construction(algorithm, parent, policy, kwargs, keyword, parents) -> None:
    parent_error = parents[PARENT_INDEX[parent]]
    # the table's parent column, as the parent itself says it
    if parent_error is None:
        build(parent, policy, **kwargs)
    else:
        with pytest.raises(parent_error):
            build(parent, policy, **kwargs)
    with pytest.raises(ValueError, match=keyword) as error:
        build(algorithm, policy, **kwargs)
    if parent_error is not None:  # the parent's refusal kept: code catching the parent's error catches ours
        assert isinstance(error.value, parent_error), type(error.value)


@pytest.mark.parametrize("kwargs", ACCEPTED, ids=[str(sorted(row)) for row in ACCEPTED])
@pytest.mark.parametrize("algorithm, parent, policy", ALGORITHMS, ids=[row[0].__name__ for row in ALGORITHMS])
def test_valid_settings_stay_accepted(algorithm, parent, policy, kwargs) -> None:
    if not (parent is PPO and kwargs.get("normalize_advantage") == "rollout"):  # (a mode PPO does not have)
        build(parent, policy, **kwargs)
    build(algorithm, policy, **kwargs)


def test_n_envs_counts_in_the_buffer_size() -> None:
    # PPO's assert is on n_steps * n_envs: one step of two envs is a rollout of two samples
    XPPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2), n_steps=1, batch_size=2)
    with pytest.raises(PPOSettingError, match="n_steps=1, n_envs=1"):
        XPPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=1), n_steps=1, batch_size=2)


@pytest.mark.parametrize(
    "kwargs, why",
    [
        (dict(max_grad_norm=0), "clipped to norm 0"),
        (dict(target_kl=0), "stops after its first minibatch"),
        (dict(learning_rate=0.0), "steps of size 0"),
    ],
)
def test_legal_but_suspicious_warns_once(kwargs, why) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        XPPO("MlpPolicy", "CartPole-v1", n_steps=8, batch_size=8, **kwargs)
    mine = [w for w in caught if why in str(w.message)]
    assert len(mine) == 1 and next(iter(kwargs)) in str(mine[0].message)
    assert mine[0].filename == __file__  # it points at the caller's line


def test_before_any_env_is_built() -> None:
    # an env id whose env cannot be built: the keyword's error comes first
    with pytest.raises(ValueError, match="n_epochs"):
        XPPO("MlpPolicy", "sb3_xppo_tests/NeverBuilt-v0", n_epochs=0)
    with pytest.raises(RuntimeError, match="built"):  # negative control: a good setting reaches the env
        XPPO("MlpPolicy", "sb3_xppo_tests/NeverBuilt-v0")


def never_built() -> gym.Env:
    raise RuntimeError("the env was built")


gym.register("sb3_xppo_tests/NeverBuilt-v0", entry_point=never_built)


@pytest.mark.parametrize("params, error", [("n_steps:0", PPOSettingError), ("gamma:1.5", ValueError)])
def test_zoo_path_refuses_before_any_env_is_built(params, error, tmp_path: Path, monkeypatch) -> None:
    from sb3_xppo.train import main as train_main

    monkeypatch.chdir(tmp_path)
    config = tmp_path / "never.yml"
    env_id = "sb3_xppo_tests/NeverBuilt-v0"
    config.write_text(yaml.safe_dump({env_id: {"policy": "MlpPolicy", "n_timesteps": 64, "n_steps": 8, "batch_size": 8}}))
    with pytest.raises(error, match=params.split(":")[0]):
        train_main(["--env", env_id, "--conf-file", str(config), "-params", params])
    with pytest.raises(RuntimeError, match="built"):  # negative control: good settings reach the env
        train_main(["--env", env_id, "--conf-file", str(config)])
