"""The public checks of dagger_distill (sb3_xppo.dagger_distill.checks): each refuses with the keyword's name."""

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from sb3_contrib import RecurrentPPO
from stable_baselines3 import A2C, PPO
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize
from torch import nn
from torch.distributions import Categorical, Normal

from sb3_xppo import XPPO
from sb3_xppo.dagger_distill import checks
from sb3_xppo.dagger_distill.policy_adapter import PolicyAdapter


@pytest.mark.parametrize("value", [1, 5, np.int64(3)])
def test_check_count_accepts(value):
    checks.check_count("steps", value)


@pytest.mark.parametrize("value, low", [(0, 1), (-1, 0), (True, 0), (1.0, 1), ("2", 1), (None, 1)])
def test_check_count_refuses(value, low):
    with pytest.raises(ValueError, match=f"steps must be an int >= {low}"):
        checks.check_count("steps", value, low=low)


def test_check_size():
    checks.check_size("batch_size", 8)
    checks.check_size("batch_size", None, optional=True)
    with pytest.raises(ValueError, match="batch_size must be None or an int >= 1, got 0"):
        checks.check_size("batch_size", 0, optional=True)
    with pytest.raises(ValueError, match="buffer_size must be an int >= 1, got None"):
        checks.check_size("buffer_size", None)


@pytest.mark.parametrize(
    "value, kwargs, bounds",
    [
        (-0.1, dict(low=0.0), r"\[0.0, inf\]"),
        (1.5, dict(low=0.0, high=1.0), r"\[0.0, 1.0\]"),
        (0.0, dict(low=0.0, open_low=True), r"\(0.0, inf\]"),
        (float("nan"), {}, r"\[-inf, inf\]"),
        (float("inf"), {}, r"\[-inf, inf\]"),
        (True, {}, r"\[-inf, inf\]"),
        ("1", {}, r"\[-inf, inf\]"),
    ],
)
def test_check_number_refuses(value, kwargs, bounds):
    with pytest.raises(ValueError, match=f"lr must be a number in {bounds}"):
        checks.check_number("lr", value, **kwargs)


def test_check_number_accepts():
    checks.check_number("beta", 1.0, low=0.0, high=1.0)
    checks.check_number("beta", np.float32(0.0), low=0.0, high=1.0)
    checks.check_number("entropy_weight", -3)


def test_check_callable():
    checks.check_callable("loss_fn", len)
    checks.check_callable("label_transform", None, optional=True)
    with pytest.raises(TypeError, match=r"loss_fn must be a callable, e\.g\. nll_loss"):
        checks.check_callable("loss_fn", "nll")
    with pytest.raises(TypeError, match="label_transform must be None or a callable"):
        checks.check_callable("label_transform", 3, optional=True)


def test_check_layers():
    checks.check_layers(None, None)
    checks.check_layers("a", "b")
    with pytest.raises(ValueError, match="needs both student_layer and teacher_layer"):
        checks.check_layers("a", None)


def test_resolve_layer():
    policy = nn.Sequential(nn.Linear(2, 3), nn.Tanh())
    assert checks.resolve_layer(policy, "0", "student") is policy[0]
    assert checks.resolve_layer(policy, policy[1], "student") is policy[1]
    assert checks.resolve_layer(policy, None, "student") is None
    with pytest.raises(
        ValueError, match=r"student_layer='2' is not a submodule of the student; its submodules are \['0', '1'\]"
    ):
        checks.resolve_layer(policy, "2", "student")
    with pytest.raises(TypeError, match=r"teacher_layer='0' is a name, but the teacher is not an nn\.Module"):
        checks.resolve_layer(lambda obs: obs, "0", "teacher")
    with pytest.raises(TypeError, match=r"student_layer must be a submodule name or an nn\.Module"):
        checks.resolve_layer(policy, 0, "student")
    # An adapter is resolved through the policy it wraps
    model = PPO("MlpPolicy", "CartPole-v1", device="cpu", policy_kwargs=dict(net_arch=[8]))
    adapter = PolicyAdapter(model.policy)
    assert checks.resolve_layer(adapter, "action_net", "student") is model.policy.action_net


def test_check_spaces_and_statistics():
    checks.check_action_spaces(spaces.Discrete(2), spaces.Discrete(2))
    with pytest.raises(ValueError, match=r"the teacher acts in Discrete\(2\) but the student in Discrete\(3\)"):
        checks.check_action_spaces(spaces.Discrete(2), spaces.Discrete(3))
    statistics = VecNormalize(DummyVecEnv([lambda: gym.make("CartPole-v1")]))
    box = statistics.observation_space
    checks.check_teacher_statistics(None, spaces.Box(-1, 1, (3,)), "teacher_vec_normalize")
    checks.check_teacher_statistics(statistics, box, "teacher_vec_normalize")
    with pytest.raises(ValueError, match=r"stats.pkl normalizes Box.* but the teacher reads Box"):
        checks.check_teacher_statistics(statistics, spaces.Box(-1, 1, (3,)), "stats.pkl")


def test_check_feed_forward_teacher():
    checks.check_feed_forward_teacher(PPO("MlpPolicy", "CartPole-v1", device="cpu").policy)
    recurrent = RecurrentPPO("MlpLstmPolicy", "CartPole-v1", device="cpu", policy_kwargs=dict(lstm_hidden_size=8))
    with pytest.raises(ValueError, match="a recurrent teacher is not supported"):
        checks.check_feed_forward_teacher(recurrent.policy)


def test_check_student():
    ppo = PPO("MlpPolicy", "CartPole-v1", device="cpu", policy_kwargs=dict(net_arch=[8]))
    checks.check_student(ppo, rl_coef=1.0, gradient_surgery=False)
    with pytest.raises(ValueError, match=r"rl_coef=0\.5 needs a student with a loss hook"):
        checks.check_student(ppo, rl_coef=0.5, gradient_surgery=False)
    with pytest.raises(ValueError, match="gradient_surgery=True needs a student of the XPPO family"):
        checks.check_student(A2C("MlpPolicy", "CartPole-v1", device="cpu"), rl_coef=1.0, gradient_surgery=True)
    xppo = XPPO("MlpPolicy", "CartPole-v1", device="cpu", policy_kwargs=dict(net_arch=[8]))
    checks.check_student(xppo, rl_coef=0.0, gradient_surgery=True)


def test_check_heads():
    logits = th.zeros(2, 3)
    checks.check_heads(Categorical(logits=logits), Categorical(logits=logits))
    checks.check_heads(th.zeros(2, 1), Normal(th.zeros(2, 1), th.ones(2, 1)))
    with pytest.raises(ValueError, match="2 classes where the student has 3"):
        checks.check_heads(Categorical(logits=logits), Categorical(logits=th.zeros(2, 2)))
    with pytest.raises(ValueError, match="a head of batch/event shape"):
        checks.check_heads(Normal(th.zeros(2, 1), th.ones(2, 1)), Normal(th.zeros(2, 2), th.ones(2, 2)))
    with pytest.raises(ValueError, match=r"actions of shape \(2, 2\) where the student's are \(2, 1\)"):
        checks.check_heads(th.zeros(2, 1), th.zeros(2, 2))
