"""
Actions between the pytree of heads a distillation policy samples and the env's format, the clipping of Box labels
to the action bounds, and which action spaces a teacher and a student can share.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces

from sb3_xppo.dagger_distill.pytree import Tree, tree_leaves, tree_map


def tree_to_action(tree: Tree, action_space: spaces.Space) -> th.Tensor:
    """
    Actions of a pytree of heads (as :class:`.PolicyAdapter` builds them) in the env's format.

    :param tree: one action tensor per head
    :param action_space: the env's action space
    :return: ``(b, *action_space.shape)`` tensor
    """
    if isinstance(action_space, spaces.MultiDiscrete):
        return th.stack(tree_leaves(tree), dim=-1)
    return tree


def action_to_tree(actions: th.Tensor, action_space: spaces.Space) -> Tree:
    """
    The inverse of :func:`tree_to_action`.

    :param actions: ``(b, *action_space.shape)`` env actions
    :param action_space: the env's action space
    :return: one action tensor per head
    """
    if isinstance(action_space, spaces.Discrete):
        return actions.long().reshape(-1)
    if isinstance(action_space, spaces.MultiDiscrete):
        return tuple(actions.long().reshape(-1, len(action_space.nvec)).unbind(dim=-1))
    return actions.float()


def action_clipper(action_space: spaces.Space, device: th.device | str = "cpu") -> Any:
    """
    A ``label_transform`` that clips Box labels to the action bounds, as SB3 clips the actions it executes
    (None for other spaces).

    :param action_space: the student's action space
    :param device: device of the labels
    :return: ``label_transform(state, action, info, step)`` or None
    """
    if not isinstance(action_space, spaces.Box):
        return None
    low = th.as_tensor(action_space.low, dtype=th.float32, device=device)
    high = th.as_tensor(action_space.high, dtype=th.float32, device=device)

    def clip(state: Tree, action: Tree, info: Any, step: int) -> Tree:
        return tree_map(lambda a: th.clamp(a, low, high), action)

    return clip


def same_action_space(a: spaces.Space, b: spaces.Space) -> bool:
    """Action spaces a teacher's labels and a student's actions can share: same type, size and bounds."""
    if isinstance(a, spaces.Box) and isinstance(b, spaces.Box):
        return a.shape == b.shape and np.allclose(a.low, b.low) and np.allclose(a.high, b.high)
    if isinstance(a, spaces.Discrete) and isinstance(b, spaces.Discrete):
        return a.n == b.n and a.start == b.start
    if isinstance(a, spaces.MultiDiscrete) and isinstance(b, spaces.MultiDiscrete):
        return a.nvec.shape == b.nvec.shape and bool(np.all(a.nvec == b.nvec))
    if isinstance(a, spaces.MultiBinary) and isinstance(b, spaces.MultiBinary):
        return a.shape == b.shape
    return False


def agreement_atol(action_space: spaces.Space, device: th.device | str = "cpu") -> float | th.Tensor:
    """
    How close a continuous action must be to the label to agree with it: 5% of a Box's range (0.1 where a bound is
    infinite), else 0.1.

    :param action_space: the student's action space
    :param device: device of the actions
    :return: the ``agreement_atol`` of :class:`~sb3_xppo.dagger_distill.DaggerDistiller`
    """
    if not isinstance(action_space, spaces.Box):
        return 0.1
    span = th.as_tensor(action_space.high - action_space.low, dtype=th.float32, device=device)
    return th.where(th.isfinite(span), 0.05 * span, th.full_like(span, 0.1))
