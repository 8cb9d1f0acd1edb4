"""
PCGrad inside XPPO (Yu et al. 2020, Gradient Surgery for Multi-Task Learning): ``group_gradients='pcgrad'`` against a
hand-built gradient on one minibatch, its reductions, the groups' advantage terms, errors, save/load and rl-zoo3;
the auxiliary loss hook's surgery (``register_auxiliary_loss_hook``, ``DaggerCallback(gradient_surgery=True)``).
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path

import numpy as np
import pytest
import torch as th
import yaml
from helpers import params_equal
from rl_zoo3.exp_manager import ExperimentManager
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv
from test_multi_critic import GroupEnv, VectorFromReward

from sb3_xppo import XPPO, MultiCriticRolloutBuffer, RecurrentXPPO, pcgrad_auxiliary, pcgrad_combine, zoo
from sb3_xppo.core.gradient_surgery import backward_with_auxiliary, conflict_fraction, pcgrad_group_loss
from sb3_xppo.dagger_distill import DaggerCallback

GROUPS = ["action_1", "action_0", "u"]


class OpposedGroupEnv(GroupEnv):
    """GroupEnv whose first two groups reward opposite actions (their actor gradients conflict)."""

    def step(self, action):
        u = self.u
        obs, _, terminated, truncated, info = super().step(action)
        vector = np.array([float(action), 1.0 - float(action), -(u**2)], dtype=np.float32)
        return obs, float(vector.sum()), terminated, truncated, {**info, "vector_reward": vector}


def group_env(n_envs: int = 2) -> DummyVecEnv:
    return DummyVecEnv([lambda: OpposedGroupEnv() for _ in range(n_envs)])


def pcgrad_model(**kwargs) -> XPPO:
    options = dict(
        reward_groups=GROUPS,
        group_gradients="pcgrad",
        n_steps=32,
        batch_size=16,
        n_epochs=2,
        seed=0,
        device="cpu",
        policy_kwargs=dict(net_arch=[16]),
    )
    return XPPO("MlpPolicy", group_env(), **{**options, **kwargs})


class SnapshotAtRolloutEnd(BaseCallback):
    """The policy as it was when the (first) rollout ended, before train()."""

    def __init__(self) -> None:
        super().__init__()
        self.policy = None

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        if self.policy is None:
            self.policy = copy.deepcopy(self.model.policy)


def flat_grads(grads, params) -> th.Tensor:
    return th.cat([(g if g is not None else th.zeros_like(p)).reshape(-1) for g, p in zip(grads, params, strict=True)])


@pytest.mark.parametrize("normalize_groups", [True, False])
def test_pcgrad_gradient_equals_the_hand_built_one(normalize_groups):
    # One minibatch of the whole rollout, one epoch, no clipping: the gradient the optimizer steps with is
    # PCGrad over the groups' surrogate gradients plus the critics' and the entropy's, built here by hand
    model = pcgrad_model(
        n_steps=32, batch_size=64, n_epochs=1, ent_coef=0.01, max_grad_norm=1e9, fast_paths=False,
        normalize_groups=normalize_groups, group_weights=[1.0, 2.0, 0.5],
    )  # fmt: skip
    model.clip_grad_per_part = False
    captured: list[th.Tensor] = []
    capture_step_grads(model, captured)
    snapshot = SnapshotAtRolloutEnd()
    model.learn(64, callback=snapshot)
    assert len(captured) == 1

    buffer = model.rollout_buffer
    policy = snapshot.policy
    params = list(policy.parameters())
    obs = th.as_tensor(buffer.observations)
    actions = th.as_tensor(buffer.actions).long().flatten()
    old_log_prob = th.as_tensor(buffer.log_probs).flatten()
    terms = th.as_tensor(buffer.group_terms)  # (n, G): sum to the combined advantages
    assert th.allclose(terms.sum(-1), th.as_tensor(buffer.advantages).flatten(), atol=1e-5)
    values, log_prob, entropy = policy.evaluate_actions(obs, actions)
    # PPO's z-score of the combined advantages, split into the groups' terms
    z = (terms - terms.mean(0)) / (terms.sum(-1).std() + 1e-8)
    ratio = th.exp(log_prob - old_log_prob)
    group_grads = []
    for g in range(len(GROUPS)):
        loss = -th.min(ratio * z[:, g], th.clamp(ratio, 0.8, 1.2) * z[:, g]).mean()
        group_grads.append(flat_grads(th.autograd.grad(loss, params, retain_graph=True, allow_unused=True), params))
    # the critics' losses: weighed 1 each in "balanced" mode, w_g ** 2 in "scalarize" mode (group_value_weights=None)
    value_weights = th.ones(3) if normalize_groups else th.tensor([1.0, 2.0, 0.5]) ** 2
    value_loss = (((th.as_tensor(buffer.returns) - values) ** 2).mean(0) * value_weights).sum()
    rest = 0.01 * -entropy.mean() + 0.5 * value_loss
    expected = pcgrad_combine(group_grads, reduce="sum") + flat_grads(th.autograd.grad(rest, params), params)
    assert conflict_fraction(th.stack(group_grads)) > 0  # the case exercises the projection
    assert th.allclose(captured[0], expected, rtol=1e-4, atol=1e-6)


def test_one_group_is_the_summed_gradient():
    # One group: nothing to project off, so the plain multi-critic model's update (up to the order of the sums)
    def env():
        return make_vec_env("CartPole-v1", n_envs=2, seed=0, wrapper_class=VectorFromReward)

    kwargs = dict(n_steps=32, batch_size=16, n_epochs=2, device="cpu", seed=3, policy_kwargs=dict(net_arch=[16]))
    kwargs.update(reward_groups=1, group_weights=[1], normalize_groups=False)
    plain = XPPO("MlpPolicy", env(), **kwargs).learn(128)
    pcgrad = XPPO("MlpPolicy", env(), group_gradients="pcgrad", **kwargs).learn(128)
    for p, q in zip(plain.policy.parameters(), pcgrad.policy.parameters(), strict=True):
        assert th.allclose(p, q, atol=1e-5)
    assert pcgrad.logger.name_to_value["train/pcgrad_conflict_fraction"] == 0.0


def test_non_conflicting_groups_are_summed():
    # pcgrad_group_loss: its value is the sum of the losses, its gradient the sum where the gradients agree
    w = th.nn.Parameter(th.tensor([1.0, 2.0]))
    losses = [(w * th.tensor([1.0, 0.0])).sum(), (w * th.tensor([1.0, 1.0])).sum()]
    loss, conflicts = pcgrad_group_loss(losses, [w])
    assert loss.item() == 4.0 and conflicts.item() == 0.0
    loss.backward()
    assert th.equal(w.grad, th.tensor([2.0, 1.0]))


def test_conflicting_groups_by_hand():
    w = th.nn.Parameter(th.zeros(2))
    unused = th.nn.Parameter(th.ones(3))  # reached by no loss: no gradient from it
    losses = [(w * th.tensor([1.0, 0.0])).sum(), (w * th.tensor([-1.0, 1.0])).sum()]
    loss, conflicts = pcgrad_group_loss(losses, [w, unused])
    loss.backward()
    # g1' = (0.5, 0.5), g2' = (0, 1) (tests/test_functional_pcgrad.py)
    assert th.allclose(w.grad, th.tensor([0.5, 1.5])) and unused.grad is None and conflicts.item() == 1.0


def test_fast_paths_same_bits():
    fast = pcgrad_model(fast_paths=True).learn(128)
    slow = pcgrad_model(fast_paths=False).learn(128)
    assert params_equal(fast.policy, slow.policy)


@pytest.mark.parametrize("normalize_advantage", ["rollout", False])
def test_other_advantage_normalizations_run_and_log(normalize_advantage):
    model = pcgrad_model(normalize_advantage=normalize_advantage).learn(64)
    assert 0.0 <= model.logger.name_to_value["train/pcgrad_conflict_fraction"] <= 1.0


@pytest.mark.parametrize("reduce", ["mean", "sum"])
@pytest.mark.parametrize("masked", [False, True])
def test_group_terms_sum_to_the_combined_advantages(reduce, masked):
    rng = np.random.default_rng(0)
    buffer = MultiCriticRolloutBuffer(
        8, GroupEnv.observation_space, GroupEnv.action_space, n_envs=2, n_groups=3, group_weights=[1.0, 2.0, 0.5],
        group_reduce=reduce, group_terms=True,
    )  # fmt: skip
    for _ in range(8):
        masks = rng.random((2, 3)) < 0.6 if masked else None
        buffer.add(
            rng.random((2, 2)).astype(np.float32), np.zeros((2, 1)), rng.normal(size=(2, 3)), np.zeros(2),
            th.as_tensor(rng.normal(size=(2, 3))), th.zeros(2), group_masks=masks,
        )  # fmt: skip
    buffer.compute_returns_and_advantage(th.zeros(2, 3), np.zeros(2))
    assert np.allclose(buffer.group_terms.sum(-1), buffer.advantages, atol=1e-6)
    if masked:
        assert (buffer.group_terms[~buffer.group_masks] == 0).all()
    batch = next(buffer.get(4))
    assert batch.advantages.shape == (4, 3)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(reward_groups=None), "needs reward_groups"),
        (dict(group_reduce="max"), "group_reduce"),
        (dict(group_reduce=lambda a: a.sum(0)), "group_reduce"),
        (dict(group_gradients="cagrad"), "group_gradients must be one of"),
    ],
)
def test_refused_combinations(kwargs, match):
    with pytest.raises(ValueError, match=match):
        pcgrad_model(**kwargs)


def test_buffer_refuses_group_terms_of_a_nonlinear_reduce():
    with pytest.raises(ValueError, match="group_terms needs group_reduce"):
        MultiCriticRolloutBuffer(8, GroupEnv.observation_space, GroupEnv.action_space, n_groups=2, group_reduce="max",
                                 group_terms=True)  # fmt: skip


def test_recurrent_refuses_it():
    with pytest.raises(ValueError, match="needs reward_groups"):
        RecurrentXPPO("MlpLstmPolicy", "CartPole-v1", group_gradients="pcgrad")


def test_save_load_round_trip(tmp_path):
    model = pcgrad_model().learn(64)
    model.save(tmp_path / "model.zip")
    loaded = XPPO.load(tmp_path / "model.zip", env=group_env(), device="cpu")
    assert loaded.options.group_gradients == "pcgrad" and loaded.rollout_buffer.keeps_group_terms
    assert params_equal(model.policy, loaded.policy)
    loaded.learn(64)
    assert "train/pcgrad_conflict_fraction" in loaded.logger.name_to_value
    # load() may turn it off (the combined advantages again) but not to a bad value
    plain = XPPO.load(tmp_path / "model.zip", env=group_env(), device="cpu", group_gradients=None)
    assert not plain.rollout_buffer.keeps_group_terms
    plain.learn(64)
    assert plain.rollout_buffer.group_terms.size == 0
    assert "train/pcgrad_conflict_fraction" not in plain.logger.name_to_value
    with pytest.raises(ValueError, match="group_gradients must be one of"):
        XPPO.load(tmp_path / "model.zip", env=group_env(), device="cpu", group_gradients="pc")


def test_an_rl_zoo3_config_sets_it(tmp_path: Path) -> None:
    zoo.register()
    config = tmp_path / "config.yml"
    entry = dict(policy="MlpPolicy", n_timesteps=100, reward_groups=1, group_gradients="pcgrad")
    entry["env_wrapper"] = ["test_multi_critic.VectorFromReward"]
    config.write_text(yaml.safe_dump({"CartPole-v1": entry}))
    manager = ExperimentManager(
        argparse.Namespace(), "xppo", "CartPole-v1", str(tmp_path / "logs"), config=str(config), device="cpu"
    )
    model, _ = manager.setup_experiment()
    assert type(model) is XPPO and model.options.group_gradients == "pcgrad"
    model.env.close()


# --- the auxiliary loss: projected off the RL loss's gradient -----------------------------------------------------------


def test_backward_with_auxiliary_by_hand():
    shared = th.nn.Parameter(th.tensor([1.0, 1.0]))
    critic = th.nn.Parameter(th.tensor([2.0]))
    main = (shared * th.tensor([1.0, 0.0])).sum() + 3.0 * critic.sum()  # grads (1, 0) and (3)
    aux = (shared * th.tensor([-1.0, 1.0])).sum()  # (-1, 1): conflicts with (1, 0) on the shared parameters
    conflicted = backward_with_auxiliary(main, aux, [shared, critic])
    expected = pcgrad_auxiliary(th.tensor([1.0, 0.0]), th.tensor([-1.0, 1.0]))  # (1, 0) + (0, 1)
    assert conflicted.item() and th.equal(shared.grad, expected) and th.equal(critic.grad, th.tensor([3.0]))


def test_backward_with_auxiliary_agreeing_is_the_sum():
    w = th.nn.Parameter(th.tensor([1.0, -2.0]))
    conflicted = backward_with_auxiliary((w * th.tensor([1.0, 2.0])).sum(), (w * th.tensor([0.5, 0.0])).sum(), [w])
    assert not conflicted.item() and th.equal(w.grad, th.tensor([1.5, 2.0]))


def capture_step_grads(model: XPPO, into: list) -> None:
    """Append the flat gradient of each optimizer step (torch's path: ``fast_paths=False``) to ``into``."""
    step, params = model.policy.optimizer.step, list(model.policy.parameters())

    def capturing_step(*args, **kwargs):
        into.append(flat_grads([p.grad for p in params], params))
        return step(*args, **kwargs)

    model.policy.optimizer.step = capturing_step


def test_auxiliary_loss_hook_gradient_is_pcgrad_auxiliary():
    def make() -> XPPO:
        return XPPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=64, n_epochs=1, max_grad_norm=1e9, fast_paths=False,
                    seed=0, device="cpu", policy_kwargs=dict(net_arch=[8]))  # fmt: skip

    # The same seed, the same rollout: the plain model's gradient is the surgery model's RL gradient
    plain, rl = make(), []
    capture_step_grads(plain, rl)
    plain.learn(64)
    model, grads = make(), []
    capture_step_grads(model, grads)
    params = dict(model.policy.named_parameters())
    reached = [name for name in params if name.startswith("action_net.")]
    offsets = np.cumsum([0] + [p.numel() for p in params.values()])
    slices = {name: slice(offsets[i], offsets[i + 1]) for i, name in enumerate(params)}
    # an auxiliary loss whose gradient on the action net is minus the RL one plus a constant: they conflict there
    pull = {name: -rl[0][slices[name]].reshape(params[name].shape) + 0.01 for name in reached}
    handle = model.register_auxiliary_loss_hook(lambda m, data: sum((pull[n] * params[n]).sum() for n in reached))
    model.learn(64)
    aux = th.zeros_like(rl[0])
    for name in reached:
        aux[slices[name]] = pull[name].reshape(-1)
    mask = aux != 0
    assert (rl[0][mask] @ aux[mask]).item() < 0
    expected = rl[0].clone()
    expected[mask] = pcgrad_auxiliary(rl[0][mask], aux[mask])
    assert th.allclose(grads[0], expected, atol=1e-6)
    assert model.logger.name_to_value["train/pcgrad_auxiliary_conflict_fraction"] == 1.0
    handle.remove()
    assert not model._auxiliary_loss_hooks


def test_dagger_gradient_surgery_runs_with_an_xppo_student_and_is_refused_for_stock_ones():
    teacher = PPO("MlpPolicy", "CartPole-v1", seed=1, device="cpu", policy_kwargs=dict(net_arch=[8]))
    student = XPPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=32, n_epochs=1, seed=0, device="cpu",
                   policy_kwargs=dict(net_arch=[8]))  # fmt: skip
    callback = DaggerCallback(teacher, gradient_surgery=True)
    student.learn(128, callback=callback)
    assert 0.0 <= student.logger.name_to_value["train/pcgrad_auxiliary_conflict_fraction"] <= 1.0
    assert not student._auxiliary_loss_hooks and not student._loss_hooks  # removed when learn() ended
    stock = PPO("MlpPolicy", "CartPole-v1", n_steps=64, device="cpu")
    with pytest.raises(ValueError, match="gradient_surgery=True needs a student of the XPPO family"):
        stock.learn(64, callback=DaggerCallback(teacher, gradient_surgery=True))
    with pytest.raises(ValueError, match="gradient_surgery must be True or False"):
        DaggerCallback(teacher, gradient_surgery="yes")
