"""
When does :class:`sb3_xppo.vec_env.RayVecEnv` pay? ``learn()`` env-steps/s of XPPO over the lean vector env (one
process), SB3's ``SubprocVecEnv`` (one process per env) and ``RayVecEnv`` (one Ray actor per env, a local Ray
instance), on a slow simulator and on a fast one.

- **Envs**: ``sleep2ms``, CartPole-v1 whose every step sleeps 2 ms (a simulator whose step costs time, not this
  process's CPU); ``LunarLander-v3`` (Box2D physics in about 0.1 ms a step: inter-process round trips cost more than
  they save).
- **Runs**: for each env and ``n_envs``, each backend: the VecEnv built (``make_vec_env(backend=...)``, seed 0) and
  the model built outside the timing; ``XPPO("MlpPolicy", env).learn(timesteps)`` timed on the wall clock
  (rollouts of 512 env-steps, 2 epochs of minibatches of 128, one torch thread). ``--reps`` repetitions, the
  backends' order alternating; reported: the best env-steps/s of each.
- **Outputs**: a printed table and ``benchmarks/results/single/ray_vec_env.json``, with the machine's cores and load
  average; ``python benchmarks/render_docs.py`` writes its table into ``docs/guide/vec_env.md``.

usage: python benchmarks/ray_vec_env.py [--envs sleep2ms LunarLander-v3] [--n-envs 1 2 4] [--timesteps 2048]
                                        [--reps 1] [--out FILE]
       (the results are written after each row)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

# One machine: Ray's single-machine mode keeps every connection of its local instance on the loopback interface.
# Read when Ray is imported.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import gymnasium as gym
import ray
import stable_baselines3
import torch as th
from harness.layout import single_file
from harness.provenance import code_record
from stable_baselines3.common.vec_env import VecEnv

import sb3_xppo
from sb3_xppo import XPPO
from sb3_xppo.vec_env import make_vec_env

BACKENDS = ("lean", "subproc", "ray")
#: each run's seconds of sleep per env step, for the ``sleep2ms`` env
SLEEP = 0.002


class SleepyStep(gym.Wrapper):
    """A slow simulator: the env's every step sleeps :data:`SLEEP` seconds first."""

    def step(self, action: Any) -> Any:
        time.sleep(SLEEP)
        return self.env.step(action)


def sleep2ms() -> gym.Env:
    return SleepyStep(gym.make("CartPole-v1"))


ENVS = {"sleep2ms": sleep2ms, "LunarLander-v3": "LunarLander-v3"}


def build(env: str, n_envs: int, backend: str) -> VecEnv:
    return make_vec_env(ENVS[env], n_envs, backend=backend, seed=0)


def timed_learn(env: str, n_envs: int, backend: str, timesteps: int) -> float:
    """:return: env-steps/s of one ``learn()``, construction outside the timing"""
    venv = build(env, n_envs, backend)
    try:
        n_steps = max(512 // n_envs, 1)
        model = XPPO("MlpPolicy", venv, n_steps=n_steps, batch_size=128, n_epochs=2, seed=0, device="cpu")
        start = time.perf_counter()
        model.learn(timesteps)
        seconds = time.perf_counter() - start
        return model.num_timesteps / seconds
    finally:
        venv.close()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=list(ENVS), choices=list(ENVS))
    parser.add_argument("--n-envs", nargs="+", type=int, default=[1, 2, 4])
    parser.add_argument("--timesteps", type=int, default=2048)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--out", default=single_file("ray_vec_env.json"))
    args = parser.parse_args(argv)
    th.set_num_threads(1)
    ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    load_before = os.getloadavg()
    rows = []
    for env in args.envs:
        for n_envs in args.n_envs:
            best: dict[str, float] = {}
            for rep in range(args.reps):
                for backend in BACKENDS if rep % 2 == 0 else BACKENDS[::-1]:
                    rate = timed_learn(env, n_envs, backend, args.timesteps)
                    best[backend] = max(best.get(backend, 0.0), rate)
            rows.append(dict(env=env, n_envs=n_envs, steps_per_s=best))
            print(env, n_envs, {k: round(v) for k, v in best.items()}, flush=True)
            write(args, load_before, rows)  # after each row: a run cut short keeps what it measured
    ray.shutdown()
    print(f"wrote {args.out}; python benchmarks/render_docs.py writes its table into docs/guide/vec_env.md")
    return write(args, load_before, rows)


def write(args: argparse.Namespace, load_before: tuple[float, float, float], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Write the results so far to ``args.out``; :return: them"""
    result = dict(
        machine=dict(
            cpus=os.cpu_count(),
            load_average_before=load_before,
            load_average_after=os.getloadavg(),
            platform=platform.platform(),
        ),
        code=code_record(),
        versions=dict(
            sb3_xppo=sb3_xppo.__version__,
            ray=ray.__version__,
            stable_baselines3=stable_baselines3.__version__,
            torch=th.__version__,
            gymnasium=gym.__version__,
            python=sys.version.split()[0],
        ),
        config=dict(
            timesteps=args.timesteps,
            reps=args.reps,
            sleep_per_step_s=SLEEP,
            rollout_env_steps=512,
            batch_size=128,
            n_epochs=2,
            ray_envs_per_actor=1,
            subproc_start_method="forkserver",
        ),
        rows=rows,
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
