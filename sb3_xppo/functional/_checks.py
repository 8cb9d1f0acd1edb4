"""Argument checks shared by the functional losses and estimators."""

from __future__ import annotations

import math

import torch as th


def check_same_shape(reference_name: str, reference: th.Tensor, **others: th.Tensor | None) -> None:
    """Raise a ``ValueError`` naming the first tensor whose shape differs from ``reference``'s."""
    for name, other in others.items():
        if other is not None and other.shape != reference.shape:
            raise ValueError(
                f"{name} has shape {tuple(other.shape)}, expected {reference_name}'s shape {tuple(reference.shape)}"
            )


def check_broadcastable(name: str, tensor: th.Tensor | None, target_shape: th.Size) -> None:
    """Raise a ``ValueError`` naming ``name`` when ``tensor`` does not broadcast to ``target_shape``."""
    if tensor is None:
        return
    try:
        th.broadcast_shapes(tensor.shape, target_shape)
    except RuntimeError:
        raise ValueError(
            f"{name} has shape {tuple(tensor.shape)}, which does not broadcast to {tuple(target_shape)}"
        ) from None


def clip_bounds(eps_clip: float | tuple[float, float], name: str = "eps_clip") -> tuple[float, float]:
    """
    ``eps_clip`` as a ``(low, high)`` pair: a float ``e`` is ``(e, e)``; a pair is decoupled clipping
    (the ratio is clipped to ``[1 - low, 1 + high]``). As in SB3's PPO, a range a linear schedule has driven below 0
    is not refused: ``torch.clamp`` then maps every ratio to ``1 + high``.
    """
    if isinstance(eps_clip, (tuple, list)):
        if len(eps_clip) != 2:
            raise ValueError(f"{name} must be a float or a (low, high) pair, got {eps_clip!r}")
        low, high = (float(e) for e in eps_clip)
    else:
        low = high = float(eps_clip)
    if math.isnan(low) or math.isnan(high):
        raise ValueError(f"{name} must be a number, got {eps_clip!r}")
    return low, high


def expand_mask_for_groups(mask: th.Tensor, target: th.Tensor, group_dim: int) -> th.Tensor:
    """Insert the group dimension into a ``(b n)`` mask that masks grouped ``(b g n)`` / ``(b n g)`` inputs."""
    if mask.ndim == target.ndim - 1:
        mask = mask.unsqueeze(group_dim if group_dim >= 0 else target.ndim + group_dim)
    return mask


def to_device(tensor: th.Tensor, device: th.device, name: str, reference_name: str) -> th.Tensor:
    """
    ``tensor`` moved to ``device``, the device of ``reference_name``; a ``ValueError`` naming both devices when it
    cannot move there (e.g. from the ``meta`` device, which holds no data).
    """
    if tensor.device == device:
        return tensor
    try:
        return tensor.to(device)
    except (RuntimeError, NotImplementedError) as error:
        raise ValueError(
            f"{name} is on device {tensor.device} and {reference_name} on {device}, and {name} cannot be moved there "
            f"({error}): put them on the same device"
        ) from error
