"""
``python -m sb3_xppo.train`` (console script ``xppo-train``): rl-zoo3's ``train`` with XPPO registered.

Defaults that differ from rl-zoo3's: ``--algo xppo``, ``--env LunarLander-v3`` and, for ``--algo xppo``,
``--conf-file`` pointing at the packaged ``sb3_xppo/zoo_configs/xppo.yml``. Every rl-zoo3 flag works as in
``python -m rl_zoo3.train`` (``--env``, ``-n``, ``--seed``, ``-params``, ``--eval-freq``, ``-tb``, ``-optimize``,
``--storage``, ``--study-name``, ``-P``, ...) and overrides these defaults. After a training run (not after
``-optimize``) it writes ``learning_curve.png`` next to the saved model and prints the eval summary.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from sb3_xppo import zoo


def _default_args(args: Sequence[str]) -> tuple[list[str], argparse.Namespace]:
    """
    :param args: the user's command-line arguments
    :return: the defaults to put before them (argparse keeps the last value of an option, so the user's
        win) and the few options this wrapper reads itself
    """
    peek = argparse.ArgumentParser(add_help=False)
    peek.add_argument("--algo", default=zoo.ALGO_NAME)
    peek.add_argument("--env", default=zoo.DEFAULT_ENV)
    peek.add_argument("-f", "--log-folder", default="logs")
    peek.add_argument("-optimize", "--optimize-hyperparameters", action="store_true")
    known, _ = peek.parse_known_args(list(args))
    defaults = ["--algo", zoo.ALGO_NAME, "--env", zoo.DEFAULT_ENV]
    if known.algo == zoo.ALGO_NAME:
        # other algorithms keep rl-zoo3's own hyperparams/<algo>.yml
        defaults += ["--conf-file", str(zoo.CONFIG_PATH)]
    return defaults, known


def main(argv: Sequence[str] | None = None) -> None:
    """
    Train with rl-zoo3, XPPO registered; then plot the learning curve of the new run.

    :param argv: command-line arguments (default: ``sys.argv[1:]``)
    """
    from rl_zoo3.train import train

    args = list(sys.argv[1:] if argv is None else argv)
    zoo.register()
    defaults, known = _default_args(args)
    before = zoo.find_run_dirs(known.log_folder, known.algo, known.env)
    zoo.run_with_argv(train, [*defaults, *args])
    if known.optimize_hyperparameters:
        return
    for run_dir in sorted(zoo.find_run_dirs(known.log_folder, known.algo, known.env) - before):
        path = zoo.plot_learning_curve(run_dir, known.env, algo=known.algo)
        if path is not None:
            print(f"Learning curve: {path}")
        summary = zoo.summarize_evaluations(run_dir, known.env)
        if summary is not None:
            print(summary)


if __name__ == "__main__":
    main()
