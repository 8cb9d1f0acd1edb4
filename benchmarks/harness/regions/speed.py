"""
The regions of ``benchmarks/speed.py`` (``single/speed.json``): ``learn()``'s throughput against PPO's, where its time
goes, XPPO on other VecEnvs and what bounds their ratios; with ``overhead.json`` and ``gae.json`` in the summary table;
and ``--sequences`` (``single/speed_sequences.json``): RecurrentXPPO's ``sequence_batching`` against RecurrentPPO.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.paired import pace as paired_pace
from harness.regions.figures import MEDIAN_PAIRED, ratio_with_spread
from harness.regions.results import single


def speed_results(vec_env: bool = False) -> dict[str, Any] | None:
    """
    :param vec_env: the rows of XPPO on another VecEnv (``<env id>@<vec env>``) instead of the plain rows, where
        both algorithms step SB3's ``make_vec_env``
    :return: speed.json with only those rows (None without the file)
    """
    data = single("speed.json")
    if data is None:
        return None
    return {**data, "results": [r for r in data["results"] if ("@" in r["env"]) == vec_env]}


def quoted(row: dict[str, Any]) -> str:
    """A speed.json or train_cli.json row's median paired ratio with its interval (``figures.ratio_with_spread``)."""
    seconds = statistics.median(run["seconds"] for run in row["runs"])
    return ratio_with_spread(row.get("ratio_paired_spread"), seconds)


def speed_claim() -> str | None:
    """
    ``learn()``'s env-steps/s against PPO's in words, per env and contrib parent (same envs, median paired ratios with
    their intervals): faster or slower only where the interval is clear of 1, else level.
    """
    data = speed_results()
    if data is None:
        return None
    by_pace: dict[str, list[str]] = {}
    for r in data["results"]:
        by_pace.setdefault(paired_pace(r["ratio_paired_spread"]), []).append(f"{r['env']} ({quoted(r)})")
    parts = [f"{word} on {', '.join(envs)}" for word, envs in by_pace.items()]
    for c in data.get("contrib", []):
        ours, parent = c["name"].split(" / ")
        word = paired_pace(c["ratio_paired_spread"])
        parts.append(f"{ours} {word} {'with' if word == 'level' else 'than'} {parent} ({quoted(c)})")
    exact = all(r["bit_exact"] for r in data["results"] + data.get("contrib", []))
    return (
        "; ".join(parts)
        + f" (env-steps/s, {MEDIAN_PAIRED} [95% interval]; "
        + ("the same parameters bit for bit)" if exact else "NOT bit-exact)")
    )


def exactness_claim() -> str | None:
    """Whether XPPO with PPO's options ended on PPO's parameters in every ``learn()`` run of speed.json."""
    data = speed_results()
    if data is None:
        return None
    rows = data["results"] + data.get("contrib", [])
    names = [r["env"] for r in data["results"]] + [c["name"].split(" / ")[0] for c in data.get("contrib", [])]
    if all(r["bit_exact"] for r in rows):
        return f"yes: every parameter equal to SB3's after `learn()` ({', '.join(names)}; and in the tests)"
    return "no: " + ", ".join(n for n, r in zip(names, rows, strict=True) if not r["bit_exact"]) + " differ"


def render_speed(page: Path) -> str:
    """``learn()`` throughput, ``train()`` overhead and GAE, from speed.json, overhead.json and gae.json."""
    lines = ["| what | result | from |", "| --- | --- | --- |"]
    if (claim := speed_claim()) is not None:
        lines.append(
            "| `learn()` env-steps/s, XPPO with PPO's options against SB3 PPO on the same envs (one torch thread) "
            f"| {claim} | `benchmarks/speed.py`, `speed.json` |"
        )
    overhead = single("overhead.json")
    if overhead is not None:
        cells = [
            f"{r['variant'].removeprefix('XPPO ')} {ratio_with_spread(r['paired_spread'], r['median_ms'] / 1e3)}"
            for r in overhead["rows"][1:]
        ]
        seconds = {r["variant"]: r["median_ms"] / 1e3 for r in overhead["rows"]}
        cells += [
            f"{k.removeprefix('XPPO ')} {ratio_with_spread(v['paired_spread'], seconds[k])} single-critic XPPO"
            for k, v in overhead["multi_critic"].items()
        ]
        lines.append(
            f"| `train()` time against PPO's ({MEDIAN_PAIRED} with its 95% interval, {overhead['config']['reps']} "
            f"pairs; below 1x: less time) | {'; '.join(cells)} | "
            "`benchmarks/overhead.py`, "
            "`overhead.json` |"
        )
    gae = single("gae.json")
    if gae is not None:
        exact = all(r["buffer_exact"] for r in gae["rows"])
        cells = [
            f"{ratio_with_spread(r['buffer_spread'], r['sb3_ms'] / 1e3)} at {r['n_steps']}x{r['n_envs']}" for r in gae["rows"]
        ]
        lines.append(
            f"| rollout-buffer GAE against SB3's loop ({'equal bit for bit' if exact else 'NOT bit-exact'}; SB3's time "
            "over the buffer's, the median of interleaved rounds with its 95% interval) | "
            f"{', '.join(cells)} | `benchmarks/gae.py`, `gae.json` |"
        )
    return "\n".join(lines)


