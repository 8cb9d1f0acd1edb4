"""
The main job's resumable runs (docs/guide/resume.md). ``python -m sb3_xppo.train`` writes resumable checkpoints
(:class:`~sb3_xppo.ResumableCheckpoint`) into its run folder's ``resume/``: every ``--checkpoint-minutes`` (default
5, so a run shorter than that writes none; 0: none by time), every ``--checkpoint-rollouts`` where given, and on
SIGTERM (a scheduler's preemption), after which the command exits 0. ``--resume [FOLDER]`` continues the latest run
folder of the algorithm and env, or the one given, to its original budget: in the same folder, the same
``evaluations.npz`` and model, its Monitor files continued from the checkpoint, TensorBoard at its step. Where the
envs cannot be replayed (EnvPool, Ray), ``--inexact`` resumes with them reset afresh, as SB3 does.

This module holds the plan (:class:`ResumePlan`) and what the session wraps rl-zoo3's ``ExperimentManager`` with
(:func:`recording_make_vec_env`, :func:`with_checkpoint`, :func:`resuming_setup`, :func:`stopping_when_preempted`);
:func:`sb3_xppo.zoo.session.install_checkpoints` installs them.
"""

from __future__ import annotations

import argparse
import functools
import os
import pathlib
import types
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from stable_baselines3.common.monitor import Monitor

from sb3_xppo.loading.zoo_files import load_zoo_yaml
from sb3_xppo.resume import ResumableCheckpoint, checkpoints
from sb3_xppo.resume.ranks import rank_folder, written_on_ranks
from sb3_xppo.vec_env.backends import VEC_ENV_CLASSES, recording
from sb3_xppo.zoo.runs import find_run_dirs

#: ``--resume`` without a folder: the latest run folder of the algorithm and env
LATEST = "latest"
#: the checkpoints' folder in a run folder
CHECKPOINT_FOLDER = "resume"
#: ``--checkpoint-minutes``' default
DEFAULT_MINUTES = 5.0
#: rl-zoo3's arguments (its ``args.yml``) that a resumed run must share with the run it continues
SAME_ARGS = (
    "algo",
    "env",
    "n_timesteps",
    "hyperparams",
    "conf_file",
    "env_kwargs",
    "eval_env_kwargs",
    "eval_freq",
    "eval_episodes",
    "n_eval_envs",
    "save_freq",
    "vec_env",
    "gym_packages",
    "tensorboard_log",
)


class ResumeRefused(ValueError):
    """``--resume`` cannot go on: no run to continue, no checkpoint in it, or a command that is not the run's (each
    argument that differs named, with both values). The command prints it as one line, exit status 2."""


class Preempted(Exception):
    """A SIGTERM stopped the run at a rollout boundary, after its checkpoint was written."""

    def __init__(self, checkpoint: pathlib.Path | None, run_dir: str) -> None:
        super().__init__(
            f"SIGTERM: stopped at a rollout boundary, checkpoint {checkpoint} written; continue the run with the same "
            f"command and --resume {run_dir}"
        )


