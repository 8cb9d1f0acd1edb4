"""
``sequence_batching=True`` (RecurrentXPPO, MaskableRecurrentXPPO): ``train()`` runs the LSTMs over whole sequences
(``sb3_xppo.common.sequences``). The proof that it computes what sb3-contrib's step-by-step loop computes: on random
sequences with episode starts anywhere, and on the minibatches of real rollouts, the values, log-probabilities,
entropies and the gradients equal the loop's to float tolerance, for separate, shared and no critic LSTMs, Dict
observations, Box actions and action masks. And the option: checked, saved, loaded, off by default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from helpers import ToDict
from sb3_contrib import RecurrentPPO
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from sb3_contrib.common.recurrent.type_aliases import RNNStates
from stable_baselines3.common.env_util import make_vec_env
from torch import nn

import sb3_xppo.envs
from sb3_xppo import MaskableRecurrentXPPO, RecurrentXPPO, RecurrentXPPOOptions
from sb3_xppo.common import sequences
from sb3_xppo.common.sequences import (
    SequenceBatchingMixin,
    check_sequence_batching,
    lstm_over_sequences,
    restart_columns,
)

TOLERANCE = dict(rtol=1e-5, atol=1e-6)
LSTMS = {
    "critic_lstm": dict(),  # RecurrentPPO's default: actor and critic each have their own LSTM
    "no_critic_lstm": dict(enable_critic_lstm=False),
    "shared_lstm": dict(shared_lstm=True, enable_critic_lstm=False),
}


def close(a: th.Tensor, b: th.Tensor) -> None:
    th.testing.assert_close(a, b, **TOLERANCE)


def gradients(loss: th.Tensor, tensors: list[th.Tensor]) -> list[th.Tensor]:
    return list(th.autograd.grad(loss, tensors, allow_unused=True, materialize_grads=True))


# --- the function: lstm_over_sequences against sb3-contrib's step-by-step _process_sequence ---------------------------


@pytest.mark.parametrize(
    "n_seq, length, n_layers, p_start",
    [(1, 1, 1, 0.5), (3, 7, 1, 0.3), (5, 16, 2, 0.2), (8, 33, 1, 0.05), (4, 12, 1, 1.0), (6, 10, 2, 0.0)],
)
def test_lstm_over_sequences_equals_the_step_loop(n_seq, length, n_layers, p_start):
    th.manual_seed(n_seq * 100 + length)
    lstm = nn.LSTM(5, 7, num_layers=n_layers)
    features = th.randn(n_seq * length, 5, requires_grad=True)
    states = (th.randn(n_layers, n_seq, 7, requires_grad=True), th.randn(n_layers, n_seq, 7, requires_grad=True))
    # episode starts anywhere, the first steps included
    starts = (th.rand(n_seq * length) < p_start).float()
    weights = th.randn(n_seq * length, 7), th.randn(n_layers, n_seq, 7), th.randn(n_layers, n_seq, 7)
    inputs = [features, *states, *lstm.parameters()]

    results = []
    for process in (RecurrentActorCriticPolicy._process_sequence, lstm_over_sequences):
        output, (hidden, cell) = process(features, states, starts, lstm)
        loss = (output * weights[0]).sum() + (hidden * weights[1]).sum() + (cell * weights[2]).sum()
        results.append((output, hidden, cell, gradients(loss, inputs)))
    (output, hidden, cell, grads), (output_, hidden_, cell_, grads_) = results
    close(output_, output)
    close(hidden_, hidden)
    close(cell_, cell)
    for grad, grad_ in zip(grads, grads_, strict=True):
        close(grad_, grad)


def test_one_lstm_call_per_stretch_between_episode_starts():
    lstm = nn.LSTM(3, 4)
    calls = []
    lstm.register_forward_hook(lambda module, args, output: calls.append(args[0].shape[0]))
    n_seq, length = 3, 6
    states = (th.zeros(1, n_seq, 4), th.zeros(1, n_seq, 4))
    starts = th.zeros(n_seq, length)
    starts[:, 0] = th.tensor([1.0, 0.0, 1.0])  # the rollout buffer's sequences: starts at the first step only
    lstm_over_sequences(th.randn(n_seq * length, 3), states, starts.flatten(), lstm)
    assert calls == [length]
    # starts at steps 2 (sequence 0) and 4 (sequences 1 and 2): three calls, of 2, 2 and 2 steps
    starts[0, 2] = starts[1, 4] = starts[2, 4] = 1.0
    assert restart_columns(starts.T) == [0, 2, 4]
    calls.clear()
    lstm_over_sequences(th.randn(n_seq * length, 3), states, starts.flatten(), lstm)
    assert calls == [2, 2, 2]


# --- the policies: evaluate_actions in whole sequences against the step-by-step loop ----------------------------------


def random_minibatch(policy: Any, n_seq: int, length: int, seed: int) -> tuple[Any, th.Tensor, RNNStates, th.Tensor]:
    """Observations, actions, LSTM states and episode starts (anywhere) of ``n_seq`` sequences of ``length`` steps."""
    policy.observation_space.seed(seed)
    policy.action_space.seed(seed)
    generator = th.Generator().manual_seed(seed)
    samples = [policy.observation_space.sample() for _ in range(n_seq * length)]
    if isinstance(policy.observation_space, gym.spaces.Dict):
        obs = {key: th.as_tensor(np.stack([s[key] for s in samples])).float() for key in policy.observation_space.spaces}
    else:
        obs = th.as_tensor(np.stack(samples)).float()
    actions = th.as_tensor(np.stack([policy.action_space.sample() for _ in range(n_seq * length)]))
    if isinstance(policy.action_space, gym.spaces.Discrete):
        actions = actions.long().flatten()
    shape = policy.lstm_hidden_state_shape[0], n_seq, policy.lstm_hidden_state_shape[2]
    pi, vf = ((th.randn(shape, generator=generator), th.randn(shape, generator=generator)) for _ in range(2))
    starts = (th.rand(n_seq * length, generator=generator) < 0.2).float()
    return obs, actions, RNNStates(pi, vf), starts


def assert_evaluations_equal(policy: Any, evaluate: Callable[[bool], Any]) -> None:
    """
    ``evaluate(whole)``'s values, log-probabilities, entropies and their gradients, step by step (``whole=False``) and
    in whole sequences.
    """
    parameters = list(policy.parameters())
    results = []
    for whole in (False, True):
        values, log_prob, entropy = evaluate(whole)
        weights = th.linspace(-1.0, 1.0, log_prob.numel()).reshape(log_prob.shape)
        loss = (values.flatten() * weights).sum() + (log_prob * weights.flip(0)).sum() + (entropy * weights).sum()
        results.append((values, log_prob, entropy, gradients(loss, parameters)))
    assert policy.batch_sequences is False
    for step, whole in zip(*results, strict=True):
        if isinstance(step, list):
            assert any(g.abs().sum() > 0 for g in step)
            for grad, grad_ in zip(step, whole, strict=True):
                close(grad_, grad)
        else:
            close(whole, step)


def policy_evaluation(policy: Any, *args: Any, **kwargs: Any) -> Callable[[bool], Any]:
    """``policy.evaluate_actions(*args, **kwargs)``, in whole sequences or not."""

    def evaluate(whole: bool) -> Any:
        with policy.whole_sequences(whole):
            return policy.evaluate_actions(*args, **kwargs)

    return evaluate


def make_policy(algo: type, env: Any, lstm: str, **kwargs: Any) -> Any:
    policy = "MultiInputLstmPolicy" if isinstance(env.observation_space, gym.spaces.Dict) else "MlpLstmPolicy"
    policy_kwargs = dict(net_arch=[16], lstm_hidden_size=8, **LSTMS[lstm], **kwargs)
    return algo(policy, env, n_steps=8, policy_kwargs=policy_kwargs, seed=0, device="cpu").policy


POLICY_ENVS = {
    "discrete": lambda: make_vec_env("CartPole-v1", n_envs=1),
    "box_actions": lambda: make_vec_env("Pendulum-v1", n_envs=1),
    "dict": lambda: make_vec_env("CartPole-v1", n_envs=1, wrapper_class=ToDict),
}


@pytest.mark.parametrize("n_seq, length", [(1, 9), (5, 12)])
@pytest.mark.parametrize("lstm", LSTMS)
@pytest.mark.parametrize("env_name", POLICY_ENVS)
def test_policy_evaluations_equal_the_step_loop(env_name, lstm, n_seq, length):
    policy = make_policy(RecurrentXPPO, POLICY_ENVS[env_name](), lstm, n_lstm_layers=2 if n_seq > 1 else 1)
    obs, actions, states, starts = random_minibatch(policy, n_seq, length, seed=n_seq)
    assert_evaluations_equal(policy, policy_evaluation(policy, obs, actions, states, starts))


@pytest.mark.parametrize("lstm", ["critic_lstm", "shared_lstm"])
def test_policy_evaluations_equal_the_step_loop_under_action_masks(lstm):
    env = make_vec_env(sb3_xppo.envs.MEMORY_MAZE_ID, n_envs=1)
    policy = make_policy(MaskableRecurrentXPPO, env, lstm)
    obs, actions, states, starts = random_minibatch(policy, 4, 10, seed=3)
    masks = th.rand(40, int(policy.action_space.n), generator=th.Generator().manual_seed(0)) < 0.6
    masks[th.arange(40), actions] = True  # the action taken was allowed
    assert not masks.all()
    assert_evaluations_equal(policy, policy_evaluation(policy, obs, actions, states, starts, action_masks=masks))


# --- the algorithms: train()'s minibatches of real rollouts -------------------------------------------------------------


def assert_minibatches_equal(model: Any, batch_size: int) -> None:
    """Every minibatch of the model's last rollout, evaluated as ``train()`` does, with and without the option."""
    np.random.seed(0)
    restarts = 0
    for rollout_data in model.rollout_buffer.get(batch_size):
        actions = rollout_data.actions
        if isinstance(model.action_space, gym.spaces.Discrete):
            actions = actions.long().flatten()
        # sb3-contrib's loop runs step by step when a sequence starts an episode
        restarts += int(rollout_data.episode_starts.any())

        def evaluate(whole: bool, rollout_data: Any = rollout_data, actions: th.Tensor = actions) -> Any:
            model.options = dataclasses.replace(model.options, sequence_batching=whole)
            return model._evaluate_actions(rollout_data, actions)

        assert_evaluations_equal(model.policy, evaluate)
    assert restarts > 0