def render_speed_breakdown(page: Path) -> str:
    """Where ``learn()``'s time goes, PPO against XPPO: CPU microseconds per env-step, from speed.json."""
    data = speed_results()
    if data is None:
        return "*No speed.json yet.*"
    pieces = list(data["results"][0]["breakdown"]["PPO"]["us_per_step"])
    header = " | ".join(f"{r['env']} PPO / XPPO" for r in data["results"])
    lines = [f"| piece (us per env-step) | {header} |", "| --- |" + " --- |" * len(data["results"])]
    for piece in [*pieces, "total"]:
        cells = []
        for r in data["results"]:
            parts = [r["breakdown"][who]["us_per_step"] for who in ("PPO", "XPPO")]
            values = [sum(p.values()) if piece == "total" else p.get(piece, float("nan")) for p in parts]
            cells.append(f"{values[0]:.1f} / {values[1]:.1f}")
        lines.append(f"| {piece.replace('_', ' ')} | {' | '.join(cells)} |")
    return "\n".join(lines)


def render_vec_env_speed(page: Path) -> str:
    """``learn()`` of XPPO on the lean and EnvPool envs against SB3 PPO on ``make_vec_env``'s (speed.json's rows)."""
    data = speed_results(vec_env=True)
    if data is None or not data["results"]:
        return "Pending: `python benchmarks/speed.py --contrib`."
    lines = [
        f"| env, XPPO's VecEnv | XPPO / PPO env-steps/s: {MEDIAN_PAIRED}, 95% interval | PPO's parameters |",
        "| --- | --- | --- |",
    ]
    for r in data["results"]:
        exact = "bit for bit" if r["bit_exact"] else f"no (EnvPool's envs; max diff {r['max_abs_param_diff']:.2g})"
        env_id, vec_env = r["env"].split("@")
        lines.append(f"| {env_id}, {vec_env} | {quoted(r)} | {exact} |")
    return "\n".join(lines)


def lean_result(env_id: str) -> dict[str, Any] | None:
    """speed.json's row of XPPO on the lean env against PPO on ``make_vec_env``'s (``<env id>@lean``), None without it."""
    data = speed_results(vec_env=True)
    return next((r for r in (data or {}).get("results", []) if r["env"] == f"{env_id}@lean"), None)


def speed_ladder(env_id: str = "LunarLander-v3") -> str | None:
    """
    One sentence that ties the three speed figures of one env together, each median paired: the envs alone
    (``vec_env.json``), ``learn()`` on them (``speed.json``) and the whole training command (``train_cli.json``).
    None while one of the three is missing.
    """
    vec_env, learn, command = single("vec_env.json"), lean_result(env_id), single("train_cli.json")
    envs = next((r for r in (vec_env or {}).get("rows", []) if r["env"] == env_id), None)
    if envs is None or learn is None or command is None or command["env"] != env_id:
        return None
    return (
        "Three speed figures, nested: the lean env alone steps "
        f"{ratio_with_spread(envs.get('ratio_paired_spread'), envs.get('seconds_median', 0.0))} as fast on {env_id} "
        f"x{envs['n_envs']} as SB3's `make_vec_env` ({MEDIAN_PAIRED} with its 95% interval, `vec_env.json`); `learn()` "
        "adds the network's "
        f"passes and the updates, which cost XPPO and PPO alike: {quoted(learn)} PPO's env-steps/s on "
        f"{env_id} on the lean env ({MEDIAN_PAIRED} with its 95% interval, `speed.json`); the whole training command, "
        "`python -m "
        "sb3_xppo.train` against rl-zoo3's at PPO's hyperparameters, adds what both pay (imports, set-up, evaluations, "
        "saving), and rl-zoo3's envs never render LunarLander's particles, so it gains least: "
        f"{quoted(command)} on {env_id} ({MEDIAN_PAIRED} with its 95% interval, `train_cli.json`)."
    )


def render_speed_ladder(page: Path) -> str:
    return speed_ladder() or "Pending: `vec_env.json`, `speed.json` (`--contrib`) and `train_cli.json`."


#: The pieces of ``learn()`` that XPPO with PPO's settings cannot shed: the env's step and the network's passes, the
#: same operations on the same operands as PPO's (the contract of its exactness)
FLOOR_PIECES = {"env": "env step", "policy": "collection forward", "forward": "minibatch forward", "backward": "backward"}


