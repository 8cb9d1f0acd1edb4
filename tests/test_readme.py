"""Every example of README.md is run: its python blocks here, its commands against what they name."""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
HEADING = re.compile(r"^#+ (.+)$", re.MULTILINE)


def blocks(language: str) -> list[tuple[str, str]]:
    """:return: (id, code) of each fenced block of that language, the id from the heading above it"""
    found, count = [], {}
    for match in FENCE.finditer(README):
        if match.group(1) != language:
            continue
        headings = HEADING.findall(README[: match.start()])
        title = headings[-1] if headings else "top"
        count[title] = count.get(title, 0) + 1
        found.append((f"{title} #{count[title]}", match.group(2)))
    return found


def shell_commands() -> list[str]:
    """:return: the commands of the README's bash blocks, continuation lines joined, comments dropped"""
    commands = []
    for _, code in blocks("bash"):
        for line in code.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip()
            if line and not line.startswith("#"):
                commands.extend(part.strip() for part in line.split("&&"))
    return commands


def ci_commands() -> list[str]:
    """:return: the install and test commands of .ci/run (style checks, shell set-up and CI's own scripts left out)"""
    commands = []
    for line in (ROOT / ".ci" / "run").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith(("set ", "cd ", "ruff ", "bash .ci/")):
            commands.append(line)
    return commands


PYTHON_BLOCKS = blocks("python")


def test_readme_has_examples() -> None:
    assert len(PYTHON_BLOCKS) >= 8
    for section in ("Quickstart", "Functional API", "XPPO", "Multi-critic", "DAgger distillation", "Benchmarks"):
        assert re.search(rf"^## {re.escape(section)}$", README, re.MULTILINE), section


@pytest.mark.parametrize("code", [code for _, code in PYTHON_BLOCKS], ids=[name for name, _ in PYTHON_BLOCKS])
def test_python_block_runs(code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "<README.md>", "exec"), {"__name__": "__readme__"})


def test_quickstart_commands_are_what_ci_runs() -> None:
    quickstart = README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    train, test = [match.group(2).strip() for match in FENCE.finditer(quickstart)][:2]
    test_steps = [step.strip() for step in test.split("&&")]
    train_steps = [step.strip() for step in train.split("&&")]
    assert test_steps == ci_commands()
    # the train command sets up the same way, then trains
    assert train_steps == [*test_steps[:-1], "python -m sb3_xppo.train"]


class CommandParsed(Exception):
    """Raised where a command would start its work: its arguments were all accepted."""


def test_commands_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    import rl_zoo3.enjoy
    import rl_zoo3.train
    import rl_zoo3.utils

    from sb3_xppo.dagger_distill.__main__ import parse_args as distill_parse_args
    from sb3_xppo.enjoy import main as enjoy_main
    from sb3_xppo.train import main as train_main

    def stop(*args, **kwargs):
        raise CommandParsed

    # rl-zoo3 parses every flag, then builds its ExperimentManager (train) or looks for the model (enjoy, video)
    monkeypatch.setattr(rl_zoo3.train, "ExperimentManager", stop)
    monkeypatch.setattr(rl_zoo3.enjoy, "get_model_path", stop)
    monkeypatch.setattr(rl_zoo3.utils, "get_model_path", stop)
    parsed = 0
    for command in shell_commands():
        words = shlex.split(command)
        if words[:2] != ["python", "-m"] or not words[2].startswith("sb3_xppo"):
            continue
        if words[2] == "sb3_xppo.dagger_distill":
            distill_parse_args(words[3:])
        else:
            main = {"sb3_xppo.train": train_main, "sb3_xppo.enjoy": enjoy_main}[words[2]]
            with pytest.raises(CommandParsed):
                main(words[3:])
        parsed += 1
    assert parsed >= 10


def test_commands_name_modules_and_scripts_that_exist() -> None:
    setup = (ROOT / "setup.py").read_text()
    named = 0
    for command in shell_commands():
        words = shlex.split(command)
        if words[:2] == ["python", "-m"] and words[2].startswith("sb3_xppo"):
            assert importlib.util.find_spec(words[2]) is not None, command
            named += 1
        elif words[0].startswith("xppo-"):
            assert f'"{words[0]}=' in setup, command
            named += 1
    assert named >= 10
