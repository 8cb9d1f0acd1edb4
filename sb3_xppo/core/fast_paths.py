"""
The fast paths of XPPO's ``learn()`` that keep SB3's numbers bit for bit: the same floating-point operations on the
same operands, with less per-call overhead (``benchmarks/speed.py`` measures them). They are XPPO's own code, on by
the constructor keyword ``fast_paths`` (False: torch's and SB3's own paths everywhere, the same bits), and change no
state outside the model:

- the rollout's forward passes run under ``torch.inference_mode`` where every module of the policy is a library's
  (:func:`library_modules_only`), see :mod:`sb3_xppo.core.rollout`;
- XPPO's policies build their distributions without argument validation around calls whose inputs are known finite
  (:func:`trusted_policy_calls`, :meth:`~sb3_xppo.common.policies.XPPOPolicyMixin.trusted_inputs`);
- :class:`FlatAdam`: PPO's optimizer step (``zero_grad``, ``clip_grad_norm_``, ``Adam.step``) with the Adam update
  computed once over all parameters, laid out in flat buffers for the duration of a ``train()`` call, instead of
  once per parameter tensor. Elementwise operations give the same bits whatever the length of the tensor they run
  on; :func:`flat_adam_is_exact` checks it once per process on this machine's kernels, else torch's own step runs.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch as th
from torch.optim import optimizer as optimizer_module

#: Packages whose modules keep nothing from a forward pass, so that their outputs may be inference tensors
LIBRARY_PACKAGES = ("torch.", "stable_baselines3.", "sb3_contrib.", "sb3_xppo.")


def library_modules_only(module: th.nn.Module) -> bool:
    """
    Whether every module in ``module``'s tree is a class of torch, SB3, sb3-contrib or this package: then its forward
    passes may run under ``torch.inference_mode`` (a user-defined module might cache a tensor of its forward pass and
    use it later in a graph, which an inference tensor refuses).

    :param module: e.g. the policy
    """
    return all(type(m).__module__.startswith(LIBRARY_PACKAGES) for m in module.modules())


def tensor_finite(x: th.Tensor) -> bool:
    """
    Whether a tensor holds only finite numbers, as far as its sum tells: a NaN or an infinity makes the sum non-finite,
    and a finite tensor whose sum overflows counts as non-finite (the caller then takes the checked path). One small
    op, a fraction of ``isfinite(x).all()``'s cost amid a policy's forward pass.
    """
    return not x.is_floating_point() or math.isfinite(x.detach().sum().item())


def all_finite(obs: Any) -> bool:
    """Whether an observation tensor (or a dict of them) holds only finite numbers; anything else counts as not."""
    if isinstance(obs, dict):
        return all(all_finite(v) for v in obs.values())
    return isinstance(obs, th.Tensor) and tensor_finite(obs)


def parameters_finite(module: th.nn.Module) -> bool:
    """Whether every parameter of ``module`` holds only finite numbers."""
    return all(tensor_finite(p) for p in module.parameters())


def trusted_policy_calls(policy: Any, trusted: bool) -> AbstractContextManager[Any]:
    """
    The block in which ``policy`` builds its action distributions without argument validation, when ``trusted``:
    :meth:`~sb3_xppo.common.policies.XPPOPolicyMixin.trusted_inputs` for XPPO's policies; a policy of the user's own
    keeps its checks.

    :param policy: the model's policy
    :param trusted: whether the block's calls have inputs known finite (observations and parameters)
    """
    trusted_inputs = getattr(policy, "trusted_inputs", None)
    return trusted_inputs(trusted) if trusted and trusted_inputs is not None else nullcontext()


# --- flat Adam ----------------------------------------------------------------------------------------------------------

#: Bytes each parameter's slice of a flat buffer is aligned to: torch's CPU allocator aligns every tensor so, and a
#: matrix product's rounding may depend on its operands' alignment (MKL's blocking), so a view must keep it
ALIGNMENT = 64


def aligned_offsets(numels: list[int], itemsize: int) -> tuple[list[int], int]:
    """
    Where each of a list of tensors starts in a flat buffer that keeps every one aligned to :data:`ALIGNMENT` bytes.

    :param numels: the tensors' numbers of elements
    :param itemsize: bytes per element
    :return: the start of each (in elements) and the buffer's length
    """
    step = max(ALIGNMENT // itemsize, 1)
    offsets, end = [], 0
    for n in numels:
        offsets.append(end)
        end += -(-n // step) * step
    return offsets, end


def flat_views(flat: th.Tensor, like: Sequence[th.Tensor], offsets: list[int]) -> list[th.Tensor]:
    """Contiguous views of ``flat`` shaped like each of ``like`` (contiguous tensors), starting at ``offsets``."""
    base = flat.storage_offset()
    return [flat.as_strided(t.shape, t.stride(), base + o) for t, o in zip(like, offsets, strict=True)]


def adam_update(
    param: th.Tensor,
    grad: th.Tensor,
    exp_avg: th.Tensor,
    exp_avg_sq: th.Tensor,
    step: float,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
) -> None:
    """
    One Adam update in place, the operations of ``torch.optim.adam._single_tensor_adam`` (no weight decay, AMSGrad,
    maximize, capturable or differentiable) in its order (Kingma & Ba 2015, https://arxiv.org/abs/1412.6980).

    :param param: the parameters, any shape
    :param grad: their (clipped) gradient
    :param exp_avg: first moment, updated
    :param exp_avg_sq: second moment, updated
    :param step: the step count after this step's increment
    :param lr: learning rate
    :param beta1: first moment decay
    :param beta2: second moment decay
    :param eps: added to the denominator
    """
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    bias_correction1 = 1 - beta1**step
    bias_correction2 = 1 - beta2**step
    step_size = lr / bias_correction1
    bias_correction2_sqrt = bias_correction2**0.5
    denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
    param.addcdiv_(exp_avg, denom, value=-step_size)


@functools.cache
def flat_adam_is_exact(dtype: th.dtype) -> bool:
    """
    Whether :func:`adam_update` over one flat buffer gives torch's per-tensor Adam bit for bit on this machine's CPU
    kernels: they must round the same in their vectorised body and their scalar tail. Checked once per process and
    dtype on tensors of every length from 1 to 40, laid out as :class:`FlatAdam` lays them out, over a few steps.

    :param dtype: the parameters' dtype
    """
    generator = th.Generator().manual_seed(0)
    params = [th.randn(n, generator=generator).to(dtype) for n in range(1, 41)]
    offsets, total = aligned_offsets([p.numel() for p in params], params[0].element_size())
    flat, flat_grad = th.zeros(total, dtype=dtype), th.zeros(total, dtype=dtype)
    exp_avg, exp_avg_sq = th.zeros_like(flat), th.zeros_like(flat)
    th._foreach_copy_(flat_views(flat, params, offsets), params)
    reference = [p.clone().requires_grad_() for p in params]
    optimizer = th.optim.Adam(reference, lr=1e-3)
    for step in range(1, 4):
        grads = [th.randn(p.shape, generator=generator).to(dtype) * 10.0 ** (2 - 3 * step) for p in params]
        for p, g in zip(reference, grads, strict=True):
            p.grad = g.clone()
        optimizer.step()
        with th.no_grad():
            th._foreach_copy_(flat_views(flat_grad, params, offsets), grads)
            adam_update(flat, flat_grad, exp_avg, exp_avg_sq, float(step), 1e-3, 0.9, 0.999, 1e-8)
    return all(th.equal(p.detach(), v) for p, v in zip(reference, flat_views(flat, params, offsets), strict=True))


def _hooks_free(optimizer: th.optim.Optimizer) -> bool:
    """No step hook on the optimizer, nor global optimizer hooks, nor a wrapper around its ``step`` / ``zero_grad``."""
    global_hooks = (
        getattr(optimizer_module, "_global_optimizer_pre_hooks", None),
        getattr(optimizer_module, "_global_optimizer_post_hooks", None),
    )
    own_hooks = (getattr(optimizer, "_optimizer_step_pre_hooks", None), getattr(optimizer, "_optimizer_step_post_hooks", None))
    return (
        all(hooks is not None and not hooks for hooks in (*global_hooks, *own_hooks))
        and not {"step", "zero_grad"} & set(vars(optimizer))
        and getattr(optimizer, "grad_scale", None) is None
        and getattr(optimizer, "found_inf", None) is None
    )


#: the per-parameter state of ``torch.optim.Adam`` that :class:`FlatAdam` lays out flat and writes (torch's own
#: names; ``tests/test_private_attributes.py`` fails, naming the key, when torch's Adam keeps other state)
ADAM_STATE_KEYS = frozenset({"step", "exp_avg", "exp_avg_sq"})
#: the options of ``torch.optim.Adam``'s parameter group that :meth:`FlatAdam.eligible` knows (reads, or knows to
#: leave the step unchanged: ``foreach``); an option torch adds later makes the optimizer ineligible (torch's own step)
ADAM_OPTIONS = frozenset(
    {"params", "lr", "betas", "eps", "weight_decay", "decoupled_weight_decay", "amsgrad", "maximize", "foreach"}
    | {"capturable", "differentiable", "fused"}
)


class FlatAdam:
    """
    PPO's optimizer step, ``optimizer.zero_grad()``, ``clip_grad_norm_(parameters, max_norm)`` and
    ``optimizer.step()``, bit for bit, for ``torch.optim.Adam`` with its default options (the optimizer SB3's policies
    build), on CPU: one Adam update over all parameters at once instead of about ten operations per parameter tensor.

    For the duration of one ``train()`` call (:meth:`open` it, :meth:`close` it in a ``finally``), the parameters and
    Adam's moment estimates are views into flat buffers, each slice aligned as torch aligns a tensor of its own (a
    matrix product may round differently on a misaligned operand); :meth:`close` copies the values back into the
    tensors they came from and puts those back, so that outside ``train()`` nothing differs from torch's own layout.
    The gradients stay the parameters' own tensors (autograd's, clipped in place as by ``clip_grad_norm_``); the
    step reads them into a flat buffer.

    A step it cannot take exactly (a parameter without a gradient, Adam's state not yet created on the first step,
    a parameter or state tensor replaced meanwhile) is torch's own step, on the same tensors.

    :param optimizer: the policy's optimizer, for which :meth:`eligible` holds
    :param params: its parameters, in the order of its one parameter group
    """

    def __init__(self, optimizer: th.optim.Optimizer, params: list[th.nn.Parameter]) -> None:
        self.optimizer = optimizer
        self.group = optimizer.param_groups[0]
        self.params = params
        # Set while flat: parameters, gradients, moments, and their views; the tensors the views replaced
        self.buffers: tuple[th.Tensor, th.Tensor, th.Tensor, th.Tensor] | None = None
        self.views: list[list[th.Tensor]] = []
        self.originals: list[tuple[th.Tensor, th.Tensor, th.Tensor]] = []
        self.states: list[dict[str, Any]] = []
        self.pointers: list[int] = []
        # While flat, Adam's step counts too: 0-d views into one tensor, so that one increment counts for all
        self.step_buffer: th.Tensor | None = None
        self.steps: list[th.Tensor] = []
        self.original_steps: list[th.Tensor] = []
        # Once torch's step ran on a subset of the parameters, their step counts may differ: torch's path from then on
        self.torch_only = False

    @classmethod
    def open(cls, optimizer: th.optim.Optimizer, params: list[th.nn.Parameter]) -> FlatAdam | None:
        """
        A :class:`FlatAdam` for this ``train()`` call, or None when the optimizer is not one it reproduces exactly.

        :param optimizer: the policy's optimizer
        :param params: the parameters PPO clips the gradients of (``policy.parameters()``)
        """
        return cls(optimizer, params) if cls.eligible(optimizer, params) else None

    @staticmethod
    def eligible(optimizer: th.optim.Optimizer, params: list[th.nn.Parameter]) -> bool:
        """
        Whether the optimizer is exactly ``torch.optim.Adam`` with one parameter group holding ``params`` (in order),
        float options and no weight decay, AMSGrad, maximize, capturable, differentiable or fused mode, no hooks, and
        all parameters contiguous CPU tensors of one floating dtype for which :func:`flat_adam_is_exact` holds.

        :param optimizer: the policy's optimizer
        :param params: the parameters PPO clips the gradients of
        """
        if type(optimizer) is not th.optim.Adam or len(optimizer.param_groups) != 1 or not params:
            return False
        group = optimizer.param_groups[0]
        if not set(group) <= ADAM_OPTIONS:
            return False
        if len(group["params"]) != len(params) or any(p is not q for p, q in zip(group["params"], params, strict=True)):
            return False
        beta1, beta2 = group["betas"]
        if not all(isinstance(v, float) for v in (group["lr"], group["eps"], beta1, beta2)):
            return False
        if group["weight_decay"] != 0 or group.get("decoupled_weight_decay", False):
            return False
        if any(group.get(k) for k in ("amsgrad", "maximize", "capturable", "differentiable", "fused")):
            return False
        dtype = params[0].dtype
        if not dtype.is_floating_point or dtype.is_complex:
            return False
        if not all(
            p.device.type == "cpu" and p.dtype == dtype and p.is_contiguous() and p.layout == th.strided for p in params
        ):
            return False
        return _hooks_free(optimizer) and flat_adam_is_exact(dtype)

    # --- the step ---------------------------------------------------------------------------------------------------

    def zero_grad(self) -> None:
        """``optimizer.zero_grad()`` (``set_to_none=True``): every gradient None."""
        for p in self.params:
            p.grad = None

    def clip_grad_norm(self, max_norm: float) -> th.Tensor:
        """
        ``torch.nn.utils.clip_grad_norm_(params, max_norm)``, its operations in its order, without its grouping by
        device and dtype (one group here: a third of its cost on a small policy).

        :param max_norm: the largest gradient norm
        :return: the total norm before clipping
        """
        grads = [p.grad for p in self.params]
        if any(g is None for g in grads):
            return th.nn.utils.clip_grad_norm_(self.params, max_norm)
        with th.no_grad():
            norms = th._foreach_norm(grads, 2.0)  # type: ignore[arg-type]
            total_norm = th.linalg.vector_norm(th.stack(norms), 2.0)
            clip_coef = float(max_norm) / (total_norm + 1e-6)
            th._foreach_mul_(grads, th.clamp(clip_coef, max=1.0))  # type: ignore[arg-type]
        return total_norm

    def part_indices(self, parts: list[list[th.nn.Parameter]]) -> list[list[int]] | None:
        """
        Where each part's parameters sit in :attr:`params`, for :meth:`clip_grad_norm_per_part` (made once per
        ``train()`` call).

        :param parts: the parameters of each part (e.g. :func:`~sb3_xppo.common.grad_norms.split_parameters`'s values)
        :return: each part's indices, in the part's order; None when a part holds a parameter not in :attr:`params`
            or one twice, or a part is empty
        """
        position = {id(p): i for i, p in enumerate(self.params)}
        indices = [[position.get(id(p), -1) for p in params] for params in parts]
        flat = [i for part in indices for i in part]
        if any(not part for part in indices) or -1 in flat or len(set(flat)) != len(flat):
            return None
        return indices

    def clip_grad_norm_per_part(self, part_indices: list[list[int]], max_norm: float) -> th.Tensor | None:
        """
        ``torch.nn.utils.clip_grad_norm_(part, max_norm)`` on each part on its own (as
        :func:`~sb3_xppo.common.grad_norms.clip_grad_norm_per_part`), bit for bit: every gradient's norm in one
        ``_foreach_norm`` call (each is its own tensor's, whatever list it is in), each part's norm over its
        parameters' norms in the part's order, the clip coefficients of all parts in one elementwise pass, and one
        ``_foreach_mul_`` scaling every gradient by its part's coefficient; no grouping by device and dtype, no host
        sync.

        :param part_indices: :meth:`part_indices`'s
        :param max_norm: the largest norm each part's gradient keeps
        :return: ``(len(part_indices),)`` each part's norm before clipping, or None (nothing clipped) when a gradient
            is missing: then the caller clips through torch
        """
        grads = [p.grad for p in self.params]
        if any(g is None for g in grads):
            return None
        with th.no_grad():
            norms = th._foreach_norm(grads, 2.0)  # type: ignore[arg-type]
            part_norms = th.stack(
                [th.linalg.vector_norm(th.stack([norms[i] for i in indices]), 2.0) for indices in part_indices]
            )
            # clip_grad_norm_'s coefficient, min(max_norm / (norm + 1e-6), 1), of every part at once (elementwise)
            coefs = th.clamp(float(max_norm) / (part_norms + 1e-6), max=1.0).unbind()
            part_grads = [grads[i] for indices in part_indices for i in indices]
            part_coefs = [coefs[k] for k, indices in enumerate(part_indices) for _ in indices]
            th._foreach_mul_(part_grads, part_coefs)  # type: ignore[arg-type]
        return part_norms

    def step(self) -> None:
        """``optimizer.step()``: one Adam update over the flat buffers, or torch's step where that is not exact."""
        grads = [p.grad for p in self.params]
        missing = any(g is None for g in grads)
        if missing or self.torch_only or not self._flat_ready():
            # torch's step skips parameters without a gradient, so that step counts may diverge: torch's from then on
            self.torch_only = self.torch_only or missing
            self.optimizer.step()
            return
        assert self.buffers is not None and self.step_buffer is not None
        param, grad, exp_avg, exp_avg_sq = self.buffers
        group = self.group
        beta1, beta2 = group["betas"]
        with th.no_grad():
            th._foreach_copy_(self.views[1], grads)  # type: ignore[arg-type]
            self.step_buffer += 1  # Adam's `step_t += 1`, every parameter's at once
            adam_update(param, grad, exp_avg, exp_avg_sq, self.steps[0].item(), group["lr"], beta1, beta2, group["eps"])

    # --- the flat layout --------------------------------------------------------------------------------------------

    def _flat_ready(self) -> bool:
        """Lay the parameters and Adam's state out flat if not done yet; False when that cannot be done exactly."""
        if self.buffers is not None:
            if self._intact():
                return True
            self.close()
            self.torch_only = True
            return False
        states = [self.optimizer.state.get(p) for p in self.params]
        for p, state in zip(self.params, states, strict=True):
            if not state or set(state) != ADAM_STATE_KEYS:
                return False  # the first step creates the state
            step = state["step"]
            if not (isinstance(step, th.Tensor) and step.ndim == 0 and step.device.type == "cpu"):
                return False
            for moment in (state["exp_avg"], state["exp_avg_sq"]):
                if (
                    moment.shape != p.shape
                    or moment.dtype != p.dtype
                    or moment.device != p.device
                    or not moment.is_contiguous()
                ):
                    return False
        first = states[0]["step"]  # type: ignore[index]
        if any(not th.equal(state["step"], first) for state in states):  # type: ignore[index]
            return False
        return self._flatten(states)  # type: ignore[arg-type]

    def _flatten(self, states: list[dict[str, Any]]) -> bool:
        params = self.params
        offsets, total = aligned_offsets([p.numel() for p in params], params[0].element_size())
        buffers = tuple(th.zeros(total, dtype=params[0].dtype) for _ in range(4))
        if any(b.data_ptr() % ALIGNMENT for b in buffers):
            self.torch_only = True
            return False
        originals = [(p.data, state["exp_avg"], state["exp_avg_sq"]) for p, state in zip(params, states, strict=True)]
        views = [flat_views(b, params, offsets) for b in buffers]
        with th.no_grad():
            for i, buffer_views in ((0, views[0]), (1, views[2]), (2, views[3])):
                th._foreach_copy_(buffer_views, [o[i] for o in originals])
            for p, state, param_view, exp_avg_view, exp_avg_sq_view in zip(
                params, states, views[0], views[2], views[3], strict=True
            ):
                p.data = param_view
                state["exp_avg"], state["exp_avg_sq"] = exp_avg_view, exp_avg_sq_view
            self.original_steps = [state["step"] for state in states]
            self.step_buffer = th.stack(self.original_steps)
            self.steps = list(self.step_buffer.unbind(0))
            for state, step in zip(states, self.steps, strict=True):
                state["step"] = step
        self.buffers, self.views, self.originals, self.states = buffers, views, originals, states  # type: ignore[assignment]
        self.pointers = [p.data_ptr() for p in params]
        return True

    def _intact(self) -> bool:
        """Whether every parameter and moment is still the view installed (no one replaced one meanwhile)."""
        return [p.data_ptr() for p in self.params] == self.pointers and all(
            state["exp_avg"] is exp_avg and state["exp_avg_sq"] is exp_avg_sq and state["step"] is step
            for state, exp_avg, exp_avg_sq, step in zip(self.states, self.views[2], self.views[3], self.steps, strict=True)
        )

    def close(self) -> None:
        """Copy the flat values back into the parameters' and moments' own tensors and put those back."""
        if self.buffers is None:
            return
        # Copied back into the parameters through themselves (their version counters move, as with torch's in-place
        # step) and into the moments' own tensors, from the views still in place (one replaced meanwhile is left)
        targets: list[th.Tensor] = []
        sources: list[th.Tensor] = []
        for i, (p, state, (param, exp_avg, exp_avg_sq), pointer) in enumerate(
            zip(self.params, self.states, self.originals, self.pointers, strict=True)
        ):
            if p.data_ptr() == pointer:
                p.data = param
                targets.append(p)
                sources.append(self.views[0][i])
            for key, view, original in (
                ("exp_avg", self.views[2][i], exp_avg),
                ("exp_avg_sq", self.views[3][i], exp_avg_sq),
                ("step", self.steps[i], self.original_steps[i]),
            ):
                if state.get(key) is view:
                    state[key] = original
                    targets.append(original)
                    sources.append(view)
        with th.no_grad():
            th._foreach_copy_(targets, sources)
        self.buffers, self.views, self.originals, self.states, self.pointers = None, [], [], [], []
        self.step_buffer, self.steps, self.original_steps = None, [], []
