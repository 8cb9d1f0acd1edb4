"""
The process group of a data-parallel run (``distributed=True``, docs/guide/distributed.md): joined from the
launcher's environment (``python -m torch.distributed.run`` sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``MASTER_ADDR``, ``MASTER_PORT``), gloo on CPU and NCCL on CUDA, and :class:`ProcessGroup`, every collective the
learner takes. Each collective is counted; a heartbeat in the group's store tells, when one fails or times out,
which rank stopped answering (dead or hung) or fell behind, and :class:`RankFailure` names it.

Running statistics are merged here too: :func:`merge_running_stats` gives every rank the statistics of one process
that saw every rank's data (VecNormalize's ``RunningMeanStd``).
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import numpy as np
import torch as th
import torch.distributed as dist
from stable_baselines3.common.running_mean_std import RunningMeanStd

#: what ``python -m torch.distributed.run`` sets for each process it starts
LAUNCHER_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
LAUNCH_COMMAND = (
    "python -m torch.distributed.run --nproc-per-node 2 my_script.py  "
    "(or: python -m torch.distributed.run --nproc-per-node 2 -m sb3_xppo.train --distributed ...)"
)


class RankFailure(RuntimeError):
    """A rank of a data-parallel run died, hung or fell behind: the others stop with this error, naming it."""


def check_launched() -> None:
    """
    Raise a ``ValueError`` that shows the launch command unless this process was started by a launcher (or has
    joined a process group already).
    """
    if dist.is_available() and dist.is_initialized():
        return
    missing = [name for name in LAUNCHER_VARIABLES if name not in os.environ]
    if missing:
        raise ValueError(
            f"distributed=True runs one process per rank, started by PyTorch's launcher, which sets {', '.join(missing)}: "
            f"{LAUNCH_COMMAND}. Without a launcher, leave distributed=False"
        )


def launched_rank() -> int:
    """:return: this process's rank: the joined group's, else the launcher's ``RANK`` (:func:`check_launched` first)"""
    return dist.get_rank() if dist.is_initialized() else int(os.environ["RANK"])


def rank_device(device: th.device | str) -> th.device | str:
    """
    :param device: the model's ``device`` keyword
    :return: ``cuda:LOCAL_RANK`` where it asks for CUDA without an index (one GPU per rank), else ``device``
    """
    if str(device) in ("auto", "cuda") and th.cuda.is_available():
        return th.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
    return device


def process_device(distributed: bool, device: th.device | str) -> th.device | str:
    """
    :param distributed: the model's ``distributed`` option
    :param device: the model's ``device`` keyword
    :return: this process's device: with ``distributed``, :func:`rank_device`; else ``device``
    """
    return rank_device(device) if distributed else device


