"""
Env-steps/s of the data-parallel learner (``distributed=True``, docs/guide/distributed.md): XPPO on 1 and 2 ranks
against one process whose envs step in ``SubprocVecEnv`` workers, at rl-zoo3's PPO entry, the global rollout kept
equal.

- **Contenders**, each ``learn()`` on rl-zoo3's ``ppo.yml`` entry of the env (LunarLander-v3: 16 envs x 1024 steps,
  minibatch 64, 4 epochs), built the zoo's way (``harness.zoo.zoo_setup``):

  - ``1 process``: XPPO on the lean VecEnv, 16 envs;
  - ``1 process, subproc``: XPPO with the 16 envs in ``SubprocVecEnv`` workers (the envs in parallel, the learner
    serial: what users do today);
  - ``2 ranks``: ``python -m torch.distributed.run --standalone --nproc-per-node 2``, each rank 8 envs and a
    minibatch of 32: the same global rollout, the same global minibatch of 64, the same number of updates;
  - ``2 ranks, minibatch 64 per rank``: the global minibatch 128, half the updates (a different hyperparameter,
    shown apart);
  - ``one rank's share alone`` (and ``, minibatch 64``): one process doing one rank's part (8 envs, its minibatch,
    half the steps) with nothing beside it and no collective: the bound 2 ranks reach if communication were free
    and the two cores did not share anything. Its env-steps/s counts both ranks' steps.

- **Timing**: ``learn()`` alone, wall time on rank 0 (startup and imports excluded), one torch thread per process;
  the contenders one after the other, their order rotated every repetition. Env-steps/s counts every rank's steps.
- **Reported**: each contender's env-steps/s, best and median, and its ratio to ``1 process`` (median paired: the
  ratio within each repetition, then the median, with its 95% bootstrap interval).
- **Target** (docs/guide/development.md): ``2 ranks`` >= 1.6x ``1 process`` on this 2-core machine.
- **Outputs**: a printed table and ``benchmarks/results/single/distributed.json``.

usage: python benchmarks/distributed.py [--env LunarLander-v3] [--steps 32768] [--reps 9] [--contenders NAME ...]
                                       [--out FILE]
       (about ten minutes with the defaults)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from harness.layout import single_file, write_result
from harness.paired import paired_ratio
from harness.provenance import code_record

#: contender -> how it runs: ``ranks`` processes (``split`` ways: each with the entry's envs / split, and its
#: minibatch the entry's / split, or the entry's), on the VecEnv ``vec_env``; ``split`` > ``ranks``: one rank's share
#: of the work alone (its envs, minibatch and steps), the bound a rank could reach if communication were free
CONTENDERS: dict[str, dict[str, Any]] = {
    "1 process": dict(ranks=1, split=1, vec_env="lean", batch_per_rank="global / ranks"),
    "1 process, subproc": dict(ranks=1, split=1, vec_env="subproc", batch_per_rank="global / ranks"),
    "2 ranks": dict(ranks=2, split=2, vec_env="lean", batch_per_rank="global / ranks"),
    "one rank's share alone": dict(ranks=1, split=2, vec_env="lean", batch_per_rank="global / ranks"),
    "2 ranks, minibatch 64 per rank": dict(ranks=2, split=2, vec_env="lean", batch_per_rank="entry's"),
    "one rank's share alone, minibatch 64": dict(ranks=1, split=2, vec_env="lean", batch_per_rank="entry's"),
}
BASELINE = "1 process"
TARGET = ("2 ranks", 1.6)


def worker(config: dict[str, Any]) -> None:
    """One rank (or the one process) of a contender: build the zoo's model, time ``learn()``, rank 0 writes it."""
    import torch as th
    from harness.zoo import zoo_setup

    from sb3_xppo import XPPO

    th.set_num_threads(1)
    ranks, split, rank = config["ranks"], config["split"], int(os.environ.get("RANK", 0))
    steps = config["steps"] * ranks // split  # one rank's share alone: its part of the steps
    with tempfile.TemporaryDirectory() as folder:
        entry = zoo_setup(config["env"], config["seed"], config["steps"], folder)[4]
        n_envs = entry["n_envs"] // split
        batch_size = entry["batch_size"] // split if config["batch_per_rank"] == "global / ranks" else entry["batch_size"]
        overrides = {"n_envs": n_envs, "batch_size": batch_size}
        hyperparams, env, eval_env, _, _ = zoo_setup(
            config["env"], config["seed"], config["steps"], folder, overrides, vec_env=config["vec_env"]
        )
        eval_env.close()
        model = XPPO(env=env, seed=config["seed"], distributed=ranks > 1, **hyperparams)
        start = time.perf_counter()
        model.learn(steps)
        seconds = time.perf_counter() - start
        env.close()
    if rank == 0:
        record = dict(seconds=seconds, num_timesteps=model.num_timesteps, n_envs=n_envs, batch_size=batch_size)
        with open(config["out"], "w") as f:
            json.dump(record, f)


