"""
DAgger into sb3-contrib students: RecurrentPPO / RecurrentXPPO (the LSTM state each state was seen with) and
MaskablePPO / MaskableXPPO (action masks, teacher labels the mask forbids), by callback and from the command line.
"""

import csv

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from sb3_contrib import MaskablePPO, RecurrentPPO
from sb3_contrib.common.envs import InvalidActionEnvDiscrete, InvalidActionEnvMultiDiscrete
from sb3_contrib.common.maskable.utils import get_action_masks
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import VecEnvWrapper
from test_dagger_callback import _evaluate, _MasksHold, cartpole_teacher
from test_dagger_interrupts import _Interrupt, assert_untouched, snapshot
from torch.distributions import Categorical

from sb3_xppo import DaggerCallback, DaggerDistiller, MaskableXPPO, RecurrentXPPO, kl_loss
from sb3_xppo.dagger_distill.checkpoints import load_sb3_model
from sb3_xppo.dagger_distill.env_adapter import SB3VecEnvAdapter
from sb3_xppo.dagger_distill.masks import actions_allowed
from sb3_xppo.dagger_distill.policy_adapter import PolicyAdapter
from sb3_xppo.dagger_distill.policy_input import PolicyInput, obs_of
from sb3_xppo.distill import main

DIM, INVALID = 8, 3  # InvalidActionEnvDiscrete: 3 of the 7 actions that are not the state are forbidden at each step
MASKED_ENV_ID = "DaggerInvalidActionDiscrete-v0"
if MASKED_ENV_ID not in gym.registry:
    gym.register(
        MASKED_ENV_ID,
        entry_point="sb3_contrib.common.envs:InvalidActionEnvDiscrete",
        kwargs=dict(dim=DIM, n_invalid_actions=INVALID),
    )


def lstm(**extra):
    """Tiny LSTM policies (fresh dicts: SB3 writes into policy_kwargs)."""
    return dict(policy_kwargs=dict(net_arch=[16], lstm_hidden_size=16), device="cpu", **extra)


def masked_env(n_envs: int = 2, seed: int = 0):
    return make_vec_env(lambda: InvalidActionEnvDiscrete(dim=DIM, n_invalid_actions=INVALID), n_envs=n_envs, seed=seed)


def next_action_teacher(obs: th.Tensor) -> Categorical:
    """A callable teacher answering ``(obs + 1) % DIM``, whatever the masks: forbidden with probability 3/7."""
    return Categorical(logits=3.0 * th.nn.functional.one_hot((obs.long() + 1) % DIM, DIM).float())


# ------------------------------------------------------------------------------------------------------------------
# Recurrent students
# ------------------------------------------------------------------------------------------------------------------


def _rollout_agreement(student, teacher, steps: int = 64, seed: int = 7) -> float:
    """The recurrent student acts (deterministic, its LSTM state carried); share of steps where the teacher agrees."""
    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    obs, state, starts, agree = env.reset(), None, np.ones(8, dtype=bool), []
    for _ in range(steps):
        action, state = student.predict(obs, state=state, episode_start=starts, deterministic=True)
        agree.append(action == cartpole_teacher().predict(obs, deterministic=True)[0])
        obs, _, starts, _ = env.step(action)
    return float(np.mean(agree))


@pytest.mark.slow
@pytest.mark.parametrize(("algo", "options"), [(RecurrentPPO, dict(beta=0.5)), (RecurrentXPPO, dict(rl_coef=0.0))])
def test_recurrent_students_learn_to_agree_with_a_feed_forward_teacher(algo, options):
    """RecurrentPPO (own distillation steps, teacher's actions half the time) and RecurrentXPPO (loss hook, pure DAgger)."""
    teacher = cartpole_teacher()
    env = make_vec_env("CartPole-v1", n_envs=4, seed=0)
    student = algo("MlpLstmPolicy", env, n_steps=64, batch_size=64, n_epochs=4, learning_rate=1e-3, seed=0, **lstm())
    before = _rollout_agreement(student, teacher)
    student.learn(2_048, callback=DaggerCallback(teacher, **options))
    after = _rollout_agreement(student, teacher)
    # Measured: 0.04 -> 0.74 (RecurrentPPO), 0.04 -> 0.67 (RecurrentXPPO); returns 157 and 96 against 9 untrained
    assert before < 0.3 and after > 0.5 and after - before > 0.35
    assert _evaluate(student) > 2 * _evaluate(algo("MlpLstmPolicy", "CartPole-v1", seed=0, **lstm()))


