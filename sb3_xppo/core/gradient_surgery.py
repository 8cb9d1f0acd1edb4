"""
PCGrad inside XPPO's ``train()`` (Yu et al. 2020, Gradient Surgery for Multi-Task Learning, arXiv:2001.06782): the
reward groups' actor losses (``group_gradients='pcgrad'``) and an auxiliary loss projected off the RL loss
(:meth:`~sb3_xppo.core.XPPOSetupMixin.register_auxiliary_loss_hook`), both on the parameters the projected losses
reach, over the flat gradients of :mod:`sb3_xppo.functional.gradients`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch as th
from torch import nn

from sb3_xppo.functional.gradients import pcgrad_auxiliary, pcgrad_combine


def pcgrad_group_loss(group_losses: Sequence[th.Tensor], params: Sequence[nn.Parameter]) -> tuple[th.Tensor, th.Tensor]:
    """
    The groups' actor losses as one scalar for ``backward()``: its value is their sum, its gradient the groups'
    gradients combined by PCGrad (:func:`~sb3_xppo.functional.pcgrad_combine`, ``reduce='sum'``), each projected off
    every other one it conflicts with. One ``torch.autograd.grad`` per group (the graph is kept for the rest of the
    loss), over the parameters any group's loss reaches (the actor's, and a shared trunk's); the others get no
    gradient from it. The weights of the groups are already in their losses (their advantage terms), so a group of
    weight 0 has a zero gradient and conflicts with nothing.

    Because the scalar is ``sum_g L_g + <c, theta> - stopgrad(<c, theta>)`` with ``c`` the combined gradient, a loss
    hook that scales the RL loss scales ``c`` with it, and everything after it (clipping, the optimizer step) sees an
    ordinary gradient.

    :param group_losses: ``G`` scalar losses, one per reward group, sharing one graph
    :param params: the parameters to take the gradients over (e.g. ``policy.parameters()``, trainable ones)
    :return: ``(loss, conflict_fraction)``: the scalar, and the share of the ``G (G - 1) / 2`` pairs of groups whose
        gradients conflicted (a 0-d tensor, no host sync; 0 for one group)
    """
    params = [p for p in params if p.requires_grad]
    grads = [th.autograd.grad(loss, params, retain_graph=True, allow_unused=True) for loss in group_losses]
    reached = [i for i in range(len(params)) if any(grad[i] is not None for grad in grads)]
    value = th.stack([loss.detach() for loss in group_losses]).sum()
    if not reached:
        return value, th.zeros((), device=value.device)
    flat = [
        th.cat([(grad[i] if grad[i] is not None else th.zeros_like(params[i])).reshape(-1) for i in reached]) for grad in grads
    ]
    stacked = th.stack(flat)  # (G p)
    combined = pcgrad_combine(flat, reduce="sum")  # (p)
    pieces = combined.split([params[i].numel() for i in reached])
    carrier = th.stack([(piece.view_as(params[i]) * params[i]).sum() for piece, i in zip(pieces, reached, strict=True)]).sum()
    return value + (carrier - carrier.detach()), conflict_fraction(stacked)


def conflict_fraction(stacked: th.Tensor) -> th.Tensor:
    """
    :param stacked: ``(G p)`` flat gradients
    :return: the share of the ``G (G - 1) / 2`` pairs whose dot product is negative (0-d; 0 for ``G < 2``)
    """
    g = stacked.shape[0]
    if g < 2:
        return th.zeros((), device=stacked.device)
    dots = stacked @ stacked.T  # (G G)
    pairs = th.triu_indices(g, g, offset=1, device=stacked.device)
    return (dots[pairs[0], pairs[1]] < 0).float().mean()


def backward_with_auxiliary(loss: th.Tensor, auxiliary: th.Tensor, params: Sequence[nn.Parameter]) -> th.Tensor:
    """
    ``backward()`` of ``loss + auxiliary`` with PCGrad between the two (:func:`~sb3_xppo.functional.pcgrad_auxiliary`):
    on the parameters ``auxiliary`` reaches, its gradient is projected off ``loss``'s where they conflict (negative
    dot product over those parameters) and the two are summed; elsewhere ``loss``'s gradient is kept as it is.
    Parameters outside ``params`` that ``auxiliary`` reaches (e.g. a projector with its own optimizer) get its plain
    gradient. Call it with the gradients of ``params`` zeroed (None).

    :param loss: the main loss (the RL loss, after the loss hooks)
    :param auxiliary: the auxiliary loss (e.g. a distillation loss, weighted)
    :param params: the parameters the optimizer steps
    :return: whether the two gradients conflicted (a 0-d bool tensor, no host sync)
    """
    params = list(params)
    loss.backward(retain_graph=True)  # (the two losses may share a graph)
    main = [p.grad for p in params]
    for p in params:
        p.grad = None
    auxiliary.backward()
    aux = [p.grad for p in params]
    reached = [i for i, grad in enumerate(aux) if grad is not None]
    reached_aux = [grad for grad in aux if grad is not None]
    for p, grad in zip(params, main, strict=True):
        p.grad = grad
    if not reached:
        return th.zeros((), dtype=th.bool, device=loss.device)
    main_flat = th.cat([(grad if (grad := main[i]) is not None else th.zeros_like(params[i])).reshape(-1) for i in reached])
    aux_flat = th.cat([grad.reshape(-1) for grad in reached_aux])
    combined = pcgrad_auxiliary(main_flat, aux_flat)
    for piece, i in zip(combined.split([params[i].numel() for i in reached]), reached, strict=True):
        params[i].grad = piece.view_as(params[i])
    return (main_flat * aux_flat).sum() < 0
