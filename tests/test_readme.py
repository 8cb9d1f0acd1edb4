"""Every example of README.md (the front page) is run: its python blocks here, its commands against what they name."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

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
# the front page stays a front page (an install that says what torch build it takes, the main job's clone and time
# included, and every speed ratio with its interval); the rest is in docs/
MAX_README_BYTES = 14_500


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
    small, main = [code.strip() for _, code in markdown_blocks(quickstart, "bash")][:2]
    ci = ci_steps()
    # the smallest install: CI's torch, then the package without extras
    torch = next(step for step in ci if step.startswith("pip install torch"))
    assert [step.strip() for step in small.split("&&")] == [torch, "pip install -e . --config-settings editable_mode=compat"]
    # the main job and the tests: a clone, CI's set-up, the training command, then CI's test command
    clone = ['git clone "$REPO_URL" sb3-xppo', "cd sb3-xppo"]
    test = next(index for index, step in enumerate(ci) if step.startswith("pytest"))
    assert shell_commands_of([("main", main)]) == [*clone, *ci[:test], "python -m sb3_xppo.train", ci[test]]
    assert ci[test + 1 :] == ["python tests/upstream/run.py"]  # (CI's own step after the README's: the upstream suites)


def load_walk() -> Any:
    """``.ci/readme_walk.py``, a script outside the package, as a module."""
    spec = importlib.util.spec_from_file_location("readme_walk", ROOT / ".ci" / "readme_walk.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_the_readme_walk_runs_the_main_job_as_written() -> None:
    """CI's fresh-machine walk runs the README's main-job block line for line, but the two changes it documents."""
    walk = load_walk()
    main = next(code for _, code in markdown_blocks(section("Quickstart"), "bash") if "git clone" in code)
    written = [line.split(" #")[0].strip() for line in main.splitlines() if line.strip()]
    expected = [line + " -n 50000" if line == "python -m sb3_xppo.train" else line for line in written]
    assert walk.walk_commands(README) == [line for line in expected if not line.startswith("pytest")]
    assert "python .ci/readme_walk.py" in (ROOT / ".ci" / "run").read_text()
    # negative controls: a README whose main job lost its clone, or its training, is refused
    with pytest.raises(ValueError, match="git clone"):
        walk.walk_commands(README.replace('git clone "$REPO_URL"', "echo"))
    with pytest.raises(ValueError, match=r"sb3_xppo\.train"):
        walk.walk_commands(README.replace("python -m sb3_xppo.train\n", "python -m sb3_xppo.enjoy\n"))


def test_the_first_screen_answers() -> None:
    """What it is, what a user gets (each with a number and its evidence), the smallest install and a short example."""
    first_screen = README.split("\n## Quickstart\n", 1)[0]
    sentence = first_screen.split("\n\n")[1]
    assert sentence.count(". ") == 0 and sentence.endswith("."), "one sentence on what it is"
    front = [line for line in first_screen.splitlines() if line.startswith("- **")]
    assert 3 <= len(front) <= 4
    for line in front:
        assert re.search(r"\d", line) and "[evidence](docs/guide/benchmarks.md#" in line, line
    quickstart = section("Quickstart")
    example = markdown_blocks(quickstart, "python")[0][1]
    assert 'XPPO("MlpPolicy", "CartPole-v1"' in example and "total_timesteps=25_000" in example
    # the install and the example come before the first 60 lines are over
    lines = README.splitlines()
    assert lines.index("pip install torch==2.13.0 && pip install -e . --config-settings editable_mode=compat") < 60
    # no command runs off a page's code box (about 90 characters on the site and on GitHub)
    for _, code in markdown_blocks(quickstart, "bash"):
        assert max(len(line) for line in code.splitlines()) <= 90, code


def test_docs_build_commands_are_what_ci_runs() -> None:
    build = markdown_blocks(section("Documentation"), "bash")[0][1].splitlines()[0]
    assert [step.strip() for step in build.split("&&")] == ci_steps(docs=True)
    assert any(step.startswith("sphinx-build -W ") for step in ci_steps(docs=True))


def test_commands_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_commands(readme_commands(), monkeypatch) >= 4


def test_commands_name_modules_and_scripts_that_exist() -> None:
    assert check_commands_name_what_exists(readme_commands()) >= 4