class _RecurrentRolloutCheck(BaseCallback):
    """
    At each rollout's end (before train() moves the weights): the DAgger dataset holds, for every step of the rollout,
    the LSTM state and episode start RecurrentPPO's buffer stored, and one LSTM step from it gives the stored
    log-probability of the executed action (the teacher's when beta = 1).
    """

    def __init__(self, dagger: DaggerCallback, teacher) -> None:
        super().__init__()
        self.dagger, self.teacher, self.checked = dagger, teacher, 0

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        buffer, n_envs = self.model.rollout_buffer, self.model.n_envs
        rows = buffer.buffer_size * n_envs
        states = self.dagger.dataset.get(th.arange(len(self.dagger.dataset) - rows, len(self.dagger.dataset)))["states"]
        assert isinstance(states, PolicyInput)
        np.testing.assert_array_equal(states["obs"].numpy(), buffer.observations.reshape(rows, -1))
        np.testing.assert_array_equal(states["episode_starts"].numpy(), buffer.episode_starts.reshape(rows))
        # The buffer: (n_steps, n_layers, n_envs, size); the dataset: (n_steps * n_envs, n_layers, size)
        for stored, ours in zip((buffer.hidden_states_pi, buffer.cell_states_pi), states["lstm_states"], strict=True):
            np.testing.assert_allclose(ours.numpy(), stored.swapaxes(1, 2).reshape(rows, *ours.shape[1:]), atol=1e-6)
        actions = th.as_tensor(buffer.actions.reshape(rows)).long()
        with th.no_grad():
            log_prob = PolicyAdapter(self.model.policy)(states).log_prob(actions)
            teacher_actions = PolicyAdapter(self.teacher.policy)(states).probs.argmax(dim=-1)
        np.testing.assert_allclose(log_prob.numpy(), buffer.log_probs.reshape(rows), atol=1e-5)
        if self.dagger.beta(1.0) == 1.0:
            assert th.equal(actions, teacher_actions)
        self.checked += 1


@pytest.mark.parametrize("beta", [0.0, 1.0])
@pytest.mark.parametrize("algo", [RecurrentPPO, RecurrentXPPO])
def test_recurrent_dataset_holds_the_lstm_state_the_policy_saw(algo, beta):
    teacher = PPO("MlpPolicy", "CartPole-v1", seed=5, device="cpu", policy_kwargs=dict(net_arch=[16]))
    env = make_vec_env("CartPole-v1", n_envs=3, seed=0)
    student = algo("MlpLstmPolicy", env, n_steps=32, batch_size=32, n_epochs=2, seed=0, **lstm())
    dagger = DaggerCallback(teacher, beta=beta)
    check = _RecurrentRolloutCheck(dagger, teacher)
    student.learn(3 * 32 * 2, callback=[dagger, check])
    assert check.checked == 2 and len(dagger.dataset) == 3 * 32 * 2
    # Episodes ended within the rollouts (CartPole is short at first): the episode starts were stored as well
    assert dagger.dataset.get(th.arange(len(dagger.dataset)))["states"]["episode_starts"][3:].sum() > 0
    assert "forward" not in vars(student.policy)


def test_recurrent_policies_need_their_lstm_state_and_recurrent_teachers_are_refused(tmp_path, capsys):
    recurrent = RecurrentPPO("MlpLstmPolicy", "CartPole-v1", n_steps=32, seed=0, **lstm())
    with pytest.raises(ValueError, match="is recurrent: it reads a PolicyInput with the LSTM state"):
        PolicyAdapter(recurrent.policy)(th.zeros(2, 4))
    with pytest.raises(ValueError, match="a recurrent teacher is not supported"):
        DaggerCallback(recurrent)
    recurrent.save(tmp_path / "lstm.zip")
    argv = ["--teacher", str(tmp_path / "lstm.zip"), "--student-algo", "ppo", "--env", "CartPole-v1"]
    assert main([*argv, "--timesteps", "64", "--out", str(tmp_path / "out.zip")]) == 2
    assert "a recurrent teacher is not supported" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------------------------
# Maskable students
# ------------------------------------------------------------------------------------------------------------------


def _masked_agreement(student, seed: int = 3) -> float:
    """Share of visited states where the student's masked best action is the teacher's label, among allowed labels."""
    env = masked_env(n_envs=8, seed=seed)
    obs, hits = env.reset(), []
    for _ in range(16):
        masks = get_action_masks(env)
        action, _ = student.predict(obs, deterministic=True, action_masks=masks)
        label = (obs + 1) % DIM
        allowed = masks[np.arange(8), label]
        hits += list((action == label)[allowed])
        obs, *_ = env.step(action)
    return float(np.mean(hits))