@dataclass
class ResumePlan:
    """What the command asked of checkpoints (:func:`split_resume_args`), and the run it resumes (:meth:`locate`)."""

    #: None: a new run; :data:`LATEST`, a run folder (or its checkpoint folder) or a checkpoint file to continue
    resume: str | None = None
    minutes: float | None = DEFAULT_MINUTES
    rollouts: int | None = None
    #: whether the command gives ``--seed`` (else a resumed run takes the saved one)
    seed_given: bool = False
    #: ``--inexact``: the envs reset afresh on resume (``exact=False``), where they cannot be replayed
    exact: bool = True
    #: the user's ``--log-folder`` (a ``--distributed`` run's other ranks train in temporary ones)
    log_folder: str = "logs"
    #: this process's rank (``--distributed``; 0 otherwise): rank 0 keeps the run folder, the others their own
    rank: int = 0
    run_dir: str | None = None
    #: the checkpoint callback of the run under way
    callback: ResumableCheckpoint | None = None

    def locate(self, algo: str, env_id: str) -> str:
        """
        Find the run to continue and check that it has a checkpoint (this rank's, on ranks).

        :return: its checkpoint folder, or the checkpoint file ``--resume`` named
        :raises ResumeRefused: no run folder, or no checkpoint in it (why named)
        """
        self.run_dir = latest_run(self.log_folder, algo, env_id) if self.resume == LATEST else run_folder(str(self.resume))
        if os.path.isfile(str(self.resume)):
            return str(self.resume)
        folder = os.path.join(self.run_dir, CHECKPOINT_FOLDER)
        if not checkpoints(rank_folder(folder, self.rank) if written_on_ranks(folder) else folder):
            raise ResumeRefused(
                f"--resume: {self.run_dir} has no resumable checkpoint in {folder} (the run ended before its first "
                "one: it was shorter than --checkpoint-minutes, or ran with --checkpoint-minutes 0)"
            )
        return folder

    def describe(self) -> str:
        """:return: when checkpoints are written, in words"""
        when = [f"every {self.minutes:g} min"] if self.minutes is not None else []
        when += [f"every {self.rollouts} rollouts"] if self.rollouts is not None else []
        return ", ".join([*when, "on SIGTERM"])


def split_resume_args(args: Sequence[str]) -> tuple[ResumePlan, list[str]]:
    """
    :param args: command-line arguments, with ``--resume [FOLDER]``, ``--checkpoint-minutes M`` and
        ``--checkpoint-rollouts N`` anywhere (``=`` forms too; no abbreviation)
    :return: the plan they give and the arguments without them
    :raises ResumeRefused: for a negative interval, or ``--inexact`` without ``--resume``
    """
    known, rest = resume_parser().parse_known_args(list(args))
    if known.inexact and known.resume is None:
        raise ResumeRefused("--inexact is an option of --resume (the envs reset afresh instead of replayed)")
    if known.checkpoint_minutes < 0 or (known.checkpoint_rollouts is not None and known.checkpoint_rollouts < 1):
        raise ResumeRefused(
            f"--checkpoint-minutes must be >= 0 (0: none by time) and --checkpoint-rollouts >= 1, got "
            f"{known.checkpoint_minutes} and {known.checkpoint_rollouts}"
        )
    minutes = known.checkpoint_minutes or None
    return ResumePlan(known.resume, minutes, known.checkpoint_rollouts, exact=not known.inexact), rest


def resume_parser() -> argparse.ArgumentParser:
    """:return: the parser of the checkpoint flags, with their help (``python -m sb3_xppo.train --help``)"""
    parser = argparse.ArgumentParser(prog="sb3_xppo.train", add_help=False, allow_abbrev=False)
    parser.add_argument(
        "--resume",
        nargs="?",
        const=LATEST,
        default=None,
        metavar="RUN_OR_CHECKPOINT",
        help="continue a run to its original budget, bit for bit: the latest run of the algorithm and env, or the run "
        "folder or checkpoint file given; from the newest checkpoint that verifies (default: a new run)",
    )
    parser.add_argument(
        "--checkpoint-minutes",
        type=float,
        metavar="M",
        default=DEFAULT_MINUTES,
        help=f"write a resumable checkpoint every M minutes (default: {DEFAULT_MINUTES:g}; 0: none by time)",
    )
    parser.add_argument("--checkpoint-rollouts", type=int, default=None, help="also every N rollouts (default: none by count)")
    parser.add_argument(
        "--inexact", action="store_true", help="--resume with the envs reset afresh, where they cannot be replayed"
    )
    return parser


def _run_number(run_dir: str, env_prefix: str) -> int:
    suffix = os.path.basename(run_dir)[len(env_prefix) + 1 :].split("_")[0]
    return int(suffix) if suffix.isdigit() else -1


