"""The region of ``benchmarks/safe_load.py`` (``single/safe_load.json``): what loading safely costs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.regions.results import single


def render_safe_load_cost(page: Path) -> str:
    """The load time of LunarLander-v3's zoo checkpoint, safe against SB3's ``PPO.load``, and whether they agree."""
    data = single("safe_load.json")
    if data is None:
        return "Pending: `python benchmarks/safe_load.py`."
    low, high = data["ratio_quartiles"]
    agree = "the same parameters and actions, bit for bit" if data["bit_for_bit"] else "NOT the same model: a bug"
    return (
        f"Loading {data['env']}'s zoo checkpoint ({data['checkpoint_bytes'] / 1e3:.0f} kB, PPO) takes "
        f"{data['safe_ms']:.1f} ms on the safe path and {data['sb3_ms']:.1f} ms with SB3's `PPO.load` (medians of "
        f"{data['reps']} paired loads, {data['threads']} torch thread): {data['ratio']:.2f}x, quartiles "
        f"{low:.2f}-{high:.2f}x; {agree} (`{data['command']}`, `benchmarks/results/single/safe_load.json`)."
    )


#: The regions this module renders: ``render(page) -> markdown``
REGIONS: dict[str, Callable[[Path], str]] = {"safe-load-cost": render_safe_load_cost}
