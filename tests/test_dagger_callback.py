"""DaggerCallback: students PPO, A2C, TRPO, XPPO, MaskablePPO, SAC, TD3; teachers SB3 / .zip / callable; errors."""

import csv
import functools

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from sb3_contrib import TRPO, MaskablePPO
from sb3_contrib.common.envs import InvalidActionEnvDiscrete
from stable_baselines3 import A2C, DQN, PPO, SAC, TD3
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.logger import configure
from stable_baselines3.common.utils import obs_as_tensor
from stable_baselines3.common.vec_env import VecEnvWrapper
from torch.distributions import Categorical

from sb3_xppo import XPPO, DaggerCallback, MaskableXPPO, RecurrentXPPO, best_action, kl_loss
from sb3_xppo.dagger_distill import StudentObsWrapper
from sb3_xppo.dagger_distill.masks import actions_allowed
from sb3_xppo.dagger_distill.policy_adapter import PolicyAdapter


def small(**extra):
    """Tiny networks; fresh dicts each time (SB3 writes into policy_kwargs)."""
    return dict(policy_kwargs=dict(net_arch=[16]), device="cpu", **extra)


@functools.cache
def cartpole_teacher() -> PPO:
    """A CartPole teacher trained by SB3 PPO (rl-zoo3's CartPole settings, shortened), once per test process."""
    env = make_vec_env("CartPole-v1", n_envs=8, seed=2)
    teacher = PPO(
        "MlpPolicy",
        env,
        n_steps=32,
        batch_size=256,
        gae_lambda=0.8,
        gamma=0.98,
        n_epochs=20,
        ent_coef=0.0,
        learning_rate=lambda p: 1e-3 * p,
        clip_range=lambda p: 0.2 * p,
        seed=2,
        device="cpu",
    )
    teacher.learn(20_000)
    # A weaker run (another machine's floating point) trains on until it balances reliably
    while _evaluate(teacher) < 450 and teacher.num_timesteps < 60_000:
        teacher.learn(10_000, reset_num_timesteps=False)
    return teacher


def _evaluate(model, n_episodes: int = 8, env=None) -> float:
    env = env or make_vec_env("CartPole-v1", n_envs=8, seed=123)
    return float(evaluate_policy(model, env, n_eval_episodes=n_episodes)[0])


def _agreement(student, teacher, obs) -> float:
    """Share of observations where the student's deterministic action is the teacher's."""
    s, _ = student.predict(obs, deterministic=True)
    t, _ = teacher.predict(obs, deterministic=True)
    return float(np.mean(np.all(np.reshape(s == t, (len(obs), -1)), axis=-1)))


def _cartpole_obs(n: int = 512, seed: int = 0) -> np.ndarray:
    """States the teacher visits (its own rollouts), where agreement matters."""
    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    obs, states = env.reset(), []
    for _ in range(n // 8):
        states.append(obs)
        obs, *_ = env.step(cartpole_teacher().predict(obs, deterministic=True)[0])
    return np.concatenate(states)


@pytest.mark.slow
def test_fresh_ppo_student_reaches_95_percent_of_the_teacher_in_5120_steps():
    teacher = cartpole_teacher()
    teacher_return = _evaluate(teacher, n_episodes=16)
    student = PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=8, seed=0), n_steps=64, seed=0, device="cpu")
    student.learn(5_120, callback=DaggerCallback(teacher))  # default settings: 8 envs x 64 steps x 10 rollouts
    assert student.num_timesteps == 5_120
    assert _evaluate(student, n_episodes=16) >= 0.95 * teacher_return
    # Reference: PPO alone is far from it after the same steps
    alone = PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=8, seed=0), n_steps=64, seed=0, device="cpu")
    alone.learn(5_120)
    assert _evaluate(alone, n_episodes=8) < 0.95 * teacher_return


def _csv_logger(model, folder) -> None:
    model.set_logger(configure(str(folder), ["csv"]))


