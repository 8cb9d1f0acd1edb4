import pytest
import torch as th
import torch.nn.functional as F
from reference import value_loss_loop

from sb3_xppo import clipped_value_loss_fn, improved_value_clipping_fn


def inputs(shape=(4, 9), seed=0):
    gen = th.Generator().manual_seed(seed)
    old = th.randn(*shape, generator=gen)
    values = (old + th.randn(*shape, generator=gen) * 0.4).requires_grad_()
    returns = old + th.randn(*shape, generator=gen)
    return values, old, returns


def test_clipped_by_hand():
    v, old, ret = th.tensor([1.5, 0.1]), th.tensor([1.0, 0.0]), th.tensor([3.0, 0.0])
    # first: v - old = 0.5 clipped to 0.2 -> 1.2; max((1.5-3)^2, (1.2-3)^2) = 3.24
    # second: inside the clip range -> 0.01
    loss = clipped_value_loss_fn(v, old, ret, clip=0.2, reduction="none")
    assert th.allclose(loss, th.tensor([3.24, 0.01]))
    assert clipped_value_loss_fn(v, old, ret, clip=0.2).item() == pytest.approx((3.24 + 0.01) / 2)
    assert clipped_value_loss_fn(v, old, ret, clip=0.2, reduction="sum").item() == pytest.approx(3.25)


def test_no_clipping_is_plain_loss():
    v, old, ret = inputs()
    expected = F.mse_loss(v, ret)
    assert th.allclose(clipped_value_loss_fn(v, None, ret), expected)
    assert th.allclose(clipped_value_loss_fn(v, old, ret, clip=None), expected)
    assert th.allclose(clipped_value_loss_fn(v, old, ret, clip=False), expected)
    assert th.allclose(improved_value_clipping_fn(v, None, ret), expected)


def test_improved_by_hand():
    old = th.tensor([0.0, 0.0, 0.0, 0.0])
    ret = th.tensor([2.0, 2.0, -2.0, 0.1])
    v = th.tensor([0.5, 3.0, -1.0, 0.0])
    loss = improved_value_clipping_fn(v, old, ret, clip=0.2, reduction="none")
    # 1: v between old+clip and R -> 0
    # 2: R_c = 0.2; min((3-2)^2, (3-0.2)^2) = 1
    # 3: -2 < -1 but -1 is not below old-clip=-0.2? -1 < -0.2 and R=-2 < -1 -> zero region on the low side
    # 4: R_c = 0.1 (inside); min(0.01, 0.01)
    assert th.allclose(loss, th.tensor([0.0, 1.0, 0.0, 0.01]))


@pytest.mark.parametrize("kind", ["clipped", "improved"])
def test_value_losses_match_loop_reference_and_gradients(kind):
    v, old, ret = inputs()
    fn = clipped_value_loss_fn if kind == "clipped" else improved_value_clipping_fn
    loss = fn(v, old, ret, clip=0.3, reduction="none")
    expected = value_loss_loop(v.flatten().tolist(), old.flatten().tolist(), ret.flatten().tolist(), 0.3, kind)
    assert th.allclose(loss.flatten(), th.tensor(expected), atol=1e-6)
    fn(v, old, ret, clip=0.3).backward()
    i, h = 5, 1e-3
    vals = v.detach().flatten().tolist()
    plus, minus = list(vals), list(vals)
    plus[i] += h
    minus[i] -= h
    o, r = old.flatten().tolist(), ret.flatten().tolist()
    fd = (value_loss_loop(plus, o, r, 0.3, kind)[i] - value_loss_loop(minus, o, r, 0.3, kind)[i]) / (2 * h) / v.numel()
    assert v.grad.flatten()[i].item() == pytest.approx(fd, abs=1e-4)