@pytest.mark.parametrize(
    "n_envs, n_steps, batch_size, lstm",
    [(1, 40, 16, "critic_lstm"), (3, 16, 20, "no_critic_lstm"), (2, 32, 64, "shared_lstm"), (4, 24, 96, "critic_lstm")],
)
def test_train_minibatches_equal_the_step_loop(n_envs, n_steps, batch_size, lstm):
    env = make_vec_env("CartPole-v1", n_envs=n_envs, seed=n_envs)
    policy_kwargs = dict(net_arch=[16], lstm_hidden_size=8, **LSTMS[lstm])
    model = RecurrentXPPO("MlpLstmPolicy", env, n_steps=n_steps, batch_size=batch_size, policy_kwargs=policy_kwargs, seed=0)
    model.learn(n_steps * n_envs)
    assert_minibatches_equal(model, batch_size)


@pytest.mark.parametrize("env_name", ["memory_maze", "dict"])
def test_masked_train_minibatches_equal_the_step_loop(env_name):
    wrapper = ToDict if env_name == "dict" else None
    env = make_vec_env(sb3_xppo.envs.MEMORY_MAZE_ID, n_envs=2, seed=1, wrapper_class=wrapper)
    policy = "MultiInputLstmPolicy" if env_name == "dict" else "MlpLstmPolicy"
    policy_kwargs = dict(net_arch=[16], lstm_hidden_size=8)
    model = MaskableRecurrentXPPO(policy, env, n_steps=32, batch_size=24, policy_kwargs=policy_kwargs, seed=0)
    model.learn(64)
    assert not model.rollout_buffer.action_masks.all()  # the walls are masked
    assert_minibatches_equal(model, 24)