@pytest.mark.slow
def test_loaded_checkpoint_student_with_schedules_logs_and_reloads(tmp_path):
    """A PPO checkpoint as the student, the teacher as a .zip path, a decaying weight: logs, then PPO.load works."""
    teacher = cartpole_teacher()
    teacher.save(tmp_path / "teacher.zip")
    PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=4), n_steps=64, seed=1, device="cpu").save(tmp_path / "student.zip")
    student = PPO.load(tmp_path / "student.zip", env=make_vec_env("CartPole-v1", n_envs=4, seed=1), device="cpu")
    _csv_logger(student, tmp_path / "logs")
    obs = _cartpole_obs()
    teacher_return = _evaluate(teacher)
    assert _evaluate(student) < 0.95 * teacher_return  # not there yet
    # the teacher's schedules are lambdas (pickled by value, stock SB3's file: unsigned): it loads to act, each schedule
    # an inert stand-in, said by a warning naming the field
    with pytest.warns(UserWarning, match=r"data\['learning_rate'\]: a function pickled by value .*inert stand-in"):
        callback = DaggerCallback(str(tmp_path / "teacher.zip"), weight=lambda p: p, beta=lambda p: 0.5 * p)
    student.learn(2_048, callback=callback)
    # The return, not the agreement: this teacher's logits nearly tie on many of its states (either action balances)
    assert _evaluate(student) >= 0.95 * teacher_return
    after = _agreement(student, teacher, obs)
    with open(tmp_path / "logs" / "progress.csv") as file:
        rows = list(csv.DictReader(file))
    assert len(rows) == 8  # one per rollout of 4 envs x 64 steps
    logs = {key: np.array([float(row[key] or "nan") for row in rows]) for key in rows[0] if key.startswith("distill/")}
    # The first distillation round runs before the second rollout, once the first one filled the dataset
    for key in ("distill/loss", "distill/agreement"):
        assert np.isnan(logs[key][0]) and np.isfinite(logs[key][1:]).all(), key
    # weight = progress_remaining and beta = progress_remaining / 2, at each rollout's start
    np.testing.assert_allclose(logs["distill/weight"], 1 - np.arange(8) / 8)
    np.testing.assert_allclose(logs["distill/beta"], logs["distill/weight"] / 2)
    np.testing.assert_array_equal(logs["distill/dataset_size"], 256 * np.arange(8))
    # The wrapper that executes the teacher's actions is gone, and the distilled model reloads with its own class
    assert "forward" not in vars(student.policy)
    student.save(tmp_path / "out.zip")
    reloaded = PPO.load(tmp_path / "out.zip", device="cpu")
    assert _agreement(reloaded, teacher, obs) == after


def test_weight_zero_and_rl_coef_one_is_plain_ppo():
    """With weight 0 the callback takes no step: the run is PPO's own, parameter for parameter."""
    teacher = PPO("MlpPolicy", "CartPole-v1", seed=5, **small())

    def run(callback):
        model = PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=3), n_steps=64, seed=3, **small())
        model.learn(256, callback=callback)
        return th.nn.utils.parameters_to_vector(model.policy.parameters())

    assert th.equal(run(DaggerCallback(teacher, weight=0.0)), run(None))


MASKED_DIM = 8  # InvalidActionEnvDiscrete: 3 of the 7 actions that are not the state are forbidden at each step


def _masked_env(n_envs: int = 2):
    return make_vec_env(lambda: InvalidActionEnvDiscrete(dim=MASKED_DIM, n_invalid_actions=3), n_envs=n_envs, seed=0)


def _next_action_teacher(obs: th.Tensor) -> Categorical:
    """A callable teacher answering ``(obs + 1) % 8`` whatever the masks: forbidden with probability 3/7."""
    labels = (obs.long().reshape(-1) + 1) % MASKED_DIM
    return Categorical(logits=3.0 * th.nn.functional.one_hot(labels, MASKED_DIM).float())


class _Executed(VecEnvWrapper):
    """Records the actions the env executes."""

    def __init__(self, venv) -> None:
        super().__init__(venv)
        self.actions: list[np.ndarray] = []

    def reset(self):
        return self.venv.reset()

    def step_async(self, actions) -> None:
        self.actions.append(np.array(actions))
        self.venv.step_async(actions)

    def step_wait(self):
        return self.venv.step_wait()


