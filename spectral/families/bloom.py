"""The ``bloom`` family: Hugging Face BLOOM."""

from __future__ import annotations

from spectral.families.adapter import make_adapter
from spectral.families.falcon import FALCON
from spectral.patterns import ANCHOR

__all__ = ["BLOOM"]

# BLOOM: Falcon's names, plus a LayerNorm on the embedding output (word_embeddings_layernorm)
# that would normalise alpha_in away: h_0 is that norm's output, so alpha_in scales it.
# Its ALiBi slopes 2^(-8i/heads) take the same spread of values at every head count (the
# share of heads with a slope in any range stays put as the heads grow with the width);
# tests/families/test_model_classes.py measures BLOOM's slopes (and Falcon's with alibi=True).
BLOOM = make_adapter(
    FALCON,
    name="bloom",  # Hugging Face BLOOM
    detect=r"word_embeddings_layernorm$",
    input=(r"word_embeddings_layernorm$",),
    roles=(
        (r"word_embeddings_layernorm\.(weight|bias)$", "input_bias"),
        *((pattern.removeprefix(ANCHOR), role) for pattern, role in FALCON.roles),
    ),
)
