"""
Bounded actions with a Beta distribution (``policy_kwargs=dict(action_dist="beta")``, Chou et al. 2017,
sb3_xppo/common/beta.py): the numbers against scipy, actions on the bounds, the refused combinations, save/load,
learn(), the unchecked fast path, and DAgger with Beta students and teachers.
"""

import functools
import math

import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from helpers import params_equal
from sb3_contrib.common.envs import InvalidActionEnvDiscrete
from scipy import integrate, stats
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from torch.distributions import Beta, Distribution, Independent, Normal

from sb3_xppo import (
    XPPO,
    DaggerCallback,
    DaggerDistiller,
    MaskableXPPO,
    RecurrentXPPO,
    best_action,
    kl_loss,
    mse_loss,
    nll_loss,
)
from sb3_xppo.common import BetaDistribution
from sb3_xppo.common.beta import BETA_EPS, ScaledBeta, beta_concentrations
from sb3_xppo.common.policies import RecurrentXPPOActorCriticPolicy, XPPOActorCriticPolicy
from sb3_xppo.dagger_distill.policy_adapter import PolicyAdapter

TINY = dict(n_steps=64, batch_size=32, n_epochs=2, device="cpu", seed=0)
BETA = dict(action_dist="beta", net_arch=[16])
LOW, HIGH = np.array([-2.0, 0.5, -1.0]), np.array([1.0, 3.0, -0.25])  # asymmetric bounds, widths 3, 2.5, 0.75
BOX = spaces.Box(LOW.astype(np.float32), HIGH.astype(np.float32))  # the same bounds (float32 holds them)


def _distribution(params: th.Tensor) -> BetaDistribution:
    return BetaDistribution(3, LOW, HIGH).proba_distribution(params)


def _params(n: int = 5, scale: float = 2.0, dtype: th.dtype = th.float64) -> th.Tensor:
    return scale * th.randn(n, 6, generator=th.Generator().manual_seed(0), dtype=dtype)


def _policy(action_space: spaces.Space, **kwargs) -> XPPOActorCriticPolicy:
    return XPPOActorCriticPolicy(spaces.Box(-1, 1, (4,)), action_space, lambda _: 1e-3, **{**BETA, **kwargs})


# --- the distribution ---------------------------------------------------------------------------------------------


def test_log_prob_and_entropy_against_scipy():
    params = _params()
    dist = _distribution(params)
    alpha, beta = (1 + th.nn.functional.softplus(params)).numpy().reshape(5, 2, 3).transpose(1, 0, 2)
    frozen = stats.beta(alpha, beta, loc=LOW, scale=HIGH - LOW)  # the density of low + (high - low) x
    actions = dist.sample()
    expected_log_prob = frozen.logpdf(actions.numpy()).sum(axis=1)
    np.testing.assert_allclose(dist.log_prob(actions).numpy(), expected_log_prob, rtol=1e-10)
    np.testing.assert_allclose(dist.entropy().numpy(), frozen.entropy().sum(axis=1), rtol=1e-10)
    # the log-Jacobian: the same as the Beta's on [0, 1], less sum log(high - low)
    x = (actions.numpy() - LOW) / (HIGH - LOW)
    unit = stats.beta(alpha, beta).logpdf(x).sum(axis=1) - np.log(HIGH - LOW).sum()
    np.testing.assert_allclose(dist.log_prob(actions).numpy(), unit, rtol=1e-10)


def test_concentrations_mode_and_mean():
    params = _params()
    alpha, beta = beta_concentrations(params)
    th.testing.assert_close(alpha, 1 + th.nn.functional.softplus(params[:, :3]))  # the first half: alpha
    th.testing.assert_close(beta, 1 + th.nn.functional.softplus(params[:, 3:]))
    assert bool((alpha > 1).all() and (beta > 1).all())
    dist = _distribution(params)
    low, high = th.as_tensor(LOW), th.as_tensor(HIGH)
    th.testing.assert_close(dist.mode(), low + (high - low) * (alpha - 1) / (alpha + beta - 2))
    th.testing.assert_close(dist.distribution.mean, low + (high - low) * alpha / (alpha + beta))
    assert th.equal(dist.get_actions(deterministic=True), dist.mode())
    # the mode is where the density is highest
    for shift in (-1e-3, 1e-3):
        assert bool((dist.distribution.log_prob(dist.mode() + shift) < dist.distribution.log_prob(dist.mode())).all())


