"""requirements.txt keeps an already-installed torch build (issue 11, item 9): the CPU-only wheel
(``2.14.1+cpu``) and a CUDA one satisfy the ranges, and so does what is installed here."""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[1]


def _requirements() -> dict[str, Requirement]:
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    reqs = [Requirement(line) for line in (raw.split("#")[0].strip() for raw in lines) if line]
    return {r.name: r for r in reqs}


@pytest.mark.parametrize("name, builds", [("torch", ["2.14.0", "2.14.1+cpu", "2.14.1+cu128"]),
                                          ("torchvision", ["0.29.1+cpu", "0.29.0"])])
def test_torch_takes_a_range_that_any_build_of_the_release_satisfies(name, builds):
    req = _requirements()[name]
    assert not any(s.operator == "==" for s in req.specifier), f"{name} is pinned exactly: {req}"
    for build in builds:
        assert req.specifier.contains(build), f"{build} does not satisfy {req}"
    assert not req.specifier.contains("99.0"), f"{req} has no upper bound"
    assert req.specifier.contains(version(name)), f"the installed {name} {version(name)} does not satisfy {req}"


def test_the_readme_cpu_install_asks_for_the_same_ranges():
    readme = (ROOT / "README.md").read_text()
    asked = {m[1]: SpecifierSet(m[2]) for m in re.finditer(r'"(torch|torchvision)([<>=!,.0-9]+)"', readme)}
    for name in ("torch", "torchvision"):
        assert asked.get(name) == _requirements()[name].specifier, f"README's CPU install differs for {name}"


def test_every_pinned_requirement_is_declared_in_the_package_with_a_bound_it_meets():
    """pyproject.toml (what ``pip install .`` asks for) names every package requirements.txt pins (what the README's
    commands install), each pin inside the declared range: the two lists cannot drift apart."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = [Requirement(r) for r in project["dependencies"]]
    declared += [Requirement(r) for extra in project["optional-dependencies"].values() for r in extra]
    by_name = {r.name.lower().replace("_", "-"): r for r in declared if r.name != "stitchlab"}
    for name, pinned in _requirements().items():
        key = name.lower().replace("_", "-")
        assert key in by_name, f"{name} is in requirements.txt but not in pyproject.toml"
        exact = next((s.version for s in pinned.specifier if s.operator == "=="), None)
        if exact is not None:
            assert by_name[key].specifier.contains(exact), f"{name}=={exact} is outside pyproject's {by_name[key]}"
