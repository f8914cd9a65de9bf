"""spectral.patterns: the name anchor and the first-match loop both runtimes' families use."""

from __future__ import annotations

import importlib
import re

import pytest

from spectral.patterns import ANCHOR, anchored, role_of, unplaced_error


def test_anchored_puts_the_anchor_in_front_of_every_pattern():
    assert anchored(r"wte\.weight$") == r"(^|\.)wte\.weight$"
    assert anchored((r"a$", r"b$")) == (r"(^|\.)a$", r"(^|\.)b$")
    assert anchored(((r"a$", "input_weight"),)) == ((r"(^|\.)a$", "input_weight"),)
    # a pattern that says where it starts, and the empty pattern (no module), are kept
    assert anchored(r"^(.*\.)?norm$") == r"^(.*\.)?norm$"
    assert anchored("") == ""
    for name in ("wte.weight", "module.wte.weight", "_orig_mod.transformer.wte.weight"):
        assert re.search(anchored(r"wte\.weight$"), name)
    assert not re.search(anchored(r"wte\.weight$"), "my_wte.weight")


def test_the_first_matching_pattern_wins():
    pairs = ((r"\.norm\.weight$", "hidden_bias"), (r"weight$", "hidden_weight"))
    assert role_of("layers.0.norm.weight", pairs) == "hidden_bias"
    assert role_of("layers.0.fc.weight", pairs) == "hidden_weight"
    # an exact name works as a pattern even where it is no valid regular expression
    assert role_of("a[0", (("a[0", "input_bias"),)) == "input_bias"


def test_no_match_and_an_unknown_role_are_errors_that_name_them():
    class Leaf:
        shape = (3, 4)

    with pytest.raises(ValueError, match=r"'fc\.weight' \(shape \(3, 4\)\) matches no role"):
        role_of("fc.weight", ((r"bias$", "hidden_bias"),), Leaf())
    with pytest.raises(ValueError, match="unknown role 'hidden'"):
        role_of("fc.weight", ((r"weight$", "hidden"),))
    assert str(unplaced_error(["a (2,)", "b (3,)"])).startswith(
        "2 parameter(s) match no role pattern: a (2,); b (3,). "
    )


@pytest.mark.parametrize(
    ("module", "fields"),
    [
        ("spectral.families", ("detect", "input", "branches", "output", "final", "embeddings")),
        ("spectral.jax.labels", ("detect", "embeddings")),
    ],
)
def test_every_known_family_pattern_is_anchored(module, fields):
    """Every name pattern of every known family starts at a dot or at the start of the name
    (or says where it starts with ^), so a wrapper's prefix never hides a parameter."""
    pytest.importorskip(module.split(".")[1])
    families = importlib.import_module(module).ADAPTERS
    unanchored = [
        (family.name, pattern)
        for family in families
        for pattern in (
            *(p for field in fields for p in _as_tuple(getattr(family, field))),
            *(p for p, _ in family.roles),
        )
        if pattern and not pattern.startswith((ANCHOR, "^"))
    ]
    assert not unanchored


def _as_tuple(value: str | tuple[str, ...]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else value
