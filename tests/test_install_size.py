"""``benchmarks/install_size.py``: which distributions each extra brings and what they weigh, on this environment."""

from __future__ import annotations

from importlib import metadata

import install_size
import pytest


def test_requirements_follow_the_extras_asked() -> None:
    base = {name for name, _ in install_size.requirements("sb3-xppo")}
    assert {"stable-baselines3", "torch", "gymnasium"} <= base
    assert "ray" not in base and "envpool" not in base  # an extra's requirement is not the base's
    assert "ray" in {name for name, _ in install_size.requirements("sb3-xppo", frozenset(["ray"]))}
    # the extras a requirement asks of its own dependency are kept: gymnasium[box2d]
    assert ("gymnasium", frozenset(["box2d"])) in install_size.requirements("sb3-xppo")


def test_each_extra_counts_only_what_the_smallest_install_lacks() -> None:
    result = install_size.measure("sb3-xppo")
    base = set(result["base"]["packages"])
    assert "torch" in base and "stable-baselines3" in base
    assert "envpool" in result["extras"]["extra"]["packages"] and "ray" in result["extras"]["ray"]["packages"]
    for row in result["extras"].values():
        assert not base & set(row["packages"])
        assert row["mb"] == pytest.approx(sum(row["packages"].values()))
    # a distribution's size is the sum of its RECORD's file sizes (hand check on a small one)
    dist = metadata.distribution("tqdm")
    record = sum(f.size for f in dist.files if f.size is not None)
    assert install_size.installed_bytes("tqdm") >= record > 0


def test_a_requirement_it_cannot_read_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(install_size.metadata, "requires", lambda name: ["@@not a requirement"])
    with pytest.raises(ValueError, match="cannot read the requirement"):
        install_size.requirements("sb3-xppo")


def test_environment_markers_are_evaluated() -> None:
    assert install_size.marker_holds("")
    assert not install_size.marker_holds(' python_version < "3"')
    assert install_size.marker_holds(' python_version >= "3"')
