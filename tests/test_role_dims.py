"""One definition of which dimensions grow per role (issue 47, item 4).

``spectral/engine/dims.py`` holds it; the engine's Theta dimensions, the runtime's shape
check, the hooks' width -> fixed roles and the verdict's fan-in/fan-out tables are read
from it. This test parses every module of the package and fails on any other literal table
that maps role names to whether a dimension grows (booleans or pairs of booleans).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from spectral.engine.dims import GROWS
from spectral.engine.roles import ALL_ROLES

ROOT = Path(__file__).resolve().parent.parent
ROLE_NAMES = set(GROWS)


def _bools(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, bool)
    if isinstance(node, ast.Tuple):
        return bool(node.elts) and all(_bools(e) for e in node.elts)
    return False


def _role_tables(tree: ast.AST) -> list[int]:
    """Lines of dict literals keyed by two or more role names whose values are booleans."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict) or not node.keys:
            continue
        keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
        roles = [k for k in keys if k in ROLE_NAMES]
        if len(roles) >= 2 and all(_bools(v) for v in node.values):
            found.append(node.lineno)
    return found


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_no_other_module_defines_which_dimensions_grow():
    others = {}
    for folder in ("spectral", "optimizers"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ROOT / "spectral" / "engine" / "dims.py":
                continue
            lines = _role_tables(ast.parse(path.read_text(encoding="utf-8")))
            if lines:
                others[str(path.relative_to(ROOT))] = lines
    assert others == {}, f"role-dimension tables outside spectral/engine/dims.py: {others}"


def test_the_finder_finds_a_table():
    """The scan above can fail: it finds a table of the old shape."""
    source = 'FAN = {"input_weight": False, "hidden_weight": True}\nX = {"a": 1}\n'
    assert _role_tables(ast.parse(source)) == [1]


def test_the_engine_roles_are_the_table():
    for role in ALL_ROLES:
        out_grows, in_grows = GROWS[role.name]
        assert (str(role.n_out), str(role.n_in)) == (
            "n" if out_grows else "1",
            "n" if in_grows else "1",
        ), role.name
    assert set(GROWS) == {r.name for r in ALL_ROLES}
