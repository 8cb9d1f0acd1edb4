"""
The exact fast paths of XPPO's learn() (sb3_xppo/core/fast_paths.py, the tensor minibatches of
sb3_xppo/common/buffers.py): the same numbers as torch's and SB3's own code, and nothing left changed after them.
"""

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.buffers import MaskableDictRolloutBuffer, MaskableRolloutBuffer
from stable_baselines3 import PPO
from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch.distributions import Distribution
from torch.optim.optimizer import register_optimizer_step_post_hook

import sb3_xppo.core.fast_paths as fast_paths
from sb3_xppo import XPPO, MaskableXPPO, RecurrentXPPO
from sb3_xppo.common.buffers import (
    XPPODictRolloutBuffer,
    XPPOMaskableDictRolloutBuffer,
    XPPOMaskableRolloutBuffer,
    XPPORolloutBuffer,
)
from sb3_xppo.common.grad_norms import clip_grad_norm_per_part
from sb3_xppo.common.policies import XPPOActorCriticPolicy
from sb3_xppo.core.fast_paths import ALIGNMENT, FlatAdam, flat_adam_is_exact

TINY = dict(n_steps=32, batch_size=16, n_epochs=2, policy_kwargs=dict(net_arch=[16]), device="cpu", seed=0)

needs_exact_flat_adam = pytest.mark.skipif(
    not flat_adam_is_exact(th.float32), reason="this machine's kernels round a flat Adam differently: torch's step runs"
)


@pytest.fixture
def default_validation():
    """Restores the process-wide default after a test that sets it."""
    previous = Distribution._validate_args
    yield
    Distribution.set_default_validate_args(previous)


# --- argument validation ---------------------------------------------------------------------------------------------


def test_finite_check_errs_on_the_checked_side():
    assert fast_paths.tensor_finite(th.tensor([1.0, -2.0])) and fast_paths.tensor_finite(th.tensor([1, 2]))
    assert not fast_paths.tensor_finite(th.tensor([1.0, np.nan])) and not fast_paths.tensor_finite(th.tensor([np.inf]))
    # a finite tensor whose sum overflows counts as not finite: its call keeps the distribution's checks
    assert not fast_paths.tensor_finite(th.tensor([3e38, 3e38]))
    assert fast_paths.all_finite({"a": th.zeros(2), "b": th.zeros(3, dtype=th.uint8)})
    assert not fast_paths.all_finite({"a": th.zeros(2), "b": th.tensor([np.nan])}) and not fast_paths.all_finite(None)


@pytest.mark.parametrize(
    "space", [spaces.Box(-1, 1, (2,)), spaces.Discrete(3), spaces.MultiDiscrete([2, 3]), spaces.MultiBinary(2)]
)
@pytest.mark.parametrize("use_sde", [False, True])
def test_trusted_distributions_are_sb3s_without_checks(default_validation, space, use_sde):
    Distribution.set_default_validate_args(True)
    if use_sde and not isinstance(space, spaces.Box):
        pytest.skip("gSDE is for Box actions")
    policy = XPPOActorCriticPolicy(spaces.Box(-1, 1, (4,)), space, lambda _: 1e-3, net_arch=[8], use_sde=use_sde)
    obs = th.randn(5, 4)
    checked = policy.get_distribution(obs)
    with policy.trusted_inputs():
        trusted = policy.get_distribution(obs)
    assert policy.validate_distributions is True
    torch_dists = trusted.distribution if isinstance(trusted.distribution, list) else [trusted.distribution]
    assert all(d._validate_args is False for d in torch_dists)
    assert Distribution._validate_args is True  # torch's process-wide default is never written
    actions = checked.sample()
    assert th.equal(trusted.log_prob(actions), checked.log_prob(actions))
    assert th.equal(trusted.entropy(), checked.entropy()) if checked.entropy() is not None else True


