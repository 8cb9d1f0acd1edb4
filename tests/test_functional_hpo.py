"""hpo_actor_loss: the Huber fit of the log-ratio to eps * clamp(A) (Kaddour 2026), by hand, against a loop, gradients."""

import itertools

import pytest
import torch as th
from reference import hpo_loss_loop, moments_loop, zscore_loop

from sb3_xppo import hpo_actor_loss, ppo_actor_loss
from sb3_xppo.functional import AdvantageStats


def make_inputs(shape=(3, 7), seed=0, dtype=th.float32):
    gen = th.Generator().manual_seed(seed)
    logp = (th.randn(*shape, generator=gen, dtype=dtype) * 0.3 - 1).requires_grad_()
    old = logp.detach() + th.randn(*shape, generator=gen, dtype=dtype) * 0.3
    adv = th.randn(*shape, generator=gen, dtype=dtype)
    return logp, old, adv


def test_huber_branches_by_hand():
    # eps 0.2, A 0.5: target 0.1; e = 0 (on target), 0.05 (quadratic: |e| < eps), 0.4 (linear: |e| >= eps)
    logp, old = th.tensor([0.1, 0.15, 0.5]), th.zeros(3)
    adv = th.tensor([0.5, 0.5, 0.5])
    loss = hpo_actor_loss(logp, old, adv, min_advantage_std=None)
    expected = [0.0, 0.5 * 0.05**2 / (2 * 0.2), 0.5 * (0.4 - 0.2 / 2)]
    assert th.allclose(loss, th.tensor(expected), atol=1e-7)


def test_sign_dependent_eps_by_hand():
    # eps_clip (low 0.1, high 0.3): eps 0.3 and target 0.3 where A >= 0, eps 0.1 and target -0.1 where A < 0
    logp, old = th.tensor([0.1, 1.0, -0.05, 0.2]), th.zeros(4)
    adv = th.tensor([1.0, 1.0, -1.0, -1.0])
    loss = hpo_actor_loss(logp, old, adv, eps_clip=(0.1, 0.3))
    expected = [
        0.2**2 / (2 * 0.3),  # e = -0.2, quadratic with eps 0.3
        0.7 - 0.3 / 2,  # e = 0.7, linear with eps 0.3
        0.05**2 / (2 * 0.1),  # e = 0.05, quadratic with eps 0.1
        0.3 - 0.1 / 2,  # e = 0.3, linear with eps 0.1
    ]
    assert th.allclose(loss, th.tensor(expected), atol=1e-6)
    # A = 0 takes the high side and weighs nothing
    assert hpo_actor_loss(th.tensor([0.3]), th.zeros(1), th.zeros(1), eps_clip=(0.1, 0.3), min_advantage_std=None) == 0


def test_advantage_clip_by_hand():
    # A = 5 clipped to 2: the target is 0.2 * 2 = 0.4, reached by log r = 0.4; the weight stays |A| = 5
    logp, old, adv = th.tensor([0.4, 0.0]), th.zeros(2), th.tensor([5.0, 5.0])
    loss = hpo_actor_loss(logp, old, adv, min_advantage_std=None)
    assert th.allclose(loss, th.tensor([0.0, 5 * (0.4 - 0.1)]), atol=1e-6)
    # a (c_low, c_high) pair: A = -5 -> target -0.2 * 1, A = 5 -> target 0.2 * 3
    logp, adv = th.tensor([-0.2, 0.6]), th.tensor([-5.0, 5.0])
    loss = hpo_actor_loss(logp, old, adv, advantage_clip=(1.0, 3.0))
    assert th.allclose(loss, th.zeros(2), atol=1e-6)
    unclipped = hpo_actor_loss(logp, old, adv, advantage_clip=float("inf"))
    assert th.allclose(unclipped, th.tensor([5 * (0.8 - 0.1), 5 * (0.4 - 0.1)]), atol=1e-6)


def test_straight_through_clamp_keeps_the_gradient():
    # log r = 3 clamped to 0.5 in the forward pass; target 0.2, e = 0.3 (linear branch): the gradient is sign(e) |A| = 1
    logp, old, adv = th.tensor([3.0, 0.25], requires_grad=True), th.zeros(2), th.ones(2)
    loss = hpo_actor_loss(logp, old, adv, log_ratio_clamp=0.5, min_advantage_std=None)
    assert th.allclose(loss, th.tensor([0.3 - 0.1, 0.05**2 / 0.4]), atol=1e-6)
    loss.sum().backward()
    # outside the clamp: 1, not 0 as a plain clamp gives; inside: e / eps = 0.25
    assert th.allclose(logp.grad, th.tensor([1.0, 0.25]), atol=1e-6)
    plain = th.tensor([3.0], requires_grad=True)
    ppo_actor_loss(plain, th.zeros(1), th.ones(1), log_ratio_clamp=0.5).sum().backward()
    assert plain.grad.item() == 0.0  # the contrast: PPO's clamp is a plain one
    # the forward value is exactly the clamped one
    low = hpo_actor_loss(th.tensor([-3.0]), th.zeros(1), -th.ones(1), log_ratio_clamp=(-0.4, 1.0), min_advantage_std=None)
    assert low.item() == pytest.approx(0.2 - 0.1)


