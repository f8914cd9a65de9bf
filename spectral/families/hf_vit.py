"""The ``hf-vit`` family: the hf-vit family."""

from __future__ import annotations

from spectral.families.adapter import make_adapter

__all__ = ["HF_VIT"]

# Hugging Face ViT (transformers 5 names): the patch embedding is a Conv2d of fixed fan-in
# C * p * p (input_weight, drawn init_std / sqrt(fan_in)), cls_token and the position
# table are tables added into h_0 (the embeddings module's output); the classifier is the
# readout, its bias an output_bias.
HF_VIT = make_adapter(
    name="hf-vit",
    detect=r"layers\.\d+\.layernorm_before$",
    roles=(
        (r"embeddings\.(cls_token|position_embeddings)$", "input_weight"),
        (r"patch_embeddings\.projection\.weight$", "input_weight"),
        (r"patch_embeddings\.projection\.bias$", "input_bias"),
        (r"layers\.\d+\.layernorm_(before|after)\.(weight|bias)$", "hidden_bias"),
        (r"layers\.\d+\.(attention|mlp)\.\w+\.weight$", "hidden_weight"),
        (r"layers\.\d+\.(attention|mlp)\.\w+\.bias$", "hidden_bias"),
        (r"layernorm\.(weight|bias)$", "input_bias"),
        (r"classifier\.weight$", "output_weight"),
        (r"classifier\.bias$", "output_bias"),
    ),
    input=(r"embeddings$",),
    branches=(r"layers\.\d+\.attention\.o_proj$", r"layers\.\d+\.mlp\.fc2$"),
    output=(r"classifier$",),
    final=r"layernorm$",
    embeddings=(r"embeddings\.cls_token$", r"embeddings\.position_embeddings$"),
)
