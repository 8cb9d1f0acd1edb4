"""
The documentation (docs/): every python block of its pages runs, every command parses, every link resolves, and
every public name has an entry in the API reference. The Sphinx build itself (warnings as errors) is .ci/run's.
"""

from __future__ import annotations

import importlib
import itertools
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from helpers import (
    ROOT,
    check_commands_name_what_exists,
    check_relative_links,
    markdown_blocks,
    page_blocks,
    parse_commands,
    run_python_block,
    shell_commands_of,
)

DOCS = ROOT / "docs"
PAGES = sorted(path for path in DOCS.rglob("*") if path.suffix in (".md", ".rst") and "_build" not in path.parts)
MARKDOWN_PAGES = [path for path in PAGES if path.suffix == ".md"]
PYTHON_BLOCKS = [(f"{page.relative_to(DOCS)}:{name}", code) for page in PAGES for name, code in page_blocks(page, "python")]
COMMANDS = shell_commands_of([block for page in PAGES for block in page_blocks(page, "bash")])
#: The blocks that run here: a block the README holds word for word (the quickstart on index.md) runs in
#: tests/test_readme.py, once
README_BLOCKS = {code for _, code in markdown_blocks((ROOT / "README.md").read_text(encoding="utf-8"), "python")}
RUN_HERE = [(name, code) for name, code in PYTHON_BLOCKS if code not in README_BLOCKS]

# the modules whose public names (``__all__``) the API reference covers, and the other names users meet
PUBLIC_MODULES = (
    "sb3_xppo",
    "sb3_xppo.functional",
    "sb3_xppo.multi_critic",
    "sb3_xppo.dagger_distill",
    "sb3_xppo.envs",
    "sb3_xppo.xppo",
    "sb3_xppo.ppo_mask",
    "sb3_xppo.ppo_recurrent",
    "sb3_xppo.ppo_mask_recurrent",
    "sb3_xppo.core",
    "sb3_xppo.common",
    "sb3_xppo.loading",
    "sb3_xppo.vec_env",
)
OTHER_PUBLIC_NAMES = (
    "sb3_xppo.common.buffers.XPPOMaskableRolloutBuffer",
    "sb3_xppo.common.buffers.XPPORecurrentRolloutBuffer",
    "sb3_xppo.common.value_norm.ValueNormalizer",
    "sb3_xppo.multi_critic.buffers.GROUP_SCALE_FLOOR",
    "sb3_xppo.zoo.register",
    "sb3_xppo.zoo.linear_reward",
    "sb3_xppo.train.main",
    "sb3_xppo.enjoy.main",
    "sb3_xppo.distill.main",
    "sb3_xppo.trust.main",
)
AUTODOC = re.compile(r"^\.\. (auto\w+):: *(\S+)", re.MULTILINE)


def test_docs_have_examples() -> None:
    # every block of the README before it became a front page moved here: 17 python blocks, more than 10 commands
    assert len(PYTHON_BLOCKS) >= 17
    assert len(COMMANDS) >= 25
    # the quickstart is the README's, and runs there
    assert 0 < len(PYTHON_BLOCKS) - len(RUN_HERE) < 3 and len(RUN_HERE) >= 17