class Recorder(XPPOActorCriticPolicy):
    """XPPO's policy, recording whether its distributions validate and the grad mode of forward / evaluate_actions."""

    seen: dict[str, list[Any]]

    def forward(self, obs: th.Tensor, deterministic: bool = False) -> Any:
        self.seen.setdefault("forward", []).append((self.validate_distributions, th.is_grad_enabled()))
        return super().forward(obs, deterministic)

    def evaluate_actions(self, obs: th.Tensor, actions: th.Tensor) -> Any:
        self.seen.setdefault("evaluate_actions", []).append(self.validate_distributions)
        return super().evaluate_actions(obs, actions)


class CallsThePolicy(BaseCallback):
    """A callback that calls the policy at every step, with gradients, and backpropagates through what it returns."""

    def __init__(self) -> None:
        super().__init__()
        self.validation: list[bool] = []
        self.inference: list[bool] = []

    def _on_step(self) -> bool:
        self.validation.append(Distribution._validate_args)
        self.inference.append(self.locals["values"].is_inference())
        obs = th.as_tensor(self.locals["new_obs"], dtype=th.float32)
        _, values, log_prob = self.model.policy(obs)
        (values.sum() + log_prob.sum()).backward()  # plain tensors: an inference tensor would refuse
        return True


@pytest.mark.parametrize("check_finite", [True, False])
@pytest.mark.parametrize("fast", [True, False])
def test_policy_calls_without_validation_only_where_trusted(default_validation, check_finite, fast):
    Distribution.set_default_validate_args(True)
    Recorder.seen = {}
    model = XPPO(Recorder, make_vec_env("CartPole-v1", n_envs=2, seed=0), fast_paths=fast, **TINY)
    model.check_finite = check_finite
    callback = CallsThePolicy()
    model.learn(64, callback=callback)
    loop = [validate for validate, grad in Recorder.seen["forward"] if not grad]
    from_callback = [validate for validate, grad in Recorder.seen["forward"] if grad]
    trusted = fast and check_finite
    # the rollout's and the minibatches' policy calls skip the checks when the finite checks guard their inputs
    assert loop and set(loop) == {not trusted}
    assert set(Recorder.seen["evaluate_actions"]) == {not trusted}
    # callbacks, and the policy calls they make, see the checks (and plain tensors)
    assert from_callback and set(from_callback) == {True} and set(callback.validation) == {True}
    # a policy with a module of the user's own (here the policy class) is not run under inference mode
    assert set(callback.inference) == {False}
    assert Distribution._validate_args is True
    assert model.policy.validate_distributions is True
    assert not {"forward", "predict_values"} & set(vars(model.policy))


@pytest.mark.parametrize("algo", [XPPO, MaskableXPPO, RecurrentXPPO])
@pytest.mark.parametrize("fast", [True, False])
def test_collection_runs_in_inference_mode_and_leaves_nothing_behind(default_validation, algo, fast):
    Distribution.set_default_validate_args(True)
    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    policy = "MlpLstmPolicy" if algo is RecurrentXPPO else "MlpPolicy"
    model = algo(policy, env, fast_paths=fast, **TINY)
    seen = []

    class Spy(BaseCallback):
        def _on_rollout_start(self) -> None:
            self.before = dict(vars(self.model)), dict(vars(self.model.policy))

        def _on_step(self) -> bool:
            seen.append((self.locals["values"].is_inference(), Distribution._validate_args))
            # the rollout sets no attribute of the model or its policy (no method replaced)
            assert vars(self.model).keys() == self.before[0].keys() and vars(self.model.policy) == self.before[1]
            return True

    if algo is MaskableXPPO:
        model.learn(64, callback=Spy(), use_masking=False)
    else:
        model.learn(64, callback=Spy())
    # with the fast paths, the library policy's forward ran under inference mode; callbacks validate either way
    assert set(seen) == {(fast, True)}
    assert Distribution._validate_args is True


