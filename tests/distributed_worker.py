"""
One rank of the data-parallel tests (tests/test_distributed.py), started as a real process with the launcher's
environment (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``) set by the test. Its argument is a JSON
object: ``mode`` picks what it does, ``out`` where it writes what the test compares (a torch file).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import numpy as np
import torch as th
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.vec_env import VecNormalize

import sb3_xppo.envs  # noqa: F401  (registers the package's envs)
from sb3_xppo import XPPO
from sb3_xppo.common.distributed import ProcessGroup, merge_running_stats, running_stats_vector
from sb3_xppo.vec_env import make_vec_env

#: what the equivalence test trains: PopArt, target_kl (low enough that some updates stop early) and adaptive_kl
KWARGS: dict[str, Any] = dict(
    n_steps=32,
    batch_size=16,
    n_epochs=3,
    seed=3,
    normalize_values=True,
    target_kl=2e-5,
    adaptive_kl=0.01,
    policy_kwargs=dict(net_arch=[16]),
)
N_ENVS = 2


def buffer_arrays(buffer: Any) -> dict[str, np.ndarray]:
    """Every per-step array of a rollout buffer, ``(n_steps, n_envs, ...)``."""
    return {
        name: value.copy()
        for name, value in vars(buffer).items()
        if isinstance(value, np.ndarray) and value.shape[:2] == (buffer.buffer_size, buffer.n_envs)
    }


class Recorded(XPPO):
    """XPPO that records, for each ``train()``: the parameters before and after, the buffer, NumPy's RNG state and the
    number of minibatches taken."""

    records: list[dict[str, Any]]
    minibatches = 0

    def minibatch_loss(self, *args: Any) -> Any:
        self.minibatches += 1
        return super().minibatch_loss(*args)

    def train(self) -> None:
        record = {
            "before": {k: v.clone() for k, v in self.policy.state_dict().items()},
            "buffer": buffer_arrays(self.rollout_buffer),
            "rng": np.random.get_state(),
            "progress": self._current_progress_remaining,
        }
        self.minibatches = 0
        super().train()
        record["minibatches"] = self.minibatches
        record["after"] = {k: v.clone() for k, v in self.policy.state_dict().items()}
        self.records.append(record)


def contrib(config: dict[str, Any]) -> dict[str, Any]:
    """MaskableXPPO or RecurrentXPPO on two ranks: their parameters after ``learn()``."""
    from sb3_xppo import MaskableXPPO, RecurrentXPPO
    from sb3_xppo.envs import GRID_MAZE_ID

    if config["algo"] == "MaskableXPPO":
        env, algo, policy = make_vec_env(GRID_MAZE_ID, N_ENVS, seed=0), MaskableXPPO, "MlpPolicy"
    else:
        import rl_zoo3.import_envs  # noqa: F401  (registers CartPoleNoVel-v1)

        env, algo, policy = make_vec_env("CartPoleNoVel-v1", N_ENVS, seed=0), RecurrentXPPO, "MlpLstmPolicy"
    model = algo(policy, env, n_steps=32, batch_size=16, n_epochs=2, seed=1, distributed=True, distributed_timeout=60.0)
    model.learn(3 * 2 * N_ENVS * 32)
    return {"after": {k: v.clone() for k, v in model.policy.state_dict().items()}, "num_timesteps": model.num_timesteps}


def learn(config: dict[str, Any]) -> dict[str, Any]:
    env = make_vec_env(config.get("env", "CartPole-v1"), N_ENVS, seed=config.get("env_seed", 0))
    if config.get("vec_normalize"):
        env = VecNormalize(env, gamma=0.99)
    kwargs = {**KWARGS, **config.get("kwargs", {})}
    if int(os.environ["RANK"]) == 1:
        kwargs.update(config.get("rank1_kwargs", {}))
    model = Recorded("MlpPolicy", env, distributed=True, distributed_timeout=config.get("timeout", 60.0), **kwargs)
    model.records = []
    hooked = []
    if config.get("loss_hook"):  # an L2 penalty, as a user's (or DaggerCallback's) loss hook adds a term

        def penalty(model: Any, rollout_data: Any, loss: th.Tensor) -> th.Tensor:
            hooked.append(1)
            return loss + 1e-3 * sum((p**2).sum() for p in model.policy.parameters())

        model.register_loss_hook(penalty)
    callback = None
    if config.get("dagger"):  # a teacher of the same spaces (an untrained PPO, the same on every rank)
        from stable_baselines3 import PPO

        from sb3_xppo.dagger_distill import DaggerCallback

        teacher = PPO("MlpPolicy", make_vec_env("CartPole-v1", 1, seed=0), seed=0)
        callback = DaggerCallback(teacher, pretrain_steps=config.get("pretrain_steps", 0))
    print("learning", flush=True)
    model.learn(config["steps"], callback=callback)
    out: dict[str, Any] = {"records": model.records, "num_timesteps": model.num_timesteps, "hooked": len(hooked)}
    if config.get("vec_normalize"):
        out["obs_rms"] = (env.obs_rms.mean, env.obs_rms.var, env.obs_rms.count)
        out["ret_rms"] = (env.ret_rms.mean, env.ret_rms.var, env.ret_rms.count)
    if config.get("save"):  # on every rank: rank 0 writes
        model.save(config["save"].format(rank=os.environ["RANK"]))
    return out


def merge_stats(config: dict[str, Any]) -> dict[str, Any]:
    """VecNormalize's merge on its own: each rank's statistic takes batches of its own, merged after each update."""
    rank = int(os.environ["RANK"])
    group = ProcessGroup.join(30.0, th.device("cpu"))
    rms = RunningMeanStd(shape=(3,))
    last = running_stats_vector(rms)
    for update in range(config["updates"]):
        for batch in merge_batches(rank, update, config["batches"]):
            rms.update(batch)
        last = merge_running_stats(rms, last, group, "test")
    return {"mean": rms.mean, "var": rms.var, "count": rms.count}


def merge_batches(rank: int, update: int, batches: int) -> list[np.ndarray]:
    """The batches rank ``rank`` takes before merge ``update`` (the test makes them again for its one process)."""
    rng = np.random.default_rng(1000 * rank + update)
    return [rng.normal(rank + update, 1 + rank, size=(4, 3)) for _ in range(batches)]


def main() -> None:
    config = json.loads(sys.argv[1])
    th.set_num_threads(1)
    result = {"merge_stats": merge_stats, "contrib": contrib, "learn": learn}[config["mode"]](config)
    th.save(result, config["out"].format(rank=os.environ["RANK"]))
    print("done", flush=True)


if __name__ == "__main__":
    main()