@pytest.mark.parametrize("algo", [RecurrentXPPO, MaskableRecurrentXPPO])
def test_one_update_equals_the_step_loops_to_float_tolerance(algo, monkeypatch):
    # SGD: the parameters move by the gradients themselves (Adam's first step would amplify rounding in tiny ones)
    kwargs = dict(
        n_steps=32, batch_size=24, n_epochs=3, seed=5, device="cpu",
        policy_kwargs=dict(net_arch=[16], lstm_hidden_size=8, optimizer_class=th.optim.SGD),
    )  # fmt: skip
    env_id = "CartPole-v1" if algo is RecurrentXPPO else sb3_xppo.envs.MEMORY_MAZE_ID
    step = algo("MlpLstmPolicy", make_vec_env(env_id, n_envs=2, seed=0), **kwargs).learn(64)
    calls = []

    def counted(*args: Any) -> Any:
        calls.append(args[0].shape[0])
        return lstm_over_sequences(*args)

    monkeypatch.setattr(sequences, "lstm_over_sequences", counted)
    whole = algo("MlpLstmPolicy", make_vec_env(env_id, n_envs=2, seed=0), sequence_batching=True, **kwargs).learn(64)
    # train() only (3 epochs x 3 minibatches x 2 LSTMs), the rollout's steps one by one
    assert len(calls) == 18
    assert whole.policy.batch_sequences is False
    for p, q in zip(step.policy.state_dict().values(), whole.policy.state_dict().values(), strict=True):
        close(q, p)


