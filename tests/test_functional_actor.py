import itertools
import math

import pytest
import torch as th
from reference import actor_loss_loop

from sb3_xppo import ppo_actor_loss, spo_actor_loss


def make_inputs(shape=(3, 7), seed=0):
    gen = th.Generator().manual_seed(seed)
    logp = (th.randn(*shape, generator=gen) * 0.3 - 1).requires_grad_()
    old = logp.detach() + th.randn(*shape, generator=gen) * 0.3
    adv = th.randn(*shape, generator=gen)
    return logp, old, adv


def test_ppo_clip_by_hand():
    # ratios e^0.5 = 1.6487 (clipped to 1.2) and e^-0.5 = 0.6065 (clipped to 0.8)
    logp = th.tensor([0.5, 0.5, -0.5, -0.5])
    old = th.zeros(4)
    adv = th.tensor([1.0, -1.0, 1.0, -1.0])
    loss = ppo_actor_loss(logp, old, adv, eps_clip=0.2)
    r_hi, r_lo = math.exp(0.5), math.exp(-0.5)
    expected = [-1.2, r_hi, -r_lo, 0.8]  # -min(rA, clip(r)A)
    assert th.allclose(loss, th.tensor(expected))


def test_decoupled_clip_by_hand():
    logp, old = th.tensor([0.5, -0.5]), th.zeros(2)
    adv = th.tensor([1.0, -1.0])
    loss = ppo_actor_loss(logp, old, adv, eps_clip=(0.1, 0.3))
    assert th.allclose(loss, th.tensor([-1.3, 0.9]))


def test_dual_clip_only_for_negative_advantages():
    logp, old = th.tensor([2.0, 2.0]), th.zeros(2)
    adv = th.tensor([-1.0, 1.0])
    loss = ppo_actor_loss(logp, old, adv, dual_clip=True, dual_clip_threshold=3.0)
    # A<0: -max(min(e^2 * -1, 1.2 * -1), 3 * -1) = 3; A>0: clipped at 1.2 as usual
    assert th.allclose(loss, th.tensor([3.0, -1.2]))
    assert th.allclose(ppo_actor_loss(logp, old, adv), th.tensor([math.exp(2.0), -1.2]))


def test_delightful_gate_applied_after_normalization():
    logp, old, adv = th.tensor([-1.0, -2.0, -0.5]), th.tensor([-1.0, -2.0, -0.5]), th.tensor([1.0, 2.0, 6.0])
    z = (adv - adv.mean()) / th.sqrt(adv.var(unbiased=False) + 1e-5)
    gated = z * th.sigmoid(-logp * z)
    loss = ppo_actor_loss(logp, old, adv, normalize_advantages=True, delightful=True)
    assert th.allclose(loss, -gated, atol=1e-6)  # ratio is 1


def test_spo_by_hand():
    logp, old = th.tensor([0.5, -0.5]), th.zeros(2)
    adv = th.tensor([2.0, 2.0])
    r1, r2 = math.exp(0.5), math.exp(-0.5)
    loss = spo_actor_loss(logp, old, adv, eps_clip=(0.1, 0.3))
    # eps = high (0.3) where r >= 1, low (0.1) below
    expected = [-(r1 * 2 - 2 * (r1 - 1) ** 2 / 0.6), -(r2 * 2 - 2 * (r2 - 1) ** 2 / 0.2)]
    assert th.allclose(loss, th.tensor(expected))
    # asymmetric: PPO's clipped surrogate where A > 0
    assert th.allclose(spo_actor_loss(logp, old, adv, eps_clip=(0.1, 0.3), asymmetric=True), th.tensor([-2.6, -2 * r2]))


OPTIONS = dict(
    eps_clip=[0.2, (0.1, 0.3)],
    normalize_advantages=[False, True],
    delightful=[False, True],
    dual_clip=[False, True],
    log_ratio_clamp=[None, (-0.2, 0.3)],
)


