import itertools

import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from reference import combine_grouped_loop, gae_loop, returns_loop
from stable_baselines3.common.buffers import RolloutBuffer

from sb3_xppo import GAE, calc_gae, calc_returns, combine_grouped_advantages, dones_to_masks
from sb3_xppo.functional import reverse_linear_scan

GAMMA, LAM = 0.9, 0.8


def rand(*shape, seed=0):
    return th.randn(*shape, generator=th.Generator().manual_seed(seed))


def test_gae_by_hand():
    # one sequence of 3 steps, terminated after the second: r = [1, 2, 3], V = [0.5, 1, 1.5], bootstrap 2
    rewards, values = th.tensor([[1.0, 2.0, 3.0]]), th.tensor([[0.5, 1.0, 1.5]])
    masks = th.tensor([[1.0, 0.0, 1.0]])
    gae = calc_gae(rewards, values, masks=masks, gamma=0.5, lam=0.5, next_value=2.0, return_advantages=True)
    d2 = 3 + 0.5 * 2 - 1.5  # 2.5
    d1 = 2 + 0 - 1.0  # 1.0 (terminated: no bootstrap)
    d0 = 1 + 0.5 * 1.0 - 0.5  # 1.0
    a2, a1 = d2, d1  # the recursion stops at the termination
    a0 = d0 + 0.25 * a1
    assert th.allclose(gae.advantages, th.tensor([[a0, a1, a2]]))
    assert th.allclose(gae.returns, th.tensor([[a0 + 0.5, a1 + 1.0, a2 + 1.5]]))
    assert isinstance(gae, GAE) and th.equal(
        calc_gae(rewards, values, masks=masks, gamma=0.5, lam=0.5, next_value=2.0), gae.returns
    )


def _reference(rewards, values, masks, done_masks, next_vals, gamma, lam, lens=None):
    """(b n) reference through the plain loop; gamma/lam floats or per-sequence lists."""
    rets, advs = [], []
    for i in range(rewards.shape[0]):
        g = gamma[i] if isinstance(gamma, list) else gamma
        lm = lam[i] if isinstance(lam, list) else lam
        ret, adv = gae_loop(
            rewards[i].tolist(),
            values[i].tolist(),
            next_vals[i].tolist(),
            masks[i].tolist(),
            done_masks[i].tolist(),
            g,
            lm,
            None if lens is None else int(lens[i]),
        )
        rets.append(ret)
        advs.append(adv)
    return th.tensor(rets), th.tensor(advs)


@pytest.mark.parametrize("n", [1, 5, 64, 65, 300])
@pytest.mark.parametrize(
    "variant", ["plain", "values_n_plus_1", "next_value_scalar", "next_value_b", "next_values", "done_masks", "per_seq"]
)
def test_gae_matches_loop(n, variant):
    b = 3
    rewards, values = rand(b, n, seed=1), rand(b, n, seed=2)
    masks = (th.rand(b, n, generator=th.Generator().manual_seed(3)) > 0.1).float()
    boot = rand(b, seed=4)
    kwargs, done_masks = {}, masks
    next_vals = th.cat([values[:, 1:], th.zeros(b, 1)], 1)
    gamma, lam = GAMMA, LAM
    if variant == "values_n_plus_1":
        kwargs["values"] = th.cat([values, boot[:, None]], 1)
        next_vals = th.cat([values[:, 1:], boot[:, None]], 1)
    elif variant == "next_value_scalar":
        kwargs["next_value"] = 1.5
        next_vals = th.cat([values[:, 1:], th.full((b, 1), 1.5)], 1)
    elif variant == "next_value_b":
        kwargs["next_value"] = boot
        next_vals = th.cat([values[:, 1:], boot[:, None]], 1)
        # next_value beats the (n+1)-th value
        kwargs["values"] = th.cat([values, th.full((b, 1), 99.0)], 1)
    elif variant == "next_values":
        next_vals = rand(b, n, seed=5)
        kwargs["next_values"] = next_vals
        kwargs["next_value"] = 99.0  # next_values wins
    elif variant == "done_masks":
        truncated = th.rand(b, n, generator=th.Generator().manual_seed(6)) > 0.8
        done_masks = masks * (~truncated).float()
        kwargs["done_masks"] = done_masks
    elif variant == "per_seq":
        gamma, lam = [0.9, 0.5, 0.99], [0.8, 1.0, 0.0]
        kwargs.update(gamma=th.tensor(gamma), lam=th.tensor(lam))
    kwargs.setdefault("values", values)
    kwargs.setdefault("gamma", gamma)
    kwargs.setdefault("lam", lam)
    gae = calc_gae(rewards, masks=masks, return_advantages=True, **kwargs)
    ret, adv = _reference(rewards, values, masks, done_masks, next_vals, gamma, lam)
    assert th.allclose(gae.advantages, adv, atol=1e-5) and th.allclose(gae.returns, ret, atol=1e-5)