class OwnExtractor(BaseFeaturesExtractor):
    """A features extractor of the user's own: the policy's forward passes are not run under inference mode."""

    def __init__(self, observation_space: spaces.Box) -> None:
        super().__init__(observation_space, features_dim=int(np.prod(observation_space.shape)))

    def forward(self, observations: th.Tensor) -> th.Tensor:
        return observations.flatten(1)


def test_user_modules_keep_plain_tensors_and_the_result_is_ppos():
    kwargs = dict(TINY, policy_kwargs=dict(net_arch=[16], features_extractor_class=OwnExtractor))
    assert not fast_paths.library_modules_only(XPPO("MlpPolicy", "CartPole-v1", **kwargs).policy)
    ppo = PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=0), **kwargs).learn(96)
    xppo = XPPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=0), **kwargs).learn(96)
    assert all(
        th.equal(a, b) for a, b in zip(ppo.policy.state_dict().values(), xppo.policy.state_dict().values(), strict=True)
    )


class NaNObservationAt(gym.Wrapper):
    """Returns a NaN observation at one step of its env."""

    def __init__(self, env: gym.Env, at: int) -> None:
        super().__init__(env)
        self.at, self.steps = at, 0

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        return obs * np.nan if self.steps == self.at else obs, reward, terminated, truncated, info


def stopped_at(plain: bool, make_bad: Any = None) -> tuple[str, int]:
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0, wrapper_class=NaNObservationAt, wrapper_kwargs=dict(at=7))
    model = XPPO("MlpPolicy", env, fast_paths=not plain, **TINY)
    if make_bad is not None:
        make_bad(model)
    with pytest.raises(ValueError) as error:
        model.learn(64)
    return str(error.value), model.num_timesteps


def test_a_non_finite_observation_meets_the_distributions_checks_as_before():
    # A Gaussian policy would act on a NaN observation without its checks: the rollout stops where SB3's does
    assert stopped_at(plain=False) == stopped_at(plain=True)
    message, steps = stopped_at(plain=False)
    assert "non-finite observation" in message and steps == 7


def test_non_finite_parameters_meet_the_distributions_checks_as_before():
    def nan_parameters(model: XPPO) -> None:
        with th.no_grad():
            model.policy.action_net.bias.fill_(np.nan)

    reference = stopped_at(plain=True, make_bad=nan_parameters)
    assert stopped_at(plain=False, make_bad=nan_parameters) == reference
    assert "Expected parameter" in reference[0] and reference[1] == 0


# --- flat Adam ---------------------------------------------------------------------------------------------------------

SHAPES = [(16, 5), (16,), (3, 16), (3,), (1, 16), (1,), (7, 9), (33,)]


def parameters(seed: int = 0, dtype: th.dtype = th.float32) -> list[th.nn.Parameter]:
    generator = th.Generator().manual_seed(seed)
    return [th.nn.Parameter(th.randn(shape, generator=generator, dtype=dtype)) for shape in SHAPES]


def gradients(step: int, dtype: th.dtype = th.float32) -> list[th.Tensor]:
    generator = th.Generator().manual_seed(100 + step)
    # magnitudes from 1e-9 to 1e2, some exact zeros: every rounding path of the update shows
    grads = [th.randn(shape, generator=generator, dtype=dtype) * 10.0 ** (step % 12 - 9) for shape in SHAPES]
    grads[1][::3] = 0.0
    return grads


def torch_step(params: list[th.nn.Parameter], optimizer: th.optim.Optimizer, grads: list[th.Tensor | None]) -> th.Tensor:
    """PPO's optimizer step, torch's own calls."""
    optimizer.zero_grad()
    for p, g in zip(params, grads, strict=True):
        p.grad = None if g is None else g.clone()
    norm = th.nn.utils.clip_grad_norm_(params, 0.5)
    optimizer.step()
    return norm


def flat_step(params: list[th.nn.Parameter], flat: FlatAdam, grads: list[th.Tensor | None]) -> th.Tensor:
    flat.zero_grad()
    for p, g in zip(params, grads, strict=True):
        p.grad = None if g is None else g.clone()
    norm = flat.clip_grad_norm(0.5)
    flat.step()
    return norm


