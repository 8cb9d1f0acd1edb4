"""
What a data-parallel XPPO learner (``distributed=True``, docs/guide/distributed.md) does beyond one process: each rank
collects its own rollout, and :class:`DataParallel` keeps the ranks one learner. The peers' recipe (rank 0's
parameters broadcast at the start; every minibatch's gradients averaged before clipping; the KL averaged) plus what
they leave per rank: the advantage normalization of the global minibatch (or rollout), ``target_kl``'s early stop on
the global KL, VecNormalize's and PopArt's statistics merged at every update, a callback's stop agreed on, and ranks
with different setups refused at the start. Every rank takes every collective in the same order: a skipped one
would be a hang, and the process group's heartbeat names a rank that died or hung
(:class:`~sb3_xppo.common.distributed.RankFailure`).

With equal per-rank minibatches, one update equals one process's update on the union of the ranks' minibatches:
the mean loss over the global minibatch has the mean of the ranks' gradients as its gradient.

A model in one process holds :class:`SingleProcess`, the same interface doing one process's work (as
``contextlib.nullcontext`` is a context manager doing nothing): the rollout and ``train()`` make the same calls either
way, and never ask which rank they are on.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import pathlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import torch as th
from stable_baselines3.common.callbacks import ProgressBarCallback
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.type_aliases import MaybeCallback

from sb3_xppo.common.distributed.process_group import (
    ProcessGroup,
    merge_running_stats,
    running_stats_vector,
    set_running_stats,
)
from sb3_xppo.functional.masked import EPS, masked_zscore, minibatch_zscore, valid_mean


class SingleProcess:
    """
    One process's learner, with :class:`DataParallel`'s interface: every collective is the identity or the one
    process's statistic, computed exactly as PPO computes it (bit for bit), and :meth:`join` is the way to ranks.
    """

    rank = 0
    world_size = 1
    #: the processes that step alike (``num_timesteps`` counts all their steps)
    n_processes = 1

    def join(self, model: Any) -> DataParallel:
        """
        ``distributed=True``: join the launcher's process group and seed this rank's envs ``seed + rank * n_envs + i``
        (SB3 seeds env ``i`` of a VecEnv ``seed + i``), before the parent seeds anything.

        :param model: the model being set up
        :return: the model's data-parallel learner
        """
        learner = DataParallel(ProcessGroup.join(model.options.distributed_timeout, model.device))
        if model.seed is not None:
            model.seed += learner.rank * model.n_envs
        return learner

    def check_agreement(self, model: Any) -> None:
        """Nothing to agree with."""

    def learn_keywords(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """:return: ``learn()``'s keywords as given"""
        return kwargs

    def start_learn(self, model: Any) -> None:
        """Nothing to take from another rank."""

    def take_rank_0s(self, module: th.nn.Module, what: str) -> None:
        """Nothing to take: ``module`` is this process's."""

    def step_shared(self, optimizer: th.optim.Optimizer) -> None:
        """Step ``optimizer`` (a module's outside the policy, DAgger's projector's) on this process's gradients."""
        optimizer.step()

    def logger(self, logger: Any) -> Any:
        """:return: the logger as SB3 configured it"""
        return logger

    def save(self, model: Any, save: Callable[..., None], *args: Any, **kwargs: Any) -> None:
        """Save the model (``save``: the parent's ``save``)."""
        save(*args, **kwargs)

    def agree_to_go_on(self, go_on: bool) -> bool:
        """:return: whether the rollout went through"""
        return go_on

    def merge_vec_normalize(self, model: Any) -> None:
        """VecNormalize's statistics are this process's already."""

    def update_value_statistics(self, value_net: Any, returns: th.Tensor) -> None:
        """PopArt's statistics take the rollout's returns."""
        value_net.update(returns)

    def with_advantage_moments(self, minibatches: Iterable[Any], valid_samples: Callable[[Any], Any]) -> Iterable[Any]:
        """:return: the epoch's minibatches, as the buffer yields them"""
        return minibatches

    def minibatch_zscore(self, advantages: th.Tensor, valid: th.Tensor | None) -> th.Tensor:
        """``normalize_advantage='minibatch'``: PPO's z-score (:func:`~sb3_xppo.functional.masked.minibatch_zscore`)."""
        return minibatch_zscore(advantages, valid)

    def rollout_zscore(self, advantages: th.Tensor) -> th.Tensor:
        """``normalize_advantage='rollout'``: :func:`~sb3_xppo.functional.masked.masked_zscore` of the rollout."""
        return masked_zscore(advantages)

    def mean_kl(self, kl: th.Tensor, valid: th.Tensor | None) -> Any:
        """:return: the mean approximate KL of the minibatch's valid samples, on the host as PPO reads it"""
        return valid_mean(kl, valid).cpu().numpy()

    def average(self, value: float, what: str) -> float:
        """:return: ``value``"""
        return value

    @property
    def gradient_averaging(self) -> Callable[[list[th.nn.Parameter]], None] | None:
        """None: the gradients are this process's"""
        return None

    # --- resumable checkpoints (sb3_xppo/resume/) --------------------------------------------------------------------

    #: the fewest checkpoints a folder may keep
    min_keep = 1

    def agree_any(self, flag: bool, what: str) -> bool:
        """:return: ``flag``: this process decides alone"""
        return flag

    def shared_folder(self, folder: pathlib.Path) -> pathlib.Path:
        """:return: ``folder``: the checkpoint folder is this process's"""
        return folder

    def own_folder(self, folder: str | os.PathLike) -> pathlib.Path:
        """:return: where this process writes its checkpoints: ``folder``"""
        return pathlib.Path(folder)

    def checkpoint_members(
        self, members: Mapping[str, bytes], model: Any, model_member: str, ranks_member: str
    ) -> dict[str, bytes]:
        """:return: the members of this process's checkpoint: ``members``"""
        return dict(members)