@pytest.mark.parametrize("bootstrap", [None, "next_value", "next_values"])
@pytest.mark.parametrize("n", [6, 100])
def test_gae_lens(bootstrap, n):
    b = 4
    lens = th.tensor([n, 3, 1, n - 2])
    rewards, values = rand(b, n, seed=1), rand(b, n, seed=2)
    masks = (th.rand(b, n, generator=th.Generator().manual_seed(3)) > 0.1).float()
    # padding holds garbage, NaN included: it must not leak
    pad = th.arange(n) >= lens[:, None]
    rewards, values = rewards.masked_fill(pad, float("nan")), values.masked_fill(pad, float("nan"))
    kwargs = {}
    next_vals = th.cat([values[:, 1:], th.zeros(b, 1)], 1)
    last = th.arange(n) == (lens[:, None] - 1)
    if bootstrap == "next_value":
        boot = rand(b, seed=4)
        kwargs["next_value"] = boot
        next_vals = th.where(last, boot[:, None], next_vals)
    elif bootstrap == "next_values":
        next_vals = rand(b, n, seed=5)
        kwargs["next_values"] = next_vals
    else:
        next_vals = th.where(last, 0.0, next_vals)  # the last valid step does not bootstrap
    gae = calc_gae(rewards, values, masks=masks, gamma=GAMMA, lam=LAM, lens=lens, return_advantages=True, **kwargs)
    ret, adv = _reference(rewards, values, masks, masks, next_vals, GAMMA, LAM, lens=lens)
    assert th.isfinite(gae.returns).all() and th.isfinite(gae.advantages).all()
    assert (gae.returns[pad] == 0).all() and (gae.advantages[pad] == 0).all()
    assert th.allclose(gae.advantages, adv, atol=1e-5) and th.allclose(gae.returns, ret, atol=1e-5)


def test_gae_nan_next_value_at_masked_step_never_leaks_and_gradients_flow():
    rewards = rand(2, 70, seed=1).requires_grad_()
    values = rand(2, 71, seed=2)
    masks = th.ones(2, 70)
    masks[0, -1] = 0
    values[0, 70] = float("nan")  # the bootstrap of a terminated sequence
    values[1, 70] = float("inf")
    masks[1, -1] = 0
    values.requires_grad_()
    gae = calc_gae(rewards, values, masks=masks, gamma=GAMMA, lam=LAM, return_advantages=True)
    assert th.isfinite(gae.advantages).all() and th.isfinite(gae.returns).all()
    # gradients against the loop reference: d A_0 / d r_t = (gamma lam)^t
    gae.advantages[0, 0].backward()
    expected = th.tensor([(GAMMA * LAM) ** t for t in range(70)])
    assert th.allclose(rewards.grad[0], expected, atol=1e-6) and (rewards.grad[1] == 0).all()
    assert th.isfinite(values.grad).all()
    # explicit next values: NaN where the step terminated
    next_values = rand(2, 70, seed=3)
    masks = th.ones(2, 70)
    masks[:, 10] = 0
    next_values[:, 10] = float("nan")
    next_values.requires_grad_()
    gae = calc_gae(rewards, values[:, :70], masks=masks, next_values=next_values, return_advantages=True)
    assert th.isfinite(gae.advantages).all()
    gae.advantages.sum().backward()
    assert th.isfinite(next_values.grad).all() and (next_values.grad[:, 10] == 0).all()


