"""Every family's tiny model traced: the structure equals what its adapter places (#38).

For every model class with a tiny builder in the tests (tests/models.py ``CASES``,
test_model_classes.py ``CLASSES``, test_families.py ``BUILD``), the structure traced from
one forward pass (spectral/torch/model/trace.py) puts alpha_in, alpha_hidden, alpha_out and
the final module where the family's adapter does: on the same module, or on one whose
output is the same tensor up to constants (GPT-2's ``drop`` for ``wte`` + ``wpe``, BERT's
``embeddings`` for its LayerNorm, a MoE block for its experts' sum), and counts as many
branches per layer.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import test_families  # noqa: E402
import test_model_classes  # noqa: E402
from models import CASES, sample  # noqa: E402
from spectral.torch.model.classify import as_adapter  # noqa: E402
from spectral.torch.model.trace import (  # noqa: E402
    structure_disagreements,
    trace_structure,
)

transformers.logging.set_verbosity_error()
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


def _cases() -> dict[str, tuple[Any, Any]]:
    """Name -> (build(width, depth), example batch or None)."""
    table: dict[str, tuple[Any, Any]] = {}
    for key, case in CASES.items():
        table[key] = (case.build, sample(case, batch=1) if case.images else None)
    for key, (build, batch) in test_model_classes.CLASSES.items():
        example = {k: v[:1] for k, v in batch().items() if k != "labels"}
        table[f"class-{key}"] = (build, example)
    for key, build in test_families.BUILD.items():
        table[f"family-{key}"] = (build, None)
    return table


CASES_TRACED = _cases()


@pytest.mark.parametrize("key", list(CASES_TRACED))  # ~0.15 s each on the 2-core CPU
def test_traced_structure_is_the_adapters(key):
    build, example = CASES_TRACED[key]
    torch.manual_seed(0)
    model = build(64, 2)
    family = as_adapter(None, model)
    assert family is not None and family.name != "traced"
    structure = trace_structure(model, example)
    assert structure_disagreements(model, family, structure) == []
    assert structure.branches_per_layer == family.branches_per_layer
    assert len(structure.branches) == 2 * family.branches_per_layer
    assert len(structure.output) == 1
