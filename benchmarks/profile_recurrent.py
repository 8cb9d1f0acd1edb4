"""
Where RecurrentXPPO's and RecurrentPPO's ``learn()`` spend their CPU time: cProfile on ``time.process_time``, one torch
thread, ``benchmarks/speed.py``'s sb3-contrib config (CartPole-v1 x8, ``MlpLstmPolicy``, ``n_steps=128``,
``batch_size=256``, ``n_epochs=4``), a warm-up ``learn()`` then a profiled one of each, in one process, the two
alternating over ``--reps`` repetitions (the first algorithm swapped each time).

It prints each algorithm's CPU seconds per repetition, the median of the paired ratios and the share of the LSTM's
work (``torch.lstm``, and autograd's backward pass, mostly the LSTM's), which both algorithms share and XPPO
cannot make cheaper without changing its numbers.

usage: python benchmarks/profile_recurrent.py [--steps 4096] [--warmup 1024] [--reps 3]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time

import torch as th
from sb3_contrib import RecurrentPPO
from stable_baselines3.common.env_util import make_vec_env

from sb3_xppo import RecurrentXPPO

#: The functions that are the LSTM's own work: (file or "~" for built-ins, function name)
LSTM_WORK = (("~", "<method 'run_backward' of 'torch._C._EngineBase' objects>"), ("~", "<built-in method torch.lstm>"))


def profile(algo: type, steps: int, warmup: int) -> tuple[float, float]:
    """:return: CPU seconds of ``learn(steps)`` after a ``learn(warmup)``, and the LSTM's own share of them"""
    model = algo(
        "MlpLstmPolicy", make_vec_env("CartPole-v1", n_envs=8, seed=0), n_steps=128, batch_size=256, n_epochs=4, seed=0
    )
    model.learn(warmup)
    profiler = cProfile.Profile(time.process_time)
    start = time.process_time()
    profiler.enable()
    model.learn(steps, reset_num_timesteps=False)
    profiler.disable()
    seconds = time.process_time() - start
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    lstm = sum(tottime for (file, _, name), (_, _, tottime, _, _) in stats.items() if (file, name) in LSTM_WORK)
    return seconds, lstm / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=4096)
    parser.add_argument("--warmup", type=int, default=1024)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    th.set_num_threads(1)
    algos: list[type] = [RecurrentPPO, RecurrentXPPO]
    results: dict[str, list[tuple[float, float]]] = {algo.__name__: [] for algo in algos}
    for rep in range(args.reps):
        for algo in algos if rep % 2 == 0 else algos[::-1]:
            results[algo.__name__].append(profile(algo, args.steps, args.warmup))
    for name, runs in results.items():
        cells = ", ".join(f"{seconds:.2f} s (LSTM {share:.0%})" for seconds, share in runs)
        print(f"{name}: CPU seconds and the share of torch.lstm and backward, per repetition: {cells}")
    ratios = [ppo / xppo for (ppo, _), (xppo, _) in zip(results["RecurrentPPO"], results["RecurrentXPPO"], strict=True)]
    print(f"RecurrentXPPO / RecurrentPPO speed, median paired ratio: {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
