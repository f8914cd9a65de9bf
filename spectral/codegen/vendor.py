"""``spectral codegen --vendor``: one standalone file from the runtime's own sources.

The runtime packages (:mod:`spectral.torch`, :mod:`spectral.jax`) are written so that their
modules can be laid end to end: each imports the others only at the top, by absolute name
(``from spectral.torch.apply.hooks import apply_multipliers``), never under an alias, and no two of
them define the same top-level name. :func:`assemble` drops those intra-package imports
(and each module's docstring and ``__all__``), hoists the remaining top-level imports (the
standard library, torch, jax, optax) above everything, and concatenates the bodies in the
order given, so the vendored file runs exactly the code the importing form runs.
:func:`runtime_modules` gives that order, derived from the sources: every module of the
runtime packages and the spectral modules they import, each after what it imports.

The vendored file has no ``from __future__ import annotations`` (each module's own is
dropped with its imports): with it every annotation is a string, which ``dataclasses``
resolves through ``sys.modules[cls.__module__]`` — absent when a config file is loaded by
path without being registered (``spec_from_file_location`` + ``exec_module``, the usual way
to load one), so its dataclasses failed to build. Without it the annotations are evaluated
where they stand, which the runtime modules allow (every name an annotation uses is
imported or defined before it; tests/cli/test_hostile.py loads both forms that way).
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from ..errors import VendorError

__all__ = [
    "RUNTIME_PACKAGES",
    "VendorError",
    "assemble",
    "module_path",
    "package_modules",
    "runtime_modules",
    "spectral_imports",
    "standalone",
]


@cache
def module_path(name: str) -> Path:
    """The source file of module ``name``, found without importing it or its package
    (``spectral.torch`` imports torch; writing a config must not)."""
    parts = name.split(".")
    for depth in range(len(parts) - 1, 0, -1):
        # the deepest enclosing package that is light to import: spectral, or one that
        # installs from its own folder (spectral.optimizers)
        package = ".".join(parts[:depth])
        if package not in ("spectral", "spectral.optimizers"):
            continue
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            break
        path = Path(list(spec.submodule_search_locations)[0]).joinpath(*parts[depth:])
        for candidate in (path.with_suffix(".py"), path / "__init__.py"):
            if candidate.is_file():
                return candidate
        break
    raise VendorError(f"cannot find the source of {name}")


def _is_ours(node: ast.ImportFrom | ast.Import) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "spectral"
    return any(alias.name.split(".")[0] == "spectral" for alias in node.names)


def _split(
    name: str, source: str, tree: ast.Module | None = None
) -> tuple[list[ast.Import | ast.ImportFrom], str, set[str]]:
    """(imports to hoist, the body without them, the top-level names it defines);
    ``tree``: ``source`` already parsed."""
    tree = ast.parse(source) if tree is None else tree
    lines = source.splitlines(keepends=True)
    drop: set[int] = set()
    imports: list[ast.Import | ast.ImportFrom] = []
    defined: set[str] = set()
    for i, node in enumerate(tree.body):
        span = range(node.lineno - 1, (node.end_lineno or node.lineno))
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            drop.update(span)  # the module docstring
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            drop.update(span)
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                continue
            if _is_ours(node):
                if any(a.asname for a in node.names):
                    raise VendorError(f"{name}: an aliased import of spectral cannot be vendored")
                continue
            imports.append(node)
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            drop.update(span)
        else:
            defined.update(_names(node))
    body = "".join(line for n, line in enumerate(lines) if n not in drop)
    return imports, body.strip("\n"), defined


@cache
def _split_once(
    name: str, source: str
) -> tuple[tuple[ast.Import | ast.ImportFrom, ...], str, frozenset[str]]:
    """:func:`_split` of a runtime module's source, parsed once per process and text: every
    vendored render copies the same ~60 modules, and parsing them took ~0.8 s of its ~0.9 s.
    Keyed by the text read, so an edited source is parsed again. The import nodes are
    shared between renders and only read (:func:`_import_block`)."""
    imports, body, defined = _split(name, source)
    return tuple(imports), body, frozenset(defined)


def _names(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    elif isinstance(node, ast.For):
        targets = [node.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _sort_key(name: str) -> tuple[int, str]:
    # isort's order_by_type: CONSTANTS, then Classes, then functions
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return kind, name.lower()


def _import_block(nodes: Sequence[ast.Import | ast.ImportFrom]) -> str:
    """The hoisted imports as ruff's isort lays them out: the standard library, then the
    rest; ``import x`` lines before ``from x import ...`` lines; one line per module."""
    plain: dict[bool, set[str]] = {True: set(), False: set()}
    froms: dict[bool, dict[str, set[str]]] = {True: {}, False: {}}
    for node in nodes:
        # an alias stays with its name: `import jax.numpy as jnp`, `from x import y as z`
        names = [a.name if a.asname is None else f"{a.name} as {a.asname}" for a in node.names]
        if isinstance(node, ast.Import):
            for alias, text in zip(node.names, names, strict=True):
                std = alias.name.split(".")[0] in sys.stdlib_module_names
                plain[std].add(text)
        else:
            module = node.module or ""
            std = module.split(".")[0] in sys.stdlib_module_names
            froms[std].setdefault(module, set()).update(names)
    sections = []
    for std in (True, False):
        lines = [f"import {m}" for m in sorted(plain[std])]
        for module in sorted(froms[std]):
            names = sorted(froms[std][module], key=_sort_key)
            line = f"from {module} import {', '.join(names)}"
            if len(line) > 88:
                line = f"from {module} import (\n" + "".join(f"    {n},\n" for n in names) + ")"
            lines.append(line)
        if lines:
            sections.append("\n".join(lines))
    return "\n\n".join(sections)


def assemble(modules: Sequence[str], tail: str, *, header: str) -> str:
    """``header``, the hoisted imports, every module's body in order, then ``tail``.

    ``tail`` is the importing form's config text with its ``from spectral...`` lines
    removed by the caller (the numbers and the bindings). Refuses a name defined twice.
    """
    hoisted: list[ast.Import | ast.ImportFrom] = []
    bodies: list[str] = []
    owner: dict[str, str] = {}
    for name in modules:
        imports, body, defined = _split_once(name, module_path(name).read_text(encoding="utf-8"))
        hoisted += imports
        for symbol in sorted(defined):
            if symbol in owner:
                raise VendorError(f"{symbol} is defined in both {owner[symbol]} and {name}")
            owner[symbol] = name
        bodies.append(f"# ---- from {name} " + "-" * max(0, 70 - len(name)) + "\n\n\n" + body)
    head = header.rstrip("\n") + "\n\n" + _import_block(hoisted)
    rest = [*bodies, tail.strip("\n")] if tail.strip("\n") else bodies
    # isort: one blank line after the imports when a comment follows
    return head + "\n\n" + "\n\n\n".join(rest) + "\n"


def standalone(source: str, modules: Sequence[str]) -> str:
    """The standalone form of a config module rendered with ``vendor=True``: its docstring,
    the runtime ``modules``' sources, then the rest of it (its numbers and bindings)."""
    tree = ast.parse(source)
    doc_end = tree.body[0].end_lineno or 0
    lines = source.splitlines(keepends=True)
    header, tail = "".join(lines[:doc_end]), "".join(lines[doc_end:])
    return assemble(modules, tail, header=header)


