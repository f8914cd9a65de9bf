"""One error root: every exception class lives in spectral/errors.py and derives from
SpectralError; the runtime raises no bare builtin; a user's ``except ValueError`` (or
``TypeError``, ``RuntimeError``, ``ImportError``) keeps catching what it caught before.

The source checks parse every module with ``ast`` (no import), like tests/test_layers.py.
"""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import pytest

import spectral.errors as errors
from spectral.errors import (
    ConfigError,
    ConfigStateError,
    ConfigTypeError,
    InternalError,
    MissingDependencyError,
    SpectralError,
    UnsupportedModelError,
    VendorError,
)

ROOT = Path(__file__).resolve().parent.parent

RUNTIME = ("spectral/torch", "spectral/jax", "spectral/families", "spectral/patterns.py",
           "spectral/scaling.py")
"""Where no builtin exception is raised bare: the runtime a generated config runs."""

BARE = ("ValueError", "TypeError", "RuntimeError", "ImportError")

BUILTIN_EXCEPTIONS = {
    name for name, obj in vars(builtins).items()
    if isinstance(obj, type) and issubclass(obj, BaseException)
}


def _files(*roots: str) -> list[Path]:
    out: list[Path] = []
    for root in roots:
        path = ROOT / root
        out += [path] if path.suffix == ".py" else sorted(path.rglob("*.py"))
    return out


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _bare_raises(paths: list[Path]) -> list[str]:
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and node.exc is not None:
                if _name(node.exc) in BARE:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {_name(node.exc)}")
    return sorted(found)


def _exception_classes(paths: list[Path]) -> dict[str, list[str]]:
    """Class name -> where it is defined, for every class deriving (through any chain of
    classes defined in ``paths``) from a builtin exception."""
    classes: list[tuple[str, list[str], str]] = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = [b for b in map(_name, node.bases) if b]
                classes.append((node.name, bases, f"{path.relative_to(ROOT)}:{node.lineno}"))
    known = set(BUILTIN_EXCEPTIONS)
    grew = True
    while grew:  # a class of a class of an exception is one too
        grew = False
        for name, bases, _ in classes:
            if name not in known and known.intersection(bases):
                known.add(name)
                grew = True
    out: dict[str, list[str]] = {}
    for name, bases, where in classes:
        if known.intersection(bases):
            out.setdefault(name, []).append(where)
    return out


def test_the_runtime_raises_no_bare_builtin():
    assert _bare_raises(_files(*RUNTIME)) == []


def test_the_source_check_finds_a_bare_raise(tmp_path, monkeypatch):
    """The check above sees what it looks for (a test that cannot fail proves nothing)."""
    module = tmp_path / "m.py"
    module.write_text(
        "def f(x):\n"
        "    if x:\n"
        "        raise ValueError('no')\n"
        "    raise TypeError\n"
        "class E(KeyError): pass\n"
        "class F(E): pass\n"
    )
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    assert _bare_raises([module]) == ["m.py:3: ValueError", "m.py:4: TypeError"]
    assert _exception_classes([module]) == {"E": ["m.py:5"], "F": ["m.py:6"]}


def test_every_exception_class_is_defined_in_errors():
    where = _exception_classes(_files("spectral", "optimizers"))
    outside = {
        name: places
        for name, places in where.items()
        if any(not place.startswith("spectral/errors.py:") for place in places)
    }
    assert outside == {}
    assert {"ConfigError", "UnsupportedModelError", "VendorError"} <= set(where)


def test_every_class_of_errors_derives_from_the_root():
    """All but the two BaseExceptions that unwind past ``except Exception`` and never leave
    their block: the alarm's and SIGTERM's (spectral check's temporary folder)."""
    classes = {
        name: obj for name, obj in vars(errors).items()
        if isinstance(obj, type) and issubclass(obj, BaseException)
        and obj.__module__ == errors.__name__
    }
    assert {name for name, obj in classes.items() if not issubclass(obj, SpectralError)} == {
        "_Expired",
        "Terminated",
    }
    assert set(errors.__all__) - {"first_line"} == {n for n in classes if not n.startswith("_")}


@pytest.mark.parametrize(
    ("cls", "builtin"),
    [
        (ConfigError, ValueError),
        (ConfigTypeError, TypeError),
        (ConfigTypeError, ConfigError),
        (ConfigStateError, RuntimeError),
        (ConfigStateError, ConfigError),
        (UnsupportedModelError, ValueError),
        (MissingDependencyError, ImportError),
        (InternalError, RuntimeError),
        (VendorError, InternalError),
    ],
)
def test_each_kind_is_also_the_builtin_users_caught(cls, builtin):
    assert issubclass(cls, SpectralError) and issubclass(cls, builtin)


# --------------------------------------------------------------------------------------
# value level: what the runtime raises, caught both ways
# --------------------------------------------------------------------------------------


def test_a_bad_size_or_base_value_is_a_config_error():
    from spectral.scaling import BaseValues, ratios, scale_rules

    with pytest.raises(ValueError, match=r"^width must be a positive integer up to 2\*\*53, got 0$") as bad:
        ratios(0, 2, 64, 2)
    assert type(bad.value) is ConfigError
    with pytest.raises(TypeError, match="^depth must be a positive integer, got '2'$") as bad:
        ratios(64, "2", 64, 2)
    assert type(bad.value) is ConfigTypeError
    rules = {"hidden_weight": {hp: (0.0, 0.0) for hp in ("multiplier", "init_var", "lr", "weight_decay")}}
    with pytest.raises(SpectralError, match="^lr: unknown key"):
        scale_rules(
            {"hidden_weight": "adamw"}, rules, 64, 2, 64, 2, BaseValues(lr={"hiden_weight": 1.0})
        )


