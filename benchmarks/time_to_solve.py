"""
Time to a solved task, the way a user runs the main job: ``python -m sb3_xppo.train`` (its default entry: XPPO's own
tuned LunarLander-v3 in ``sb3_xppo/zoo_configs/xppo.yml``) against ``python -m rl_zoo3.train --algo ppo --env
LunarLander-v3`` (rl-zoo3's PPO entry), each command as written plus ``--seed`` and ``-f`` (a scratch folder).

- **Solved**: the first of the command's own evaluations (rl-zoo3's: 5 deterministic episodes every 25k steps, the
  ``evaluations.npz`` it writes) whose mean return reaches the threshold (200 on LunarLander-v3, the task's solved
  score). The time is the run's own wall clock from its start until that file shows it: start-up, env construction,
  training and every evaluation before it. The process is then stopped.
- **Not solved**: a run that ends its budget below the threshold counts with its whole time and is marked
  (``solved: false``): the pair's ratio is then a bound (a lower one when PPO's run did not solve).
- **Pairs**: one run of each command per seed, one after the other, the order alternating from seed to seed; seeds
  20-24 by default (the entry's tuning saw 0-4, its confirmation 10-19).
- **Reported**: per pair the seconds and steps of each run and the ratio (PPO's seconds / XPPO's); the median ratio
  with its 95% bootstrap interval (``harness/paired.py``); the machine and the code.
- **Outputs**: a printed table and ``benchmarks/results/single/time_to_solve.json``.

usage: python benchmarks/time_to_solve.py [--env LunarLander-v3] [--seeds 20 21 22 23 24] [--threshold 200]
       (about 30 minutes on the benchmarks' 2-core machine; pause other work, as for every timing)
"""

from __future__ import annotations

import argparse
import glob
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from typing import Any

import numpy as np
from harness.layout import single_file, write_result
from harness.paired import pace, paired_ratio
from harness.provenance import code_record

#: the commands, by name: ``python -m`` module and its extra arguments (the env and the rest are added)
COMMANDS = {"XPPO": ("sb3_xppo.train", []), "PPO": ("rl_zoo3.train", ["--algo", "ppo"])}
#: how often the run's evaluations file is read, in seconds
POLL_SECONDS = 0.25


def first_solved(folder: str, threshold: float) -> int | None:
    """The steps of the first evaluation in ``folder``'s ``evaluations.npz`` whose mean return reaches ``threshold``."""
    for path in glob.glob(os.path.join(folder, "**", "evaluations.npz"), recursive=True):
        try:
            with np.load(path) as data:
                steps, returns = data["timesteps"], data["results"]
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):  # (being written: read again next poll)
            return None
        reached = np.flatnonzero(returns.mean(axis=1) >= threshold)
        if reached.size:
            return int(steps[reached[0]])
    return None


def run_command(name: str, env_id: str, seed: int, threshold: float, extra: list[str]) -> dict[str, Any]:
    """
    One run of ``name``'s command until its first evaluation at ``threshold`` (or its end).

    :return: its command line, seconds, steps (at the solving evaluation) and whether it solved
    """
    module, algo = COMMANDS[name]
    with tempfile.TemporaryDirectory() as folder:
        command = [sys.executable, "-m", module, *algo, "--env", env_id, "--seed", str(seed), "-f", folder, *extra]
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        steps = None
        while process.poll() is None:
            time.sleep(POLL_SECONDS)
            steps = first_solved(folder, threshold)
            if steps is not None:
                break
        seconds = time.perf_counter() - start
        if process.poll() is None:  # solved: the run is stopped (its whole process group)
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        elif process.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} exited with {process.returncode}")
        else:
            steps = first_solved(folder, threshold)  # (an evaluation written just before the end)
    shown = " ".join(["python -m", module, *command[3:]]).replace(folder, "<scratch>")
    return dict(name=name, command=shown, seed=seed, seconds=seconds, steps=steps, solved=steps is not None)


def benchmark(env_id: str, seeds: list[int], threshold: float, extra: list[str]) -> dict[str, Any]:
    pairs = []
    for i, seed in enumerate(seeds):
        runs = {}
        for name in list(COMMANDS) if i % 2 == 0 else list(COMMANDS)[::-1]:
            runs[name] = run_command(name, env_id, seed, threshold, extra)
            run = runs[name]
            print(f"seed {seed} {name}: {run['seconds']:.1f} s, solved at {run['steps']} steps", flush=True)
        pairs.append(dict(seed=seed, ratio=runs["PPO"]["seconds"] / runs["XPPO"]["seconds"], runs=runs))
    spread = paired_ratio([pair["ratio"] for pair in pairs])
    solved = {name: sum(pair["runs"][name]["solved"] for pair in pairs) for name in COMMANDS}
    return dict(
        env=env_id,
        threshold=threshold,
        seeds=seeds,
        pairs=pairs,
        ratio=spread,
        pace=pace(spread),
        solved=solved,
        median_seconds={name: statistics.median(p["runs"][name]["seconds"] for p in pairs) for name in COMMANDS},
        median_steps={
            name: statistics.median(s)
            if (s := [p["runs"][name]["steps"] for p in pairs if p["runs"][name]["solved"]])
            else None
            for name in COMMANDS
        },
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="LunarLander-v3")
    parser.add_argument("--seeds", type=int, nargs="+", default=[20, 21, 22, 23, 24])
    parser.add_argument("--threshold", type=float, default=200.0)
    parser.add_argument("--extra", default="", help="further arguments of both commands, e.g. '-n 4096 --eval-freq 512'")
    parser.add_argument("--out", default=single_file("time_to_solve.json"))
    args = parser.parse_args(argv)
    if len(set(args.seeds)) != len(args.seeds):
        parser.error(f"--seeds must differ, got {args.seeds}")
    code = code_record()  # the code measured: read before the runs
    row = benchmark(args.env, args.seeds, args.threshold, args.extra.split())
    ratio = row["ratio"]
    print(
        f"{row['env']}: time to {row['threshold']:g}, PPO / XPPO median paired {ratio['median']:.2f}x "
        f"[{ratio['interval'][0]:.2f}, {ratio['interval'][1]:.2f}] ({row['pace']}); solved: {row['solved']}"
    )
    record = dict(
        command=" ".join(["python benchmarks/time_to_solve.py", *(sys.argv[1:] if argv is None else argv)]),
        code=code,
        host=dict(platform=platform.platform(), cpus=os.cpu_count()),
        **row,
    )
    write_result(args.out, record)
    return record


if __name__ == "__main__":
    main()
