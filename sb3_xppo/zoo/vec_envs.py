"""
``--vec-env`` and an entry's ``vec_env`` key: rl-zoo3's choice of VecEnv class (``dummy``, ``subproc``) plus ``lean``
(:class:`~sb3_xppo.vec_env.LeanVecEnv`), the default of ``python -m sb3_xppo.train``, and ``envpool``
(:class:`~sb3_xppo.vec_env.EnvPoolVecEnv`, the env id's EnvPool twin), and ``ray`` (:class:`~sb3_xppo.vec_env.RayVecEnv`,
the envs in Ray actors on a cluster's nodes: ``--ray-address`` and ``--ray-envs-per-actor``, :func:`split_ray_args`).

rl-zoo3's parser accepts only its own two names and its ``ExperimentManager`` maps them to a class itself; its one
hook is the class attribute ``ExperimentManager.default_vec_env_cls`` (meant for special VecEnvs), which wins over
``--vec-env``. So the command takes ``--vec-env`` out of the arguments (:func:`split_vec_env_arg`), hands rl-zoo3
``--vec-env dummy`` for ``lean`` and ``envpool`` and sets the hook while the command runs (:func:`zoo_vec_env`). A
run's ``args.yml`` then records ``vec_env: dummy``: for ``lean``, whose numbers are ``DummyVecEnv``'s bit for bit.

A config entry may choose its VecEnv with the key ``vec_env`` (:data:`VEC_ENV_KEY`, e.g. ``vec_env: envpool``, also
``-params vec_env:"'envpool'"``), which a ``--vec-env`` on the command line overrides. rl-zoo3 would hand the key to
the model's constructor: while the command runs, ``ExperimentManager._preprocess_hyperparams`` (where rl-zoo3 takes
its own keys out of an entry, and which offers no hook) is wrapped to take it out first. The run's ``config.yml``
keeps it.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

from sb3_xppo.vec_env import EnvPoolVecEnv, LeanVecEnv, RayVecEnv

#: the ``--vec-env`` choices of ``python -m sb3_xppo.train``, and of an entry's ``vec_env`` key
VEC_ENV_CHOICES: tuple[str, ...] = ("lean", "dummy", "subproc", "envpool", "ray")
#: its default (rl-zoo3's is ``dummy``)
DEFAULT_VEC_ENV = "lean"
#: the key of a config entry that chooses the entry's VecEnv, one of :data:`VEC_ENV_CHOICES`
VEC_ENV_KEY = "vec_env"
#: what rl-zoo3's ``ExperimentManager`` builds its envs with for each choice: called as ``cls(env_fns)``
ZOO_VEC_ENV_CLASSES: dict[str, Callable[..., VecEnv]] = {
    "lean": LeanVecEnv,
    "dummy": DummyVecEnv,
    "subproc": SubprocVecEnv,
    "envpool": EnvPoolVecEnv.from_env_fns,
    "ray": RayVecEnv.from_env_fns,
}
# the choices rl-zoo3's own --vec-env knows; the others are given to it as dummy and set through its hook
_ZOO_OWN = ("dummy", "subproc")


def split_vec_env_arg(args: Sequence[str], default: str | None = DEFAULT_VEC_ENV) -> tuple[str | None, list[str]]:
    """
    :param args: command-line arguments (``--vec-env NAME`` or ``--vec-env=NAME`` anywhere, the last one counting;
        no abbreviation)
    :param default: what to return when none is given (None: tell that none was)
    :return: the chosen name (``default`` if none) and the arguments without ``--vec-env``
    """
    parser = argparse.ArgumentParser(prog="sb3_xppo.train", add_help=False, allow_abbrev=False)
    parser.add_argument("--vec-env", choices=VEC_ENV_CHOICES, default=default)
    known, rest = parser.parse_known_args(list(args))
    return known.vec_env, rest


def split_ray_args(args: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """
    :param args: command-line arguments, with ``--ray-address ADDRESS`` (the Ray cluster to join: ``auto``, or the
        ``host:port`` of its head; by default a local Ray instance, or the cluster ``RAY_ADDRESS`` names) and
        ``--ray-envs-per-actor N`` (default 1) anywhere (``=`` forms too; no abbreviation)
    :return: the :class:`~sb3_xppo.vec_env.RayVecEnv` keywords they give (``address``, ``envs_per_actor``) and the
        arguments without them
    """
    parser = argparse.ArgumentParser(prog="sb3_xppo.train", add_help=False, allow_abbrev=False)
    parser.add_argument("--ray-address", dest="address", default=None)
    parser.add_argument("--ray-envs-per-actor", dest="envs_per_actor", type=int, default=None)
    known, rest = parser.parse_known_args(list(args))
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


@contextlib.contextmanager
def zoo_vec_env(name: str | None, ray_options: dict[str, Any] | None = None) -> Iterator[list[str]]:
    """
    While the block runs, rl-zoo3's ``ExperimentManager`` builds its envs (training and evaluation) with the VecEnv
    ``name`` names, or, where ``name`` is None (no ``--vec-env``), with the one the entry's ``vec_env`` key names,
    else the lean env; ``ExperimentManager.default_vec_env_cls`` and ``_preprocess_hyperparams`` are put back when it
    ends. A class someone else set in ``default_vec_env_cls`` stays, over both (rl-zoo3 lets it win over
    ``--vec-env`` too); the entry's key is taken out of the model's keywords all the same.

    :param name: one of :data:`VEC_ENV_CHOICES`, or None
    :param ray_options: the :class:`~sb3_xppo.vec_env.RayVecEnv` keywords of ``ray`` (:func:`split_ray_args`)
    :return: (yields) the ``--vec-env`` arguments to hand rl-zoo3
    :raises ValueError: for Ray options with another ``--vec-env``; (when rl-zoo3 reads the entry) for an entry's
        ``vec_env`` not in :data:`VEC_ENV_CHOICES`
    """
    from rl_zoo3.exp_manager import ExperimentManager

    chosen = check_vec_env_name(name or DEFAULT_VEC_ENV)
    if ray_options and name is not None and name != "ray":
        raise ValueError(f"--ray-address and --ray-envs-per-actor are options of --vec-env ray, not of --vec-env {name}")
    saved = ExperimentManager.default_vec_env_cls
    preprocess = ExperimentManager._preprocess_hyperparams

    def vec_env_class(choice: str) -> Callable[..., VecEnv]:
        if choice == "ray" and ray_options:
            return functools.partial(RayVecEnv.from_env_fns, **ray_options)
        return ZOO_VEC_ENV_CLASSES[choice]

    def preprocess_with_vec_env(self: ExperimentManager, hyperparams: dict[str, Any]) -> Any:
        hyperparams = dict(hyperparams)
        entry_choice = hyperparams.pop(VEC_ENV_KEY, None)
        if entry_choice is not None:
            entry_choice = check_vec_env_name(entry_choice)
            if name is None and saved is None:
                self.vec_env_class = vec_env_class(entry_choice)
        return preprocess(self, hyperparams)

    if saved is None and chosen not in _ZOO_OWN:
        ExperimentManager.default_vec_env_cls = vec_env_class(chosen)  # type: ignore[assignment]
    ExperimentManager._preprocess_hyperparams = preprocess_with_vec_env  # type: ignore[method-assign]
    try:
        yield ["--vec-env", chosen if chosen in _ZOO_OWN else "dummy"]
    finally:
        ExperimentManager.default_vec_env_cls = saved
        ExperimentManager._preprocess_hyperparams = preprocess  # type: ignore[method-assign]
