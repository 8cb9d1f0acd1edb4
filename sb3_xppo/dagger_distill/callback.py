"""DaggerCallback: distill a teacher into the SB3 model being trained, during ``learn()``."""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import RolloutBufferSamples, Schedule
from stable_baselines3.common.utils import FloatSchedule, obs_as_tensor
from torch import nn
from torch.distributions import Categorical

from sb3_xppo.dagger_distill.adapters import (
    ObsKeys,
    PolicyAdapter,
    action_clipper,
    load_sb3_model,
    same_action_space,
    select_obs,
    select_space,
    student_optimizer,
    teacher_obs_keys,
    tree_to_action,
)
from sb3_xppo.dagger_distill.dataset import AggregatedDataset
from sb3_xppo.dagger_distill.distiller import DaggerDistiller, DistillOutput, _check_number, _resolve_layer
from sb3_xppo.dagger_distill.objectives import Objective, nll_loss
from sb3_xppo.dagger_distill.pytree import Tree, best_action, tree_map


class DaggerCallback(BaseCallback):
    """
    Distill a teacher into the SB3 model being trained (the student), during ``learn()``: DAgger
    (Ross et al. 2011, https://arxiv.org/abs/1011.0686) on the states the student visits.

    Every state the student acts in joins a bounded aggregated dataset; the teacher labels it (noise-free: its
    mode/mean) and the student is fitted to those labels with ``loss_fn``, weighted by ``weight``:

    - a student with a loss hook (:class:`~sb3_xppo.XPPO`): the distillation loss of a dataset minibatch joins
      each RL minibatch, ``rl_coef * rl_loss + weight * distill_loss``; ``rl_coef=0`` is pure DAgger;
    - any other student (PPO, A2C, TRPO, MaskablePPO, SAC/TD3 actors): the callback takes its own gradient steps on
      the policy's (actor's) optimizer between RL updates, before each rollout and at the end of training, so every
      log-probability PPO stores is the current policy's; ``weight`` scales their learning rate (the exact analogue
      of a loss weight under Adam and RMSprop).

    ``beta`` executes the teacher's action instead of the student's with that probability (DAgger's mixture
    policy). It wraps, during ``learn()`` only, the one method that picks the rollout's actions: for on-policy
    students ``policy.forward``, which then swaps in the teacher's action and returns the student's own
    log-probability of it (``evaluate_actions``), so PPO's ratios stay valid; for off-policy students
    ``_sample_action``.

    The teacher reads the observations the student's policy receives (after ``VecNormalize``); a teacher trained on
    other keys of a Dict observation (e.g. privileged state) reads its own keys, or ``teacher_obs_keys``.

    Logs ``distill/loss``, ``distill/agreement`` (share of states where the student's best action matches the
    teacher's; continuous actions within 5% of the action range), ``distill/weight``, ``distill/beta`` and
    ``distill/dataset_size``.

    :param teacher: an SB3 model, the path to an SB3 ``.zip``, or a callable ``obs -> Distribution`` (or pytree,
        as :class:`~sb3_xppo.dagger_distill.adapters.PolicyAdapter` builds them for the student's action space)
        receiving the observation as tensors on the student's device
    :param loss_fn: :func:`~sb3_xppo.dagger_distill.nll_loss` (default), ``kl_loss``, ``mse_loss`` or your own
    :param weight: weight of the distillation loss: a float or a schedule of ``progress_remaining`` (1 -> 0),
        e.g. ``lambda p: p`` to decay to pure RL
    :param rl_coef: weight of the RL loss (loss-hook students only; 0 is pure DAgger)
    :param beta: probability of executing the teacher's action, a float in [0, 1] or a schedule
    :param buffer_size: the aggregated dataset keeps at most this many states (oldest dropped first)
    :param batch_size: distillation minibatch size (default: the model's ``batch_size``, else 64; loss-hook
        students use the RL minibatch's size)
    :param gradient_steps: distillation steps per round (default: as many minibatches as ``n_epochs`` passes over
        the states collected since the last round would take; the model's ``n_epochs``, else 10)
    :param teacher_obs_keys: keys of a Dict observation the teacher reads (default: its own observation keys)
    :param teacher_algo: algorithm of a teacher checkpoint (default: inferred)
    :param teacher_sample: label with a sample of the teacher instead of its mode/mean
    :param entropy_weight: entropy bonus of the distillation loss
    :param student_layer: representation alignment (REPA): a submodule name of the student's policy, or a module
    :param teacher_layer: the teacher's layer (a name in the teacher's policy, or a module)
    :param rep_align_weight: weight of the alignment loss
    :param rep_align_projector: None (identity), True (a linear map trained with the student) or a module
    :param verbose: verbosity level
    """

    # Set by _init_callback, when the callback meets its model (the student)
    model: Any  # any SB3 algorithm: XPPO's loss hook and off-policy methods are looked up on it
    _student: PolicyAdapter
    _teacher: Any
    _optimizer: th.optim.Optimizer
    _off_policy: bool
    _uses_hook: bool
    _epochs: int
    _batch_size: int

    def __init__(
        self,
        teacher: BaseAlgorithm | BasePolicy | str | os.PathLike | Any,
        loss_fn: Objective = nll_loss,
        weight: float | Schedule = 1.0,
        rl_coef: float = 1.0,
        beta: float | Schedule = 0.0,
        buffer_size: int = 50_000,
        batch_size: int | None = None,
        gradient_steps: int | None = None,
        teacher_obs_keys: ObsKeys = None,
        teacher_algo: str | type[BaseAlgorithm] | None = None,
        teacher_sample: bool = False,
        entropy_weight: float = 0.0,
        student_layer: str | nn.Module | None = None,
        teacher_layer: str | nn.Module | None = None,
        rep_align_weight: float = 1.0,
        rep_align_projector: bool | nn.Module | None = None,
        verbose: int = 0,
    ) -> None:
        super().__init__(verbose)
        if not callable(loss_fn):
            raise TypeError(f"loss_fn must be a callable, e.g. nll_loss, kl_loss or mse_loss, got {loss_fn!r}")
        schedules: dict[str, Any] = dict(weight=weight, beta=beta)
        for name, schedule in schedules.items():
            if not callable(schedule):
                _check_number(name, schedule, low=0.0, high=1.0 if name == "beta" else None)
        _check_number("rl_coef", rl_coef, low=0.0)
        sizes: dict[str, Any] = dict(buffer_size=buffer_size, batch_size=batch_size, gradient_steps=gradient_steps)
        for name, size in sizes.items():
            if size is not None and (not isinstance(size, int) or size < 1):
                raise ValueError(f"{name} must be {'None or ' if name != 'buffer_size' else ''}an int >= 1, got {size!r}")

        self.teacher_policy: BasePolicy | None = None
        self.teacher_fn: Any = None
        if isinstance(teacher, (str, os.PathLike)):
            teacher = load_sb3_model(teacher, teacher_algo, device="cpu")
        if isinstance(teacher, BaseAlgorithm):
            teacher = teacher.policy
        if isinstance(teacher, BasePolicy):
            self.teacher_policy = teacher
        elif callable(teacher):
            self.teacher_fn = teacher
        else:
            raise TypeError(
                f"teacher must be an SB3 model, a path to an SB3 .zip or a callable obs -> Distribution, got {teacher!r}"
            )
        # A wrong teacher layer name fails now; the student's is checked when the callback meets its model
        teacher_module = self.teacher_policy if self.teacher_policy is not None else self.teacher_fn
        self._teacher_layer = _resolve_layer(teacher_module, teacher_layer, "teacher")
        if (student_layer is None) != (teacher_layer is None):
            raise ValueError("representation alignment needs both student_layer and teacher_layer (or neither)")

        self.loss_fn = loss_fn
        self.weight = FloatSchedule(weight)
        self.beta = FloatSchedule(beta)
        self.rl_coef = float(rl_coef)
        self.batch_size = batch_size
        self.gradient_steps = gradient_steps
        self.teacher_obs_keys = teacher_obs_keys
        self.teacher_sample = teacher_sample
        self.entropy_weight = entropy_weight
        self.student_layer = student_layer
        self.rep_align_weight = rep_align_weight
        self.rep_align_projector = rep_align_projector
        self.dataset = AggregatedDataset(buffer_size)
        self.distiller: DaggerDistiller | None = None
        self._pending = 0  # states added since the last distillation round
        self._weight_now = 0.0
        self._beta_now = 0.0
        self._hook_handle: Any = None
        self._projector_optimizer: th.optim.Optimizer | None = None
        self._wrapped: list[tuple[Any, str]] = []

    # ----------------------------------------------------------------------------------------------------------------
    # Setup: checks that fail before any step
    # ----------------------------------------------------------------------------------------------------------------

    def _init_callback(self) -> None:
        model: Any = self.model
        policy = model.policy
        if self.distiller is not None and self._student.module is policy:
            return  # a further learn() call on the same model: keep the dataset, distiller and projector
        self._off_policy = isinstance(model, OffPolicyAlgorithm)
        if self._off_policy and not hasattr(policy, "actor"):
            raise ValueError(
                f"the student must be PPO, A2C, XPPO, TRPO, MaskablePPO, SAC or TD3; {type(model).__name__} has no actor"
            )
        if not self._off_policy and not hasattr(policy, "get_distribution"):
            raise ValueError(f"the student's policy {type(policy).__name__} has no action distribution (get_distribution)")
        self._uses_hook = hasattr(model, "register_loss_hook")
        if self.rl_coef != 1.0 and not self._uses_hook:
            raise ValueError(
                f"rl_coef={self.rl_coef} needs a student with a loss hook (sb3_xppo.XPPO); {type(model).__name__} "
                "trains on its own RL loss, so only rl_coef=1 applies (or distill with python -m sb3_xppo.dagger_distill)"
            )
        space = model.action_space
        if self.teacher_policy is not None:
            if not same_action_space(self.teacher_policy.action_space, space):
                raise ValueError(f"the teacher acts in {self.teacher_policy.action_space} but the student in {space}")
            keys = teacher_obs_keys(model.observation_space, self.teacher_policy.observation_space, self.teacher_obs_keys)
            self.teacher_policy.to(model.device)
            self.teacher_policy.set_training_mode(False)
            teacher: Any = PolicyAdapter(self.teacher_policy, keys)
        else:
            keys = self.teacher_obs_keys
            select_space(model.observation_space, keys)  # a missing key fails now
            fn = self.teacher_fn
            teacher = fn if keys is None else (lambda obs: fn(select_obs(obs, keys)))
        self._student = PolicyAdapter(policy)
        self._teacher = teacher
        self._optimizer = student_optimizer(model)
        self._epochs = getattr(model, "n_epochs", 10)
        self._batch_size = self.batch_size or getattr(model, "batch_size", None) or 64
        atol: float | th.Tensor = 0.1
        if isinstance(space, spaces.Box):
            span = th.as_tensor(space.high - space.low, dtype=th.float32, device=model.device)
            atol = th.where(th.isfinite(span), 0.05 * span, th.full_like(span, 0.1))
        self.distiller = DaggerDistiller(
            self._student,
            self._teacher,
            loss_fn=self.loss_fn,
            teacher_sample=self.teacher_sample,
            entropy_weight=self.entropy_weight,
            student_layer=_resolve_layer(policy, self.student_layer, "student"),
            teacher_layer=self._teacher_layer,
            rep_align_weight=self.rep_align_weight,
            rep_align_projector=self.rep_align_projector,
            label_transform=action_clipper(space, model.device),
            agreement_atol=atol,
            device=model.device,
        )
        self._probe()

    def _probe(self) -> None:
        """Run the loss once on two sampled observations: a teacher that does not fit the student fails here."""
        assert self.distiller is not None
        space = self.model.observation_space
        obs = obs_as_tensor(_stack([space.sample(), space.sample()], space), self.model.device)
        with th.no_grad():
            student_out = self._student(obs)
            teacher_out = self._teacher(obs)
            try:
                tree_map(_check_heads, student_out, teacher_out)
            except ValueError as error:
                raise ValueError(
                    f"the teacher's actions do not fit the student's action space {self.model.action_space}: {error}"
                ) from None
            try:
                self.distiller.compute(obs)
            except NotImplementedError as error:
                raise ValueError(
                    f"loss_fn cannot compare these teacher and student distributions ({error}); nll_loss and mse_loss "
                    "work across families, kl_loss needs the same family"
                ) from None
        projector = self.distiller.projector
        if isinstance(projector, nn.Module) and any(True for _ in projector.parameters()):
            # Its own optimizer: adding it to the student's would break loading the saved optimizer state
            lr = self._optimizer.param_groups[0]["lr"]
            self._projector_optimizer = th.optim.Adam(projector.parameters(), lr=lr)

    # ----------------------------------------------------------------------------------------------------------------
    # During learn()
    # ----------------------------------------------------------------------------------------------------------------

    def _on_training_start(self) -> None:
        self._update_schedules()
        if self._uses_hook:
            self._hook_handle = self.model.register_loss_hook(self._loss_hook)
        if self._off_policy:
            self._wrap(self.model, "_sample_action", self._sampling_with_teacher(self.model._sample_action))
        else:
            self._wrap(self.model.policy, "forward", self._forward_with_teacher(self.model.policy.forward))

    def _on_step(self) -> bool:
        # The observation the student just acted on (SB3 updates _last_obs after the callback)
        obs = obs_as_tensor(self.model._last_obs, th.device("cpu"))
        self.dataset.add(states=obs)
        self._pending += self.training_env.num_envs
        return True

    def _on_rollout_start(self) -> None:
        self._update_schedules()
        if not self._uses_hook:
            self._distill_round()

    def _on_training_end(self) -> None:
        if not self._uses_hook:
            self._distill_round()
        if self._hook_handle is not None:
            self._hook_handle.remove()
            self._hook_handle = None
        for owner, name in self._wrapped:
            # The wrapper is an instance attribute shadowing the class's method: deleting it restores the method
            owner.__dict__.pop(name, None)
        self._wrapped = []

    def _update_schedules(self) -> None:
        progress = self.model._current_progress_remaining
        self._weight_now = self.weight(progress)
        self._beta_now = self.beta(progress)
        if self._weight_now < 0 or not 0 <= self._beta_now <= 1:
            raise ValueError(
                f"the weight schedule must stay >= 0 and beta in [0, 1]; got {self._weight_now}, {self._beta_now}"
            )
        self.logger.record("distill/weight", self._weight_now)
        self.logger.record("distill/beta", self._beta_now)
        self.logger.record("distill/dataset_size", len(self.dataset))

    def _distill_round(self) -> None:
        """Own gradient steps on the student's optimizer, the learning rate scaled by the weight."""
        pending, self._pending = self._pending, 0
        if pending == 0 or self._weight_now == 0 or len(self.dataset) == 0:
            return
        steps = self.gradient_steps
        if steps is None:
            steps = math.ceil(pending * self._epochs / self._batch_size)
        policy, optimizer = self.model.policy, self._optimizer
        lrs = [group["lr"] for group in optimizer.param_groups]
        for group in optimizer.param_groups:
            group["lr"] *= self._weight_now
        # PPO's and A2C's gradient clipping; TRPO stores 0 (its actor steps are not gradient steps): no clipping
        max_grad_norm = getattr(self.model, "max_grad_norm", None) or None
        policy.set_training_mode(True)
        try:
            for _ in range(steps):
                out = self._distill_loss(self._batch_size)
                if not th.isfinite(out.breakdown.loss):
                    continue  # no usable label in this minibatch
                optimizer.zero_grad()
                out.breakdown.loss.backward()
                if max_grad_norm is not None:
                    params = [p for group in optimizer.param_groups for p in group["params"]]
                    th.nn.utils.clip_grad_norm_(params, max_grad_norm)
                optimizer.step()
                self._step_projector()
        finally:
            for group, lr in zip(optimizer.param_groups, lrs, strict=True):
                group["lr"] = lr
            policy.set_training_mode(False)

    def _loss_hook(self, model: BaseAlgorithm, rollout_data: RolloutBufferSamples, loss: th.Tensor) -> th.Tensor:
        """XPPO's loss hook: ``rl_coef * rl_loss + weight * distill_loss`` on a minibatch of the aggregated dataset."""
        # The projector's gradient of the previous minibatch is complete now (XPPO stepped its own optimizer)
        self._step_projector()
        rl_loss = loss if self.rl_coef == 1.0 else self.rl_coef * loss
        if self._weight_now == 0 or len(self.dataset) == 0:
            return rl_loss
        out = self._distill_loss(len(rollout_data.advantages))
        if not th.isfinite(out.breakdown.loss):
            return rl_loss
        return rl_loss + self._weight_now * out.breakdown.loss

    def _distill_loss(self, batch_size: int) -> DistillOutput:
        assert self.distiller is not None
        states = tree_map(lambda x: x.to(self.model.device), self.dataset.sample(batch_size)["states"])
        out = self.distiller.compute(states)
        with th.no_grad():
            agreement = self.distiller.agreement(out.student_out, out.labels, out.valid)
        if th.isfinite(out.breakdown.loss):
            self.logger.record_mean("distill/loss", out.breakdown.loss.item())
        self.logger.record_mean("distill/agreement", agreement.item())
        return out

    def _step_projector(self) -> None:
        if self._projector_optimizer is not None:
            self._projector_optimizer.step()
            self._projector_optimizer.zero_grad()

    # ----------------------------------------------------------------------------------------------------------------
    # beta: executing the teacher's action
    # ----------------------------------------------------------------------------------------------------------------

    def _teacher_actions(self, obs: Tree) -> th.Tensor:
        """The teacher's (clipped) best action on ``obs``, in the env's action format."""
        assert self.distiller is not None
        actions = best_action(self._teacher(obs))
        if self.distiller.label_transform is not None:  # clipped to the Box bounds
            actions = self.distiller.label_transform(obs, actions, None, self.num_timesteps)
        return tree_to_action(actions, self.model.action_space)

    def _forward_with_teacher(self, forward: Any) -> Any:
        policy = self.model.policy

        def forward_with_teacher(obs: Tree, *args: Any, **kwargs: Any) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
            actions, values, log_prob = forward(obs, *args, **kwargs)
            if self._beta_now <= 0:
                return actions, values, log_prob
            take = th.rand(actions.shape[0], device=actions.device) < self._beta_now
            if not take.any():
                return actions, values, log_prob
            teacher = self._teacher_actions(obs).to(actions.device, actions.dtype).reshape(actions.shape)
            if policy.squash_output:  # gSDE with squashing acts in [-1, 1]
                low = th.as_tensor(self.model.action_space.low, device=actions.device)
                high = th.as_tensor(self.model.action_space.high, device=actions.device)
                teacher = 2.0 * (teacher - low) / (high - low) - 1.0
            masks = kwargs.get("action_masks")
            if masks is not None:  # MaskablePPO: a teacher's action the mask forbids is not executed
                take &= _allowed(masks, teacher, self.model.action_space)
            actions = th.where(take.reshape(-1, *([1] * (actions.ndim - 1))), teacher, actions)
            # The student's own log-probability of the executed actions: PPO's ratios stay valid
            evaluated = (
                policy.evaluate_actions(obs, actions) if masks is None else policy.evaluate_actions(obs, actions, masks)
            )
            return actions, values, evaluated[1]

        return forward_with_teacher

    def _sampling_with_teacher(self, sample_action: Any) -> Any:
        model = self.model

        def sample_with_teacher(*args: Any, **kwargs: Any) -> tuple[np.ndarray, np.ndarray]:
            action, buffer_action = sample_action(*args, **kwargs)
            take = np.random.rand(len(action)) < self._beta_now
            if not take.any():
                return action, buffer_action
            with th.no_grad():
                obs = obs_as_tensor(model._last_obs, model.device)
                teacher = self._teacher_actions(obs).cpu().numpy().reshape(action.shape)
            action, buffer_action = action.copy(), buffer_action.copy()
            action[take] = teacher[take]
            # The replay buffer stores Box actions scaled to [-1, 1]
            buffer_action[take] = (
                model.policy.scale_action(teacher[take]) if isinstance(model.action_space, spaces.Box) else teacher[take]
            )
            return action, buffer_action

        return sample_with_teacher

    def _wrap(self, owner: Any, name: str, wrapper: Any) -> None:
        setattr(owner, name, wrapper)
        self._wrapped.append((owner, name))


