"""The package's layout: imports only downward, no cycles, short modules, docstrings, no prints.

Every module under ``spectral/`` (and the ``optimizers/`` declarations, which become
``spectral.optimizers``) is parsed with ``ast``; every import counts, including those inside
functions, relative or absolute. A module may import modules of its own layer or of a lower
one (:data:`LAYERS`, lowest first). A package's ``__init__`` counts as the package; an
import of ``a.b.c`` is an edge to the deepest module it names (its parents' ``__init__`` run
too, but that is how packages work, not a dependency to judge).

A new module must be placed in :data:`LAYERS` (an unplaced one fails), so the map stays
the design.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Lowest first. Names are under ``spectral.``; ``x.*`` is the package ``x`` and everything in
# it; ``optimizers.*`` is ``spectral.optimizers`` (the repository's optimizers/ folder) and
# ``templates`` ``spectral.templates`` (templates/); ``.`` is ``spectral/__init__.py``;
# ``*.__main__`` any ``python -m`` entry.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # 0  no sympy, no torch: errors, user text, files, the Jinja environment, the symbols, the
    #    measuring toolkit and the guard that bounds a user's code in time (standard library
    #    only, below the runtime, which vendors them: check(widths=)'s twins run under the
    #    guard; they live with the measurements they serve, the two modules of measure/
    #    placed this low)
    ("base", ("errors", "text", "io", "templating", "templates", "symbols", "measure.fit",
              "measure.guard")),
    # 1  the derivation engine (sympy): its folder, and the declaration type optimizer files import
    ("engine", ("engine.*", "spec")),
    # 2  the optimizer files and their registry (names looked up, then derived); the public
    #    API re-exports derive from it
    ("catalog", ("catalog", "optimizers.*", ".")),
    # 3  base values → concrete HPs at a size
    ("rules", ("scaling", "transfer", "base_values")),
    # 4  what a user's training imports or gets generated (both runtimes name parameters'
    #    roles with `patterns`); the rules tables; the reference models
    ("runtime", ("families.*", "torch.*", "jax.*", "frameworks.*", "patterns", "render.*", "codegen.*", "models.*")),
    # 5  measurements: a declaration against its implementation, from it, rules against training
    ("measure", ("measure.*", "infer.*", "coordcheck.*")),
    # 6  learning-rate transfer sweeps (data, tokens, train, tune, report)
    ("sweep", ("sweep.*",)),
    # 7  the command line: the only layer that prints
    ("cli", ("cli.*", "__main__", "*.__main__")),
)

# Known exceptions, each with its owner; delete a line when its import is gone (a test below
# says when one no longer occurs).
KNOWN_CYCLE_EDGES: dict[tuple[str, str], str] = {}
KNOWN_UPWARD: dict[tuple[str, str], str] = {}


MAX_LINES = 600


# --------------------------------------------------------------------------------------
# the import graph
# --------------------------------------------------------------------------------------


def _module_files() -> dict[str, Path]:
    """Module name → file, for ``spectral/`` and the folders installed inside it
    (``optimizers/`` as ``spectral.optimizers``, ``templates/`` as ``spectral.templates``)."""
    out: dict[str, Path] = {}
    for top, package in (
        ("spectral", "spectral"),
        ("optimizers", "spectral.optimizers"),
        ("templates", "spectral.templates"),
    ):
        folder = ROOT / top
        for path in sorted(folder.rglob("*.py")):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _is_package(name: str, files: dict[str, Path]) -> bool:
    return files[name].name == "__init__.py"


def _resolve(name: str, files: dict[str, Path]) -> str | None:
    """The deepest known module that ``name`` (dotted) names, or None (not ours)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in files:
            return candidate
        parts.pop()
    return None


