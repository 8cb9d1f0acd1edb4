"""
One number for one fact: every speed ratio the pages quote with its label (*median paired*, env-steps/s) is the same
wherever the same fact is quoted. A fact is an env (with ``xN`` for an env-only throughput) and a backend (``lean``,
``envpool``, ...; none when both algorithms step the same envs). Reads the pages as they are committed: nothing runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from helpers import FENCE_OPEN, ROOT

PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts)]
ENV = re.compile(r"(?P<env>(?:sb3_xppo/)?[A-Z][A-Za-z]+-v\d)(?P<n> x\d+)?")
RATIO = re.compile(r"(?<![\w.])(?P<ratio>\d+\.\d\d)x")
BACKEND = re.compile(r"\b(lean|envpool|subproc|ray|dummy)\b")
#: A clause about the whole training command (``python -m sb3_xppo.train`` against rl-zoo3's), the data-parallel learner
#: on ranks against one process, the main job's time to a solved task or the action recorders' cost quotes a fact of
#: its own
SCOPES = {
    "command": re.compile(r"\bwhole (training )?command\b"),
    "ranks": re.compile(r"\b(Data-parallel|\d+ ranks)\b"),
    "solve": re.compile(r"\bPPO's time over XPPO's\b"),
    "recorders": re.compile(r"\bThe recorders\b"),
}
#: A unit of text quotes a speed fact only under one of these labels
LABELS = ("median paired", "env-steps/s", "paired seeds")
#: A ratio right after one of these words is another figure of the same fact (the best run, CPU time), a target or a
#: bound (the floor of any vector env)
OTHER_FIGURES = re.compile(r"(best|CPU time|CPU|at least|at most|target|a floor of)[;:,]?\s*\(?$")
#: ``1.35x on CartPole-v1``, ``1.35x [1.30, 1.40] PPO's env-steps/s on CartPole-v1``: the env a ratio names right after
#: it (its interval, where it has one, skipped)
NAMED_AFTER = re.compile(r"\s+(?:\[[^\]]*\]\s+)?(?:\S+\s+){0,3}?(?:on|for)\s+$")


def key(env: re.Match[str], context: str, clause: str = "") -> tuple[str, str]:
    """The fact an env mention names: the env (``xN`` kept) and the backend its context names (or its scope)."""
    for scope, pattern in SCOPES.items():
        if pattern.search(clause):
            return env["env"] + (env["n"] or ""), scope
    backend = BACKEND.search(context)
    name = env["env"] + (env["n"] or "")
    # an env-only throughput (``xN``) is the lean env's by definition
    return name, "" if backend is None or (env["n"] and backend[1] == "lean") else backend[1]


def prose_facts(text: str, backend_context: str = "") -> list[tuple[tuple[str, str], str]]:
    """(fact, ratio) of each labelled ratio in a clause, paired with the env mentioned nearest before it (or after)."""
    found = []
    envs = list(ENV.finditer(text))
    for ratio in RATIO.finditer(text):
        if OTHER_FIGURES.search(text[max(0, ratio.start() - 16) : ratio.start()]):
            continue
        before = [env for env in envs if env.end() <= ratio.start()]
        after = [env for env in envs if env.start() >= ratio.end()]
        named = after and NAMED_AFTER.match(text[ratio.end() : after[0].start()])
        env = after[0] if named else before[-1] if before else after[0] if after else None
        if env is not None:
            found.append((key(env, backend_context or text[env.start() : env.end() + 24], text), ratio["ratio"]))
    return found


def page_lines(page: Path) -> list[str]:
    """The page's lines, those of code blocks blanked (so that line numbers stay the file's)."""
    lines, fence = [], None
    for line in page.read_text(encoding="utf-8").splitlines():
        opening = FENCE_OPEN.match(line)
        if fence is None and opening:
            fence = opening.group("fence")
            lines.append("")
        elif fence is not None:
            if re.match(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$", line):
                fence = None
            lines.append("")
        else:
            lines.append(line)
    return lines


def speed_facts(page: Path) -> list[tuple[tuple[str, str], str, str]]:
    """(fact, ratio, where) of every labelled speed ratio of a page, outside code blocks."""
    lines = page_lines(page)
    found: list[tuple[tuple[str, str], str, str]] = []
    header, paragraph, start = "", [], 0

    def flush() -> None:
        text = " ".join(paragraph)
        for clause in re.split(r";|(?<=[a-z)\]])\. ", text):
            if any(label in clause for label in LABELS):
                found.extend((fact, ratio, f"{page.relative_to(ROOT)}:{start}") for fact, ratio in prose_facts(clause))
        paragraph.clear()

    for number, line in enumerate(lines, 1):
        where = f"{page.relative_to(ROOT)}:{number}"
        if not line.startswith("|"):
            header = ""
            if line.strip():
                start = start if paragraph else number
                paragraph.append(line.strip())
            else:
                flush()
            continue
        flush()
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if number < len(lines) and lines[number].startswith("| ---"):
            header = line
            continue
        if line.startswith("| ---") or not any(label in header + line for label in LABELS):
            continue
        first = ENV.search(cells[0])
        if first is not None:  # a row about one env: its first ratio is the labelled one
            ratio = next((r for cell in cells[1:] for r in RATIO.finditer(cell)), None)
            if ratio is not None:
                found.append((key(first, cells[0]), ratio["ratio"], where))
        else:  # a row about one backend or one claim: each cell is prose
            for cell in cells[1:]:
                for clause in cell.split(";"):
                    found += [(fact, ratio, where) for fact, ratio in prose_facts(clause, cells[0])]
    flush()
    return found


def conflicts(
    pages: list[Path], facts: Callable[[Path], list[tuple[tuple[str, str], str, str]]] | None = None
) -> dict[tuple[str, str], dict[str, list[str]]]:
    """
    The facts quoted with more than one value, each value with where it is quoted.

    :param facts: what a page quotes, (fact, value, where) each: :func:`speed_facts` unless given
    """
    by_fact: dict[tuple[str, str], dict[str, list[str]]] = {}
    for page in pages:
        for fact, ratio, where in (facts or speed_facts)(page):
            by_fact.setdefault(fact, {}).setdefault(ratio, []).append(where)
    return {fact: values for fact, values in by_fact.items() if len(values) > 1}


def test_each_speed_fact_has_one_value_on_every_page() -> None:
    assert conflicts(PAGES) == {}


def test_the_pages_quote_the_speed_facts() -> None:
    """The scan sees the facts the issue found quoted three ways: CartPole-v1, on the same envs and on the lean env."""
    facts = {fact for page in PAGES for fact, _, _ in speed_facts(page)}
    assert {("CartPole-v1", ""), ("CartPole-v1", "lean"), ("LunarLander-v3", "envpool"), ("LunarLander-v3 x16", "")} <= facts


def test_two_values_for_one_fact_are_caught(tmp_path: Path) -> None:
    """Negative control: the issue's CartPole figures, 1.35x on one page and 1.23x on another, both 'median paired'."""
    one, other = tmp_path / "one.md", tmp_path / "other.md"
    one.write_text("`learn()` is 1.35x PPO's env-steps/s on CartPole-v1 (median paired).\n")
    other.write_text(
        "| env | XPPO / PPO: median paired (best) |\n| --- | --- |\n| CartPole-v1 | 1.23x (1.20x) |\n"
        "| CartPole-v1, lean | 1.24x (1.24x) |\n"
    )
    import test_one_number_per_fact as scan

    original = scan.ROOT
    scan.ROOT = tmp_path
    try:
        found = conflicts([one, other])
    finally:
        scan.ROOT = original
    assert found == {("CartPole-v1", ""): {"1.35": ["one.md:1"], "1.23": ["other.md:3"]}}