class _RolloutCheck(BaseCallback):
    """
    At each rollout's end, with beta = 1: each executed action is the teacher's where the step's masks allow it (else
    an allowed action of the student's), and the stored log-probability is the student's own of the executed action.
    """

    def __init__(self, teacher, env: _Executed) -> None:
        super().__init__()
        self.teacher, self.env, self.checked = teacher, env, 0

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        buffer, space = self.model.rollout_buffer, self.model.action_space
        n = buffer.buffer_size * buffer.n_envs
        obs = th.as_tensor(buffer.observations.reshape(n, *buffer.obs_shape))
        actions = th.as_tensor(buffer.actions.reshape(n, -1))
        executed = th.as_tensor(np.stack(self.env.actions[-buffer.buffer_size :]).reshape(n, -1)).to(actions.dtype)
        masks = th.as_tensor(buffer.action_masks.reshape(n, -1)) if hasattr(buffer, "action_masks") else None
        with th.no_grad():
            teacher = best_action(self.teacher(obs)).reshape(n, -1).to(actions.dtype)
            if isinstance(space, spaces.Box):
                teacher = teacher.clamp(th.as_tensor(space.low), th.as_tensor(space.high))
            evaluated = actions.long().flatten() if isinstance(space, spaces.Discrete) else actions
            extra = {} if masks is None else dict(action_masks=masks)
            _, log_prob, _ = self.model.policy.evaluate_actions(obs, evaluated, **extra)
        assert th.equal(executed, actions)
        allowed = th.ones(n, dtype=th.bool) if masks is None else actions_allowed(masks, teacher, space)
        assert allowed.any() and th.allclose(actions[allowed], teacher[allowed], atol=1e-6)
        if masks is not None:  # a forbidden teacher action is never executed
            assert (~allowed).any() and actions_allowed(masks, actions, space).all()
        np.testing.assert_allclose(buffer.log_probs.reshape(n), log_prob.numpy(), atol=1e-5)
        self.checked += 1


@pytest.mark.parametrize(
    "algo, env_id",
    [(XPPO, "CartPole-v1"), (PPO, "CartPole-v1"), (XPPO, "Pendulum-v1"), (MaskableXPPO, None), (MaskablePPO, None)],
)
def test_beta_one_executes_the_teachers_actions_with_the_students_log_probs(algo, env_id):
    """Through XPPO's action hook and a stock student's patch alike."""
    if env_id is None:
        env, teacher, labels = _Executed(_masked_env()), _next_action_teacher, _next_action_teacher
    else:
        env = _Executed(make_vec_env(env_id, n_envs=2, seed=0))
        teacher = PPO("MlpPolicy", env_id, seed=5, **small())  # any fixed policy will do
        labels = PolicyAdapter(teacher.policy)
    student = algo("MlpPolicy", env, n_steps=64, batch_size=64, seed=0, **small())
    check = _RolloutCheck(labels, env)
    student.learn(256, callback=[DaggerCallback(teacher, beta=1.0), check])
    assert check.checked == 2
    assert not {"forward", "collect_rollouts", "train"} & (set(vars(student.policy)) | set(vars(student)))
    assert not getattr(student, "_action_hooks", None) and not getattr(student, "_loss_hooks", None)


class _AttributesHold(BaseCallback):
    """At every rollout step and every train() minibatch: the model and its policy have the attributes they had before."""

    def __init__(self, model) -> None:
        super().__init__()
        self.before = self.attributes(model)
        self.steps = self.minibatches = 0
        self.handle = model.register_loss_hook(self.loss_hook)

    @staticmethod
    def attributes(model) -> tuple[set[str], set[str]]:
        return set(vars(model)), set(vars(model.policy))

    def _on_step(self) -> bool:
        assert self.attributes(self.model) == self.before
        assert len(self.model._action_hooks) == 1  # the DaggerCallback's
        self.steps += 1
        return True

    def loss_hook(self, model, rollout_data, loss):
        assert self.attributes(model) == self.before
        self.minibatches += 1
        return loss


