"""The runtime modules a vendored config copies: derived from the packages' sources.

:func:`spectral.codegen.vendor.runtime_modules` walks spectral.torch and spectral.families
(torch) or spectral.jax (jax) and follows their spectral imports, without importing them;
these tests hold it to covering every module, in an order where each comes after what it
imports, and to writing the same bytes whatever the hash seed.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

from spectral.codegen import TORCH_RUNTIME
from spectral.codegen.jax import JAX_RUNTIME
from spectral.codegen.vendor import (
    RUNTIME_PACKAGES,
    VendorError,
    _split,
    _topological,
    module_path,
    package_modules,
    runtime_modules,
    spectral_imports,
)

BASE = ["--base-width", "64", "--base-depth", "2"]


def _tree(name: str) -> ast.Module:
    return ast.parse(module_path(name).read_text(encoding="utf-8"))


def _reexport_only(name: str) -> bool:
    source = module_path(name).read_text(encoding="utf-8")
    return _split(name, source)[1] == ""


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_runtime_lists_cover_every_module_after_what_it_imports(framework):
    modules = runtime_modules(framework)
    assert modules == (TORCH_RUNTIME if framework == "torch" else JAX_RUNTIME)
    assert len(set(modules)) == len(modules)
    # every module of the runtime packages is copied, or has nothing to copy (an __init__
    # that only re-exports, or only a docstring)
    packaged = [m for p in RUNTIME_PACKAGES[framework] for m in package_modules(p)]
    left_out = [m for m in packaged if m not in modules]
    assert left_out and all(_reexport_only(m) for m in left_out)
    # what they import from spectral comes along: the shared base modules
    assert {"spectral.scaling", "spectral.patterns", "spectral.optimizers.entry"} <= set(modules)
    # each module after every module it imports (through a re-export-only one: after what
    # that one imports)
    place = {m: i for i, m in enumerate(modules)}
    for m in modules:
        todo = list(spectral_imports(m, _tree(m)))
        while todo:
            dep = todo.pop()
            if dep in place:
                assert place[dep] < place[m], f"{m} comes before {dep}, which it imports"
            else:
                assert _reexport_only(dep), f"{m} imports {dep}, which is not copied"
                todo += spectral_imports(dep, _tree(dep))


def test_the_torch_list_holds_the_packages_and_the_family_registry_last_of_families():
    modules = TORCH_RUNTIME
    families = [m for m in modules if m.startswith("spectral.families.")]
    assert len(families) == len(package_modules("spectral.families")) - 1  # without __init__
    # the registry imports every family: it comes after all of them, before classify
    assert modules.index("spectral.families") > max(modules.index(f) for f in families)
    assert modules.index("spectral.families") < modules.index("spectral.torch.model.classify")
    assert modules[-1] != "spectral.torch"  # re-exports only: nothing of it is copied
    assert "spectral.torch" not in modules and "spectral.torch.apply" not in modules
    assert "spectral.torch.optim.torchtitan" in modules
    # the JAX runtime reads the families (their registry, not spectral.families, whose
    # ADAPTERS would share the vendored namespace with the JAX runtime's own)
    families_jax = {m for m in JAX_RUNTIME if m.startswith("spectral.families.")}
    assert "spectral.families.registry" in families_jax and "spectral.families" not in JAX_RUNTIME
    assert families_jax == set(families) | {"spectral.families.registry"} - {"spectral.families"}
    assert set(JAX_RUNTIME) - families_jax == {
        "spectral.engine.ties",
        "spectral.errors",
        "spectral.scaling",
        "spectral.patterns",
        "spectral.optimizers.entry",
        "spectral.jax.labels",
        "spectral.jax.init",
        "spectral.jax.transforms",
        "spectral.jax.rules",
        "spectral.jax.optim",
        "spectral.jax.config",
    }


@pytest.mark.parametrize(
    # torch: seconds on the 2-core CPU (the larger runtime), out of pytest -m "not slow"
    "framework", [pytest.param("torch", marks=pytest.mark.slow), "jax"]
)
def test_runtime_modules_import_spectral_only_at_their_top(framework):
    """An import inside a function would stay in the vendored file and need spectral."""
    nested = []
    for m in runtime_modules(framework):
        tree = _tree(m)
        top = set(map(id, tree.body))
        for node in ast.walk(tree):
            if id(node) in top or not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
            )
            if getattr(node, "level", 0) or any(n.split(".")[0] == "spectral" for n in names):
                nested.append(f"{m}:{node.lineno}")
    assert nested == []


def test_topological_order_breaks_ties_by_name_and_refuses_a_circle():
    deps = {"c": set(), "b": {"c"}, "a": {"c"}, "d": {"a", "b"}, "e": set()}
    assert _topological(deps) == ["c", "a", "b", "d", "e"]
    with pytest.raises(VendorError, match="circle: a, b"):
        _topological({"a": {"b"}, "b": {"a"}, "c": set()})


def _codegen(*args: str, seed: str) -> bytes:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run(
        [sys.executable, "-m", "spectral", "codegen", *args],
        capture_output=True,
        env=env,
        check=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    return done.stdout


@pytest.mark.parametrize("framework", ["torch", "jax"])
@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_vendored_module_is_the_same_bytes_under_any_hash_seed(framework):
    args = ("adamw", *BASE, "--framework", framework, "--vendor")
    first = _codegen(*args, seed="0")
    assert first == _codegen(*args, seed="4242")
    text = first.decode()
    order = [line.split()[3] for line in text.splitlines() if line.startswith("# ---- from ")]
    assert tuple(order) == runtime_modules(framework)
    imported = [
        (n.module or "") if isinstance(n, ast.ImportFrom) else n.names[0].name
        for n in ast.walk(ast.parse(text))
        if isinstance(n, (ast.Import, ast.ImportFrom))
    ]
    assert imported and not [m for m in imported if m.split(".")[0] == "spectral"]


def test_no_target_imports_another():
    """Each target builds on the shared context (and the torch-based ones on the torch
    records), never on another target; what renders a JAX module needs no torch target."""
    targets = {
        "spectral.codegen.torch",
        "spectral.codegen.jax",
        "spectral.codegen.torchtitan",
        "spectral.codegen.megatron",
    }
    importers = {*targets, "spectral.coordcheck.jax"}
    found = {}
    for name in sorted(importers):
        tree = _tree(name)
        package = name.rpartition(".")[0]
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{parent}.{base}" if base else parent
                imported.add(base)
        found[name] = sorted(imported & (targets - {name}))
    assert found == {name: [] for name in sorted(importers)} | {
        "spectral.coordcheck.jax": ["spectral.codegen.jax"]
    }
