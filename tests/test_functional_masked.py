import math

import pytest
import torch as th
from reference import zscore_loop

from sb3_xppo.functional.masked import lens_to_mask, masked_mean, masked_sum, masked_zscore, zero_masked


def test_masked_mean_by_hand():
    x = th.tensor([1.0, 2.0, 3.0, 4.0])
    assert masked_mean(x).item() == pytest.approx(2.5)
    assert masked_mean(x, th.tensor([True, False, True, False])).item() == pytest.approx(2.0)
    # float masks weight the entries: (1*1 + 2*0.5 + 3*0 + 4*0) / 1.5
    assert masked_mean(x, th.tensor([1.0, 0.5, 0.0, 0.0])).item() == pytest.approx(2.0 / 1.5)
    assert masked_sum(x, th.tensor([1.0, 0.5, 0.0, 0.0])).item() == pytest.approx(2.0)


def test_masked_mean_ignores_non_finite_masked_entries_and_all_masked_is_zero():
    x = th.tensor([1.0, float("nan"), float("inf"), 3.0], requires_grad=True)
    mask = th.tensor([1.0, 0.0, 0.0, 1.0])
    out = masked_mean(x, mask)
    assert out.item() == pytest.approx(2.0)
    out.backward()
    assert th.isfinite(x.grad).all()
    assert masked_mean(th.ones(3), th.zeros(3)).item() == 0.0


def test_masked_mean_broadcasts_and_reduces_dims():
    x = th.arange(6.0).reshape(2, 3)
    mask = th.tensor([True, False, True])  # broadcasts over rows
    assert th.allclose(masked_mean(x, mask, dim=1), th.tensor([1.0, 4.0]))
    # weight counts the broadcast entries: (0 + 2 + 3 + 5) / 4
    assert masked_mean(x, mask).item() == pytest.approx(2.5)


def test_masked_zscore_by_hand_population_variance():
    x = th.tensor([1.0, 2.0, 3.0, 100.0])
    mask = th.tensor([1, 1, 1, 0], dtype=th.bool)
    z = masked_zscore(x, mask)
    # mean 2, population variance 2/3
    expected = [(v - 2.0) / math.sqrt(2 / 3 + 1e-5) for v in (1.0, 2.0, 3.0)] + [0.0]
    assert th.allclose(z, th.tensor(expected))
    assert th.allclose(z, th.tensor(zscore_loop(x.tolist(), mask.float().tolist())))


@pytest.mark.parametrize("mask", [None, "bool", "float"])
def test_masked_zscore_matches_loop(mask):
    gen = th.Generator().manual_seed(0)
    x = th.randn(50, generator=gen) * 3 + 1
    m = {None: None, "bool": th.rand(50, generator=gen) > 0.3, "float": (th.rand(50, generator=gen) > 0.3).float()}[mask]
    weights = [1.0] * 50 if m is None else m.float().tolist()
    assert th.allclose(masked_zscore(x, m), th.tensor(zscore_loop(x.tolist(), weights)), atol=1e-5)


def test_masked_zscore_single_entry_is_zero_not_nan():
    assert masked_zscore(th.tensor([5.0])).item() == 0.0
    assert masked_zscore(th.tensor([5.0, float("nan")]), th.tensor([True, False])).tolist() == [0.0, 0.0]


def test_lens_to_mask():
    assert lens_to_mask(th.tensor([1, 3, 0]), 3).tolist() == [[True, False, False], [True, True, True], [False, False, False]]


@pytest.mark.parametrize("dtype", [th.float16, th.bfloat16, th.float32, th.float64])
@pytest.mark.parametrize("mask_dtype", [th.bool, th.float32])
def test_zero_masked_keeps_bits_and_zeroes_non_finite_masked_entries(dtype, mask_dtype):
    x = th.tensor([1.5, float("nan"), float("inf"), -2.0, -0.0, float("-inf")], dtype=dtype)
    mask = th.tensor([1, 0, 0, 1, 1, 0]).to(mask_dtype)
    expected = th.tensor([1.5, 0.0, 0.0, -2.0, -0.0, 0.0], dtype=dtype)
    out = zero_masked(x, mask)
    assert out.dtype == dtype and th.equal(out, expected)
    assert th.equal(th.signbit(out), th.signbit(expected))  # kept entries bit for bit, -0.0 included
    # the same as th.where, NaN at a kept entry included
    x[0] = float("nan")
    assert th.equal(zero_masked(x, mask).isnan(), th.where(mask.bool(), x, 0).isnan())


def test_zero_masked_broadcasts_writes_out_and_keeps_gradients():
    x = th.randn(3, 4, 5)
    mask = th.rand(3, 1, 5) > 0.5
    out = th.empty_like(x)
    assert zero_masked(x, mask, out=out) is out
    assert th.equal(out, th.where(mask, x, 0.0))
    y = x.clone().requires_grad_()
    zero_masked(y, mask).sum().backward()
    assert th.equal(y.grad, mask.expand_as(x).float())
    ints = th.arange(5)  # no bitwise path for integers: th.where
    assert th.equal(zero_masked(ints, ints % 2 == 0), th.tensor([0, 0, 2, 0, 4]))
