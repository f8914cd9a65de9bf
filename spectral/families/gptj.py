"""The ``gptj`` family: the gptj family."""

from __future__ import annotations

from spectral.families.adapter import make_adapter

__all__ = ["GPTJ"]

# GPT-J: GPT-2's names with separate q/k/v/out projections, attention and MLP in parallel
# on ln_1, and a bias on the readout: output_bias.
GPTJ = make_adapter(
    name="gptj",
    detect=r"h\.\d+\.attn\.out_proj$",
    roles=(
        (r"wte\.weight$", "input_weight"),
        (r"h\.\d+\.ln_1\.(weight|bias)$", "hidden_bias"),
        (r"h\.\d+\.(attn|mlp)\.\w+\.weight$", "hidden_weight"),
        (r"h\.\d+\.(attn|mlp)\.\w+\.bias$", "hidden_bias"),
        (r"ln_f\.(weight|bias)$", "input_bias"),
        (r"lm_head\.weight$", "output_weight"),
        (r"lm_head\.bias$", "output_bias"),
    ),
    input=(r"wte$",),
    branches=(r"h\.\d+\.attn\.out_proj$", r"h\.\d+\.mlp\.fc_out$"),
    output=(r"lm_head$",),
    final=r"ln_f$",
)
