"""The data-parallel learner's options (``distributed``, ``distributed_timeout``, docs/guide/distributed.md) checked."""

from collections.abc import Mapping
from typing import Any

import numpy as np

from sb3_xppo.common.declarations import is_number
from sb3_xppo.common.distributed.process_group import check_launched


def check_distributed(distributed: Any, checked: Mapping[str, Any]) -> bool:
    if not isinstance(distributed, (bool, np.bool_)):
        raise TypeError(f"distributed must be True or False, got {distributed!r}")
    if distributed:
        if checked["group_gradients"] is not None:
            raise ValueError(
                "distributed=True cannot be combined with group_gradients: PCGrad's projection needs each group's "
                "gradient of the global minibatch, which the ranks' averaged gradient does not keep"
            )
        check_launched()
    return bool(distributed)


def check_distributed_timeout(distributed_timeout: Any, checked: Mapping[str, Any]) -> float:
    if not is_number(distributed_timeout) or not distributed_timeout > 0:
        raise ValueError(f"distributed_timeout must be a number of seconds > 0, got {distributed_timeout!r}")
    return float(distributed_timeout)
