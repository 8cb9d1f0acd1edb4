"""
Env-only throughput of the lean vector env (``sb3_xppo.vec_env.make_vec_env``, the default backend) against what an SB3
user builds, SB3's ``make_vec_env`` (``DummyVecEnv`` + ``Monitor``), and the floor beneath both.

- **Kinds**, each built from the env id with the same seed:

  - ``sb3``: SB3's ``make_vec_env(env_id)``, which makes each env with ``render_mode="rgb_array"`` (the peer);
  - ``dummy``: SB3's ``DummyVecEnv`` + ``Monitor`` without a render mode (``make_vec_env(env_id, backend="dummy")``):
    what the render mode alone costs;
  - ``lean``: ``make_vec_env(env_id)``, the lean env without a render mode;
  - ``unrecorded``: the same lean env without the ``ActionRecorder`` that ``make_vec_env`` puts beneath each
    ``Monitor`` for exact resume (SB3's ``make_vec_env`` with ``vec_env_cls=LeanVecEnv``): what the recording costs;
  - ``bare``: the floor, the same envs without a render mode, wrapper or vector env: ``env.unwrapped.step`` in a
    Python loop (reset when terminated), what no vector env stepping these envs in one process can beat.

- **Steps**: each VecEnv is stepped with the same random actions (``action_space.sample`` per env, seeded, drawn
  before the timing); only the ``step`` calls are timed, on CPU time (``process_time``: this machine is shared) and
  wall time. Env construction and the first reset are outside it.
- **Repetitions**: ``--reps`` repetitions, each one run of each kind on fresh envs, the order alternating every
  repetition, all in one process. Reported: the best CPU-time env-steps/s of each, ratios of the bests to ``sb3``'s,
  the paired ratios (``sb3`` seconds over the other's in the same repetition: lean, dummy, bare; lean's over
  unrecorded's for the recorders) with their medians and 95% bootstrap intervals (``harness/paired.py``), and the best
  wall-time ratio.
- **Exactness**: before the timing, ``lean`` and ``sb3`` are stepped side by side and every observation, reward, done
  and info (``terminal_observation``, ``TimeLimit.truncated``, the Monitor's ``episode`` but its wall-clock ``t``)
  compared: the render mode changes no number.
- **Target** (docs/guide/development.md): lean >= 2.5x sb3 on LunarLander-v3 x16, by the median paired ratio.
- ``--profile``: cProfile of one lean run of the first env, the top functions by own time, and the share of the run
  spent inside the env's own ``step`` and ``reset`` (``profile_env_share``).
- **Outputs**: a printed table and ``benchmarks/results/single/vec_env.json``.

usage: python benchmarks/vec_env.py [--envs LunarLander-v3:16 CartPole-v1:8 Pendulum-v1:4] [--env-steps 4000]
                                    [--reps 9] [--check-steps 250] [--profile] [--seed 0] [--out FILE]
       (the defaults take about two minutes on one free core)
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import gc
import io
import platform
import pstats
import statistics
import sys
import time
from typing import Any

import gymnasium as gym
import numpy as np
import stable_baselines3
import torch as th
from harness.layout import single_file, write_result
from harness.paired import paired_times
from harness.provenance import code_record
from stable_baselines3.common.env_util import make_vec_env as sb3_make_vec_env
from stable_baselines3.common.vec_env import VecEnv

import sb3_xppo
from sb3_xppo.vec_env import LeanVecEnv, make_vec_env

DEFAULT_ENVS = ("LunarLander-v3:16", "CartPole-v1:8", "Pendulum-v1:4")
KINDS = ("sb3", "dummy", "lean", "unrecorded", "bare")
#: (env id, n_envs) -> the lean/sb3 ratio it must reach
TARGETS = {("LunarLander-v3", 16): 2.5}


def build(env_id: str, n_envs: int, kind: str, seed: int) -> VecEnv:
    """The VecEnv of ``kind`` (``bare`` steps the lean env's unwrapped envs)."""
    if kind == "sb3":
        return sb3_make_vec_env(env_id, n_envs, seed=seed)
    if kind == "unrecorded":  # (a factory, not the id: SB3's make_vec_env would ask an id for rgb_array frames)
        return sb3_make_vec_env(functools.partial(gym.make, env_id), n_envs, seed=seed, vec_env_cls=LeanVecEnv)
    return make_vec_env(env_id, n_envs, backend="dummy" if kind == "dummy" else "lean", seed=seed)


def random_actions(env: VecEnv, steps: int, seed: int) -> list[np.ndarray]:
    """``steps`` batches of one random action per env, from the seeded action space."""
    space = env.action_space
    space.seed(seed)
    return [np.array([space.sample() for _ in range(env.num_envs)]) for _ in range(steps)]


def timed_run(env_id: str, n_envs: int, kind: str, actions: list[np.ndarray], seed: int) -> tuple[float, float]:
    """:return: the CPU and wall seconds the steps of one run took, on fresh envs"""
    env = build(env_id, n_envs, kind, seed)
    env.reset()
    if kind == "bare":
        cores = [e.unwrapped for e in env.envs]  # type: ignore[attr-defined]

        def steps() -> None:
            for action in actions:
                for core, a in zip(cores, action, strict=True):
                    if core.step(a)[2]:
                        core.reset()

    else:
        step = env.step

        def steps() -> None:
            for action in actions:
                step(action)

    gc.collect()
    start_cpu, start = time.process_time(), time.perf_counter()
    steps()
    cpu, wall = time.process_time() - start_cpu, time.perf_counter() - start
    env.close()
    return cpu, wall


def without_time(info: dict[str, Any]) -> dict[str, Any]:
    """An info dict with the Monitor's wall-clock ``t`` left out of its ``episode``."""
    if "episode" in info:
        info = {**info, "episode": {k: v for k, v in info["episode"].items() if k != "t"}}
    return info


def same_info(a: dict[str, Any], b: dict[str, Any]) -> bool:
    a, b = without_time(a), without_time(b)
    if list(a) != list(b):
        return False
    for key in a:
        if isinstance(a[key], np.ndarray) or isinstance(b[key], np.ndarray):
            if not (type(a[key]) is type(b[key]) and a[key].dtype == b[key].dtype and np.array_equal(a[key], b[key])):
                return False
        elif a[key] != b[key] or type(a[key]) is not type(b[key]):
            return False
    return True


def check_exact(env_id: str, n_envs: int, steps: int, seed: int) -> tuple[bool, int]:
    """
    Step the lean env and SB3's side by side on the same actions; compare everything but the Monitor's ``t``.

    :return: whether all agreed, and how many episodes ended
    """
    lean, dummy = (build(env_id, n_envs, kind, seed) for kind in ("lean", "sb3"))
    obs_a, obs_b = lean.reset(), dummy.reset()
    exact, episodes = bool(np.array_equal(obs_a, obs_b)), 0
    for action in random_actions(dummy, steps, seed):
        (obs_a, rew_a, done_a, infos_a), (obs_b, rew_b, done_b, infos_b) = lean.step(action), dummy.step(action)
        exact &= all(
            np.array_equal(x, y) and x.dtype == y.dtype for x, y in ((obs_a, obs_b), (rew_a, rew_b), (done_a, done_b))
        )
        exact &= all(same_info(a, b) for a, b in zip(infos_a, infos_b, strict=True))
        episodes += int(done_b.sum())
    lean.close()
    dummy.close()
    return exact, episodes


def profile_lean(env_id: str, n_envs: int, actions: list[np.ndarray], seed: int, top: int = 25) -> dict[str, Any]:
    """
    cProfile of one lean run's ``step`` calls.

    :return: ``table``, cProfile's table (own time); ``env_share``, the fraction of the profiled time spent inside the
        env's own ``step`` and ``reset`` (the unwrapped env's methods, with all they call): what no vector env can shed
    """
    env = build(env_id, n_envs, "lean", seed)
    env.reset()
    unwrapped = type(env.envs[0].unwrapped)
    profiler = cProfile.Profile()
    profiler.enable()
    for action in actions:
        env.step(action)
    profiler.disable()
    env.close()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    own = {(f.__code__.co_filename, f.__code__.co_firstlineno, f.__name__) for f in (unwrapped.step, unwrapped.reset)}
    inside = sum(cumulative for key, (_, _, _, cumulative, _) in stats.stats.items() if key in own)  # type: ignore[attr-defined]
    stats.sort_stats("tottime").print_stats(top)
    return dict(table=out.getvalue(), env_share=inside / stats.total_tt)  # type: ignore[attr-defined]


def benchmark(env_id: str, n_envs: int, env_steps: int, reps: int, check_steps: int, seed: int) -> dict[str, Any]:
    exact, episodes = check_exact(env_id, n_envs, check_steps, seed)
    probe = build(env_id, n_envs, "sb3", seed)
    actions = random_actions(probe, max(1, env_steps // n_envs), seed + 1)
    probe.close()
    cpu: dict[str, list[float]] = {kind: [] for kind in KINDS}
    wall: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for rep in range(reps):
        for kind in KINDS if rep % 2 == 0 else KINDS[::-1]:
            seconds = timed_run(env_id, n_envs, kind, actions, seed)
            cpu[kind].append(seconds[0])
            wall[kind].append(seconds[1])
    steps = len(actions) * n_envs
    best = {kind: steps / min(times) for kind, times in cpu.items()}
    best_wall = {kind: steps / min(times) for kind, times in wall.items()}
    ratio = best["lean"] / best["sb3"]
    target = TARGETS.get((env_id, n_envs))
    lean = paired_times(cpu["sb3"], cpu["lean"])  # (the lean env's speed over SB3's, repetition by repetition)

    return dict(
        env=env_id,
        n_envs=n_envs,
        env_steps_per_run=steps,
        cpu_seconds=cpu,
        wall_seconds=wall,
        best_steps_per_s=best,
        best_wall_steps_per_s=best_wall,
        ratio_best=ratio,
        ratio_paired_median=lean["median"],
        ratio_paired_spread=lean,
        render_mode_spread=paired_times(cpu["sb3"], cpu["dummy"]),
        floor_spread=paired_times(cpu["sb3"], cpu["bare"]),
        recorder_spread=paired_times(cpu["unrecorded"], cpu["lean"]),
        seconds_median=statistics.median(cpu["sb3"]),
        ratio_wall_best=best_wall["lean"] / best_wall["sb3"],
        render_mode_ratio=best["dummy"] / best["sb3"],
        recorder_ratio=best["lean"] / best["unrecorded"],
        recorder_ratio_paired_median=statistics.median(u / le for le, u in zip(cpu["lean"], cpu["unrecorded"], strict=True)),
        floor_ratio=best["bare"] / best["sb3"],
        target=target,
        target_met=None if target is None else lean["median"] >= target,
        bit_exact=exact,
        check_steps=check_steps * n_envs,
        check_episodes=episodes,
    )


def format_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        f"{'env':<16} {'n':>3} {'sb3/s':>8} {'dummy/s':>8} {'lean/s':>8} {'bare/s':>8} {'lean':>7} {'paired':>7} "
        f"{'wall':>7} {'dummy':>7} {'bare':>7} {'recorded':>9} {'target':>8} {'exact':>6}"
    ]
    for r in rows:
        b = r["best_steps_per_s"]
        target = "-" if r["target"] is None else f"{r['target']:.1f}x " + ("ok" if r["target_met"] else "no")
        lines.append(
            f"{r['env']:<16} {r['n_envs']:>3} {b['sb3']:>8.0f} {b['dummy']:>8.0f} {b['lean']:>8.0f} {b['bare']:>8.0f} "
            f"{r['ratio_best']:>6.2f}x {r['ratio_paired_median']:>6.2f}x {r['ratio_wall_best']:>6.2f}x "
            f"{r['render_mode_ratio']:>6.2f}x {r['floor_ratio']:>6.2f}x {r['recorder_ratio_paired_median']:>8.3f}x "
            f"{target:>8} {'yes' if r['bit_exact'] else 'NO':>6}"
        )
    lines.append(
        "env-steps/s: best CPU time of the repetitions; ratios to sb3 (SB3's make_vec_env, render_mode='rgb_array'): "
        "lean (ratio of bests), paired (median paired), wall (bests on wall time), dummy (DummyVecEnv without a "
        "render mode), bare (the floor: unwrapped envs in a loop); recorded: lean / the lean env without its action "
        "recorders (median paired)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=list(DEFAULT_ENVS), help="ENV_ID:N_ENVS ...")
    parser.add_argument("--env-steps", type=int, default=4000, help="env-steps per timed run")
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--check-steps", type=int, default=250, help="vector steps of the exactness check")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true", help="cProfile one lean run of the first env")
    parser.add_argument("--out", default=single_file("vec_env.json"))
    args = parser.parse_args(argv)
    th.set_num_threads(1)

    code = code_record()  # the code measured: read before the runs
    rows = []
    for spec in args.envs:
        env_id, _, n = spec.rpartition(":")
        rows.append(benchmark(env_id, int(n), args.env_steps, args.reps, args.check_steps, args.seed))
        print(format_table(rows[-1:]).splitlines()[1], flush=True)
    print()
    print(format_table(rows))
    record: dict[str, Any] = dict(
        command=" ".join(["python benchmarks/vec_env.py", *(sys.argv[1:] if argv is None else argv)]),
        code=code,
        env_steps=args.env_steps,
        reps=args.reps,
        seed=args.seed,
        clock="process_time",
        python=platform.python_version(),
        numpy=np.__version__,
        gymnasium=gym.__version__,
        stable_baselines3=stable_baselines3.__version__,
        sb3_xppo=sb3_xppo.__version__,
        rows=rows,
    )
    if args.profile:
        env_id, _, n = args.envs[0].rpartition(":")
        probe = build(env_id, int(n), "sb3", args.seed)
        actions = random_actions(probe, max(1, args.env_steps // int(n)), args.seed + 1)
        probe.close()
        profile = profile_lean(env_id, int(n), actions, args.seed)
        record["profile"], record["profile_env_share"] = profile["table"], profile["env_share"]
        print(profile["table"])
        print(f"{env_id}'s own step and reset: {profile['env_share']:.0%} of the lean run's time")
    write_result(args.out, record)
    return record


if __name__ == "__main__":
    main()