@pytest.mark.parametrize("algo", [MaskablePPO, MaskableXPPO])
def test_maskable_students_drop_the_labels_the_mask_forbids(tmp_path, algo):
    """A teacher that ignores the masks: its forbidden labels are logged, never fitted nor executed (beta)."""
    student = algo(
        "MlpPolicy", masked_env(), n_steps=64, batch_size=64, seed=0, device="cpu", policy_kwargs=dict(net_arch=[16])
    )
    student.set_logger(configure(str(tmp_path), ["csv"]))
    before = _masked_agreement(student)
    masks_hold = _MasksHold()
    student.learn(1_024, callback=[DaggerCallback(next_action_teacher, beta=0.5), masks_hold])
    assert masks_hold.locals_checked  # every executed action was allowed
    after = _masked_agreement(student)
    assert before < 0.5 and after > 0.95
    with open(tmp_path / "progress.csv") as file:
        rows = [row for row in csv.DictReader(file) if row["distill/forbidden_labels"]]
    assert len(rows) >= 6
    shares = np.array([float(row["distill/forbidden_labels"]) for row in rows])
    losses = np.array([float(row["distill/loss"]) for row in rows])
    assert 0.3 < shares.mean() < 0.56  # 3/7 of the labels are forbidden
    assert np.all(losses < 5.0)  # a forbidden label's -log p of ~1e8 never enters the loss


def test_forbidden_labels_are_dropped_from_the_loss_by_hand():
    student = MaskablePPO("MlpPolicy", InvalidActionEnvMultiDiscrete(dims=[2, 3], n_invalid_actions=1), seed=0, device="cpu")
    adapter = PolicyAdapter(student.policy)
    obs = th.as_tensor(np.stack([student.observation_space.sample() for _ in range(4)])).float()
    masks = th.tensor([[1, 1, 1, 1, 1], [1, 0, 1, 1, 1], [1, 1, 0, 1, 1], [1, 1, 1, 1, 0]]).bool()
    labels = (th.tensor([0, 1, 1, 0]), th.tensor([2, 1, 1, 2]))  # row 1: head 0 forbidden; row 3: head 1 forbidden
    assert actions_allowed(masks, th.stack(labels, dim=-1), student.action_space).tolist() == [True, False, True, False]

    def teacher(states):  # any distribution over the two heads; the labels are given
        return (Categorical(logits=th.zeros(len(states), 2)), Categorical(logits=th.zeros(len(states), 3)))

    states = PolicyInput(obs=obs, action_masks=masks)
    distiller = DaggerDistiller(adapter, teacher)
    out = distiller.compute(states, obs, labels)
    assert out.forbidden.tolist() == [False, True, False, True] and out.valid.tolist() == [True, False, True, False]
    out.breakdown.loss.backward()
    assert all(th.isfinite(p.grad).all() for p in student.policy.parameters() if p.grad is not None)
    with th.no_grad():  # the mean NLL of the two allowed rows, under the masked student
        dists = adapter(states)
        nll = -(dists[0].log_prob(labels[0]) + dists[1].log_prob(labels[1]))
    assert th.allclose(out.breakdown.loss, nll[[0, 2]].mean())
    assert nll[1] > 1e7  # what a forbidden label would have added
    # kl_loss compares the teacher restricted to the allowed actions (renormalized): no 1e8 term
    kl = DaggerDistiller(adapter, teacher, loss_fn=kl_loss).compute(states, obs, labels).breakdown.loss
    assert th.isfinite(kl) and kl < 10


class _ExecuteOnlyAllowed(VecEnvWrapper):
    """Fails when an executed action is one the current masks forbid."""

    def reset(self):
        return self.venv.reset()

    def step_async(self, actions) -> None:
        allowed = actions_allowed(get_action_masks(self.venv), th.as_tensor(actions), self.action_space)
        assert bool(allowed.all()), f"executed a forbidden action: {actions}"
        self.venv.step_async(actions)

    def step_wait(self):
        return self.venv.step_wait()


def test_distiller_loop_never_executes_a_forbidden_label():
    """DaggerDistiller's own loop (the command line's) with beta = 1: forbidden labels fall back to the student's action."""
    student = MaskablePPO("MlpPolicy", masked_env(), n_steps=64, seed=0, device="cpu", policy_kwargs=dict(net_arch=[16]))
    env = SB3VecEnvAdapter(_ExecuteOnlyAllowed(masked_env(n_envs=4)), "cpu", student.policy)
    distiller = DaggerDistiller(
        PolicyAdapter(student.policy),
        next_action_teacher,  # a callable teacher reads the observations of the student's PolicyInput
        teacher_state_fn=lambda states, info, step: obs_of(states),
        env=env,
        beta=1.0,
    )
    stats = distiller.collect(64)
    assert 0.3 < stats["forbidden_labels"] < 0.56 and stats["collected"] == 256
    assert isinstance(distiller.dataset.get(th.arange(2))["states"], PolicyInput)


