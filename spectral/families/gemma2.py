"""The ``gemma2`` family: Hugging Face Gemma2, Gemma3 (text)."""

from __future__ import annotations

from spectral.families.adapter import make_adapter
from spectral.families.gemma import GEMMA
from spectral.families.olmo2 import OLMO2

__all__ = ["GEMMA2"]

# Gemma2 and Gemma3 add h + post_norm(f(pre_norm(h))): OLMo2's branch ends, Gemma's
# embedding scale and norms. Gemma2's soft-capping (tanh(x / c) * c on the logits and on the
# attention scores, c fixed) is accepted: under muP both are Theta(1) at every width, so
# the cap bends them the same way at every width (tests/families/test_model_classes.py measures the
# capped logits' slopes).
GEMMA2 = make_adapter(
    OLMO2,
    name="gemma2",  # Hugging Face Gemma2, Gemma3 (text)
    detect=r"layers\.\d+\.pre_feedforward_layernorm$",
    input_scale=GEMMA.input_scale,
    norm_offset=GEMMA.norm_offset,
)
