"""
What safe loading costs: the load time of LunarLander-v3's zoo checkpoint (rl-zoo3's tuned PPO entry, trained for
one rollout and saved), through the package's safe path against SB3's own ``PPO.load``.

The checkpoint is a real one: the entry's hyperparameters turned into objects by rl-zoo3 (``harness.zoo``), the
model trained for ``--steps`` and saved by SB3. Each repetition loads it once each way, the order alternating; the
result is the median of the paired ratios (safe over SB3's) and each path's median time. Both loads must give the
same parameters and actions, bit for bit. Prints a line and writes ``benchmarks/results/single/safe_load.json``.

usage: python benchmarks/safe_load.py [--reps 200] [--steps 16384] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch as th
from harness.layout import single_file, write_result
from harness.provenance import code_record
from harness.zoo import zoo_setup
from stable_baselines3 import PPO

from sb3_xppo import load_model

ENV_ID = "LunarLander-v3"


def checkpoint(folder: Path, steps: int) -> Path:
    """LunarLander-v3's zoo entry, trained for ``steps`` and saved by SB3 (a single process, seed 0)."""
    hyperparams, env, eval_env, _, _ = zoo_setup(ENV_ID, seed=0, budget=steps, log_folder=str(folder))
    eval_env.close()
    model = PPO(env=env, seed=0, device="cpu", **hyperparams)
    model.learn(steps)
    path = folder / f"{ENV_ID}.zip"
    model.save(path)
    env.close()
    return path


def timed(load) -> tuple[float, PPO]:
    start = time.perf_counter()
    model = load()
    return time.perf_counter() - start, model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=200, help="paired repetitions")
    parser.add_argument("--steps", type=int, default=16384, help="training steps before saving (one zoo rollout)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--out", default=single_file("safe_load.json"))
    args = parser.parse_args()
    th.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as folder:
        path = checkpoint(Path(folder), args.steps)
        loads = {"safe": lambda: load_model(PPO, path, device="cpu"), "sb3": lambda: PPO.load(path, device="cpu")}
        models = {name: load() for name, load in loads.items()}  # warm-up, and the bit-for-bit check
        obs = np.random.default_rng(0).normal(size=(64, *models["sb3"].observation_space.shape)).astype(np.float32)
        same = all(th.equal(a, b) for a, b in zip(*(m.policy.state_dict().values() for m in models.values()), strict=True))
        same = same and np.array_equal(*(m.predict(obs, deterministic=True)[0] for m in models.values()))
        times: dict[str, list[float]] = {"safe": [], "sb3": []}
        for rep in range(args.reps):
            for name in ("safe", "sb3") if rep % 2 == 0 else ("sb3", "safe"):
                times[name].append(timed(loads[name])[0])
        size = path.stat().st_size

    ratios = [safe / sb3 for safe, sb3 in zip(times["safe"], times["sb3"], strict=True)]
    record = dict(
        env=ENV_ID,
        checkpoint_bytes=size,
        steps=args.steps,
        reps=args.reps,
        threads=args.threads,
        safe_ms=1e3 * statistics.median(times["safe"]),
        sb3_ms=1e3 * statistics.median(times["sb3"]),
        ratio=statistics.median(ratios),
        ratio_quartiles=[float(q) for q in np.percentile(ratios, [25, 75])],
        bit_for_bit=bool(same),
        command="python benchmarks/safe_load.py " + f"--reps {args.reps} --steps {args.steps} --threads {args.threads}",
        code=code_record(),
    )
    print(
        f"{ENV_ID} zoo checkpoint ({size / 1e3:.0f} kB): safe {record['safe_ms']:.2f} ms, SB3's PPO.load "
        f"{record['sb3_ms']:.2f} ms, median paired ratio {record['ratio']:.3f} (quartiles "
        f"{record['ratio_quartiles'][0]:.3f}-{record['ratio_quartiles'][1]:.3f}), same bits: {same}"
    )
    write_result(args.out, record)


if __name__ == "__main__":
    main()