@pytest.mark.parametrize("fn", [clipped_value_loss_fn, improved_value_clipping_fn])
def test_mask_lens_and_groups(fn):
    v, old, ret = inputs(shape=(2, 3, 5))  # (b g n)
    lens = th.tensor([3, 5])
    mask = th.arange(5) < lens[:, None]  # (b n)
    full = mask.unsqueeze(1).expand(2, 3, 5)
    elementwise = fn(v, old, ret, reduction="none")
    expected = elementwise[full].mean()
    assert th.allclose(fn(v, old, ret, mask=mask, group_dim=1), expected)
    assert th.allclose(fn(v, old, ret, mask=mask.float()), expected)
    assert th.allclose(fn(v, old, ret, lens=lens), expected)
    assert th.allclose(fn(v, old, ret, lens=lens, reduction="sum"), elementwise[full].sum())
    # (b n g) layout
    t = (x.transpose(1, 2) for x in (v, old, ret))
    assert th.allclose(fn(*t, lens=lens, group_dim=-1), expected)
    masked = fn(v, old, ret, mask=mask, reduction="none")
    assert (masked[~full] == 0).all() and th.allclose(masked[full], elementwise[full])


def test_improved_clips_on_scalar_readout_of_a_distributional_critic():
    # a categorical critic: values are logits over bins, the loss a cross-entropy against a two-hot target
    bins = th.linspace(-2, 2, 9)

    def two_hot(x):
        x = x.clamp(-2, 2)
        idx = th.searchsorted(bins, x).clamp(1, 8)
        lo, hi = bins[idx - 1], bins[idx]
        w_hi = (x - lo) / (hi - lo)
        target = th.zeros(*x.shape, 9)
        target.scatter_(-1, (idx - 1).unsqueeze(-1), (1 - w_hi).unsqueeze(-1))
        target.scatter_add_(-1, idx.unsqueeze(-1), w_hi.unsqueeze(-1))
        return target

    def ce(logits, returns, reduction="none"):
        return -(two_hot(returns) * logits.log_softmax(-1)).sum(-1)

    logits = th.randn(6, 9, requires_grad=True)
    old_logits = th.randn(6, 9)
    scalar = (logits.softmax(-1) * bins).sum(-1)
    old_scalar = (old_logits.softmax(-1) * bins).sum(-1)
    ret = th.linspace(-1.5, 1.5, 6)
    loss = improved_value_clipping_fn(
        logits, old_logits, ret, clip=0.2, loss_fn=ce, scalar_values=scalar, scalar_old_values=old_scalar, reduction="none"
    )
    rc = th.max(th.min(ret, old_scalar + 0.2), old_scalar - 0.2)
    beyond = ((ret < scalar) & (scalar < old_scalar - 0.2)) | ((old_scalar + 0.2 < scalar) & (scalar < ret))
    expected = th.where(beyond, 0.0, th.min(ce(logits, ret), ce(logits, rc)))
    assert th.allclose(loss, expected)
    loss.mean().backward()
    assert logits.grad is not None


def test_value_loss_errors():
    v, old, ret = inputs()
    with pytest.raises(ValueError, match="returns"):
        clipped_value_loss_fn(v, old)
    with pytest.raises(ValueError, match="returns"):
        clipped_value_loss_fn(v, old, ret[:, :3])
    with pytest.raises(ValueError, match="old_values"):
        improved_value_clipping_fn(v, old[:2, :2], ret)
    with pytest.raises(ValueError, match="reduction"):
        clipped_value_loss_fn(v, old, ret, reduction="avg")
    with pytest.raises(ValueError, match="mask"):
        clipped_value_loss_fn(v, old, ret, mask=th.ones(4, 3))


@pytest.mark.parametrize("fn", [clipped_value_loss_fn, improved_value_clipping_fn])
def test_lens_on_another_device(fn):
    v, old, ret = (x.detach() for x in inputs((2, 5)))
    # moved to the values' device (CPU lens for values on the meta device, which needs no accelerator)
    meta = fn(v.to("meta"), old.to("meta"), ret.to("meta"), lens=th.tensor([5, 3]), reduction="none")
    assert meta.device.type == "meta" and meta.shape == (2, 5)
    with pytest.raises(ValueError, match="lens is on device meta and values on cpu"):
        fn(v, old, ret, lens=th.tensor([5, 3], device="meta"))