@pytest.mark.parametrize("dtype", [th.float32, th.float64])
def test_actions_on_and_beyond_the_bounds_are_finite(dtype):
    params = _params(3, scale=5.0, dtype=dtype).requires_grad_()
    dist = _distribution(params)
    low, high = th.as_tensor(LOW, dtype=dtype), th.as_tensor(HIGH, dtype=dtype)
    for actions in (low.expand(3, 3), high.expand(3, 3), low.expand(3, 3) - 1, high.expand(3, 3) + 1):
        log_prob = dist.log_prob(actions)
        assert bool(th.isfinite(log_prob).all())
        (grad,) = th.autograd.grad(log_prob.sum(), params, retain_graph=True)
        assert bool(th.isfinite(grad).all())
    # scored at x clamped to [eps, 1 - eps]
    x = th.full((3, 3), BETA_EPS, dtype=dtype)
    expected = Beta(*beta_concentrations(params)).log_prob(x).sum(1) - th.log(high - low).sum()
    th.testing.assert_close(dist.log_prob(low.expand(3, 3)), expected)


def test_samples_stay_inside_the_bounds_even_at_extreme_concentrations():
    # concentrations near 1 and huge: samples pile up close to the bounds, none crosses them
    params = th.tensor([[40.0, -40.0, 0.0, -40.0, 40.0, 60.0]]).expand(20_000, 6)
    dist = BetaDistribution(3, LOW, HIGH).proba_distribution(params)
    actions = dist.sample().numpy()
    assert actions.dtype == np.float32
    assert np.array_equal(np.clip(actions, LOW.astype(np.float32), HIGH.astype(np.float32)), actions)
    assert np.isfinite(dist.log_prob(th.as_tensor(actions)).numpy()).all()


def test_bounds_the_dtype_cannot_hold_are_rounded_inwards():
    # float64 bounds that float32 cannot hold: float32 actions still lie inside the float64 Box
    box = spaces.Box(np.array([-0.1, 0.3]), np.array([0.1, 0.7]), dtype=np.float64)
    dist = BetaDistribution.for_space(box)
    low, high = dist.bounds(th.zeros(1))
    assert bool((low.double() >= th.as_tensor(box.low)).all() and (high.double() <= th.as_tensor(box.high)).all())
    modes = dist.proba_distribution(th.tensor([[60.0, -60.0, -60.0, 60.0]])).mode().numpy()
    assert np.array_equal(np.clip(modes, box.low, box.high), modes)


def test_bounds_built_under_inference_mode_serve_autograd():
    dist = BetaDistribution(3, LOW, HIGH)
    with th.inference_mode():
        dist.proba_distribution(th.zeros(2, 6)).sample()
    params = th.zeros(2, 6, requires_grad=True)
    dist.proba_distribution(params).sample().sum().backward()  # the rsample's affine map saves the bounds
    assert params.grad is not None


# --- the policy option --------------------------------------------------------------------------------------------


def test_the_option_builds_a_beta_head():
    policy = _policy(BOX)
    assert isinstance(policy.action_dist, BetaDistribution) and policy.action_net.out_features == 6
    assert not hasattr(policy, "log_std")
    actions, _ = policy.predict(np.zeros((4, 4), dtype=np.float32))
    assert np.array_equal(np.clip(actions, policy.action_space.low, policy.action_space.high), actions)
    assert policy._get_constructor_parameters()["action_dist"] == "beta"
    assert (
        "action_dist"
        not in XPPOActorCriticPolicy(spaces.Box(-1, 1, (4,)), spaces.Box(-1, 1), lambda _: 1e-3)._get_constructor_parameters()
    )


