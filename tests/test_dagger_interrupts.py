"""
DaggerCallback leaves the model as it was on every way out of learn(): interrupts, errors, reuse. A stock student's
patch is removed by its guards; an XPPO student is never patched, and the hooks an exception leaves are inert.
"""

import pytest
import torch as th
from stable_baselines3 import PPO, SAC
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecEnvWrapper
from torch.distributions import Categorical, Independent, Normal

from sb3_xppo import XPPO, DaggerCallback


class _Interrupt(VecEnvWrapper):
    """Raises ``KeyboardInterrupt`` inside ``env.step`` once ``at`` vector steps have been taken (when armed)."""

    def __init__(self, venv) -> None:
        super().__init__(venv)
        self.at: int | None = None
        self.steps = 0

    def reset(self):
        return self.venv.reset()

    def step_wait(self):
        self.steps += 1
        if self.at is not None and self.steps >= self.at:
            self.at = None
            raise KeyboardInterrupt
        return self.venv.step_wait()


class _Spy:
    """A callable teacher that counts its calls: a teacher consulted after learn() would show here."""

    def __init__(self, continuous: bool = False) -> None:
        self.calls = 0
        self.continuous = continuous

    def __call__(self, obs: th.Tensor):
        self.calls += 1
        if self.continuous:
            return Independent(Normal(th.zeros(len(obs), 1), th.ones(len(obs), 1)), 1)
        return Categorical(logits=th.zeros(len(obs), 2))


class _Raise(BaseCallback):
    """Raises ``error`` in the hook ``where`` (``'step'``, ``'rollout_end'``, ``'training_start'``) at its ``at``-th call."""

    def __init__(self, where: str, at: int = 1, error: type[BaseException] = RuntimeError) -> None:
        super().__init__()
        self.where, self.at, self.error, self.calls = where, at, error, 0

    def _hit(self, where: str) -> None:
        if where == self.where:
            self.calls += 1
            if self.calls == self.at:
                raise self.error(f"raised in {where}")

    def _on_training_start(self) -> None:
        self._hit("training_start")

    def _on_step(self) -> bool:
        self._hit("step")
        return True

    def _on_rollout_end(self) -> None:
        self._hit("rollout_end")


def make(algo, n_envs: int = 2):
    """A tiny model on an env that can be interrupted, after a first plain learn() (so every attribute exists)."""
    if algo is SAC:
        env = _Interrupt(make_vec_env("Pendulum-v1", n_envs=1, seed=0))
        model = SAC("MlpPolicy", env, learning_starts=16, seed=0, device="cpu", policy_kwargs=dict(net_arch=[16]))
        model.learn(32)
    else:
        env = _Interrupt(make_vec_env("CartPole-v1", n_envs=n_envs, seed=0))
        kwargs = dict(n_steps=32, batch_size=32, seed=0, device="cpu", policy_kwargs=dict(net_arch=[16]))
        model = algo("MlpPolicy", env, **kwargs)
        model.learn(64)
    return model, env


def snapshot(model) -> dict:
    """The model's and policy's own attributes (names, and the objects behind the methods learn() calls), and hooks."""
    return dict(
        model=set(vars(model)),
        policy=set(vars(model.policy)),
        methods={name: vars(model).get(name) for name in ("collect_rollouts", "train", "dump_logs", "_sample_action")},
        forward=vars(model.policy).get("forward"),
        hooks=(len(getattr(model, "_loss_hooks", {})), len(getattr(model, "_action_hooks", {}))),
    )


def attributes(snap: dict) -> dict:
    return {key: value for key, value in snap.items() if key != "hooks"}


def assert_untouched(model, before: dict, spy: _Spy) -> None:
    """
    After a learn() that raised: the model's and policy's attributes are as before; the hooks an XPPO student may
    still hold are inert (a later plain learn() never consults the teacher) and gone after that learn()'s first step.
    """
    assert attributes(snapshot(model)) == attributes(before)
    calls = spy.calls
    model.learn(64)
    assert spy.calls == calls
    assert snapshot(model) == before


@pytest.mark.parametrize("algo", [PPO, XPPO, SAC])
def test_keyboard_interrupt_inside_env_step(algo):
    """Interrupted mid-rollout (after a first rollout and update, so XPPO's loss hook and beta both ran)."""
    model, env = make(algo)
    before = snapshot(model)
    spy = _Spy(continuous=algo is SAC)
    env.at = env.steps + (40 if algo is not SAC else 24)
    with pytest.raises(KeyboardInterrupt):
        model.learn(512, callback=DaggerCallback(spy, beta=1.0, gradient_steps=2))
    assert spy.calls > 0  # the teacher acted before the interrupt
    assert_untouched(model, before, spy)


@pytest.mark.parametrize("where, at", [("step", 40), ("rollout_end", 2)])
def test_an_error_in_another_callback(where, at):
    model, _ = make(XPPO)
    before = snapshot(model)
    spy = _Spy()
    other = _Raise(where, at=at)  # in the second rollout: the first update, with the loss hook, is done
    with pytest.raises(RuntimeError, match=f"raised in {where}"):
        model.learn(512, callback=[DaggerCallback(spy, beta=0.5), other])
    assert_untouched(model, before, spy)