RUNTIME_PACKAGES: dict[str, tuple[str, ...]] = {
    "torch": ("spectral.torch", "spectral.families"),
    "jax": ("spectral.jax",),
}
"""The runtime packages a vendored config of each framework copies, with every module
they import from spectral (:func:`runtime_modules`)."""


def package_modules(package: str) -> list[str]:
    """Every module of ``package`` (itself and its subpackages' too), found by walking its
    folder: nothing is imported."""
    init = module_path(package)
    if init.name != "__init__.py":
        raise VendorError(f"{package} is not a package")
    folder = init.parent
    names = []
    for path in sorted(folder.rglob("*.py")):
        parts = [*package.split("."), *path.relative_to(folder).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


@cache
def _is_module(name: str) -> bool:
    try:
        module_path(name)
    except VendorError:
        return False
    return True


def spectral_imports(name: str, tree: ast.Module) -> set[str]:
    """The spectral modules module ``name`` imports at its top (``from spectral.x import y``:
    ``spectral.x``, or ``spectral.x.y`` where that is a module; relative ones resolved)."""
    package = name if module_path(name).name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "spectral")
        elif isinstance(node, ast.ImportFrom) and _is_ours(node):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.add(sub if _is_module(sub) else base)
    return out


@cache
def runtime_modules(framework: str) -> tuple[str, ...]:
    """The modules a vendored config of ``framework`` copies, dependencies first.

    Every module of the framework's :data:`RUNTIME_PACKAGES` and, transitively, every
    spectral module they import (spectral.scaling, spectral.patterns, ...), read with
    :mod:`ast` (nothing is imported: writing a config must not import torch). Ordered so
    that each module comes after the modules it imports, ties broken by name, so the
    vendored file is the same bytes on every run; a package ``__init__`` that only
    re-exports (nothing left once its imports go) is left out.
    """
    todo = [m for package in RUNTIME_PACKAGES[framework] for m in package_modules(package)]
    deps: dict[str, set[str]] = {}
    empty: set[str] = set()
    while todo:
        name = todo.pop()
        if name in deps:
            continue
        source = module_path(name).read_text(encoding="utf-8")
        tree = ast.parse(source)
        deps[name] = spectral_imports(name, tree)
        if not _split(name, source, tree)[1]:
            empty.add(name)
        todo += sorted(deps[name] - deps.keys())
    order = _topological(deps)
    return tuple(m for m in order if m not in empty)


def _topological(deps: dict[str, set[str]]) -> list[str]:
    """Kahn's order of ``deps`` (module -> the modules it imports), the smallest name first
    among those ready."""
    import heapq

    waiting = {m: set(d) for m, d in deps.items()}
    users: dict[str, list[str]] = {m: [] for m in deps}
    for m, d in deps.items():
        for dep in d:
            users[dep].append(m)
    ready = [m for m, d in waiting.items() if not d]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        m = heapq.heappop(ready)
        order.append(m)
        for user in users[m]:
            waiting[user].discard(m)
            if not waiting[user]:
                heapq.heappush(ready, user)
    if len(order) != len(deps):
        stuck = sorted(m for m in deps if m not in order)
        raise VendorError(f"the runtime modules import one another in a circle: {', '.join(stuck)}")
    return order
