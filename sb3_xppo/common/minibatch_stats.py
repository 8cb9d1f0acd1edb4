"""Per-minibatch means of statistics gathered over one ``train()`` call, the valid samples only (one host copy)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch as th


def minibatch_means(table: th.Tensor, sizes: Sequence[int], valid: Sequence[th.Tensor | None] | None = None) -> np.ndarray:
    """
    The mean of each row of ``table`` over each minibatch's valid samples, as ``x[valid].mean()`` takes it.

    :param table: ``(k, N)``, the ``N`` samples of all minibatches one after the other
    :param sizes: each minibatch's number of samples (they add up to ``N``)
    :param valid: each minibatch's ``(size,)`` bool of the samples that count (None: all), or None: all count
    :return: ``(k, M)`` float64, one mean per row and minibatch; a padded sample's value (any number, even NaN)
        is left out
    """
    size_array = np.asarray(sizes)
    starts = np.concatenate(([0], np.cumsum(size_array)[:-1]))
    with th.no_grad():
        if valid is not None and any(v is not None for v in valid):
            weights = th.cat(
                [
                    th.ones(int(n), dtype=table.dtype, device=table.device) if v is None else v.to(table.dtype)
                    for n, v in zip(sizes, valid, strict=True)
                ]
            )
            table = th.where(weights > 0, table, 0)  # th.where, so that even a NaN there stays out
            counts = np.add.reduceat(weights.cpu().numpy().astype(np.float64), starts)
        else:
            counts = size_array.astype(np.float64)
        values = table.cpu().numpy().astype(np.float64)
    # np.add.reduceat sums each minibatch's slice of every row at once
    return np.add.reduceat(values, starts, axis=1) / np.maximum(counts, 1)
