"""PCGrad (Yu et al. 2020) on flat gradients: by hand, against a loop reference, gradients, errors."""

import itertools

import pytest
import torch as th
from reference import pcgrad_loop

from sb3_xppo import pcgrad_auxiliary, pcgrad_combine


def random_grads(g=4, p=6, seed=0, dtype=th.float64):
    gen = th.Generator().manual_seed(seed)
    return [th.randn(p, generator=gen, dtype=dtype) for _ in range(g)]


def test_two_conflicting_gradients_by_hand():
    g1, g2 = th.tensor([1.0, 0.0]), th.tensor([-1.0, 1.0])  # g1 . g2 = -1
    # g1' = g1 - (-1 / 2) g2 = (0.5, 0.5); g2' = g2 - (-1 / 1) g1 = (0, 1)
    assert th.allclose(pcgrad_combine([g1, g2], reduce="sum"), th.tensor([0.5, 1.5]))
    assert th.allclose(pcgrad_combine([g1, g2]), th.tensor([0.25, 0.75]))
    assert th.allclose(pcgrad_combine([g1, g2], weights=[2.0, 0.0], reduce="sum"), th.tensor([1.0, 1.0]))
    # the projected gradients no longer conflict with the originals
    assert pcgrad_combine([g1, g2], weights=[1.0, 0.0], reduce="sum") @ g2 == 0


def test_no_conflict_is_the_plain_weighted_reduction():
    g1, g2 = th.tensor([1.0, 2.0]), th.tensor([3.0, -1.0])  # dot 1 > 0
    assert th.equal(pcgrad_combine([g1, g2]), (g1 + g2) / 2)
    assert th.equal(pcgrad_combine([g1, g2], weights=th.tensor([0.5, 2.0]), reduce="sum"), 0.5 * g1 + 2.0 * g2)
    assert th.equal(pcgrad_combine([g1]), g1)


def test_projects_off_the_original_gradients_in_order():
    # three gradients: g0 conflicts with g1 and g2; the second projection uses the original g2, not a projected one
    g0, g1, g2 = th.tensor([1.0, 0.0, 0.0]), th.tensor([-1.0, 1.0, 0.0]), th.tensor([-1.0, -1.0, 1.0])
    g0_after_g1 = g0 - (g0 @ g1) / (g1 @ g1) * g1  # (0.5, 0.5, 0)
    assert (g0_after_g1 @ g2).item() < 0
    g0_after_both = g0_after_g1 - (g0_after_g1 @ g2) / (g2 @ g2) * g2
    combined = pcgrad_combine([g0, g1, g2], weights=[1.0, 0.0, 0.0], reduce="sum")
    assert th.allclose(combined, g0_after_both)


