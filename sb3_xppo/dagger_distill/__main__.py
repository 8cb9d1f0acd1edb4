"""
Checkpoint-to-checkpoint DAgger distillation (Ross et al. 2011, https://arxiv.org/abs/1011.0686)::

    python -m sb3_xppo.dagger_distill --teacher T.zip --student S.zip --env ENV --timesteps N --out OUT.zip
    python -m sb3_xppo.dagger_distill --teacher T.zip --student-algo ppo --env ENV --timesteps N --out OUT.zip

Pure DAgger, no RL: the student acts, the teacher labels every visited state, the student fits the aggregated
dataset with its own optimizer. OUT is saved by the student's own class, so ``PPO.load(OUT)`` (or SAC, A2C, ...)
continues with stock Stable-Baselines3. A progress bar shows the loss and the agreement; a final evaluation compares
the teacher's and the student's returns.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
from collections.abc import Sequence
from typing import Any

import torch as th
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.utils import get_device, set_random_seed
from tqdm.auto import tqdm

from sb3_xppo.dagger_distill.adapters import (
    ObsKeys,
    PolicyAdapter,
    SB3VecEnvAdapter,
    action_clipper,
    load_sb3_model,
    resolve_algo,
    same_action_space,
    select_obs,
    student_optimizer,
    teacher_obs_keys,
)
from sb3_xppo.dagger_distill.distiller import DaggerDistiller
from sb3_xppo.dagger_distill.objectives import Objective, kl_loss, mse_loss, nll_loss

LOSSES: dict[str, Objective] = {
    "nll": nll_loss,
    "kl": kl_loss,
    "reverse_kl": functools.partial(kl_loss, reverse=True),
    "mse": mse_loss,
}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """
    The command line.

    :param argv: arguments (default: ``sys.argv[1:]``)
    :return: the parsed arguments
    """
    parser = argparse.ArgumentParser(
        prog="python -m sb3_xppo.dagger_distill",
        description="Distill an SB3 teacher checkpoint into a student checkpoint with DAgger (no RL).",
    )
    parser.add_argument("--teacher", required=True, help="teacher checkpoint (.zip)")
    parser.add_argument("--teacher-algo", default=None, help="algorithm of the teacher checkpoint (default: inferred)")
    parser.add_argument("--student", default=None, help="student checkpoint (.zip) to distill into")
    parser.add_argument(
        "--student-algo",
        default=None,
        help="algorithm of a fresh student (ppo, a2c, xppo, trpo, ppo_mask, sac, td3), or of --student (default: inferred)",
    )
    parser.add_argument(
        "--policy", default=None, help="policy of a fresh student (default: MlpPolicy, MultiInputPolicy for Dict)"
    )
    parser.add_argument(
        "--policy-kwargs", default=None, help='policy_kwargs of a fresh student, e.g. "dict(net_arch=[64, 64])"'
    )
    parser.add_argument("--env", required=True, help="gymnasium environment id")
    parser.add_argument("--n-envs", type=int, default=8, help="parallel environments")
    parser.add_argument("--timesteps", type=int, required=True, help="environment steps to collect")
    parser.add_argument("--out", required=True, help="where to save the distilled student (.zip)")
    parser.add_argument("--loss", choices=sorted(LOSSES), default="nll", help="distillation objective")
    parser.add_argument("--collect-steps", type=int, default=64, help="vector steps per DAgger iteration")
    parser.add_argument("--epochs", type=int, default=10, help="gradient passes per iteration, counted in new states")
    parser.add_argument("--batch-size", type=int, default=64, help="minibatch size")
    parser.add_argument("--lr", type=float, default=None, help="learning rate (default: the student's)")
    parser.add_argument("--buffer-size", type=int, default=100_000, help="size of the aggregated dataset")
    parser.add_argument("--beta", type=float, default=0.0, help="probability of executing the teacher's action")
    parser.add_argument("--teacher-obs-keys", nargs="+", default=None, help="keys of a Dict observation the teacher reads")
    parser.add_argument("--eval-episodes", type=int, default=10, help="episodes of the final evaluation (0: none)")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument("--device", default="auto", help="torch device")
    parser.add_argument("--no-progress-bar", action="store_true", help="hide the progress bar")
    return parser.parse_args(argv)


class _KeySelectingPredictor:
    """A model that reads some keys of a Dict observation, for ``evaluate_policy``."""

    def __init__(self, model: BaseAlgorithm, keys: ObsKeys) -> None:
        self.model, self.keys = model, keys

    def predict(self, observation: Any, state: Any = None, episode_start: Any = None, deterministic: bool = False) -> Any:
        return self.model.predict(select_obs(observation, self.keys), state, episode_start, deterministic)


def _policy_kwargs(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    # rl-zoo3's convention: a Python expression such as "dict(net_arch=[64, 64], activation_fn=nn.ReLU)"
    kwargs = eval(text, {"__builtins__": {}}, {"dict": dict, "nn": th.nn, "th": th})
    if not isinstance(kwargs, dict):
        raise ValueError(f"--policy-kwargs must give a dict, got {kwargs!r}")
    return kwargs


def distill(args: argparse.Namespace) -> dict[str, float]:
    """
    Run the distillation the arguments describe, save the student, evaluate both.

    :param args: parsed arguments (see :func:`parse_args`)
    :return: ``collected`` steps, final ``loss`` and ``agreement``, and the mean evaluation returns
        ``teacher_return`` and ``student_return`` (NaN without evaluation)
    """
    for name in ("n_envs", "timesteps", "collect_steps", "epochs", "batch_size", "buffer_size"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.student is None and args.student_algo is None:
        raise ValueError("pass --student S.zip (a checkpoint to distill into) or --student-algo ALGO (a fresh student)")
    set_random_seed(args.seed)
    device = get_device(args.device)
    teacher = load_sb3_model(args.teacher, args.teacher_algo, device=device)
    venv = make_vec_env(args.env, n_envs=args.n_envs, seed=args.seed)
    if args.student is not None:
        student = load_sb3_model(args.student, args.student_algo, device=device, env=venv)
    else:
        policy = args.policy or ("MultiInputPolicy" if isinstance(venv.observation_space, spaces.Dict) else "MlpPolicy")
        algo: Any = resolve_algo(args.student_algo)
        student = algo(policy, venv, seed=args.seed, device=device, policy_kwargs=_policy_kwargs(args.policy_kwargs))
    if not same_action_space(teacher.action_space, student.action_space):
        raise ValueError(f"the teacher acts in {teacher.action_space} but the student in {student.action_space}")
    obs_keys = args.teacher_obs_keys[0] if args.teacher_obs_keys and len(args.teacher_obs_keys) == 1 else args.teacher_obs_keys
    keys = teacher_obs_keys(student.observation_space, teacher.observation_space, obs_keys)

    optimizer = student_optimizer(student)
    if args.lr is not None:
        for group in optimizer.param_groups:
            group["lr"] = args.lr
    space = student.action_space
    atol: float | th.Tensor = 0.1
    if isinstance(space, spaces.Box):
        atol = th.as_tensor(0.05 * (space.high - space.low), dtype=th.float32, device=student.device)
    distiller = DaggerDistiller(
        PolicyAdapter(student.policy),
        PolicyAdapter(teacher.policy, keys),
        loss_fn=LOSSES[args.loss],
        env=SB3VecEnvAdapter(venv, student.device),
        optimizer=optimizer,
        batch_size=args.batch_size,
        max_dataset_size=args.buffer_size,
        beta=args.beta,
        max_grad_norm=getattr(student, "max_grad_norm", None) or None,  # TRPO stores 0: no clipping
        label_transform=action_clipper(space, student.device),
        agreement_atol=atol,
        device=student.device,
    )
    teacher.policy.set_training_mode(False)
    collected, stats = 0, {"loss": math.nan, "agreement": math.nan}
    with tqdm(total=args.timesteps, unit="step", disable=args.no_progress_bar, desc="DAgger") as bar:
        while collected < args.timesteps:
            steps = min(args.collect_steps, math.ceil((args.timesteps - collected) / args.n_envs))
            new_states = steps * args.n_envs
            out = distiller.step(steps, gradient_steps=math.ceil(new_states * args.epochs / args.batch_size))
            collected += int(out["collected"])
            stats = {"loss": out["loss"], "agreement": out["agreement"]}
            bar.update(int(out["collected"]))
            bar.set_postfix(loss=f"{out['loss']:.3f}", agreement=f"{out['agreement']:.2f}")
    student.num_timesteps += collected
    student.save(args.out)
    print(f"saved the student ({type(student).__name__}) to {args.out} after {collected} steps")

    result = dict(collected=float(collected), **stats, teacher_return=math.nan, student_return=math.nan)
    if args.eval_episodes > 0:
        eval_env = make_vec_env(args.env, n_envs=1, seed=args.seed + 1000)
        returns: dict[str, tuple[float, float]] = {}
        for name, model in (("teacher", _KeySelectingPredictor(teacher, keys)), ("student", student)):
            mean, std = evaluate_policy(model, eval_env, n_eval_episodes=args.eval_episodes)  # type: ignore[arg-type]
            returns[name] = (float(mean), float(std))  # type: ignore[arg-type]  # floats without return_episode_rewards
        print(f"{'':8} {'mean return':>12} {'std':>8}   ({args.eval_episodes} episodes, deterministic)")
        for name, (mean, std) in returns.items():
            print(f"{name:8} {mean:12.2f} {std:8.2f}")
        result.update(teacher_return=returns["teacher"][0], student_return=returns["student"][0])
        eval_env.close()
    venv.close()
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """
    Entry point of ``python -m sb3_xppo.dagger_distill`` and ``xppo-distill``.

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