@pytest.mark.parametrize("algo", [XPPO, MaskableXPPO, RecurrentXPPO])
def test_xppo_students_are_steered_through_their_hooks_alone(algo):
    """No attribute of an XPPO student or its policy is set during learn(): the callback acts through the model's hooks."""
    if algo is MaskableXPPO:
        env, teacher, kwargs = _masked_env(), _next_action_teacher, small()
    else:
        env, teacher = make_vec_env("CartPole-v1", n_envs=2, seed=0), PPO("MlpPolicy", "CartPole-v1", seed=5, **small())
        kwargs = small() if algo is XPPO else dict(policy_kwargs=dict(net_arch=[16], lstm_hidden_size=16), device="cpu")
    policy = "MlpLstmPolicy" if algo is RecurrentXPPO else "MlpPolicy"
    student = algo(policy, env, n_steps=32, batch_size=32, seed=0, **kwargs)
    student.learn(64)  # every attribute learn() sets exists
    check = _AttributesHold(student)
    student.learn(256, callback=[DaggerCallback(teacher, beta=0.5), check])
    assert check.steps == 128 and check.minibatches > 0
    check.handle.remove()
    assert check.attributes(student) == check.before
    assert len(student._action_hooks) == 0 and len(student._loss_hooks) == 0


@pytest.mark.slow
def test_xppo_rl_coef_zero_is_pure_dagger():
    """rl_coef=0: only the distillation loss is optimised, so the critic never moves while the actor does."""
    teacher = cartpole_teacher()
    env = make_vec_env("CartPole-v1", n_envs=4, seed=0)
    student = XPPO("MlpPolicy", env, n_steps=64, batch_size=64, seed=0, device="cpu")
    critic = [p.clone() for p in student.policy.value_net.parameters()]
    critic += [p.clone() for p in student.policy.mlp_extractor.value_net.parameters()]
    actor = th.nn.utils.parameters_to_vector(student.policy.action_net.parameters()).clone()
    teacher_return = _evaluate(teacher)
    assert _evaluate(student) < 0.95 * teacher_return  # not there yet
    student.learn(2_048, callback=DaggerCallback(teacher, rl_coef=0.0, beta=0.5))
    after_critic = [*student.policy.value_net.parameters(), *student.policy.mlp_extractor.value_net.parameters()]
    assert all(th.equal(a, b) for a, b in zip(critic, after_critic, strict=True))
    assert not th.equal(actor, th.nn.utils.parameters_to_vector(student.policy.action_net.parameters()))
    assert _evaluate(student) >= 0.95 * teacher_return  # the return: see the test above


@pytest.mark.slow
@pytest.mark.parametrize("algo", [A2C, TRPO])
def test_a2c_and_trpo_students(algo):
    teacher = cartpole_teacher()
    extra = dict(n_steps=64, batch_size=64) if algo is TRPO else dict(n_steps=8)
    student = algo("MlpPolicy", make_vec_env("CartPole-v1", n_envs=4, seed=0), seed=0, device="cpu", **extra)
    obs = _cartpole_obs()
    before = _agreement(student, teacher, obs)
    student.learn(2_048, callback=DaggerCallback(teacher))
    assert _agreement(student, teacher, obs) > max(before, 0.9)


