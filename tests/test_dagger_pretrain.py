"""
The behaviour-cloning warm-up and the teacher's fit-time re-evaluation: ``DaggerDistiller.collect(sample,
teacher_acts)``, ``DaggerDistiller.pretrain``, kl/mse objectives re-evaluating the teacher at fit time,
``DaggerCallback(pretrain_steps=N)`` and ``python -m sb3_xppo.dagger_distill --pretrain-steps N``.
"""

import copy
import functools

import numpy as np
import pytest
import torch as th
from sb3_contrib import MaskablePPO, RecurrentPPO
from stable_baselines3 import PPO, SAC
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize
from test_dagger_callback import MASKED_DIM, _Executed, _masked_env, _next_action_teacher, small
from test_dagger_distiller import TEACHER_GAIN, ToyEnv, linear_teacher
from torch import nn
from torch.distributions import Categorical, Independent, Normal, kl_divergence

from sb3_xppo import XPPO, DaggerCallback, DaggerDistiller, kl_loss, mse_loss, nll_loss
from sb3_xppo.dagger_distill.masks import actions_allowed
from sb3_xppo.distill import main

# ---------------------------------------------------------------------------------------------------------------------
# DaggerDistiller: collect(sample, teacher_acts), pretrain
# ---------------------------------------------------------------------------------------------------------------------


def _linear_student(std: float = 0.3) -> tuple[nn.Linear, object]:
    student = nn.Linear(2, 2)
    return student, lambda s: Independent(Normal(student(s), std), 1)


def test_collect_sample_false_executes_the_students_mean():
    th.manual_seed(0)
    env = ToyEnv()
    net, student = _linear_student()
    DaggerDistiller(student, linear_teacher, env=env).collect(3, sample=False)
    with th.no_grad():
        expected = th.stack([net(s) for s in env.observations[:3]])
    assert th.equal(th.stack(env.actions), expected)
    env = ToyEnv()
    distiller = DaggerDistiller(student, linear_teacher, env=env)
    distiller.collect(3)  # sampled: off the mean
    for bad in (0, 2.0, False):
        with pytest.raises(ValueError, match="steps must be an int >= 1"):
            distiller.collect(bad)
    with th.no_grad():
        assert not th.allclose(th.stack(env.actions), th.stack([net(s) for s in env.observations[:3]]), atol=1e-3)


def test_collect_teacher_acts_executes_the_labels_and_falls_back_where_unusable():
    th.manual_seed(0)
    env = ToyEnv()
    net, student = _linear_student()

    def teacher(s):  # NaN label for env 0
        mean = s @ TEACHER_GAIN.T
        mean[0] = float("nan")
        return Independent(Normal(mean, 0.1, validate_args=False), 1)

    distiller = DaggerDistiller(student, teacher, env=env, beta=0.0)
    stats = distiller.collect(4, sample=False, teacher_acts=True)
    executed = th.stack(env.actions)  # (4 steps, 4 envs, 2)
    states = th.stack(env.observations[:4])
    with th.no_grad():
        np.testing.assert_allclose(executed[:, 1:], states[:, 1:] @ TEACHER_GAIN.T, atol=1e-6)  # the teacher's labels
        np.testing.assert_allclose(executed[:, 0], net(states[:, 0]), atol=1e-6)  # the student's mean where NaN
    assert stats["collected"] == 16 and len(distiller.dataset) == 16 and distiller.beta == 0.0


def test_pretrain_collects_with_the_teacher_then_fits_once():
    th.manual_seed(0)
    env = ToyEnv()
    net, student = _linear_student()
    distiller = DaggerDistiller(student, linear_teacher, env=env, params=net.parameters(), lr=3e-2, batch_size=8)
    stats = distiller.pretrain(5, epochs=3)
    states = th.stack(env.observations[:5])
    np.testing.assert_allclose(th.stack(env.actions), states @ TEACHER_GAIN.T, atol=1e-6)  # the teacher acted
    assert stats["collected"] == 20 and stats["dataset_size"] == 20
    assert stats["updates"] == 3 * 3  # ceil(20 / 8) minibatches per epoch
    assert set(stats) >= {"agreement", "train_agreement", "loss", "reward"}
    assert distiller.pretrain(1)["updates"] == 3  # epochs=None: train()'s one pass over the 24 states
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="steps must be an int >= 1"):
            distiller.pretrain(bad)
    with pytest.raises(ValueError, match="epochs must be an int >= 1"):
        distiller.pretrain(1, epochs=0)
    with pytest.raises(ValueError, match="collect\\(\\) needs env="):
        DaggerDistiller(student, linear_teacher, params=net.parameters()).pretrain(1)