def _check_heads(student: Any, teacher: Any) -> None:
    """One head of the student against the teacher's: same shapes (and number of classes)."""
    if isinstance(student, th.Tensor) or isinstance(teacher, th.Tensor):
        s, t = best_action(student), best_action(teacher)
        if s.shape != t.shape:
            raise ValueError(f"actions of shape {tuple(t.shape)} where the student's are {tuple(s.shape)}")
        return
    if student.batch_shape != teacher.batch_shape or student.event_shape != teacher.event_shape:
        raise ValueError(
            f"a head of batch/event shape {tuple(teacher.batch_shape)}/{tuple(teacher.event_shape)} where the student's "
            f"is {tuple(student.batch_shape)}/{tuple(student.event_shape)}"
        )
    if isinstance(student, Categorical) and isinstance(teacher, Categorical) and student.logits.shape != teacher.logits.shape:
        raise ValueError(f"{teacher.logits.shape[-1]} classes where the student has {student.logits.shape[-1]}")


def _allowed(masks: Any, actions: th.Tensor, space: spaces.Space) -> th.Tensor:
    """``(n)`` bool: whether MaskablePPO's action masks (``(n, sum of the heads' sizes)``) allow each env's action."""
    n = actions.shape[0]
    masks = th.as_tensor(masks, device=actions.device).reshape(n, -1).bool()
    index = actions.long().reshape(n, -1)
    if isinstance(space, spaces.Discrete):
        index = index - int(space.start)
    elif isinstance(space, spaces.MultiDiscrete):
        sizes = th.as_tensor(space.nvec.reshape(-1), device=actions.device)
        index = index + th.cumsum(sizes, 0) - sizes  # each head's block of the mask
    elif isinstance(space, spaces.MultiBinary):
        index = index + 2 * th.arange(index.shape[1], device=actions.device)  # two entries (0, 1) per bit
    return masks.gather(1, index).all(dim=-1)


def _stack(samples: list[Any], space: spaces.Space) -> Any:
    """A batch of ``space.sample()`` observations, as a VecEnv returns them."""
    if isinstance(space, spaces.Dict):
        return {k: _stack([s[k] for s in samples], space.spaces[k]) for k in space.spaces}
    return np.stack([np.asarray(s) for s in samples])
