"""The ``granite`` family: Hugging Face Granite (dense)."""

from __future__ import annotations

from spectral.families.adapter import make_adapter
from spectral.families.llama import LLAMA

__all__ = ["GRANITE"]

# Granite: Llama's names and its own norm class; its forward multiplies h_0 by
# embedding_multiplier, each branch by residual_multiplier and divides the logits by
# logits_scaling (IBM's own muP convention: real configs grow logits_scaling with the
# size). The hooks divide all three out, so the rules' multipliers are the whole factors;
# attention_multiplier scales the attention scores with the head dimension fixed, the same
# at every width.
GRANITE = make_adapter(
    LLAMA,
    name="granite",  # Hugging Face Granite (dense)
    detect_type=r"^GraniteRMSNorm$",
    config_scales=(
        ("input", "embedding_multiplier", 1),
        ("hidden", "residual_multiplier", 1),
        ("output", "logits_scaling", -1),
    ),
)
