"""The ``torchtitan`` family: torchtitan's Llama (models/llama3/model.py names)."""

from __future__ import annotations

from spectral.families.adapter import make_adapter

__all__ = ["TORCHTITAN"]

# torchtitan 0.3.0 names the head lm_head (output before) and fuses q, k, v into
# attention.qkv_linear.wqkv: both namings are placed.
TORCHTITAN = make_adapter(
    name="torchtitan",  # torchtitan's Llama (models/llama3/model.py names)
    detect=r"layers\.\d+\.attention\.wo$",
    roles=(
        (r"tok_embeddings\.weight$", "input_weight"),
        (r"layers\.\d+\.(\w+\.)?\w*norm\.(weight|bias)$", "hidden_bias"),
        (r"layers\.\d+\.(attention|feed_forward)\.(\w+\.)*weight$", "hidden_weight"),
        (r"layers\.\d+\.(attention|feed_forward)\.(\w+\.)*bias$", "hidden_bias"),
        (r"norm\.(weight|bias)$", "input_bias"),
        (r"(output|lm_head)\.weight$", "output_weight"),
    ),
    input=(r"tok_embeddings$",),
    branches=(
        r"layers\.\d+\.attention\.wo$",
        r"layers\.\d+\.feed_forward\.w2$",
    ),
    output=(r"(output|lm_head)$",),
    final=r"norm$",
    # torchtitan 0.3.0's init draws lm_head with std dim**-0.5 (_output_linear_init(dim));
    # the other matrices' stds do not move with the width (embedding 1, the rest 0.02,
    # wo / w2 by depth)
    own_width_exponents=((r"lm_head\.weight$", -0.5),),
)
