"""
``--vec-env``: rl-zoo3's choice of VecEnv class (``dummy``, ``subproc``) plus ``lean``
(:class:`~sb3_xppo.vec_env.LeanVecEnv`), the default of ``python -m sb3_xppo.train``.

rl-zoo3's parser accepts only its own two names and its ``ExperimentManager`` maps them to a class itself; its one
hook is the class attribute ``ExperimentManager.default_vec_env_cls`` (meant for special VecEnvs), which wins over
``--vec-env``. So the command takes ``--vec-env`` out of the arguments (:func:`split_vec_env_arg`), hands rl-zoo3
``--vec-env dummy`` for ``lean`` and sets the hook while the command runs (:func:`zoo_vec_env`). A run's
``args.yml`` then records ``vec_env: dummy``, whose numbers are the lean env's, bit for bit.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator, Sequence

from sb3_xppo.vec_env import LeanVecEnv

#: the ``--vec-env`` choices of ``python -m sb3_xppo.train``
VEC_ENV_CHOICES: tuple[str, ...] = ("lean", "dummy", "subproc")
#: its default (rl-zoo3's is ``dummy``)
DEFAULT_VEC_ENV = "lean"


def split_vec_env_arg(args: Sequence[str]) -> tuple[str, list[str]]:
    """
    :param args: command-line arguments (``--vec-env NAME`` or ``--vec-env=NAME`` anywhere, the last one counting;
        no abbreviation)
    :return: the chosen name (:data:`DEFAULT_VEC_ENV` if none) and the arguments without ``--vec-env``
    """
    parser = argparse.ArgumentParser(prog="sb3_xppo.train", add_help=False, allow_abbrev=False)
    parser.add_argument("--vec-env", choices=VEC_ENV_CHOICES, default=DEFAULT_VEC_ENV)
    known, rest = parser.parse_known_args(list(args))
    return known.vec_env, rest


@contextlib.contextmanager
def zoo_vec_env(name: str) -> Iterator[list[str]]:
    """
    While the block runs, rl-zoo3's ``ExperimentManager`` builds its envs (training and evaluation) with the VecEnv
    ``name`` names; ``ExperimentManager.default_vec_env_cls`` is put back when it ends. A class someone else set
    there stays (rl-zoo3 lets it win over ``--vec-env`` too).

    :param name: one of :data:`VEC_ENV_CHOICES`
    :return: (yields) the ``--vec-env`` arguments to hand rl-zoo3
    """
    from rl_zoo3.exp_manager import ExperimentManager

    if name != "lean":
        yield ["--vec-env", name]
        return
    saved = ExperimentManager.default_vec_env_cls
    if saved is None:
        ExperimentManager.default_vec_env_cls = LeanVecEnv
    try:
        yield ["--vec-env", "dummy"]
    finally:
        ExperimentManager.default_vec_env_cls = saved
