"""
The regions of the vector-env page's single benchmarks: ``benchmarks/vec_env.py`` (env-only throughput),
``benchmarks/ray_vec_env.py`` (Ray) and ``benchmarks/train_cli.py`` (the whole training command); the backend matrix
and the speed targets (with ``benchmarks/speed.py``'s VecEnv rows).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.regions.figures import MEDIAN_PAIRED, ratio_with_spread
from harness.regions.results import single
from harness.regions.speed import quoted, speed_floor_lines, speed_results


def env_ratio(row: dict[str, Any], key: str = "ratio_paired_spread") -> str:
    """A vec_env.json row's paired ratio ``key`` with its interval (``figures.ratio_with_spread``)."""
    return ratio_with_spread(row.get(key), row.get("seconds_median", 0.0))


def render_vec_env_throughput(page: Path) -> str:
    """Env-only steps/s of the lean env against SB3's ``make_vec_env`` and the bare floor (``vec_env.json``)."""
    data = single("vec_env.json")
    if data is None:
        return "Pending: `python benchmarks/vec_env.py --profile`."
    lines = [
        "| env | env-steps/s, best: SB3's `make_vec_env` | DummyVecEnv, no render mode | lean | "
        f"lean / SB3: {MEDIAN_PAIRED}, 95% interval | floor / SB3 | bit for bit |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in data["rows"]:
        rate = row["best_steps_per_s"]
        lines.append(
            f"| {row['env']} x{row['n_envs']} | {rate['sb3']:,.0f} | {rate['dummy']:,.0f} | {rate['lean']:,.0f} | "
            f"{env_ratio(row)} | {env_ratio(row, 'floor_spread')} | "
            f"{'yes' if row['bit_exact'] else '**no**'} |"
        )
    lines += [
        "",
        f"{data['reps']} repetitions of {data['env_steps']:,} env-steps each: env-steps/s of the best, ratios the median "
        "of the repetitions' paired ratios with its 95% interval.",
    ]
    for row in data["rows"][:1]:
        lines[-1] += (
            f" On {row['env']} x{row['n_envs']} the lean env gives {env_ratio(row)} SB3's env-steps/s; the envs alone, "
            f"stepped in a bare loop, give {env_ratio(row, 'floor_spread')}, the most any vector env in one process "
            "could."
        )
    share = data.get("profile_env_share")
    if share is not None:
        env_id = data["rows"][0]["env"]
        lines[-1] += (
            f" In the profile of a lean run of {env_id}, {share:.0%} of the time is the env's own `step` and "
            f"`reset` with all they call; the lean env's loop, the Monitor's and TimeLimit's bookkeeping and the info "
            f"copies are the other {1 - share:.0%}."
        )
    return "\n".join(lines)


#: Ray's best run within this share of the lean env's best is too close to call
CLOSE = 0.1


def render_ray_vec_env(page: Path) -> str:
    """``learn()`` env-steps/s over the lean env, ``SubprocVecEnv`` and ``RayVecEnv``, from ray_vec_env.json."""
    results = single("ray_vec_env.json")
    if results is None:
        return "Pending: `python benchmarks/ray_vec_env.py`."
    machine, config = results["machine"], results["config"]
    loads = [machine["load_average_before"][0], machine["load_average_after"][0]]
    # a load of a core or more before the run is other jobs'; after it, it includes the run's own processes
    shared = "shared with other jobs " if loads[0] >= 1.0 else ""
    lines = [
        f"Env-steps/s of `learn()` ({config['timesteps']:,} env-steps, best of {config['reps']}; wall clock), measured on a "
        f"{machine['cpus']}-core machine {shared}(1-minute load average {loads[0]:.1f} before the run, {loads[1]:.1f} after "
        "it, its own processes included):",
        "",
        "| env | n_envs | lean | SubprocVecEnv | RayVecEnv |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    faster: dict[str, list[int]] = {}
    close: dict[str, list[int]] = {}
    for row in results["rows"]:
        rate = row["steps_per_s"]
        ratio = rate["ray"] / rate["lean"]
        lines.append(f"| {row['env']} | {row['n_envs']} | {rate['lean']:,.0f} | {rate['subproc']:,.0f} | {rate['ray']:,.0f} |")
        faster.setdefault(row["env"], [])
        close.setdefault(row["env"], [])
        if abs(ratio - 1.0) < CLOSE:
            close[row["env"]].append(row["n_envs"])
        elif ratio > 1.0:
            faster[row["env"]].append(row["n_envs"])
    lines += [
        "",
        f"Best of {config['reps']} runs each, too few for an interval: they say which was faster in these runs, not by "
        f"how much it would be on another day, so no ratio is quoted. Within {CLOSE:.0%} of the lean env is too close to "
        "call from them.",
        "",
    ]
    for env in faster:
        said = (
            f"RayVecEnv's best run was faster than the lean env's at n_envs {faster[env]}"
            if faster[env]
            else "RayVecEnv's best run was slower than the lean env's at every n_envs measured"
        )
        if close[env]:
            said += f", too close to call at n_envs {close[env]}"
        lines.append(f"- {env}: {said}.")
    return "\n".join(lines)


def render_train_cli(page: Path) -> str:
    """The whole training command against rl-zoo3's PPO (``train_cli.json``)."""
    data = single("train_cli.json")
    if data is None:
        return "Pending: `python benchmarks/train_cli.py`."
    by = {name: [run for run in data["runs"] if run["name"] == name] for name in ("PPO", "XPPO")}
    lines = [
        "| command | seconds, best (CPU) |",
        "| --- | ---: |",
        *(
            f"| `{shown_command(runs[0]['command'])}` | {min(r['seconds'] for r in runs):.1f} "
            f"({min(r['cpu_seconds'] for r in runs):.1f}) |"
            for runs in by.values()
        ),
        "",
        f"The whole command on {data['env']}, {data['steps']:,} steps, {data['reps']} repetitions: XPPO's speed over "
        f"PPO's {quoted(data)} ({MEDIAN_PAIRED} with its 95% interval; every pair in `train_cli.json`); "
        f"the final parameters {'are' if data['bit_exact'] else '**are not**'} PPO's bit for bit.",
    ]
    return "\n".join(lines)


def shown_command(command: str) -> str:
    """A recorded command as a reader would type it: rl-zoo3's installed folder written ``<rl_zoo3>``."""
    return re.sub(r"\S*/rl_zoo3/", "<rl_zoo3>/", command)


def train_cli_target_lines() -> list[str]:
    """The whole-command target of ``train_cli.json``, met or missed, and what it is measured against."""
    data = single("train_cli.json")
    if data is None or data.get("target") is None:
        return []
    verdict = "met" if data["target_met"] else "missed"
    return [
        "- The whole training command, `python -m sb3_xppo.train` against rl-zoo3's: the target, "
        f"{data['target']:g}x rl-zoo3's PPO on {data['env']} "
        f"(`benchmarks/train_cli.py`), is {verdict}: {quoted(data)} ({MEDIAN_PAIRED} with its 95% interval). rl-zoo3 "
        "makes its envs "
        "from a function (`create_envs`), which SB3 calls without a render mode, so rl-zoo3's PPO never paid for "
        "LunarLander's particles: the gain there is the algorithm's alone (the `LunarLander-v3` row of `speed.json`, "
        "both on rl-zoo3's envs), spread over the fixed costs both commands pay (imports, setup, evaluations, saving)."
    ]


def vec_env_target_lines() -> list[str]:
    """The env-only throughput targets of ``vec_env.json``: each met or missed, against the floor of any vector env."""
    data = single("vec_env.json")
    lines = []
    for row in [] if data is None else (row for row in data["rows"] if row.get("target") is not None):
        verdict = "met" if row["target_met"] else "missed"
        lines.append(
            f"- Env-only, the lean env against SB3's `make_vec_env`: the target, {row['target']:g}x on {row['env']} "
            f"x{row['n_envs']}, is {verdict}: {env_ratio(row)} ({MEDIAN_PAIRED} with its 95% interval), "
            f"against a floor of {env_ratio(row, 'floor_spread')}."
        )
    return lines


def render_speed_targets(page: Path) -> str:
    """The development page's view of the speed rows: each target, met or missed, and what bounds it."""
    text = "\n".join([*vec_env_target_lines(), *train_cli_target_lines()])
    data = speed_results(vec_env=True)
    if data is None or not data["results"]:
        return text or "Pending: `python benchmarks/speed.py --contrib`."
    lines = [
        f"| env, XPPO's VecEnv | target (met or missed by the {MEDIAN_PAIRED} ratio) | {MEDIAN_PAIRED}, 95% interval |",
        "| --- | --- | --- |",
    ]
    for r in data["results"]:
        if r["target"] is not None:
            met = "met" if r["ratio_paired"] >= r["target"] else "missed"
            lines.append(f"| {r['env'].replace('@', ', ')} | {r['target']}x ({met}) | {quoted(r)} |")
    return "\n".join([*([text, ""] if text else []), *lines, "", *speed_floor_lines(data["results"])])


def render_vec_env_backends(page: Path) -> str:
    """The backend matrix that opens the vector-env page: what each backend keeps and gives up, and its measured speed."""
    throughput, speed, ray = single("vec_env.json"), speed_results(vec_env=True), single("ray_vec_env.json")
    lean = dummy = envpool = subproc = ray_cell = "pending"
    if throughput is not None:
        cells = [f"{r['env']} x{r['n_envs']} {env_ratio(r)}" for r in throughput["rows"]]
        lean = "env-steps/s against `make_vec_env`'s: " + ", ".join(cells)
        dummy = "1x (SB3's own)"
    if speed is not None:
        rows = [r for r in speed["results"] if r["env"].endswith("@envpool")]
        envpool = "`learn()`, env-steps/s against SB3 PPO's: " + ", ".join(
            f"{r['env'].split('@')[0]} {quoted(r)}" for r in rows
        )
    if ray is not None:
        by_env: dict[str, list[dict[str, Any]]] = {}
        for r in ray["rows"]:
            by_env.setdefault(r["env"].replace("sleep2ms", "a 2 ms step"), []).append(r)
        largest = {env: max(rows, key=lambda r: r["n_envs"]) for env, rows in by_env.items()}

        def against_lean(who: str) -> str:
            cells = [
                f"{env} x{r['n_envs']} {r['steps_per_s'][who]:,.0f} (lean {r['steps_per_s']['lean']:,.0f})"
                for env, r in largest.items()
            ]
            return "`learn()` env-steps/s, best run: " + ", ".join(cells)

        subproc, ray_cell = against_lean("subproc"), against_lean("ray")
    return "\n".join(
        [
            "| backend | PPO's numbers, bit for bit | runs in | wrappers, `render()` | env ids | measured speed |",
            "| --- | --- | --- | --- | --- | --- |",
            f'| `"lean"` (default) | yes | one process | yes | any | {lean} |',
            f'| `"dummy"` | yes | one process | yes | any | {dummy} |',
            f'| `"subproc"` | yes | a process per env | yes | any | {subproc} |',
            f'| `"envpool"` | no: C++ envs | one process, C++ threads | no | `ENVPOOL_ENV_IDS` | {envpool} |',
            f'| `"ray"` | yes | Ray actors, any node | yes | any | {ray_cell} |',
            "",
            f"Speeds: {MEDIAN_PAIRED} ratios with their 95% intervals; Ray and `SubprocVecEnv` env-steps/s of the best "
            "run on a 2-core machine. How each "
            "was measured is in the sections below.",
        ]
    )


#: The regions this module renders: ``render(page) -> markdown``
REGIONS: dict[str, Callable[[Path], str]] = {
    "vec-env-throughput": render_vec_env_throughput,
    "ray-vec-env": render_ray_vec_env,
    "train-cli": render_train_cli,
    "vec-env-backends": render_vec_env_backends,
    "speed-targets": render_speed_targets,
}
