"""One reading of a model (issue 47, item 1): the public binding places, everything below
takes the Placement as a value, and the Placement lives on the model as one attribute.

The source tests parse the package: a function under ``spectral/torch`` other than the
public binding (``spectral/torch/config.py``) and ``place`` itself that takes ``adapter``
or ``patterns`` would read the model a second way (a ``.keywords`` read or write, a hidden
contract with a ``functools.partial`` hook, is tests/torch/test_hooks_typed.py's over all of
``spectral/``); a family or an ``Adapter`` class defined
in ``spectral/jax`` would be a second family table.
"""

from __future__ import annotations

import ast
import copy
import io
import pickle
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("pytorch_optimizer")

from spectral.codegen import load_generated  # noqa: E402
from spectral.torch.model.placement import ATTRIBUTE, Placement, place  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "spectral" / "torch"
READERS = {
    ("model/placement.py", "place"): "the one function that reads a model's arguments",
    ("model/placement.py", "placed_alike"): "passes a placement's own reading on",
    ("model/classify.py", "classify"): "a parameter name's role: no model is read",
}
"""(module, function) -> why it may take patterns or adapter outside the public binding."""


def _functions(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            names = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
            yield node.name, names


def test_no_internal_function_reads_the_model_from_adapter_or_patterns():
    found = []
    for path in sorted(RUNTIME.rglob("*.py")):
        where = path.relative_to(RUNTIME).as_posix()
        if where == "config.py":  # the public binding
            continue
        for name, params in _functions(path):
            if params & {"adapter", "patterns"} and (where, name) not in READERS:
                found.append(f"{where}:{name}")
    assert found == []


def test_the_public_binding_places_every_model_it_is_given():
    """Each Config method that takes a model takes adapter= (and patterns= where roles are
    read) and places it; a test that would fail if a method forgot to."""
    tree = ast.parse((RUNTIME / "config.py").read_text(encoding="utf-8"))
    methods = [
        node
        for cls in tree.body
        if isinstance(cls, ast.ClassDef) and cls.name == "Config"
        for node in cls.body
        if isinstance(node, ast.FunctionDef)
    ]
    assert len(methods) == 8
    for method in methods:
        calls = {
            n.func.id
            for n in ast.walk(method)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        }
        assert "place" in calls, method.name


def test_jax_defines_no_adapter_and_no_family():
    """The JAX runtime reads spectral.families through its path dialect: no Adapter class,
    no family table of its own (a literal Adapter(...) with a name, or a FAMILIES list)."""
    found = []
    for path in sorted((ROOT / "spectral" / "jax").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and "Adapter" in node.name:
                found.append(f"{path.name}: class {node.name}")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "Adapter"
                and any(k.arg == "name" for k in node.keywords)
            ):
                found.append(f"{path.name}:{node.lineno}: a family written out")
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id in ("ADAPTERS", "FAMILIES")
                and isinstance(node.value, (ast.List, ast.Tuple))
                and any(isinstance(e, ast.Call) for e in node.value.elts)
                for t in node.targets
            ):
                found.append(f"{path.name}:{node.lineno}: a family table")
    assert found == []


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    return load_generated(
        "adamw", base_width=32, base_depth=2, folder=tmp_path_factory.mktemp("cfg")
    )


def _tiny():
    from tests.torch.test_own_law import TinyLM

    return TinyLM(32, 2)


def test_the_placement_is_the_models_attribute(cfg):
    model = _tiny()
    placement = place(model, cfg.CONFIG)
    assert model.__dict__[ATTRIBUTE] is placement and placement.model is model
    assert place(model, cfg.CONFIG) is placement  # read again: the attribute
    model.readout.weight = torch.nn.Parameter(model.readout.weight.detach().clone())
    again = place(model, cfg.CONFIG)  # a parameter swapped: placed again, replaced
    assert again is not placement and model.__dict__[ATTRIBUTE] is again


def test_a_copy_or_a_pickle_of_the_model_carries_no_placement(cfg):
    """A deep copy is another model (its own parameters): its attribute is None, and it is
    placed when first used; the model pickles (torch.save) though a placement holds a weak
    reference."""
    model = _tiny()
    cfg.apply_multipliers(model, 32, 2)
    twin = copy.deepcopy(model)
    assert twin.__dict__[ATTRIBUTE] is None
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert loaded.__dict__[ATTRIBUTE] is None
    assert pickle.loads(pickle.dumps(place(model, cfg.CONFIG))) is None
    placed = place(twin, cfg.CONFIG)
    assert isinstance(placed, Placement) and placed.model is twin
    assert placed.roles() == place(model, cfg.CONFIG).roles()


def test_the_record_of_growing_dimensions_is_the_models_attribute(cfg):
    """set_base_shapes writes its record on the model (no side table, no global counter):
    a plain dict that a deep copy and a pickle carry (it names no spectral class, which a
    vendored config's module would be); a new record with other facts places the model
    again, the same facts keep the placement."""
    from tests.torch.test_own_law import TinyLM

    from spectral.torch.model.shapes import BASE_SHAPES

    model = _tiny()
    cfg.set_base_shapes(model, factory=lambda w: TinyLM(w, 2))
    record = model.__dict__[BASE_SHAPES]
    assert type(record) is dict and record["source"] == "set_base_shapes"
    assert record["dims"]["blocks.0.1.weight"] == (True, True)
    assert record["dims"]["readout.weight"] == (False, True)
    placement = place(model, cfg.CONFIG)
    assert copy.deepcopy(model).__dict__[BASE_SHAPES] == record
    assert pickle.loads(pickle.dumps(model)).__dict__[BASE_SHAPES] == record
    cfg.set_base_shapes(model, factory=lambda w: TinyLM(w, 2))  # the same facts
    assert place(model, cfg.CONFIG) is placement
    # other facts (the vocabulary said to grow): read again
    cfg.set_base_shapes(model, factory=lambda w: TinyLM(w, 2, vocab=w))
    assert place(model, cfg.CONFIG) is not placement