#: the learner of every model in one process (it holds no state)
SINGLE_PROCESS = SingleProcess()


def rank_folder(folder: str | os.PathLike, rank: int) -> pathlib.Path:
    """:return: rank ``rank``'s subfolder of a data-parallel run's checkpoint folder, where it alone writes"""
    return pathlib.Path(folder) / f"rank-{rank}"


def learner_of(model: Any) -> SingleProcess | DataParallel:
    """:return: the model's learner: its :class:`DataParallel` one, else :data:`SINGLE_PROCESS` (a stock SB3 model too)"""
    return getattr(model, "_data_parallel", SINGLE_PROCESS)


class DataParallel:
    """
    The collectives of one data-parallel model, in the order its ``learn()`` takes them.

    :param group: the joined process group
    """

    def __init__(self, group: ProcessGroup) -> None:
        self.group = group
        #: each merged VecNormalize statistic as it was after the last merge (equal on every rank)
        self._merged: dict[str, np.ndarray] = {}
        #: the global advantage statistics ``(count, mean, variance)`` of the minibatch being trained on
        self._next_moments: tuple[th.Tensor, th.Tensor, th.Tensor] | None = None

    @property
    def rank(self) -> int:
        return self.group.rank

    @property
    def world_size(self) -> int:
        return self.group.world_size

    @property
    def n_processes(self) -> int:
        """the processes that step alike (``num_timesteps`` counts all their steps): the ranks"""
        return self.group.world_size

    # --- resumable checkpoints (sb3_xppo/resume/) --------------------------------------------------------------------

    #: the fewest checkpoints a folder may keep: a rank killed while writing leaves the others one checkpoint ahead,
    #: and resume takes the newest one every rank has, so with one kept per rank they would share none
    min_keep = 2

    def agree_any(self, flag: bool, what: str) -> bool:
        """:return: whether ``flag`` holds on any rank (one collective), so that the ranks stop, or write, together"""
        return self.group.agree_any(flag, what)

    def shared_folder(self, folder: pathlib.Path) -> pathlib.Path:
        """
        :return: rank 0's checkpoint folder, on every rank (one collective): ranks given other folders (the main job's,
            whose other ranks run in temporary folders) write beside rank 0
        """
        return pathlib.Path(self.group.broadcast_object(str(folder), "taking rank 0's checkpoint folder"))

    def own_folder(self, folder: str | os.PathLike) -> pathlib.Path:
        """:return: where this rank writes its checkpoints: its subfolder of ``folder`` (:func:`rank_folder`)"""
        return rank_folder(folder, self.rank)

    def checkpoint_members(
        self, members: Mapping[str, bytes], model: Any, model_member: str, ranks_member: str
    ) -> dict[str, bytes]:
        """
        :param members: the checkpoint's members
        :param model: the model being trained
        :param model_member: the member holding the model, which rank 0 alone writes (every rank holds the same)
        :param ranks_member: the member that names this rank: ``{"rank", "world_size", "seed", "distributed_timeout"}``
        :return: the members of this rank's checkpoint
        """
        own = {name: data for name, data in members.items() if name != model_member or self.rank == 0}
        ranks = {
            "rank": self.rank,
            "world_size": self.world_size,
            "seed": model.seed,
            "distributed_timeout": model.options.distributed_timeout,
        }
        own[ranks_member] = json.dumps(ranks).encode()
        return own

    # --- at the start -----------------------------------------------------------------------------------------------

    def join(self, model: Any) -> DataParallel:
        """:return: this learner: the model has joined already"""
        return self

    def check_agreement(self, model: Any) -> None:
        """
        Refuse ranks whose setups differ: the algorithm, the spaces, the options, the sizes and the parameter shapes
        must be rank 0's (every rank raises the same ``ValueError``, naming the rank and what differs).
        """
        mine = setup_fingerprint(model)
        every = self.group.all_gather_object(mine, "comparing the ranks' setups")
        for rank, theirs in enumerate(every):
            differs = [key for key in every[0] if theirs.get(key) != every[0][key]]
            if differs:
                shown = "; ".join(f"{key}: {theirs.get(key)!r} on rank {rank}, {every[0][key]!r} on rank 0" for key in differs)
                raise ValueError(f"the ranks of a distributed run must be set up alike; rank {rank} differs: {shown}")

    def start_learn(self, model: Any) -> None:
        """Every rank starts ``learn()`` from rank 0's parameters and VecNormalize statistics."""
        tensors = [*model.policy.parameters(), *model.policy.buffers()]
        self.group.broadcast([t for t in tensors if t.dtype.is_floating_point], "taking rank 0's parameters")
        for name, rms in vec_normalize_stats(model):
            vector = th.as_tensor(running_stats_vector(rms))
            self.group.broadcast([vector], f"taking rank 0's VecNormalize {name}")
            set_running_stats(rms, vector.numpy())
            self._merged[name] = vector.numpy().copy()

    def learn_keywords(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """:return: ``learn()``'s keywords, SB3's progress bar counting every rank's steps (:meth:`progress_bars`)"""
        kwargs = dict(kwargs)
        kwargs["callback"] = self.progress_bars(kwargs.get("callback"), kwargs.pop("progress_bar", False))
        return kwargs

    def logger(self, logger: Any) -> Any:
        """:return: on rank 0 the logger as SB3 configured it; on the others a logger that writes nothing"""
        return logger if self.rank == 0 else Logger(folder=None, output_formats=[])

    def save(self, model: Any, save: Callable[..., None], *args: Any, **kwargs: Any) -> None:
        """
        Only rank 0 writes (every rank holds the same model; a ``CheckpointCallback`` on every rank never has two
        processes write one file), and it writes a plain model (``distributed=False``): it loads and runs in one
        process, and ``load(path, distributed=True)`` under the launcher trains it on ranks again.

        :param model: the model
        :param save: the parent's ``save`` of the model
        """
        if self.rank != 0:
            return
        options, checked = model.options, model._checked_options
        model.options = model._checked_options = dataclasses.replace(options, distributed=False)
        try:
            save(*args, **kwargs)
        finally:
            model.options, model._checked_options = options, checked

    # --- each rollout and update -----------------------------------------------------------------------------------

    def agree_to_go_on(self, go_on: bool) -> bool:
        """:return: whether every rank's rollout went through (a callback's stop on one rank stops all)"""
        return self.group.agree(go_on, "agreeing whether to go on after the rollout")

    def merge_vec_normalize(self, model: Any) -> None:
        """VecNormalize's running statistics become those of one process that saw every rank's steps."""
        for name, rms in vec_normalize_stats(model):
            last = self._merged.get(name, running_stats_vector(RunningMeanStd(shape=np.shape(rms.mean))))
            self._merged[name] = merge_running_stats(rms, last, self.group, f"merging VecNormalize's {name}")

    def global_moments(self, x: th.Tensor, valid: th.Tensor | None, what: str) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        """
        :param x: ``(batch, ...)`` this rank's values
        :param valid: ``(batch,)`` which count, or None
        :return: over every rank's valid values, per trailing index: the count, the mean and the population
            variance (float64)
        """
        return moments(self.group.all_sum(local_sums(x, valid), what))

    def with_advantage_moments(
        self, minibatches: Iterable[Any], valid_samples: Callable[[Any], th.Tensor | None]
    ) -> Iterator[Any]:
        """
        An epoch's minibatches, each yielded once :meth:`minibatch_zscore` holds its global advantage statistics: those
        of every minibatch are all-reduced at once, before the first (one collective per epoch, not per minibatch).

        :param minibatches: the epoch's minibatches, in order
        :param valid_samples: which samples of a minibatch count (None: all)
        """
        minibatches = list(minibatches)
        if not minibatches:
            return
        local = th.stack([local_sums(minibatch.advantages, valid_samples(minibatch)) for minibatch in minibatches])
        sums = self.group.all_sum(local, "normalizing the epoch's advantages")
        for minibatch, minibatch_sums in zip(minibatches, sums, strict=True):
            self._next_moments = moments(minibatch_sums)
            yield minibatch
        self._next_moments = None

    def minibatch_zscore(self, advantages: th.Tensor, valid: th.Tensor | None) -> th.Tensor:
        """
        ``normalize_advantage='minibatch'`` over the global minibatch: PPO's z-score (unbiased std), from the statistics
        :meth:`with_advantage_moments` gathered for this minibatch (else from a collective of its own).
        """
        if self._next_moments is not None:
            n, mean, var = self._next_moments
        else:
            n, mean, var = self.global_moments(advantages, valid, "normalizing the minibatch's advantages")
        if n <= 1:
            return advantages
        std = (var * n / (n - 1)).sqrt()
        return (advantages - mean.to(advantages.dtype)) / (std.to(advantages.dtype) + 1e-8)

    def rollout_zscore(self, advantages: th.Tensor) -> th.Tensor:
        """``normalize_advantage='rollout'`` over every rank's rollout: population variance, ``eps`` as one process."""
        _, mean, var = self.global_moments(advantages.reshape(-1), None, "normalizing the rollout's advantages")
        return (advantages - mean.to(advantages.dtype)) * th.rsqrt(var.to(advantages.dtype) + EPS)

    def mean_kl(self, kl: th.Tensor, valid: th.Tensor | None) -> float:
        """:return: the mean approximate KL over every rank's valid samples of this minibatch (``target_kl``)"""
        _, mean, _ = self.global_moments(kl, valid, "averaging the approximate KL")
        return float(mean)

    def average(self, value: float, what: str) -> float:
        """:return: the mean over the ranks of one number per rank (e.g. each rank's epoch KL, equal minibatch counts)"""
        return (
            float(self.group.all_sum(th.tensor([value], dtype=th.float64, device=self.group.device), what)) / self.world_size
        )

    def take_rank_0s(self, module: th.nn.Module, what: str) -> None:
        """
        Every rank starts ``module``, one outside the policy that the ranks train as one (DAgger's projector), from
        rank 0's parameters and buffers.
        """
        tensors = [*module.parameters(), *module.buffers()]
        self.group.broadcast([t for t in tensors if t.dtype.is_floating_point], what)

    def step_shared(self, optimizer: th.optim.Optimizer) -> None:
        """
        Step ``optimizer``, a module's outside the policy that the ranks train as one (DAgger's projector), on its
        gradients averaged over the ranks (one all-reduce, a missing gradient counting as zeros), so that its copies
        stay equal. Where the average is zero throughout, no rank had a gradient: no step, as Adam takes none in one
        process.
        """
        params = [p for group in optimizer.param_groups for p in group["params"]]
        self.group.average_gradients(params)
        if any(bool(p.grad.any()) for p in params if p.grad is not None):
            optimizer.step()
        else:
            for p in params:
                p.grad = None

    def update_value_statistics(self, value_net: Any, returns: th.Tensor) -> None:
        """PopArt's statistics take every rank's returns: ``(mean, var, count)`` per output of ``(N, G)``."""
        returns = returns.reshape(-1, len(value_net.mean))
        n, mean, var = self.global_moments(returns, None, "merging the value normalization's statistics")
        value_net.update_moments(mean, var, float(n.reshape(-1)[0]))

    @property
    def gradient_averaging(self) -> Callable[[list[th.nn.Parameter]], None] | None:
        """The process group's gradient averaging, called after every backward pass"""
        return self.group.average_gradients

    def progress_bars(self, callback: MaybeCallback, progress_bar: bool) -> list[Any]:
        """
        ``learn()``'s callbacks with SB3's progress bar counting every rank's steps, on rank 0 only: a
        ``progress_bar=True`` adds :class:`GlobalProgressBar` there; a ``ProgressBarCallback`` among the callbacks (as
        rl-zoo3 adds, and keeps to close) counts every rank's steps there.
        """
        callbacks = [] if callback is None else list(callback) if isinstance(callback, list) else [callback]
        if self.rank != 0:
            return callbacks
        for bar in callbacks:
            if type(bar) is ProgressBarCallback:
                bar._on_step = functools.partial(count_every_rank, bar, self.world_size)  # type: ignore[method-assign]
        return [*callbacks, GlobalProgressBar(self.world_size)] if progress_bar else callbacks


def local_sums(x: th.Tensor, valid: th.Tensor | None) -> th.Tensor:
    """
    :param x: ``(batch, ...)`` this rank's values
    :param valid: ``(batch,)`` which count, or None
    :return: ``(3, ...)`` float64, per trailing index: the count, the sum and the sum of squares of the valid values
        (summed over the ranks, :func:`moments` makes them statistics)
    """
    counted = (x if valid is None else x[valid]).double()
    n = th.full(counted.shape[1:], float(len(counted)), dtype=th.float64, device=x.device)
    return th.stack([n, counted.sum(0), (counted**2).sum(0)])


def moments(sums: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
    """:return: the count, the mean and the population variance of :func:`local_sums` summed over the ranks"""
    n = sums[0]
    mean = sums[1] / n.clamp(min=1)
    return n, mean, (sums[2] / n.clamp(min=1) - mean**2).clamp(min=0)


class GlobalProgressBar(ProgressBarCallback):
    """SB3's progress bar (``learn(progress_bar=True)``) of a data-parallel run: every rank's steps, shown on rank 0."""

    def __init__(self, world_size: int) -> None:
        super().__init__()
        self.world_size = world_size

    def _on_step(self) -> bool:
        return count_every_rank(self, self.world_size)


def count_every_rank(bar: ProgressBarCallback, world_size: int) -> bool:
    """A progress bar's step: every rank's envs stepped once."""
    bar.pbar.update(bar.training_env.num_envs * world_size)
    return True


def vec_normalize_stats(model: Any) -> list[tuple[str, RunningMeanStd]]:
    """The running statistics a training VecNormalize keeps (``obs_rms`` per Dict key, ``ret_rms``), by name."""
    vec = model.get_vec_normalize_env() if model.env is not None else None
    if vec is None:
        return []
    stats: list[tuple[str, RunningMeanStd]] = []
    if vec.norm_obs:
        obs_rms = vec.obs_rms
        stats += (
            sorted((f"obs_rms[{key}]", rms) for key, rms in obs_rms.items())
            if isinstance(obs_rms, dict)
            else [("obs_rms", obs_rms)]
        )
    if vec.norm_reward:
        stats.append(("ret_rms", vec.ret_rms))
    return stats


def setup_fingerprint(model: Any) -> dict[str, Any]:
    """What must agree across the ranks: the algorithm, the spaces, the options, the sizes, the parameter shapes."""
    options = {
        f.name: _comparable(getattr(model.options, f.name))
        for f in dataclasses.fields(model.options)
        if f.name != "distributed_timeout"
    }
    return {
        "algorithm": type(model).__name__,
        "policy": type(model.policy).__name__,
        "observation_space": repr(model.observation_space),
        "action_space": repr(model.action_space),
        "options": options,
        "n_steps": model.n_steps,
        "batch_size": model.batch_size,
        "n_epochs": model.n_epochs,
        "n_envs": model.n_envs,
        "parameters": [(name, tuple(p.shape)) for name, p in model.policy.named_parameters()],
    }


def _comparable(value: Any) -> Any:
    """An option's value as compared across ranks (a function by its qualified name, not its address)."""
    return getattr(value, "__qualname__", repr(value)) if callable(value) else value
