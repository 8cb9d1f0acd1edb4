"""
``python -m sb3_xppo.distill`` (also ``python -m sb3_xppo.dagger_distill``, console script ``xppo-distill``):
checkpoint-to-checkpoint DAgger distillation (Ross et al. 2011, https://arxiv.org/abs/1011.0686)::

    python -m sb3_xppo.distill --teacher T.zip --student S.zip --env ENV --timesteps N --out OUT.zip
    python -m sb3_xppo.distill --teacher T.zip --student-algo ppo --env ENV --timesteps N --out OUT.zip

Pure DAgger, no RL: the student acts, the teacher labels every visited state, the student fits the aggregated
dataset with its own optimizer. ``--pretrain-steps N`` first lets the teacher act for N vector steps and fits the
student to those states once (behaviour cloning, :meth:`~sb3_xppo.dagger_distill.DaggerDistiller.pretrain`). OUT is
saved by the student's own class, so ``PPO.load(OUT)`` (or SAC, A2C, ...) continues with stock Stable-Baselines3. A
progress bar shows the loss and the agreement; a final evaluation compares the teacher's and the student's returns.

The student's class comes from ``--student-algo`` or, for ``--student``, from the checkpoint; recurrent and maskable
students are distilled as :class:`~sb3_xppo.dagger_distill.DaggerCallback` distills them (docs/guide/dagger.md). A
recurrent teacher is refused.

A teacher trained by rl-zoo3 (``logs/<algo>/<env>_<id>/<env>.zip`` or ``best_model.zip``) comes with its settings in
``logs/<algo>/<env>_<id>/<env>/``, read through :mod:`sb3_xppo.zoo` (:func:`~sb3_xppo.zoo.agent_settings`) as
``rl_zoo3.enjoy`` reads them: the env is built by rl-zoo3's ``create_test_env`` with the config's
``env_wrapper`` / ``vec_env_wrapper`` and the ``env_kwargs`` of ``config.yml`` and ``args.yml`` (``--env-kwargs``
overrides), and when the config says ``normalize`` the teacher reads observations normalized by its
``vecnormalize.pkl`` (frozen). The student acts on the raw observations.

No code from the files runs (docs/guide/security.md): the checkpoints and the ``.pkl`` statistics are read with an
allowlist (:func:`sb3_xppo.load_model`), the zoo folder's YAML with a safe loader and its ``normalize`` string, like
``--policy-kwargs`` and ``--env-kwargs``, as literals. ``--trust-code`` loads the checkpoints and statistics as SB3
does, for files you made or trust (a teacher with a schedule of your own).

The flags of the distillation's options (``--loss``, ``--beta``, ``--trust-code``, ...: ``--help`` lists them) are made
from their declarations in :class:`~sb3_xppo.dagger_distill.DistillOptions` and checked by it.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import pathlib
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import Field, fields
from typing import Any

import torch as th
from gymnasium import spaces
from sb3_contrib import RecurrentPPO
from sb3_contrib.common.maskable.evaluation import evaluate_policy as evaluate_masked_policy
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.utils import get_device, set_random_seed
from stable_baselines3.common.vec_env import VecEnv
from tqdm.auto import tqdm

from sb3_xppo.dagger_distill.actions import action_clipper, agreement_atol
from sb3_xppo.dagger_distill.checkpoints import load_sb3_model, resolve_algo
from sb3_xppo.dagger_distill.checks import check_action_spaces, check_feed_forward_teacher, check_teacher_statistics
from sb3_xppo.dagger_distill.distiller import DaggerDistiller
from sb3_xppo.dagger_distill.env_adapter import SB3VecEnvAdapter
from sb3_xppo.dagger_distill.options import LOSSES, DistillOptions, Flag
from sb3_xppo.dagger_distill.policy_adapter import PolicyAdapter, student_optimizer
from sb3_xppo.dagger_distill.policy_input import PolicyInput, is_maskable, is_recurrent, obs_of
from sb3_xppo.dagger_distill.teacher_obs import TeacherObs, frozen_vec_normalize, select_space, teacher_obs_keys
from sb3_xppo.loading.literals import python_literal
from sb3_xppo.loading.signing import signed_save
from sb3_xppo.ppo_mask_recurrent import evaluate_policy as evaluate_masked_recurrent

__all__ = ["LOSSES", "distill", "main", "parse_args"]

#: the command's own counts (the options' are DistillOptions'), with their least value
COUNTS = {"n_envs": 1, "timesteps": 1, "collect_steps": 1, "epochs": 1}


def _option_flags() -> Iterator[tuple[Field, Flag, str]]:
    """The options the command reads, each with its declared :class:`~sb3_xppo.dagger_distill.options.Flag` and name."""
    for f in fields(DistillOptions):
        flag: Flag | None = f.metadata["flag"]
        if flag is not None:
            yield f, flag, flag.name or "--" + f.name.replace("_", "-")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """
    The command line: the command's own flags, and one per option of :class:`~sb3_xppo.dagger_distill.DistillOptions`
    the command reads, made from its declaration.

    :param argv: arguments (default: ``sys.argv[1:]``)
    :return: the parsed arguments
    """
    parser = argparse.ArgumentParser(
        prog="python -m sb3_xppo.distill",
        description="Distill an SB3 teacher checkpoint into a student checkpoint with DAgger (no RL).",
    )
    parser.add_argument(
        "--teacher",
        required=True,
        help="teacher checkpoint (.zip), or an rl-zoo3 run folder (logs/<algo>/<env>_<id>/: its <env>.zip, else its "
        "best_model.zip)",
    )
    parser.add_argument("--student", default=None, help="student checkpoint (.zip) to distill into")
    parser.add_argument(
        "--student-algo",
        default=None,
        help="algorithm of a fresh student (ppo, a2c, xppo, trpo, ppo_mask, xppo_mask, ppo_lstm, xppo_lstm, xppo_mask_lstm, "
        "sac, td3), or of --student (default: inferred from the checkpoint)",
    )
    parser.add_argument(
        "--policy",
        default=None,
        help="policy of a fresh student (default: MlpPolicy, MultiInputPolicy for Dict; MlpLstmPolicy, "
        "MultiInputLstmPolicy for recurrent students)",
    )
    parser.add_argument(
        "--policy-kwargs", default=None, help='policy_kwargs of a fresh student, e.g. "dict(net_arch=[64, 64])"'
    )
    parser.add_argument("--env", required=True, help="gymnasium environment id")
    parser.add_argument(
        "--env-kwargs", nargs="+", default=None, metavar="KEY:VALUE", help="keyword arguments of the env (rl-zoo3's format)"
    )
    parser.add_argument(
        "--env-wrapper", nargs="+", default=None, help="gymnasium wrappers (module.Class), instead of the zoo config's"
    )
    parser.add_argument(
        "--no-teacher-vec-normalize", action="store_true", help="the teacher reads raw observations, whatever the config"
    )
    parser.add_argument(
        "--no-zoo-config", action="store_true", help="ignore the rl-zoo3 settings saved beside the teacher checkpoint"
    )
    parser.add_argument("--n-envs", type=int, default=8, help="parallel environments")
    parser.add_argument("--timesteps", type=int, required=True, help="environment steps to collect")
    parser.add_argument("--out", required=True, help="where to save the distilled student (.zip)")
    parser.add_argument("--collect-steps", type=int, default=64, help="vector steps per DAgger iteration")
    parser.add_argument("--epochs", type=int, default=10, help="gradient passes per iteration, counted in new states")
    parser.add_argument("--lr", type=float, default=None, help="learning rate (default: the student's)")
    parser.add_argument("--eval-episodes", type=int, default=10, help="episodes of the final evaluation (0: none)")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument("--device", default="auto", help="torch device")
    parser.add_argument("--no-progress-bar", action="store_true", help="hide the progress bar")
    for f, flag, name in _option_flags():
        default = f.default if flag.default is None else flag.default
        if flag.type is None:  # a switch
            parser.add_argument(name, dest=f.name, action="store_true", help=flag.help)
            continue
        shown = "" if default is None else f" (default: {default})"
        parser.add_argument(
            name, dest=f.name, type=flag.type, nargs=flag.nargs, default=default, choices=flag.choices, help=flag.help + shown
        )
    return parser.parse_args(argv)


def command_options(args: argparse.Namespace) -> DistillOptions:
    """
    :param args: the parsed command line
    :return: the distillation's options its flags give, checked by their declarations
    :raises ValueError: for a value an option refuses (or a count of the command's own out of range)
    """
    for name, low in COUNTS.items():
        if getattr(args, name) < low:
            raise ValueError(f"--{name.replace('_', '-')} must be >= {low}, got {getattr(args, name)}")
    given, flags = {}, {}
    for f, flag, name in _option_flags():
        value = getattr(args, f.name)
        given[f.name] = value if flag.to_option is None or value is None else flag.to_option(value)
        flags[f.name] = name
    try:
        return DistillOptions(**given)
    except (TypeError, ValueError) as error:  # a usage error, named by its flag
        message = str(error)
        name = message.split(" ", 1)[0]
        raise ValueError(flags[name] + message[len(name) :] if name in flags else message) from None


class _TeacherPredictor:
    """The teacher on the raw observations, for ``evaluate_policy``: it reads its keys, normalized by its statistics."""

    def __init__(self, model: BaseAlgorithm, teacher_obs: TeacherObs) -> None:
        self.model, self.teacher_obs = model, teacher_obs

    def predict(self, observation: Any, state: Any = None, episode_start: Any = None, deterministic: bool = False) -> Any:
        return self.model.predict(self.teacher_obs.numpy(observation), state, episode_start, deterministic)


def _policy_kwargs(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    # rl-zoo3's convention: "dict(net_arch=[64, 64], activation_fn=nn.ReLU)", read as a literal, never run
    kwargs = python_literal(text, "--policy-kwargs")
    if not isinstance(kwargs, dict):
        raise ValueError(f"--policy-kwargs must give a dict, got {kwargs!r}")
    return kwargs


def _env_kwargs(items: Sequence[str] | None) -> dict[str, Any]:
    """``key:value`` pairs, the value a Python literal (rl-zoo3's ``--env-kwargs``)."""
    kwargs: dict[str, Any] = {}
    for item in items or []:
        key, colon, value = item.partition(":")
        if not key or not colon:
            raise ValueError(f"--env-kwargs takes key:value pairs, got {item!r}")
        kwargs[key] = python_literal(value, f"--env-kwargs {key}")
    return kwargs


class TeacherEnv:
    """
    The env the teacher was trained in and its ``VecNormalize`` statistics: from the rl-zoo3 run it comes from, read
    through :func:`sb3_xppo.zoo.agent_settings` (as ``rl_zoo3.enjoy`` reads it), and the command line.

    :param args: the parsed command line
    :param options: the distillation's options (``teacher_vec_normalize``)
    """

    def __init__(self, args: argparse.Namespace, options: DistillOptions) -> None:
        env_kwargs = _env_kwargs(args.env_kwargs)
        self.vec_normalize_path: str | None = None
        self._make: Callable[[int, int], VecEnv]
        if importlib.util.find_spec("rl_zoo3") is None:
            # Without rl-zoo3 its settings cannot be read: refuse to ignore them silently
            folder = pathlib.Path(args.teacher).parent / args.env.replace("/", "-")
            saved = any((folder / name).is_file() for name in ("config.yml", "vecnormalize.pkl"))
            if args.env_wrapper is not None or (saved and not args.no_zoo_config):
                what = "--env-wrapper" if args.env_wrapper is not None else f"the teacher's rl-zoo3 settings in {folder}"
                raise ValueError(
                    f"{what} need rl-zoo3: pip install sb3-xppo[extra], or pass --no-zoo-config (and --teacher-vec-normalize)"
                )
            self._make = lambda n_envs, seed: make_vec_env(args.env, n_envs=n_envs, seed=seed, env_kwargs=env_kwargs)
        else:
            from sb3_xppo import zoo

            saved = not args.no_zoo_config
            settings = zoo.agent_settings(args.teacher, args.env, saved=saved, trust_code=options.trust_code)
            hyperparams = dict(settings.hyperparams)
            if args.env_wrapper is not None:
                hyperparams["env_wrapper"] = args.env_wrapper
            settings = settings._replace(hyperparams=hyperparams, env_kwargs={**settings.env_kwargs, **env_kwargs})
            self.vec_normalize_path = settings.vec_normalize_path
            self._make = lambda n_envs, seed: settings.make_env(args.env, n_envs, seed)
        if options.teacher_vec_normalize is not None:
            self.vec_normalize_path = str(options.teacher_vec_normalize)
        if args.no_teacher_vec_normalize:
            self.vec_normalize_path = None

    def make_env(self, n_envs: int, seed: int) -> VecEnv:
        """:return: the env as the teacher was trained in, without its normalization (the teacher gets that itself)"""
        return self._make(n_envs, seed)


def teacher_checkpoint(teacher: str, env_id: str) -> str:
    """
    :param teacher: ``--teacher``: a checkpoint, or an rl-zoo3 run folder (``logs/<algo>/<env>_<id>/``)
    :param env_id: ``--env``
    :return: the checkpoint: the file, or the run's final model (``<env>.zip``), else its best (``best_model.zip``)
    :raises ValueError: for a folder with neither
    """
    folder = pathlib.Path(teacher)
    if not folder.is_dir():
        return teacher
    candidates = [folder / f"{env_id.replace('/', '-')}.zip", folder / "best_model.zip"]
    found = next((path for path in candidates if path.is_file()), None)
    if found is None:
        raise ValueError(f"--teacher {teacher} is a folder without {' or '.join(p.name for p in candidates)}")
    return str(found)


def _pretrain(distiller: DaggerDistiller, steps: int, epochs: int) -> int:
    """The behaviour-cloning warm-up of ``--pretrain-steps`` (``--epochs`` passes): the states it collected."""
    if steps == 0:
        return 0
    warm = distiller.pretrain(steps, epochs=epochs)
    print(
        f"pretrained on {int(warm['collected'])} states of the teacher's rollout: loss {warm['loss']:.3f}, agreement "
        f"{warm['agreement']:.2f} before the fit, {warm['train_agreement']:.2f} during it"
    )
    return int(warm["collected"])


def distill(args: argparse.Namespace) -> dict[str, float]:
    """
    Run the distillation the arguments describe, save the student, evaluate both.

    :param args: parsed arguments (see :func:`parse_args`)
    :return: ``collected`` steps (DAgger's; the warm-up's are ``pretrain_collected``), final ``loss`` and
        ``agreement``, the share of ``forbidden_labels`` (teacher labels
        a maskable student's masks forbid; 0 for other students), and the mean evaluation returns
        ``teacher_return`` and ``student_return`` (NaN without evaluation)
    """
    options = command_options(args)
    if args.student is None and args.student_algo is None:
        raise ValueError("pass --student S.zip (a checkpoint to distill into) or --student-algo ALGO (a fresh student)")
    set_random_seed(args.seed)
    device = get_device(args.device)
    args.teacher = teacher_checkpoint(args.teacher, args.env)
    teacher = load_sb3_model(args.teacher, options.teacher_algo, device=device, trust_code=options.trust_code)
    check_feed_forward_teacher(teacher.policy)
    teacher_env = TeacherEnv(args, options)
    venv = teacher_env.make_env(args.n_envs, args.seed)
    student = _student(args, options, venv, device)
    check_action_spaces(teacher.action_space, student.action_space)
    teacher_obs = _teacher_obs(options, teacher_env, teacher, student)
    distiller = _distiller(args, options, teacher, student, venv, teacher_obs)
    teacher.policy.set_training_mode(False)
    pretrain_collected = _pretrain(distiller, options.pretrain_steps, args.epochs)
    collected, stats = _dagger(distiller, args)
    student.num_timesteps += collected + pretrain_collected
    signed_save(student.save, args.out)  # the package's file: it loads as SB3 loads it (docs/guide/security.md)
    print(f"saved the student ({type(student).__name__}) to {args.out} after {collected} steps")
    if is_maskable(student.policy):
        print(f"{stats['forbidden_labels']:.1%} of the teacher's labels were actions the masks forbid (not fitted)")

    result = dict(
        collected=float(collected),
        pretrain_collected=float(pretrain_collected),
        **stats,
        teacher_return=math.nan,
        student_return=math.nan,
    )
    if args.eval_episodes > 0:
        returns = _evaluate(args, teacher_env, _TeacherPredictor(teacher, teacher_obs), student)
        result.update(teacher_return=returns["teacher"], student_return=returns["student"])
    venv.close()
    return result


def _student(args: argparse.Namespace, options: DistillOptions, venv: Any, device: th.device) -> BaseAlgorithm:
    """The student: ``--student``'s checkpoint on ``venv``, else a fresh ``--student-algo`` model."""
    if args.student is not None:
        return load_sb3_model(args.student, args.student_algo, device=device, env=venv, trust_code=options.trust_code)
    algo: Any = resolve_algo(args.student_algo)
    kind = "Lstm" if issubclass(algo, RecurrentPPO) else ""
    policy = args.policy or (
        f"MultiInput{kind}Policy" if isinstance(venv.observation_space, spaces.Dict) else f"Mlp{kind}Policy"
    )
    return algo(policy, venv, seed=args.seed, device=device, policy_kwargs=_policy_kwargs(args.policy_kwargs))


def _teacher_obs(
    options: DistillOptions, teacher_env: TeacherEnv, teacher: BaseAlgorithm, student: BaseAlgorithm
) -> TeacherObs:
    """What the teacher reads of the student's observations: its keys, normalized by the zoo run's statistics."""
    keys = teacher_obs_keys(student.observation_space, teacher.observation_space, options.teacher_obs_keys)
    path = teacher_env.vec_normalize_path
    if path is None:
        return TeacherObs(keys)
    vec_normalize = frozen_vec_normalize(path, options.trust_code)
    teacher_space = select_space(student.observation_space, keys)
    check_teacher_statistics(vec_normalize, teacher_space, f"--teacher-vec-normalize {path}")
    print(f"the teacher reads observations normalized by {path}")
    return TeacherObs(keys, vec_normalize)


def _distiller(
    args: argparse.Namespace,
    options: DistillOptions,
    teacher: BaseAlgorithm,
    student: BaseAlgorithm,
    venv: Any,
    teacher_obs: TeacherObs,
) -> DaggerDistiller:
    """The distiller of the student and the teacher in ``venv``, with the student's optimizer."""
    # The teacher's (normalized) observations, stored beside the student's; without statistics the adapter selects.
    # A maskable teacher reads a maskable student's action masks too (as in the callback)
    teacher_state_fn = None
    if teacher_obs.vec_normalize is not None:

        def teacher_state_fn(states: Any, info: Any, step: int) -> Any:
            obs = teacher_obs(obs_of(states), student.device)
            if is_maskable(teacher.policy) and isinstance(states, PolicyInput) and "action_masks" in states:
                return PolicyInput(obs=obs, action_masks=states["action_masks"])
            return obs

    optimizer = student_optimizer(student)
    if args.lr is not None:
        for group in optimizer.param_groups:
            group["lr"] = args.lr
    space = student.action_space
    return DaggerDistiller(
        PolicyAdapter(student.policy),
        PolicyAdapter(teacher.policy, None if teacher_state_fn is not None else teacher_obs.keys),
        options=options,
        teacher_state_fn=teacher_state_fn,
        env=SB3VecEnvAdapter(venv, student.device, student.policy),
        optimizer=optimizer,
        max_grad_norm=getattr(student, "max_grad_norm", None) or None,  # TRPO stores 0: no clipping
        label_transform=action_clipper(space, student.device),
        agreement_atol=agreement_atol(space, student.device),
        device=student.device,
    )


def _dagger(distiller: DaggerDistiller, args: argparse.Namespace) -> tuple[int, dict[str, float]]:
    """DAgger for ``--timesteps`` steps: the states collected, and the last ``loss``, ``agreement``, ``forbidden_labels``."""
    collected, stats = 0, {"loss": math.nan, "agreement": math.nan, "forbidden_labels": math.nan}
    forbidden = 0.0
    with tqdm(total=args.timesteps, unit="step", disable=args.no_progress_bar, desc="DAgger") as bar:
        while collected < args.timesteps:
            steps = min(args.collect_steps, math.ceil((args.timesteps - collected) / args.n_envs))
            new_states = steps * args.n_envs
            out = distiller.step(steps, gradient_steps=math.ceil(new_states * args.epochs / distiller.batch_size))
            collected += int(out["collected"])
            forbidden += out["forbidden_labels"] * out["collected"]
            stats = {"loss": out["loss"], "agreement": out["agreement"], "forbidden_labels": forbidden / collected}
            bar.update(int(out["collected"]))
            bar.set_postfix(loss=f"{out['loss']:.3f}", agreement=f"{out['agreement']:.2f}")
    return collected, stats


def _evaluate(args: argparse.Namespace, teacher_env: TeacherEnv, teacher: Any, student: BaseAlgorithm) -> dict[str, float]:
    """The teacher's and the student's mean returns over ``--eval-episodes`` deterministic episodes, printed."""
    eval_env = teacher_env.make_env(1, args.seed + 1000)
    returns: dict[str, tuple[float, float]] = {}
    for name, model in (("teacher", teacher), ("student", student)):
        # A maskable student acts with the env's masks, as it was trained to (and a recurrent one carries its LSTM
        # state, which sb3-contrib's masked evaluate_policy drops)
        evaluate: Any = evaluate_policy
        if name == "student" and is_maskable(student.policy):
            evaluate = evaluate_masked_recurrent if is_recurrent(student.policy) else evaluate_masked_policy
        mean, std = evaluate(model, eval_env, n_eval_episodes=args.eval_episodes)
        returns[name] = (float(mean), float(std))  # type: ignore[arg-type]  # floats without return_episode_rewards
    print(f"{'':8} {'mean return':>12} {'std':>8}   ({args.eval_episodes} episodes, deterministic)")
    for name, (mean, std) in returns.items():
        print(f"{name:8} {mean:12.2f} {std:8.2f}")
    eval_env.close()
    return {name: mean for name, (mean, _) in returns.items()}


def main(argv: Sequence[str] | None = None) -> int:
    """
    Entry point of ``python -m sb3_xppo.distill``, ``python -m sb3_xppo.dagger_distill`` and ``xppo-distill``.

    :param argv: arguments (default: ``sys.argv[1:]``)
    :return: exit status (2 for a usage error)
    """
    args = parse_args(argv)
    try:
        distill(args)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