# ------------------------------------------------------------------------------------------------------------------
# The command line, checkpoint to checkpoint; interrupts
# ------------------------------------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:.*render_mode.*:UserWarning")  # make_vec_env's render_mode, unused
@pytest.mark.parametrize(
    ("env_id", "algo", "cls"),
    [
        ("CartPole-v1", "xppo_lstm", RecurrentXPPO),
        ("CartPole-v1", "ppo_lstm", RecurrentPPO),
        (MASKED_ENV_ID, "xppo_mask", MaskableXPPO),
    ],
)
def test_command_line_round_trip(tmp_path, capsys, env_id, algo, cls):
    """A fresh student of that class, then its checkpoint as --student (class inferred), then loaded and trained on."""
    PPO("MlpPolicy", env_id, seed=5, device="cpu", policy_kwargs=dict(net_arch=[16])).save(tmp_path / "teacher.zip")
    kwargs = "dict(net_arch=[16], lstm_hidden_size=16)" if "lstm" in algo else "dict(net_arch=[16])"
    common = ["--teacher", str(tmp_path / "teacher.zip"), "--env", env_id, "--timesteps", "256", "--n-envs", "4"]
    common += ["--eval-episodes", "1", "--no-progress-bar"]
    argv = [*common, "--student-algo", algo, "--policy-kwargs", kwargs, "--out", str(tmp_path / "first.zip")]
    assert main(argv) == 0
    assert type(load_sb3_model(tmp_path / "first.zip")) is cls
    assert main([*common, "--student", str(tmp_path / "first.zip"), "--out", str(tmp_path / "second.zip")]) == 0
    printed = capsys.readouterr().out
    assert printed.count(f"saved the student ({cls.__name__})") == 2
    if cls is MaskableXPPO:  # an unmasked PPO teacher: some of its labels are forbidden
        assert printed.count("of the teacher's labels were actions the masks forbid") == 2
    second = cls.load(tmp_path / "second.zip", env=make_vec_env(env_id, n_envs=2), device="cpu")
    assert second.num_timesteps == 512 and second.policy.mlp_extractor.policy_net[0].out_features == 16
    second.learn(64, reset_num_timesteps=False)


class _Spy:
    """A callable teacher over ``n`` actions that counts its calls."""

    def __init__(self, n: int) -> None:
        self.n, self.calls = n, 0

    def __call__(self, obs: th.Tensor) -> Categorical:
        self.calls += 1
        return Categorical(logits=th.zeros(len(obs), self.n))


@pytest.mark.parametrize("algo", [RecurrentPPO, RecurrentXPPO, MaskablePPO, MaskableXPPO])
def test_keyboard_interrupt_leaves_contrib_students_untouched(algo):
    """Interrupted inside env.step after a first rollout and update (beta = 1 and XPPO's loss hook both ran)."""
    recurrent = algo in (RecurrentPPO, RecurrentXPPO)
    env = _Interrupt(make_vec_env("CartPole-v1", n_envs=2, seed=0) if recurrent else masked_env())
    extra = lstm() if recurrent else dict(policy_kwargs=dict(net_arch=[16]), device="cpu")
    model = algo("MlpLstmPolicy" if recurrent else "MlpPolicy", env, n_steps=32, batch_size=32, seed=0, **extra)
    model.learn(64)
    before = snapshot(model)
    spy = _Spy(2 if recurrent else DIM)
    env.at = env.steps + 40
    with pytest.raises(KeyboardInterrupt):
        model.learn(512, callback=DaggerCallback(spy, beta=1.0, gradient_steps=2))
    assert spy.calls > 0
    assert_untouched(model, before, spy)


def test_maskable_checkpoints_infer_their_class(tmp_path):
    """Save and infer: MaskablePPO / MaskableXPPO / RecurrentPPO / RecurrentXPPO keep their own class."""
    models = [
        MaskablePPO("MlpPolicy", masked_env(), n_steps=32, device="cpu"),
        MaskableXPPO("MlpPolicy", masked_env(), n_steps=32, device="cpu"),
        RecurrentPPO("MlpLstmPolicy", "CartPole-v1", n_steps=32, **lstm()),
        RecurrentXPPO("MlpLstmPolicy", "CartPole-v1", n_steps=32, **lstm()),
    ]
    for model in models:
        model.save(tmp_path / "m.zip")
        assert type(load_sb3_model(tmp_path / "m.zip")) is type(model)
    assert isinstance(masked_env().action_space, spaces.Discrete)
