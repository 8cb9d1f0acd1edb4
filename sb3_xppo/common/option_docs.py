"""
The options' documentation: each field's ``:param:`` text (:func:`~sb3_xppo.common.declarations.option`'s ``doc``)
rendered into its options class's docstring, which ``help()`` and Sphinx's autodoc show.
"""

import inspect
import textwrap
from dataclasses import fields
from typing import Any


def param_field(name: str, text: str, width: int = 120) -> str:
    """
    A reST ``:param name: text`` field wrapped to ``width``, continuation lines indented, never inside an inline
    literal (````...````).

    :param name: the parameter
    :param text: its description, reST on one line
    :param width: the longest line
    :return: the field's lines
    """
    parts = f":param {name}: {text}".split("``")
    unbroken = "``".join(part.replace(" ", "\0") if i % 2 else part for i, part in enumerate(parts))
    wrapped = textwrap.fill(unbroken, width, subsequent_indent="    ", break_long_words=False, break_on_hyphens=False)
    return wrapped.replace("\0", " ")


def document_options(cls: type[Any]) -> None:
    """Append each field's ``:param:`` text to an options class's docstring (``help()``, Sphinx's autodoc)."""
    fields_doc = [param_field(f.name, " ".join(f.metadata["doc"].split())) for f in fields(cls)]
    cls.__doc__ = "\n".join((inspect.cleandoc(cls.__doc__ or ""), "", *fields_doc)) + "\n"
