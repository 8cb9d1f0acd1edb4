"""DaggerDistiller's DAgger loop (collect / train / step) on toy environments, and the aggregated dataset."""

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from torch import nn
from torch.distributions import Independent, Normal

from sb3_xppo import DaggerDistiller
from sb3_xppo.dagger_distill.dataset import AggregatedDataset

TEACHER_GAIN = th.tensor([[-0.8, 0.3], [0.2, -0.5]])


class ToyEnv:
    """Linear dynamics ``s' = 0.9 s + 0.1 a + noise`` for ``num_envs`` envs, in torch; records the executed actions."""

    def __init__(self, num_envs: int = 4, seed: int = 0) -> None:
        self.num_envs = num_envs
        self.generator = th.Generator().manual_seed(seed)
        self.actions: list[th.Tensor] = []
        self.observations: list[th.Tensor] = []

    def reset(self):
        self.s = th.randn(self.num_envs, 2, generator=self.generator)
        self.observations.append(self.s)
        return self.s, {"privileged": self.s.sum(-1, keepdim=True), "t": 0}

    def step(self, a):
        self.actions.append(a.clone())
        self.s = 0.9 * self.s + 0.1 * a + 0.1 * th.randn(self.num_envs, 2, generator=self.generator)
        reward = -self.s.square().sum(-1)
        done = th.zeros(self.num_envs, dtype=th.bool)
        self.observations.append(self.s)
        return self.s, reward, done, done, {"privileged": self.s.sum(-1, keepdim=True), "t": len(self.actions)}


def linear_teacher(s: th.Tensor) -> Independent:
    return Independent(Normal(s @ TEACHER_GAIN.T, 0.1), 1)


@pytest.mark.slow
def test_loop_learns_the_teacher():
    th.manual_seed(0)
    student = nn.Linear(2, 2)
    distiller = DaggerDistiller(
        lambda s: Independent(Normal(student(s), 0.3), 1),
        linear_teacher,
        env=ToyEnv(),
        optimizer=th.optim.Adam(student.parameters(), lr=3e-2),
        batch_size=32,
    )
    first = distiller.step(collect_steps=16, epochs=2)
    assert set(first) == {
        "collected",
        "dataset_size",
        "agreement",
        "reward",
        "forbidden_labels",
        "loss",
        "policy",
        "entropy",
        "alignment",
        "updates",
        "skipped",
        "train_agreement",
    }
    assert first["collected"] == 64 and first["dataset_size"] == 64 and first["updates"] == 4
    for _ in range(15):
        stats = distiller.step(collect_steps=16, epochs=2)
    assert stats["dataset_size"] == 16 * 64
    assert stats["loss"] < first["loss"]
    states = th.randn(256, 2)
    with th.no_grad():
        assert th.allclose(student(states), states @ TEACHER_GAIN.T, atol=0.05)
    assert stats["agreement"] > 0.9 and distiller.num_steps == 16 * 16


def test_dataset_is_bounded_and_keeps_the_newest_states():
    env = ToyEnv(num_envs=4)
    distiller = DaggerDistiller(linear_teacher, linear_teacher, env=env, max_dataset_size=10)
    stats = distiller.collect(5)
    assert stats["collected"] == 20 and stats["dataset_size"] == 10
    stored = distiller.dataset.get(th.arange(10))["states"]
    acted_on = th.cat(env.observations[:5])  # the 20 states the 5 steps acted on, oldest first
    assert sorted(map(tuple, stored.tolist())) == sorted(map(tuple, acted_on[-10:].tolist()))


@pytest.mark.parametrize("beta", [0.0, 1.0])
def test_beta_executes_the_teacher_labels(beta):
    th.manual_seed(0)
    env = ToyEnv()
    student = nn.Linear(2, 2)
    distiller = DaggerDistiller(lambda s: Independent(Normal(student(s), 0.3), 1), linear_teacher, env=env, beta=beta)
    distiller.collect(3)
    labels = distiller.dataset.get(th.arange(12))["labels"].reshape(3, 4, 2)
    executed = th.stack(env.actions)
    assert th.allclose(executed, labels) == (beta == 1.0)


def test_teacher_state_fn_and_label_transform_receive_info_and_step():
    th.manual_seed(0)
    calls = []

    def teacher_state_fn(state, info, step):
        calls.append((info["t"], step))
        return th.cat([state, info["privileged"]], dim=-1)  # the teacher also sees privileged information

    def teacher(s):
        return Independent(Normal(s[:, :2] @ TEACHER_GAIN.T + s[:, 2:], 0.1), 1)

    student = nn.Linear(2, 2)
    distiller = DaggerDistiller(
        lambda s: Independent(Normal(student(s), 0.3), 1),
        teacher,
        teacher_state_fn=teacher_state_fn,
        label_transform=lambda state, action, info, step: action.clamp(-1, 1),
        env=ToyEnv(),
        params=student.parameters(),
        lr=3e-2,
    )
    distiller.step(collect_steps=4, epochs=1)
    assert calls == [(0, 0), (1, 1), (2, 2), (3, 3)]
    batch = distiller.dataset.get(th.arange(16))
    assert batch["teacher_states"].shape == (16, 3) and batch["labels"].abs().max() <= 1
    # Training reads the stored teacher states (the env-free default would call teacher_state_fn without info)
    for _ in range(20):
        distiller.step(collect_steps=4, epochs=2)
    assert len(calls) == 4 + 80


def test_gymnasium_vector_env_with_numpy():
    envs = gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="sync")
    envs.reset(seed=0)
    student = nn.Linear(3, 1)
    gain = th.tensor([[0.5, -0.2, 0.1]])
    distiller = DaggerDistiller(
        lambda s: Independent(Normal(student(s), 0.5), 1),
        lambda s: Independent(Normal(s @ gain.T, 0.1), 1),
        env=envs,
        params=student.parameters(),
    )
    stats = distiller.step(collect_steps=5, epochs=1)
    envs.close()
    assert stats["collected"] == 10 and stats["reward"] < 0 and stats["updates"] == 1
    assert distiller.dataset.get(th.arange(10))["states"].dtype == th.float32


def test_aggregated_dataset_ring():
    data = AggregatedDataset(5)
    data.add(x=th.arange(3), y={"a": th.zeros(3, 2)})
    data.add(x=th.arange(3, 7), y={"a": th.ones(4, 2)})
    assert len(data) == 5
    assert sorted(data.get(th.arange(5))["x"].tolist()) == [2, 3, 4, 5, 6]
    data.add(x=th.arange(10, 20), y={"a": th.ones(10, 2)})  # more than fits: the newest 5
    assert sorted(data.get(th.arange(5))["x"].tolist()) == [15, 16, 17, 18, 19]
    assert data.sample(7)["y"]["a"].shape == (7, 2)
    with pytest.raises(ValueError, match="same at every add"):
        data.add(x=th.arange(2))
    with pytest.raises(ValueError, match="capacity"):
        AggregatedDataset(0)
    with pytest.raises(ValueError, match="empty"):
        AggregatedDataset(3).sample(1)


def test_train_epochs_and_gradient_steps():
    student = nn.Linear(2, 2)
    distiller = DaggerDistiller(
        lambda s: Independent(Normal(student(s), 1.0), 1), linear_teacher, params=student.parameters(), batch_size=8
    )
    states = th.randn(20, 2)
    distiller.dataset.add(states=states, labels=states @ TEACHER_GAIN.T)
    assert distiller.train(epochs=2)["updates"] == 6  # ceil(20 / 8) per epoch
    assert distiller.train(gradient_steps=5)["updates"] == 5
    assert np.isfinite(distiller.train()["loss"])
