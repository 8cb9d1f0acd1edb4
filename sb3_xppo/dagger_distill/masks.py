"""MaskablePPO's action masks: their length for an action space and which actions they allow."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces

#: the logit sb3-contrib gives the actions a mask forbids (probability 0, finite log-probability)
MASKED_LOGIT = -1e8


def mask_size(space: spaces.Space) -> int:
    """
    The length of MaskablePPO's action mask for ``space``: one entry per action (Discrete), per action of each head
    (MultiDiscrete), two per bit (MultiBinary).

    :param space: the action space
    :return: the number of mask entries
    """
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.MultiDiscrete):
        return int(space.nvec.sum())
    if isinstance(space, spaces.MultiBinary):
        return 2 * int(np.prod(space.shape))
    raise ValueError(f"action masks need a Discrete, MultiDiscrete or MultiBinary action space, got {space}")


def actions_allowed(masks: Any, actions: th.Tensor, space: spaces.Space) -> th.Tensor:
    """
    Whether MaskablePPO's action masks allow each state's action; an action outside the space (or not finite) is
    never allowed.

    :param masks: ``(b, mask size)`` masks (see :func:`mask_size`), numpy or torch, bool or 0/1
    :param actions: ``(b, *space.shape)`` env-format actions
    :param space: the action space
    :return: ``(b)`` bool
    """
    b = actions.shape[0]
    masks = th.as_tensor(masks, device=actions.device).reshape(b, -1).bool()
    values = actions.reshape(b, -1)
    finite = th.isfinite(values) if values.is_floating_point() else th.ones_like(values, dtype=th.bool)
    index = th.where(finite, values, th.zeros_like(values)).long()
    if isinstance(space, spaces.Discrete):
        index, sizes = index - int(space.start), th.full_like(index, int(space.n))
    elif isinstance(space, spaces.MultiDiscrete):
        sizes = th.as_tensor(space.nvec.reshape(-1), device=actions.device).expand_as(index)
    elif isinstance(space, spaces.MultiBinary):
        sizes = th.full_like(index, 2)
    else:
        raise ValueError(f"action masks need a Discrete, MultiDiscrete or MultiBinary action space, got {space}")
    inside = finite & (index >= 0) & (index < sizes)
    index = th.where(inside, index, th.zeros_like(index))
    index = index + th.cumsum(sizes, dim=-1) - sizes  # each head's (bit's) block of the mask
    return (masks.gather(1, index) & inside).all(dim=-1)