def test_log_ratio_clamp_must_contain_twice_eps():
    logp, old, adv = make_inputs()
    for ok in (0.4, (-0.4, 0.4), (-1.0, 0.5), 10.0):
        hpo_actor_loss(logp, old, adv, log_ratio_clamp=ok)
    for bad in (0.3, (-0.3, 0.5), (-0.5, 0.39)):
        with pytest.raises(ValueError, match=r"log_ratio_clamp=.* must contain \(-0.4, 0.4\)"):
            hpo_actor_loss(logp, old, adv, log_ratio_clamp=bad)
    with pytest.raises(ValueError, match=r"must contain \(-0.6, 0.6\)"):
        hpo_actor_loss(logp, old, adv, eps_clip=(0.1, 0.3), log_ratio_clamp=0.5)
    hpo_actor_loss(logp, old, adv, eps_clip=(0.1, 0.3), log_ratio_clamp=0.6)


def test_constant_advantages_are_skipped_by_default():
    logp, old, _ = make_inputs()
    adv = th.full((3, 7), 0.7)
    loss = hpo_actor_loss(logp, old, adv)
    assert loss.requires_grad and th.equal(loss, th.zeros(3, 7))
    loss.sum().backward()
    assert th.equal(logp.grad, th.zeros(3, 7))
    kept = hpo_actor_loss(logp, old, adv, min_advantage_std=None)
    assert (kept > 0).any()
    # a variance of 4e-12 is kept by the default 1e-6 (1e-12) and skipped by 3e-6 (9e-12)
    adv = th.tensor([1.0, 1.0 + 4e-6], dtype=th.float64)
    two = th.zeros(2, dtype=th.float64)
    assert hpo_actor_loss(two + 0.5, two, adv).sum() > 0
    assert hpo_actor_loss(two + 0.5, two, adv, min_advantage_std=3e-6).sum() == 0
    # masked: only the valid entries' variance counts
    mask = th.tensor([True, True, False])
    adv = th.tensor([2.0, 2.0, -50.0])
    assert hpo_actor_loss(th.ones(3), th.zeros(3), adv, mask=mask) == 0
    assert hpo_actor_loss(th.ones(3), th.zeros(3), adv).sum() > 0


@pytest.mark.parametrize("normalize", [False, True])
def test_stats(normalize):
    logp, old, adv = make_inputs()
    mask = th.rand(3, 7, generator=th.Generator().manual_seed(1)) > 0.4
    loss, stats = hpo_actor_loss(logp, old, adv, mask=mask, normalize_advantages=normalize, return_stats=True)
    assert isinstance(stats, AdvantageStats) and stats.mean.shape == () and stats.var.shape == ()
    mean, var = moments_loop(adv.flatten().tolist(), mask.float().flatten().tolist())
    assert stats.mean.item() == pytest.approx(mean, abs=1e-6) and stats.var.item() == pytest.approx(var, abs=1e-6)
    assert th.equal(loss, hpo_actor_loss(logp, old, adv, mask=mask, normalize_advantages=normalize))
    _, unmasked = hpo_actor_loss(logp, old, adv, return_stats=True)
    assert th.allclose(unmasked.mean, adv.mean()) and th.allclose(unmasked.var, adv.var(unbiased=False))


OPTIONS = dict(
    eps_clip=[0.2, (0.1, 0.3)],
    normalize_advantages=[False, True],
    delightful=[False, True],
    log_ratio_clamp=[None, (-0.7, 0.6)],
    advantage_clip=[2.0, (0.5, 1.0)],
)


@pytest.mark.parametrize("combo", list(itertools.product(*OPTIONS.values())))
def test_matches_loop_reference(combo):
    kwargs = dict(zip(OPTIONS, combo))
    logp, old, adv = make_inputs()
    loss = hpo_actor_loss(logp, old, adv, delight_temp=0.7, **kwargs)
    eps, clip = kwargs["eps_clip"], kwargs["advantage_clip"]
    low, high = (eps, eps) if isinstance(eps, float) else eps
    c_low, c_high = (clip, clip) if isinstance(clip, float) else clip
    expected = hpo_loss_loop(
        logp.flatten().tolist(),
        old.flatten().tolist(),
        adv.flatten().tolist(),
        low=low,
        high=high,
        c_low=c_low,
        c_high=c_high,
        normalize=kwargs["normalize_advantages"],
        delightful=kwargs["delightful"],
        temp=0.7,
        clamp=kwargs["log_ratio_clamp"],
    )
    assert loss.shape == logp.shape
    assert th.allclose(loss.flatten(), th.tensor(expected), atol=1e-5)
    mask = th.rand(3, 7, generator=th.Generator().manual_seed(2)) > 0.3
    masked = hpo_actor_loss(logp, old, adv, delight_temp=0.7, mask=mask, **kwargs)
    # normalization differs with a mask (valid entries only), so compare the masked mean only without it
    if not kwargs["normalize_advantages"]:
        assert th.allclose(masked, loss[mask].mean())


