"""The ``mamba`` family: Hugging Face Mamba, Mamba2."""

from __future__ import annotations

from spectral.families.adapter import make_adapter

__all__ = ["MAMBA"]

# Hugging Face Mamba and Mamba2: one residual branch per layer, h + mixer(norm(h)), ending
# in out_proj. The mixer's x_proj (inner width -> time_step_rank + 2 * state_size) and
# dt_proj (time_step_rank -> inner width) keep one side fixed: their shapes, read from a
# twin at twice the width, give them the fixed-rank roles. A_log, D, dt_bias, dt_proj's
# bias and the depthwise conv1d are per-channel vectors (hidden_vector): init_ keeps the
# values Mamba draws for them (zero would stop every mixer).
MAMBA = make_adapter(
    name="mamba",  # Hugging Face Mamba, Mamba2
    detect=r"layers\.\d+\.mixer\.out_proj$",
    roles=(
        (r"embeddings\.weight$", "input_weight"),
        (
            r"layers\.\d+\.mixer\.(A_log|D|dt_bias|dt_proj\.bias|conv1d\.(weight|bias))$",
            "hidden_vector",
        ),
        (r"layers\.\d+\.(mixer\.)?norm\.weight$", "hidden_bias"),
        (r"layers\.\d+\.mixer\.\w+\.weight$", "hidden_weight"),
        (r"layers\.\d+\.mixer\.\w+\.bias$", "hidden_bias"),
        (r"norm_f\.weight$", "input_bias"),
        (r"lm_head\.weight$", "output_weight"),
    ),
    input=(r"embeddings$",),
    branches=(r"layers\.\d+\.mixer\.out_proj$",),
    output=(r"lm_head$",),
    final=r"norm_f$",
    branches_per_layer=1,
)