@pytest.mark.parametrize("kind", ["ppo", "spo", "asymmetric_spo"])
@pytest.mark.parametrize("combo", list(itertools.product(*OPTIONS.values())))
def test_actor_losses_match_loop_reference_with_gradients(kind, combo):
    kwargs = dict(zip(OPTIONS, combo))
    logp, old, adv = make_inputs()
    if kind == "ppo":
        loss = ppo_actor_loss(logp, old, adv, delight_temp=0.7, **kwargs)
    else:
        loss = spo_actor_loss(logp, old, adv, delight_temp=0.7, asymmetric=kind == "asymmetric_spo", **kwargs)
    eps = kwargs["eps_clip"]
    low, high = (eps, eps) if isinstance(eps, float) else eps
    expected = actor_loss_loop(
        logp.flatten().tolist(),
        old.flatten().tolist(),
        adv.flatten().tolist(),
        kind="ppo" if kind == "ppo" else "spo",
        low=low,
        high=high,
        normalize=kwargs["normalize_advantages"],
        delightful=kwargs["delightful"],
        temp=0.7,
        dual_clip=kwargs["dual_clip"],
        log_ratio_clamp=kwargs["log_ratio_clamp"],
        asymmetric=kind == "asymmetric_spo",
    )
    assert loss.shape == logp.shape
    assert th.allclose(loss.flatten(), th.tensor(expected), atol=1e-5)
    # gradients: against a finite difference of the loop reference (the gate is detached, so perturb only the ratio)
    loss.sum().backward()
    i, h = 4, 1e-3
    plus, minus = logp.detach().flatten().clone(), logp.detach().flatten().clone()
    plus[i] += h
    minus[i] -= h
    args = dict(
        kind="ppo" if kind == "ppo" else "spo",
        low=low,
        high=high,
        normalize=kwargs["normalize_advantages"],
        dual_clip=kwargs["dual_clip"],
        log_ratio_clamp=kwargs["log_ratio_clamp"],
        asymmetric=kind == "asymmetric_spo",
    )
    if kwargs["delightful"]:  # the gate's weight is a constant for the gradient: fold it into the advantages
        from reference import sigmoid, zscore_loop

        a = adv.flatten().tolist()
        a = zscore_loop(a, [1.0] * len(a)) if kwargs["normalize_advantages"] else a
        a = [x * sigmoid(-lp * x / 0.7) for lp, x in zip(logp.detach().flatten().tolist(), a)]
        args["normalize"] = False
    else:
        a = adv.flatten().tolist()
    fd = (
        actor_loss_loop(plus.tolist(), old.flatten().tolist(), a, **args)[i]
        - actor_loss_loop(minus.tolist(), old.flatten().tolist(), a, **args)[i]
    ) / (2 * h)
    assert logp.grad.flatten()[i].item() == pytest.approx(fd, abs=2e-3)


@pytest.mark.parametrize("loss_fn", [ppo_actor_loss, spo_actor_loss])
def test_mask_gives_masked_mean_float_and_bool(loss_fn):
    logp, old, adv = make_inputs()
    mask = th.rand(3, 7, generator=th.Generator().manual_seed(1)) > 0.4
    elementwise = loss_fn(logp, old, adv)
    expected = elementwise[mask].mean()
    assert th.allclose(loss_fn(logp, old, adv, mask=mask), expected)
    assert th.allclose(loss_fn(logp, old, adv, mask=mask.float()), expected)
    assert loss_fn(logp, old, adv, mask=mask).ndim == 0


def test_masked_normalization_uses_only_valid_steps():
    logp, old, adv = make_inputs()
    mask = th.rand(3, 7, generator=th.Generator().manual_seed(1)) > 0.4
    adv_poisoned = adv.clone()
    adv_poisoned[~mask] = float("nan")
    loss = ppo_actor_loss(logp, old, adv_poisoned, mask=mask, normalize_advantages=True)
    a = adv[mask]
    z = (a - a.mean()) / th.sqrt(a.var(unbiased=False) + 1e-5)
    ratio = th.exp(logp - old)[mask]
    expected = -th.min(ratio * z, ratio.clamp(0.8, 1.2) * z).mean()
    assert th.allclose(loss, expected)


def test_grouped_inputs_with_a_time_mask():
    logp, old, adv = make_inputs(shape=(2, 3, 5))  # (b g n)
    mask = th.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=th.bool)  # (b n)
    loss = ppo_actor_loss(logp, old, adv, mask=mask, group_dim=1)
    full = mask.unsqueeze(1).expand(2, 3, 5)
    assert th.allclose(loss, ppo_actor_loss(logp, old, adv)[full].mean())
    loss_bng = ppo_actor_loss(logp.transpose(1, 2), old.transpose(1, 2), adv.transpose(1, 2), mask=mask, group_dim=-1)
    assert th.allclose(loss, loss_bng)


