"""Sphinx configuration of the sb3-xppo documentation (the arrangement of Stable-Baselines3's docs/)."""

import importlib
import os
import re
import sys
from typing import Any

# the package from this checkout, also where it is not installed (``pip install -e ".[docs]"`` installs it)
sys.path.insert(0, os.path.abspath(".."))

with open(os.path.join(os.path.dirname(__file__), "..", "sb3_xppo", "version.txt")) as file_handler:
    __version__ = file_handler.read().strip()

project = "sb3-xppo"
author = "sb3-xppo contributors"
copyright = "2026, sb3-xppo contributors"
version = __version__
release = __version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
master_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
language = "en"
pygments_style = "sphinx"

# MyST: the guide pages are GitHub markdown, readable in the repository as they are; heading anchors let
# [text](page.md#heading) links work in both places
myst_heading_anchors = 4

# autodoc: reST docstrings with :param: fields, SB3's style; signatures without the type hints, which go to the
# parameter descriptions
autodoc_typehints = "description"
autodoc_member_order = "bysource"
autodoc_default_options = {"show-inheritance": True}
autodoc_preserve_defaults = True
add_module_names = False

html_theme = "sphinx_rtd_theme"
html_title = f"sb3-xppo {__version__}"
html_static_path = ["_static"]
# results tables whose cells wrap, a wider page, figures at the page's width
html_css_files = ["tables.css"]
html_show_sourcelink = True


def resolve_reexport(app: Any, env: Any, node: Any, contnode: Any) -> Any:
    """
    A reference to a re-exported name (``sb3_xppo.XPPO``, documented as ``sb3_xppo.xppo.XPPO``) resolves to the
    entry of the object it names, through the canonical name autodoc records (``sb3_xppo.xppo.xppo.XPPO``).
    """
    target = node.get("reftarget", "")
    if node.get("refdomain") != "py" or not target.startswith("sb3_xppo."):
        return None
    module_name, _, name = target.rpartition(".")
    try:
        obj = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError):
        return None
    canonical = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"
    if canonical == target or not canonical.startswith("sb3_xppo."):
        return None
    return env.get_domain("py").resolve_xref(env, node["refdoc"], app.builder, node["reftype"], canonical, node, contnode)


#: In a table cell, a line may break after these characters of an identifier, a path or a contender's name
#: (``xppo@normalize_values=True``, ``sb3_xppo/TwoStylePendulum-v0``): boundaries between the words of a token.
#: Never inside a number, a version or a signed figure: ``.``, ``,``, ``/`` and ``:`` break only after a letter
#: (``sb3_xppo.common``, ``docs/guide``), never in ``0.56``, ``753,664``, ``-212.0``, ``v2.3.1`` or ``10/10``
TOKEN_BREAKS = re.compile(r"(?<=[_@=(\[])(?=\w)|(?<=[^\W\d][/:])(?=\w)|(?<=[^\W\d][.,])(?=[^\W\d])|(?<=\)[.,])(?=[^\W\d])")


def break_tokens_in_tables(app: Any, doctree: Any, docname: str) -> None:
    """
    Give the long tokens of every table cell places to wrap between their words (a ``<wbr>`` after ``_``, ``@``,
    ``=``, ``/``, ...), so that ``tables.css`` can let cells wrap only at word boundaries and never split a word.
    ``<wbr>`` is an empty element: copying the text copies it unchanged.
    """
    from docutils import nodes

    if app.builder.format != "html":
        return
    for table in doctree.findall(nodes.table):
        for text in list(table.findall(nodes.Text)):
            parts = TOKEN_BREAKS.split(str(text))
            if len(parts) == 1 or isinstance(text.parent, (nodes.raw, nodes.literal_block)):
                continue
            pieces: list[Any] = []
            for i, part in enumerate(parts):
                if i:
                    pieces.append(nodes.raw("", "<wbr>", format="html"))
                pieces.append(nodes.Text(part))
            text.parent.replace(text, pieces)


def setup(app: Any) -> None:
    app.connect("missing-reference", resolve_reexport)
    app.connect("doctree-resolved", break_tokens_in_tables)
