"""
What the package's rl-zoo3 commands (``python -m sb3_xppo.train``, ``python -m sb3_xppo.enjoy``) share: the switches
every one of them adds (``--trust-code``, ``--debug``) and their ``--help``, the package's flags first, then
rl-zoo3's own.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from sb3_xppo.zoo.session import zoo_help


def add_safety_flags(parser: argparse.ArgumentParser, loads: str) -> None:
    """
    ``--trust-code`` and ``--debug``, with their help.

    :param loads: what ``--trust-code`` loads as rl-zoo3 does (e.g. "the agent, its statistics and replay buffer")
    """
    parser.add_argument(
        "--trust-code",
        action="store_true",
        help=f"load {loads} as rl-zoo3 does, running their code (YAML is read safely all the same); default: no code "
        "from them runs",
    )
    parser.add_argument(
        "--debug", action="store_true", help="a refused input's traceback (default: one line on stderr, exit status 2)"
    )


def command_help(
    prog: str, parents: Sequence[argparse.ArgumentParser], defaults: str, command: Callable[[], None], *without: str
) -> str:
    """
    :param prog: the command (``python -m sb3_xppo.train``)
    :param parents: the parsers of the flags the package adds (each flag with its help and default)
    :param defaults: what differs from rl-zoo3's defaults, in words
    :param command: rl-zoo3's command, whose help follows (``without`` its options the package's replace)
    :return: the ``--help`` text
    """
    ours = argparse.ArgumentParser(
        prog=prog,
        parents=list(parents),
        add_help=False,
        usage="%(prog)s [the package's flags] [rl-zoo3's flags]",
        description=f"rl-zoo3's command with the package's algorithms (xppo, xppo_mask, xppo_lstm, xppo_mask_lstm). "
        f"Defaults that differ from rl-zoo3's: {defaults}.",
    )
    return f"{ours.format_help()}\nrl-zoo3's flags:\n\n{zoo_help(command, *without)}"
