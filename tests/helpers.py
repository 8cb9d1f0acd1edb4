"""Helpers the test modules share (one copy each)."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import re
import shlex
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnv


def params_equal(a: th.nn.Module, b: th.nn.Module) -> bool:
    """Whether two modules' parameters and buffers are equal bit for bit."""
    return all(th.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))


def assert_same_value(a: Any, b: Any, where: str) -> None:
    """Equal, of the same type (and dtype), recursively; the Monitor's wall-clock ``t`` is not compared."""
    assert type(a) is type(b), (where, type(a), type(b))
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), where
    elif isinstance(a, dict):
        assert list(a) == list(b), (where, list(a), list(b))
        for key in a:
            if not (key == "t" and where.endswith("episode")):
                assert_same_value(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same_value(x, y, f"{where}[{i}]")
    else:
        assert a == b, (where, a, b)


def random_actions(env: VecEnv, steps: int, seed: int = 1) -> list[np.ndarray]:
    env.action_space.seed(seed)
    return [np.array([env.action_space.sample() for _ in range(env.num_envs)]) for _ in range(steps)]


class ToDict(gym.Wrapper):
    """The observation as ``{"obs": obs}`` (a Dict space); the env's own methods (``action_masks()``) still reach it
    through ``get_wrapper_attr``."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.observation_space = spaces.Dict({"obs": env.observation_space})

    def reset(self, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return {"obs": obs}, info

    def step(self, action: Any) -> tuple[dict[str, Any], Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return {"obs": obs}, reward, terminated, truncated, info


# --- Documented code (README.md and docs/): its blocks run, its commands parse ---

ROOT = Path(__file__).resolve().parent.parent
# a fence opens a block: ``` or ~~~ (three or more), then the info string, whose first word is the language
FENCE_OPEN = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
HEADING = re.compile(r"^(#{1,6}) (.+)$")
# reST: ".. code-block:: python" (or ".. code::"), options, a blank line, then the indented block
RST_CODE = re.compile(r"^(?P<indent> *)\.\. (?:code-block|code|sourcecode):: *(?P<language>\S*) *$")
RST_HEADING_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+]){3,}$")


def _language(info: str) -> str:
    """The language of a fence's info string: ``python``, or a MyST directive's argument (``{code-block} python``)."""
    words = info.split()
    if not words:
        return ""
    if words[0] in ("{code-block}", "{code}", "{code-cell}", "{sourcecode}"):
        return words[1] if len(words) > 1 else ""
    return words[0]


def markdown_blocks(text: str, language: str) -> list[tuple[str, str]]:
    """
    :param text: a markdown (MyST) page
    :param language: ``"python"``, ``"bash"``, ...
    :return: (id, code) of each fenced block of that language, in order, the id from the heading above it (headings
        inside blocks, such as comments, do not count)
    """
    found: list[tuple[str, str]] = []
    count: dict[str, int] = {}
    title = "top"
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE_OPEN.match(lines[i])
        if opening is None:
            heading = HEADING.match(lines[i])
            if heading:
                title = heading.group(2).strip()
            i += 1
            continue
        fence, indent = opening.group("fence"), len(opening.group("indent"))
        closing = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        body, i = [], i + 1
        while i < len(lines) and not closing.match(lines[i]):
            # content lines lose up to the opening fence's indentation (CommonMark)
            line = lines[i]
            body.append(line[min(indent, len(line) - len(line.lstrip(" "))) :])
            i += 1
        i += 1  # past the closing fence (or the end of the page: an unclosed block runs to it)
        if _language(opening.group("info")) == language:
            count[title] = count.get(title, 0) + 1
            found.append((f"{title} #{count[title]}", "\n".join(body) + "\n"))
    return found


def rst_blocks(text: str, language: str) -> list[tuple[str, str]]:
    """
    :param text: a reST page
    :param language: ``"python"``, ``"bash"``, ...
    :return: (id, code) of each ``.. code-block:: <language>`` of the page, the id from the title above it
    """
    found: list[tuple[str, str]] = []
    count: dict[str, int] = {}
    title = "top"
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if i + 1 < len(lines) and lines[i].strip() and RST_HEADING_UNDERLINE.match(lines[i + 1]):
            title = lines[i].strip()
        directive = RST_CODE.match(lines[i])
        i += 1
        if directive is None:
            continue
        indent = len(directive.group("indent"))
        body: list[str] = []
        while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
            body.append(lines[i])
            i += 1
        # the directive's options (":caption: ...") come first, then a blank line, then the code
        while body and body[0].strip().startswith(":"):
            body.pop(0)
        code_lines = body
        while code_lines and not code_lines[0].strip():
            code_lines.pop(0)
        while code_lines and not code_lines[-1].strip():
            code_lines.pop()
        if directive.group("language") == language and code_lines:
            margin = min(len(line) - len(line.lstrip()) for line in code_lines if line.strip())
            count[title] = count.get(title, 0) + 1
            found.append((f"{title} #{count[title]}", "\n".join(line[margin:] for line in code_lines) + "\n"))
    return found


def page_blocks(path: Path, language: str) -> list[tuple[str, str]]:
    """:return: (id, code) of each block of that language of a ``.md`` or ``.rst`` page"""
    text = path.read_text(encoding="utf-8")
    return rst_blocks(text, language) if path.suffix == ".rst" else markdown_blocks(text, language)


def shell_commands_of(blocks: list[tuple[str, str]]) -> list[str]:
    """
    :return: the commands of bash blocks, continuation lines joined, comments dropped, ``&&`` chains split; a script
        (a block that starts with ``#!``) is run by its own test, not parsed as commands
    """
    commands = []
    for _, code in blocks:
        if code.lstrip().startswith("#!"):
            continue
        for line in code.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip()
            if line and not line.startswith("#"):
                commands.extend(part.strip() for part in line.split("&&"))
    return commands


def ci_steps(docs: bool = False) -> list[str]:
    """
    :param docs: the steps of .ci/run's documentation section (``# --- docs ...``) instead of all the others
    :return: the commands of .ci/run (style and type checks, shell set-up, the machine's packages and CI's own scripts
        left out)
    """
    commands, in_docs = [], False
    for raw in (ROOT / ".ci" / "run").read_text().splitlines():
        if raw.startswith("# ---"):
            in_docs = raw.startswith("# --- docs")
        line = raw.split("#")[0].strip()
        skipped = ("set ", "cd ", "ruff ", "mypy ", "bash .ci/", "python .ci/", "apt-get ")
        if line and not line.startswith(skipped) and in_docs == docs:
            commands.append(line)
    return commands


def run_python_block(code: str, where: str) -> None:
    """Run a documented python block as a script of its own (the caller chdirs into a temporary folder)."""
    exec(compile(code, where, "exec"), {"__name__": "__documented__"})


class CommandParsed(Exception):
    """Raised where a command would start its work: its arguments were all accepted."""


#: PyTorch's launcher, whose command ends with the program each rank runs
LAUNCHER = ["python", "-m", "torch.distributed.run"]


def launched(words: list[str]) -> list[str]:
    """
    :param words: a command's words
    :return: the command each rank runs where PyTorch's launcher starts it (``python -m torch.distributed.run
        [launcher flags] -m sb3_xppo.train ...`` -> ``python -m sb3_xppo.train ...``; a script ``x.py ...`` ->
        ``python x.py ...``), else the words as they are
    """
    if words[:3] != LAUNCHER:
        return words
    rest = words[3:]
    for i, word in enumerate(rest):
        if word == "-m":
            return ["python", *rest[i:]]
        if word.endswith(".py"):
            return ["python", *rest[i:]]
    raise AssertionError(f"a launcher command without a program: {' '.join(words)}")


def parse_commands(commands: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    """
    Parse each ``python -m sb3_xppo...`` command with the command's own parser, stopping each where it would start
    its work; a rejected argument fails the test (argparse exits).

    :return: how many commands were parsed
    """
    import rl_zoo3.enjoy
    import rl_zoo3.train
    import rl_zoo3.utils

    from sb3_xppo.distill import parse_args as distill_parse_args
    from sb3_xppo.enjoy import main as enjoy_main
    from sb3_xppo.train import main as train_main

    def stop(*args: Any, **kwargs: Any) -> None:
        raise CommandParsed

    # rl-zoo3 parses every flag, then builds its ExperimentManager (train) or looks for the model (enjoy, video)
    monkeypatch.setattr(rl_zoo3.train, "ExperimentManager", stop)
    monkeypatch.setattr(rl_zoo3.enjoy, "get_model_path", stop)
    monkeypatch.setattr(rl_zoo3.utils, "get_model_path", stop)
    parsed = 0
    for command in commands:
        words = launched(shlex.split(command))
        if words[:2] != ["python", "-m"] or not words[2].startswith("sb3_xppo"):
            continue
        if "--distributed" in words:  # as the launcher starts rank 0
            for name, value in (("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29500")):
                monkeypatch.setenv(name, value)
        if words[2] in ("sb3_xppo.distill", "sb3_xppo.dagger_distill"):
            distill_parse_args(words[3:])
        else:
            main = {"sb3_xppo.train": train_main, "sb3_xppo.enjoy": enjoy_main}[words[2]]
            with pytest.raises(CommandParsed):
                main(words[3:])
        parsed += 1
    return parsed


def check_commands_name_what_exists(commands: list[str]) -> int:
    """
    Each ``python -m sb3_xppo...`` command names a module that exists, each ``xppo-...`` one an installed script,
    each ``python <script>.py`` one a file of the repository.

    :return: how many commands were checked
    """
    setup = (ROOT / "setup.py").read_text()
    named = 0
    for command in commands:
        words = launched(shlex.split(command))
        if words[:2] == ["python", "-m"] and words[2].startswith("sb3_xppo"):
            assert importlib.util.find_spec(words[2]) is not None, command
            named += 1
        elif words[0].startswith("xppo-"):
            assert f'"{words[0]}=' in setup, command
            named += 1
        elif words[0] == "python" and len(words) > 1 and words[1].endswith(".py"):
            assert (ROOT / words[1]).is_file(), command
            named += 1
    return named


def github_slug(heading: str) -> str:
    """The anchor GitHub (and MyST, ``myst_heading_anchors``) gives a markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


MARKDOWN_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def check_relative_links(path: Path) -> int:
    """
    Every relative link and image of a markdown page names a file of the repository, and an anchor into a
    markdown page names one of its headings (outside code blocks).

    :return: how many links were checked
    """
    text = path.read_text(encoding="utf-8")
    prose = "\n".join(line for line in _outside_fences(text))
    checked = 0
    for target in MARKDOWN_LINK.findall(re.sub(r"`[^`]*`", "", prose)):
        if re.match(r"^[a-z]+:", target):
            continue  # http(s), mailto: not checked here (no network)
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        assert linked.exists(), f"{path.relative_to(ROOT)}: {target} does not exist"
        if anchor and linked.suffix == ".md":
            slugs = {github_slug(h) for h in _headings(linked.read_text(encoding="utf-8"))}
            assert anchor in slugs, f"{path.relative_to(ROOT)}: no heading of {linked.name} has the anchor #{anchor}"
        checked += 1
    return checked


def _outside_fences(text: str) -> list[str]:
    lines, fence = [], None
    for line in text.splitlines():
        opening = FENCE_OPEN.match(line)
        if fence is None and opening:
            fence = opening.group("fence")
        elif fence is not None and re.match(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$", line):
            fence = None
        elif fence is None:
            lines.append(line)
    return lines


def _headings(text: str) -> list[str]:
    return [m.group(2) for m in map(HEADING.match, _outside_fences(text)) if m]


def zoo_model(algo: str, env_id: str, folder: Path, config: str | Path, **kwargs: Any) -> tuple[Any, Any]:
    """
    The model rl-zoo3's ``ExperimentManager`` builds for ``env_id`` from ``config`` (no evaluation, seed 0, CPU), as
    ``python -m sb3_xppo.train`` would.

    :return: ``(model, manager)``
    """

    from rl_zoo3.exp_manager import ExperimentManager

    options = dict(eval_freq=-1, seed=0, device="cpu", verbose=0, **kwargs)
    manager = ExperimentManager(argparse.Namespace(), algo, env_id, str(folder / "logs"), config=str(config), **options)
    model, _ = manager.setup_experiment()
    return model, manager


@contextlib.contextmanager
def masked_evaluation() -> Iterator[None]:
    """
    While the block runs, a maskable model acts on its env's action masks wherever rl-zoo3 evaluates or watches it
    (the part of every zoo session that :func:`sb3_xppo.zoo.session.install_masked_evaluation` makes); everything is
    put back when it ends.
    """
    from sb3_xppo.zoo.session import applied, install_masked_evaluation

    with applied(install_masked_evaluation):
        yield


def run_with_argv(command: Callable[[], None], args: Sequence[str]) -> None:
    """Run one of rl-zoo3's command functions (they parse ``sys.argv``) on the given arguments."""
    from sb3_xppo.zoo.session import applied, install_argv

    with applied(lambda patches: install_argv(patches, args)):
        command()