@pytest.mark.slow
@pytest.mark.parametrize("algo", [SAC, TD3])
def test_off_policy_actor_students(algo):
    """SAC/TD3 actors follow another model's (noise-free) actions; beta = 1 fills the replay buffer with them."""
    teacher = TD3("MlpPolicy", "Pendulum-v1", seed=7, **small())
    student = algo("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=1, seed=0), learning_starts=50, seed=0, **small())
    obs = obs_as_tensor(np.stack([student.observation_space.sample() for _ in range(256)]), "cpu")

    def gap() -> float:
        with th.no_grad():
            s = best_action(PolicyAdapter(student.policy)(obs))
            t = best_action(PolicyAdapter(teacher.policy)(obs))
        return (s - t).abs().mean().item()

    before = gap()
    student.learn(300, callback=DaggerCallback(teacher, beta=1.0, gradient_steps=4))
    assert gap() < before / 3
    stored = student.replay_buffer.actions[:300, 0]
    with th.no_grad():
        teacher_actions = best_action(PolicyAdapter(teacher.policy)(th.as_tensor(student.replay_buffer.observations[:300, 0])))
    np.testing.assert_allclose(stored, student.policy.scale_action(teacher_actions.numpy()), atol=1e-5)
    assert "_sample_action" not in vars(student)


class _MasksHold(BaseCallback):
    """At each rollout's end: every stored action is allowed by its stored action mask."""

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        buffer = self.model.rollout_buffer
        masks = buffer.action_masks.reshape(-1, buffer.mask_dims)
        actions = buffer.actions.reshape(-1).astype(int)
        assert masks[np.arange(len(actions)), actions].all()
        self.locals_checked = True


@pytest.mark.slow
def test_maskable_ppo_student_with_a_callable_teacher():
    """A callable teacher (obs -> Categorical) into MaskablePPO; its actions the masks forbid are never executed."""
    env = make_vec_env(lambda: InvalidActionEnvDiscrete(dim=4, n_invalid_actions=1), n_envs=2, seed=0)

    def teacher(obs: th.Tensor) -> Categorical:
        # The observations are Discrete(4) indices; the teacher answers (obs + 1) % 4, masked or not
        assert obs.ndim == 1 and obs.device.type == "cpu"
        return Categorical(logits=3.0 * th.nn.functional.one_hot((obs.long() + 1) % 4, 4).float())

    student = MaskablePPO("MlpPolicy", env, n_steps=64, batch_size=64, seed=0, **small())
    check = _MasksHold()
    student.learn(1_024, callback=[DaggerCallback(teacher, beta=0.5), check])
    assert check.locals_checked
    actions, _ = student.predict(np.arange(4), deterministic=True)
    assert list(actions) == [1, 2, 3, 0]


def test_maskable_allowed_actions_by_hand():
    from sb3_xppo.dagger_distill.masks import actions_allowed as _allowed

    masks = np.array([[1, 0, 1, 1, 0], [0, 1, 1, 0, 1]])  # MultiDiscrete([2, 3]): blocks of 2 and 3
    actions = th.tensor([[0, 1], [1, 2]])
    assert _allowed(masks, actions, spaces.MultiDiscrete([2, 3])).tolist() == [True, True]
    assert _allowed(masks, th.tensor([[1, 0], [0, 0]]), spaces.MultiDiscrete([2, 3])).tolist() == [False, False]
    bits = np.array([[1, 0, 1, 1], [1, 1, 0, 1]])  # MultiBinary(2): (0, 1) per bit
    assert _allowed(bits, th.tensor([[0, 1], [1, 1]]), spaces.MultiBinary(2)).tolist() == [True, True]
    assert _allowed(bits, th.tensor([[1, 0], [0, 0]]), spaces.MultiBinary(2)).tolist() == [False, False]
    assert _allowed(np.array([[0, 1, 1]]), th.tensor([0]), spaces.Discrete(3)).tolist() == [False]


class _Privileged(gym.ObservationWrapper):
    """CartPole whose Dict observation holds a noisy view and, under 'privileged', the true state."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        box = env.observation_space
        self.observation_space = spaces.Dict({"noisy": box, "privileged": box})

    def observation(self, observation):
        noise = self.np_random.normal(0.0, 0.05, size=observation.shape).astype(np.float32)
        return {"noisy": observation + noise, "privileged": observation}


@pytest.mark.slow
def test_privileged_dict_teacher():
    """The teacher reads the true state ('privileged'); the student's policy only ever receives the noisy view."""
    teacher = cartpole_teacher()  # trained on the true state: reads the 'privileged' key
    full = make_vec_env("CartPole-v1", n_envs=4, seed=0, wrapper_class=_Privileged)
    student = PPO("MlpPolicy", StudentObsWrapper(full, "noisy"), n_steps=64, seed=0, device="cpu")
    assert student.observation_space == full.observation_space["noisy"]
    with pytest.raises(ValueError, match="pass teacher_obs_keys"):
        student.learn(64, callback=DaggerCallback(teacher))
    with pytest.raises(ValueError, match="no key"):
        student.learn(64, callback=DaggerCallback(teacher, teacher_obs_keys="state"))
    student_inputs = []
    student.policy.features_extractor.register_forward_pre_hook(lambda _, inputs: student_inputs.append(inputs[0]))
    student.learn(2_048, callback=DaggerCallback(teacher, teacher_obs_keys="privileged"))
    assert student_inputs and all(isinstance(x, th.Tensor) and x.shape[1:] == (4,) for x in student_inputs)
    # It balances as the teacher does, on the noisy view alone
    noisy = StudentObsWrapper(make_vec_env("CartPole-v1", n_envs=8, seed=123, wrapper_class=_Privileged), "noisy")
    assert _evaluate(student, env=noisy) >= 0.95 * _evaluate(teacher)
    # A callable teacher gets exactly the key it reads
    seen = []

    def spy(obs):
        seen.append(obs)
        return Categorical(logits=th.zeros(len(obs), 2))

    student.learn(64, callback=DaggerCallback(spy, teacher_obs_keys="privileged"))
    assert seen and all(isinstance(x, th.Tensor) and x.shape[1:] == (4,) for x in seen)


def test_repa_through_the_callback():
    teacher = PPO("MlpPolicy", "CartPole-v1", seed=5, device="cpu")  # SB3's default (64, 64) network
    student = PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=0), n_steps=64, seed=0, **small())
    callback = DaggerCallback(
        teacher,
        student_layer="mlp_extractor.policy_net.0",
        teacher_layer="mlp_extractor.policy_net.2",
        rep_align_projector=True,
    )
    student.learn(256, callback=callback)
    projector = callback.distiller.projector
    assert projector.in_features == 16 and projector.out_features == 64
    # Trained by its own optimizer, not added to the student's (whose saved state must still load)
    assert len(callback._projector_optimizer.state) == 2  # Adam stepped the weight and the bias
    assert all(p is not projector.weight for g in student.policy.optimizer.param_groups for p in g["params"])


