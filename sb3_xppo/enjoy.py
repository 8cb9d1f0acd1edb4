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
and ``args.yml`` are read with an allowlist. ``--trust-code`` loads them as rl-zoo3 does, for files you made or trust.
"""

from __future__ import annotations

import argparse
import runpy
import sys
from collections.abc import Sequence

from sb3_xppo import zoo

RECORD_FLAG = "--record-video"
TRUST_FLAG = "--trust-code"


def _record_video() -> None:
    # rl-zoo3 ships record_video as a script (its code lives under `if __name__ == "__main__":`)
    runpy.run_module("rl_zoo3.record_video", run_name="__main__", alter_sys=False)


def main(argv: Sequence[str] | None = None) -> None:
    """
    Watch a trained agent (or just evaluate it, with ``--no-render``), or record a video of it with
    ``--record-video``, through rl-zoo3, the package's algorithms registered.

    :param argv: command-line arguments (default: ``sys.argv[1:]``)
    """
    from rl_zoo3.enjoy import enjoy

    args = list(sys.argv[1:] if argv is None else argv)
    command = enjoy
    if RECORD_FLAG in args:
        args.remove(RECORD_FLAG)
        command = _record_video
    trust_code = TRUST_FLAG in args
    args = [arg for arg in args if arg != TRUST_FLAG]
    peek = argparse.ArgumentParser(add_help=False)
    peek.add_argument("--algo", default=zoo.ALGO_NAME)
    algo = peek.parse_known_args(args)[0].algo
    # argparse keeps the last value of an option: the user's arguments come after these defaults and win
    defaults = ["--algo", zoo.ALGO_NAME, "--env", zoo.default_env(algo), "--folder", "logs"]
    with zoo.zoo_session([*defaults, *args], training=False, trust_code=trust_code):
        command()


if __name__ == "__main__":
    main()
