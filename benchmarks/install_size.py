"""
What each extra of sb3-xppo pulls and weighs, measured in an environment where ``pip install -e ".[tests,extra,ray,docs]"``
ran: the distributions each extra's requirements bring (their dependencies followed through the installed metadata)
that the smallest install (``pip install -e .``) does not, and the bytes their installed files take (the sizes that
each distribution's ``RECORD`` lists; a file without one is measured on disk). Writes
``benchmarks/results/single/install_size.json``; ``benchmarks/render_docs.py`` renders the install page's table from it.

usage: python benchmarks/install_size.py [--package sb3-xppo]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
from importlib import metadata
from typing import Any

from harness.layout import RESULTS, SINGLE

#: ``name[extra1,extra2] (>=1.0); marker``: the name and extras of a requirement line of a distribution's metadata
REQUIREMENT = re.compile(r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[(?P<extras>[^\]]*)\])?")
#: ``extra == "tests"`` in a requirement's marker
EXTRA_MARKER = re.compile(r"""extra\s*==\s*["'](?P<extra>[^"']+)["']""")


def canonical(name: str) -> str:
    """A distribution's name as the packaging standards compare names (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(name: str, extras: frozenset[str] = frozenset()) -> list[tuple[str, frozenset[str]]]:
    """
    The requirements of an installed distribution that apply with ``extras`` and on this machine.

    :param name: the distribution
    :param extras: the extras asked of it
    :return: (name, the extras asked of it) per requirement; those whose marker names another extra, or whose
        environment marker is false here (another platform, another Python), are left out
    """
    found = []
    for line in metadata.requires(name) or []:
        requirement, _, marker = line.partition(";")
        match = REQUIREMENT.match(requirement)
        if match is None:
            raise ValueError(f"{name}: cannot read the requirement {line!r}")
        wanted = EXTRA_MARKER.search(marker)
        if wanted is not None and wanted["extra"] not in extras:
            continue
        if not marker_holds(EXTRA_MARKER.sub("True", marker)):
            continue
        found.append((match["name"], frozenset(e.strip() for e in (match["extras"] or "").split(",") if e.strip())))
    return found


def marker_holds(marker: str) -> bool:
    """An environment marker (without its ``extra`` clause) evaluated on this machine; an empty one holds."""
    if not marker.strip():
        return True
    from packaging.markers import Marker

    # ``True`` stands for the extra clause already checked: keep the rest of the marker
    text = re.sub(r"\b(and|or)\s+True\b|\bTrue\s+(and|or)\b", "", marker).strip()
    return text in ("", "True") or Marker(text).evaluate()


def closure(roots: list[tuple[str, frozenset[str]]]) -> set[str]:
    """The installed distributions the requirements ``roots`` bring, their dependencies followed (canonical names)."""
    seen: set[tuple[str, frozenset[str]]] = set()
    names: set[str] = set()
    todo = list(roots)
    while todo:
        name, extras = todo.pop()
        if (canonical(name), extras) in seen:
            continue
        seen.add((canonical(name), extras))
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # not installed here: a requirement of another platform or an optional one
        names.add(canonical(name))
        todo += requirements(name, extras)
    return names


def installed_bytes(name: str) -> int:
    """The bytes of a distribution's installed files: its ``RECORD``'s sizes, a file's size on disk without one."""
    dist = metadata.distribution(name)
    total = 0
    for file in dist.files or []:
        if file.size is not None:
            total += file.size
        else:
            path = file.locate()
            total += os.path.getsize(path) if os.path.isfile(path) else 0
    return total


def measure(package: str) -> dict[str, Any]:
    """The smallest install's distributions and each extra's own, with their installed sizes (MB, 10^6 bytes)."""
    extras = metadata.metadata(package).get_all("Provides-Extra") or []
    base = closure([(package, frozenset())]) - {canonical(package)}
    mb = {name: installed_bytes(name) / 1e6 for name in closure([(package, frozenset(extras))]) | base}
    rows = {}
    for extra in extras:
        own = closure([(package, frozenset([extra]))]) - base - {canonical(package)}
        rows[extra] = dict(
            mb=sum(mb[name] for name in own),
            packages={name: mb[name] for name in sorted(own, key=lambda n: -mb[n])},
        )
    return dict(
        package=package,
        base=dict(mb=sum(mb[name] for name in base), packages={name: mb[name] for name in sorted(base, key=lambda n: -mb[n])}),
        extras=rows,
        torch=dict(version=metadata.version("torch"), mb=mb.get("torch")),
        host=dict(platform=platform.platform(), python=platform.python_version()),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--package", default="sb3-xppo")
    parser.add_argument("--out-dir", default=os.path.join(RESULTS, SINGLE))
    args = parser.parse_args()
    result = dict(command="python benchmarks/install_size.py", **measure(args.package))
    path = os.path.join(args.out_dir, "install_size.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    for extra, row in result["extras"].items():
        top = ", ".join(f"{name} {size:.0f}" for name, size in list(row["packages"].items())[:5])
        print(f"{extra}: {row['mb']:.0f} MB ({top})")
    print(f"base: {result['base']['mb']:.0f} MB; wrote {path}")


if __name__ == "__main__":
    main()