def test_errors(tmp_path):
    teacher = PPO("MlpPolicy", "CartPole-v1", **small())
    with pytest.raises(ValueError, match="no SB3 checkpoint"):
        DaggerCallback(str(tmp_path / "missing.zip"))
    with pytest.raises(TypeError, match="teacher must be"):
        DaggerCallback(42)
    with pytest.raises(ValueError, match=r"teacher_layer='nope' is not a submodule"):
        DaggerCallback(teacher, student_layer="mlp_extractor", teacher_layer="nope")
    with pytest.raises(ValueError, match="weight must be a number"):
        DaggerCallback(teacher, weight=-1.0)
    with pytest.raises(ValueError, match="beta must be a number"):
        DaggerCallback(teacher, beta=1.5)
    with pytest.raises(ValueError, match="rl_coef must be a number"):
        DaggerCallback(teacher, rl_coef=-0.5)
    with pytest.raises(ValueError, match="buffer_size must be"):
        DaggerCallback(teacher, buffer_size=0)
    with pytest.raises(TypeError, match="loss_fn must be a callable"):
        DaggerCallback(teacher, loss_fn="nll")

    def fails_before_any_step(model, callback, match):
        with pytest.raises(ValueError, match=match):
            model.learn(64, callback=callback)
        assert model.num_timesteps == 0

    acrobot = PPO("MlpPolicy", "Acrobot-v1", n_steps=64, **small())
    fails_before_any_step(
        acrobot, DaggerCallback(teacher), "the teacher acts in Discrete\\(2\\) but the student in Discrete\\(3\\)"
    )
    student = PPO("MlpPolicy", "CartPole-v1", n_steps=64, **small())
    fails_before_any_step(
        student, DaggerCallback(teacher, student_layer="nope", teacher_layer="mlp_extractor"), "student_layer='nope'"
    )
    fails_before_any_step(student, DaggerCallback(teacher, rl_coef=0.0), "rl_coef=0.0 needs a student with a loss hook")
    three_classes = lambda obs: Categorical(logits=th.zeros(len(obs), 3))  # noqa: E731
    fails_before_any_step(student, DaggerCallback(three_classes), "do not fit the student's action space")
    fails_before_any_step(DQN("MlpPolicy", "CartPole-v1", **small()), DaggerCallback(teacher), "has no actor")
    # KL between a PPO Gaussian and a SAC tanh-squashed Gaussian has no closed form
    pendulum_teacher = PPO("MlpPolicy", "Pendulum-v1", **small())
    sac = SAC("MlpPolicy", "Pendulum-v1", **small())
    fails_before_any_step(sac, DaggerCallback(pendulum_teacher, loss_fn=kl_loss), "kl_loss needs the same family")
