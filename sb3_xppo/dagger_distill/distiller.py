"""DaggerDistiller: distill any teacher policy into any student policy, with or without an environment."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple

import torch as th
from torch import nn
from torch.distributions import Distribution

from sb3_xppo.dagger_distill.checks import check_callable, check_number, resolve_layer
from sb3_xppo.dagger_distill.loop import DaggerLoopMixin, add_to_optimizer
from sb3_xppo.dagger_distill.objectives import LossBreakdown, reads_label
from sb3_xppo.dagger_distill.options import DISTILLER, DistillOptions, reader_signature
from sb3_xppo.dagger_distill.policy_adapter import is_sb3_policy_like, policy_adapter
from sb3_xppo.dagger_distill.pytree import (
    Tree,
    batch_size_of,
    best_action,
    check_finite_states,
    distribution_tensors,
    index_distribution,
    is_discrete,
    rows_finite,
    sample_action,
    tree_index,
    tree_leaves,
    tree_map,
)
from sb3_xppo.functional.masked import masked_mean

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from sb3_xppo.dagger_distill.options import DistillerKeywords

#: ``state -> Distribution`` or a pytree of distributions
PolicyFn = Callable[[Tree], Tree]


class DistillOutput(NamedTuple):
    """What :meth:`DaggerDistiller.compute` returns."""

    #: the loss and its parts (NaN when no state has a usable label)
    breakdown: LossBreakdown
    #: the student's output on all the states (with gradients)
    student_out: Tree
    #: the teacher's labels, one pytree of tensors with the batch first
    labels: Tree
    #: ``(b)`` bool, the states whose label (and teacher output) is finite and allowed, the ones the loss counts
    valid: th.Tensor
    #: ``(b)`` bool, the states whose finite label the student's action masks forbid (None: the student has no masks)
    forbidden: th.Tensor | None = None


class DaggerDistiller(DaggerLoopMixin):
    """
    Distill a teacher policy into a student policy: DAgger (Ross et al. 2011, https://arxiv.org/abs/1011.0686)
    when given an environment, and a plain differentiable loss without one.

    Both policies are callables ``state -> Distribution``, or ``state -> pytree`` (dict / list / tuple, nested) of
    distributions for composite action spaces; the loss is summed over the heads. A Stable-Baselines3 model,
    policy or path to a saved ``.zip`` is accepted too (see :mod:`sb3_xppo.dagger_distill.policy_adapter`).

    Env-free: ``loss, student_out = distiller(states)``. The teacher runs under ``no_grad``; only the student
    receives gradients. With ``env=`` and ``optimizer=`` (or ``params=``), :meth:`collect` rolls out the student and
    labels the visited states with the teacher, :meth:`train` fits the aggregated dataset, :meth:`step` does both;
    :meth:`pretrain` first rolls out the teacher itself (``collect(steps, teacher_acts=True)``) and fits once, a
    behaviour-cloning warm-up.

    What the dataset keeps: the student's states, the teacher's own states when ``teacher_state_fn`` makes them, and
    the teacher's labels when the objective reads them (``nll_loss`` and custom objectives). With ``kl_loss`` and
    ``mse_loss`` no label is stored: :meth:`train` re-evaluates the teacher on its stored inputs, one minibatch at a
    time under ``no_grad``, so the teacher compared is the one at fit time (keep it in eval mode). The teacher's
    distribution is always the fit-time one; only ``nll_loss``'s labels are the collection-time ones (a sampled label
    with ``teacher_sample=True``, or one ``label_transform`` made from the step's ``info``).

    States whose label (or teacher output) is not finite are masked out: their teacher outputs and labels are
    replaced by a usable state's before the loss is computed and they get weight 0, so a NaN never reaches a gradient. A batch
    without a usable label gives a NaN loss, which :meth:`train` skips. A non-finite student *state* is an error
    (``ValueError`` naming the env and step, or the batch row, and the Dict key), raised before any update uses it.

    A student with action masks (a callable with an ``allowed_labels(states, labels) -> (b) bool`` method, as
    :class:`~sb3_xppo.dagger_distill.policy_adapter.PolicyAdapter` has for MaskablePPO) drops the states whose label its mask
    forbids in the same way: the masked student gives that action probability 0, so no loss could fit it. They are
    counted (``DistillOutput.forbidden``, ``forbidden_labels`` in :meth:`collect`'s stats), and :meth:`collect` never
    executes such a label (``beta``): the student's own action is taken. Its optional
    ``restrict_to_allowed(states, teacher_out)`` restricts the teacher's distribution to the allowed actions before
    ``kl_loss``/``mse_loss`` compare them.

    :param student: the policy to train, ``state -> Distribution`` (or pytree)
    :param teacher: the expert, ``teacher_state -> Distribution`` (or pytree); never receives gradients
    :param options: the distillation's options (:class:`~sb3_xppo.dagger_distill.DistillOptions`: ``loss_fn``,
        ``teacher_sample``, ``entropy_weight``, representation alignment, ``beta``, ``batch_size``, ``buffer_size``);
        each may also be given as a plain keyword, which overrides the object's field
    :param teacher_state_fn: ``teacher_state_fn(state, info, step) -> teacher_state`` for a teacher that sees a
        different state (e.g. privileged information from ``info``); ``info`` is None in the env-free call
    :param label_transform: ``label_transform(state, action, info, step) -> label`` for a teacher that acts
        differently; it maps the teacher's action to the student's label
    :param env: vectorised environment for the DAgger loop: ``reset() -> (obs, info)`` and
        ``step(action) -> (obs, reward, terminated, truncated, info)`` with a batch of envs (gymnasium's vector API;
        torch or numpy)
    :param optimizer: optimizer of the student's parameters, used by :meth:`train`
    :param params: the student's parameters, when no ``optimizer`` is given (Adam with ``lr``)
    :param lr: learning rate of the optimizer built from ``params``
    :param max_grad_norm: clip the gradient norm in :meth:`train` (None: no clipping)
    :param agreement_atol: continuous heads agree when ``|student - teacher| <= agreement_atol`` (a float or a
        tensor that broadcasts against the action)
    :param return_loss_breakdown: return :class:`LossBreakdown` ``(loss, policy, entropy, alignment)`` instead of
        the loss (can also be passed per call)
    :param device: device of the env's states (default: the student's parameters', else the CPU)
    :param keywords: the options as plain keywords (``max_dataset_size`` is ``buffer_size``'s old name)
    """

    def __init__(
        self,
        student: PolicyFn | Any,
        teacher: PolicyFn | Any,
        *,
        options: DistillOptions | None = None,
        teacher_state_fn: Callable[[Tree, Any, int], Tree] | None = None,
        label_transform: Callable[[Tree, Tree, Any, int], Tree] | None = None,
        env: Any = None,
        optimizer: th.optim.Optimizer | None = None,
        params: Iterable[nn.Parameter] | None = None,
        lr: float = 3e-4,
        max_grad_norm: float | None = None,
        agreement_atol: float | th.Tensor = 0.1,
        return_loss_breakdown: bool = False,
        device: th.device | str | None = None,
        **keywords: Unpack[DistillerKeywords],
    ) -> None:
        if "max_dataset_size" in keywords:
            if "buffer_size" in keywords:
                raise TypeError("pass buffer_size or max_dataset_size (its old name), not both")
            keywords["buffer_size"] = keywords.pop("max_dataset_size")
        self.options = options = DistillOptions.for_reader(DISTILLER, options, keywords)
        if callable(options.beta) and env is not None:  # DaggerCallback's schedule, which its own distiller never reads
            raise TypeError("DaggerDistiller's beta is a number in [0, 1]: a schedule needs DaggerCallback's progress")
        self.student = _as_policy_fn(student, "student")
        self.teacher = _as_policy_fn(teacher, "teacher")
        check_callable("teacher_state_fn", teacher_state_fn, optional=True)
        check_callable("label_transform", label_transform, optional=True)
        check_number("lr", lr, low=0.0, open_low=True)
        if max_grad_norm is not None:
            check_number("max_grad_norm", max_grad_norm, low=0.0, open_low=True)
        if optimizer is not None and params is not None:
            raise ValueError("pass optimizer= or params=, not both")

        self.loss_fn = options.loss_fn
        self.entropy_weight = float(options.entropy_weight)
        self.rep_align_weight = float(options.rep_align_weight)
        self.return_loss_breakdown = return_loss_breakdown
        self.teacher_state_fn = teacher_state_fn
        self.label_transform = label_transform
        self.student_layer = resolve_layer(self.student, options.student_layer, "student")
        self.teacher_layer = resolve_layer(self.teacher, options.teacher_layer, "teacher")
        projector = options.rep_align_projector
        self.projector: nn.Module | Callable[[th.Tensor], th.Tensor] | None = projector if callable(projector) else None
        self._make_projector = projector is True

        self.agreement_atol = agreement_atol
        # Labels are stored for objectives that read them; kl_loss and mse_loss re-evaluate the teacher at fit time
        self._store_labels = reads_label(options.loss_fn)
        self._init_loop(env, optimizer, params, lr, max_grad_norm, device)

    # ----------------------------------------------------------------------------------------------------------------
    # The loss
    # ----------------------------------------------------------------------------------------------------------------

    def __call__(
        self,
        states: Tree,
        teacher_states: Tree = None,
        labels: Tree = None,
        return_loss_breakdown: bool | None = None,
    ) -> tuple[th.Tensor | LossBreakdown, Tree]:
        """
        The distillation loss on a batch of states.

        :param states: the student's input, a tensor (or pytree of tensors) with the batch first
        :param teacher_states: the teacher's input (default: ``teacher_state_fn(states, None, num_steps)`` if given,
            else ``states``)
        :param labels: the teacher's actions, if already known (default: the teacher's mode/mean, or a sample,
            passed through ``label_transform``)
        :param return_loss_breakdown: override the constructor's choice
        :return: ``(loss, student_out)``, or ``(LossBreakdown, student_out)``
        """
        out = self.compute(states, teacher_states, labels)
        breakdown = self.return_loss_breakdown if return_loss_breakdown is None else return_loss_breakdown
        return (out.breakdown if breakdown else out.breakdown.loss), out.student_out

    def compute(self, states: Tree, teacher_states: Tree = None, labels: Tree = None) -> DistillOutput:
        """
        The loss, its parts, the student's output, the labels and which states are usable (see :meth:`__call__`).

        :param states: the student's input, the batch first
        :param teacher_states: the teacher's input
        :param labels: the teacher's actions, if already known
        :return: a :class:`DistillOutput`
        """
        b = batch_size_of(states)
        check_finite_states(states, "student state", lambda i: f"row {i} of the batch")
        if teacher_states is None:
            teacher_states = states if self.teacher_state_fn is None else self.teacher_state_fn(states, None, self.num_steps)
        teacher_out, teacher_features = self._teacher_forward(teacher_states)
        if labels is None:
            labels = self._labels(teacher_out, states, None, self.num_steps)
        valid = self._usable(labels, teacher_out, teacher_features, b)
        forbidden = self._forbidden(states, labels, valid)
        if forbidden is not None:
            valid = valid & ~forbidden
            # The teacher's distribution over the actions the student may take, as the student's own
            restrict = getattr(self.student, "restrict_to_allowed", None)
            if restrict is not None:
                teacher_out = restrict(states, teacher_out)
        n_valid = int(valid.sum())
        mask = None
        if 0 < n_valid < b:
            # Unusable states get a usable state's teacher output and label (finite everywhere) and weight 0,
            # so no NaN reaches the student's gradients (NaN * 0 is NaN in autograd)
            index = th.where(valid, th.arange(b, device=valid.device), valid.float().argmax())
            teacher_out = tree_map(lambda d: index_distribution(d, index), teacher_out)
            teacher_features = None if teacher_features is None else teacher_features[index]
            labels = tree_index(labels, index)
            mask = valid

        with self._capture(self.student_layer) as captured:
            student_out = self.student(states)
        if n_valid == 0:
            nan = th.full((), math.nan, device=valid.device)
            return DistillOutput(LossBreakdown(nan, nan, nan, nan), student_out, labels, valid, forbidden)

        per_head = tree_map(lambda s, t, a: _per_state(self.loss_fn(s, t, a), b, "loss_fn"), student_out, teacher_out, labels)
        policy = masked_mean(th.stack(tree_leaves(per_head)).sum(dim=0), mask)
        zero = th.zeros((), device=policy.device, dtype=policy.dtype)
        entropy = zero
        if self.entropy_weight != 0:
            entropies = [_per_state(_entropy(d), b, "entropy") for d in tree_leaves(student_out)]
            entropy = masked_mean(th.stack(entropies).sum(dim=0), mask)
        alignment = zero
        if self.student_layer is not None:
            assert teacher_features is not None  # both layers or neither (checked at construction)
            features = self._project(_flat_features(captured, "student_layer", b), teacher_features)
            alignment = masked_mean(
                _per_state(self.options.rep_align_loss_fn(features, teacher_features), b, "rep_align_loss_fn"), mask
            )
        loss = policy - self.entropy_weight * entropy + self.rep_align_weight * alignment
        return DistillOutput(LossBreakdown(loss, policy, entropy, alignment), student_out, labels, valid, forbidden)

    def agreement(self, student_out: Tree, labels: Tree, valid: th.Tensor | None = None) -> th.Tensor:
        """
        Share of states where the student's best action matches the label on every head: exactly for discrete
        heads, within ``agreement_atol`` for continuous ones.

        :param student_out: the student's distributions (pytree)
        :param labels: the labels (pytree of tensors, same structure)
        :param valid: ``(b)`` mask of the states to count (default: all)
        :return: a scalar in [0, 1]
        """
        b = batch_size_of(labels)
        agree = [
            _agree(dist, best, label, self.agreement_atol, b)
            for dist, best, label in zip(
                tree_leaves(student_out), tree_leaves(best_action(student_out)), tree_leaves(labels), strict=True
            )
        ]
        return masked_mean(th.stack(agree).all(dim=0).float(), valid)

    # ----------------------------------------------------------------------------------------------------------------
    # Helpers
    # ----------------------------------------------------------------------------------------------------------------

    def _labels(self, teacher_out: Tree, states: Tree, info: Any, step: int) -> Tree:
        with th.no_grad():
            labels = sample_action(teacher_out) if self.options.teacher_sample else best_action(teacher_out)
            if self.label_transform is not None:
                labels = self.label_transform(states, labels, info, step)
        return labels

    def _teacher_forward(self, teacher_states: Tree) -> tuple[Tree, th.Tensor | None]:
        with th.no_grad(), self._capture(self.teacher_layer) as captured:
            out = self.teacher(teacher_states)
        features = None
        if self.teacher_layer is not None:
            features = _flat_features(captured, "teacher_layer", batch_size_of(teacher_states))
        return out, features

    def _forbidden(self, states: Tree, labels: Tree, valid: th.Tensor) -> th.Tensor | None:
        """``(b)`` bool: usable labels the student's action masks forbid (None: the student has no masks)."""
        allowed_labels = getattr(self.student, "allowed_labels", None)
        if allowed_labels is None:
            return None
        with th.no_grad():
            allowed = allowed_labels(states, labels)
        return None if allowed is None else valid & ~allowed.to(valid.device)

    @staticmethod
    def _usable(labels: Tree, teacher_out: Tree, teacher_features: th.Tensor | None, b: int) -> th.Tensor:
        """``(b)`` bool: finite labels; teacher parameters and features free of NaN (an infinite logit is legal)."""
        checks = [rows_finite(x, b) for x in tree_leaves(labels)]
        params = [p for d in tree_leaves(teacher_out) for p in distribution_tensors(d)]
        if teacher_features is not None:
            params.append(teacher_features)
        checks += [_no_nan(p, b) for p in params]
        return th.stack(checks).all(dim=0)

    def _project(self, features: th.Tensor, teacher_features: th.Tensor) -> th.Tensor:
        if self.projector is None and self._make_projector:
            self.projector = nn.Linear(features.shape[-1], teacher_features.shape[-1]).to(features.device, features.dtype)
            if self.optimizer is not None:
                add_to_optimizer(self.optimizer, self.projector)
        if self.projector is not None:
            features = self.projector(features)
        if features.shape[-1] != teacher_features.shape[-1]:
            raise ValueError(
                f"student_layer gives {features.shape[-1]} features and teacher_layer {teacher_features.shape[-1]}: "
                "pass rep_align_projector=True (a trained linear map) or a module mapping one to the other"
            )
        return features

    @contextmanager
    def _capture(self, layer: nn.Module | None) -> Iterator[dict[str, th.Tensor]]:
        """Record ``layer``'s output during the block (a forward hook, removed afterwards)."""
        captured: dict[str, th.Tensor] = {}
        if layer is None:
            yield captured
            return

        def hook(module: nn.Module, inputs: Any, output: Any) -> None:
            captured["x"] = output[0] if isinstance(output, (tuple, list)) else output

        handle = layer.register_forward_hook(hook)
        try:
            yield captured
        finally:
            handle.remove()