@pytest.mark.slow
def test_pretrain_alone_clones_the_teacher():
    """Behaviour cloning of the teacher's own rollout: the linear student learns the teacher's gain."""
    th.manual_seed(0)
    net, student = _linear_student()
    distiller = DaggerDistiller(student, linear_teacher, env=ToyEnv(), params=net.parameters(), lr=3e-2, batch_size=32)
    before = net.weight.detach().clone()
    distiller.pretrain(64, epochs=20)
    assert (net.weight - TEACHER_GAIN).abs().max() < 0.05 < (before - TEACHER_GAIN).abs().max()


# ---------------------------------------------------------------------------------------------------------------------
# kl_loss / mse_loss: the teacher re-evaluated at fit time
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("loss_fn", [kl_loss, functools.partial(kl_loss, reverse=True), mse_loss, nll_loss])
def test_teacher_is_evaluated_at_fit_time(loss_fn):
    """A teacher changed between collect() and train(): kl/mse compare the student with the changed one."""
    th.manual_seed(0)
    teacher_net, (student_net, student) = nn.Linear(2, 2), _linear_student(0.5)

    def teacher(s):
        return Independent(Normal(teacher_net(s), 0.2), 1)

    distiller = DaggerDistiller(
        student,
        teacher,
        loss_fn=loss_fn,
        env=ToyEnv(),
        optimizer=th.optim.SGD(student_net.parameters(), lr=0.0),
        batch_size=1000,
    )
    distiller.collect(8)
    stored = distiller.dataset.get(th.arange(len(distiller.dataset)))
    states = stored["states"]
    with th.no_grad():
        old_labels = teacher_net(states)
        teacher_net.weight.add_(1.0)  # the teacher at fit time differs from the one that labelled the states
        new_mean = teacher_net(states)
        s = Independent(Normal(student_net(states), 0.5), 1)
        t = Independent(Normal(new_mean, 0.2), 1)
        # Independent references per objective (torch's KL of the two Gaussians, the squared error of the means)
        expected = {
            "kl": kl_divergence(t, s).mean(),
            "reverse": kl_divergence(s, t).mean(),
            "mse": (student_net(states) - new_mean).square().sum(-1).mean(),
            "nll": -s.log_prob(old_labels).mean(),  # nll keeps its collection-time labels
        }
    name = {kl_loss: "kl", mse_loss: "mse", nll_loss: "nll"}.get(loss_fn, "reverse")
    # Only nll_loss stores labels; the others keep the teacher's inputs alone (here the student's states)
    assert set(stored) == ({"states", "labels"} if name == "nll" else {"states"})
    stats = distiller.train()
    assert stats["updates"] == 1
    assert stats["loss"] == pytest.approx(expected[name].item(), rel=1e-5)
    # Negative control: the collection-time teacher gives another value
    if name != "nll":
        with th.no_grad():
            stale = kl_divergence(Independent(Normal(old_labels, 0.2), 1), s).mean().item()
        assert stats["loss"] != pytest.approx(stale, rel=1e-3)


def test_fit_time_teacher_reads_the_stored_teacher_states():
    """With teacher_state_fn the teacher's own inputs are stored and re-read at fit time, in minibatches."""
    th.manual_seed(0)
    calls: list[int] = []

    def teacher(s):
        calls.append(s.shape[0])
        return Independent(Normal(s[:, :2] @ TEACHER_GAIN.T + s[:, 2:], 0.1), 1)

    net, student = _linear_student()
    distiller = DaggerDistiller(
        student,
        teacher,
        loss_fn=kl_loss,
        teacher_state_fn=lambda state, info, step: th.cat([state, info["privileged"]], dim=-1),
        env=ToyEnv(),
        params=net.parameters(),
        batch_size=5,
    )
    distiller.collect(3)
    assert set(distiller.dataset.get(th.arange(2))) == {"states", "teacher_states"}
    calls.clear()
    assert distiller.train()["updates"] == 3
    assert calls == [5, 5, 2]  # one no-grad teacher call per minibatch of 12 states


# ---------------------------------------------------------------------------------------------------------------------
# DaggerCallback(pretrain_steps=N)
# ---------------------------------------------------------------------------------------------------------------------


def _balancing_teacher(obs: th.Tensor) -> Categorical:
    """A callable CartPole teacher: push towards where the pole falls (angle and angular velocity)."""
    push_right = (obs[:, 2] + 0.5 * obs[:, 3]) > 0
    return Categorical(logits=4.0 * th.nn.functional.one_hot(push_right.long(), 2).float())


