"""``spectral coord-check --model-factory ... --adapter ...``: a model no built-in adapter
knows, placed by the user's adapter (a Python object, a dict, a TOML or a JSON file).

The stand-in model has names no family uses (``lookup``, ``trunk.N.grow`` / ``shrink``,
``squash``, ``readout``) and lives in ``model.py``, which ``factory.py`` imports as a
sibling: the factory file's folder is on ``sys.path`` while it is imported.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from spectral.cli import main  # noqa: E402

MODEL = textwrap.dedent(
    '''
    """A residual MLP over tokens with names no built-in adapter knows."""
    import torch.nn.functional as F
    from torch import nn

    VOCAB = 40


    class Block(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.pre = nn.LayerNorm(width)
            self.grow = nn.Linear(width, 2 * width)
            self.shrink = nn.Linear(2 * width, width)

        def forward(self, h):
            return h + self.shrink(F.gelu(self.grow(self.pre(h))))


    class Oddball(nn.Module):
        def __init__(self, width, depth):
            super().__init__()
            self.lookup = nn.Embedding(VOCAB, width)
            self.trunk = nn.ModuleList(Block(width) for _ in range(depth))
            self.squash = nn.LayerNorm(width)
            self.readout = nn.Linear(width, VOCAB, bias=False)

        def forward(self, ids):
            h = self.lookup(ids)
            for block in self.trunk:
                h = block(h)
            return self.readout(self.squash(h))


    class Strided(Oddball):
        def forward(self, ids):
            h = self.lookup(ids).transpose(0, 1)
            return self.readout(h.view(-1, h.shape[-1]))  # a view of a non-contiguous tensor
    '''
)

FIELDS = {
    "name": "oddball",
    "input": [r"(^|\.)lookup$"],
    "branches": [r"(^|\.)trunk\.\d+$"],
    "output": [r"(^|\.)readout$"],
    "final": r"(^|\.)squash$",
    "branches_per_layer": 1,
    "roles": {
        r"(^|\.)lookup\.weight$": "input_weight",
        r"(^|\.)trunk\.\d+\.pre\.(weight|bias)$": "hidden_bias",
        r"(^|\.)trunk\.\d+\.\w+\.weight$": "hidden_weight",
        r"(^|\.)trunk\.\d+\.\w+\.bias$": "hidden_bias",
        r"(^|\.)squash\.(weight|bias)$": "input_bias",
        r"(^|\.)readout\.weight$": "output_weight",
    },
}

FACTORY = textwrap.dedent(
    f'''
    from model import Oddball, Strided  # a sibling module: the folder is on sys.path

    from spectral.torch import Adapter

    FIELDS = {FIELDS!r}
    ADAPTER = Adapter(**{{**FIELDS, "detect": "", "roles": tuple(FIELDS["roles"].items())}})
    NOT_AN_ADAPTER = [1, 2]


    def oddball(width, depth):
        return Oddball(width, depth)


    def strided(width, depth):
        return Strided(width, depth)
    '''
)

TOML = textwrap.dedent(
    """
    name = "oddball"
    input = ['(^|\\.)lookup$']
    branches = ['(^|\\.)trunk\\.\\d+$']
    output = ['(^|\\.)readout$']
    final = '(^|\\.)squash$'
    branches_per_layer = 1

    [roles]  # parameter-name pattern = role, the first match wins
    '(^|\\.)lookup\\.weight$' = "input_weight"
    '(^|\\.)trunk\\.\\d+\\.pre\\.(weight|bias)$' = "hidden_bias"
    '(^|\\.)trunk\\.\\d+\\.\\w+\\.weight$' = "hidden_weight"
    '(^|\\.)trunk\\.\\d+\\.\\w+\\.bias$' = "hidden_bias"
    '(^|\\.)squash\\.(weight|bias)$' = "input_bias"
    '(^|\\.)readout\\.weight$' = "output_weight"
    """
)

SMALL = ["--widths", "16,32", "--depths", "1,2", "--steps", "2", "--seeds", "1", "--quiet"]


@pytest.fixture
def folder(tmp_path, monkeypatch):
    # each test's factory imports its own model.py, not one an earlier test imported
    monkeypatch.delitem(sys.modules, "model", raising=False)
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "factory.py").write_text(FACTORY)
    (tmp_path / "adapter.toml").write_text(TOML)
    (tmp_path / "adapter.json").write_text(json.dumps(FIELDS))
    (tmp_path / "wrapped.json").write_text(json.dumps({"adapter": FIELDS}))
    return tmp_path


def _one_line_error(capsys, match: str) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert match in err, err
    return err


@pytest.mark.parametrize(
    "adapter",
    [
        "factory.py:ADAPTER",  # an Adapter
        "factory.py:FIELDS",  # a dict of its fields
        "adapter.toml",
        "adapter.json",
        "wrapped.json",  # the fields in an "adapter" table
    ],
)
@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_adapter_places_a_model_no_family_knows(folder, adapter, capsys):
    out = folder / "cc.json"
    argv = ["coord-check", "--model-factory", f"{folder}/factory.py:oddball"]
    assert main([*argv, "--adapter", f"{folder}/{adapter}", *SMALL, "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    got = data["config"]["adapter"]
    assert got["name"] == "oddball" and got["branches_per_layer"] == 1
    assert [list(pair) for pair in got["roles"]] == [list(p) for p in FIELDS["roles"].items()]
    assert data["h_metric"] == "final-norm input"
    assert "input of squash (the final norm)" in data["h_source"]
    assert {s["parameterization"] for s in data["slopes"]} == {"sp", "mup-k1", "mup"}
    capsys.readouterr()

    # without it no family claims the model, and its traced structure places it
    traced = folder / "traced.json"
    assert main([*argv, *SMALL, "--json", str(traced)]) == 0
    data = json.loads(traced.read_text())
    assert data["config"]["adapter"] is None  # none given: the trace found the structure
    assert "input of squash (the final norm)" in data["h_source"]
    assert {s["parameterization"] for s in data["slopes"]} == {"sp", "mup-k1", "mup"}


@pytest.mark.parametrize(
    ("write", "adapter", "match"),
    [
        (None, "factory.py:NOT_AN_ADAPTER", "expected an Adapter or a dict of its fields, got list"),
        (None, "factory.py:MISSING", "has no attribute 'MISSING'"),
        (None, "nowhere.toml", "nowhere.toml: no such file"),
        (("bad.json", "[1, 2]"), "bad.json", "expected an Adapter or a dict of its fields, got list"),
        (("bad.json", "{"), "bad.json", "cannot read it: not valid JSON (Expecting property name"),
        (("bad.toml", "name = "), "bad.toml", "cannot read it: invalid TOML: Invalid value"),
        (
            ("bad.json", json.dumps({**FIELDS, "output": ["("]})),
            "bad.json",
            "pattern '(' does not compile",
        ),
        (
            ("bad.json", json.dumps({**FIELDS, "roles": {"x": "hidden_matrix"}})),
            "bad.json",
            "maps to unknown role 'hidden_matrix'",
        ),
        (
            ("bad.json", json.dumps({k: v for k, v in FIELDS.items() if k != "branches"})),
            "bad.json",
            "no branches",
        ),
        (("bad.json", json.dumps({**FIELDS, "colour": "red"})), "bad.json", "colour"),
    ],
)
def test_bad_adapter_is_a_one_line_error(folder, capsys, write, adapter, match):
    if write is not None:
        (folder / write[0]).write_text(write[1])
    argv = ["coord-check", "--model-factory", f"{folder}/factory.py:oddball"]
    assert main([*argv, "--adapter", f"{folder}/{adapter}", *SMALL]) == 2
    err = _one_line_error(capsys, match)
    assert "--adapter" in err


def test_adapter_needs_a_model_factory(folder, capsys):
    assert main(["coord-check", "--adapter", f"{folder}/adapter.json", *SMALL]) == 2
    _one_line_error(capsys, "--adapter goes with --model-factory")


def test_error_in_the_models_forward_is_one_line_with_where(folder, capsys):
    argv = ["coord-check", "--model-factory", f"{folder}/factory.py:strided"]
    assert main([*argv, "--adapter", f"{folder}/adapter.json", *SMALL]) == 2
    err = _one_line_error(capsys, "the forward pass raised RuntimeError: view size is not")
    line = MODEL.splitlines().index(
        "        return self.readout(h.view(-1, h.shape[-1]))  # a view of a non-contiguous tensor"
    )
    assert f"(at {folder / 'model.py'}:{line + 1} in forward)" in err


def test_the_factory_folder_leaves_sys_path(folder):
    from spectral.cli.common import load_callable

    load_callable(f"{folder}/factory.py:oddball", option="--model-factory")
    assert str(folder) not in sys.path and str(Path(folder).resolve()) not in sys.path