def test_float_and_bool_masks_agree():
    rewards, values = rand(3, 20, seed=1), rand(3, 20, seed=2)
    bool_mask = th.rand(3, 20, generator=th.Generator().manual_seed(3)) > 0.2
    a = calc_gae(rewards, values, masks=bool_mask, return_advantages=True)
    b = calc_gae(rewards, values, masks=bool_mask.float(), return_advantages=True)
    assert th.equal(a.advantages, b.advantages) and th.equal(a.returns, b.returns)


def test_single_sequence():
    rewards, values = rand(10, seed=1), rand(10, seed=2)
    masks = (th.rand(10, generator=th.Generator().manual_seed(3)) > 0.2).float()
    gae = calc_gae(rewards, values, masks=masks, next_value=0.7, return_advantages=True)
    batched = calc_gae(rewards[None], values[None], masks=masks[None], next_value=0.7, return_advantages=True)
    assert gae.returns.shape == (10,) and th.equal(gae.returns, batched.returns[0])
    assert th.equal(gae.advantages, batched.advantages[0])


@pytest.mark.parametrize("layout", ["bgn", "bgn_dim1", "bng"])
@pytest.mark.parametrize("shared_values", [False, True])
def test_grouped_gae_matches_per_group(layout, shared_values):
    b, g, n = 2, 3, 12
    rewards = rand(b, g, n, seed=1)
    values = rand(b, n + 1, seed=2) if shared_values else rand(b, g, n + 1, seed=2)
    masks = (th.rand(b, n, generator=th.Generator().manual_seed(3)) > 0.2).float()
    boot = rand(b, g, seed=4)
    group_dim = {"bgn": -2, "bgn_dim1": 1, "bng": -1}[layout]
    to_layout = (lambda x: x.transpose(1, 2)) if layout == "bng" else (lambda x: x)
    v_in = values if shared_values else to_layout(values)
    gae = calc_gae(to_layout(rewards), v_in, masks=masks, next_value=boot, group_dim=group_dim, return_advantages=True)
    for k in range(g):
        v_k = values if shared_values else values[:, k]
        ref = calc_gae(rewards[:, k], v_k, masks=masks, next_value=boot[:, k], return_advantages=True)
        assert th.allclose(to_layout(gae.advantages)[:, k], ref.advantages, atol=1e-6)
        assert th.allclose(to_layout(gae.returns)[:, k], ref.returns, atol=1e-6)


@pytest.mark.parametrize("use_lens", [False, True])
def test_grouped_gae_with_weights_combines(use_lens):
    b, g, n = 3, 2, 9
    rewards, values = rand(b, g, n, seed=1), rand(b, g, n, seed=2)
    lens = th.tensor([9, 4, 6]) if use_lens else None
    weights = th.tensor([1.0, 3.0])
    gae = calc_gae(rewards, values, weights=weights, lens=lens, group_dim=1, return_advantages=True)
    plain = calc_gae(rewards, values, lens=lens, group_dim=1, return_advantages=True)
    mask = None if lens is None else th.arange(n) < lens[:, None]
    expected = combine_grouped_advantages(plain.advantages, weights=weights, group_dim=1, mask=mask)
    assert gae.advantages.shape == (b, n) and gae.returns.shape == (b, g, n)
    assert th.allclose(gae.advantages, expected) and th.equal(gae.returns, plain.returns)
    if use_lens:  # the statistics cover only valid steps: padding does not shift them
        assert (gae.advantages[~mask] == 0).all()


