"""
XPPO is safe to embed: no process-wide state (several models learning in threads of one process), one switch for the
fast paths with the same bits on and off, and the rollout's action hooks.
"""

import threading
from typing import Any

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from torch.distributions import Distribution, Normal

from sb3_xppo import XPPO, MaskableXPPO, RecurrentXPPO

TINY = dict(n_steps=32, batch_size=16, n_epochs=2, policy_kwargs=dict(net_arch=[16]), device="cpu", seed=0)


def same_parameters(a: Any, b: Any) -> bool:
    return all(th.equal(x, y) for x, y in zip(a.policy.state_dict().values(), b.policy.state_dict().values(), strict=True))


def test_two_models_in_two_threads_leave_torch_as_it_was():
    assert Distribution._validate_args is True
    models = [
        XPPO("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=2, seed=0), **TINY),
        XPPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=1), **TINY),
    ]
    errors: list[BaseException] = []
    learning = threading.Event()
    done = threading.Event()

    def learn(model: XPPO) -> None:
        try:
            learning.set()
            model.learn(2048)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=learn, args=(model,)) for model in models]
    accepted, refused = [], 0

    def build_bad_distributions() -> None:
        # a third thread, while both learn: every Normal(0, -1) must still be refused
        nonlocal refused
        learning.wait()
        while not done.is_set():
            try:
                accepted.append(Normal(th.zeros(()), -th.ones(())))
            except ValueError:
                refused += 1

    checker = threading.Thread(target=build_bad_distributions)
    for thread in [*threads, checker]:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    done.set()
    checker.join(timeout=60)
    assert not errors, errors
    assert refused > 0 and not accepted
    assert Distribution._validate_args is True
    for model in models:
        assert model.num_timesteps >= 2048
        assert all(th.isfinite(p).all() for p in model.policy.parameters())


CASES = {
    "xppo-box": (XPPO, "MlpPolicy", "Pendulum-v1", {}),
    "xppo-gsde": (XPPO, "MlpPolicy", "Pendulum-v1", dict(use_sde=True, sde_sample_freq=4)),
    "xppo-discrete": (XPPO, "MlpPolicy", "CartPole-v1", dict(actor_loss="spo", normalize_values=True)),
    "maskable": (MaskableXPPO, "MlpPolicy", "CartPole-v1", {}),
    "recurrent": (RecurrentXPPO, "MlpLstmPolicy", "CartPole-v1", {}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fast_paths_on_and_off_give_the_same_bits(case):
    algo, policy, env_id, kwargs = CASES[case]
    models = []
    for fast in (True, False):
        model = algo(policy, make_vec_env(env_id, n_envs=2, seed=0), fast_paths=fast, **TINY, **kwargs)
        models.append(model.learn(128) if algo is not MaskableXPPO else model.learn(128, use_masking=False))
    assert same_parameters(*models)
    on, off = (model.logger.name_to_value for model in models)
    assert on["train/loss"] == off["train/loss"] and on["train/approx_kl"] == off["train/approx_kl"]


def test_fast_paths_is_a_checked_switch_saved_with_the_model(tmp_path):
    with pytest.raises(TypeError, match="fast_paths"):
        XPPO("MlpPolicy", "CartPole-v1", fast_paths="yes")
    model = XPPO("MlpPolicy", "CartPole-v1", fast_paths=False, **TINY)
    model.save(tmp_path / "model")
    assert XPPO.load(tmp_path / "model").options.fast_paths is False


class ActionRecorder(BaseCallback):
    """Each step's executed actions and the log-probabilities stored with them."""

    def _on_rollout_start(self) -> None:
        self.actions: list[np.ndarray] = []

    def _on_step(self) -> bool:
        self.actions.append(np.asarray(self.locals["clipped_actions"]).copy())
        return True


@pytest.mark.parametrize("algo, policy", [(XPPO, "MlpPolicy"), (MaskableXPPO, "MlpPolicy"), (RecurrentXPPO, "MlpLstmPolicy")])
def test_action_hook_executes_its_actions_with_the_policys_log_probs(algo, policy):
    model = algo(policy, make_vec_env("CartPole-v1", n_envs=2, seed=0), **TINY)
    seen = []

    def always_one(model: Any, obs: Any, actions: th.Tensor, action_masks: Any) -> th.Tensor:
        seen.append((obs.shape, actions.shape, action_masks is None))
        return th.ones_like(actions)

    handle = model.register_action_hook(always_one)
    recorder = ActionRecorder()
    kwargs = dict(use_masking=False) if algo is MaskableXPPO else {}  # (CartPole has no masks)
    # one rollout, no train(): the buffer keeps it
    _, callback = model._setup_learn(32, callback=recorder)
    model.collect_rollouts(model.env, callback, model.rollout_buffer, 32, **kwargs)
    assert seen and all(obs == (2, 4) and actions == (2,) for obs, actions, _ in seen)
    assert {masks for *_, masks in seen} == {True}
    assert np.all(np.asarray(recorder.actions) == 1)
    buffer = model.rollout_buffer
    assert np.all(buffer.actions == 1)
    # the stored log-probabilities are the policy's own of the executed action
    obs = th.as_tensor(buffer.observations[:, 0])
    if algo is RecurrentXPPO:
        return  # (the LSTM state of each step is checked by the DAgger tests)
    with th.no_grad():
        distribution = model.policy.get_distribution(obs)
        expected = distribution.log_prob(th.ones(len(obs), dtype=th.long))
    np.testing.assert_allclose(buffer.log_probs[:, 0], expected.numpy(), rtol=1e-6)
    handle.remove()
    assert not model._action_hooks


def test_action_hook_returning_none_changes_no_number():
    plain = XPPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=0), **TINY).learn(128)
    hooked = XPPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=0), **TINY)
    hooked.register_action_hook(lambda *args: None)
    assert same_parameters(plain, hooked.learn(128))


def test_hooks_are_runtime_state(tmp_path):
    model = XPPO("MlpPolicy", "CartPole-v1", **TINY)
    model.register_action_hook(lambda *args: None)
    model.register_loss_hook(lambda model, data, loss: loss)
    with pytest.raises(TypeError, match="callable"):
        model.register_action_hook("not a hook")
    model.save(tmp_path / "model")
    loaded = XPPO.load(tmp_path / "model")
    assert not loaded._action_hooks and not loaded._loss_hooks


class RegistersAndRaises(BaseCallback):
    """Registers both hooks until learn() ends, then raises mid-rollout (SB3 does not call on_training_end)."""

    def _on_training_start(self) -> None:
        self.model.register_action_hook(lambda *args: None, until_learn_ends=True)
        self.model.register_loss_hook(lambda model, data, loss: loss, until_learn_ends=True)

    def _on_step(self) -> bool:
        raise KeyboardInterrupt


def test_hooks_registered_until_learn_ends_go_also_on_an_exception():
    model = XPPO("MlpPolicy", "CartPole-v1", **TINY)
    kept = model.register_action_hook(lambda *args: None)
    with pytest.raises(KeyboardInterrupt):
        model.learn(64, callback=RegistersAndRaises())
    assert list(model._action_hooks) == [kept.id] and not model._loss_hooks and not model._learn_hooks