def test_the_whole_command_is_a_fact_of_its_own(tmp_path: Path) -> None:
    """``learn()``, the whole training command and the ranks on one env are three facts; two values for one clash."""
    learn, command, other = tmp_path / "learn.md", tmp_path / "command.md", tmp_path / "other.md"
    learn.write_text("`learn()` is 1.25x PPO's env-steps/s on LunarLander-v3 (median paired).\n")
    command.write_text("The whole command on LunarLander-v3: XPPO / PPO 1.16x median paired (best 1.16x).\n")
    other.write_text("The whole training command on LunarLander-v3 is 1.20x rl-zoo3's (median paired).\n")
    import test_one_number_per_fact as scan

    original = scan.ROOT
    scan.ROOT = tmp_path
    try:
        ranks = tmp_path / "ranks.md"
        ranks.write_text("- Data-parallel on LunarLander-v3: 2 ranks at 0.67x median paired.\n")
        assert conflicts([learn, command, ranks]) == {}
        found = conflicts([learn, command, other])
    finally:
        scan.ROOT = original
    assert found == {("LunarLander-v3", "command"): {"1.16": ["command.md:1"], "1.20": ["other.md:1"]}}


#: The headline's claim on the tuned entries: ``A / B: ... their runs spent 1.52x / 1.69x PPO's runs' `train()` seconds``
TRAIN_CLAIM = re.compile(
    r"(?P<envs>[A-Z][A-Za-z]+-v\d(?: / [A-Z][A-Za-z]+-v\d)*): [^|]*?their runs spent "
    r"(?P<ratios>\d+\.\d\dx(?: / \d+\.\d\dx)*) PPO's runs' `train\(\)` seconds"
)
#: The heading of a table column of ``train()`` seconds against PPO's
TRAIN_COLUMN = "`train()` seconds per run"