def test_patterns_bad_and_unplaced():
    from spectral.patterns import checked_pattern, role_of

    with pytest.raises(ValueError, match=r"^patterns: pattern '\(\(' does not compile") as bad:
        checked_pattern("((", "patterns")
    assert type(bad.value) is ConfigError
    with pytest.raises(TypeError, match="^patterns: a pattern must be a string, got 3$") as bad:
        checked_pattern(3, "patterns")
    assert type(bad.value) is ConfigTypeError
    with pytest.raises(ValueError, match=r"^parameter 'x\.w' matches no role pattern") as bad:
        role_of("x.w", [("^y", "hidden_weight")])
    assert type(bad.value) is UnsupportedModelError


torch_only = pytest.mark.skipif(
    not __import__("importlib").util.find_spec("torch"), reason="needs torch"
)


@torch_only
def test_torch_bad_adapter_is_both_spectral_and_builtin():
    from spectral.torch.model.classify import as_adapter

    with pytest.raises(SpectralError, match="^no adapter 'nosuchfamily'; known: gpt2, "):
        as_adapter("nosuchfamily")
    with pytest.raises(ValueError, match="^no adapter 'nosuchfamily'") as bad:
        as_adapter("nosuchfamily")
    assert type(bad.value) is ConfigError
    with pytest.raises(TypeError, match="^adapter must be an Adapter, a name or a dict") as bad:
        as_adapter(3)
    assert type(bad.value) is ConfigTypeError
    with pytest.raises(ValueError, match="^adapter: ") as bad:
        as_adapter({"no_such_field": 1})
    assert type(bad.value) is ConfigError


@torch_only
def test_torch_unplaced_parameters_and_set_base_shapes():
    from torch import nn

    from spectral.torch.model.placement import place
    from spectral.torch.model.shapes import record_base_shapes

    model = nn.Sequential(nn.Linear(4, 4))
    with pytest.raises(ValueError, match=r"^2 parameter\(s\) match no role pattern") as bad:
        place(model, adapter={"input": [], "branches": [], "output": []}).roles()
    assert type(bad.value) is UnsupportedModelError
    with pytest.raises(ValueError, match="^set_base_shapes: pass exactly one of") as bad:
        record_base_shapes(model)
    assert type(bad.value) is ConfigError
    with pytest.raises(TypeError, match="^factory must be callable, got 3$") as bad:
        record_base_shapes(model, factory=3)
    assert type(bad.value) is ConfigTypeError


@torch_only
def test_torch_optimizer_misuse_keeps_its_builtin():
    import torch

    from spectral.torch.optim.composite import CompositeOptimizer

    with pytest.raises(ValueError, match="^CompositeOptimizer needs at least one optimizer$") as bad:
        CompositeOptimizer({}, width=64, depth=2)
    assert type(bad.value) is ConfigError
    p = torch.nn.Parameter(torch.zeros(2))
    sgd = torch.optim.SGD([{"params": [p], "rule_lr": 0.1}], lr=0.1)
    opt = CompositeOptimizer({"sgd": sgd}, width=64, depth=2)
    with pytest.raises(RuntimeError, match="^add the parameters to the model") as bad:
        opt.add_param_group({"params": [torch.nn.Parameter(torch.zeros(2))]})
    assert type(bad.value) is ConfigStateError
    with pytest.raises(TypeError, match="^factor must be a number, got 'x'$") as bad:
        opt.set_lr_factor("x")
    assert type(bad.value) is ConfigTypeError


def test_the_cli_shows_a_bug_of_spectrals_with_its_traceback(monkeypatch, capsys):
    """A user's mistake is one line (exit 2); an InternalError is not caught."""
    import spectral.cli as cli
    import spectral.cli.derive as handlers  # the module COMMANDS["list"] runs from

    def mistaken(args):
        raise ConfigError("no adapter 'x'; known: gpt2")

    def broken(args):
        raise VendorError("spectral.x: an aliased import of spectral cannot be vendored")

    monkeypatch.setattr(handlers, "run_list", mistaken)
    assert cli.main(["list"]) == 2
    assert capsys.readouterr().err == "error: no adapter 'x'; known: gpt2\n"
    monkeypatch.setattr(handlers, "run_list", broken)
    with pytest.raises(VendorError, match="cannot be vendored"):
        cli.main(["list"])


def test_jax_bad_adapter_is_both_spectral_and_builtin():
    pytest.importorskip("jax")
    pytest.importorskip("optax")
    from spectral.jax.labels import as_adapter

    with pytest.raises(ValueError, match="^no adapter 'nosuchfamily'; known: ") as bad:
        as_adapter("nosuchfamily", [])
    assert type(bad.value) is ConfigError
    with pytest.raises(TypeError, match="^adapter must be an Adapter, a name or a dict") as bad:
        as_adapter(3, [])
    assert type(bad.value) is ConfigTypeError


@torch_only
@pytest.mark.parametrize("vendor", [False, True])
def test_both_forms_of_a_config_raise_the_roots_kinds(tmp_path, vendor):
    """The standalone (--vendor) file carries errors.py: its own classes, the same tree."""
    from torch import nn

    from spectral.codegen import load_generated

    cfg = load_generated("adamw", base_width=64, base_depth=2, folder=tmp_path, vendor=vendor)
    with pytest.raises(ValueError, match="^no adapter 'nosuchfamily'; known: gpt2") as bad:
        cfg.apply_multipliers(nn.Linear(4, 4), 64, 2, adapter="nosuchfamily")
    kind = type(bad.value)
    assert kind.__name__ == "ConfigError"
    if vendor:
        assert kind.__module__ == cfg.__name__ and kind is not ConfigError
        assert isinstance(bad.value, cfg.SpectralError)
    else:
        assert kind is ConfigError
