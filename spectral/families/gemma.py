"""The ``gemma`` family: Hugging Face Gemma: Llama's names, its own norm class."""

from __future__ import annotations

from spectral.families.adapter import make_adapter
from spectral.families.llama import LLAMA

__all__ = ["GEMMA"]

# Gemma's forward multiplies the embedding output by sqrt(hidden_size) (the embedding
# module's embed_scale), which would make h_0 grow with the width; the alpha_in hook
# divides it out. Its RMSNorm computes x_hat * (1 + w), so init_ sets w = 0.
GEMMA = make_adapter(
    LLAMA,
    name="gemma",  # Hugging Face Gemma: Llama's names, its own norm class
    detect_type=r"^GemmaRMSNorm$",
    input_scale=("scalar_embed_scale", "embed_scale"),
    norm_offset=1.0,
)
