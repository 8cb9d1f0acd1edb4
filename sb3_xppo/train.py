"""
``python -m sb3_xppo.train`` (console script ``xppo-train``): rl-zoo3's ``train`` with XPPO, MaskableXPPO and RecurrentXPPO
registered (``xppo``, ``xppo_mask``, ``xppo_lstm``).

Defaults that differ from rl-zoo3's: ``--algo xppo``; ``--env LunarLander-v3`` (``sb3_xppo/GridMaze-v0`` for
``--algo xppo_mask``, ``CartPoleNoVel-v1`` for ``--algo xppo_lstm``); and for the package's algorithms (``xppo``,
``xppo_mask``, ``xppo_lstm``) ``--conf-file`` pointing at the packaged ``sb3_xppo/zoo_configs/<algo>.yml``. Every
rl-zoo3 flag works as in ``python -m rl_zoo3.train`` (``--env``, ``-n``, ``--seed``, ``-params``, ``--eval-freq``,
``-tb``, ``-optimize``, ``--storage``, ``--study-name``, ``-P``, ...) and overrides these defaults. Maskable models
are evaluated with their env's action masks (:mod:`sb3_xppo.zoo.evaluation`). ``--vec-env`` takes ``lean``
(the default: :class:`~sb3_xppo.vec_env.LeanVecEnv`, ``DummyVecEnv``'s numbers, faster) and ``envpool``
(:class:`~sb3_xppo.vec_env.EnvPoolVecEnv`) and ``ray`` (:class:`~sb3_xppo.vec_env.RayVecEnv`, with ``--ray-address``
and ``--ray-envs-per-actor``) besides rl-zoo3's ``dummy`` and ``subproc``, and a config entry may choose
with its ``vec_env`` key, which ``--vec-env`` overrides (:mod:`sb3_xppo.zoo.vec_envs`). After a training run (not
after ``-optimize``) it writes ``learning_curve.png`` next to the saved model and prints the eval summary.

``--distributed`` trains one data-parallel model on the ranks PyTorch's launcher starts
(``python -m torch.distributed.run --nproc-per-node 2 -m sb3_xppo.train --distributed ...``; the model's
``distributed=True``): rank 0 evaluates, saves, logs and plots as a plain run, the other ranks only train. Not with
``-optimize``.

``-i`` (continue a trained agent) loads it, its ``vecnormalize.pkl`` and replay buffer without running code from them
(docs/guide/security.md); ``--trust-code`` loads them as rl-zoo3 does, for an agent you made or trust.

A training run writes resumable checkpoints into its run folder's ``resume/`` (docs/guide/resume.md): every
``--checkpoint-minutes`` (default 5; 0: none by time), every ``--checkpoint-rollouts`` where given, and on SIGTERM (a
scheduler's preemption: the checkpoint written at the next rollout boundary, then the command exits 0).
``--resume [FOLDER]``, added to the run's own command, continues the latest run folder of the algorithm and env (or
the one given) to its original budget, bit for bit (:mod:`sb3_xppo.zoo.resuming`), ``--distributed`` runs on as many
ranks. Not with ``-optimize`` nor ``-i``.

A training run shows a progress bar (rl-zoo3's ``-P``/``--progress`` is on by default); ``--no-progress`` turns it off,
for logs that go to a file.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence

from sb3_xppo import zoo
from sb3_xppo.loading.errors import refusals_exit
from sb3_xppo.resume import CorruptCheckpointError, ReplayMismatchError
from sb3_xppo.resume.files import FolderInUseError
from sb3_xppo.zoo import resuming
from sb3_xppo.zoo.commands import add_safety_flags, command_help


def command_parser() -> argparse.ArgumentParser:
    """:return: the parser of the command's own switches (rl-zoo3 knows none of them), with their help"""
    parser = argparse.ArgumentParser(prog="python -m sb3_xppo.train", add_help=False, allow_abbrev=False)
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress bar (rl-zoo3's -P/--progress is on by default here)"
    )
    parser.add_argument(
        "--distributed",
        action="store_true",
        help="train one data-parallel model on the ranks PyTorch's launcher starts "
        "(python -m torch.distributed.run --nproc-per-node N -m sb3_xppo.train --distributed ...)",
    )
    add_safety_flags(parser, "-i's agent, its statistics and replay buffer")
    return parser


def rank_args(known: argparse.Namespace) -> tuple[list[str], str | None]:
    """
    ``--distributed``: what a rank other than 0 adds to its arguments. Rank 0 evaluates, saves and logs as a plain
    run; the others only train, their run folder a temporary one (removed at the end).

    :param known: the options this wrapper read
    :return: the arguments and the temporary run folder; none on rank 0
    :raises ValueError: without the launcher's environment (the launch command shown), or with ``-optimize``
    """
    from sb3_xppo.common.distributed import check_launched

    if known.optimize_hyperparameters:
        raise ValueError(
            "--distributed trains one model on several ranks; -optimize searches over many: run the search without "
            "--distributed, then train its best entry with it"
        )
    check_launched()
    if int(os.environ["RANK"]) == 0:
        return [], None
    folder = tempfile.mkdtemp(prefix=f"sb3_xppo_rank{os.environ['RANK']}_")
    return ["--eval-freq", "-1", "--save-freq", "-1", "--verbose", "0", "-f", folder], folder


