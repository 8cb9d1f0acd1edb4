"""
Pytrees of action distributions: one policy head per leaf, nested in dicts, lists and tuples (composite action spaces).

A leaf is a :class:`torch.distributions.Distribution` (or, for a deterministic head, a plain tensor of actions).
Every helper here maps one function over the heads; nothing is specific to Stable-Baselines3.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch as th
from torch.distributions import Bernoulli, Categorical, Distribution, Independent, OneHotCategorical, TransformedDistribution

#: a leaf (Distribution or tensor), or a dict / list / tuple of pytrees
Tree = Any


def tree_map(fn: Callable[..., Any], tree: Tree, *rest: Tree) -> Tree:
    """
    Apply ``fn`` leaf by leaf to pytrees of the same structure.

    :param fn: called as ``fn(leaf, *matching_leaves_of_rest)``
    :param tree: the pytree that sets the structure
    :param rest: pytrees of the same structure
    :return: a pytree of the same structure holding ``fn``'s results
    """
    if isinstance(tree, dict):
        for other in rest:
            if not isinstance(other, dict) or set(other) != set(tree):
                raise ValueError(f"pytrees differ: a dict with keys {sorted(tree)} against {_describe(other)}")
        return type(tree)((k, tree_map(fn, v, *(o[k] for o in rest))) for k, v in tree.items())
    if isinstance(tree, (list, tuple)):
        for other in rest:
            if not isinstance(other, (list, tuple)) or len(other) != len(tree):
                raise ValueError(f"pytrees differ: a sequence of {len(tree)} heads against {_describe(other)}")
        mapped = [tree_map(fn, *leaves) for leaves in zip(tree, *rest, strict=True)]
        if isinstance(tree, tuple) and hasattr(tree, "_fields"):  # a NamedTuple
            return type(tree)(*mapped)
        return type(tree)(mapped)
    return fn(tree, *rest)


def tree_leaves(tree: Tree) -> list[Any]:
    """
    The leaves of a pytree, in order (dicts in insertion order).

    :param tree: a pytree
    :return: its leaves
    """
    if isinstance(tree, dict):
        return [leaf for v in tree.values() for leaf in tree_leaves(v)]
    if isinstance(tree, (list, tuple)):
        return [leaf for v in tree for leaf in tree_leaves(v)]
    return [tree]


def tree_index(tree: Tree, index: th.Tensor | slice) -> Tree:
    """
    Rows ``index`` of every tensor of a pytree (e.g. a batch of Dict observations).

    :param tree: a pytree of tensors with the batch first
    :param index: rows to take
    :return: the indexed pytree
    """
    return tree_map(lambda x: x[index], tree)


def index_distribution(dist: Distribution | th.Tensor, index: th.Tensor) -> Distribution | th.Tensor:
    """
    Rows ``index`` of a distribution's batch: a shallow copy whose batched parameters (and cached properties, and
    nested base distributions) are indexed along the first batch dim, as ``Distribution.expand`` builds its copies.

    :param dist: a distribution with at least one batch dim (or a tensor)
    :param index: ``(k)`` row indices
    :return: the distribution of those rows, batch shape ``(k, *batch_shape[1:])``
    """
    if isinstance(dist, th.Tensor):
        return dist[index]
    if len(dist.batch_shape) == 0:
        return dist
    b = dist.batch_shape[0]
    new = copy.copy(dist)
    for name, value in vars(dist).items():
        if isinstance(value, th.Tensor) and value.ndim > 0 and value.shape[0] == b:
            new.__dict__[name] = value[index]
        elif isinstance(value, Distribution):
            new.__dict__[name] = index_distribution(value, index)
    new._batch_shape = th.Size((len(index), *dist.batch_shape[1:]))
    return new


def batch_size_of(tree: Tree) -> int:
    """
    The batch size (leading dim) of a pytree of tensors.

    :param tree: a pytree of tensors with the batch first
    :return: the leading dim of its first leaf
    """
    leaf = tree_leaves(tree)[0]
    if not isinstance(leaf, th.Tensor) or leaf.ndim == 0:
        raise ValueError(f"states must be tensors (or a pytree of tensors) with the batch first, got {_describe(leaf)}")
    return leaf.shape[0]


def _best(dist: Distribution | th.Tensor) -> th.Tensor:
    if isinstance(dist, th.Tensor):
        return dist
    if isinstance(dist, Bernoulli):
        # torch's Bernoulli.mode is NaN at p = 0.5; a label must be 0 or 1
        return (dist.probs > 0.5).to(dist.probs.dtype)
    if isinstance(dist, Independent):
        return _best(dist.base_dist)
    if isinstance(dist, TransformedDistribution):
        # the transformed mode of the base (SB3's deterministic action of a tanh-squashed Gaussian)
        action = _best(dist.base_dist)
        for transform in dist.transforms:
            action = transform(action)
        return action
    try:
        return dist.mode
    except NotImplementedError:
        return dist.mean


def best_action(tree: Tree) -> Tree:
    """
    The best (noise-free) action of each head: the mode, or the mean where the mode is not defined.

    Categorical heads give indices, Bernoulli heads give 0/1 (ties at p = 0.5 give 0), Gaussian heads their mean,
    and a transformed (e.g. tanh-squashed) head the transformed mode of its base distribution.

    :param tree: a pytree of distributions (tensor leaves are returned as they are)
    :return: a pytree of action tensors of the same structure
    """
    return tree_map(_best, tree)


def sample_action(tree: Tree) -> Tree:
    """
    One sampled action per head (tensor leaves are returned as they are).

    :param tree: a pytree of distributions
    :return: a pytree of action tensors
    """
    return tree_map(lambda d: d if isinstance(d, th.Tensor) else d.sample(), tree)


def distribution_mean(dist: Distribution) -> th.Tensor:
    """
    The mean of a head's action: class probabilities for Categorical/OneHotCategorical (the mean of the one-hot
    action), probabilities for Bernoulli, the mean otherwise, and for a transformed head whose mean has no closed
    form the transformed mean of its base (the deterministic action of a tanh-squashed Gaussian).

    :param dist: a distribution
    :return: a tensor of shape ``batch_shape + event_shape`` (``+ (n_classes,)`` for Categorical)
    """
    if isinstance(dist, (Categorical, OneHotCategorical, Bernoulli)):
        return dist.probs
    if isinstance(dist, Independent):
        return distribution_mean(dist.base_dist)
    if isinstance(dist, TransformedDistribution):
        try:
            return dist.mean
        except NotImplementedError:
            mean = distribution_mean(dist.base_dist)
            for transform in dist.transforms:
                mean = transform(mean)
            return mean
    return dist.mean


def distribution_tensors(dist: Distribution | th.Tensor) -> list[th.Tensor]:
    """
    The parameter tensors a distribution was built from (nested distributions included).

    :param dist: a distribution, or a tensor (returned in a list)
    :return: its parameter tensors
    """
    if isinstance(dist, th.Tensor):
        return [dist]
    tensors = [v for k, v in vars(dist).items() if k in dist.arg_constraints and isinstance(v, th.Tensor)]
    base = getattr(dist, "base_dist", None)
    if isinstance(base, Distribution):
        tensors += distribution_tensors(base)
    return tensors


def is_discrete(dist: Distribution | th.Tensor) -> bool:
    """
    Whether a head's actions are discrete (compared exactly) rather than continuous.

    :param dist: a distribution, or a tensor of actions
    :return: True for discrete supports (Categorical, Bernoulli, ...) and integer tensors
    """
    if isinstance(dist, th.Tensor):
        return not dist.is_floating_point()
    try:
        support = dist.support
    except NotImplementedError:
        return False
    return bool(support is not None and support.is_discrete)


def rows_finite(x: th.Tensor, batch_size: int) -> th.Tensor:
    """
    ``(b)`` bool: whether every entry of each row is finite. A tensor without the batch dim counts for every row.

    :param x: a tensor, ideally with the batch first
    :param batch_size: ``b``
    :return: ``(b)`` bool mask
    """
    finite = th.isfinite(x) if x.is_floating_point() or x.is_complex() else th.ones_like(x, dtype=th.bool)
    if x.ndim > 0 and x.shape[0] == batch_size:
        return finite.reshape(batch_size, -1).all(dim=-1)
    return finite.all().expand(batch_size)


def where_rows(mask: th.Tensor, x: th.Tensor, y: th.Tensor) -> th.Tensor:
    """
    :param mask: ``(b)`` bool
    :param x: taken where ``mask`` holds, the batch first
    :param y: taken elsewhere, the batch first
    :return: ``x``'s rows where ``mask`` holds, ``y``'s elsewhere (the mask broadcast against ``y``)
    """
    return th.where(mask.reshape(-1, *([1] * (y.ndim - 1))), x, y)


def check_finite_states(states: Tree, what: str, row: Callable[[int], str]) -> None:
    """
    Raise a ``ValueError`` at the first non-finite entry (NaN or +-inf) of a batch of states, naming its row, its key
    (for a Dict observation), its position and its value, so that a broken observation is reported where it enters
    instead of poisoning a gradient later. Integer tensors are always finite.

    :param states: a tensor (or dict / list / tuple of them) with the batch first
    :param what: what the states are, for the message (e.g. ``"student observation"``)
    :param row: describes a row for the message, e.g. ``lambda i: f"env {i} at step 12"``
    """
    for path, x in _leaves_with_paths(states):
        if not isinstance(x, th.Tensor) or not (x.is_floating_point() or x.is_complex()):
            continue
        finite = th.isfinite(x)
        if bool(finite.all()):
            continue
        flat = (~finite).reshape(x.shape[0], -1) if x.ndim > 0 else (~finite).reshape(1, 1)
        i, j = (int(k) for k in flat.nonzero()[0])
        value = x.reshape(flat.shape)[i, j].item()
        key = f", key {'/'.join(map(str, path))!r}" if path else ""
        raise ValueError(
            f"non-finite {what} ({value}) from {row(i)}{key}, entry {j}: observations must be finite before the "
            "distillation uses them (check the environment, or wrap it in VecCheckNan to find the cause)"
        )


def _leaves_with_paths(tree: Tree, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    if isinstance(tree, dict):
        return [leaf for k, v in tree.items() for leaf in _leaves_with_paths(v, (*path, k))]
    if isinstance(tree, (list, tuple)):
        return [leaf for k, v in enumerate(tree) for leaf in _leaves_with_paths(v, (*path, k))]
    return [(path, tree)]


def _describe(x: Any) -> str:
    if isinstance(x, th.Tensor):
        return f"a tensor of shape {tuple(x.shape)}"
    if isinstance(x, dict):
        return f"a dict with keys {sorted(x)}"
    if isinstance(x, (list, tuple)):
        return f"a sequence of {len(x)}"
    return type(x).__name__