class ProcessGroup:
    """
    The learner's side of the process group: rank, world size and the collectives, each counted and guarded.

    :param timeout: seconds a collective may wait for the other ranks before :class:`RankFailure` names the one it
        waits for (the process group's own timeout)
    :param heartbeat: seconds between two heartbeats (each rank writes its time and its count of collectives into
        the group's store)
    """

    def __init__(self, timeout: float, heartbeat: float = 1.0) -> None:
        self.timeout, self.heartbeat = timeout, heartbeat
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.backend = dist.get_backend()
        #: collectives entered by this rank so far (the heartbeat reports it)
        self.entered = 0
        self._closed = threading.Event()
        self._store = _group_store()
        self._heartbeat: threading.Thread | None = None
        if self._store is not None:
            self._beat()
            self._heartbeat = threading.Thread(target=self._beat_forever, name="sb3_xppo heartbeat", daemon=True)
            self._heartbeat.start()
            # stopped before the interpreter exits: a beat cut short in the store's C++ client by the finalisation
            # (rank 0's store gone first) aborts the process ("terminate called without an active exception")
            atexit.register(self.close)

    @classmethod
    def join(cls, timeout: float, device: th.device) -> ProcessGroup:
        """
        Join the launcher's process group (gloo on CPU, NCCL on CUDA) unless this process has joined one already.

        :param timeout: see the class
        :param device: this rank's device
        """
        check_launched()
        if not dist.is_initialized():
            backend = "nccl" if th.device(device).type == "cuda" else "gloo"
            if backend == "nccl":
                th.cuda.set_device(th.device(device))
            dist.init_process_group(backend, timeout=timedelta(seconds=timeout))
            if backend == "gloo":
                # left to the interpreter's finalisation, gloo's worker threads may abort the process as it exits
                # ("terminate called without an active exception"); gloo's destroy is local to this process
                atexit.register(_destroy_joined_group)
        return cls(timeout)

    # --- the collectives ------------------------------------------------------------------------------------------

    def all_sum(self, tensor: th.Tensor, what: str) -> th.Tensor:
        """Sum ``tensor`` over the ranks, in place; :return: the tensor"""
        self._guarded(what, lambda: dist.all_reduce(tensor))
        return tensor

    def all_gather(self, tensor: th.Tensor, what: str) -> list[th.Tensor]:
        """:return: every rank's ``tensor`` (of one shape on all ranks), in rank order, on the CPU"""
        tensor = tensor.to(self.device)  # (NCCL gathers CUDA tensors only)
        gathered = [th.empty_like(tensor) for _ in range(self.world_size)]
        self._guarded(what, lambda: dist.all_gather(gathered, tensor))
        return [t.cpu() for t in gathered]

    def all_gather_object(self, value: Any, what: str) -> list[Any]:
        """:return: every rank's ``value`` (picklable), in rank order"""
        gathered: list[Any] = [None] * self.world_size
        self._guarded(what, lambda: dist.all_gather_object(gathered, value))
        return gathered

    def broadcast(self, tensors: Sequence[th.Tensor], what: str) -> None:
        """Overwrite ``tensors`` with rank 0's, in place (one flat message)."""
        if not tensors:
            return
        flat = th.cat([t.detach().reshape(-1) for t in tensors]).to(self.device)  # (NCCL sends CUDA tensors only)
        self._guarded(what, lambda: dist.broadcast(flat, 0))
        with th.no_grad():
            offset = 0
            for t in tensors:
                t.copy_(flat[offset : offset + t.numel()].view_as(t))
                offset += t.numel()

    def agree(self, flag: bool, what: str) -> bool:
        """:return: whether ``flag`` holds on every rank (so that all go on, or all stop, together)"""
        votes = th.tensor([1.0 if flag else 0.0], device=self.device)
        return bool(self.all_sum(votes, what).item() == self.world_size)

    def agree_any(self, flag: bool, what: str) -> bool:
        """:return: whether ``flag`` holds on any rank (so that, when one asks to stop, all stop together)"""
        votes = th.tensor([1.0 if flag else 0.0], device=self.device)
        return bool(self.all_sum(votes, what).item() > 0)

    def broadcast_object(self, value: Any, what: str) -> Any:
        """:return: rank 0's ``value`` (picklable; the other ranks' are ignored), on every rank"""
        message = [value if self.rank == 0 else None]
        self._guarded(what, lambda: dist.broadcast_object_list(message, 0, device=self.device))
        return message[0]

    def average_gradients(self, params: Sequence[th.nn.Parameter]) -> None:
        """
        Each parameter's gradient becomes the mean over the ranks (one flat all-reduce), before clipping. A gradient
        that is None on this rank counts as zeros, and is set, so that every rank's optimizer steps the same
        parameters.
        """
        grads = [p.grad if p.grad is not None else th.zeros_like(p) for p in params]
        flat = th.cat([g.reshape(-1) for g in grads])
        self.all_sum(flat, "averaging the gradients")
        flat.div_(self.world_size)
        offset = 0
        for p in params:
            p.grad = flat[offset : offset + p.numel()].view_as(p)
            offset += p.numel()

    @property
    def device(self) -> th.device:
        """Where the collectives' tensors live: this rank's GPU with NCCL, else the CPU."""
        return th.device("cuda", th.cuda.current_device()) if self.backend == "nccl" else th.device("cpu")

    def _guarded(self, what: str, collective: Callable[[], Any]) -> None:
        """Run one collective; a failure or a timeout becomes a :class:`RankFailure` naming the rank it waited for."""
        self.entered += 1
        try:
            collective()
        except RuntimeError as error:  # gloo and NCCL raise RuntimeError (DistBackendError) for a lost or late peer
            raise RankFailure(self._failure(what, error)) from error

    # --- the heartbeat --------------------------------------------------------------------------------------------

    def _beat(self) -> None:
        assert self._store is not None
        self._store.set(f"sb3_xppo/beat/{self.rank}", f"{time.time()} {self.entered}")

    def close(self) -> None:
        """
        Stop this object's heartbeat and wait for its last beat (the process group stays joined: another
        :class:`ProcessGroup` beats for it).
        """
        self._closed.set()
        thread = self._heartbeat
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2 * self.heartbeat + 1)

    def _beat_forever(self) -> None:
        """The heartbeat thread (a daemon: it ends with the process, or with :meth:`close`)."""
        while not self._closed.wait(self.heartbeat):
            try:
                self._beat()
            except Exception:  # the store is gone (rank 0 or the launcher ended): the collectives will tell
                return

    def _failure(self, what: str, error: BaseException) -> str:
        """The message of a failed collective: which rank is dead or hung (stale heartbeat) or behind."""
        where = f"rank {self.rank} of {self.world_size}, {what} (collective {self.entered})"
        if self._store is None:
            return f"{where}: another rank died or did not answer within {self.timeout:g} s ({error})"
        stale_after = 3 * self.heartbeat
        deadline = time.time() + 2 * stale_after
        while True:  # a rank killed a moment ago still has a fresh beat: wait for it to go stale
            try:
                beats = {r: self._read_beat(r) for r in range(self.world_size) if r != self.rank}
            except Exception:
                return f"{where}: the group's store is gone, so rank 0 (or the launcher) died ({error})"
            now = time.time()
            stale = [r for r, (at, _) in beats.items() if now - at > stale_after]
            if stale or now > deadline:
                break
            time.sleep(self.heartbeat / 2)
        if stale:
            ranks = ", ".join(str(r) for r in stale)
            return (
                f"{where}: rank {ranks} stopped answering (died or hung: no heartbeat for more than {stale_after:g} s); "
                f"the collective timeout is distributed_timeout={self.timeout:g} s ({error})"
            )
        behind = [r for r, (_, entered) in beats.items() if entered < self.entered]
        if behind:
            ranks = ", ".join(f"{r} (at collective {beats[r][1]})" for r in behind)
            return (
                f"{where}: rank {ranks} is alive but did not reach this step within distributed_timeout="
                f"{self.timeout:g} s (hung outside the collectives, or a rank skipped one) ({error})"
            )
        return f"{where}: the collective failed while every rank answered ({error})"

    def _read_beat(self, rank: int) -> tuple[float, int]:
        assert self._store is not None
        at, entered = self._store.get(f"sb3_xppo/beat/{rank}").decode().split()
        return float(at), int(entered)


