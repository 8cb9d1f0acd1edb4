"""Running rl-zoo3's command functions, which parse ``sys.argv``, on arguments of the caller's."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence


def run_with_argv(command: Callable[[], None], args: Sequence[str]) -> None:
    """
    Run one of rl-zoo3's command functions (they parse ``sys.argv``) on the given arguments.

    :param command: ``rl_zoo3.train.train`` or ``rl_zoo3.enjoy.enjoy``
    :param args: the command-line arguments, without the program name
    """
    saved = sys.argv
    sys.argv = [saved[0] if saved else "sb3_xppo", *args]
    try:
        command()
    finally:
        sys.argv = saved
