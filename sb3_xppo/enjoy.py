"""
``python -m sb3_xppo.enjoy`` (console script ``xppo-enjoy``): rl-zoo3's ``enjoy`` with XPPO, MaskableXPPO and
RecurrentXPPO registered (``xppo``, ``xppo_mask``, ``xppo_lstm``), or with ``--record-video`` rl-zoo3's
``record_video``. A maskable model acts on its env's action masks (:mod:`sb3_xppo.zoo.evaluation`).

Defaults that differ from rl-zoo3's: ``--algo xppo``, ``--env LunarLander-v3`` (the same per-algorithm defaults
as ``python -m sb3_xppo.train``) and ``--folder logs`` (where ``python -m sb3_xppo.train`` saves; rl-zoo3's
default folder downloads the zoo's pretrained agents, which has none for XPPO). Every rl-zoo3 flag works and
overrides these defaults (``--env``, ``-f``, ``-n``, ``--no-render``, ``--load-best``, ``--exp-id``, ...; with
``--record-video`` also ``-o/--output-folder``).

No code from the agent's files runs (docs/guide/security.md): the model zip, ``vecnormalize.pkl``, ``config.yml``
and ``args.yml`` are read with an allowlist, and the wrappers the config names are checked before rl-zoo3 imports
them. ``--trust-code`` loads the pickles as rl-zoo3 does and lets the config name any wrapper, for files you made or
trust; the YAML is read safely all the same. A refused file ends the command with one line on stderr and exit status
2 (``--debug``: the traceback).
"""

from __future__ import annotations

import argparse
import runpy
import sys
from collections.abc import Sequence

from sb3_xppo import zoo
from sb3_xppo.loading.errors import refusals_exit
from sb3_xppo.zoo.commands import add_safety_flags, command_help


def command_parser() -> argparse.ArgumentParser:
    """:return: the parser of the command's own switches (rl-zoo3 knows none of them), with their help"""
    parser = argparse.ArgumentParser(prog="python -m sb3_xppo.enjoy", add_help=False, allow_abbrev=False)
    parser.add_argument(
        "--record-video", action="store_true", help="record a video with rl-zoo3's record_video instead of watching"
    )
    add_safety_flags(parser, "the agent, its statistics and its config's wrappers")
    return parser


def _record_video() -> None:
    # rl-zoo3 ships record_video as a script (its code lives under `if __name__ == "__main__":`)
    runpy.run_module("rl_zoo3.record_video", run_name="__main__", alter_sys=False)


def main(argv: Sequence[str] | None = None) -> None:
    """
    Watch a trained agent (or just evaluate it, with ``--no-render``), or record a video of it with
    ``--record-video``, through rl-zoo3, the package's algorithms registered.

    :param argv: command-line arguments (default: ``sys.argv[1:]``)
    :raises SystemExit: 2, with one line on stderr, for a file refused as unsafe (``--debug``: its traceback)
    """
    from rl_zoo3.enjoy import enjoy

    args = list(sys.argv[1:] if argv is None else argv)
    if "-h" in args or "--help" in args:
        differ = f"--algo {zoo.ALGO_NAME}, --env {zoo.default_env(zoo.ALGO_NAME)}, --folder logs"
        print(command_help("python -m sb3_xppo.enjoy", [command_parser()], differ, enjoy))
        return
    flags, args = command_parser().parse_known_args(args)
    command = _record_video if flags.record_video else enjoy
    peek = argparse.ArgumentParser(add_help=False)
    peek.add_argument("--algo", default=zoo.ALGO_NAME)
    algo = peek.parse_known_args(args)[0].algo
    # argparse keeps the last value of an option: the user's arguments come after these defaults and win
    defaults = ["--algo", zoo.ALGO_NAME, "--env", zoo.default_env(algo), "--folder", "logs"]
    session = zoo.zoo_session([*defaults, *args], training=False, trust_code=flags.trust_code)
    with refusals_exit(flags.debug), session:
        command()


if __name__ == "__main__":
    main()
