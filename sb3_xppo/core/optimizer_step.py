"""
The optimizer step of XPPO's ``train()``: PPO's ``zero_grad``, ``backward``, ``clip_grad_norm_``, ``step``, in one
object per ``train()`` call, so that the train loop reads as PPO's.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType

import torch as th
from stable_baselines3.common.policies import BasePolicy
from torch import nn

from sb3_xppo.common.grad_norms import clip_grad_norm_per_part, grad_norm_log_values, grad_norms
from sb3_xppo.core.fast_paths import FlatAdam
from sb3_xppo.core.gradient_surgery import backward_with_auxiliary


class OptimizerStep:
    """
    PPO's optimizer step for one ``train()`` call: ``step(loss)`` zeroes the gradients, back-propagates ``loss``,
    clips the gradient and steps the policy's optimizer, and returns the gradient norm before clipping.

    - **Clipping**: one joint norm over all parameters (PPO's ``clip_grad_norm_``), or, with ``per_part``, the actor's
      and each critic's gradient clipped to ``max_grad_norm`` on its own (multi-critic: one norm over actor and ``G``
      critics would shrink the actor's steps); then the returned norm is the norm of the parts' norms.
    - **Norm logging**: with ``parts``, each part's norm before clipping is kept for :meth:`log_values`.
    - **Fast path** (``fast``): the optimizer's part through :class:`~sb3_xppo.core.fast_paths.FlatAdam` when the
      optimizer is SB3's default Adam (one update over all parameters, the same bits); else torch's own calls.
    - **Auxiliary loss** (``step(loss, auxiliary)``): its gradient projected off the loss's where they conflict
      (PCGrad, Yu et al. 2020, :func:`~sb3_xppo.core.gradient_surgery.backward_with_auxiliary`) before the clipping;
      whether they conflicted is kept in :attr:`auxiliary_conflicts`.

    Use it as a context manager around the epochs: the flat layout is undone on leaving, also on an exception.

    :param policy: the policy, whose ``optimizer`` steps over ``policy.parameters()``
    :param max_grad_norm: the largest gradient norm (of all parameters, or of each part)
    :param parts: the parameters of each part (:func:`~sb3_xppo.common.grad_norms.split_parameters`), or None when
        neither per-part clipping nor norm logging is on
    :param per_part: clip each part on its own (needs ``parts``)
    :param fast: use the flat Adam step where it is exact
    :param average: a data-parallel run's gradient averaging over the ranks
        (:meth:`~sb3_xppo.common.distributed.ProcessGroup.average_gradients`), called after the backward pass and
        before the clipping; None in one process
    """

    def __init__(
        self,
        policy: BasePolicy,
        max_grad_norm: float,
        parts: dict[str, list[nn.Parameter]] | None = None,
        per_part: bool = False,
        fast: bool = True,
        average: Callable[[list[nn.Parameter]], None] | None = None,
    ) -> None:
        if per_part and parts is None:
            raise ValueError("per-part gradient clipping needs the parts")
        self.policy, self.optimizer, self.max_grad_norm = policy, policy.optimizer, max_grad_norm
        self.parts, self.per_part, self.fast, self.average = parts, per_part, fast, average
        self.params = list(policy.parameters())  # (those PPO clips the gradients of)
        self.flat: FlatAdam | None = None
        self.part_indices: list[list[int]] | None = None
        #: each step's part norms before clipping (with ``parts``)
        self.part_norms: list[th.Tensor] = []
        #: of each step with an auxiliary loss: whether its gradient conflicted with the loss's (0-d bool tensors)
        self.auxiliary_conflicts: list[th.Tensor] = []

    def __enter__(self) -> OptimizerStep:
        if self.fast:
            self.flat = FlatAdam.open(self.optimizer, self.params)
        if self.flat is not None and self.per_part and self.parts is not None:
            self.part_indices = self.flat.part_indices(list(self.parts.values()))
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self.flat is not None:
            self.flat.close()
            self.flat = None

    def step(self, loss: th.Tensor, auxiliary: th.Tensor | None = None) -> th.Tensor:
        """
        ``zero_grad``, ``loss.backward()``, clip, ``step``.

        :param loss: the minibatch's loss
        :param auxiliary: None, or a loss whose gradient is projected off ``loss``'s where they conflict, then added
        :return: the gradient norm before clipping
        """
        if self.flat is None:
            self.optimizer.zero_grad()
        else:
            self.flat.zero_grad()
        if auxiliary is None:
            loss.backward()
        else:
            params = [p for p in self.policy.parameters() if p.requires_grad]
            self.auxiliary_conflicts.append(backward_with_auxiliary(loss, auxiliary, params))
        if self.average is not None:
            self.average(self.params)
        norm = self._clip()
        if self.flat is None:
            self.optimizer.step()
        else:
            self.flat.step()
        return norm

    def _clip(self) -> th.Tensor:
        """Clip the gradients in place; :return: the norm before clipping"""
        if self.per_part:
            assert self.parts is not None
            norms = None
            if self.flat is not None and self.part_indices is not None:
                norms = self.flat.clip_grad_norm_per_part(self.part_indices, self.max_grad_norm)
            if norms is None:
                norms = clip_grad_norm_per_part(self.parts, self.max_grad_norm)
            self.part_norms.append(norms)
            return th.linalg.vector_norm(norms)
        if self.parts is not None:
            self.part_norms.append(grad_norms(self.parts))
        if self.flat is None or self.parts is not None:
            # torch's own call (where part norms are logged, they and the joint norm come from torch's kernels)
            return th.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
        return self.flat.clip_grad_norm(self.max_grad_norm)

    def log_values(self, norms: list[th.Tensor]) -> dict[str, float]:
        """
        The gradient-norm logs of this call (:func:`~sb3_xppo.common.grad_norms.grad_norm_log_values`), if recorded.

        :param norms: what :meth:`step` returned, step by step
        """
        if self.parts is None or not self.part_norms:
            return {}
        return grad_norm_log_values(list(self.parts), th.stack(self.part_norms), th.stack(norms), self.max_grad_norm)
