"""
A training run for tests/test_resume_kill.py, run in its own process (forked by the test, or
``python tests/resume_child.py CONFIG FOLDER OUT [plain]``). It resumes from FOLDER's checkpoints where there are any,
else starts; it reports ``ROLLOUT n`` at each rollout's start (the test kills it at random moments in between), and
at the end writes the model's parameters, optimizer state, VecNormalize statistics and evaluation history to OUT (an
.npz) and reports ``DONE``. ``plain``: no checkpoints (the uninterrupted reference). ``pause``: the first checkpoint
write (or the ``pause``-th) reports ``WRITING`` after its temporary file is written and fsynced, then waits to be killed
(a kill in the middle of a write). ``RESUMED n`` reports a resume at ``num_timesteps`` n.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

import numpy as np
import torch as th
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback, EvalCallback
from stable_baselines3.common.vec_env import VecNormalize

import sb3_xppo.envs  # noqa: F401  (registers the package's envs)
from sb3_xppo import XPPO, DaggerCallback, MaskableXPPO, RecurrentXPPO, ResumableCheckpoint
from sb3_xppo.envs import LUNAR_LANDER_GROUP_NAMES
from sb3_xppo.resume import files
from sb3_xppo.resume.ranks import any_rank
from sb3_xppo.vec_env import make_vec_env

SMALL = dict(n_steps=16, batch_size=32, n_epochs=2, seed=3, device="cpu", policy_kwargs=dict(net_arch=[16]))
#: config -> (algorithm, env builder, keywords, total_timesteps, with an EvalCallback)
CONFIGS = {
    "ppo": (XPPO, lambda: make_vec_env("CartPole-v1", 2, seed=0), SMALL, 768, False),
    "multi_critic": (
        XPPO,
        lambda: make_vec_env("sb3_xppo/LunarLanderGroups-v3", 2, seed=0),
        {**SMALL, "reward_groups": list(LUNAR_LANDER_GROUP_NAMES), "normalize_values": True},
        768,
        False,
    ),
    "vec_normalize": (XPPO, lambda: VecNormalize(make_vec_env("Pendulum-v1", 2, seed=0)), SMALL, 768, False),
    "subproc": (
        XPPO,
        lambda: make_vec_env("CartPole-v1", 2, seed=0, backend="subproc", vec_env_kwargs=dict(start_method="fork")),
        SMALL,
        768,
        False,
    ),
    "recurrent": (
        RecurrentXPPO,
        lambda: make_vec_env("CartPole-v1", 2, seed=0),
        {**SMALL, "policy_kwargs": dict(net_arch=[16], lstm_hidden_size=8)},
        768,
        False,
    ),
    "maskable": (MaskableXPPO, lambda: make_vec_env("sb3_xppo/GridMaze-v0", 2, seed=0), SMALL, 768, False),
    "mujoco": (XPPO, lambda: VecNormalize(make_vec_env("Hopper-v5", 2, seed=0)), SMALL, 768, False),
    "eval_callback": (XPPO, lambda: make_vec_env("CartPole-v1", 2, seed=0), SMALL, 768, True),
    # one rank of a data-parallel run (tests/test_resume_ranks.py starts the ranks): 24 rollouts of 2 ranks x 2 envs x 16
    "ranks": (
        XPPO,
        lambda: VecNormalize(make_vec_env("CartPole-v1", 2, seed=0)),
        {**SMALL, "distributed": True, "distributed_timeout": 60.0},
        1536,
        False,
    ),
    # the same with use_sde on Pendulum: each rank keeps the noise it drew for the rollout after the boundary
    "ranks_sde": (
        XPPO,
        lambda: VecNormalize(make_vec_env("Pendulum-v1", 2, seed=0)),
        {**SMALL, "use_sde": True, "sde_sample_freq": 4, "distributed": True, "distributed_timeout": 60.0},
        768,
        False,
    ),
    # DAgger on ranks: each rank's aggregated dataset, one projector that the ranks train as one
    "ranks_dagger": (
        XPPO,
        lambda: make_vec_env("CartPole-v1", 2, seed=0),
        {**SMALL, "distributed": True, "distributed_timeout": 60.0},
        768,
        False,
    ),
}


def distillation() -> DaggerCallback:
    """``ranks_dagger``'s callback: a fixed teacher, teacher actions taken at 30%, a trained rep-align projector."""
    teacher = PPO("MlpPolicy", "CartPole-v1", seed=5, device="cpu")
    layers = dict(student_layer="mlp_extractor.policy_net.0", teacher_layer="mlp_extractor.policy_net.2")
    return DaggerCallback(teacher, buffer_size=100, beta=0.3, rep_align_projector=True, rep_align_weight=0.5, **layers)