def train_time_facts(page: Path) -> list[tuple[tuple[str, str], str, str]]:
    """
    ((env, contender), ratio, where) of every ``train()``-seconds ratio of a page: the table column's (per env and
    contender; the tuned entry's contender called ``tuned``) and the headline claim's (the tuned entries').
    """
    found: list[tuple[tuple[str, str], str, str]] = []
    column = None
    for number, line in enumerate(page_lines(page), 1):
        where = f"{page.relative_to(ROOT)}:{number}"
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if not cells:
            column = None
        elif any(TRAIN_COLUMN in cell for cell in cells):
            column = next(i for i, cell in enumerate(cells) if TRAIN_COLUMN in cell)
        elif column is not None and not line.startswith("| ---") and len(cells) > column:
            ratio = RATIO.search(cells[column])
            if ratio is not None:
                contender = "tuned" if "tuned" in cells[1] else cells[1]
                found.append(((cells[0], contender), ratio["ratio"], where))
        for claim in TRAIN_CLAIM.finditer(line):
            envs, ratios = claim["envs"].split(" / "), claim["ratios"].split(" / ")
            assert len(envs) == len(ratios), f"{where}: {claim[0]}"
            found += [((env, "tuned"), ratio.removesuffix("x"), where) for env, ratio in zip(envs, ratios)]
    return found


def test_each_train_time_ratio_has_one_value_on_every_page() -> None:
    """The tuned entries' ``train()`` seconds against PPO's: the headline (README, benchmarks, xppo) and the table agree."""
    assert conflicts(PAGES, train_time_facts) == {}
    facts = {(fact, where.split(":")[0]) for page in PAGES for fact, _, where in train_time_facts(page)}
    assert {(("LunarLander-v3", "tuned"), "README.md"), (("LunarLander-v3", "tuned"), "docs/guide/benchmarks.md")} <= facts


def test_two_train_time_values_are_caught(tmp_path: Path) -> None:
    """Negative control: the claim says 1.50x where the table says 1.52x."""
    claim, table = tmp_path / "claim.md", tmp_path / "table.md"
    claim.write_text(
        "| claim | verdict |\n| --- | --- |\n| tuned | LunarLander-v3 / LunarLanderContinuous-v3: 200 after 100k; their runs "
        "spent 1.50x / 1.69x PPO's runs' `train()` seconds (means) |\n"
    )
    table.write_text(
        "| env | contender | `train()` seconds per run ÷ PPO's |\n| --- | --- | --- |\n"
        "| LunarLander-v3 | tuned entry (`xppo.yml`) | 1.52x |\n| LunarLander-v3 | PPO (zoo) | 1.00x |\n"
    )
    import test_one_number_per_fact as scan

    original = scan.ROOT
    scan.ROOT = tmp_path
    try:
        found = conflicts([claim, table], train_time_facts)
    finally:
        scan.ROOT = original
    assert found == {("LunarLander-v3", "tuned"): {"1.50": ["claim.md:3"], "1.52": ["table.md:3"]}}


def test_the_readme_speed_sentence_is_covered() -> None:
    """
    The README's first-screen speed sentence quotes the quickstart's path (env-steps/s on the lean env) and the main
    job's (its time to a solved LunarLander-v3): both are scanned.
    """
    readme = ROOT / "README.md"
    front = [(fact, where) for fact, _, where in speed_facts(readme) if int(where.split(":")[1]) < 20]
    assert {fact for fact, _ in front} >= {("CartPole-v1", "lean"), ("LunarLander-v3", "solve")}