def test_an_error_inside_train():
    """XPPO's train() raises (another loss hook): the callback's loss hook and guards go too."""
    model, _ = make(XPPO)
    before = snapshot(model)
    spy = _Spy()

    def broken(model, rollout_data, loss):
        raise FloatingPointError("in train")

    handle = model.register_loss_hook(broken)
    with pytest.raises(FloatingPointError, match="in train"):
        model.learn(512, callback=DaggerCallback(spy, beta=0.5))
    handle.remove()
    assert_untouched(model, before, spy)


@pytest.mark.parametrize("algo", [PPO, XPPO])
def test_an_error_in_another_callbacks_training_start_leaves_inert_leftovers(algo):
    """
    The one exit no guard sees: learn() itself raises (a later callback's on_training_start). What it leaves (a stock
    student's patch, an XPPO student's hooks) changes nothing: the policy acts as its own, the next plain learn()
    neither acts with nor trains on the teacher, and removes it.
    """
    model, env = make(algo)
    before = snapshot(model)
    spy = _Spy()
    with pytest.raises(RuntimeError, match="raised in training_start"):
        model.learn(512, callback=[DaggerCallback(spy, beta=1.0), _Raise("training_start")])
    if algo is XPPO:
        assert attributes(snapshot(model)) == attributes(before)
    calls = spy.calls  # (the callback's check of the teacher, before training starts)
    obs = th.as_tensor(env.reset())
    actions = model.policy(obs, deterministic=True)[0]
    assert spy.calls == calls and th.equal(actions, model.policy.get_distribution(obs).mode())
    model.learn(64)
    assert spy.calls == calls
    assert snapshot(model) == before


def test_normal_end_and_callback_stop():
    """learn() ending normally, or stopped by a callback returning False, restores the model as well."""
    model, _ = make(XPPO)
    before = snapshot(model)
    spy = _Spy()
    model.learn(128, callback=DaggerCallback(spy, beta=1.0))
    assert snapshot(model) == before

    class Stop(BaseCallback):
        def _on_step(self) -> bool:
            return self.n_calls < 10

    model.learn(512, callback=[DaggerCallback(spy, beta=1.0), Stop()])
    assert snapshot(model) == before
    assert_untouched(model, before, spy)


def test_the_same_callback_again_after_an_interrupt_and_on_another_model():
    model, env = make(PPO, n_envs=2)
    before = snapshot(model)
    spy = _Spy()
    callback = DaggerCallback(spy, beta=0.5)
    env.at = env.steps + 40
    with pytest.raises(KeyboardInterrupt):
        model.learn(512, callback=callback)
    states = len(callback.dataset)
    assert states == 2 * 39  # every state acted on before the interrupt
    # The same model again: it works and keeps aggregating
    model.learn(64, reset_num_timesteps=False, callback=callback)
    assert len(callback.dataset) == states + 64
    assert snapshot(model) == before
    # Another model (another env): the callback starts afresh with its states
    other, _ = make(PPO, n_envs=4)
    other_before = snapshot(other)
    other.learn(128, callback=callback)
    assert len(callback.dataset) == 128
    assert callback.model is other and snapshot(other) == other_before and snapshot(model) == before


@pytest.mark.parametrize("algo", [PPO, XPPO])
def test_the_same_callback_in_a_nested_learn_is_a_clear_error(algo):
    model, _ = make(algo)
    other, _ = make(algo)
    before, other_before = snapshot(model), snapshot(other)
    callback = DaggerCallback(_Spy(), beta=0.5)

    class Nested(BaseCallback):
        def _on_step(self) -> bool:
            other.learn(32, callback=callback)
            return True

    with pytest.raises(ValueError, match="already in use by a learn\\(\\) that is running"):
        model.learn(128, callback=[callback, Nested()])
    assert snapshot(model) == before and snapshot(other) == other_before


@pytest.mark.parametrize("algo", [PPO, XPPO, SAC])
def test_checkpoints_saved_during_learn_hold_no_guard(tmp_path, algo):
    """A CheckpointCallback saves the model's __dict__ mid-learn, while the guards and teacher wrappers are on it."""
    from stable_baselines3.common.callbacks import CheckpointCallback

    env_id = "Pendulum-v1" if algo is SAC else "CartPole-v1"
    kwargs = dict(learning_starts=16, train_freq=8) if algo is SAC else dict(n_steps=32, batch_size=32)
    model = algo("MlpPolicy", env_id, seed=0, policy_kwargs=dict(net_arch=[8]), **kwargs)
    teacher = _Spy(continuous=algo is SAC)
    model.learn(96, callback=[DaggerCallback(teacher, beta=0.5), CheckpointCallback(16, str(tmp_path), name_prefix="m")])
    saved = sorted(tmp_path.glob("m_*.zip"))
    assert len(saved) >= 4
    loaded = algo.load(saved[1], env=make_vec_env(env_id))
    assert not {"collect_rollouts", "train", "dump_logs", "_sample_action", "_excluded_save_params"} & set(vars(loaded))
    assert not getattr(loaded, "_loss_hooks", None) and not getattr(loaded, "_action_hooks", None)
    calls = teacher.calls
    loaded.learn(32)
    assert teacher.calls == calls