DaggerDistiller.__signature__ = reader_signature(DaggerDistiller.__init__, DISTILLER)  # type: ignore[attr-defined]


def _as_policy_fn(policy: Any, name: str) -> PolicyFn:
    """Callables are used as they are; SB3 models, policies and paths are wrapped (noise-free) by the adapters."""
    if is_sb3_policy_like(policy):
        return policy_adapter(policy)
    if not callable(policy):
        raise TypeError(f"{name} must be a callable state -> Distribution (or pytree), an SB3 model or a path, got {policy!r}")
    return policy


def _per_state(x: th.Tensor, b: int, name: str) -> th.Tensor:
    """``(b)``: an elementwise loss summed over everything after the batch dim."""
    if x.ndim == 0 or x.shape[0] != b:
        raise ValueError(f"{name} must return an elementwise loss with the batch ({b}) first, got shape {tuple(x.shape)}")
    return x.reshape(b, -1).sum(dim=-1)


def _entropy(dist: Distribution) -> th.Tensor:
    try:
        return dist.entropy()
    except NotImplementedError:
        # No closed form (e.g. a tanh-squashed Gaussian): a one-sample estimate, as SB3 does
        action = dist.rsample() if dist.has_rsample else dist.sample()
        return -dist.log_prob(action)


def _flat_features(captured: dict[str, th.Tensor], name: str, b: int) -> th.Tensor:
    if "x" not in captured:
        raise RuntimeError(f"the {name} was not called during the forward pass: pick a layer the policy uses")
    return captured["x"].reshape(b, -1)


def _agree(dist: Any, best: th.Tensor, label: th.Tensor, atol: float | th.Tensor, b: int) -> th.Tensor:
    same = best.to(label.dtype) == label if is_discrete(dist) else (best - label).abs() <= atol
    return same.reshape(b, -1).all(dim=-1)


def _no_nan(x: th.Tensor, b: int) -> th.Tensor:
    """``(b)`` bool: rows of ``x`` without NaN (infinities allowed)."""
    if not x.is_floating_point():
        return rows_finite(x, b)
    return rows_finite(th.where(th.isinf(x), th.zeros((), dtype=x.dtype, device=x.device), x), b)
