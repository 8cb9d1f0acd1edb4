"""
Gradient surgery on flat gradients: PCGrad, Yu et al. 2020, Gradient Surgery for Multi-Task Learning
(arXiv:2001.06782).

Two gradients conflict when their dot product is negative; PCGrad then removes from one its component along the
other, so that no task's step undoes another's to first order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch as th

REDUCTIONS = ("mean", "sum")


def pcgrad_combine(
    grads: Sequence[th.Tensor],
    weights: th.Tensor | Sequence[float] | None = None,
    reduce: Literal["mean", "sum"] = "mean",
    generator: th.Generator | None = None,
) -> th.Tensor:
    """
    PCGrad (Yu et al. 2020, Algorithm 1): each gradient is projected off every *other original* gradient it conflicts
    with, one after the other, then the projected gradients are weighted and reduced::

        for each i, for each j != i in order:
            if g_i' . g_j < 0:  g_i' <- g_i' - (g_i' . g_j / |g_j|^2) g_j     (g_i' projected so far, g_j original)
        result = reduce_i(w_i g_i')

    The paper visits the other gradients in a random order; here the order is the list's (``j = 0, 1, ...``), so the
    result is deterministic, unless ``generator`` is given: then each ``g_i`` visits the others in its own order drawn
    from it. A zero gradient conflicts with nothing (its dot products are 0), so it never produces a NaN. No data-
    dependent branch: differentiable, and no host synchronisation on an accelerator.

    :param grads: ``g`` flat gradients, each ``(p)``, of one shape, dtype and device
    :param weights: ``(g)`` weights of the projected gradients (a tensor or a sequence of floats), None for 1 each
    :param reduce: ``"mean"`` (the weighted sum divided by ``g``) or ``"sum"`` (the weighted sum, the paper's update)
    :param generator: draw each gradient's order of the others from it (the paper's random order), None for the
        list's order
    :return: ``(p)`` the combined gradient
    """
    if reduce not in REDUCTIONS:
        raise ValueError(f"reduce must be one of {REDUCTIONS}, got {reduce!r}")
    stacked = _stack_flat(grads)  # (g p)
    g = stacked.shape[0]
    if weights is not None:
        weights = th.as_tensor(weights, dtype=stacked.dtype, device=stacked.device)
        if weights.shape != (g,):
            raise ValueError(f"weights has shape {tuple(weights.shape)}, expected ({g},): one weight per gradient")
    # orders[i]: the others g_i is projected off, in the list's order or in a random order of its own
    orders = [[j for j in range(g) if j != i] for i in range(g)]
    if generator is not None:
        orders = [
            [others[k] for k in th.randperm(g - 1, generator=generator, device=generator.device).tolist()] for others in orders
        ]
    steps = th.tensor(orders, dtype=th.long, device=stacked.device).reshape(g, g - 1).T  # (g-1 g): step k's j of each i
    squared_norms = stacked.square().sum(-1)  # (g)
    tiny = th.finfo(stacked.dtype).tiny
    projected = stacked
    for index in steps:  # (g)
        other = stacked[index]  # (g p): original gradients, never the projected ones
        dot = (projected * other).sum(-1)  # (g)
        # a zero-norm g_j has dot 0 and is never projected off; the clamp keeps the unused branch finite for autograd
        coefficient = th.where(dot < 0, dot / squared_norms[index].clamp_min(tiny), 0.0)
        projected = projected - coefficient.unsqueeze(-1) * other
    if weights is not None:
        projected = projected * weights.unsqueeze(-1)
    combined = projected.sum(0)  # (p)
    return combined / g if reduce == "mean" else combined


def pcgrad_auxiliary(main_grad: th.Tensor, aux_grad: th.Tensor) -> th.Tensor:
    """
    PCGrad (Yu et al. 2020) for a main and an auxiliary objective: the auxiliary gradient is projected off the main
    one where they conflict, the main gradient is kept whole::

        aux' = aux - (aux . main / |main|^2) main   if aux . main < 0   else aux
        result = main + aux'

    A zero main gradient conflicts with nothing: the result is then ``aux``, never a NaN.

    :param main_grad: ``(p)`` the main objective's flat gradient (e.g. the RL loss's)
    :param aux_grad: ``(p)`` the auxiliary objective's (e.g. a distillation loss's)
    :return: ``(p)`` the main gradient plus the projected auxiliary one
    """
    stacked = _stack_flat([main_grad, aux_grad], names=("main_grad", "aux_grad"))  # (2 p)
    main, aux = stacked[0], stacked[1]
    dot = (aux * main).sum()
    coefficient = th.where(dot < 0, dot / main.square().sum().clamp_min(th.finfo(main.dtype).tiny), 0.0)
    return main + (aux - coefficient * main)


def _stack_flat(grads: Sequence[th.Tensor], names: Sequence[str] | None = None) -> th.Tensor:
    """``(g p)``: the flat gradients stacked, after a ``ValueError`` naming the first one that is not ``(p)``."""
    if len(grads) == 0:
        raise ValueError("grads is empty: give at least one flat gradient")
    names = names or [f"grads[{i}]" for i in range(len(grads))]
    for name, grad in zip(names, grads, strict=True):
        if not isinstance(grad, th.Tensor) or grad.ndim != 1:
            shape = tuple(grad.shape) if isinstance(grad, th.Tensor) else type(grad).__name__
            raise ValueError(f"{name} must be a flat (p) tensor, got {shape}: flatten and concatenate the parameters' grads")
        if grad.shape != grads[0].shape:
            raise ValueError(f"{name} has shape {tuple(grad.shape)}, expected {names[0]}'s shape {tuple(grads[0].shape)}")
        if grad.dtype != grads[0].dtype or grad.device != grads[0].device:
            raise ValueError(
                f"{name} is {grad.dtype} on {grad.device}, {names[0]} {grads[0].dtype} on {grads[0].device}: "
                "give the gradients one dtype and device"
            )
    return th.stack(list(grads))
