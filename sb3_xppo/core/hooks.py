"""The registration of XPPO's runtime hooks (loss hooks, action hooks): one ordered table per kind, removable handles."""

from collections import OrderedDict
from typing import Any

from torch.utils.hooks import RemovableHandle


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
