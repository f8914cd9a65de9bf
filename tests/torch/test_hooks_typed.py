"""A multiplier hook is a small typed object (issue 47, item 5): no module reads or writes
the keywords of a ``functools.partial``; the checks change a factor only through the hook's
own methods."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_nothing_reads_or_writes_a_hooks_keywords():
    found = []
    for path in sorted((ROOT / "spectral").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "keywords":
                # the expression reader's ast.Call.keywords is sympy-free parsing, not a hook
                if path.name != "expr.py":
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_the_hook_scales_and_restores():
    import torch

    from spectral.torch.apply.hooks import MultiplierHook

    hook = MultiplierHook(factor=0.5, layer="hidden", built_in=2.0, outside=1.0)
    out = torch.ones(3)
    assert torch.equal(hook(None, (), out), out * 0.25)
    with hook.scaled(0.0):
        assert torch.equal(hook(None, (), out), torch.zeros(3))
    assert hook.factor == 0.5 and hook.own_factor == 0.25 and hook.weight_factor == 0.25
    assert MultiplierHook(factor=2.0, layer="input", built_in=2.0)(None, (), out) is None
