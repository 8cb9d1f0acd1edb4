"""The regions of ``benchmarks/overhead.py``: multi-critic's and PCGrad's ``train()`` cost (``single/overhead*.json``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.regions.figures import ratio_with_spread
from harness.regions.results import single


def seconds_of(data: dict[str, Any], variant: str) -> float:
    """The median seconds of one ``train()`` call of ``variant`` in an overhead result file."""
    return next(row["median_ms"] for row in data["rows"] if row["variant"] == variant) / 1e3


def render_pcgrad_cost(page: Path) -> str:
    """The ``train()`` time of ``group_gradients='pcgrad'`` against plain multi-critic (``overhead_pcgrad.json``)."""
    data = single("overhead_pcgrad.json")
    if data is None or "pcgrad" not in data:
        return "- **Cost**: *`overhead_pcgrad.json` has not been written yet.*"
    ratios = data["pcgrad"]
    quoted = ratio_with_spread(ratios.get("paired_spread"), seconds_of(data, "XPPO 4 critics"))
    return (
        "- **Cost**: one more backward pass through the actor per group. `python benchmarks/overhead.py --only critics\n"
        f"  --reps {data['config']['reps']} --learn-steps 0 --no-contrib --out "
        "benchmarks/results/single/overhead_pcgrad.json` (CartPole, 2048 steps,\n"
        '  batch 64, 2 epochs, 4 groups, one thread): `train()` with `group_gradients="pcgrad"` took\n'
        f"  {quoted} the time of the plain multi-critic on the same groups, the median of the paired ratios with its 95%\n"
        f"  interval ({ratios['ratio']:.1f}x by the minimum over repetitions). On a policy this small the per-operation\n"
        "  overhead of the extra backward passes dominates; the projection has no data-dependent branch, so the cost\n"
        "  does not depend on how often the groups conflict."
    )


def render_multi_critic_overhead(page: Path) -> str:
    """``train()`` time of 4 reward groups against single-critic XPPO (``overhead.json``'s ``multi_critic``)."""
    data = single("overhead.json")
    if data is None or "multi_critic" not in data:
        return "- Cost: *`benchmarks/overhead.py` has not written `overhead.json` yet.*"
    ratios = {
        name: ratio_with_spread(row.get("paired_spread"), seconds_of(data, name)) for name, row in data["multi_critic"].items()
    }
    config = data["config"]
    return (
        f"- Cost (`python benchmarks/overhead.py --reps {config['reps']} --learn-steps 0`, {config['env']}, "
        f"{config['n_steps']} steps,\n  batch {config['batch_size']}, the median of the paired ratios with its 95% "
        f"interval): `train()` with 4 groups on the shared trunk takes {ratios['XPPO 4 critics']} the time of "
        f"single-critic XPPO, {ratios['XPPO 4 critics, normalize_values']} with `normalize_values`,\n"
        f"  {ratios['XPPO 4 separate critics']} with `separate_critics=True`.\n"
        "  The per-part clipping works on the flat gradient buffer of the fast Adam step (one `_foreach_norm` for every\n"
        "  part), and the normalizer's statistics are fixed once per `train()` call; the numbers are the same, bit for bit."
    )


#: The regions this module renders: ``render(page) -> markdown``
REGIONS: dict[str, Callable[[Path], str]] = {
    "pcgrad-cost": render_pcgrad_cost,
    "multi-critic-overhead": render_multi_critic_overhead,
}