class _Probe(BaseCallback):
    """
    At training start (after the DaggerCallback's warm-up): the student's NLL of the teacher's labels on the teacher's
    visited states ``obs``, and the model's first observation; at the first rollout's end, its episode starts.
    """

    def __init__(self, obs: np.ndarray) -> None:
        super().__init__()
        self.obs = th.as_tensor(obs)
        self.nll: float | None = None
        self.start_obs: np.ndarray | None = None
        self.first_starts: np.ndarray | None = None

    def _on_training_start(self) -> None:
        labels = _balancing_teacher(self.obs).probs.argmax(-1)
        with th.no_grad():
            self.nll = -self.model.policy.get_distribution(self.obs).log_prob(labels).mean().item()
        self.start_obs = np.array(self.model._last_obs)

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        if self.first_starts is None:
            self.first_starts = np.array(self.model.rollout_buffer.episode_starts[0])


def _cartpole_states(n: int = 512) -> np.ndarray:
    """States the balancing teacher visits in its own rollouts (another seed than the tests' envs)."""
    env = make_vec_env("CartPole-v1", n_envs=8, seed=7)
    obs, states = env.reset(), []
    for _ in range(n // 8):
        states.append(obs)
        obs, *_ = env.step(_balancing_teacher(th.as_tensor(obs)).probs.argmax(-1).numpy())
    return np.concatenate(states)


class _Resets(_Executed):
    """Records the executed actions, counts the resets and keeps the last reset's observations."""

    def __init__(self, venv) -> None:
        super().__init__(venv)
        self.resets = 0
        self.last_obs: np.ndarray | None = None

    def reset(self):
        self.resets += 1
        self.last_obs = self.venv.reset()
        return self.last_obs


@pytest.mark.parametrize("algo", [PPO, XPPO])
def test_callback_pretrain_warms_the_student_up_then_learn_proceeds(algo):
    env = _Resets(make_vec_env("CartPole-v1", n_envs=2, seed=0))
    obs = _cartpole_states()

    def run(pretrain_steps: int) -> tuple[_Probe, DaggerCallback, object]:
        # A learning rate that moves PPO's small initial logits within the warm-up's 63 gradient steps
        model = algo("MlpPolicy", env, n_steps=32, batch_size=64, n_epochs=10, learning_rate=3e-3, seed=0, **small())
        probe = _Probe(obs)
        callback = DaggerCallback(_balancing_teacher, pretrain_steps=pretrain_steps)
        env.actions.clear()
        env.resets = 0
        model.learn(128, callback=[callback, probe])
        return probe, callback, model

    cold, cold_callback, _ = run(0)
    warm, callback, model = run(200)
    # log(2) for the untrained student (logits near 0); the warm-up's fit lowers it
    assert warm.nll < 0.55 < 0.69 < cold.nll
    # The teacher acted in the model's env for the 200 warm-up steps; the env was then reset (learn()'s reset, the
    # warm-up's) and RL started on fresh episodes from the reset's observations
    assert env.resets == 2 and len(env.actions) == 200 + 64
    assert np.array_equal(warm.start_obs, env.last_obs)
    assert warm.first_starts is not None and warm.first_starts.all()
    assert model.num_timesteps == 128 and len(callback.dataset) == 400 + 128
    assert len(cold_callback.dataset) == 128
    # Once per student: a further learn() does not warm up again
    model.learn(64, callback=callback, reset_num_timesteps=False)
    assert len(callback.dataset) == 400 + 192 and model.num_timesteps == 192


def test_callback_pretrain_executes_the_teachers_actions():
    """The executed warm-up actions are the teacher's best actions on the observations acted on."""
    env = _Executed(make_vec_env("CartPole-v1", n_envs=2, seed=1))
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=64, seed=0, **small())
    callback = DaggerCallback(_balancing_teacher, pretrain_steps=20)
    model.learn(64, callback=callback)
    stored = callback.dataset.get(th.arange(40))["states"].reshape(20, 2, 4)
    teacher = _balancing_teacher(stored.reshape(40, 4)).probs.argmax(-1).reshape(20, 2)
    assert np.array_equal(np.stack(env.actions[:20]), teacher.numpy())


class _OriginalObsAtStart(BaseCallback):
    """At training start: the model's normalized and original observations, and the VecNormalize's original ones."""

    def _on_training_start(self) -> None:
        self.last = np.array(self.model._last_obs)
        self.original = np.array(self.model._last_original_obs)
        self.env_original = np.array(self.model.get_vec_normalize_env().get_original_obs())

    def _on_step(self) -> bool:
        return True


def test_callback_pretrain_teacher_reads_raw_observations_under_vec_normalize():
    """The warm-up's teacher acts on the raw observations; after the reset the model's normalized/original obs match."""
    env = _Executed(VecNormalize(make_vec_env("CartPole-v1", n_envs=2, seed=0)))
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=64, seed=0, **small())
    callback, probe = DaggerCallback(_balancing_teacher, pretrain_steps=40), _OriginalObsAtStart()
    model.learn(64, callback=[callback, probe])
    batch = callback.dataset.get(th.arange(80))
    raw, normalized = batch["teacher_states"], batch["states"]
    executed = th.as_tensor(np.stack(env.actions[:40]).reshape(80))
    assert th.equal(executed, _balancing_teacher(raw).probs.argmax(-1))
    assert not th.equal(executed, _balancing_teacher(normalized).probs.argmax(-1))  # they differ: raw is what it read
    assert np.array_equal(probe.original, probe.env_original)
    assert not np.allclose(probe.last, probe.original)


