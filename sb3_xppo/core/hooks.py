"""
The registration of XPPO's runtime hooks (loss hooks, action hooks): one ordered table per kind, removable handles;
the loss hooks' registry of every XPPO algorithm (:class:`LossHooksMixin`; the action hooks are the rollout's).
"""

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import torch as th
from stable_baselines3.common.type_aliases import RolloutBufferSamples
from torch.utils.hooks import RemovableHandle

#: ``hook(model, rollout_data, loss) -> loss``: called once per minibatch with the RL loss, returns the loss to optimise
LossHook = Callable[[Any, RolloutBufferSamples, th.Tensor], th.Tensor]
#: ``hook(model, rollout_data) -> loss or None``: an auxiliary loss whose gradient is projected off the RL loss's (PCGrad)
AuxiliaryLossHook = Callable[[Any, RolloutBufferSamples], "th.Tensor | None"]


def add_hook(
    hooks: "OrderedDict[int, Any]", hook: Any, signature: str, until_learn_ends: list[RemovableHandle] | None = None
) -> RemovableHandle:
    """
    Add ``hook`` to ``hooks``, run in registration order.

    :param hooks: the table of one kind of hook
    :param hook: the callable
    :param signature: how the hook is called, for the error message
    :param until_learn_ends: the model's handles to remove when its ``learn()`` ends, to add this one to (None: kept)
    :return: a handle whose ``remove()`` removes the hook
    :raises TypeError: when ``hook`` is not callable
    """
    if not callable(hook):
        raise TypeError(f"hook must be a callable {signature}, got {hook!r}")
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    if until_learn_ends is not None:
        until_learn_ends.append(handle)
    return handle


class LossHooksMixin:
    """The algorithm's loss hooks: registered here, run by ``train()`` once per minibatch."""

    # Set by the constructor
    _loss_hooks: "OrderedDict[int, LossHook]"
    _auxiliary_loss_hooks: "OrderedDict[int, AuxiliaryLossHook]"
    _learn_hooks: list[RemovableHandle]

    def register_loss_hook(self, hook: LossHook, until_learn_ends: bool = False) -> RemovableHandle:
        """
        Add ``hook(model, rollout_data, loss) -> loss`` to every minibatch of :meth:`train`: called once per
        minibatch, after the RL loss (``policy_loss + ent_coef * entropy_loss + vf_coef * value_loss``) is built and
        before ``backward()``, it returns the loss to optimise. Hooks run in registration order; they are runtime
        state, never saved with the model nor pickled.

        :param hook: receives this model, the minibatch (the buffer's samples) and the RL loss; returns the loss
            to optimise
        :param until_learn_ends: remove the hook when the running ``learn()`` returns or raises (for a callback,
            which SB3 does not tell of an exception)
        :return: a handle whose ``remove()`` removes the hook
        """
        signature = "(model, rollout_data, loss) -> loss"
        return add_hook(self._loss_hooks, hook, signature, self._learn_hooks if until_learn_ends else None)

    def register_auxiliary_loss_hook(self, hook: AuxiliaryLossHook, until_learn_ends: bool = False) -> RemovableHandle:
        """
        Add ``hook(model, rollout_data) -> loss or None`` to every minibatch of :meth:`train`: called once per
        minibatch, after the loss hooks, it returns an auxiliary loss (or None for none this minibatch). The
        auxiliary losses are summed, and their gradient is projected off the RL loss's gradient (the loss after the
        loss hooks) where the two conflict, on the parameters the auxiliary loss reaches, then added (PCGrad, Yu et al.
        2020, Gradient Surgery for Multi-Task Learning, arXiv:2001.06782; :func:`~sb3_xppo.functional.pcgrad_auxiliary`):
        the RL gradient is kept whole. Logs ``train/pcgrad_auxiliary_conflict_fraction`` (the share of the minibatches
        where the two conflicted). Costs a second backward pass. Runtime state, as the loss hooks.

        :param hook: receives this model and the minibatch; returns the auxiliary loss (a scalar) or None
        :param until_learn_ends: remove the hook when the running ``learn()`` returns or raises
        :return: a handle whose ``remove()`` removes the hook
        """
        signature = "(model, rollout_data) -> loss or None"
        return add_hook(self._auxiliary_loss_hooks, hook, signature, self._learn_hooks if until_learn_ends else None)
