"""
The DAgger loop of :class:`~sb3_xppo.dagger_distill.DaggerDistiller` (:class:`DaggerLoopMixin`): roll out the
student in an environment, label the visited states with the teacher, fit the aggregated dataset.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import torch as th
from torch import nn

from sb3_xppo.dagger_distill.checks import check_count
from sb3_xppo.dagger_distill.dataset import AggregatedDataset
from sb3_xppo.dagger_distill.objectives import LossBreakdown
from sb3_xppo.dagger_distill.options import DistillOptions
from sb3_xppo.dagger_distill.pytree import (
    Tree,
    batch_size_of,
    best_action,
    check_finite_states,
    rows_finite,
    sample_action,
    tree_leaves,
    tree_map,
    where_rows,
)


class DaggerLoopMixin:
    """
    :meth:`collect`, :meth:`train`, :meth:`step` and :meth:`pretrain` of
    :class:`~sb3_xppo.dagger_distill.DaggerDistiller`, on the attributes ``_init_loop`` sets (``env``, ``optimizer``,
    ``dataset``, ``batch_size``, ``beta``, ``max_grad_norm``, ``device``) and its loss (``compute``, ``agreement``).
    """

    # Set by DaggerDistiller
    student: Any
    teacher: Any
    teacher_state_fn: Any
    options: DistillOptions
    _store_labels: bool
    _obs: Tree
    _info: Any
    compute: Any
    agreement: Any
    _labels: Any
    _forbidden: Any
    projector: Any

    def _init_loop(
        self,
        env: Any,
        optimizer: th.optim.Optimizer | None,
        params: Iterable[nn.Parameter] | None,
        lr: float,
        max_grad_norm: float | None,
        device: th.device | str | None,
    ) -> None:
        """Set what the loop uses (its options, the constructor's keywords of the same names), after the projector exists."""
        self.optimizer = optimizer
        if params is not None:
            params = list(params)
            if isinstance(self.projector, nn.Module):
                params += list(self.projector.parameters())
            self.optimizer = th.optim.Adam(params, lr=lr)
        elif optimizer is not None and isinstance(self.projector, nn.Module):
            add_to_optimizer(optimizer, self.projector)
        self.env = env
        self.batch_size = self.options.batch_size or 64
        # a schedule is DaggerCallback's (its distiller has no env, and collect() needs one)
        self.beta = 0.0 if callable(self.options.beta) else float(self.options.beta)
        self.max_grad_norm = max_grad_norm
        self.device = th.device(device) if device is not None else _infer_device(self.optimizer, self.student)
        self.dataset = AggregatedDataset(self.options.buffer_size or 100_000)
        #: vector steps taken by :meth:`collect` so far (the ``step`` given to ``teacher_state_fn``/``label_transform``)
        self.num_steps = 0
        self._obs = None
        self._info = None
        self._numpy_env = False

    def collect(self, steps: int, sample: bool = True, teacher_acts: bool = False) -> dict[str, float]:
        """
        Roll out the student for ``steps`` vector steps (the teacher's label instead with probability ``beta``),
        label every visited state with the teacher and add it to the aggregated dataset.

        :param steps: vector steps (each adds ``num_envs`` states)
        :param sample: the student acts by a sample of its distribution (False: its best action, the mode/mean)
        :param teacher_acts: the teacher's label is executed in every state instead (the teacher's own rollout, as for
            behaviour cloning; ``beta`` is then 1): the student's action is taken only where the label is unusable (not
            finite, or forbidden by the student's action masks)
        :return: ``collected`` (states), ``dataset_size``, ``agreement`` (student's best action vs the label at
            collection), ``reward`` (mean reward per step), ``forbidden_labels`` (share of the collected states whose
            label the student's action masks forbid; 0 without masks)
        """
        if self.env is None:
            raise ValueError("collect() needs env= at construction")
        check_count("steps", steps)
        beta = 1.0 if teacher_acts else self.beta
        if self._obs is None:
            self._reset_env()
        collected, agreements, rewards, forbidden_count = 0, [], [], 0
        for _ in range(steps):
            states = self._to_tensor(self._obs)
            b = batch_size_of(states)
            check_finite_states(states, "student observation", lambda i: f"env {i} at step {self.num_steps}")
            with th.no_grad():
                teacher_states = (
                    states if self.teacher_state_fn is None else self.teacher_state_fn(states, self._info, self.num_steps)
                )
                labels = self._labels(self.teacher(teacher_states), states, self._info, self.num_steps)
                student_out = self.student(states)
                action = sample_action(student_out) if sample else best_action(student_out)
                valid = th.stack([rows_finite(x, b) for x in tree_leaves(labels)]).all(dim=0)
                forbidden = self._forbidden(states, labels, valid)
                if forbidden is not None:  # never executed (beta), nor counted in the agreement
                    valid = valid & ~forbidden
                    forbidden_count += int(forbidden.sum())
                if beta > 0:
                    take = (th.rand(b, device=valid.device) < beta) & valid
                    action = tree_map(lambda a, label, take=take: where_rows(take, label.to(a.dtype), a), action, labels)
                agreements.append(self.agreement(student_out, labels, valid))
            fields = dict(states=states)
            if self._store_labels:
                fields["labels"] = labels
            if self.teacher_state_fn is not None:
                fields["teacher_states"] = teacher_states
            self.dataset.add(**fields)
            rewards.append(self._step_env(action))
            self.num_steps += 1
            collected += b
        return dict(
            collected=float(collected),
            dataset_size=float(len(self.dataset)),
            agreement=th.stack(agreements).mean().item() if agreements else math.nan,
            reward=float(np.mean(rewards)) if rewards else math.nan,
            forbidden_labels=forbidden_count / collected if collected else math.nan,
        )

    def train(self, epochs: int = 1, batch_size: int | None = None, gradient_steps: int | None = None) -> dict[str, float]:
        """
        Fit the student to the aggregated dataset: ``epochs`` shuffled passes of minibatches, or ``gradient_steps``
        minibatches drawn uniformly (the cost then stays flat as the dataset grows). A minibatch without a usable
        label (NaN loss) is skipped.

        :param epochs: passes over the dataset
        :param batch_size: minibatch size (default: the constructor's)
        :param gradient_steps: if given, this many uniformly drawn minibatches instead of ``epochs`` passes
        :return: mean ``loss``, ``policy``, ``entropy``, ``alignment`` and ``agreement`` over the updates, the
            number of ``updates`` and of ``skipped`` minibatches
        """
        if self.optimizer is None:
            raise ValueError("train() needs optimizer= or params= at construction")
        if len(self.dataset) == 0:
            raise ValueError("the dataset is empty: collect() states first")
        batch_size = batch_size or self.batch_size
        if gradient_steps is None:
            batches = [
                order[i : i + batch_size]
                for order in (th.randperm(len(self.dataset)) for _ in range(epochs))
                for i in range(0, len(order), batch_size)
            ]
        else:
            batches = [th.randint(len(self.dataset), (batch_size,)) for _ in range(gradient_steps)]
        rows: list[th.Tensor] = []
        skipped = 0
        for index in batches:
            batch = self.dataset.get(index)
            # The teacher re-evaluated on the minibatch; labels computed anew where none were stored (kl_loss, mse_loss)
            out = self.compute(batch["states"], batch.get("teacher_states"), batch.get("labels"))
            if not th.isfinite(out.breakdown.loss):
                skipped += 1
                continue
            optimizer_step(self.optimizer, out.breakdown.loss, self.max_grad_norm)
            with th.no_grad():
                agreement = self.agreement(out.student_out, out.labels, out.valid)
            rows.append(th.stack([*(x.detach() for x in out.breakdown), agreement]))
        means = th.stack(rows).mean(dim=0).tolist() if rows else [math.nan] * 5
        stats = dict(zip((*LossBreakdown._fields, "agreement"), means, strict=True))
        return dict(stats, updates=float(len(rows)), skipped=float(skipped))

    def step(self, collect_steps: int, epochs: int = 1, gradient_steps: int | None = None) -> dict[str, float]:
        """
        One DAgger iteration: :meth:`collect` then :meth:`train`.

        :param collect_steps: vector steps to collect
        :param epochs: passes over the aggregated dataset
        :param gradient_steps: uniformly drawn minibatches instead of ``epochs`` passes (see :meth:`train`)
        :return: the stats of both (the training ``agreement`` under ``train_agreement``)
        """
        return _merge_stats(self.collect(collect_steps), self.train(epochs, gradient_steps=gradient_steps))

    def pretrain(self, steps: int, epochs: int | None = None) -> dict[str, float]:
        """
        Behaviour-cloning warm-up before DAgger: the teacher acts for ``steps`` vector steps
        (``collect(steps, teacher_acts=True)``; the student's actions are not executed), then one fit of the
        aggregated dataset (:meth:`train`). DAgger's first iteration with the expert's policy (Ross et al. 2011,
        https://arxiv.org/abs/1011.0686, ``beta_1 = 1``); :meth:`step` continues from the env's current state.

        :param steps: vector steps of the teacher's rollout (each adds ``num_envs`` states)
        :param epochs: passes over the dataset (None: :meth:`train`'s default, one pass)
        :return: the stats of :meth:`step` (``agreement``: the student's best action against the label before the
            fit; ``train_agreement``: during it)
        """
        check_count("steps", steps)
        if epochs is not None:
            check_count("epochs", epochs)
        collected = self.collect(steps, teacher_acts=True)
        return _merge_stats(collected, self.train() if epochs is None else self.train(epochs))

    # ----------------------------------------------------------------------------------------------------------------
    # The environment
    # ----------------------------------------------------------------------------------------------------------------

    def _to_tensor(self, obs: Tree) -> Tree:
        def convert(x: Any) -> th.Tensor:
            if isinstance(x, th.Tensor):
                return x.to(self.device)
            self._numpy_env = True
            tensor = th.as_tensor(np.asarray(x), device=self.device)
            return tensor.to(th.get_default_dtype()) if tensor.is_floating_point() else tensor

        return tree_map(convert, obs)

    def _reset_env(self) -> None:
        out = self.env.reset()
        self._obs, self._info = out if isinstance(out, tuple) and len(out) == 2 else (out, None)

    def _step_env(self, action: Tree) -> float:
        if self._numpy_env:
            action = tree_map(lambda a: a.cpu().numpy(), action)
        out = self.env.step(action)
        if len(out) == 5:  # gymnasium's vector API
            self._obs, reward, _, _, self._info = out
        elif len(out) == 4:  # (obs, reward, done, info): Stable-Baselines3's VecEnv API
            self._obs, reward, _, self._info = out
        else:
            raise ValueError(f"env.step() must return (obs, reward, terminated, truncated, info), got {len(out)} values")
        reward = reward.float() if isinstance(reward, th.Tensor) else th.as_tensor(np.asarray(reward, dtype=np.float32))
        return reward.mean().item()


def _merge_stats(collected: dict[str, float], trained: dict[str, float]) -> dict[str, float]:
    """The stats of ``collect`` and of ``train``, the latter's agreement renamed ``train_agreement``."""
    trained = dict(trained)
    trained["train_agreement"] = trained.pop("agreement")
    return {**collected, **trained}


def optimizer_step(optimizer: th.optim.Optimizer, loss: th.Tensor, max_grad_norm: float | None) -> None:
    """
    One gradient step of ``loss`` on ``optimizer``.

    :param optimizer: the student's optimizer
    :param loss: the loss to descend
    :param max_grad_norm: clip the gradient norm of the optimizer's parameters to this (None: no clipping)
    """
    optimizer.zero_grad()
    loss.backward()
    if max_grad_norm is not None:
        nn.utils.clip_grad_norm_([p for group in optimizer.param_groups for p in group["params"]], max_grad_norm)
    optimizer.step()


def add_to_optimizer(optimizer: th.optim.Optimizer, module: nn.Module) -> None:
    """
    Add the module's parameters the optimizer does not hold yet (a projector trained with the student).

    :param optimizer: the student's optimizer
    :param module: the module whose parameters it should train
    """
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    new = [p for p in module.parameters() if id(p) not in held]
    if new:
        optimizer.add_param_group({"params": new})


def _infer_device(optimizer: th.optim.Optimizer | None, student: Any) -> th.device:
    if optimizer is not None:
        for group in optimizer.param_groups:
            for p in group["params"]:
                return p.device
    module = getattr(student, "module", student)
    if isinstance(module, nn.Module):
        for p in module.parameters():
            return p.device
    return th.device("cpu")