@pytest.mark.parametrize(
    "space",
    [
        spaces.Box(-np.inf, np.inf, (2,)),
        spaces.Box(np.array([-1.0, 0.0], np.float32), np.array([1.0, np.inf], np.float32)),
        spaces.Discrete(3),
    ],
)
def test_spaces_without_finite_bounds_are_refused(space):
    with pytest.raises(ValueError, match="action_dist='beta' needs a Box action space with finite bounds"):
        _policy(space)


def test_refused_combinations():
    with pytest.raises(ValueError, match="action_dist must be one of"):
        _policy(spaces.Box(-1, 1), action_dist="kumaraswamy")
    with pytest.raises(ValueError, match=r"gSDE \(use_sde=True\).*action_dist='beta'"):
        XPPO("MlpPolicy", "Pendulum-v1", use_sde=True, policy_kwargs=BETA)
    with pytest.raises(ValueError, match=r"rpo_alpha.*action_dist='beta'"):
        XPPO("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(rpo_alpha=0.5, **BETA))
    with pytest.raises(ValueError, match="action_dist='beta'"):
        MaskableXPPO("MlpPolicy", InvalidActionEnvDiscrete(dim=4, n_invalid_actions=1), policy_kwargs=BETA)


def test_trusted_distribution_is_the_checked_one_bit_for_bit():
    previous = Distribution._validate_args
    Distribution.set_default_validate_args(True)
    try:
        policy = _policy(BOX)
        obs = th.randn(8, 4)
        checked = policy.get_distribution(obs)
        assert checked.distribution._validate_args and checked.distribution.base_dist._validate_args
        actions = checked.sample()
        expected = (checked.log_prob(actions), checked.entropy(), checked.mode())
        with policy.trusted_inputs():
            trusted = policy.get_distribution(obs)
        assert trusted.distribution._validate_args is False and trusted.distribution.base_dist._validate_args is False
        for a, b in zip((trusted.log_prob(actions), trusted.entropy(), trusted.mode()), expected, strict=True):
            assert th.equal(a, b)
    finally:
        Distribution.set_default_validate_args(previous)


def test_fast_paths_learn_the_same_bits():
    models = []
    for fast in (True, False):  # each built (seeded) and trained in turn: the seed is torch's global generator's
        models.append(XPPO("MlpPolicy", "Pendulum-v1", fast_paths=fast, policy_kwargs=BETA, **TINY))
        models[-1].learn(128)
    assert params_equal(models[0].policy, models[1].policy)


class RecordsActions(BaseCallback):
    """Whether the rollout's executed (clipped) actions were the policy's, and inside the bounds."""

    def __init__(self) -> None:
        super().__init__()
        self.unchanged: list[bool] = []

    def _on_step(self) -> bool:
        self.unchanged.append(np.array_equal(self.locals["actions"], self.locals["clipped_actions"]))
        obs = th.as_tensor(self.locals["new_obs"], dtype=th.float32)
        _, values, log_prob = self.model.policy(obs)  # with gradients, after the rollout's inference-mode calls
        (values.sum() + log_prob.sum()).backward()
        return True


def test_learn_leaves_actions_unclipped_and_predict_returns_the_mode():
    callback = RecordsActions()
    model = XPPO("MlpPolicy", "Pendulum-v1", policy_kwargs=BETA, **TINY)
    model.learn(128, callback=callback)
    assert all(callback.unchanged) and len(callback.unchanged) == 128
    for key in ("train/loss", "train/entropy_loss", "train/approx_kl"):
        assert np.isfinite(model.logger.name_to_value[key])
    obs = np.random.default_rng(0).normal(size=(16, 3)).astype(np.float32)
    with th.no_grad():
        mode = model.policy.get_distribution(th.as_tensor(obs)).mode().numpy()
    assert np.array_equal(model.predict(obs, deterministic=True)[0], mode)
    # evaluate_actions on the bounds: finite values, log-probabilities, entropy and gradients
    actions = th.tensor([[-2.0], [2.0]] * 8)
    values, log_prob, entropy = model.policy.evaluate_actions(th.as_tensor(obs), actions)
    (log_prob.sum() + entropy.sum()).backward()
    assert all(bool(th.isfinite(t).all()) for t in (values, log_prob, entropy))
    assert all(bool(th.isfinite(p.grad).all()) for p in model.policy.parameters() if p.grad is not None)


def test_save_load_round_trip(tmp_path):
    model = XPPO("MlpPolicy", "Pendulum-v1", policy_kwargs=BETA, **TINY)
    model.learn(128)
    model.save(tmp_path / "model")
    loaded = XPPO.load(tmp_path / "model", env=model.get_env(), device="cpu")
    assert isinstance(loaded.policy.action_dist, BetaDistribution) and loaded.policy.action_dist_name == "beta"
    assert params_equal(model.policy, loaded.policy)
    obs = np.random.default_rng(0).normal(size=(16, 3)).astype(np.float32)
    assert np.array_equal(model.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0])
    loaded.learn(64)  # and it trains on
    # the policy alone (SB3's policy save) round-trips with the option
    model.policy.save(tmp_path / "policy")
    policy = XPPOActorCriticPolicy.load(tmp_path / "policy")
    assert isinstance(policy.action_dist, BetaDistribution) and params_equal(model.policy, policy)