def _default_args(args: Sequence[str]) -> tuple[list[str], argparse.Namespace]:
    """
    :param args: the user's command-line arguments
    :return: the defaults to put before them (argparse keeps the last value of an option, so the user's
        win) and the few options this wrapper reads itself
    """
    peek = argparse.ArgumentParser(add_help=False)
    peek.add_argument("--algo", default=zoo.ALGO_NAME)
    peek.add_argument("--env", default=None)
    peek.add_argument("-f", "--log-folder", default="logs")
    peek.add_argument("-optimize", "--optimize-hyperparameters", action="store_true")
    peek.add_argument("-i", "--trained-agent", default="")
    peek.add_argument("--seed", default=None)
    known, _ = peek.parse_known_args(list(args))
    if known.env is None:
        known.env = zoo.default_env(known.algo)
    defaults = ["--algo", zoo.ALGO_NAME, "--env", known.env]
    if known.algo in zoo.CONFIG_PATHS:
        # other algorithms keep rl-zoo3's own hyperparams/<algo>.yml
        defaults += ["--conf-file", str(zoo.CONFIG_PATHS[known.algo])]
    return defaults, known


def _check_resume(plan: resuming.ResumePlan, known: argparse.Namespace, distributed: bool) -> None:
    """
    The plan's part of the command: the user's log folder, this process's rank; with ``--resume``, refused where it
    cannot continue a run (the run itself is found once rl-zoo3 has read the command).

    :raises ValueError: ``--resume`` with ``-optimize`` or ``-i``
    """
    plan.log_folder, plan.seed_given = known.log_folder, known.seed is not None
    plan.rank = int(os.environ.get("RANK", 0)) if distributed else 0
    if plan.resume is not None and (known.optimize_hyperparameters or known.trained_agent):
        raise resuming.ResumeRefused("--resume continues a training run: not with -optimize nor -i")


def main(argv: Sequence[str] | None = None) -> None:
    """
    Train with rl-zoo3, the package's algorithms registered; then plot the learning curve of the new run.

    :param argv: command-line arguments (default: ``sys.argv[1:]``)
    :raises SystemExit: 2, with one line on stderr, for a refused input: a file refused as unsafe, a ``--resume`` that
        cannot go on (no run, a corrupt checkpoint, a command that is not the run's, a folder another process writes);
        ``--debug``: the traceback instead
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if "-h" in args or "--help" in args:
        print(help_text())
        return
    flags, args = command_parser().parse_known_args(args)
    refused = (resuming.ResumeRefused, CorruptCheckpointError, FolderInUseError, ReplayMismatchError)
    with refusals_exit(flags.debug, *refused):
        _train(args, not flags.no_progress, flags.distributed, flags.trust_code)


def help_text() -> str:
    """:return: ``--help``: the flags the package adds, each with its default, then rl-zoo3's (its ``--vec-env`` is
    the package's)"""
    from rl_zoo3.train import train

    parents = [command_parser(), resuming.resume_parser(), zoo.vec_envs.vec_env_parser(None), zoo.vec_envs.ray_parser()]
    defaults = (
        f"--algo {zoo.ALGO_NAME}, --env {zoo.default_env(zoo.ALGO_NAME)}, --conf-file the packaged "
        "zoo_configs/<algo>.yml for the package's algorithms, and a progress bar"
    )
    return command_help("python -m sb3_xppo.train", parents, defaults, train, "--vec-env")


def _train(args: list[str], progress: bool, distributed: bool, trust_code: bool) -> None:
    from rl_zoo3.train import train

    vec_env, args = zoo.split_vec_env_arg(args, default=None)  # None: the entry's vec_env key, else lean
    ray_options, args = zoo.split_ray_args(args)
    plan, args = resuming.split_resume_args(args)
    defaults, known = _default_args(args)
    extra, scratch = rank_args(known) if distributed else ([], None)
    _check_resume(plan, known, distributed)
    if progress and scratch is None:
        defaults.append("--progress")
    before = zoo.find_run_dirs(known.log_folder, known.algo, known.env)
    try:
        session = zoo.zoo_session(
            [*defaults, *args, *extra],
            vec_env=vec_env,
            ray_options=ray_options,
            distributed=distributed,
            trust_code=trust_code,
            resume=None if known.optimize_hyperparameters else plan,
        )
        with session:
            train()
    except resuming.Preempted as stop:
        if plan.rank == 0:
            print(stop)
        return
    finally:
        if scratch is not None:  # a rank other than 0: its run folder was a temporary one
            shutil.rmtree(scratch, ignore_errors=True)
    if known.optimize_hyperparameters or scratch is not None:
        return
    runs = zoo.find_run_dirs(known.log_folder, known.algo, known.env) - before
    for run_dir in sorted(runs | ({plan.run_dir} if plan.run_dir is not None else set())):
        path = zoo.plot_learning_curve(run_dir, known.env, algo=known.algo)
        if path is not None:
            print(f"Learning curve: {path}")
        summary = zoo.summarize_evaluations(run_dir, known.env)
        if summary is not None:
            print(summary)


if __name__ == "__main__":
    main()
