"""
``--vec-env`` and an entry's ``vec_env`` key: rl-zoo3's choice of VecEnv class (``dummy``, ``subproc``) plus ``lean``
(:class:`~sb3_xppo.vec_env.LeanVecEnv`), the default of ``python -m sb3_xppo.train``, and ``envpool``
(:class:`~sb3_xppo.vec_env.EnvPoolVecEnv`, the env id's EnvPool twin), and ``ray`` (:class:`~sb3_xppo.vec_env.RayVecEnv`,
the envs in Ray actors on a cluster's nodes: ``--ray-address`` and ``--ray-envs-per-actor``, :func:`split_ray_args`).

The choices are :mod:`sb3_xppo.vec_env`'s backends (:data:`~sb3_xppo.vec_env.VEC_ENV_FACTORIES`). rl-zoo3's parser
accepts only its own two names and its ``ExperimentManager`` maps them to a class itself; its one hook is the class
attribute ``ExperimentManager.default_vec_env_cls`` (meant for special VecEnvs), which wins over ``--vec-env``. So the
command takes ``--vec-env`` out of the arguments (:func:`split_vec_env_arg`), hands rl-zoo3 ``--vec-env dummy`` for
the others and sets the hook while the command runs (:func:`sb3_xppo.zoo.session.install_vec_env`). A run's
``args.yml`` then records ``vec_env: dummy``: for ``lean``, whose numbers are ``DummyVecEnv``'s bit for bit. rl-zoo3
makes its training envs without a render mode.

A config entry may choose its VecEnv with the key ``vec_env`` (:data:`VEC_ENV_KEY`, e.g. ``vec_env: envpool``, also
``-params vec_env:"'envpool'"``), which a ``--vec-env`` on the command line overrides. rl-zoo3 would hand the key to
the model's constructor: while the command runs, ``ExperimentManager._preprocess_hyperparams`` (where rl-zoo3 takes
its own keys out of an entry, and which offers no hook) takes it out first (:func:`pop_vec_env_key`). The run's
``config.yml`` keeps it.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Sequence
from typing import Any

from stable_baselines3.common.vec_env import VecEnv

from sb3_xppo.vec_env import VEC_ENV_FACTORIES, RayVecEnv

#: the ``--vec-env`` choices of ``python -m sb3_xppo.train``, and of an entry's ``vec_env`` key: the backends
VEC_ENV_CHOICES: tuple[str, ...] = tuple(VEC_ENV_FACTORIES)
#: its default (rl-zoo3's is ``dummy``)
DEFAULT_VEC_ENV = "lean"
#: the key of a config entry that chooses the entry's VecEnv, one of :data:`VEC_ENV_CHOICES`
VEC_ENV_KEY = "vec_env"
#: the choices rl-zoo3's own ``--vec-env`` knows; the others are given to it as ``dummy`` and set through its hook
ZOO_OWN = ("dummy", "subproc")


def split_vec_env_arg(args: Sequence[str], default: str | None = DEFAULT_VEC_ENV) -> tuple[str | None, list[str]]:
    """
    :param args: command-line arguments (``--vec-env NAME`` or ``--vec-env=NAME`` anywhere, the last one counting;
        no abbreviation)
    :param default: what to return when none is given (None: tell that none was)
    :return: the chosen name (``default`` if none) and the arguments without ``--vec-env``
    """
    known, rest = vec_env_parser(default).parse_known_args(list(args))
    return known.vec_env, rest


def vec_env_parser(default: str | None = DEFAULT_VEC_ENV) -> argparse.ArgumentParser:
    """:return: the parser of ``--vec-env`` and the Ray options, with their help (``python -m sb3_xppo.train --help``)"""
    parser = argparse.ArgumentParser(prog="sb3_xppo.train", add_help=False, allow_abbrev=False)
    parser.add_argument(
        "--vec-env",
        choices=VEC_ENV_CHOICES,
        default=default,
        help=f"the VecEnv (default: the entry's {VEC_ENV_KEY!r} key, else {DEFAULT_VEC_ENV}: DummyVecEnv's numbers, "
        "faster); envpool and ray besides rl-zoo3's dummy and subproc",
    )
    return parser


def ray_parser() -> argparse.ArgumentParser:
    """:return: the parser of ``--vec-env ray``'s options, with their help"""
    parser = argparse.ArgumentParser(prog="sb3_xppo.train", add_help=False, allow_abbrev=False)
    parser.add_argument(
        "--ray-address", dest="address", default=None, help="--vec-env ray: the cluster to join (default: a local Ray)"
    )
    parser.add_argument(
        "--ray-envs-per-actor",
        dest="envs_per_actor",
        type=int,
        default=None,
        help="--vec-env ray: envs per actor (default: 1)",
    )
    return parser


def split_ray_args(args: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """
    :param args: command-line arguments, with ``--ray-address ADDRESS`` (the Ray cluster to join: ``auto``, or the
        ``host:port`` of its head; by default a local Ray instance, or the cluster ``RAY_ADDRESS`` names) and
        ``--ray-envs-per-actor N`` (default 1) anywhere (``=`` forms too; no abbreviation)
    :return: the :class:`~sb3_xppo.vec_env.RayVecEnv` keywords they give (``address``, ``envs_per_actor``) and the
        arguments without them
    """
    known, rest = ray_parser().parse_known_args(list(args))
    return {key: value for key, value in vars(known).items() if value is not None}, rest


def check_vec_env_name(name: Any) -> str:
    """
    :param name: an entry's ``vec_env`` value
    :return: it, one of :data:`VEC_ENV_CHOICES`
    :raises ValueError: for anything else, naming the choices
    """
    if name not in VEC_ENV_CHOICES:
        raise ValueError(
            f"{VEC_ENV_KEY}: {name!r} is not a VecEnv of python -m sb3_xppo.train: choose one of {VEC_ENV_CHOICES}"
        )
    return name


def vec_env_factory(choice: str, ray_options: dict[str, Any] | None = None) -> Callable[..., VecEnv]:
    """
    :param choice: one of :data:`VEC_ENV_CHOICES`
    :param ray_options: the :class:`~sb3_xppo.vec_env.RayVecEnv` keywords of ``ray`` (:func:`split_ray_args`)
    :return: what rl-zoo3's ``ExperimentManager`` builds its envs with, called as ``factory(env_fns)``
    """
    if choice == "ray" and ray_options:
        return functools.partial(RayVecEnv.from_env_fns, **ray_options)
    return VEC_ENV_FACTORIES[choice]


def pop_vec_env_key(hyperparams: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """
    :param hyperparams: a config entry, as rl-zoo3 reads it
    :return: its ``vec_env`` (None where it has none) and the entry without it
    :raises ValueError: for a ``vec_env`` not in :data:`VEC_ENV_CHOICES`
    """
    hyperparams = dict(hyperparams)
    choice = hyperparams.pop(VEC_ENV_KEY, None)
    return (None if choice is None else check_vec_env_name(choice)), hyperparams
