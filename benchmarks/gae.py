"""
calc_gae and XPPO's rollout buffer against SB3's ``RolloutBuffer.compute_returns_and_advantage`` on identical data.

For each ``(n_steps, n_envs)`` size the three compute GAE from the same rewards, values, episode starts and
bootstrap: SB3's loop, ``XPPORolloutBuffer.compute_returns_and_advantage`` (the "buffer" columns: its results must
equal SB3's bit for bit) and ``calc_gae`` (chunked scan, equal to 1e-5). The timings are interleaved in one process:
``--rounds`` rounds, each timing the three in turn and keeping each one's minimum over ``--reps`` calls (this
machine is noisy). A round is a pair: the speed-ups are the medians of the rounds' ratios, with their 95% bootstrap
intervals and every round's ratio (``harness/paired.py``). Prints a table and writes
``benchmarks/results/single/gae.json``.

usage: python benchmarks/gae.py [--reps 5] [--rounds 9] [--threads 1]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import torch as th
from gymnasium import spaces
from harness.layout import single_file, write_result
from harness.paired import paired_times
from harness.provenance import code_record
from stable_baselines3.common.buffers import RolloutBuffer

from sb3_xppo import calc_gae
from sb3_xppo.common.buffers import XPPORolloutBuffer

SIZES = ((2048, 1), (128, 8), (512, 16), (1024, 16), (1024, 32), (2048, 64), (4096, 64), (2048, 256))
GAMMA, LAM = 0.99, 0.95


def make_buffer(
    n_steps: int, n_envs: int, seed: int = 0, buffer_class: type[RolloutBuffer] = RolloutBuffer
) -> tuple[RolloutBuffer, th.Tensor, np.ndarray]:
    """A filled buffer with episode starts at 2% of the steps, a bootstrap value and final dones (same data per seed)."""
    rng = np.random.default_rng(seed)
    box = spaces.Box(-1, 1, (1,))
    buffer = buffer_class(n_steps, box, box, n_envs=n_envs, gamma=GAMMA, gae_lambda=LAM)
    buffer.rewards[:] = rng.normal(size=(n_steps, n_envs))
    buffer.values[:] = rng.normal(size=(n_steps, n_envs))
    buffer.episode_starts[:] = rng.random((n_steps, n_envs)) < 0.02
    last_values = th.as_tensor(rng.normal(size=n_envs), dtype=th.float32)
    dones = rng.random(n_envs) < 0.02
    return buffer, last_values, dones


def sb3_inputs_as_torch(buffer: RolloutBuffer, last_values: th.Tensor, dones: np.ndarray) -> dict[str, th.Tensor]:
    """The same data in calc_gae's layout: ``(n_envs, n_steps)``, values with the bootstrap appended."""
    rewards = th.as_tensor(buffer.rewards.T.copy())
    values = th.cat([th.as_tensor(buffer.values.T.copy()), last_values.reshape(-1, 1)], dim=1)
    starts = np.concatenate([buffer.episode_starts[1:], dones[None].astype(np.float32)], axis=0)
    masks = th.as_tensor(1.0 - starts.T.copy())
    return dict(rewards=rewards, values=values, masks=masks)


def best_time(fn: Callable[[], object], reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5, help="calls per round; a round keeps each one's fastest")
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds: the pairs of the ratios")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--out", default=single_file("gae.json"))
    args = parser.parse_args()
    th.set_num_threads(args.threads)

    rows = []
    print(
        f"{'n_steps x n_envs':>18} {'SB3 ms':>9} {'buffer ms':>10} {'speed-up':>9} {'exact':>6} "
        f"{'calc_gae ms':>12} {'speed-up':>9} {'max |diff|':>11}"
    )
    for n_steps, n_envs in SIZES:
        buffer, last_values, dones = make_buffer(n_steps, n_envs)
        xppo_buffer = make_buffer(n_steps, n_envs, buffer_class=XPPORolloutBuffer)[0]
        inputs = sb3_inputs_as_torch(buffer, last_values, dones)

        def sb3(buffer=buffer, last_values=last_values, dones=dones) -> None:
            buffer.compute_returns_and_advantage(last_values, dones)

        def xppo(buffer=xppo_buffer, last_values=last_values, dones=dones) -> None:
            buffer.compute_returns_and_advantage(last_values, dones)

        def ours(inputs=inputs):
            return calc_gae(**inputs, gamma=GAMMA, lam=LAM, return_advantages=True)

        sb3_times, buffer_times, our_times = [], [], []
        for _ in range(args.rounds):  # interleave them so that machine noise hits all alike
            sb3_times.append(best_time(sb3, args.reps))
            buffer_times.append(best_time(xppo, args.reps))
            our_times.append(best_time(ours, args.reps))
        t_sb3, t_buffer, t_ours = min(sb3_times), min(buffer_times), min(our_times)
        exact = bool(
            np.array_equal(xppo_buffer.advantages, buffer.advantages) and np.array_equal(xppo_buffer.returns, buffer.returns)
        )
        gae = ours()
        diff = max(
            float(np.abs(gae.advantages.numpy().T - buffer.advantages).max()),
            float(np.abs(gae.returns.numpy().T - buffer.returns).max()),
        )
        rows.append(
            dict(
                n_steps=n_steps,
                n_envs=n_envs,
                sb3_ms=t_sb3 * 1e3,
                buffer_ms=t_buffer * 1e3,
                buffer_speedup=t_sb3 / t_buffer,
                buffer_spread=paired_times(sb3_times, buffer_times),
                buffer_exact=exact,
                calc_gae_ms=t_ours * 1e3,
                speedup=t_sb3 / t_ours,
                spread=paired_times(sb3_times, our_times),
                max_abs_diff=diff,
            )
        )
        print(
            f"{n_steps:>8} x {n_envs:<7} {t_sb3 * 1e3:9.3f} {t_buffer * 1e3:10.3f} {t_sb3 / t_buffer:8.1f}x {exact!s:>6} "
            f"{t_ours * 1e3:12.3f} {t_sb3 / t_ours:8.1f}x {diff:11.2e}"
        )
    write_result(args.out, dict(threads=args.threads, code=code_record(), torch=th.__version__, rows=rows), indent=2)


if __name__ == "__main__":
    main()