def assert_same(a: list[th.nn.Parameter], opt_a: th.optim.Optimizer, b: list[th.nn.Parameter], opt_b: th.optim.Optimizer):
    for p, q in zip(a, b, strict=True):
        assert th.equal(p, q)
        assert (p.grad is None and q.grad is None) or th.equal(p.grad, q.grad)
        state_p, state_q = opt_a.state[p], opt_b.state[q]
        assert state_p.keys() == state_q.keys()
        assert all(th.equal(state_p[k], state_q[k]) for k in state_p)


@needs_exact_flat_adam
@pytest.mark.parametrize("options", [dict(), dict(foreach=True), dict(lr=0.03, betas=(0.5, 0.9), eps=1e-5)])
def test_flat_adam_is_torchs_step_bit_for_bit(options):
    reference, params = parameters(), parameters()
    reference_optimizer, optimizer = th.optim.Adam(reference, **options), th.optim.Adam(params, **options)
    for call in range(3):  # three train() calls: the first creates Adam's state with torch's own step
        flat = FlatAdam.open(optimizer, params)
        assert flat is not None
        try:
            for step in range(6):
                lr = 1e-3 * (1 + step)  # SB3 sets the learning rate before each train() call; a hook might meanwhile
                for group in (*reference_optimizer.param_groups, *optimizer.param_groups):
                    group["lr"] = lr
                grads = gradients(10 * call + step)
                assert th.equal(torch_step(reference, reference_optimizer, grads), flat_step(params, flat, grads))
                assert_same(reference, reference_optimizer, params, optimizer)
            assert call == 0 or flat.buffers is not None  # the flat layout was used
        finally:
            flat.close()
        assert_same(reference, reference_optimizer, params, optimizer)


@needs_exact_flat_adam
def test_flat_adam_falls_back_where_a_parameter_has_no_gradient():
    reference, params = parameters(), parameters()
    reference_optimizer, optimizer = th.optim.Adam(reference), th.optim.Adam(params)
    torch_step(reference, reference_optimizer, gradients(0))
    torch_step(params, optimizer, gradients(0))
    flat = FlatAdam.open(optimizer, params)
    assert flat is not None
    try:
        for step in range(1, 5):
            grads: list[th.Tensor | None] = list(gradients(step))
            if step == 2:
                grads[3] = None  # torch skips that parameter: its step count falls behind the others'
            assert th.equal(torch_step(reference, reference_optimizer, grads), flat_step(params, flat, grads))
            assert_same(reference, reference_optimizer, params, optimizer)
        assert flat.torch_only
    finally:
        flat.close()
    assert_same(reference, reference_optimizer, params, optimizer)
    assert [optimizer.state[p]["step"].item() for p in params] == [5, 5, 5, 4, 5, 5, 5, 5]


@needs_exact_flat_adam
def test_flat_adam_layout_is_aligned_and_undone():
    params = parameters()
    optimizer = th.optim.Adam(params)
    torch_step(params, optimizer, gradients(0))
    pointers = [p.data_ptr() for p in params]
    moments = [(optimizer.state[p]["exp_avg"], optimizer.state[p]["exp_avg_sq"]) for p in params]
    versions = [p._version for p in params]
    flat = FlatAdam.open(optimizer, params)
    assert flat is not None
    flat_step(params, flat, gradients(1))
    # views into flat buffers, each aligned as a tensor of its own (a matrix product may round differently otherwise)
    assert flat.buffers is not None and all(p.data_ptr() not in pointers for p in params)
    assert all(t.data_ptr() % ALIGNMENT == 0 for p in params for t in (p, optimizer.state[p]["exp_avg"]))
    flat.close()
    # the parameters' and moments' own tensors are back, with the values of the step, the parameters' versions moved
    assert [p.data_ptr() for p in params] == pointers
    assert all(
        optimizer.state[p]["exp_avg"] is m and optimizer.state[p]["exp_avg_sq"] is s for p, (m, s) in zip(params, moments)
    )
    assert all(p._version > v for p, v in zip(params, versions, strict=True))
    reference = parameters()
    reference_optimizer = th.optim.Adam(reference)
    torch_step(reference, reference_optimizer, gradients(0))
    torch_step(reference, reference_optimizer, gradients(1))
    assert_same(reference, reference_optimizer, params, optimizer)


