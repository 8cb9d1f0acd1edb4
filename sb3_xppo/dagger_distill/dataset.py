"""The aggregated DAgger dataset: every state the student visited, bounded, oldest dropped first."""

from __future__ import annotations

from typing import Any

import torch as th

from sb3_xppo.dagger_distill.pytree import Tree, batch_size_of, tree_index, tree_map


class AggregatedDataset:
    """
    DAgger's aggregated dataset (Ross et al. 2011, https://arxiv.org/abs/1011.0686): the states of every
    iteration are kept and trained on together. It holds at most ``capacity`` rows in a ring, so once full the
    oldest states make room for the newest.

    Each row holds named fields (e.g. ``states``, ``teacher_states``, ``labels``), each a pytree of tensors with
    the batch first; the storage is allocated at the first :meth:`add`, on the device and with the dtypes of
    that first batch.

    :param capacity: the most rows kept
    """

    def __init__(self, capacity: int) -> None:
        if not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity (the dataset size) must be an int >= 1, got {capacity!r}")
        self.capacity = capacity
        self._storage: dict[str, Tree] | None = None
        self._pos = 0
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def add(self, **fields: Tree) -> None:
        """
        Append a batch of rows.

        :param fields: name -> pytree of tensors with the batch first; the same names at every call
        """
        n = batch_size_of(next(iter(fields.values())))
        if n > self.capacity:  # only the newest rows fit
            fields = {k: tree_index(v, slice(n - self.capacity, n)) for k, v in fields.items()}
            n = self.capacity
        if self._storage is None:
            self._storage = self._allocated(fields)
        elif set(fields) != set(self._storage):
            raise ValueError(f"fields must be the same at every add(): {sorted(self._storage)}, got {sorted(fields)}")
        rows = (self._pos + th.arange(n)) % self.capacity
        for k, v in fields.items():

            def write(buffer: th.Tensor, x: th.Tensor) -> None:
                buffer[rows.to(buffer.device)] = x.to(buffer.device, buffer.dtype)

            tree_map(write, self._storage[k], v)
        self._pos = (self._pos + n) % self.capacity
        self._size = min(self._size + n, self.capacity)

    def _allocated(self, fields: dict[str, Tree]) -> dict[str, Tree]:
        """:return: empty storage for ``capacity`` rows of ``fields`` (their structure, devices and dtypes)"""
        return {
            k: tree_map(lambda x: th.empty((self.capacity, *x.shape[1:]), dtype=x.dtype, device=x.device), v)
            for k, v in fields.items()
        }

    def state(self) -> dict[str, Any]:
        """
        :return: what a resumable checkpoint keeps (docs/guide/resume.md): the rows held (numpy arrays, in their ring
            order) and the ring's position
        """
        size = self._size
        rows = (
            None
            if self._storage is None
            else {k: tree_map(lambda x: x[:size].cpu().numpy(), v) for k, v in self._storage.items()}
        )
        return {"rows": rows, "pos": self._pos, "size": size}

    def restore(self, state: dict[str, Any], like: dict[str, Tree]) -> None:
        """
        Put the rows :meth:`state` kept back.

        :param state: what :meth:`state` returned
        :param like: a batch of the fields :meth:`add` is given (their structure, pytree types, devices and dtypes)
        :raises ValueError: where the rows do not fit ``like``'s structure, or the capacity is smaller
        """
        self._storage, self._pos, self._size = None, 0, 0
        if state["rows"] is None:
            return
        if state["size"] > self.capacity:
            raise ValueError(f"the checkpoint's dataset holds {state['size']} rows, more than the capacity {self.capacity}")
        storage = self._allocated(like)
        if set(storage) != set(state["rows"]):
            raise ValueError(f"the checkpoint's dataset has the fields {sorted(state['rows'])}, this one {sorted(storage)}")
        for k, rows in state["rows"].items():

            def write(buffer: th.Tensor, saved: Any) -> None:
                buffer[: len(saved)] = th.as_tensor(saved).to(buffer.device, buffer.dtype)

            tree_map(write, storage[k], rows)
        self._storage, self._pos, self._size = storage, int(state["pos"]), int(state["size"])

    def get(self, index: th.Tensor) -> dict[str, Tree]:
        """
        Rows ``index`` of every field.

        :param index: ``(k)`` row indices in ``[0, len(self))``
        :return: name -> pytree of ``(k, ...)`` tensors
        """
        assert self._storage is not None, "the dataset is empty"
        return {k: tree_map(lambda x: x[index.to(x.device)], v) for k, v in self._storage.items()}

    def sample(self, batch_size: int, generator: th.Generator | None = None) -> dict[str, Tree]:
        """
        ``batch_size`` rows drawn uniformly (with replacement).

        :param batch_size: number of rows
        :param generator: torch random generator (the global one by default)
        :return: name -> pytree of ``(batch_size, ...)`` tensors
        """
        if self._size == 0:
            raise ValueError("cannot sample from an empty dataset: collect states first")
        return self.get(th.randint(self._size, (batch_size,), generator=generator))
