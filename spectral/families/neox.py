"""The ``neox`` family: Hugging Face GPT-NeoX (Pythia)."""

from __future__ import annotations

from spectral.families.adapter import make_adapter

__all__ = ["NEOX"]

NEOX = make_adapter(
    name="neox",  # Hugging Face GPT-NeoX (Pythia)
    detect=r"layers\.\d+\.attention\.dense$",
    roles=(
        (r"embed_in\.weight$", "input_weight"),
        (r"layers\.\d+\.\w*layernorm\.(weight|bias)$", "hidden_bias"),
        (r"layers\.\d+\.(attention|mlp)\.\w+\.weight$", "hidden_weight"),
        (r"layers\.\d+\.(attention|mlp)\.\w+\.bias$", "hidden_bias"),
        (r"final_layer_norm\.(weight|bias)$", "input_bias"),
        (r"(embed_out|lm_head)\.weight$", "output_weight"),
    ),
    input=(r"embed_in$",),
    # The parallel residual (use_parallel_residual=True) adds both branches to the same
    # stream, h + attn(ln1(h)) + mlp(ln2(h)): still two branches per layer, each scaled.
    branches=(
        r"layers\.\d+\.attention\.dense$",
        r"layers\.\d+\.mlp\.dense_4h_to_h$",
    ),
    output=(r"(embed_out|lm_head)$",),  # embed_out before transformers 5
    final=r"final_layer_norm$",
)
