"""Numbers and verdicts in words, as every region writes them: intervals, verdicts, seeds, budgets, pending notes."""

from __future__ import annotations

from typing import Any

#: How every ``learn()`` speed ratio is labelled, on every page (the median over the repetitions of PPO's time over
#: XPPO's in the same pair; speed.json's ``ratio_paired``)
MEDIAN_PAIRED = "median paired"


def interval(row: dict[str, Any], metric: str, decimals: int = 1) -> str:
    """``"iqm [low, high]"`` of a summary row's ``final`` or ``curve`` IQM."""
    low, high = row[f"{metric}_iqm_ci"]
    return f"{row[f'{metric}_iqm']:.{decimals}f} [{low:.{decimals}f}, {high:.{decimals}f}]"


def verdict(row: dict[str, Any], base: dict[str, Any], metric: str) -> str:
    """``"ahead"`` or ``"behind"`` when the 95% CIs of ``metric`` are apart, else ``"level"``."""
    (low, high), (base_low, base_high) = row[f"{metric}_iqm_ci"], base[f"{metric}_iqm_ci"]
    if low > base_high:
        return "ahead"
    if high < base_low:
        return "behind"
    return "level"


def steps(row: dict[str, Any], reached: bool = True) -> str:
    """Median steps to the threshold over the seeds that reached it (``"22.5k"``), and how many did."""
    median = row["median_steps_to_threshold"]
    count = f" ({row['reached']}/{len(row['seeds'])})" if reached else ""
    return (f"{median / 1000:g}k" if median is not None else "-") + count


def seeds(values: list[int]) -> str:
    """``[10, 11, ..., 19]`` as ``"10-19"`` (a run of consecutive seeds), else the list."""
    if len(values) > 2 and values == list(range(values[0], values[-1] + 1)):
        return f"{values[0]}-{values[-1]}"
    return ", ".join(map(str, values))


def tally(found: list[tuple[str, int, dict[str, Any], dict[str, Any]]], metric: str) -> dict[str, list[str]]:
    """The envs where the contender is ahead, level or behind PPO on ``metric``."""
    counts: dict[str, list[str]] = dict(ahead=[], level=[], behind=[])
    for env_id, _, row, base in found:
        counts[verdict(row, base, metric)].append(env_id)
    return counts


def said(counts: dict[str, list[str]], total: int, names: bool = True) -> str:
    """``"ahead on 3 of 6 (A, B, C), level on 3"``: the verdicts of :func:`tally` in words."""
    parts = []
    for word in ("ahead", "level", "behind"):
        envs = counts[word]
        if envs:
            listed = f" ({', '.join(envs)})" if names and word != "level" else ""
            parts.append(f"{word} on {len(envs)} of {total}{listed}")
    return ", ".join(parts)


def budget(value: int) -> str:
    return f"{value / 1e6:g}M" if value >= 1e6 else f"{value / 1e3:g}k"


def dash(value: float | None) -> str:
    """A step count (``"12,288"``), or ``"-"`` where none was reached."""
    return "-" if value is None else f"{value:,.0f}"


def cell(text: str) -> str:
    """Free text (a campaign's question) as one markdown table cell: its pipes escaped, so that ``|r - 1|`` stays text."""
    return text.replace("|", "\\|")


def table_with_pending(lines: list[str], pending: list[str], empty: str, lead: str = "Not finished") -> str:
    """A comparison table (``lines``, its header first) or ``empty`` when it has no row, then what is still running."""
    text = "\n".join(lines) if len(lines) > 2 else empty
    if pending:
        text += f"\n\n{lead} (the run cache keeps the runs done so far): " + "; ".join(pending) + "."
    return text
