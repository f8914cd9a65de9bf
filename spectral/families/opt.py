"""The ``opt`` family: Hugging Face OPT."""

from __future__ import annotations

from spectral.families.adapter import make_adapter

__all__ = ["OPT"]

OPT = make_adapter(
    name="opt",  # Hugging Face OPT
    detect=r"layers\.\d+\.self_attn\.out_proj$",
    roles=(
        (r"embed_tokens\.weight$", "input_weight"),
        (r"embed_positions\.weight$", "input_weight"),
        # project_in / project_out (word_embed_proj_dim != hidden_size, as in OPT-350m)
        # map between the embedding width and the model width; both grow with the width,
        # so they are width-by-width matrices: hidden_weight. They sit outside every
        # residual branch, so a depth factor in hidden_weight's rules (SGD's lr and weight
        # decay, AdamW's and Shampoo's eps) does not belong to them: exact at the base
        # depth; away from it, give them your own role with patterns= if that matters.
        (r"decoder\.project_(in|out)\.weight$", "hidden_weight"),
        (r"layers\.\d+\.\w*layer_norm\.(weight|bias)$", "hidden_bias"),
        (r"layers\.\d+\.(self_attn\.\w+|fc[12])\.weight$", "hidden_weight"),
        (r"layers\.\d+\.(self_attn\.\w+|fc[12])\.bias$", "hidden_bias"),
        (r"final_layer_norm\.(weight|bias)$", "input_bias"),
        (r"lm_head\.weight$", "output_weight"),
    ),
    # h_0 = project_in(embed_tokens(x)) + embed_positions(x); project_in is linear with
    # no bias, so scaling both embeddings scales h_0.
    input=(r"embed_tokens$", r"embed_positions$"),
    branches=(r"layers\.\d+\.self_attn\.out_proj$", r"layers\.\d+\.fc2$"),
    output=(r"lm_head$",),
    final=r"decoder\.final_layer_norm$",  # not layers.N.final_layer_norm
)