def _sb3_buffer(n_steps, n_envs, seed=0, sequential=False):
    rng = np.random.default_rng(seed)
    box = spaces.Box(-1, 1, (1,))
    buffer = RolloutBuffer(n_steps, box, box, n_envs=n_envs, gamma=0.99, gae_lambda=0.95)
    buffer.rewards[:] = rng.normal(size=(n_steps, n_envs))
    buffer.values[:] = rng.normal(size=(n_steps, n_envs))
    buffer.episode_starts[:] = rng.random((n_steps, n_envs)) < 0.05
    last_values = th.as_tensor(rng.normal(size=n_envs), dtype=th.float32)
    dones = rng.random(n_envs) < 0.3
    buffer.compute_returns_and_advantage(last_values, dones)
    values = th.cat([th.as_tensor(buffer.values.T.copy()), last_values[:, None]], 1)
    starts = np.concatenate([buffer.episode_starts[1:], dones[None].astype(np.float32)])
    masks = th.as_tensor(1.0 - starts.T)
    rewards = th.as_tensor(buffer.rewards.T.copy())
    gae = calc_gae(rewards, values, masks=masks, gamma=0.99, lam=0.95, return_advantages=True, sequential=sequential)
    return buffer, gae


@pytest.mark.parametrize("n_steps", [1, 32, 64])
def test_short_rollouts_equal_sb3_bit_for_bit(n_steps):
    buffer, gae = _sb3_buffer(n_steps, 8)
    assert np.array_equal(gae.advantages.numpy().T, buffer.advantages)
    assert np.array_equal(gae.returns.numpy().T, buffer.returns)


@pytest.mark.parametrize("n_steps", [65, 2048])
def test_sequential_equals_sb3_bit_for_bit_at_any_length(n_steps):
    buffer, gae = _sb3_buffer(n_steps, 8, sequential=True)
    assert np.array_equal(gae.advantages.numpy().T, buffer.advantages)
    assert np.array_equal(gae.returns.numpy().T, buffer.returns)


@pytest.mark.parametrize("n_steps", [65, 2048])
def test_long_rollouts_equal_sb3_to_1e5(n_steps):
    buffer, gae = _sb3_buffer(n_steps, 16)
    assert np.abs(gae.advantages.numpy().T - buffer.advantages).max() < 1e-5
    assert np.abs(gae.returns.numpy().T - buffer.returns).max() < 1e-5


@pytest.mark.parametrize("n", [1, 2, 15, 16, 17, 64, 65, 255, 256, 257, 1000, 5000])
def test_reverse_linear_scan_matches_loop(n):
    x, coef = rand(3, n, seed=1).double(), th.rand(3, n, generator=th.Generator().manual_seed(2)).double()
    coef[coef < 0.1] = 0.0
    expected = th.zeros_like(x)
    acc = th.zeros(3, dtype=th.float64)
    for t in reversed(range(n)):
        acc = x[:, t] + coef[:, t] * acc
        expected[:, t] = acc
    assert th.allclose(reverse_linear_scan(x, coef), expected, atol=1e-10)


@pytest.mark.parametrize("shape", [(300,), (1, 300), (2, 3, 300), (2, 40)])
def test_reverse_linear_scan_leaves_inputs_alone_and_is_differentiable(shape):
    x, coef = rand(*shape, seed=3).double(), th.rand(shape, generator=th.Generator().manual_seed(4)).double()
    x_before, coef_before = x.clone(), coef.clone()
    y = reverse_linear_scan(x, coef)
    assert th.equal(x, x_before) and th.equal(coef, coef_before)
    # the autograd path (steps stacked) gives the same values as the in-place one
    x.requires_grad_(), coef.requires_grad_()
    assert th.allclose(reverse_linear_scan(x, coef), y, atol=1e-12)
    assert th.autograd.gradcheck(reverse_linear_scan, (x[..., :100], coef[..., :100]))


def test_calc_gae_leaves_inputs_alone():
    rewards, values, next_values = rand(4, 200, seed=5), rand(4, 200, seed=6), rand(4, 200, seed=7)
    masks = (th.rand(4, 200, generator=th.Generator().manual_seed(8)) > 0.05).float()
    next_values[masks == 0] = float("nan")  # NaN next values at terminal steps must not leak
    before = [t.clone() for t in (rewards, values, next_values, masks)]
    gae = calc_gae(rewards, values, masks, next_values=next_values, return_advantages=True)
    for t, t_before in zip((rewards, values, next_values, masks), before):
        assert th.equal(t.nan_to_num(123.0), t_before.nan_to_num(123.0))
    assert gae.returns.isfinite().all() and gae.advantages.isfinite().all()