def test_recurrent_xppo_learns_saves_and_loads(tmp_path):
    kwargs = dict(BETA, lstm_hidden_size=8)
    model = RecurrentXPPO("MlpLstmPolicy", "Pendulum-v1", policy_kwargs=kwargs, **TINY)
    assert isinstance(model.policy, RecurrentXPPOActorCriticPolicy) and isinstance(model.policy.action_dist, BetaDistribution)
    model.learn(128)
    assert np.isfinite(model.logger.name_to_value["train/loss"])
    model.save(tmp_path / "model")
    loaded = RecurrentXPPO.load(tmp_path / "model", device="cpu")
    obs = np.zeros((1, 3), dtype=np.float32)
    action, _ = model.predict(obs, deterministic=True)
    assert np.array_equal(loaded.predict(obs, deterministic=True)[0], action) and -2 <= action.item() <= 2


@pytest.mark.skipif(not th.cuda.is_available(), reason="needs CUDA")
def test_beta_on_cuda(tmp_path):
    model = XPPO("MlpPolicy", "Pendulum-v1", policy_kwargs=BETA, **{**TINY, "device": "cuda"})
    model.learn(128)
    assert np.isfinite(model.logger.name_to_value["train/loss"])
    assert all(t.device.type == "cuda" for t in model.policy.action_dist.bounds(th.zeros(1, device="cuda")))
    model.save(tmp_path / "model")
    loaded = XPPO.load(tmp_path / "model", device="cuda")
    obs = np.random.default_rng(0).normal(size=(16, 3)).astype(np.float32)
    assert np.array_equal(model.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0])


# --- DAgger ---------------------------------------------------------------------------------------------------------


def _beta_head(params: th.Tensor) -> Independent:
    return Independent(_distribution(params).distribution, 1)


def test_adapter_reads_a_beta_policy_and_its_best_action_is_the_mode():
    model = XPPO("MlpPolicy", "Pendulum-v1", policy_kwargs=BETA, **TINY)
    obs = th.randn(6, 3)
    head = PolicyAdapter(model.policy)(obs)
    assert isinstance(head, Independent) and isinstance(head.base_dist, ScaledBeta)
    with th.no_grad():
        assert th.equal(best_action(head), model.policy.get_distribution(obs).mode())
        actions = model.policy.get_distribution(obs).sample()
        assert th.equal(head.log_prob(actions), model.policy.get_distribution(obs).log_prob(actions))