class Progress(BaseCallback):
    """Reports ``ROLLOUT n`` (rollouts collected so far in the run) at each rollout's start."""

    def __init__(self, report: Callable[[str], None]) -> None:
        super().__init__()
        self.report = report

    def _on_rollout_start(self) -> None:
        ranks = self.model._data_parallel.n_processes  # (num_timesteps counts every rank's steps)
        self.report(f"ROLLOUT {self.model.num_timesteps // (self.model.n_steps * self.model.n_envs * ranks)}")

    def _on_step(self) -> bool:
        return True


def pause_before_rename(report: Callable[[str], None], at: int) -> None:
    """The ``at``-th checkpoint write reports ``WRITING`` before its rename, then waits to be killed."""
    real_replace, writes = os.replace, []

    class PausingOs:
        def __getattr__(self, name):
            return getattr(os, name)

        @staticmethod
        def replace(source, target):
            writes.append(target)
            if len(writes) == at:
                report("WRITING")
                time.sleep(600)
            real_replace(source, target)

    files.os = PausingOs()


def fingerprint(model, evaluations, dagger=None) -> dict[str, np.ndarray]:
    found = {f"param/{k}": v.cpu().numpy() for k, v in model.policy.state_dict().items()}
    if dagger is not None:
        found.update({f"projector/{k}": v.cpu().numpy() for k, v in dagger.distiller.projector.state_dict().items()})
    for index, state in model.policy.optimizer.state_dict()["state"].items():
        found.update({f"adam/{index}/{k}": th.as_tensor(v).cpu().numpy() for k, v in state.items()})
    found["num_timesteps"] = np.array(model.num_timesteps)
    env = model.get_vec_normalize_env()
    if env is not None:
        found.update({"obs_rms/mean": env.obs_rms.mean, "obs_rms/var": env.obs_rms.var, "ret_rms/var": env.ret_rms.var})
        found.update({"obs_rms/count": np.array(env.obs_rms.count), "returns": env.returns})
    if evaluations is not None:
        found["evaluations"] = np.array(evaluations.evaluations_results)
        found["evaluations_timesteps"] = np.array(evaluations.evaluations_timesteps)
    return found


def main(
    config: str,
    folder: str,
    out: str,
    plain: bool = False,
    pause: int = 0,
    report: Callable[[str], None] = print,
    sigterm: bool = False,
) -> None:
    algorithm, build, keywords, total, with_eval = CONFIGS[config]
    # (sigterm: a checkpoint on SIGTERM only, after which learn() stops: the run reports PREEMPTED, not DONE)
    checkpoint = ResumableCheckpoint(folder, every_rollouts=None if sigterm else 1, keep=2, stop_on_sigterm=sigterm)
    callbacks: list[BaseCallback] = [] if plain else [checkpoint]
    evaluations = None
    if with_eval:
        eval_env = make_vec_env("CartPole-v1", 1, seed=100)
        evaluations = EvalCallback(eval_env, eval_freq=64, n_eval_episodes=2, log_path=os.path.join(folder, "eval"))
        callbacks.append(evaluations)
    dagger = distillation() if config == "ranks_dagger" else None
    callbacks += [] if dagger is None else [dagger]
    callbacks.append(Progress(report))
    if pause:
        pause_before_rename(report, int(pause))
    model = None
    if not plain:
        try:  # (a data-parallel run's ranks agree whether there is a checkpoint every rank has)
            model = algorithm.resume(folder, env=build())
            report(f"RESUMED {model.num_timesteps}")
        except FileNotFoundError:
            pass
    if model is None:
        model = algorithm("MlpLstmPolicy" if algorithm is RecurrentXPPO else "MlpPolicy", build(), **keywords)
    model.learn(total, callback=callbacks)
    if checkpoint.preempted:
        report(f"PREEMPTED {model.num_timesteps}")
        return
    np.savez(out, **fingerprint(model, evaluations, dagger))
    if keywords.get("distributed"):  # any_rank, as a stop on SIGTERM asks it: rank 1's flag only, then none
        rank = model._data_parallel.rank
        report(f"ANY {any_rank(rank == 1, model)} {any_rank(False, model)}")
    report("DONE")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], len(sys.argv) > 4 and sys.argv[4] == "plain")
