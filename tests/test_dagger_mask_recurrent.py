"""DAgger into a MaskableRecurrentXPPO student: its states carry both the action masks and the LSTM state it saw, by
callback (the loss hook) and by DaggerDistiller's own loop; a checkpoint loads with its own class."""

from __future__ import annotations

import numpy as np
import pytest
import torch as th
from sb3_contrib.common.envs import InvalidActionEnvDiscrete
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from test_dagger_contrib import DIM, INVALID, _ExecuteOnlyAllowed, next_action_teacher
from torch.distributions import Categorical

from sb3_xppo import DaggerCallback, DaggerDistiller, MaskableRecurrentXPPO
from sb3_xppo.dagger_distill.checkpoints import infer_algo
from sb3_xppo.dagger_distill.env_adapter import SB3VecEnvAdapter
from sb3_xppo.dagger_distill.masks import actions_allowed
from sb3_xppo.dagger_distill.policy_adapter import PolicyAdapter
from sb3_xppo.dagger_distill.policy_input import PolicyInput, is_maskable, is_recurrent, obs_of


def masked_env(n_envs: int = 2, seed: int = 0):
    return make_vec_env(lambda: InvalidActionEnvDiscrete(dim=DIM, n_invalid_actions=INVALID), n_envs=n_envs, seed=seed)


def student(env=None, **options) -> MaskableRecurrentXPPO:
    return MaskableRecurrentXPPO(
        "MlpLstmPolicy",
        env if env is not None else masked_env(),
        n_steps=32,
        batch_size=32,
        n_epochs=2,
        learning_rate=1e-3,
        seed=0,
        device="cpu",
        policy_kwargs=dict(net_arch=[16], lstm_hidden_size=16),
        **options,
    )


class _RolloutCheck(BaseCallback):
    """
    At each rollout's end: the DAgger dataset holds, for every step, the masks and the LSTM state the rollout buffer
    stored; one masked LSTM step from them gives the stored log-probability of the executed action, which the masks
    allow; the unmasked distribution would not.
    """

    def __init__(self, dagger: DaggerCallback) -> None:
        super().__init__()
        self.dagger, self.checked = dagger, 0

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        buffer, n_envs = self.model.rollout_buffer, self.model.n_envs
        rows = buffer.buffer_size * n_envs
        states = self.dagger.dataset.get(th.arange(len(self.dagger.dataset) - rows, len(self.dagger.dataset)))["states"]
        assert isinstance(states, PolicyInput) and {"action_masks", "lstm_states", "episode_starts"} <= set(states)
        np.testing.assert_array_equal(states["action_masks"].numpy(), buffer.action_masks.reshape(rows, -1).astype(bool))
        for stored, ours in zip((buffer.hidden_states_pi, buffer.cell_states_pi), states["lstm_states"], strict=True):
            np.testing.assert_allclose(ours.numpy(), stored.swapaxes(1, 2).reshape(rows, *ours.shape[1:]), atol=1e-6)
        actions = th.as_tensor(buffer.actions.reshape(rows)).long()
        assert bool(actions_allowed(states["action_masks"], actions, self.model.action_space).all())
        adapter = PolicyAdapter(self.model.policy)
        with th.no_grad():
            log_prob = adapter(states).log_prob(actions)
            unmasked = adapter(PolicyInput({k: v for k, v in states.items() if k != "action_masks"})).log_prob(actions)
        np.testing.assert_allclose(log_prob.numpy(), buffer.log_probs.reshape(rows), atol=1e-5)
        assert not np.allclose(unmasked.numpy(), buffer.log_probs.reshape(rows), atol=1e-3)
        self.checked += 1


def test_adapters_see_a_maskable_recurrent_policy():
    policy = student().policy
    assert is_maskable(policy) and is_recurrent(policy)


@pytest.mark.parametrize("beta", [0.0, 1.0])
def test_callback_dataset_holds_masks_and_lstm_states(beta):
    model = student()
    dagger = DaggerCallback(next_action_teacher, beta=beta)
    check = _RolloutCheck(dagger)
    model.learn(2 * 32 * 2, callback=[dagger, check])
    assert check.checked == 2 and len(dagger.dataset) == 2 * 32 * 2


def agreement(model: MaskableRecurrentXPPO, states: PolicyInput) -> float:
    """Share of states where the student's most likely (masked) action is the teacher's allowed label."""
    with th.no_grad():
        student_actions = PolicyAdapter(model.policy)(states).probs.argmax(dim=-1)
    labels = next_action_teacher(obs_of(states)).probs.argmax(dim=-1)
    allowed = actions_allowed(states["action_masks"], labels, model.action_space)
    return float((student_actions == labels)[allowed].float().mean())


def test_student_learns_the_teachers_allowed_actions():
    """Pure DAgger (rl_coef=0) through MaskableRecurrentXPPO's loss hook: the student comes to pick the teacher's label
    wherever the masks allow it."""
    model = student(masked_env(n_envs=4))
    dagger = DaggerCallback(next_action_teacher, rl_coef=0.0, beta=0.5)
    model.learn(32 * 4 * 2, callback=dagger)
    states = dagger.dataset.get(th.arange(len(dagger.dataset)))["states"]
    before = agreement(model, states)
    model.learn(32 * 4 * 12, callback=dagger, reset_num_timesteps=False)
    after = agreement(model, states)
    assert after > 0.8 and after - before > 0.3, (before, after)


def test_distiller_loop_with_a_maskable_recurrent_student(tmp_path):
    """DaggerDistiller's own loop: states carry masks and LSTM states, forbidden labels are dropped and never executed;
    a checkpoint of the student loads with its own class."""
    model = student()
    env = SB3VecEnvAdapter(_ExecuteOnlyAllowed(masked_env(n_envs=4)), "cpu", model.policy)
    distiller = DaggerDistiller(
        PolicyAdapter(model.policy),
        next_action_teacher,
        teacher_state_fn=lambda states, info, step: obs_of(states),
        env=env,
        optimizer=model.policy.optimizer,
        beta=1.0,
    )
    stats = distiller.collect(64)
    assert 0.3 < stats["forbidden_labels"] < 0.56 and stats["collected"] == 256
    states = distiller.dataset.get(th.arange(8))["states"]
    assert isinstance(states, PolicyInput) and {"action_masks", "lstm_states", "episode_starts"} <= set(states)
    dist = PolicyAdapter(model.policy)(states)
    assert isinstance(dist, Categorical)
    assert (dist.probs[~states["action_masks"]] == 0).all()  # the masked distribution
    before = {k: v.clone() for k, v in model.policy.state_dict().items()}
    trained = distiller.train(epochs=1)
    assert np.isfinite(trained["loss"])
    assert any(not th.equal(before[k], v) for k, v in model.policy.state_dict().items())
    model.save(tmp_path / "student.zip")
    assert infer_algo(tmp_path / "student.zip") is MaskableRecurrentXPPO


def test_recurrent_teacher_of_this_kind_is_refused():
    """A recurrent teacher (this kind included) would need its own LSTM state per student step: refused, as for
    RecurrentPPO teachers (DaggerCallback's documented limitation)."""
    with pytest.raises(ValueError, match="a recurrent teacher is not supported"):
        DaggerCallback(student())
