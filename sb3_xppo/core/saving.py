"""
What an XPPO model saves and pickles: the parent's ``save()`` (a data-parallel model saved once, as a plain one:
:meth:`~sb3_xppo.common.distributed.DataParallel.save`), never its runtime state (hooks, the data-parallel learner,
the options' checked copy).
"""

from collections import OrderedDict
from typing import Any

from sb3_xppo.common.distributed import DataParallel, SingleProcess

#: runtime state: never saved with the model nor pickled
RUNTIME_STATE = (
    *("_loss_hooks", "_auxiliary_loss_hooks", "_action_hooks", "_learn_hooks", "_checked_options", "_data_parallel"),
    *("_pending_resume", "_sde_noise_resumed"),  # (core/resuming.py, resume/state.py)
)


class SavingMixin:
    """The algorithm's ``save()``, what it leaves out, and its pickled state."""

    # Set by the constructor and the setup
    _data_parallel: DataParallel | SingleProcess

    def save(self, *args: Any, **kwargs: Any) -> None:
        """
        The parent's ``save()``. A data-parallel model is saved as a plain one (``distributed=False``) by one of its
        processes: it loads and runs in one process; ``load(path, distributed=True)`` under the launcher trains it on
        several processes again (:meth:`~sb3_xppo.common.distributed.DataParallel.save`).
        """
        self._data_parallel.save(self, super().save, *args, **kwargs)  # type: ignore[misc]

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), *RUNTIME_STATE]  # type: ignore[misc]

    def __getstate__(self) -> dict[str, Any]:
        # Loss and action hooks are runtime state (usually closures over a callback): never pickled
        state = self.__dict__.copy()
        state["_loss_hooks"], state["_action_hooks"], state["_learn_hooks"] = OrderedDict(), OrderedDict(), []
        state["_auxiliary_loss_hooks"] = OrderedDict()
        state.pop("_data_parallel", None)  # (the class's: one process)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        # never pickled (a pickle of before the single-process learner holds None): the class's, one process
        state = dict(state)
        state.pop("_data_parallel", None)
        self.__dict__.update(state)
