"""
A trained agent's rl-zoo3 run, read as ``rl_zoo3.enjoy`` reads it, for ``python -m sb3_xppo.distill`` (a teacher
from ``logs/<algo>/<env>_<id>/``): the settings in ``<env>/`` beside the checkpoint, read without running code
from them (``config.yml`` and ``args.yml`` with the safe loader, ``normalize`` as a literal:
:mod:`sb3_xppo.loading.zoo_files`, docs/guide/security.md), and the env built by rl-zoo3's own ``create_test_env``.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any, NamedTuple

from rl_zoo3.utils import EnvironmentName, create_test_env
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv

from sb3_xppo.loading.zoo_files import load_zoo_yaml, saved_hyperparams


class AgentSettings(NamedTuple):
    """How an agent's env was built: rl-zoo3's hyperparameters (the wrappers), the env's keywords, its statistics."""

    #: the run's hyperparameters (``env_wrapper``, ``vec_env_wrapper``, ``normalize``, ...), without ``env_kwargs``
    hyperparams: dict[str, Any]
    #: the env's keyword arguments (``args.yml``'s, else ``config.yml``'s)
    env_kwargs: dict[str, Any]
    #: the run's ``vecnormalize.pkl`` when its config says ``normalize`` (None: raw observations)
    vec_normalize_path: str | None

    def make_env(self, env_id: str, n_envs: int, seed: int) -> VecEnv:
        """
        :return: the env as the agent was trained in (wrappers and keywords, in a ``DummyVecEnv``), without its
            normalization (the agent reads that itself)
        """
        hyperparams = {**self.hyperparams, "normalize": False}
        return create_test_env(
            env_id,
            n_envs=n_envs,
            seed=seed,
            should_render=False,
            hyperparams=hyperparams,
            env_kwargs=self.env_kwargs,
            vec_env_cls=DummyVecEnv,
        )


def agent_settings(model_path: str | os.PathLike, env_id: str, saved: bool = True, trust_code: bool = False) -> AgentSettings:
    """
    :param model_path: the agent's checkpoint (``<log dir>/<env>.zip`` or ``best_model.zip``)
    :param env_id: the env's id
    :param saved: read the run's settings beside the checkpoint (False: none, the bare env)
    :param trust_code: let its ``config.yml`` name any wrapper (its YAML is read safely all the same)
    :return: the settings (none when there is no ``<log dir>/<env>/`` folder)
    :raises ValueError: for a run that stacks frames, or that normalizes without its ``vecnormalize.pkl``
    :raises UnsafeFileError: for code in ``config.yml`` or ``args.yml``, or a wrapper outside the allowlist
    """
    folder = pathlib.Path(model_path).parent / str(EnvironmentName(env_id))
    if not saved or not folder.is_dir():
        return AgentSettings({}, {}, None)
    hyperparams, _ = saved_hyperparams(str(folder), norm_reward=False, test_mode=True, trust_code=trust_code)
    env_kwargs = dict(hyperparams.pop("env_kwargs", None) or {})
    args_file = folder / "args.yml"
    if args_file.is_file():  # the env_kwargs of the training command line replace the config's, as enjoy reads them
        args = load_zoo_yaml(args_file)
        if args.get("env_kwargs") is not None:
            env_kwargs = dict(args["env_kwargs"])
    if hyperparams.get("frame_stack", 0):
        raise ValueError(
            f"the agent's rl-zoo3 config ({folder}) stacks frames (frame_stack), which distillation does not support; "
            "pass --no-zoo-config to build the env yourself"
        )
    vec_normalize_path = None
    if hyperparams.get("normalize"):
        path = folder / "vecnormalize.pkl"
        if not path.is_file():
            raise ValueError(f"the agent's rl-zoo3 config says normalize but there is no {path}")
        vec_normalize_path = str(path)
    return AgentSettings(hyperparams, env_kwargs, vec_normalize_path)