@pytest.mark.parametrize("g", [2, 3, 5])
@pytest.mark.parametrize("reduce", ["mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_loop_reference(g, reduce, weighted):
    for seed in range(5):
        grads = random_grads(g=g, seed=seed)
        weights = [0.5 + i for i in range(g)] if weighted else None
        expected = pcgrad_loop([x.tolist() for x in grads], weights=weights, reduce=reduce)
        assert th.allclose(pcgrad_combine(grads, weights=weights, reduce=reduce), th.tensor(expected, dtype=th.float64))


def test_generator_draws_an_order_per_gradient():
    grads = random_grads(g=3, seed=1)
    first = pcgrad_combine(grads, generator=th.Generator().manual_seed(7))
    assert th.equal(first, pcgrad_combine(grads, generator=th.Generator().manual_seed(7)))
    # the result is PCGrad for one choice of each gradient's order of the others
    others = [[j for j in range(3) if j != i] for i in range(3)]
    candidates = [
        th.tensor(pcgrad_loop([x.tolist() for x in grads], orders=list(orders)), dtype=th.float64)
        for orders in itertools.product(*(itertools.permutations(o) for o in others))
    ]
    assert any(th.allclose(first, c) for c in candidates)
    outcomes = {tuple(pcgrad_combine(grads, generator=th.Generator().manual_seed(s)).tolist()) for s in range(20)}
    assert len(outcomes) > 1  # the order matters for these gradients, and the draws differ


def test_zero_gradients_give_no_nan():
    zero, g = th.zeros(3, requires_grad=True), th.tensor([1.0, -1.0, 2.0], requires_grad=True)
    combined = pcgrad_combine([zero, g])
    assert th.equal(combined, g.detach() / 2)
    combined.sum().backward()
    assert th.isfinite(zero.grad).all() and th.isfinite(g.grad).all()
    assert th.equal(pcgrad_combine([th.zeros(3), th.zeros(3)], reduce="sum"), th.zeros(3))
    main = th.zeros(3, requires_grad=True)
    assert th.equal(pcgrad_auxiliary(main, g), g)
    pcgrad_auxiliary(main, g).sum().backward()
    assert th.isfinite(main.grad).all()


def test_gradcheck_float64():
    grads = [x.requires_grad_() for x in random_grads(g=3, p=5, seed=2)]
    weights = th.tensor([0.3, 1.0, 2.0], dtype=th.float64, requires_grad=True)
    originals = [x.detach() for x in grads]
    dots = [(a @ b).item() for a, b in itertools.combinations(originals, 2)]
    assert min(dots) < 0 and min(abs(d) for d in dots) > 1e-2  # conflicts present, no dot product near its kink at 0

    def combine(*inputs: th.Tensor) -> th.Tensor:
        return pcgrad_combine(list(inputs[:-1]), weights=inputs[-1], reduce="sum")

    assert th.autograd.gradcheck(combine, (*grads, weights))
    main, aux = th.tensor([1.0, 0.5, -0.2], dtype=th.float64), th.tensor([-1.0, 0.3, 0.7], dtype=th.float64)
    assert (main @ aux).item() < -0.5
    assert th.autograd.gradcheck(pcgrad_auxiliary, (main.requires_grad_(), aux.requires_grad_()))


def test_auxiliary_by_hand():
    main, aux = th.tensor([1.0, 0.0]), th.tensor([-1.0, 1.0])
    # aux . main = -1 < 0: aux' = aux + main = (0, 1); the main gradient is kept whole
    assert th.allclose(pcgrad_auxiliary(main, aux), th.tensor([1.0, 1.0]))
    agreeing = th.tensor([1.0, 1.0])
    assert th.equal(pcgrad_auxiliary(main, agreeing), main + agreeing)
    # the main gradient is not projected off the auxiliary one (unlike pcgrad_combine)
    assert not th.allclose(pcgrad_combine([main, aux], reduce="sum"), pcgrad_auxiliary(main, aux))
    for seed in range(5):
        m, a = random_grads(g=2, seed=seed)
        expected = pcgrad_loop([m.tolist(), a.tolist()], weights=[0.0, 1.0], reduce="sum")
        assert th.allclose(pcgrad_auxiliary(m, a), m + th.tensor(expected, dtype=th.float64))


def test_errors():
    g1, g2 = th.ones(3), -th.ones(3)
    with pytest.raises(ValueError, match=r"reduce must be one of \('mean', 'sum'\), got 'max'"):
        pcgrad_combine([g1, g2], reduce="max")
    with pytest.raises(ValueError, match=r"weights has shape \(3,\), expected \(2,\)"):
        pcgrad_combine([g1, g2], weights=[1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=r"grads\[1\] has shape \(4,\), expected grads\[0\]'s shape \(3,\)"):
        pcgrad_combine([g1, th.ones(4)])
    with pytest.raises(ValueError, match=r"grads\[0\] must be a flat"):
        pcgrad_combine([th.ones(2, 3), th.ones(2, 3)])
    with pytest.raises(ValueError, match="empty"):
        pcgrad_combine([])
    with pytest.raises(ValueError, match="dtype"):
        pcgrad_combine([g1, g2.double()])
    with pytest.raises(ValueError, match="aux_grad has shape"):
        pcgrad_auxiliary(g1, th.ones(4))
    with pytest.raises(ValueError, match="main_grad must be a flat"):
        pcgrad_auxiliary(th.ones(1, 3), th.ones(1, 3))