@pytest.mark.parametrize("dtype", [th.bfloat16, th.float16])
def test_float32_under_autocast(dtype):
    logp, old, adv = (t.detach().to(dtype) for t in make_inputs())
    with th.autocast("cpu", dtype=th.bfloat16):
        loss = ppo_actor_loss(logp, old, adv, mask=th.ones(3, 7))
        spo = spo_actor_loss(logp, old, adv)
    assert loss.dtype == th.float32 and spo.dtype == th.float32
    expected = ppo_actor_loss(logp.float(), old.float(), adv.float(), mask=th.ones(3, 7))
    assert th.allclose(loss, expected)


def test_autocast_is_switched_off_only_where_it_is_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from sb3_xppo.functional import actor_losses

    assert not actor_losses._autocast_enabled("cpu")
    with th.autocast("cpu", dtype=th.bfloat16):
        assert actor_losses._autocast_enabled("cpu")

    def torch_2_3(*args: object) -> bool:  # torch 2.3's is_autocast_enabled() takes no device type
        if args:
            raise TypeError("is_autocast_enabled() takes 0 positional arguments but 1 was given")
        return False

    with monkeypatch.context() as patch:
        patch.setattr(th, "is_autocast_enabled", torch_2_3)
        assert actor_losses._autocast_enabled("cpu")  # unknown: the off-switch is entered, as it always was
    logp, old, adv = make_inputs()
    assert th.equal(
        ppo_actor_loss(logp, old, adv), -th.min(th.exp(logp - old) * adv, th.exp(logp - old).clamp(0.8, 1.2) * adv)
    )


@pytest.mark.parametrize("fn", [ppo_actor_loss, spo_actor_loss])
@pytest.mark.parametrize(
    "kwargs", [dict(), dict(mask=th.ones(3, 7)), dict(normalize_advantages=True, delightful=True, dual_clip=True)]
)
def test_float64_stays_float64(fn, kwargs):
    # float64 inputs are computed in float64 (only float16/bfloat16 are upcast, to float32), also under autocast
    logp, old, adv = (t.detach().double() for t in make_inputs())
    logp.requires_grad_()
    with th.autocast("cpu", dtype=th.bfloat16):
        loss = fn(logp, old, adv, **kwargs)
    assert loss.dtype == th.float64
    loss.sum().backward()
    assert logp.grad.dtype == th.float64
    # float64 precision, not float32's: a log ratio of 1e-12 moves the loss of an unclipped sample by ~1e-12
    tiny = fn(th.tensor([1e-12], dtype=th.float64), th.zeros(1, dtype=th.float64), th.ones(1, dtype=th.float64))
    assert tiny.item() != -1.0 and abs(tiny.item() + 1.0) < 2e-12


def test_nan_safe_at_masked_steps():
    logp, old, adv = make_inputs()
    mask = th.ones(3, 7, dtype=th.bool)
    mask[0, :3] = False
    old = old.clone()
    old[0, :3] = float("nan")
    logp.grad = None
    loss = ppo_actor_loss(logp, old, adv, mask=mask)
    loss.backward()
    assert th.isfinite(loss) and th.isfinite(logp.grad).all()


@pytest.mark.parametrize("loss_fn", [ppo_actor_loss, spo_actor_loss])
def test_actor_loss_errors(loss_fn):
    logp, old, adv = make_inputs()
    with pytest.raises(ValueError, match="advantages"):
        loss_fn(logp, old, adv.unsqueeze(1).expand(3, 2, 7))  # grouped advantages
    with pytest.raises(ValueError, match="old_action_log_probs"):
        loss_fn(logp, old[:, :5], adv)
    with pytest.raises(ValueError, match="advantages"):
        loss_fn(logp, old, adv[:2])
    with pytest.raises(ValueError, match="dual_clip_threshold"):
        loss_fn(logp, old, adv, dual_clip=True, dual_clip_threshold=1.0)
    with pytest.raises(ValueError, match="dual_clip_threshold"):
        loss_fn(logp, old, adv, dual_clip=True, dual_clip_threshold=0.5)
    with pytest.raises(ValueError, match="eps_clip"):
        loss_fn(logp, old, adv, eps_clip=(0.1, 0.2, 0.3))
    with pytest.raises(ValueError, match="mask"):
        loss_fn(logp, old, adv, mask=th.ones(3, 6))
    with pytest.raises(ValueError, match="eps_clip"):
        loss_fn(logp, old, adv, eps_clip=float("nan"))


