"""
``learn()`` of every XPPO algorithm: the parent's, with its ``tb_log_name`` the algorithm's name; the data-parallel
learner's start (one set of parameters for every process, the progress bar over all their steps) and logger; and the
hooks registered until ``learn()`` ends removed when it returns or raises.
"""

from typing import Any

from stable_baselines3.common.utils import FloatSchedule
from torch.utils.hooks import RemovableHandle

from sb3_xppo.common.schedules import ClipRangePair
from sb3_xppo.core.learner import LearnerState
from sb3_xppo.loading.legacy import refuse_inert


class LearnMixin(LearnerState):
    """The algorithm's ``learn()`` and ``_setup_learn()``."""

    # Set by the constructor and the setup
    _learn_hooks: list[RemovableHandle]
    _logger: Any

    def learn(self, total_timesteps: int, *args: Any, **kwargs: Any) -> Any:
        """
        The parent's ``learn()``, its ``tb_log_name`` by default the algorithm's name; the hooks registered until it
        ends are removed when it returns or raises. A model loaded from someone else's file whose schedule was a
        function pickled by value (an inert stand-in, docs/guide/security.md) is refused before anything runs.

        :param total_timesteps: the number of environment steps to train for
        :param args: the parent's further arguments (``callback``, ``log_interval``, ``tb_log_name``, ...)
        :param kwargs: the parent's keywords
        :return: this model
        """
        refuse_inert(self, (FloatSchedule, ClipRangePair))  # (a schedule of a file from elsewhere, not loaded)
        if len(args) < 3:  # (callback, log_interval, tb_log_name)
            kwargs.setdefault("tb_log_name", type(self).__name__)
        self._data_parallel.start_learn(self)
        kwargs = self._data_parallel.learn_keywords(kwargs)
        try:
            return super().learn(total_timesteps, *args, **kwargs)  # type: ignore[misc]
        finally:
            while self._learn_hooks:
                self._learn_hooks.pop().remove()

    def _setup_learn(self, *args: Any, **kwargs: Any) -> Any:
        # (data-parallel: one process logs, the others' loggers write nothing)
        result = super()._setup_learn(*args, **kwargs)  # type: ignore[misc]
        self._logger = self._data_parallel.logger(self._logger)
        return result