@needs_exact_flat_adam
def test_flat_adam_steps_aside_when_a_parameter_is_replaced():
    reference, params = parameters(), parameters()
    reference_optimizer, optimizer = th.optim.Adam(reference), th.optim.Adam(params)
    for ps, opt in ((reference, reference_optimizer), (params, optimizer)):
        torch_step(ps, opt, gradients(0))
    flat = FlatAdam.open(optimizer, params)
    assert flat is not None
    try:
        flat_step(params, flat, gradients(1))
        torch_step(reference, reference_optimizer, gradients(1))
        with th.no_grad():  # e.g. a loss hook that re-initialises a layer
            params[2].data = th.zeros_like(params[2])
            reference[2].data = th.zeros_like(reference[2])
        for step in (2, 3):
            assert th.equal(
                torch_step(reference, reference_optimizer, gradients(step)), flat_step(params, flat, gradients(step))
            )
        assert flat.torch_only and flat.buffers is None
    finally:
        flat.close()
    assert_same(reference, reference_optimizer, params, optimizer)


class WrappedAdam(th.optim.Adam):
    """A subclass might change anything."""


@pytest.mark.parametrize(
    "make, eligible",
    [
        (lambda ps: th.optim.Adam(ps), True),
        (lambda ps: th.optim.Adam(ps, foreach=True), True),
        (lambda ps: th.optim.Adam(ps, amsgrad=True), False),
        (lambda ps: th.optim.Adam(ps, weight_decay=1e-4), False),
        (lambda ps: th.optim.Adam(ps, maximize=True), False),
        (lambda ps: th.optim.Adam(ps, fused=True), False),
        (lambda ps: th.optim.Adam(ps, lr=th.tensor(1e-3)), False),
        (lambda ps: th.optim.AdamW(ps), False),
        (lambda ps: th.optim.RMSprop(ps), False),
        (lambda ps: WrappedAdam(ps), False),
        (lambda ps: th.optim.Adam([{"params": ps[:2]}, {"params": ps[2:]}]), False),
    ],
)
def test_flat_adam_takes_only_the_default_adam(make, eligible):
    params = parameters()
    assert FlatAdam.eligible(make(params), params) is (eligible and flat_adam_is_exact(th.float32))


def test_flat_adam_refuses_hooks_wrappers_and_mixed_parameters():
    params = parameters()
    optimizer = th.optim.Adam(params)
    assert FlatAdam.eligible(optimizer, params[::-1]) is False  # not the optimizer's order
    handle = optimizer.register_step_pre_hook(lambda opt, args, kwargs: None)
    assert FlatAdam.eligible(optimizer, params) is False
    handle.remove()
    handle = register_optimizer_step_post_hook(lambda opt, args, kwargs: None)
    assert FlatAdam.eligible(optimizer, params) is False
    handle.remove()
    optimizer.step = optimizer.step  # e.g. a torch LR scheduler's counting wrapper, an instance attribute
    assert FlatAdam.eligible(optimizer, params) is False
    mixed = [*parameters()[:2], th.nn.Parameter(th.zeros(3, dtype=th.float64))]
    assert FlatAdam.eligible(th.optim.Adam(mixed), mixed) is False


@needs_exact_flat_adam
def test_train_takes_the_flat_step(monkeypatch):
    updates = []
    adam_update = fast_paths.adam_update
    monkeypatch.setattr(fast_paths, "adam_update", lambda *args: updates.append(1) or adam_update(*args))
    model = XPPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=0), **TINY).learn(128)
    # 2 train() calls x 2 epochs x 4 minibatches, all but the very first step (which creates Adam's state)
    assert len(updates) == 2 * 2 * 4 - 1
    assert not {"step", "zero_grad"} & set(vars(model.policy.optimizer))