def test_callback_pretrain_maskable_student_never_executes_a_forbidden_action():
    env = _Executed(_masked_env())
    model = MaskablePPO("MlpPolicy", env, n_steps=32, batch_size=64, seed=0, **small())
    callback = DaggerCallback(_next_action_teacher, pretrain_steps=30)
    model.learn(64, callback=callback)
    states = callback.dataset.get(th.arange(60))["states"]
    actions = th.as_tensor(np.stack(env.actions[:30]).reshape(60))
    assert actions_allowed(states["action_masks"], actions, model.action_space).all()
    teacher = (states["obs"].long().reshape(-1) + 1) % MASKED_DIM
    allowed = actions_allowed(states["action_masks"], teacher, model.action_space)
    assert (~allowed).any() and th.equal(actions[allowed], teacher[allowed])  # the teacher's where its action is allowed


def test_callback_pretrain_recurrent_student_stores_the_lstm_states_it_would_carry():
    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    kwargs = dict(policy_kwargs=dict(lstm_hidden_size=8, net_arch=[8]), device="cpu")
    model = RecurrentPPO("MlpLstmPolicy", env, n_steps=32, batch_size=64, seed=0, **kwargs)
    before = copy.deepcopy(model.policy)  # the weights the warm-up's states are computed with (the fit comes after)
    callback = DaggerCallback(_balancing_teacher, pretrain_steps=6)
    model.learn(64, callback=callback)
    states = callback.dataset.get(th.arange(12))["states"]
    obs, starts = states["obs"].reshape(6, 2, 4), states["episode_starts"].reshape(6, 2)
    hidden = states["lstm_states"][0].reshape(6, 2, -1)
    # Reference: the actor's LSTM run along the warm-up's observations from zeros, one step at a time
    lstm = (th.zeros(1, 2, 8), th.zeros(1, 2, 8))
    for t in range(6):
        th.testing.assert_close(hidden[t], lstm[0].transpose(0, 1).reshape(2, -1))
        with th.no_grad():
            _, lstm = before.get_distribution(obs[t], lstm, starts[t])
    assert starts[0].all() and (hidden[1:].abs() > 0).all()


@pytest.mark.slow
def test_callback_pretrain_off_policy_student():
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)

    def teacher(obs):
        return Independent(Normal(-2.0 * obs[:, 2:3], 0.1), 1)

    model = SAC("MlpPolicy", env, learning_starts=32, batch_size=32, seed=0, **small())
    callback = DaggerCallback(teacher, pretrain_steps=50, batch_size=32)
    model.learn(64, callback=callback)
    assert model.num_timesteps == 64 and model.replay_buffer.size() == 64


def test_callback_pretrain_steps_errors():
    for bad in (-1, 1.5, True, "8"):
        with pytest.raises(ValueError, match="pretrain_steps must be an int >= 0"):
            DaggerCallback(_balancing_teacher, pretrain_steps=bad)


# ---------------------------------------------------------------------------------------------------------------------
# python -m sb3_xppo.dagger_distill --pretrain-steps N
# ---------------------------------------------------------------------------------------------------------------------


def test_cli_pretrain_steps(tmp_path, capsys, monkeypatch):
    PPO("MlpPolicy", "CartPole-v1", seed=0, **small()).save(tmp_path / "teacher.zip")
    calls = []
    original = DaggerDistiller.pretrain

    def pretrain(self, steps, epochs=None):
        calls.append((steps, epochs, len(self.dataset)))
        return original(self, steps, epochs)

    monkeypatch.setattr(DaggerDistiller, "pretrain", pretrain)
    base = ["--teacher", str(tmp_path / "teacher.zip"), "--student-algo", "ppo", "--env", "CartPole-v1", "--n-envs", "2"]
    base += ["--timesteps", "64", "--out", str(tmp_path / "out.zip"), "--eval-episodes", "0", "--no-progress-bar"]
    assert main([*base, "--pretrain-steps", "16", "--epochs", "3"]) == 0
    assert calls == [(16, 3, 0)]  # before any DAgger step
    assert "pretrained on 32 states of the teacher's rollout" in capsys.readouterr().out
    assert PPO.load(tmp_path / "out.zip", device="cpu").num_timesteps == 64 + 32
    assert main(base) == 0 and len(calls) == 1  # 0: no warm-up
    assert main([*base, "--pretrain-steps", "-1"]) == 2
    assert "--pretrain-steps must be an int >= 0, got -1" in capsys.readouterr().err
