"""
What an XPPO model saves and pickles: the parent's ``save()``, signed with this user's key so that the package loads
it back as SB3 does (:mod:`sb3_xppo.loading.signing`; a data-parallel model saved once, as a plain one:
:meth:`~sb3_xppo.common.distributed.DataParallel.save`), never its runtime state (hooks, the data-parallel learner,
the options' checked copy).
"""

import functools
from collections import OrderedDict
from typing import Any

from sb3_xppo.core.learner import LearnerState
from sb3_xppo.loading.signing import signed_save

#: runtime state: never saved with the model nor pickled
RUNTIME_STATE = (
    *("_loss_hooks", "_auxiliary_loss_hooks", "_action_hooks", "_learn_hooks", "_checked_options", "_data_parallel"),
    *("_pending_resume", "_sde_noise_resumed"),  # (core/resuming.py, resume/state.py)
)


class SavingMixin(LearnerState):
    """The algorithm's ``save()``, what it leaves out, and its pickled state."""

    def save(self, *args: Any, **kwargs: Any) -> None:
        """
        The parent's ``save()``, signed: the file carries an HMAC of its members made with this user's key, a member
        SB3's loader does not read (stock ``PPO.load`` loads it), by which the package's loaders know the file as this
        user's own and load it as SB3 does, a lambda schedule and all (docs/guide/security.md). A data-parallel model
        is saved as a plain one (``distributed=False``) by one of its processes: it loads and runs in one process;
        ``load(path, distributed=True)`` under the launcher trains it on several processes again
        (:meth:`~sb3_xppo.common.distributed.DataParallel.save`).
        """
        save = functools.partial(signed_save, super().save)  # type: ignore[misc]
        self._data_parallel.save(self, save, *args, **kwargs)

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
