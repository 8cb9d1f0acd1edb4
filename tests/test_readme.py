"""Every example of README.md (the front page) is run: its python blocks here, its commands against what they name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import (
    ROOT,
    check_commands_name_what_exists,
    check_relative_links,
    ci_steps,
    markdown_blocks,
    page_blocks,
    parse_commands,
    run_python_block,
    shell_commands_of,
)

README_PATH = ROOT / "README.md"
README = README_PATH.read_text(encoding="utf-8")
DOC_PAGES = sorted(path for path in (ROOT / "docs").rglob("*.md") if "_build" not in path.parts)
PYTHON_BLOCKS = markdown_blocks(README, "python")
# the front page stays a front page; the rest is in docs/
MAX_README_BYTES = 12_000


def shell_commands() -> list[str]:
    """
    :return: the commands of every documented bash block, README.md's then the docs pages' (tests/test_optuna_postgres.py
        runs the distributed-search ones, which live in docs/guide/rl_zoo.md)
    """
    blocks = markdown_blocks(README, "bash")
    for page in DOC_PAGES:
        blocks += page_blocks(page, "bash")
    return shell_commands_of(blocks)


def readme_commands() -> list[str]:
    """:return: the commands of README.md's bash blocks"""
    return shell_commands_of(markdown_blocks(README, "bash"))


def section(title: str) -> str:
    """:return: the text of README.md's ``## <title>`` section"""
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_readme_is_a_front_page() -> None:
    assert len(README.encode("utf-8")) < MAX_README_BYTES
    for title in ("Quickstart", "Documentation", "Examples", "Benchmarks", "Development"):
        assert re.search(rf"^## {re.escape(title)}$", README, re.MULTILINE), title
    # one example per capability, each a block of its own under its heading
    examples = section("Examples")
    capabilities = {
        "XPPO": "XPPO(",
        "MaskableXPPO and RecurrentXPPO": "MaskableXPPO(",
        "Multi-critic": "reward_groups=",
        "DAgger distillation": "DaggerCallback(",
        "rl-zoo3": "python -m sb3_xppo.train",
        "Functional API": "calc_gae(",
    }
    for title, used in capabilities.items():
        part = examples.split(f"\n### {title}\n", 1)[1].split("\n### ", 1)[0]
        assert used in part, title
    assert len(PYTHON_BLOCKS) >= 5
    # the guide pages are linked from the front page
    for page in ("install", "functional", "xppo", "contrib", "multi_critic", "dagger", "rl_zoo", "benchmarks"):
        assert f"(docs/guide/{page}.md" in README, page


def test_readme_links_resolve() -> None:
    assert check_relative_links(README_PATH) >= 10


@pytest.mark.parametrize("code", [code for _, code in PYTHON_BLOCKS], ids=[name for name, _ in PYTHON_BLOCKS])
def test_python_block_runs(code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    run_python_block(code, "<README.md>")


def test_quickstart_commands_are_what_ci_runs() -> None:
    quickstart = section("Quickstart")
    train, test = [code.strip() for _, code in markdown_blocks(quickstart, "bash")][:2]
    test_steps = [step.strip() for step in test.split("&&")]
    train_steps = [step.strip() for step in train.split("&&")]
    assert test_steps == ci_steps()
    # the train command sets up the same way, then trains
    assert train_steps == [*test_steps[:-1], "python -m sb3_xppo.train"]


def test_docs_build_commands_are_what_ci_runs() -> None:
    build = markdown_blocks(section("Documentation"), "bash")[0][1].splitlines()[0]
    assert [step.strip() for step in build.split("&&")] == ci_steps(docs=True)
    assert any(step.startswith("sphinx-build -W ") for step in ci_steps(docs=True))


def test_commands_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_commands(readme_commands(), monkeypatch) >= 4


def test_commands_name_modules_and_scripts_that_exist() -> None:
    assert check_commands_name_what_exists(readme_commands()) >= 4
