"""The speed benchmark's tables and plot (``benchmarks/speed.py``), from its result records."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.speed_profile import ALGOS, CATEGORIES, ENV_ONLY


def format_sequences_table(results: list[dict[str, Any]]) -> str:
    """The sequence-batching table: RecurrentXPPO(sequence_batching=True) / RecurrentPPO."""
    lines = [
        f"{'env (ppo_lstm.yml)':<20} {'steps/run':>9} {'parent/s':>9} {'XPPO/s':>9} {'learn':>7} {'CPU':>7} "
        f"{'train':>7} {'CPU':>7} {'targets':>16} {'param diff':>10}"
    ]
    for r in results:
        s, q = r["speed"], r["ratio_paired"]
        met = " ".join(f"{k}:{'ok' if v else 'no'}" for k, v in r["targets_met"].items())
        lines.append(
            f"{r['env']:<20} {r['steps_per_run']:>9} {s['RecurrentPPO']['best']:>9.0f} {s['RecurrentXPPO']['best']:>9.0f} "
            f"{q['learn']:>6.2f}x {q['learn_cpu']:>6.2f}x {q['train']:>6.2f}x {q['train_cpu']:>6.2f}x {met:>16} "
            f"{r['max_abs_param_diff']:>10.1e}"
        )
    return "\n".join(lines)


def format_contrib_table(results: list[dict[str, Any]]) -> str:
    """The sb3-contrib comparison's table."""
    lines = [
        f"{'comparison':<30} {'steps/run':>9} {'parent':>9} {'XPPO':>9} {'ratio':>7} {'median':>7} {'paired':>7} "
        f"{'CPU pair':>8} {'bit-exact':>10}"
    ]
    for r in results:
        s = r["speed"]
        exact = "yes" if r["bit_exact"] else f"{r['max_abs_param_diff']:.1e}"
        lines.append(
            f"{r['name']:<30} {r['steps_per_run']:>9} {s['parent']['best']:>9.0f} {s['XPPO']['best']:>9.0f} "
            f"{r['ratio_best']:>6.3f}x {r['ratio_median']:>6.3f}x {r['ratio_paired']:>6.3f}x {r['cpu_ratio_paired']:>7.3f}x "
            f"{exact:>10}"
        )
    return "\n".join(lines)


def format_table(results: list[dict[str, Any]]) -> str:
    """The speed table and, per env, the breakdown table."""
    lines = [
        f"{'env':<26} {'steps/run':>9} {'PPO best':>9} {'XPPO best':>9} {'env only':>9} {'ratio':>7} {'median':>7} "
        f"{'paired':>7} {'CPU':>7} {'CPU pair':>8} {'target':>8} {'bit-exact':>10}"
    ]
    for r in results:
        s = r["speed"]
        target = "-" if r["target"] is None else f"{r['target']:.2f}x" + (" ok" if r["target_met"] else " no")
        exact = "yes" if r["bit_exact"] else f"{r['max_abs_param_diff']:.1e}"
        lines.append(
            f"{r['env']:<26} {r['steps_per_run']:>9} {s['PPO']['best']:>9.0f} {s['XPPO']['best']:>9.0f} "
            f"{s[ENV_ONLY]['best']:>9.0f} {r['ratio_best']:>6.3f}x {r['ratio_median']:>6.3f}x {r['ratio_paired']:>6.3f}x "
            f"{r['cpu_ratio_best']:>6.3f}x {r['cpu_ratio_paired']:>7.3f}x {target:>8} {exact:>10}"
        )
    for r in results:
        names = [n for n in (*ALGOS, ENV_ONLY) if n in r["breakdown"]]
        lines += ["", f"{r['env']}: {r['clock']}-clock microseconds per env-step, fastest instrumented run (share)"]
        lines.append(f"{'piece':<28}" + "".join(f"{n:>18}" for n in names))
        totals = {n: sum(r["breakdown"][n]["us_per_step"].values()) for n in names}
        for key, label in CATEGORIES.items():
            cells = []
            for n in names:
                us = r["breakdown"][n]["us_per_step"][key]
                cells.append(f"{us:>10.1f} ({100 * us / totals[n]:>4.1f}%)" if totals[n] else f"{us:>18.1f}")
            lines.append(f"{label:<28}" + "".join(cells))
        lines.append(f"{'total':<28}" + "".join(f"{totals[n]:>10.1f}        " for n in names))
        instrumented = [
            f"{n} {b['instrumented_steps_per_s']:.0f} (CPU {b['instrumented_cpu_steps_per_s']:.0f})"
            for n, b in r["breakdown"].items()
            if n in ALGOS
        ]
        lines.append("instrumented env-steps/s, wall (CPU), the instrument's overhead: " + ", ".join(instrumented))
    return "\n".join(lines)


def plot(results: list[dict[str, Any]], path: str) -> None:
    """
    Stacked bars of the breakdown (microseconds per env-step), one panel per env, PPO / XPPO / env only; two panels a
    row, about 1000 pixels wide, so that the labels stay legible on a page.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = min(2, len(results))
    rows = -(-len(results) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.0 * columns, 3.6 * rows + 1.2), squeeze=False)
    colors = plt.get_cmap("tab20").colors
    for ax, r in zip(axes.flat, results, strict=False):
        names = [n for n in (*ALGOS, ENV_ONLY) if n in r["breakdown"]]
        bottoms = np.zeros(len(names))
        for i, (key, label) in enumerate(CATEGORIES.items()):
            heights = np.array([r["breakdown"][n]["us_per_step"][key] for n in names])
            ax.bar(names, heights, bottom=bottoms, color=colors[i % len(colors)], label=label)
            bottoms += heights
        for x, n in enumerate(names):
            ax.annotate(f"{r['speed'][n]['best']:.0f}/s", (x, bottoms[x]), ha="center", va="bottom", fontsize=9)
        env_id, _, vec_env = r["env"].partition("@")
        where = f" (XPPO: {vec_env})" if vec_env else ""
        spread = r.get("ratio_paired_spread")
        ratio = f"{r['ratio_paired']:.2f}x" + (" [{:.2f}, {:.2f}]".format(*spread["interval"]) if spread else "")
        ax.set_title(f"{env_id}{where}: XPPO/PPO {ratio}", fontsize=9.5)
        ax.set_ylabel(f"us per env-step ({r['clock']} clock)")
        ax.set_ylim(0, bottoms.max() * 1.15)
    for ax in list(axes.flat)[len(results) :]:
        ax.axis("off")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=9, frameon=False)
    fig.suptitle(
        "learn() time per env-step (instrumented runs; bar labels: best uninstrumented env-steps/s;\n"
        "titles: XPPO/PPO env-steps/s, the median paired ratio [its 95% interval])",
        fontsize=11,
    )
    fig.tight_layout(rect=(0, 1.0 / (3.6 * rows + 1.2), 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)
