"""
What the safe loader says when it refuses a file (docs/guide/security.md, "A refusal"): one
:class:`UnsafeFileError` per file, naming the file, every refused field and what each asked for, and only the ways on
that would work for that kind of file; and :func:`refusals_exit`, which the commands use to print it as one line with
exit status 2.
"""

from __future__ import annotations

import contextlib
import pickle
import sys
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

#: How to go on after a refused model zip (Python API and commands)
ZIP_HINT = (
    "If you made this file or trust whoever did: trust_code=True (Python) or --trust-code (the commands) loads it as "
    "Stable-Baselines3 does, running its code, and `python -m sb3_xppo.trust FILE` signs it so that it loads so from "
    "then on; or give the field a value of your own with custom_objects={...} (Python)."
)

#: How to go on after a refused pickle file (``VecNormalize`` statistics, a replay buffer): no ``custom_objects`` there
PICKLE_HINT = (
    "If you made this file or trust whoever did: trust_code=True (Python) or --trust-code (the commands) loads it as "
    "Stable-Baselines3 does, running its code."
)

#: How to go on after a refusal in text that is always read as literals (YAML, ``normalize``, ``policy_kwargs``)
LITERALS_ONLY = (
    "Text values (rl-zoo3's config.yml and args.yml, normalize, policy_kwargs, --env-kwargs) are read as literals, "
    "dict(...) and torch activation or optimizer classes only, with or without trust_code: write the value so."
)

#: How to go on after a name of code that a file (a ``config.yml``, a checkpoint's env id) asks to import
CODE_NAME_HINT = (
    "Build that yourself (pass env=... in Python), or, if you made the file or trust whoever did, trust_code=True "
    "(Python) or --trust-code (the commands) imports it."
)


class Refusal(NamedTuple):
    """One refused request of a file: where it was found and what it asked for."""

    #: where: ``data['clip_range']``, ``config.yml: env_wrapper``, a ``.pkl``
    field: str
    #: the global (``module.name``), YAML tag, module or name it asked for
    asked: str
    #: what kind of thing that is, when it helps (e.g. a function pickled by value)
    why: str = ""

    def __str__(self) -> str:
        return f"{self.field} asks for {self.asked}" + (f" ({self.why})" if self.why else "")


class UnsafeFileError(ValueError, pickle.UnpicklingError):
    """
    A file asked for code outside the allowlist (a ``ValueError`` and a ``pickle.UnpicklingError``): nothing of it
    ran. The message, one line, names the file and every refused field with what it asked for, and how to go on.

    :param field: where the (first) request was found, the file's path first (``model.zip: data['learning_rate']``)
    :param asked: the global (``module.name``), YAML tag or name it asked for
    :param why: what kind of thing that is, when it helps (e.g. a function pickled by value)
    :param hint: how to go on (default: :data:`ZIP_HINT`)
    :param refusals: every refusal of the file, the first one included (default: just that one)
    """

    def __init__(self, field: str, asked: str, why: str = "", hint: str = ZIP_HINT, refusals: Sequence[Refusal] = ()) -> None:
        self.field, self.asked, self.why, self.hint = field, asked, why, hint
        self.refusals: tuple[Refusal, ...] = tuple(refusals) or (Refusal(field, asked, why),)
        listed = "; ".join(map(str, self.refusals))
        super().__init__(f"{listed}, which is not loaded: no code from a file runs. {hint}")

    @classmethod
    def of(cls, refusals: Sequence[Refusal], hint: str = ZIP_HINT) -> UnsafeFileError:
        """:return: one error listing every refusal (the first names ``field``, ``asked`` and ``why``)"""
        first = refusals[0]
        return cls(first.field, first.asked, first.why, hint, refusals)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return type(self), (self.field, self.asked, self.why, self.hint, self.refusals)


class FileTooLargeError(ValueError):
    """A file whose declared sizes exceed the loader's limits (a zip bomb, or not a checkpoint): nothing was inflated."""


class UnreadableFileError(ValueError):
    """A file that is not what the libraries write (a malformed pickle, an object array, an unknown opcode's
    argument): nothing of it was used. The message names the file and the field."""


#: What a command refuses as bad input (a file it will not load) rather than fails on
REFUSALS: tuple[type[Exception], ...] = (UnsafeFileError, FileTooLargeError, UnreadableFileError)


@contextlib.contextmanager
def refusals_exit(debug: bool = False, *kinds: type[Exception]) -> Iterator[None]:
    """
    A command's refusal of its input: one line on stderr and exit status 2 (argparse's status for bad input), no
    traceback unless ``debug``.

    :param debug: re-raise, with the traceback (the commands' ``--debug``)
    :param kinds: the command's own refusals, besides :data:`REFUSALS` (a file refused as unsafe)
    :raises SystemExit: 2, for one of those
    """
    try:
        yield
    except (*REFUSALS, *kinds) as error:
        if debug:
            raise
        print(f"error: {' '.join(str(error).split())}", file=sys.stderr)
        raise SystemExit(2) from None