def test_calc_returns_by_hand_and_loop():
    rewards = th.tensor([[1.0, 1.0, 1.0]])
    masks = th.tensor([[1.0, 1.0, 1.0]])
    assert th.allclose(calc_returns(rewards, masks, gamma=0.5, next_value=8.0), th.tensor([[2.75, 3.5, 5.0]]))
    b, n = 3, 80
    rewards = rand(b, n)
    masks = (th.rand(b, n, generator=th.Generator().manual_seed(1)) > 0.1).float()
    boot = rand(b, seed=2)
    lens = th.tensor([80, 10, 33])
    out = calc_returns(rewards, masks, gamma=GAMMA, next_value=boot, lens=lens)
    for i in range(b):
        ref = returns_loop(rewards[i].tolist(), masks[i].tolist(), GAMMA, boot[i].item(), int(lens[i]))
        assert th.allclose(out[i], th.tensor(ref), atol=1e-5)
    no_boot = calc_returns(rewards, masks, gamma=GAMMA)
    assert th.allclose(no_boot[0], th.tensor(returns_loop(rewards[0].tolist(), masks[0].tolist(), GAMMA, 0.0)), atol=1e-5)
    assert calc_returns(rewards[0], masks[0]).shape == (n,)


def test_dones_to_masks():
    terminated = th.tensor([0, 1, 0, 0], dtype=th.bool)
    truncated = th.tensor([0, 0, 1, 0], dtype=th.bool)
    assert dones_to_masks(terminated).tolist() == [1.0, 0.0, 1.0, 1.0]
    masks, done_masks = dones_to_masks(terminated, truncated)
    assert masks.tolist() == [1.0, 0.0, 1.0, 1.0] and done_masks.tolist() == [1.0, 0.0, 0.0, 1.0]
    assert dones_to_masks(dones=terminated.float()).tolist() == [1.0, 0.0, 1.0, 1.0]
    # dones = terminated | truncated: terminations are dones that were not truncated
    masks, done_masks = dones_to_masks(dones=terminated | truncated, truncated=truncated)
    assert masks.tolist() == [1.0, 0.0, 1.0, 1.0] and done_masks.tolist() == [1.0, 0.0, 0.0, 1.0]
    assert dones_to_masks(terminated).dtype == th.float32
    with pytest.raises(ValueError, match="terminated or dones"):
        dones_to_masks()
    with pytest.raises(ValueError, match="terminated or dones"):
        dones_to_masks(truncated=truncated)


def test_combine_grouped_advantages_by_hand():
    adv = th.tensor([[[1.0, 3.0], [10.0, 30.0]]])  # (b=1, g=2, n=2)
    # each group z-scores to [-1, 1] (up to eps): the scale of group 2 no longer matters
    z1, z2 = 1 / np.sqrt(1 + 1e-5), 10 / np.sqrt(100 + 1e-5)
    out = combine_grouped_advantages(adv, weights=th.tensor([1.0, 3.0]))
    z = (z1 + 3 * z2) / 4
    assert th.allclose(out, th.tensor([[-z, z]], dtype=th.float32))
    raw = combine_grouped_advantages(adv, weights=[1.0, 3.0], normalize=False)
    assert th.allclose(raw, th.tensor([[(1 + 30) / 4, (3 + 90) / 4]]))
    assert th.allclose(
        combine_grouped_advantages(adv, weights=[1.0, 3.0], normalize=False, reduce="sum"), th.tensor([[31.0, 93.0]])
    )
    assert th.allclose(combine_grouped_advantages(adv, normalize=False, reduce="max"), th.tensor([[10.0, 30.0]]))
    assert th.allclose(combine_grouped_advantages(adv, normalize=False, reduce="min"), th.tensor([[1.0, 3.0]]))
    assert th.allclose(
        combine_grouped_advantages(adv, normalize=False, reduce=lambda t: t[1] - t[0]), th.tensor([[9.0, 27.0]])
    )