@needs_exact_flat_adam
def test_an_exception_inside_train_leaves_torchs_layout():
    model = XPPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=0), **TINY).learn(64)
    params = list(model.policy.parameters())
    pointers = [p.data_ptr() for p in params]
    calls = []

    def interrupt(model: XPPO, rollout_data: Any, loss: th.Tensor) -> th.Tensor:
        calls.append(1)
        if len(calls) == 3:  # after two flat steps
            raise KeyboardInterrupt
        return loss

    model.register_loss_hook(interrupt)
    with pytest.raises(KeyboardInterrupt):
        model.learn(64, reset_num_timesteps=False)
    # the parameters' own tensors are back (the rollback restored their values), the moments are tensors of their own
    assert [p.data_ptr() for p in params] == pointers
    assert all(model.policy.optimizer.state[p]["exp_avg"]._base is None for p in params)


def test_another_optimizer_takes_torchs_step_and_still_reproduces_ppo():
    kwargs = dict(TINY, policy_kwargs=dict(net_arch=[16], optimizer_class=th.optim.RMSprop))
    ppo = PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=0), **kwargs).learn(96)
    xppo = XPPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=0), **kwargs).learn(96)
    assert all(
        th.equal(a, b) for a, b in zip(ppo.policy.state_dict().values(), xppo.policy.state_dict().values(), strict=True)
    )


# --- tensor minibatches ------------------------------------------------------------------------------------------------

BOX = spaces.Box(-1, 1, (3,), np.float32)
IMAGE = spaces.Box(0, 255, (2, 4, 4), np.uint8)
ODD = spaces.Box(0, 9, (2,), np.uint16)  # a dtype the tensor path leaves to SB3's


def filled(buffer_class: type, observation_space: spaces.Space, action_space: spaces.Space, seed: int = 0) -> Any:
    buffer = buffer_class(8, observation_space, action_space, device="cpu", n_envs=3)
    rng = np.random.default_rng(seed)
    for step in range(8):
        obs = (
            {k: np.stack([s.sample() for _ in range(3)]) for k, s in observation_space.spaces.items()}
            if isinstance(observation_space, spaces.Dict)
            else np.stack([observation_space.sample() for _ in range(3)])
        )
        actions = np.stack([action_space.sample() for _ in range(3)])
        kwargs = {}
        if "Maskable" in buffer_class.__name__:
            kwargs["action_masks"] = rng.random((3, buffer.mask_dims)) > 0.3
        value, log_prob = (
            th.as_tensor(rng.normal(size=(3, 1)), dtype=th.float32),
            th.as_tensor(rng.normal(size=3), dtype=th.float32),
        )
        buffer.add(obs, actions, rng.normal(size=3).astype(np.float32), np.array([step == 0] * 3), value, log_prob, **kwargs)
    buffer.compute_returns_and_advantage(th.zeros(3), np.zeros(3, dtype=bool))
    return buffer


def seeded_samples(buffer: Any, batch_size: int | None) -> list[Any]:
    np.random.seed(3)
    return list(buffer.get(batch_size))


def assert_same_samples(a: Any, b: Any) -> None:
    assert type(a) is type(b)
    for x, y in zip(a, b, strict=True):
        if isinstance(x, dict):
            assert x.keys() == y.keys()
            pairs = [(x[k], y[k]) for k in x]
        else:
            pairs = [(x, y)]
        for s, t in pairs:
            assert s.dtype == t.dtype and s.shape == t.shape and th.equal(s, t)


