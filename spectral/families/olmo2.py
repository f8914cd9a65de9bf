"""The ``olmo2`` family: Hugging Face OLMo2, OLMo3 (and Llama-named models with these post-norms)."""

from __future__ import annotations

from spectral.families.adapter import make_adapter
from spectral.families.llama import LLAMA

__all__ = ["OLMO2"]

# OLMo2 and OLMo3 add h + post_norm(f(h)) with no norm before the sublayer: a norm after
# o_proj / down_proj would normalise a multiplier placed there away, so alpha_hidden scales
# the post-norms' outputs and each branch adds alpha_hidden * f(h). Plain embeddings and
# x_hat * w norms.
OLMO2 = make_adapter(
    LLAMA,
    name="olmo2",  # Hugging Face OLMo2, OLMo3 (and Llama-named models with these post-norms)
    detect=r"layers\.\d+\.post_feedforward_layernorm$",
    branches=(
        r"layers\.\d+\.post_attention_layernorm$",
        r"layers\.\d+\.post_feedforward_layernorm$",
    ),
)
