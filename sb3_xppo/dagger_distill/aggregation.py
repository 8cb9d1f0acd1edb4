"""
:class:`~sb3_xppo.dagger_distill.DaggerCallback`'s aggregation and fitting (:class:`Aggregation`): the states the
student visits join the aggregated dataset, and the student is fitted to the teacher's labels on it, inside the RL
minibatches of a loss-hook student or by its own gradient steps; :func:`pretrain` is the behaviour-cloning warm-up.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported
from sb3_contrib.common.recurrent.type_aliases import RNNStates
from stable_baselines3.common.utils import obs_as_tensor
from stable_baselines3.common.vec_env import VecEnv

from sb3_xppo.common.distributed import SINGLE_PROCESS, DataParallel, SingleProcess
from sb3_xppo.dagger_distill.actions import tree_to_action
from sb3_xppo.dagger_distill.dataset import AggregatedDataset
from sb3_xppo.dagger_distill.distiller import DaggerDistiller, DistillOutput
from sb3_xppo.dagger_distill.loop import optimizer_step
from sb3_xppo.dagger_distill.masks import actions_allowed
from sb3_xppo.dagger_distill.policy_adapter import student_optimizer
from sb3_xppo.dagger_distill.pytree import Tree, rows_finite, sample_action, tree_map, where_rows
from sb3_xppo.dagger_distill.teacher import StudentTeacher


class Aggregation:
    """
    The aggregated dataset of one student and the distillation loss fitted on it.

    :param pair: the student and its teacher
    :param distiller: their distiller (probed), with the callback's options (``batch_size``, ``gradient_steps``)
    :param dataset: the aggregated dataset
    """

    def __init__(self, pair: StudentTeacher, distiller: DaggerDistiller, dataset: AggregatedDataset) -> None:
        model = pair.model
        self.model = model
        self.pair = pair
        self.distiller = distiller
        self.dataset = dataset
        self.optimizer = student_optimizer(model)
        self.epochs: int = getattr(model, "n_epochs", 10)
        self.batch_size: int = distiller.options.batch_size or getattr(model, "batch_size", None) or 64
        self.pending = 0  # states added since the last round
        self.weight = 0.0  # the weight schedule's value
        self.pretrained = False  # the warm-up runs once per student
        self.projector_optimizer: th.optim.Optimizer | None = None
        #: a data-parallel student's ranks train one projector (its ``_data_parallel``; any other model: one process)
        self.learner: SingleProcess | DataParallel = getattr(model, "_data_parallel", SINGLE_PROCESS)
        projector = distiller.projector
        if isinstance(projector, th.nn.Module) and any(True for _ in projector.parameters()):
            # Its own optimizer: adding it to the student's would break loading the saved optimizer state
            self.projector_optimizer = th.optim.Adam(projector.parameters(), lr=self.optimizer.param_groups[0]["lr"])
            self.learner.take_rank_0s(projector, "taking rank 0's DAgger projector")

    def state(self) -> dict[str, Any]:
        """
        :return: what a resumable checkpoint keeps of the distillation (docs/guide/resume.md): the dataset, the states
            added since the last round, whether the warm-up ran, and a trained projector with its optimizer and the
            gradient of the last minibatch, which the next minibatch's hook steps on (:meth:`step_projector`)
        """
        projector = self.distiller.projector
        optimizer = self.projector_optimizer
        module = projector if isinstance(projector, th.nn.Module) else None
        return {
            "dataset": self.dataset.state(),
            "pending": self.pending,
            "pretrained": self.pretrained,
            "projector": None if module is None else as_numpy(dict(module.state_dict())),
            "projector_grads": None if module is None else [as_numpy(p.grad) for p in module.parameters()],
            "projector_optimizer": None if optimizer is None else as_numpy(optimizer_state(optimizer)),
        }

    def restore(self, state: dict[str, Any], like: dict[str, Tree]) -> None:
        """
        Put what :meth:`state` kept back.

        :param state: what :meth:`state` returned
        :param like: a batch of the dataset's fields (:meth:`~.dataset.AggregatedDataset.restore`)
        :raises ValueError: where the checkpoint's distillation trained a projector and this one has none
        """
        self.dataset.restore(state["dataset"], like)
        self.pending, self.pretrained = int(state["pending"]), bool(state["pretrained"])
        projector = self.distiller.projector
        if state["projector"] is not None:
            if not isinstance(projector, th.nn.Module):
                raise ValueError(
                    "the checkpoint's distillation trained a rep_align_projector: give the callback the run's options"
                )
            projector.load_state_dict(as_torch(state["projector"]))
            for parameter, grad in zip(projector.parameters(), state["projector_grads"], strict=True):
                parameter.grad = None if grad is None else as_torch(grad).to(parameter.device)
        if state["projector_optimizer"] is not None and self.projector_optimizer is not None:
            saved = as_torch(state["projector_optimizer"])
            self.projector_optimizer.load_state_dict({**saved, "state": {int(k): v for k, v in saved["state"].items()}})

    def add(self, masks: np.ndarray | None) -> None:
        """Store the state the student is about to act in (the model's ``_last_obs``), with ``masks``."""
        self.dataset.add(**self.pair.state(masks))
        self.pending += self.model.get_env().num_envs

    def distill_loss(self, batch_size: int) -> DistillOutput:
        """The distillation loss on a minibatch of the dataset, logged."""
        batch = tree_map(lambda x: x.to(self.model.device), self.dataset.sample(batch_size))
        states = batch["states"]
        out = self.distiller.compute(states, self.pair.teacher_input(states, batch.get("teacher_states")))
        with th.no_grad():
            agreement = self.distiller.agreement(out.student_out, out.labels, out.valid)
        logger = self.model.logger
        if th.isfinite(out.breakdown.loss):
            logger.record_mean("distill/loss", out.breakdown.loss.item())
        logger.record_mean("distill/agreement", agreement.item())
        if out.forbidden is not None:
            logger.record_mean("distill/forbidden_labels", out.forbidden.float().mean().item())
        return out

    def weighted_loss(self, batch_size: int) -> th.Tensor | None:
        """``weight * distill_loss`` on a minibatch of the dataset, or None (weight 0, no usable label)."""
        if self.weight == 0 or len(self.dataset) == 0:
            return None
        out = self.distill_loss(batch_size)
        if not th.isfinite(out.breakdown.loss):
            return None
        return self.weight * out.breakdown.loss

    def step_projector(self) -> None:
        """Step the projector's optimizer on the gradient the last minibatch gave it."""
        if self.projector_optimizer is not None:
            self.learner.step_shared(self.projector_optimizer)
            self.projector_optimizer.zero_grad()

    def round(self) -> None:
        """Own gradient steps on the states added since the last round, the learning rate scaled by the weight."""
        pending, self.pending = self.pending, 0
        if pending == 0 or self.weight == 0 or len(self.dataset) == 0:
            return
        steps = self.distiller.options.gradient_steps
        if steps is None:
            steps = math.ceil(pending * self.epochs / self.batch_size)
        self.fit(steps, self.weight)

    def fit(self, steps: int, lr_scale: float) -> None:
        """``steps`` gradient steps of the distillation loss on the student's optimizer, its learning rate scaled."""
        policy, optimizer = self.model.policy, self.optimizer
        lrs = [group["lr"] for group in optimizer.param_groups]
        for group in optimizer.param_groups:
            group["lr"] *= lr_scale
        # PPO's and A2C's gradient clipping; TRPO stores 0 (its actor steps are not gradient steps): no clipping
        max_grad_norm = getattr(self.model, "max_grad_norm", None) or None
        policy.set_training_mode(True)
        try:
            for _ in range(steps):
                out = self.distill_loss(self.batch_size)
                if not th.isfinite(out.breakdown.loss):
                    continue  # no usable label in this minibatch
                optimizer_step(optimizer, out.breakdown.loss, max_grad_norm)
                self.step_projector()
        finally:
            for group, lr in zip(optimizer.param_groups, lrs, strict=True):
                group["lr"] = lr
            policy.set_training_mode(False)


def pretrain(aggregation: Aggregation, steps: int, verbose: int = 0) -> None:
    """
    The behaviour-cloning warm-up (``pretrain_steps``, see :class:`~sb3_xppo.dagger_distill.DaggerCallback`): the
    teacher acts ``steps`` vector steps in the model's env, every state joins the dataset, one fit, then the env is reset.

    :param aggregation: the student's dataset and fitting
    :param steps: vector steps of the teacher
    :param verbose: verbosity level
    """
    pair = aggregation.pair
    model: Any = pair.model
    env: VecEnv = model.get_env()
    recurrent_states = getattr(model, "_last_lstm_states", None)
    pair.observe()
    pair.check_arrival(model._last_obs)
    for _ in range(steps):
        masks = get_action_masks(env) if pair.masked and is_masking_supported(env) else None
        aggregation.add(masks)
        obs = obs_as_tensor(model._last_obs, model.device)
        actions = _pretrain_actions(pair, obs, masks)
        if pair.recurrent:  # the LSTM state the student would carry to the next observation
            starts = th.as_tensor(model._last_episode_starts, dtype=th.float32, device=model.device)
            with th.no_grad():
                _, pi = model.policy.get_distribution(obs, model._last_lstm_states.pi, starts)
            model._last_lstm_states = RNNStates(pi, model._last_lstm_states.vf)
        new_obs, _, dones, _ = env.step(actions)
        model._last_obs, model._last_episode_starts = new_obs, dones
        pair.observe()
        pair.check_arrival(new_obs)
    # RL starts on fresh episodes, as learn() starts them
    model._last_obs = env.reset()
    model._last_episode_starts = np.ones((env.num_envs,), dtype=bool)
    if model._vec_normalize_env is not None:
        model._last_original_obs = model._vec_normalize_env.get_original_obs()
    if recurrent_states is not None:
        model._last_lstm_states = recurrent_states
    pair.observe()
    aggregation.pretrained = True
    states, aggregation.pending = aggregation.pending, 0
    gradient_steps = math.ceil(states * aggregation.epochs / aggregation.batch_size)
    aggregation.fit(gradient_steps, 1.0)
    model.logger.record("distill/pretrain_states", states)
    if verbose >= 1:
        print(f"DaggerCallback: pretrained on {states} states of the teacher's rollout ({gradient_steps} gradient steps)")


def _pretrain_actions(pair: StudentTeacher, obs: Tree, masks: np.ndarray | None) -> np.ndarray:
    """
    The teacher's best actions (env format, Box actions clipped) for the warm-up, the student's sampled action where
    the teacher's is not finite or ``masks`` forbid it.
    """
    space = pair.model.action_space
    with th.no_grad():
        actions = pair.teacher_actions(obs, masks)
        usable = rows_finite(actions, actions.shape[0])
        if masks is not None:
            usable &= actions_allowed(masks, actions, space)
        if not bool(usable.all()):
            student = sample_action(pair.student(pair.student_input(obs, masks)))
            student = tree_to_action(student, space).to(actions.dtype).reshape(actions.shape)
            actions = where_rows(usable, actions, student)
    actions_np = actions.cpu().numpy()
    if isinstance(space, spaces.Box):
        actions_np = np.clip(actions_np, space.low, space.high)
    return actions_np


def optimizer_state(optimizer: th.optim.Optimizer) -> dict[str, Any]:
    """:return: an optimizer's ``state_dict()`` with string keys for its per-parameter state (as a checkpoint keeps it)"""
    state = optimizer.state_dict()
    return {**state, "state": {str(k): v for k, v in state["state"].items()}}


def as_numpy(tree: Any) -> Any:
    """:return: ``tree`` (dicts, lists, tuples) with every tensor a numpy array on the CPU"""
    return tree_map(lambda x: x.detach().cpu().numpy() if isinstance(x, th.Tensor) else x, tree)


def as_torch(tree: Any) -> Any:
    """:return: ``tree`` with every numpy array a tensor (what :func:`as_numpy` took apart)"""
    return tree_map(lambda x: th.as_tensor(x.copy()) if isinstance(x, np.ndarray) else x, tree)