def _destroy_joined_group() -> None:
    """Destroy the process group :meth:`ProcessGroup.join` joined, unless the program did already."""
    if dist.is_initialized():
        dist.destroy_process_group()


def _group_store() -> Any:
    """The default process group's store (where the ranks met), or None where torch does not expose it."""
    getter = getattr(dist.distributed_c10d, "_get_default_store", None)
    try:
        return getter() if getter is not None else None
    except RuntimeError:
        return None


# --- running statistics -----------------------------------------------------------------------------------------


def running_stats_vector(rms: RunningMeanStd) -> np.ndarray:
    """``(count, mean..., var...)`` of a ``RunningMeanStd`` as one float64 vector."""
    return np.concatenate([[rms.count], np.ravel(rms.mean), np.ravel(rms.var)]).astype(np.float64)


def set_running_stats(rms: RunningMeanStd, vector: np.ndarray) -> None:
    """The inverse of :func:`running_stats_vector`, in place."""
    n = np.size(rms.mean)
    rms.count = float(vector[0])
    rms.mean = vector[1 : 1 + n].reshape(np.shape(rms.mean)).astype(np.float64)
    rms.var = vector[1 + n :].reshape(np.shape(rms.var)).astype(np.float64)


def moments_since(now: np.ndarray, then: np.ndarray) -> np.ndarray:
    """
    The moments of the data a running statistic took since ``then``: the inverse of Chan et al.'s parallel
    combination (``now = then + new``), in float64.

    :param now: :func:`running_stats_vector` now
    :param then: the same at the last merge
    :return: ``(count, mean..., var...)`` of the new data alone (count 0: none)
    """
    n = (len(now) - 1) // 2
    count_now, count_then = now[0], then[0]
    count = count_now - count_then
    if count <= 0:
        return np.concatenate([[0.0], np.zeros(2 * n)])
    mean_now, mean_then = now[1 : 1 + n], then[1 : 1 + n]
    mean = (mean_now * count_now - mean_then * count_then) / count
    delta = mean - mean_then
    m2 = now[1 + n :] * count_now - then[1 + n :] * count_then - delta**2 * count_then * count / count_now
    return np.concatenate([[count], mean, np.maximum(m2 / count, 0.0)])


def merge_running_stats(rms: RunningMeanStd, last_merge: np.ndarray, group: ProcessGroup, what: str) -> np.ndarray:
    """
    Give every rank's ``rms`` the statistics of one process that took every rank's data: the statistics of the last
    merge, then what each rank took since, in rank order (the same operations on every rank, so the same bits).

    :param rms: this rank's statistics (updated in place)
    :param last_merge: :func:`running_stats_vector` after the last merge (equal on every rank)
    :param group: the process group
    :param what: what is merged (for a failure's message)
    :return: the merged vector, the next call's ``last_merge``
    """
    new = th.as_tensor(moments_since(running_stats_vector(rms), last_merge))
    merged = RunningMeanStd(shape=np.shape(rms.mean))
    set_running_stats(merged, last_merge)
    for gathered in group.all_gather(new, what):
        part = gathered.numpy()
        if part[0] > 0:
            n = (len(part) - 1) // 2
            merged.update_from_moments(
                part[1 : 1 + n].reshape(np.shape(rms.mean)), part[1 + n :].reshape(np.shape(rms.var)), float(part[0])
            )
    vector = running_stats_vector(merged)
    set_running_stats(rms, vector)
    return vector