# --- the option ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("algo", [RecurrentXPPO, MaskableRecurrentXPPO])
def test_off_by_default(algo):
    model = algo("MlpLstmPolicy", "CartPole-v1", n_steps=8, device="cpu")
    assert model.options.sequence_batching is False
    assert RecurrentXPPOOptions().sequence_batching is False  # what a model saved before the option existed gets


@pytest.mark.parametrize("value", [1, 0, "yes", None, [True]])
@pytest.mark.parametrize("algo", [RecurrentXPPO, MaskableRecurrentXPPO])
def test_non_bool_refused_at_construction(algo, value):
    with pytest.raises(TypeError, match="sequence_batching must be True or False"):
        algo("MlpLstmPolicy", "NoSuchEnv-v0", sequence_batching=value)  # before any env is built


def test_numpy_bool_accepted():
    assert check_sequence_batching(np.True_) is True
    assert (
        RecurrentXPPO("MlpLstmPolicy", "CartPole-v1", n_steps=8, sequence_batching=np.True_).options.sequence_batching is True
    )


def test_policy_without_whole_sequences_refused():
    assert not issubclass(RecurrentActorCriticPolicy, SequenceBatchingMixin)
    with pytest.raises(ValueError, match="sequence_batching=True needs an LSTM policy"):
        RecurrentXPPO(RecurrentActorCriticPolicy, "CartPole-v1", n_steps=8, sequence_batching=True)
    RecurrentXPPO(RecurrentActorCriticPolicy, "CartPole-v1", n_steps=8)  # the step-by-step loop takes any


@pytest.mark.parametrize("algo", [RecurrentXPPO, MaskableRecurrentXPPO])
def test_save_load_round_trip(algo, tmp_path: Path):
    env = make_vec_env(sb3_xppo.envs.MEMORY_MAZE_ID, n_envs=2, seed=0)
    model = algo("MlpLstmPolicy", env, n_steps=16, batch_size=16, sequence_batching=True, seed=0, device="cpu").learn(32)
    model.save(tmp_path / "model.zip")
    loaded = algo.load(tmp_path / "model.zip", env=env, device="cpu")
    assert loaded.options.sequence_batching is True
    loaded.learn(32, reset_num_timesteps=False)
    assert algo.load(tmp_path / "model.zip", device="cpu", sequence_batching=False).options.sequence_batching is False
    with pytest.raises(TypeError, match="sequence_batching must be True or False"):
        algo.load(tmp_path / "model.zip", device="cpu", sequence_batching="yes")


def test_recurrent_ppo_checkpoint_loads_without_it(tmp_path: Path):
    RecurrentPPO("MlpLstmPolicy", "CartPole-v1", n_steps=8, device="cpu").save(tmp_path / "parent.zip")
    assert RecurrentXPPO.load(tmp_path / "parent.zip", device="cpu").options.sequence_batching is False