def latest_run(log_folder: str, algo: str, env_id: str) -> str:
    """:return: the run folder of ``algo`` on ``env_id`` with the highest run number (``<env>_<n>``)"""
    from huggingface_sb3 import EnvironmentName

    runs = find_run_dirs(log_folder, algo, env_id)
    if not runs:
        raise ResumeRefused(f"--resume: no run of {algo} on {env_id} in {os.path.join(log_folder, algo)} to continue")
    return max(runs, key=functools.partial(_run_number, env_prefix=str(EnvironmentName(env_id))))


def run_folder(path: str) -> str:
    """
    :return: the run folder ``path`` names: itself, the parent of its checkpoint folder, or the run of a checkpoint
        file (``<run>/resume/resume-<step>.ckpt``)
    :raises ResumeRefused: for a path that is none of those
    """
    path = os.path.normpath(path)
    if os.path.isfile(path):
        folder = os.path.dirname(path)
        if os.path.basename(folder) != CHECKPOINT_FOLDER or not os.path.basename(path).endswith(".ckpt"):
            raise ResumeRefused(f"--resume: {path} is not a checkpoint of a run (<run>/{CHECKPOINT_FOLDER}/resume-*.ckpt)")
        return os.path.dirname(folder)
    if not os.path.isdir(path):
        raise ResumeRefused(f"--resume: {path} is neither a run folder nor a checkpoint file")
    return os.path.dirname(path) if os.path.basename(path) == CHECKPOINT_FOLDER else path


def recording_make_vec_env(make_vec_env: Callable[..., Any], plan: ResumePlan) -> Callable[..., Any]:
    """
    :param make_vec_env: SB3's, as rl-zoo3 builds its envs with it
    :return: it with each env of the SB3 VecEnvs in an :class:`~sb3_xppo.vec_env.replay.ActionRecorder` beneath its
        Monitor, and another above the entry's ``env_wrapper`` (the env rebuilt by replay on resume;
        ``vec_env.backends.recording``); a resumed run's Monitor files appended to, not started afresh
    """

    def make(env_id: Any, *args: Any, vec_env_cls: Any = None, monitor_kwargs: Any = None, **kwargs: Any) -> Any:
        if vec_env_cls is None or vec_env_cls in VEC_ENV_CLASSES.values():
            env_id, kwargs = recording(env_id, kwargs)  # (rl-zoo3's env id is a function making the env)
        if plan.resume is not None:
            monitor_kwargs = {**(monitor_kwargs or {}), "override_existing": False}
        return make_vec_env(env_id, *args, vec_env_cls=vec_env_cls, monitor_kwargs=monitor_kwargs, **kwargs)

    return make


def with_checkpoint(create_callbacks: Callable[[Any], None], plan: ResumePlan) -> Callable[[Any], None]:
    """:return: rl-zoo3's ``create_callbacks`` with a :class:`~sb3_xppo.ResumableCheckpoint` first (not with ``-optimize``)"""

    def create(manager: Any) -> None:
        create_callbacks(manager)
        if manager.optimize_hyperparameters:
            return
        folder = os.path.join(manager.save_path, CHECKPOINT_FOLDER)
        seconds = None if plan.minutes is None else plan.minutes * 60
        plan.callback = ResumableCheckpoint(folder, every_rollouts=plan.rollouts, every_seconds=seconds, stop_on_sigterm=True)
        manager.callbacks.insert(0, plan.callback)
        if plan.rank == 0:
            print(f"Resumable checkpoints ({plan.describe()}) in {folder}: continue a run that dies with --resume")

    return create