def test_nll_kl_and_mse_between_beta_policies():
    student_params, teacher_params = _params(), _params(scale=1.0) + 0.5

    def loss(loss_fn):
        distiller = DaggerDistiller(
            lambda s: _beta_head(student_params), lambda s: _beta_head(teacher_params), loss_fn=loss_fn
        )
        return distiller(th.zeros(5, 1))[0].item()

    teacher_mode = _distribution(teacher_params).mode()
    assert loss(nll_loss) == pytest.approx(-_distribution(student_params).log_prob(teacher_mode).mean().item(), rel=1e-9)
    # KL(teacher || student): the Betas' on [0, 1] (the same affine map leaves it unchanged), by numerical integration
    a_t, b_t = (c.numpy() for c in beta_concentrations(teacher_params))
    a_s, b_s = (c.numpy() for c in beta_concentrations(student_params))
    p, q = stats.beta(a_t[0, 0], b_t[0, 0]), stats.beta(a_s[0, 0], b_s[0, 0])
    kl_00 = integrate.quad(lambda x: p.pdf(x) * (p.logpdf(x) - q.logpdf(x)), 0, 1)[0]
    kl = kl_loss(_beta_head(student_params), _beta_head(teacher_params))
    assert kl.shape == (5,)
    elementwise = th.distributions.kl_divergence(
        _distribution(teacher_params).distribution, _distribution(student_params).distribution
    )
    assert elementwise[0, 0].item() == pytest.approx(kl_00, rel=1e-7)
    assert loss(kl_loss) == pytest.approx(kl.mean().item(), rel=1e-9)
    assert loss(functools.partial(kl_loss, reverse=True)) != pytest.approx(loss(kl_loss))
    means = _distribution(student_params).distribution.mean - _distribution(teacher_params).distribution.mean
    assert loss(mse_loss) == pytest.approx(means.square().sum(1).mean().item(), rel=1e-9)


def test_gaussian_teacher_into_a_beta_student():
    student_params = _params()
    # the Gaussian's means, some beyond the bounds: the nll scores them at the (clamped) bounds, finite
    mean = th.tensor(
        [[-5.0, 0.5, 0.0], [0.0, 1.0, -0.5], [2.0, 9.0, -3.0], [1.0, 3.0, -0.25], [-2.0, 2.0, -1.0]], dtype=th.float64
    )
    teacher = Independent(Normal(mean, th.ones_like(mean)), 1)
    distiller = DaggerDistiller(lambda s: _beta_head(student_params), lambda s: teacher)
    nll = distiller(th.zeros(5, 1))[0]
    clipped = th.minimum(th.maximum(mean, th.as_tensor(LOW)), th.as_tensor(HIGH))
    assert math.isfinite(nll.item())
    assert nll.item() == pytest.approx(-_distribution(student_params).log_prob(clipped).mean().item(), rel=1e-6)
    for reverse in (False, True):
        with pytest.raises(NotImplementedError, match=r"no closed-form KL.*nll_loss or mse_loss"):
            kl_loss(_beta_head(student_params), teacher, reverse=reverse)
    assert math.isfinite(
        DaggerDistiller(lambda s: _beta_head(student_params), lambda s: teacher, loss_fn=mse_loss)(th.zeros(5, 1))[0].item()
    )


@pytest.mark.parametrize("student_dist, teacher_dist", [("beta", "gaussian"), ("gaussian", "beta"), ("beta", "beta")])
def test_dagger_callback_with_beta_students_and_teachers(student_dist, teacher_dist):
    teacher = XPPO("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(action_dist=teacher_dist, net_arch=[16]), **TINY)
    student = XPPO("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(action_dist=student_dist, net_arch=[16]), **TINY)
    callback = DaggerCallback(teacher, beta=0.5)
    student.learn(256, callback=callback)
    values = student.logger.name_to_value
    assert np.isfinite(values["train/loss"]) and all(np.isfinite(v) for k, v in values.items() if k.startswith("distill/"))


def test_dagger_callback_gaussian_ppo_teacher_into_a_beta_student_with_kl_fails_clearly():
    teacher = PPO("MlpPolicy", "Pendulum-v1", n_steps=64, device="cpu", seed=0)
    student = XPPO("MlpPolicy", "Pendulum-v1", policy_kwargs=BETA, **TINY)
    with pytest.raises(ValueError, match="no closed-form KL"):  # the callback's check before the first rollout
        student.learn(128, callback=DaggerCallback(teacher, loss_fn=kl_loss))
