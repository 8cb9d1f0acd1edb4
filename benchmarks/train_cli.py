"""
Whole-process speed of the training command: ``python -m sb3_xppo.train`` (XPPO on the lean VecEnv) against
``python -m rl_zoo3.train --algo ppo``, as a user runs them, on the same hyperparameters.

- **Runs**: both commands with the same flags: ``--env``, ``-n``, ``--seed``, ``-f`` a scratch folder, ``--conf-file``
  rl-zoo3's own ``ppo.yml`` (the same hyperparameters: the packaged ``xppo.yml`` entry of LunarLander-v3 is a tuning,
  see docs/guide/xppo.md), ``--num-threads 1`` (one torch thread, as every benchmark here: torch's default of one
  thread per core spins on a busy machine), ``-P`` (the progress bar, the default of ``python -m sb3_xppo.train``),
  and rl-zoo3's defaults otherwise (evaluation every 25k steps, the final save); one after the other, the order
  alternating every repetition. Each is timed from start to exit: wall time
  (``perf_counter``) and the CPU time of the process and its children (``resource.getrusage(RUSAGE_CHILDREN)``),
  imports, env construction, evaluations and saving included.
- **Exactness**: the two saved final models' policy parameters are compared after the first repetition (XPPO's
  defaults are PPO's, the lean VecEnv's numbers ``DummyVecEnv``'s): ``bit_exact``.
- **Reported**: the XPPO/PPO ratio of the best runs and the median paired ratio (PPO seconds / XPPO seconds in the
  same repetition), on wall and CPU time; the pairs and the median's 95% bootstrap interval (``ratio_paired_spread``).
- **Target** (docs/guide/development.md): >= 1.6x on LunarLander-v3.
- **Outputs**: a printed table and ``benchmarks/results/single/train_cli.json``.

usage: python benchmarks/train_cli.py [--env LunarLander-v3] [--steps 131072] [--reps 9] [--seed 0] [--out FILE]
       (the defaults take about ten minutes on one free core)
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import rl_zoo3
import torch as th
from harness.layout import single_file, write_result
from harness.paired import paired_ratio
from harness.provenance import code_record
from stable_baselines3 import PPO

from sb3_xppo import XPPO

#: the commands timed, by name: the module run with ``python -m`` and its algorithm
COMMANDS = {"PPO": ("rl_zoo3.train", "ppo"), "XPPO": ("sb3_xppo.train", "xppo")}
#: rl-zoo3's PPO hyperparameters, the config of both commands
PPO_CONFIG = os.path.join(os.path.dirname(rl_zoo3.__file__), "hyperparams", "ppo.yml")
#: env id -> the XPPO/PPO ratio the command must reach
TARGETS = {"LunarLander-v3": 1.6}


def child_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_command(name: str, env_id: str, steps: int, seed: int, log_folder: str) -> dict[str, Any]:
    """
    One whole training process.

    :return: its wall and CPU seconds and the path of the model it saved
    """
    module, algo = COMMANDS[name]
    command = [sys.executable, "-m", module, "--algo", algo, "--env", env_id, "-n", str(steps), "--seed", str(seed)]
    command += ["--conf-file", PPO_CONFIG, "--num-threads", "1", "-P", "-f", log_folder]
    cpu, start = child_cpu_seconds(), time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds, cpu_seconds = time.perf_counter() - start, child_cpu_seconds() - cpu
    model = os.path.join(log_folder, algo, f"{env_id}_1", f"{env_id}.zip")
    shown = " ".join(["python -m", module, *command[3:-2]]).replace(PPO_CONFIG, "<rl_zoo3>/hyperparams/ppo.yml")
    return dict(
        name=name,
        command=shown,
        seconds=seconds,
        cpu_seconds=cpu_seconds,
        model=model,
    )


def same_parameters(ppo_zip: str, xppo_zip: str) -> bool:
    """Whether the two saved models' policies hold the same parameters, bit for bit."""
    ppo, xppo = PPO.load(ppo_zip, device="cpu").policy.state_dict(), XPPO.load(xppo_zip, device="cpu").policy.state_dict()
    return list(ppo) == list(xppo) and all(th.equal(ppo[k], xppo[k]) for k in ppo)


def benchmark(env_id: str, steps: int, reps: int, seed: int) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    exact = None
    for rep in range(reps):
        with tempfile.TemporaryDirectory() as log_folder:
            pair = {}
            for name in list(COMMANDS) if rep % 2 == 0 else list(COMMANDS)[::-1]:
                pair[name] = run_command(name, env_id, steps, seed, log_folder)
                runs.append(dict(pair[name], rep=rep))
                print(f"rep {rep} {name}: {pair[name]['seconds']:.1f} s ({pair[name]['cpu_seconds']:.1f} s CPU)", flush=True)
            if exact is None:
                exact = same_parameters(pair["PPO"]["model"], pair["XPPO"]["model"])
    by = {name: [r for r in runs if r["name"] == name] for name in COMMANDS}

    def ratios(key: str) -> tuple[float, float]:
        best = min(r[key] for r in by["PPO"]) / min(r[key] for r in by["XPPO"])
        paired = statistics.median(p[key] / x[key] for p, x in zip(by["PPO"], by["XPPO"], strict=True))
        return best, paired

    (best, paired), (cpu_best, cpu_paired) = ratios("seconds"), ratios("cpu_seconds")
    # the pairs and the median's 95% bootstrap interval (harness/paired.py)
    spread = paired_ratio([p["seconds"] / x["seconds"] for p, x in zip(by["PPO"], by["XPPO"], strict=True)])
    target = TARGETS.get(env_id)
    return dict(
        env=env_id,
        steps=steps,
        reps=reps,
        seed=seed,
        runs=[{k: v for k, v in r.items() if k != "model"} for r in runs],
        ratio_best=best,
        ratio_paired=paired,
        ratio_paired_spread=spread,
        cpu_ratio_best=cpu_best,
        cpu_ratio_paired=cpu_paired,
        target=target,
        target_met=None if target is None else paired >= target,
        bit_exact=exact,
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="LunarLander-v3")
    parser.add_argument("--steps", type=int, default=131072)
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=single_file("train_cli.json"))
    args = parser.parse_args(argv)
    if args.reps < 1 or args.steps < 1:
        parser.error(f"--reps and --steps must be >= 1, got {args.reps} and {args.steps}")
    code = code_record()  # the code measured: read before the runs
    row = benchmark(args.env, args.steps, args.reps, args.seed)
    print(
        f"{row['env']}: XPPO / PPO, whole process: best {row['ratio_best']:.2f}x, median paired {row['ratio_paired']:.2f}x "
        f"(CPU {row['cpu_ratio_best']:.2f}x, {row['cpu_ratio_paired']:.2f}x); bit for bit: {row['bit_exact']}"
    )
    record = dict(
        command=" ".join(["python benchmarks/train_cli.py", *(sys.argv[1:] if argv is None else argv)]), code=code, **row
    )
    write_result(args.out, record)
    return record


if __name__ == "__main__":
    main()