def test_zero_clip_range_freezes_ppo_ratio_and_is_refused_by_spo():
    # a linear schedule ends at 0 (rl-zoo3's lin_ values): PPO's surrogate then uses a ratio of exactly 1
    logp, old, adv = make_inputs()
    assert th.allclose(ppo_actor_loss(logp, old, adv, eps_clip=0.0), -th.min(th.exp(logp - old) * adv, adv))
    with pytest.raises(ValueError, match="eps_clip"):
        spo_actor_loss(logp, old, adv, eps_clip=0.0)
    # below 0 (a linear schedule past its budget) the clamp works as torch's, the same as SB3's PPO
    ratio = th.exp(logp - old)
    expected = -th.min(ratio * adv, th.clamp(ratio, 1 + 0.001, 1 - 0.001) * adv)
    assert th.equal(ppo_actor_loss(logp, old, adv, eps_clip=-0.001), expected)


@pytest.mark.parametrize("loss_fn", [ppo_actor_loss, spo_actor_loss])
@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("mask_kind", [None, "bool", "float"])
def test_return_stats(loss_fn, normalize, mask_kind):
    from reference import moments_loop

    from sb3_xppo.functional import AdvantageStats

    logp, old, adv = make_inputs()
    gen = th.Generator().manual_seed(1)
    mask = {None: None, "bool": th.rand(3, 7, generator=gen) > 0.4, "float": th.rand(3, 7, generator=gen)}[mask_kind]
    loss, stats = loss_fn(logp, old, adv, mask=mask, normalize_advantages=normalize, return_stats=True)
    assert isinstance(stats, AdvantageStats) and stats.mean.shape == () and stats.var.shape == ()
    assert not stats.mean.requires_grad and stats.var.dtype == th.float32
    # the statistics of the advantages as they came in (with normalization: the ones the z-score used)
    weights = th.ones(3, 7) if mask is None else mask.float()
    mean, var = moments_loop(adv.flatten().tolist(), weights.flatten().tolist())
    assert stats.mean.item() == pytest.approx(mean, abs=1e-6) and stats.var.item() == pytest.approx(var, abs=1e-6)
    # the loss is the one without return_stats, bit for bit
    assert th.equal(loss, loss_fn(logp, old, adv, mask=mask, normalize_advantages=normalize))


def test_stats_of_grouped_inputs_pool_the_groups():
    # (b g n) inputs with a (b n) mask: one mean and variance over every valid entry, as the z-score pools the groups
    logp, old, adv = make_inputs(shape=(2, 3, 5))
    mask = th.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=th.bool)
    _, stats = ppo_actor_loss(logp, old, adv, mask=mask, group_dim=1, return_stats=True)
    valid = adv[mask.unsqueeze(1).expand(2, 3, 5)]
    assert th.allclose(stats.mean, valid.mean()) and th.allclose(stats.var, valid.var(unbiased=False))


@pytest.mark.parametrize("loss_fn", [ppo_actor_loss, spo_actor_loss])
def test_min_advantage_std_skips_constant_advantages(loss_fn):
    logp, old, _ = make_inputs()
    adv = th.full((3, 7), -1.5)
    # off by default for the clipped and SPO losses
    assert (loss_fn(logp, old, adv) != 0).any()
    for mask in (None, th.ones(3, 7, dtype=th.bool)):
        logp.grad = None
        loss = loss_fn(logp, old, adv, mask=mask, min_advantage_std=1e-6)
        assert loss.requires_grad and th.equal(loss, th.zeros_like(loss))  # multiplied by 0, still in the graph
        loss.sum().backward()
        assert th.equal(logp.grad, th.zeros(3, 7))
    # varied advantages are untouched, bit for bit
    _, _, varied = make_inputs()
    assert th.equal(loss_fn(logp, old, varied, min_advantage_std=1e-6), loss_fn(logp, old, varied))
    # a threshold above the advantages' std skips them too; the mask decides which entries count
    assert loss_fn(logp, old, varied, mask=th.ones(3, 7), min_advantage_std=10.0) == 0
    only_equal = th.zeros(3, 7, dtype=th.bool)
    only_equal[0, :3] = True
    poisoned = varied.clone()
    poisoned[0, :3] = 0.25
    assert loss_fn(logp, old, poisoned, mask=only_equal, min_advantage_std=1e-6) == 0
    assert loss_fn(logp, old, poisoned, mask=~only_equal, min_advantage_std=1e-6) != 0
    with pytest.raises(ValueError, match="min_advantage_std"):
        loss_fn(logp, old, varied, min_advantage_std=-0.1)
