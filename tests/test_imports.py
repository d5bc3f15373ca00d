"""The package's import structure: imports only run downward.

Walks stitchcore's source with ``ast`` (lazy imports inside functions count too, and so do imports
under ``if TYPE_CHECKING:``: a type-only circle is still a circle): no import cycle between modules
(a package's ``__init__`` importing its own children to register or re-export them is not counted),
every subpackage on a floor (:data:`FLOORS`) and imports only to floors below, no ``_private`` module
or name imported from outside the package that holds it, at most six top-level modules, no streamlit
in the library, the library never importing the app, and ``ui`` never importing the pages.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = "stitchcore"


def _modules() -> dict[str, Path]:
    mods = {}
    for path in (ROOT / PKG).rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        mods[".".join(parts)] = path
    return mods


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The module of ``stitchcore`` that ``name`` (a dotted import target) resolves to."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> list[tuple[str, str | None]]:
    """``(target module, imported name or None)`` for every stitchcore import in ``module``."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names if a.name.split(".")[0] == PKG]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                here = here[: len(here) - node.level + 1]
                base = ".".join(here + ([node.module] if node.module else []))
            if base.split(".")[0] != PKG:
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.append((full, None) if full in MODULES else (base, alias.name))
    return found


def _edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for module in MODULES:
        for target, _ in _imports(module):
            owner = _owner(target)
            if owner is None or owner == module:
                continue
            if MODULES[module].name == "__init__.py" and owner.startswith(module + "."):
                continue  # a package importing its own children (registration, re-exports)
            edges[module].add(owner)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative enough here)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def _subpackage(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _package(module: str) -> str:
    """The package ``module`` belongs to: itself for a package (its ``__init__``), else its parent."""
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


def _private_to(owner: str, name: str | None) -> str | None:
    """The package an import of ``owner`` (and ``name`` from it) is private to; None when it is public.

    A ``_module`` is private to the package that holds it (``experiments.lm._pair``: ``experiments.lm``),
    a ``_name`` to the package of the module that defines it."""
    parts = owner.split(".")
    for i, part in enumerate(parts[1:], start=1):
        if _is_private(part):
            return ".".join(parts[:i])
    return _package(owner) if name is not None and _is_private(name) else None


# The floors of the library, bottom first: a module imports only from floors below its own (and inside its
# own subpackage).  A new subpackage takes a place here (test_every_subpackage_has_a_floor).
FLOORS: list[set[str]] = [
    {"stitchcore", "stitchcore.errors", "stitchcore.timewords", "stitchcore.links"},
    {"stitchcore.registry", "stitchcore.device", "stitchcore.params"},
    {"stitchcore.store", "stitchcore.data", "stitchcore.plots"},
    {"stitchcore.models", "stitchcore.backends"},
    {"stitchcore.cuts"},
    {"stitchcore.stitching"},
    {"stitchcore.measures"},
    {"stitchcore.lm"},  # above measures: a language model's losses carry measures.intervals' intervals
    {"stitchcore.experiments"},
    {"stitchcore.jobs", "stitchcore.report"},
    {"stitchcore.lessons"},  # a lesson is a sequence of runs: above the kinds, its report above report
    {"stitchcore.api"},  # the Python API: a function per kind, results with their figures (its bar: the CLI's too)
    {"stitchcore.cli"},
    {"stitchcore.__main__"},
]


def _floor(module: str) -> int:
    sub = module if module == PKG else _subpackage(module)
    return next(i for i, floor in enumerate(FLOORS) if sub in floor)


def _upward(edges: dict[str, set[str]]) -> list[str]:
    """Edges from a module to another subpackage on its own floor or above."""
    return sorted(f"{m} imports {t}" for m, targets in edges.items() for t in targets
                  if _subpackage(m) != _subpackage(t) and _floor(t) >= _floor(m))


def test_no_import_cycle():
    assert _cycles(_edges()) == []


def test_no_private_name_or_module_imported_from_outside_its_package():
    crossings = []
    for module in MODULES:
        for target, name in _imports(module):
            owner = _owner(target)
            if owner is None or owner == module:
                continue
            package = _private_to(owner, name)
            if package is not None and module != package and not module.startswith(package + "."):
                crossings.append(f"{module} imports {owner}{'.' + name if name else ''}")
    assert crossings == []


def test_every_subpackage_has_a_floor():
    placed = set().union(*FLOORS)
    assert sorted({_subpackage(m) for m in MODULES if m != PKG} - placed) == []


def test_imports_only_run_down_the_floors():
    assert _upward(_edges()) == []


def test_floor_check_sees_an_upward_import():
    """The checker itself can fail: the store importing the job runner is reported."""
    planted = {"stitchcore.store.results": {"stitchcore.jobs.runner"}, "stitchcore.jobs.runner": set()}
    assert _upward(planted) == ["stitchcore.store.results imports stitchcore.jobs.runner"]


def test_top_level_stays_small():
    top = sorted(m for m, p in MODULES.items() if m.count(".") == 1 and p.name != "__init__.py")
    assert len(top) <= 7, top  # params.py: each field declared once (LAYOUT)


def test_library_never_imports_streamlit():
    users = [m for m in MODULES if any(t.split(".")[0] == "streamlit" for t in _all_import_names(m))]
    assert users == []


def test_library_never_imports_the_app():
    """stitchcore knows nothing of the app above it: not ui, not the pages (views)."""
    users = [m for m in MODULES if any(t.split(".")[0] in ("ui", "views", "app") for t in _all_import_names(m))]
    assert users == []


def test_ui_never_imports_the_pages():
    """Imports run views -> ui, never back: a view that ui draws is passed in by the page (run_view's cards)."""
    ui_files = sorted((ROOT / "ui").rglob("*.py"))
    assert ui_files
    users = [p.name for p in ui_files if any(t.split(".")[0] in ("views", "app") for t in _all_import_names(p))]
    assert users == []


def _all_import_names(module: str | Path) -> list[str]:
    """Every module name ``module`` (a stitchcore module's name, or a file) imports, absolute imports only."""
    tree = ast.parse((MODULES[module] if isinstance(module, str) else module).read_text())
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.append(node.module)
    return names


@pytest.mark.parametrize(
    "edges, expected",
    [
        ({"a": {"b"}, "b": {"a"}, "c": set()}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, [["a", "b", "c"]]),
    ],
)
def test_cycle_finder_finds_cycles(edges, expected):
    """The checker itself can fail: it finds a planted cycle."""
    assert _cycles(edges) == expected


def test_type_only_imports_count_as_edges(tmp_path, monkeypatch):
    """An import under ``if TYPE_CHECKING:`` is an edge: a circle through one is reported."""
    fake = {"stitchcore": tmp_path / "__init__.py", "stitchcore.a": tmp_path / "a.py", "stitchcore.b": tmp_path / "b.py"}
    fake["stitchcore"].write_text("")
    fake["stitchcore.a"].write_text("from stitchcore.b import thing\n")
    fake["stitchcore.b"].write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from stitchcore.a import other\n")
    monkeypatch.setitem(globals(), "MODULES", fake)
    assert _cycles(_edges()) == [["stitchcore.a", "stitchcore.b"]]


def test_private_check_sees_a_planted_crossing(tmp_path, monkeypatch):
    """A module of one subpackage importing another's _private module is reported."""
    fake = {
        "stitchcore": tmp_path / "__init__.py",
        "stitchcore.a": tmp_path / "a" / "__init__.py",
        "stitchcore.a._hidden": tmp_path / "a" / "_hidden.py",
        "stitchcore.b": tmp_path / "b" / "__init__.py",
        "stitchcore.b.user": tmp_path / "b" / "user.py",
    }
    for path in fake.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    fake["stitchcore.b.user"].write_text("from stitchcore.a._hidden import thing\n")
    monkeypatch.setitem(globals(), "MODULES", fake)
    with pytest.raises(AssertionError, match="stitchcore.b.user imports stitchcore.a._hidden"):
        test_no_private_name_or_module_imported_from_outside_its_package()