@pytest.mark.parametrize("code", [code for _, code in RUN_HERE], ids=[name for name, _ in RUN_HERE])
def test_python_block_runs(code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    run_python_block(code, "<docs>")


def test_commands_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_commands(COMMANDS, monkeypatch) >= 15


def test_commands_name_modules_and_scripts_that_exist() -> None:
    assert check_commands_name_what_exists(COMMANDS) >= 25


@pytest.mark.parametrize("page", MARKDOWN_PAGES, ids=[str(page.relative_to(DOCS)) for page in MARKDOWN_PAGES])
def test_links_resolve(page: Path) -> None:
    check_relative_links(page)


def test_every_page_is_in_the_table_of_contents() -> None:
    index = (DOCS / "index.md").read_text()
    toctrees = re.findall(r"```\{toctree\}\n(.*?)```", index, re.DOTALL)
    listed = {line.strip() for tree in toctrees for line in tree.splitlines() if line.strip() and not line.startswith(":")}
    for page in PAGES:
        if page.name != "index.md":
            assert page.relative_to(DOCS).with_suffix("").as_posix() in listed, page


def test_the_user_guide_holds_no_project_bookkeeping() -> None:
    """Campaign histories, targets and issue numbers live on the development pages, outside the User Guide."""
    index = (DOCS / "index.md").read_text()
    guide = re.search(r"```\{toctree\}\n[^`]*:caption: User Guide\n(.*?)```", index, re.DOTALL)[1].split()
    assert "guide/campaigns" not in guide and "guide/development" not in guide
    pages = [(name, (DOCS / f"{name}.md").read_text()) for name in guide] + [("README", (ROOT / "README.md").read_text())]
    for name, text in pages:
        prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
        for word in BOOKKEEPING:
            assert not re.search(word, prose, re.IGNORECASE), (name, word, re.search(word, prose, re.IGNORECASE))


#: The project's own tracking words, which a reader of the User Guide cannot know: issue numbers, targets met or
#: missed, the campaigns' working names and the project's history
BOOKKEEPING = (
    r"\bissue \d+",
    r"\btargets?\b.{0,40}\b(met|missed)\b",
    r"\d+(\.\d+)?x (met|missed)\b",
    r"\bthe target is \d",
    r"\bmust (win|match)\b",
    r"`session1`",
    r"\bimprovements research\b",
    r"\bits own campaign\b",
)


def test_the_bookkeeping_words_are_found() -> None:
    """Negative control: each tracking word the issue found on the user pages is caught."""
    found = [
        "The must win campaign",
        "the first screen, `session1`, used 5",
        "1.06x with normalize_values (the target is 1.15x)",
        "3x met, 2x met",
        "the options the improvements research settled on",
        "BipedalWalker-v3 is its own campaign",
    ]
    for text in found:
        assert any(re.search(word, text, re.IGNORECASE) for word in BOOKKEEPING), text


def documented_objects() -> list[tuple[str, Any]]:
    """:return: (dotted name, object) of each ``.. auto<what>::`` entry of the API reference"""
    entries = []
    for page in sorted((DOCS / "modules").glob("*.rst")):
        module: ModuleType | None = None
        for directive, name in AUTODOC.findall(page.read_text()):
            if directive == "automodule":
                module = importlib.import_module(name)
                continue
            entries.append((name, resolve(name, module)))
    return entries


def resolve(name: str, module: ModuleType | None) -> Any:
    """:return: the object a directive names, absolutely or relative to the current ``automodule``"""
    if module is not None and "." not in name:
        return getattr(module, name)
    module_name, _, attribute = name.rpartition(".")
    return getattr(importlib.import_module(module_name), attribute)


def public_names() -> list[tuple[str, Any]]:
    """:return: (dotted name, object) of every public name"""
    names = []
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        names += [(f"{module_name}.{name}", getattr(module, name)) for name in module.__all__]
    for dotted in OTHER_PUBLIC_NAMES:
        module_name, _, attribute = dotted.rpartition(".")
        names.append((dotted, getattr(importlib.import_module(module_name), attribute)))
    return names


def test_every_public_name_has_a_reference_entry() -> None:
    entries = documented_objects()
    missing = []
    for dotted, obj in public_names():
        short = dotted.rpartition(".")[2]
        # a class or function is documented wherever its entry stands; a constant under its own name
        if not any(documented is obj and (callable(obj) or name.rpartition(".")[2] == short) for name, documented in entries):
            missing.append(dotted)
    assert not missing, f"no API reference entry (docs/modules/*.rst) for {missing}"


def test_entries_are_documented_once() -> None:
    names = [name for name, _ in documented_objects()]
    assert len(names) == len(set(names))


def test_ci_means_continuous_integration() -> None:
    """A confidence interval is a "95% interval" on every page: "CI" is continuous integration (``.ci/run``) only."""
    interval_words = re.compile(r"95% CI|\bCIs\b|\bCI of\b|\bCI\]|\bCI (?:overlap|apart)")
    for page in [ROOT / "README.md", *MARKDOWN_PAGES]:
        found = interval_words.search(page.read_text(encoding="utf-8"))
        assert found is None, f"{page.name}: {found and found[0]!r}"


#: The algorithm pages of the API reference, which follow SB3's own order of sections
ALGORITHM_PAGES = ("xppo", "ppo_mask", "ppo_recurrent", "ppo_mask_recurrent")
SB3_ORDER = ("Notes", "Can I use?", "Example", "Results", "Parameters")
#: Marks that need an emoji font (the check and cross marks and their variation selector)
EMOJI = re.compile("[\u2705\u2714\u2716\u274c\u274e\ufe0f\U0001f300-\U0001faff]")


def section_titles(text: str) -> list[str]:
    """The reST section titles of a page underlined with ``-`` (its sections below the page title)."""
    lines = text.splitlines()
    return [title for title, line in itertools.pairwise(lines) if title.strip() and re.fullmatch(r"-{3,}", line)]


@pytest.mark.parametrize("name", ALGORITHM_PAGES)
def test_algorithm_pages_follow_sb3s_order(name: str) -> None:
    titles = section_titles((DOCS / "modules" / f"{name}.rst").read_text(encoding="utf-8"))
    assert [t for t in titles if t in SB3_ORDER] == list(SB3_ORDER), titles
    assert titles[: len(SB3_ORDER)] == list(SB3_ORDER), "SB3's sections come first"


def test_section_order_check_can_fail() -> None:
    """Negative control: Parameters before Can I use? is out of order."""
    text = "Notes\n-----\n\nParameters\n----------\n\nCan I use?\n----------\n"
    assert [t for t in section_titles(text) if t in SB3_ORDER] != list(SB3_ORDER)


def test_marks_render_without_an_emoji_font() -> None:
    for page in [ROOT / "README.md", *PAGES]:
        found = EMOJI.findall(page.read_text(encoding="utf-8"))
        assert not found, f"{page.relative_to(ROOT)}: {sorted(set(found))}"
    assert EMOJI.findall("Discrete      \u2714\ufe0f      \u274c")  # negative control