def run_contender(name: str, env_id: str, steps: int, seed: int) -> dict[str, Any]:
    """One contender's run in fresh processes; :return: its seconds and env-steps/s"""
    spec = CONTENDERS[name]
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "rank0.json")
        config = dict(spec, env=env_id, steps=steps, seed=seed, out=out)
        script = [os.path.abspath(__file__), "--worker", json.dumps(config)]
        if spec["ranks"] == 1:
            command = [sys.executable, *script]
        else:
            launcher = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(spec["ranks"])]
            command = [sys.executable, *launcher, *script]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out) as f:
            record = json.load(f)
    # env-steps/s of the whole job: one rank's share alone counts the steps of all the ranks it stands for
    per_second = record["num_timesteps"] * spec["split"] / spec["ranks"] / record["seconds"]
    return dict(record, name=name, steps_per_second=per_second)


def benchmark(env_id: str, steps: int, reps: int, seed: int, names: list[str] | None = None) -> dict[str, Any]:
    """
    ``reps`` rotations of the contenders ``names`` (all: None; the baseline always), each run in fresh processes.

    :return: the rows (env-steps/s, the paired ratio to the baseline with its interval), the runs and the target (None
        when its contender did not run)
    """
    names = [BASELINE, *(name for name in names or CONTENDERS if name != BASELINE)]
    runs = []
    for rep in range(reps):
        shift = rep % len(names)
        for name in names[shift:] + names[:shift]:
            run = run_contender(name, env_id, steps, seed)
            runs.append(dict(run, rep=rep))
            print(f"rep {rep} {name}: {run['seconds']:.1f} s, {run['steps_per_second']:,.0f} env-steps/s", flush=True)
    rows = []
    for name in names:
        mine = [r for r in runs if r["name"] == name]
        base = {r["rep"]: r for r in runs if r["name"] == BASELINE}
        # the ratio within each repetition, then their median with its 95% bootstrap interval (harness/paired.py)
        spread = paired_ratio([r["steps_per_second"] / base[r["rep"]]["steps_per_second"] for r in mine])
        rows.append(
            dict(
                name=name,
                **{k: CONTENDERS[name][k] for k in ("ranks", "split", "vec_env")},
                n_envs_per_rank=mine[0]["n_envs"],
                batch_size_per_rank=mine[0]["batch_size"],
                steps_per_second_best=max(r["steps_per_second"] for r in mine),
                steps_per_second_median=statistics.median(r["steps_per_second"] for r in mine),
                ratio_paired=spread["median"],
                ratio_paired_spread=spread,
                seconds_median=statistics.median(r["seconds"] for r in mine),
            )
        )
    target_name, target = TARGET
    reached = next((row["ratio_paired"] for row in rows if row["name"] == target_name), None)
    return dict(
        env=env_id,
        steps=steps,
        reps=reps,
        seed=seed,
        rows=rows,
        runs=runs,
        target=None if reached is None else dict(contender=target_name, against=BASELINE, ratio=target, met=reached >= target),
    )


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="LunarLander-v3")
    parser.add_argument("--steps", type=int, default=32768)
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--contenders", nargs="+", choices=list(CONTENDERS), default=None, help="a subset (default: all)")
    parser.add_argument("--out", default=single_file("distributed.json"))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        worker(json.loads(args.worker))
        return None
    if args.reps < 1 or args.steps < 1:
        parser.error(f"--reps and --steps must be >= 1, got {args.reps} and {args.steps}")
    code = code_record()  # the code measured: read before the runs
    row = benchmark(args.env, args.steps, args.reps, args.seed, args.contenders)
    for r in row["rows"]:
        print(
            f"{r['name']}: {r['steps_per_second_median']:,.0f} env-steps/s (best {r['steps_per_second_best']:,.0f}), "
            f"{r['ratio_paired']:.2f}x {BASELINE} (median paired)"
        )
    record = dict(
        command=" ".join(["python benchmarks/distributed.py", *(sys.argv[1:] if argv is None else argv)]), code=code, **row
    )
    write_result(args.out, record)
    return record


if __name__ == "__main__":
    main()