def speed_floor_lines(results: list[dict[str, Any]]) -> list[str]:
    """
    What bounds each row's ratio, from its instrumented run (CPU microseconds per env-step, speed.json's
    ``breakdown``): the time a target leaves XPPO (PPO's total over the target) against what XPPO's env step and
    network passes alone take, and the rest of XPPO's time.
    """
    lines = [
        "What bounds these ratios, in CPU microseconds per env-step from the same run's instrumented repetition "
        "(`breakdown` in `speed.json`):",
        "",
        "| env, XPPO's VecEnv | the target leaves XPPO | XPPO: " + " + ".join(FLOOR_PIECES.values()) + " | XPPO: the rest |",
        "| --- | ---: | ---: | ---: |",
    ]
    beyond = []
    for r in results:
        if r["target"] is None:
            continue
        ppo, xppo = (r["breakdown"][who]["us_per_step"] for who in ("PPO", "XPPO"))
        left, floor = sum(ppo.values()) / r["target"], sum(xppo[piece] for piece in FLOOR_PIECES)
        parts = " + ".join(f"{xppo[piece]:.0f}" for piece in FLOOR_PIECES)
        lines.append(
            f"| {r['env'].replace('@', ', ')} | {left:.0f} | {parts} = {floor:.0f} | {sum(xppo.values()) - floor:.0f} |"
        )
        if floor > left:
            beyond.append(r["env"].replace("@", ", "))
    lines += [
        "",
        "The env step and the network's passes are the operations that reproducing PPO fixes: the same ones on the same "
        "operands (XPPO has already trimmed the Python around them). "
        + (
            f"On {' and '.join(beyond)} they alone take more than the target leaves, so that target is out of reach at "
            "PPO's bits; elsewhere"
            if beyond
            else "Everywhere"
        )
        + " the rest (minibatch sampling, the loss terms, the optimizer step, the rollout's bookkeeping) would have to "
        "shrink to what the target leaves over them.",
    ]
    return lines


#: A row of speed_sequences.json timed over fewer rollouts per run than this is labelled rough
ROUGH_BELOW_ROLLOUTS = 3


def render_sequence_batching(page: Path) -> str:
    """RecurrentXPPO with ``sequence_batching=True`` against RecurrentPPO: ``train()`` and ``learn()``, from
    speed_sequences.json (``benchmarks/speed.py --sequences``)."""
    data = single("speed_sequences.json")
    if data is None or not data.get("sequences"):
        return "Pending: `python benchmarks/speed.py --envs --sequences --name speed_sequences`."
    lines = [
        "| env (rl-zoo3 `ppo_lstm.yml`) | `train()` time, RecurrentPPO / RecurrentXPPO | `learn()` env-steps/s, "
        "RecurrentXPPO / RecurrentPPO | largest parameter difference |",
        "| --- | --- | --- | --- |",
    ]
    rough = []
    for r in data["sequences"]:
        spread = r.get("ratio_paired_spread", {})
        train = ratio_with_spread(spread.get("train"), r.get("train_seconds_median", 0.0))
        learn = ratio_with_spread(spread.get("learn"), r.get("seconds_median", 0.0))
        name = r["env"]
        if r["rollouts"] < ROUGH_BELOW_ROLLOUTS:
            rough.append(r["env"])
            name += f" ({r['rollouts']} rollout per run: rough)"
        lines.append(f"| {name} | {train} | {learn} | {r['max_abs_param_diff']:.1g} |")
    runs = {r["env"]: f"{r['rollouts']} rollout{'s' if r['rollouts'] > 1 else ''}" for r in data["sequences"]}
    reps = data["config"]["reps"]
    load = data["host"]["loadavg_start"][0]
    lines += [
        "",
        f"Median paired ratios with their 95% intervals over {reps} runs of each, alternating, one torch thread "
        f"({', '.join(f'{env}: {n}' for env, n in runs.items())} per run), on a {data['host']['cpus']}-core machine "
        f"whose load average was {load:.1f} at the start: other jobs shared it. The parameter difference is after the "
        "first run of each, same seed: float rounding, grown over the run's updates.",
    ]
    if rough:
        lines[-1] += (
            f" {' and '.join(rough)}: {reps} pairs of one rollout each on a shared machine, so its ratios are rough: "
            "they say that the option is several times faster there, not how many."
        )
    return "\n".join(lines)


#: The regions this module renders: ``render(page) -> markdown``
REGIONS: dict[str, Callable[[Path], str]] = {
    "speed": render_speed,
    "speed-ladder": render_speed_ladder,
    "speed-breakdown": render_speed_breakdown,
    "vec-env-speed": render_vec_env_speed,
    "sequence-batching": render_sequence_batching,
}