@pytest.mark.parametrize(
    "ours, sb3s, observation_space, action_space",
    [
        (XPPORolloutBuffer, RolloutBuffer, BOX, spaces.Discrete(4)),
        (XPPORolloutBuffer, RolloutBuffer, IMAGE, spaces.Box(-1, 1, (2,), np.float64)),
        (XPPORolloutBuffer, RolloutBuffer, ODD, spaces.MultiDiscrete([3, 2])),
        (XPPODictRolloutBuffer, DictRolloutBuffer, spaces.Dict({"a": BOX, "b": IMAGE}), spaces.Discrete(4)),
        (XPPOMaskableRolloutBuffer, MaskableRolloutBuffer, BOX, spaces.MultiDiscrete([3, 2])),
        (XPPOMaskableDictRolloutBuffer, MaskableDictRolloutBuffer, spaces.Dict({"a": BOX}), spaces.Discrete(4)),
    ],
)
@pytest.mark.parametrize("batch_size", [5, None])
def test_tensor_minibatches_are_sb3s(ours, sb3s, observation_space, action_space, batch_size):
    observation_space.seed(0)
    action_space.seed(0)
    buffer = filled(ours, observation_space, action_space)
    observation_space.seed(0)
    action_space.seed(0)
    reference = filled(sb3s, observation_space, action_space)
    for _ in range(2):  # the second pass starts from the flattened arrays
        for a, b in zip(seeded_samples(buffer, batch_size), seeded_samples(reference, batch_size), strict=True):
            assert_same_samples(a, b)
    # outside a pass, SB3's own path
    indices = np.array([4, 0, 7])
    assert_same_samples(buffer._get_samples(indices), reference._get_samples(indices))


def test_tensor_minibatches_see_the_arrays_changed_between_passes():
    buffer = filled(XPPORolloutBuffer, BOX, spaces.Discrete(4))
    seeded_samples(buffer, 6)
    # after a pass the arrays are flattened to (n_steps * n_envs, ...): one changed in place, one replaced
    buffer.returns[5] = 123.0
    buffer.actions = buffer.actions + 1
    (samples,) = seeded_samples(buffer, None)
    np.random.seed(3)
    order = np.random.permutation(24)  # the pass's permutation
    assert th.equal(samples.returns, th.as_tensor(buffer.returns[order].flatten()))
    assert 123.0 in samples.returns
    assert th.equal(samples.actions, th.as_tensor(buffer.actions[order], dtype=th.float32))


# --- per-part clipping and value statistics, the multi-critic fast paths -----------------------------------------------


def test_flat_per_part_clip_is_torchs_bit_for_bit():
    reference, params = parameters(), parameters()
    # interleaved parts, as an actor-critic policy's parameters are (actor, critic, actor, critic, shared)
    layout = {"actor": [0, 1, 6], "critic": [2, 3, 7], "shared": [4, 5]}
    parts = {name: [params[i] for i in indices] for name, indices in layout.items()}
    reference_parts = {name: [reference[i] for i in indices] for name, indices in layout.items()}
    flat = FlatAdam(th.optim.Adam(params), params)
    indices = flat.part_indices(list(parts.values()))
    assert indices == list(layout.values())
    for step in range(12):
        for max_norm in (0.05, 1e3):  # clipped, and (small gradients) left as they are
            grads = gradients(step)
            for p, q, g in zip(reference, params, grads, strict=True):
                p.grad, q.grad = g.clone(), g.clone()
            expected = clip_grad_norm_per_part(reference_parts, max_norm)
            assert th.equal(flat.clip_grad_norm_per_part(indices, max_norm), expected)
            assert all(th.equal(p.grad, q.grad) for p, q in zip(reference, params, strict=True))
    # a missing gradient: nothing clipped, the caller takes torch's path
    params[3].grad = None
    before = [p.grad.clone() if p.grad is not None else None for p in params]
    assert flat.clip_grad_norm_per_part(indices, 0.05) is None
    assert all(b is None or th.equal(b, p.grad) for b, p in zip(before, params, strict=True))
    # parts that are not a partition of (some of) the parameters are refused
    assert flat.part_indices([[params[0]], [params[0]]]) is None
    assert flat.part_indices([[params[0]], [th.nn.Parameter(th.zeros(1))]]) is None
    assert flat.part_indices([[params[0]], []]) is None