def transformed_advantages(adv, weights, normalize):
    """The advantages as the loss forms its target from them, by the loop reference."""
    return zscore_loop(adv.tolist(), weights.tolist()) if normalize else adv.tolist()


@pytest.mark.parametrize("kwargs", [dict(), dict(normalize_advantages=True), dict(log_ratio_clamp=1.0)])
def test_gradcheck_float64(kwargs):
    gen = th.Generator().manual_seed(3)
    logp = (th.randn(12, generator=gen, dtype=th.float64) * 0.3).requires_grad_()
    old = th.randn(12, generator=gen, dtype=th.float64) * 0.1
    adv = th.randn(12, generator=gen, dtype=th.float64)
    weights = th.rand(12, generator=gen, dtype=th.float64) + 0.1
    low, high, c = 0.1, 0.3, 2.0
    # away from the kinks (|e| = eps, |A| = c, A = 0) and inside the clamp, where the straight-through gradient is the
    # true derivative; the samples cover both Huber branches
    a = transformed_advantages(adv, weights, kwargs.get("normalize_advantages"))
    log_ratio = (logp - old).tolist()
    assert max(abs(x) for x in log_ratio) < 0.99
    errors = [lr - (high if x >= 0 else low) * min(max(x, -c), c) for lr, x in zip(log_ratio, a)]
    eps = [high if x >= 0 else low for x in a]
    assert min(abs(abs(e) - s) for e, s in zip(errors, eps)) > 1e-3
    assert min(min(abs(abs(x) - c), abs(x)) for x in a) > 1e-3
    assert any(abs(e) < s for e, s in zip(errors, eps)) and any(abs(e) > s for e, s in zip(errors, eps))

    def loss(lp: th.Tensor, adv_: th.Tensor) -> th.Tensor:
        return hpo_actor_loss(lp, old, adv_, eps_clip=(low, high), mask=weights, **kwargs)

    # (the delightful gate is detached by design: its gradient is not the derivative, so it is left out here)
    assert th.autograd.gradcheck(loss, (logp, adv.clone().requires_grad_()))


@pytest.mark.parametrize("dtype", [th.bfloat16, th.float16])
def test_float32_under_autocast(dtype):
    logp, old, adv = (t.detach().to(dtype) for t in make_inputs())
    with th.autocast("cpu", dtype=th.bfloat16):
        loss, stats = hpo_actor_loss(logp, old, adv, mask=th.ones(3, 7), return_stats=True, log_ratio_clamp=1.0)
    assert loss.dtype == th.float32 and stats.var.dtype == th.float32
    expected = hpo_actor_loss(logp.float(), old.float(), adv.float(), mask=th.ones(3, 7), log_ratio_clamp=1.0)
    assert th.allclose(loss, expected)
    f64 = hpo_actor_loss(*(t.detach().double() for t in make_inputs()))
    assert f64.dtype == th.float64


def test_grouped_inputs_with_a_time_mask_and_padding():
    logp, old, adv = make_inputs(shape=(2, 3, 5))  # (b g n)
    mask = th.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=th.bool)  # (b n)
    old = old.clone()
    old[0, :, 3:] = float("nan")  # padding may hold anything
    loss = hpo_actor_loss(logp, old, adv, mask=mask, group_dim=1)
    full = mask.unsqueeze(1).expand(2, 3, 5)
    assert th.allclose(loss, hpo_actor_loss(logp, old, adv)[full].mean())
    loss.backward()
    assert th.isfinite(loss) and th.isfinite(logp.grad).all()


def test_errors():
    logp, old, adv = make_inputs()
    with pytest.raises(ValueError, match="advantages"):
        hpo_actor_loss(logp, old, adv.unsqueeze(1).expand(3, 2, 7))  # grouped advantages
    with pytest.raises(ValueError, match="old_action_log_probs"):
        hpo_actor_loss(logp, old[:, :5], adv)
    with pytest.raises(ValueError, match="eps_clip"):
        hpo_actor_loss(logp, old, adv, eps_clip=0.0)
    with pytest.raises(ValueError, match="eps_clip"):
        hpo_actor_loss(logp, old, adv, eps_clip=(0.1, -0.1))
    with pytest.raises(ValueError, match="advantage_clip"):
        hpo_actor_loss(logp, old, adv, advantage_clip=-1.0)
    with pytest.raises(ValueError, match="advantage_clip"):
        hpo_actor_loss(logp, old, adv, advantage_clip=(1.0, 2.0, 3.0))
    with pytest.raises(ValueError, match="log_ratio_clamp"):
        hpo_actor_loss(logp, old, adv, log_ratio_clamp=(1.0,))
    with pytest.raises(ValueError, match="min_advantage_std"):
        hpo_actor_loss(logp, old, adv, min_advantage_std=-1.0)
    with pytest.raises(ValueError, match="mask"):
        hpo_actor_loss(logp, old, adv, mask=th.ones(3, 6))
