"""``spectral codegen --vendor``: one standalone file from the runtime's own sources.

The runtime packages (:mod:`spectral.torch`, :mod:`spectral.jax`) are written so that their
modules can be laid end to end: each imports the others only at the top, by absolute name
(``from spectral.torch.hooks import apply_multipliers``), never under an alias, and no two of
them define the same top-level name. :func:`assemble` drops those intra-package imports
(and each module's docstring and ``__all__``), hoists the remaining top-level imports (the
standard library, torch, jax, optax) above everything, and concatenates the bodies in the
order given, so the vendored file runs exactly the code the importing form runs.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Sequence
from pathlib import Path

__all__ = ["VendorError", "assemble", "module_path"]


class VendorError(RuntimeError):
    """A runtime module breaks the rules that let it be vendored (a bug of spectral's)."""


def module_path(name: str) -> Path:
    """The source file of module ``name`` (found, not imported: torch is not needed)."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise VendorError(f"cannot find the source of {name}")
    return Path(spec.origin)


def _is_ours(node: ast.ImportFrom | ast.Import) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "spectral"
    return any(alias.name.split(".")[0] == "spectral" for alias in node.names)


def _split(name: str, source: str) -> tuple[list[str], str, set[str]]:
    """(import lines to hoist, the body without them, the top-level names it defines)."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    drop: set[int] = set()
    imports: list[str] = []
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
            imports.append(ast.unparse(node))
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            drop.update(span)
        else:
            defined.update(_names(node))
    body = "".join(line for n, line in enumerate(lines) if n not in drop)
    return imports, body.strip("\n"), defined


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


def assemble(modules: Sequence[str], tail: str, *, header: str) -> str:
    """``header``, the hoisted imports, every module's body in order, then ``tail``.

    ``tail`` is the importing form's config text with its ``from spectral...`` lines
    removed by the caller (the numbers and the bindings). Refuses a name defined twice.
    """
    hoisted: list[str] = []
    bodies: list[str] = []
    owner: dict[str, str] = {}
    for name in modules:
        imports, body, defined = _split(name, module_path(name).read_text(encoding="utf-8"))
        for line in imports:
            if line not in hoisted:
                hoisted.append(line)
        for symbol in sorted(defined):
            if symbol in owner:
                raise VendorError(f"{symbol} is defined in both {owner[symbol]} and {name}")
            owner[symbol] = name
        bodies.append(f"# ---- from {name} " + "-" * max(0, 80 - len(name)) + "\n\n" + body)
    futures = "from __future__ import annotations\n\n"
    parts = [header.rstrip("\n") + "\n\n" + futures + "\n".join(hoisted), *bodies, tail.strip("\n")]
    return "\n\n\n".join(parts) + "\n"