def _imports(module: str, tree: ast.AST, files: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """``(imported module, line)`` for every import of one of ours anywhere in ``tree``."""
    package = module if _is_package(module, files) else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _resolve(alias.name, files)
                if target is not None:
                    yield target, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                # `from pkg import mod` imports the module pkg.mod; `from mod import name` mod
                target = _resolve(f"{source}.{alias.name}", files) or _resolve(source, files)
                if target is not None:
                    yield target, node.lineno


@cache
def _graph() -> tuple[dict[str, Path], dict[str, dict[str, int]], dict[str, ast.AST]]:
    """Files, edges (module → imported module → first line) and parsed trees."""
    files = _module_files()
    trees = {m: ast.parse(p.read_text(encoding="utf-8"), filename=str(p)) for m, p in files.items()}
    edges: dict[str, dict[str, int]] = {}
    for module, tree in trees.items():
        out = edges.setdefault(module, {})
        for target, line in _imports(module, tree, files):
            if target != module:
                out.setdefault(target, line)
    return files, edges, trees


def _short(module: str) -> str:
    """The name :data:`LAYERS` uses: without ``spectral.``; ``spectral`` itself is ``.``."""
    if module == "spectral":
        return "."
    return module.removeprefix("spectral.")


def _matches(short: str, pattern: str) -> bool:
    if pattern.startswith("*."):
        return short.endswith(pattern[1:])
    if pattern.endswith(".*"):
        stem = pattern[:-2]
        return short == stem or short.startswith(stem + ".")
    return short == pattern


def layer_of(module: str) -> int | None:
    """Index in :data:`LAYERS` of ``module``; the most specific pattern wins (``*.__main__``
    over ``sweep.*``)."""
    short = _short(module)
    found: list[tuple[int, int]] = []
    for index, (_, patterns) in enumerate(LAYERS):
        for pattern in patterns:
            if _matches(short, pattern):
                found.append((0 if pattern.startswith("*.") else 1, index))
    return min(found)[1] if found else None


def _where(module: str, line: int) -> str:
    files = _graph()[0]
    return f"{files[module].relative_to(ROOT)}:{line}"


def _is_entry(module: str) -> bool:
    return module.rpartition(".")[2] == "__main__"


# --------------------------------------------------------------------------------------
# the checks
# --------------------------------------------------------------------------------------


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_every_module_is_placed():
    files = _graph()[0]
    unplaced = sorted(m for m in files if layer_of(m) is None)
    assert not unplaced, f"modules missing from LAYERS in {__file__}: {', '.join(unplaced)}"


def _cycles(edges: dict[str, dict[str, int]], ignore: set[tuple[str, str]]) -> list[list[str]]:
    """One cycle (a path that returns to its start) per strongly connected component of more
    than one module (Tarjan), with the ``ignore`` edges left out."""
    graph = {m: [t for t in sorted(ts) if (m, t) not in ignore] for m, ts in edges.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    cycles = []
    for component in components:
        inside = set(component)
        start = component[0]
        path, seen = [start], {start}
        while True:  # walk inside the component until a module repeats
            nxt = next(w for w in graph[path[-1]] if w in inside)
            if nxt in seen:
                cycles.append(path[path.index(nxt):] + [nxt])
                break
            path.append(nxt)
            seen.add(nxt)
    return cycles


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_no_import_cycles():
    edges = _graph()[1]
    cycles = _cycles(edges, set(KNOWN_CYCLE_EDGES))
    shown = [
        " → ".join(c) + "  (" + ", ".join(_where(a, edges[a][b]) for a, b in zip(c, c[1:], strict=False)) + ")"
        for c in cycles
    ]
    assert not cycles, "import cycles:\n  " + "\n  ".join(shown)


def test_no_upward_imports():
    edges = _graph()[1]
    bad = []
    for module, targets in sorted(edges.items()):
        mine = layer_of(module)
        for target, line in sorted(targets.items()):
            theirs = layer_of(target)
            if mine is None or theirs is None or theirs <= mine:
                continue
            if (module, target) in KNOWN_UPWARD:
                continue
            bad.append(
                f"{module} ({LAYERS[mine][0]}) imports {target} ({LAYERS[theirs][0]}) at "
                f"{_where(module, line)}"
            )
    assert not bad, "upward imports:\n  " + "\n  ".join(bad)


def test_only_the_cli_imports_the_cli():
    edges = _graph()[1]
    bad = [
        f"{module} imports {target} at {_where(module, line)}"
        for module, targets in sorted(edges.items())
        if not (module == "spectral.cli" or module.startswith("spectral.cli.") or _is_entry(module))
        for target, line in sorted(targets.items())
        if target == "spectral.cli" or target.startswith("spectral.cli.")
    ]
    assert not bad, "spectral.cli imported from outside it:\n  " + "\n  ".join(bad)


def test_modules_are_short():
    files = _graph()[0]
    long = {
        str(path.relative_to(ROOT)): n
        for path in files.values()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"modules longer than {MAX_LINES} lines (split them by concern): {long}"


def test_only_the_cli_prints():
    files, _, trees = _graph()
    calls = sorted(
        (str(files[module].relative_to(ROOT)), node.lineno)
        for module, tree in trees.items()
        if not (module == "spectral.cli" or module.startswith("spectral.cli."))
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"
    )
    bad = [f"{path}:{line}" for path, line in calls]
    assert not bad, "print() outside spectral/cli (return text or take a callback):\n  " + "\n  ".join(bad)


MAX_FUNCTION_LINES = 80


def test_functions_are_short():
    """No function (docstring included) over MAX_FUNCTION_LINES lines, but the CLI's
    argument tables (``configure_<command>`` in spectral/cli: one add_argument per option)."""
    files, _, trees = _graph()
    long = sorted(
        f"{files[module].relative_to(ROOT)}:{node.lineno} {node.name} ({n} lines)"
        for module, tree in trees.items()
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and (n := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_FUNCTION_LINES
        and not (module.startswith("spectral.cli") and node.name.startswith("configure_"))
    )
    assert not long, "functions to split by step:\n  " + "\n  ".join(long)


MAX_TOP_LEVEL = 14


def test_the_top_level_stays_small():
    """The folders carry the layout: spectral/ itself holds at most MAX_TOP_LEVEL modules
    (``__init__`` and ``__main__`` included); a new concern goes into a subpackage."""
    top = sorted(path.name for path in (ROOT / "spectral").glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL, top


def test_every_module_says_what_it_holds():
    """Every module opens with a docstring, and no two first lines say the same (compared
    without case and punctuation): a module's first line is what tells it from the others."""
    files, _, trees = _graph()
    missing, by_line = [], {}
    for module, tree in sorted(trees.items()):
        doc = ast.get_docstring(tree)
        if not doc or not doc.strip():
            missing.append(str(files[module].relative_to(ROOT)))
            continue
        key = " ".join(re.findall(r"\w+", doc.strip().splitlines()[0].lower()))
        by_line.setdefault(key, []).append(str(files[module].relative_to(ROOT)))
    shared = {line: paths for line, paths in by_line.items() if len(paths) > 1}
    assert not missing, f"modules without a docstring: {', '.join(missing)}"
    assert not shared, f"modules whose docstrings open with the same line: {shared}"


def test_known_exceptions_still_occur():
    """A known exception whose import is gone must be deleted from the lists above."""
    edges = _graph()[1]
    gone = [
        f"{a} → {b} ({why})"
        for (a, b), why in {**KNOWN_CYCLE_EDGES, **KNOWN_UPWARD}.items()
        if b not in edges.get(a, {})
    ]
    assert not gone, "delete these known exceptions, they no longer occur:\n  " + "\n  ".join(gone)


def test_the_checks_see_what_they_judge():
    """The graph finds imports inside functions, relative and absolute ones, and the
    checks fire on a made-up cycle."""
    edges = _graph()[1]
    assert "spectral.codegen.vendor" in edges["spectral.codegen.torch"]  # inside a function
    assert "spectral.sweep.tune" in edges["spectral.sweep.compare"]  # `from .tune import`, in a function
    assert "spectral.sweep.records" in edges["spectral.sweep.report"]  # relative
    assert _cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}}, set()) == [["a", "b", "c", "a"]]
    assert layer_of("spectral.sweep.__main__") == layer_of("spectral.cli")
    assert layer_of("spectral.optimizers.adam") == layer_of("spectral.catalog")


def test_pyproject_installs_every_package_inside_spectral():
    """Every package folder is listed in pyproject.toml (setuptools installs only those), and
    optimizers/ and templates/ install as spectral.optimizers / spectral.templates, so no
    top-level package of such a common name lands in site-packages."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    listed = set(config["setuptools"]["packages"])
    packages = {m for m, path in _module_files().items() if path.name == "__init__.py"}
    assert listed == packages
    assert all(name == "spectral" or name.startswith("spectral.") for name in listed)
    assert config["setuptools"]["package-dir"] == {
        "spectral.optimizers": "optimizers",
        "spectral.templates": "templates",
    }