@pytest.mark.parametrize("normalize_values", [False, True])
@pytest.mark.parametrize("separate_critics", [False, True])
def test_multi_critic_fast_paths_change_no_number(monkeypatch, normalize_values, separate_critics):
    from test_multi_critic import GroupEnv

    from sb3_xppo.common.value_norm import ValueNormalizer

    kwargs = dict(TINY, policy_kwargs=dict(net_arch=[16], separate_critics=separate_critics))
    kwargs.update(reward_groups=3, normalize_values=normalize_values, max_grad_norm=0.1)
    fast = XPPO("MlpPolicy", make_vec_env(GroupEnv, n_envs=2, seed=0), **kwargs).learn(128)
    with monkeypatch.context() as patch:
        # torch's clip_grad_norm_ per part, the statistics computed per call, SB3's minibatches with grouped targets
        calls = []
        patch.setattr(FlatAdam, "clip_grad_norm_per_part", lambda self, *args: calls.append(1))
        patch.setattr(ValueNormalizer, "fix_statistics", lambda self: None)
        patch.setattr(XPPORolloutBuffer, "get", lambda self, batch_size=None: RolloutBuffer.get(self, batch_size))
        plain = XPPO("MlpPolicy", make_vec_env(GroupEnv, n_envs=2, seed=0), **kwargs).learn(128)
    assert calls  # the flat path was offered and declined
    assert all(
        th.equal(a, b) for a, b in zip(fast.policy.state_dict().values(), plain.policy.state_dict().values(), strict=True)
    )
    logs = ("train/grad_norm_actor", "train/grad_norm_critic", "train/grad_clip_coef", "train/value_loss", "train/loss")
    assert all(fast.logger.name_to_value[key] == plain.logger.name_to_value[key] for key in logs)


@pytest.mark.parametrize("groups", [1, 3])
@pytest.mark.parametrize("batch_size", [5, None])
def test_multi_critic_tensor_minibatches_keep_the_group_dim(groups, batch_size):
    from sb3_xppo.multi_critic import MultiCriticRolloutBuffer

    buffer = MultiCriticRolloutBuffer(8, BOX, spaces.Discrete(4), device="cpu", n_envs=3, n_groups=groups)
    rng = np.random.default_rng(0)
    BOX.seed(0)
    for step in range(8):
        value = th.as_tensor(rng.normal(size=(3, groups)), dtype=th.float32)
        buffer.add(np.stack([BOX.sample() for _ in range(3)]), rng.integers(0, 4, (3, 1)), rng.normal(size=(3, groups)),
                   np.array([step == 0] * 3), value, th.as_tensor(rng.normal(size=3), dtype=th.float32))  # fmt: skip
    buffer.compute_returns_and_advantage(th.zeros(3, groups), np.zeros(3, dtype=bool))
    for _ in range(2):
        np.random.seed(3)
        reference = list(RolloutBuffer.get(buffer, batch_size))  # SB3's pass: values and returns indexed from the arrays
        for a, b in zip(seeded_samples(buffer, batch_size), reference, strict=True):
            assert_same_samples(a, b)
            assert a.old_values.shape == a.returns.shape == (len(a.actions), groups)


def test_set_training_mode_skips_only_where_nothing_would_change():
    env = make_vec_env("CartPole-v1", 2, seed=0)
    model, ppo = XPPO("MlpPolicy", env, n_steps=16, seed=0), PPO("MlpPolicy", env, n_steps=16, seed=0)
    obs = env.reset()
    for mode in (True, False, False, True):
        model.policy.set_training_mode(mode)
        assert all(module.training is mode for module in model.policy.modules())
    model.policy.mlp_extractor.policy_net.train(True)  # one submodule out of step: the walk runs
    model.policy.set_training_mode(False)
    assert not any(module.training for module in model.policy.modules())
    assert np.array_equal(model.predict(obs, deterministic=True)[0], ppo.predict(obs, deterministic=True)[0])