def resuming_setup(setup: Callable[[Any], Any], plan: ResumePlan) -> Callable[[Any], Any]:
    """
    :return: rl-zoo3's ``setup_experiment``; when resuming, in the run's folder (its Monitor files cut back to the
        checkpoint, the run's arguments checked), and the model it builds replaced by the checkpoint's
    """

    def setup_experiment(manager: Any) -> Any:
        if plan.resume is None:
            return setup(manager)
        folder = plan.locate(manager.algo, manager.env_name.gym_id)
        if plan.rank == 0:  # (the other ranks of a --distributed run keep their temporary folders)
            manager.save_path = plan.run_dir
            manager.params_path = os.path.join(str(plan.run_dir), str(manager.env_name))
            check_same_args(os.path.join(manager.params_path, "args.yml"), manager, plan.seed_given)
        model, saved_hyperparams = setup(manager)
        try:
            resumed = type(model).resume(
                folder, env=model.get_env(), exact=plan.exact, device=manager.device, custom_objects=schedules_of(model)
            )
        except ValueError as error:
            if "exact=False" not in str(error):
                raise
            raise type(error)(f"{error} (python -m sb3_xppo.train: add --inexact to --resume)") from error
        if hasattr(model._data_parallel, "group"):  # (the model built afresh joined the group too: its heartbeat ends)
            model._data_parallel.group.close()
        if plan.rank == 0:
            cut_monitor_files(str(plan.run_dir), resumed.get_env())
            print(f"Resuming {plan.run_dir} (seed {manager.seed}) at {resumed.num_timesteps} steps")
        return resumed, saved_hyperparams

    return setup_experiment


def stopping_when_preempted(learn: Callable[[Any, Any], None], plan: ResumePlan) -> Callable[[Any, Any], None]:
    """:return: rl-zoo3's ``learn``, raising :class:`Preempted` where a SIGTERM stopped it (so no final model is saved)"""

    def learn_or_stop(manager: Any, model: Any) -> None:
        learn(manager, model)
        if plan.callback is not None and plan.callback.preempted:
            raise Preempted(plan.callback.last_path, manager.save_path)

    return learn_or_stop


def schedules_of(model: Any) -> dict[str, Any]:
    """
    :return: the model's functions (rl-zoo3's ``lin_`` schedules, made by the same command): given to ``load`` as
        ``custom_objects``, they stand for the pickled ones in the checkpoint's model, which are then not read
    """
    return {name: value for name, value in vars(model).items() if isinstance(value, (types.FunctionType, functools.partial))}


def check_same_args(path: str, manager: Any, seed_given: bool) -> None:
    """
    The command must be the run's: its arguments of :data:`SAME_ARGS` equal to the saved ``args.yml``, and ``--seed``
    where given the run's own; without ``--seed`` the run's seed is taken (so that the files rl-zoo3 writes again are
    the run's).

    :raises ResumeRefused: naming each argument that differs, with both values
    """
    try:
        saved = dict(load_zoo_yaml(path))
    except (OSError, ValueError) as error:
        warnings.warn(f"--resume: the run's arguments ({path}) were not compared: {error}", stacklevel=2)
        return
    args = vars(manager.args)
    if not seed_given and "seed" in saved:
        args["seed"] = manager.seed = saved["seed"]
    compared = (*SAME_ARGS, "seed") if seed_given and "seed" in saved else SAME_ARGS
    differ = [
        f"{name}: {saved[name]!r} then, {args.get(name)!r} now" for name in compared if saved.get(name) != args.get(name)
    ]
    if differ:
        raise ResumeRefused(
            f"--resume: the command is not the run's ({path}); give the run's own arguments. " + "; ".join(differ)
        )


def cut_monitor_files(run_dir: str, venv: Any) -> None:
    """
    Cut each training env's Monitor file back to the episodes its Monitor has, resumed at the checkpoint (the file's
    header and one row per episode): the episodes after it are run again. The Monitors opened their files to append
    (an append goes to the file's end, wherever that is when it is written), so this may follow their opening.
    """
    for index, monitored in enumerate(venv.env_is_wrapped(Monitor)):
        path = os.path.join(run_dir, f"{index}.monitor.csv")
        if not monitored or not os.path.isfile(path):
            continue
        try:
            episodes = len(venv.get_attr("episode_returns", indices=[index])[0])
        except AttributeError:  # (EnvPool's envs count their episodes in C++: their files are left as they are)
            continue
        with open(path, "r+", newline="\n") as file:
            lines = file.readlines()[: 2 + episodes]
            file.seek(0)
            file.writelines(lines)
            file.truncate()