def test_combine_mean_with_a_mask_of_the_non_group_dims_by_hand():
    # (b=2, g=4, n=3), group_dim=1, mask (b n): group k is (k + 1) * base, whose valid entries have mean 0 and variance 1
    base = th.tensor([[-1.0, 1.0, 7.0], [1.0, -1.0, 7.0]])
    mask = th.tensor([[True, True, False], [True, True, False]])
    adv = th.stack([(k + 1) * base for k in range(4)], dim=1)
    expected = base * mask
    raw = combine_grouped_advantages(adv, normalize=False, group_dim=1, mask=mask)
    th.testing.assert_close(raw, 2.5 * expected)  # (1 + 2 + 3 + 4) / 4, not their sum
    th.testing.assert_close(
        combine_grouped_advantages(adv, normalize=False, group_dim=1, mask=mask, reduce="sum"), 10 * expected
    )
    weighted = combine_grouped_advantages(adv, weights=[1.0, 2.0, 3.0, 4.0], normalize=False, group_dim=1, mask=mask)
    th.testing.assert_close(weighted, 3.0 * expected)  # (1 + 4 + 9 + 16) / 10
    # every group z-scores to base (up to eps): the mean of 4 equal groups is one of them
    z = combine_grouped_advantages(adv, group_dim=1, mask=mask)
    th.testing.assert_close(z, expected, atol=1e-5, rtol=0)


COMBINE_CASES = list(
    itertools.product(
        ["mean", "sum", "max", "min", "callable"],
        [None, "non-group", "grouped"],
        [None, [0.5, 1.0, 2.0, 0.25]],
        [True, False],
        [-2, 1, -1, 0],
    )
)


@pytest.mark.parametrize("reduce, mask_kind, weights, normalize, group_dim", COMBINE_CASES)
def test_combine_matches_loop(reduce, mask_kind, weights, normalize, group_dim):
    shape = [3, 5, 6]
    shape[group_dim] = 4  # g
    adv = rand(*shape)
    rest = [d for i, d in enumerate(shape) if i != group_dim % 3]
    mask = None  # else a mask of the non-group dims, or of the full grouped shape (the two the function takes)
    if mask_kind == "non-group":
        mask = rand(*rest, seed=1) > -0.5
    elif mask_kind == "grouped":
        mask = rand(*shape, seed=1) > -0.5
        mask.movedim(group_dim, 0)[:, 0, 0] = False  # a sample with no group present
        mask.movedim(group_dim, 0)[2, 1] = False  # a group absent from a row of samples
    if mask is not None:
        # what a masked-out entry holds never matters
        adv = adv.masked_fill(~(mask.unsqueeze(group_dim) if mask_kind == "non-group" else mask), th.nan)
    fn, loop_fn = reduce, reduce
    if reduce == "callable":
        fn = lambda t: (t * t).sum(0) - 2 * t[-1]  # noqa: E731
        loop_fn = lambda vals: sum(v * v for v in vals) - 2 * vals[-1]  # noqa: E731
    out = combine_grouped_advantages(adv, weights=weights, normalize=normalize, group_dim=group_dim, mask=mask, reduce=fn)
    expected = combine_grouped_loop(
        adv.tolist(),
        group_dim,
        mask=None if mask is None else mask.float().tolist(),
        weights=weights,
        normalize=normalize,
        reduce=loop_fn,
    )
    assert out.shape == tuple(rest) and len(expected) == rest[0]
    th.testing.assert_close(out, th.tensor(expected), atol=1e-5, rtol=1e-5)


def test_mean_is_invariant_to_the_weights_scale():
    adv = rand(2, 3, 5)
    assert th.allclose(
        combine_grouped_advantages(adv, weights=[1.0, 2.0, 3.0]), combine_grouped_advantages(adv, weights=[10.0, 20.0, 30.0])
    )


def test_gae_errors():
    rewards, values = rand(2, 5), rand(2, 5)
    with pytest.raises(ValueError, match="values"):
        calc_gae(rewards, rand(2, 7))
    with pytest.raises(ValueError, match="values"):
        calc_gae(rewards, rand(3, 5))
    with pytest.raises(ValueError, match="masks"):
        calc_gae(rewards, values, masks=th.ones(2, 4))
    with pytest.raises(ValueError, match="done_masks"):
        calc_gae(rewards, values, done_masks=th.ones(3, 5))
    with pytest.raises(ValueError, match="next_value"):
        calc_gae(rewards, values, next_value=th.ones(3))
    with pytest.raises(ValueError, match="next_values"):
        calc_gae(rewards, values, next_values=th.ones(2, 6))
    with pytest.raises(ValueError, match="weights"):
        calc_gae(rewards, values, weights=[1.0, 2.0])
    with pytest.raises(ValueError, match="gamma"):
        calc_gae(rewards, values, gamma=th.tensor([0.9, 0.9, 0.9]))
    with pytest.raises(ValueError, match="rewards"):
        calc_gae(rand(1, 2, 3, 4), values)


def test_combine_errors():
    adv = rand(2, 3, 5)
    with pytest.raises(ValueError, match="reduce"):
        combine_grouped_advantages(adv, reduce="median")
    with pytest.raises(ValueError, match="weights"):
        combine_grouped_advantages(adv, weights=[1.0, 2.0])
    with pytest.raises(ValueError, match="mask"):
        combine_grouped_advantages(adv, mask=th.ones(2, 4))


@pytest.mark.parametrize("weights", [[0.0, 0.0, 0.0], [1.0, -1.0, 0.0], [0.1, 0.2, -0.3]])
def test_combine_mean_refuses_weights_summing_to_zero(weights):
    adv = rand(2, 3, 5)
    with pytest.raises(ValueError, match="weights sum to 0"):
        combine_grouped_advantages(adv, weights=weights)
    with pytest.raises(ValueError, match="weights sum to 0"):
        calc_gae(adv, rand(2, 3, 5, seed=1), weights=weights, group_dim=1)
    # the reduces that do not divide by the sum take such weights: e.g. a difference of two groups
    raw = combine_grouped_advantages(adv, weights=weights, normalize=False, reduce="sum")
    assert th.allclose(raw, sum(w * adv[:, k] for k, w in enumerate(weights)))


def test_lens_on_another_device():
    rewards, values = rand(2, 5), rand(2, 5, seed=1)
    # moved to the data's device (CPU lens for data on the meta device, which needs no accelerator)
    gae = calc_gae(rewards.to("meta"), values.to("meta"), lens=th.tensor([5, 3]), return_advantages=True)
    assert gae.returns.device.type == gae.advantages.device.type == "meta" and gae.advantages.shape == (2, 5)
    assert calc_returns(rewards.to("meta"), lens=th.tensor([5, 3]), next_value=1.0).shape == (2, 5)
    # lens on a device they cannot leave: a ValueError naming both devices
    for fn in (lambda lens: calc_gae(rewards, values, lens=lens), lambda lens: calc_returns(rewards, lens=lens)):
        with pytest.raises(ValueError, match="lens is on device meta and rewards on cpu"):
            fn(th.tensor([5, 3], device="meta"))


def test_every_option_combination_runs_on_grouped_inputs():
    # smoke over the keyword cross-product on grouped inputs, each checked against the per-group computation
    b, g, n = 2, 2, 70
    rewards, values = rand(b, g, n, seed=1), rand(b, g, n, seed=2)
    masks = (th.rand(b, n, generator=th.Generator().manual_seed(3)) > 0.1).float()
    for lens, next_value in itertools.product([None, th.tensor([70, 40])], [None, rand(b, g, seed=4)]):
        gae = calc_gae(rewards, values, masks=masks, lens=lens, next_value=next_value, return_advantages=True)
        for k in range(g):
            ref = calc_gae(
                rewards[:, k],
                values[:, k],
                masks=masks,
                lens=lens,
                next_value=None if next_value is None else next_value[:, k],
                return_advantages=True,
            )
            assert th.allclose(gae.advantages[:, k], ref.advantages, atol=1e-6)
