"""A Hugging Face Falcon for ``spectral coord-check --model-factory ... --adapter ...``.

``falcon(width, depth)`` builds ``transformers.FalconForCausalLM`` from a config (nothing is
downloaded), small enough to train for a few steps on a CPU. What the μP rules need from
the config:

* ``num_attention_heads = width // HEAD_DIM``: Falcon's head dimension is
  ``hidden_size / num_attention_heads``, so more heads, not wider ones, as the width grows;
* ``tie_word_embeddings=False`` (Falcon ties by default): the input and output embeddings
  get different multipliers, initialisations and learning rates;
* ``alibi=False`` (the default): ALiBi's per-head slopes change with the number of heads,
  which the rules do not cover;
* no dropout, so the two forward passes of a step agree.

Everything else is Falcon-7B's layout: attention and MLP in parallel on one LayerNorm
(``parallel_attn``), one key/value head (``multi_query``), rotary positions, no biases.

``ADAPTER`` says where the rules meet the model, as a dict of ``Adapter`` fields. The
generated module knows Falcon already (the built-in ``falcon`` adapter has these fields);
this one is spelled out to show what ``--adapter`` takes for a model it does not know.
"""

from __future__ import annotations

HEAD_DIM = 16
"""Fixed head dimension: widths must be multiples of it."""
VOCAB_SIZE = 256
"""Byte-sized vocabulary: the coordinate check draws random token ids below it."""

ADAPTER = {
    "name": "falcon-by-hand",
    # alpha_in on the embedding output h_0
    "input": [r"(^|\.)word_embeddings$"],
    # alpha_hidden on the last map of each residual branch: h + attn(ln(h)) + mlp(ln(h))
    "branches": [r"(^|\.)h\.\d+\.self_attention\.dense$", r"(^|\.)h\.\d+\.mlp\.dense_4h_to_h$"],
    # alpha_out on the logits
    "output": [r"(^|\.)lm_head$"],
    # the module whose input is h_L (the coordinate check measures it there)
    "final": r"(^|\.)ln_f$",
    # parameter name -> role, the first match wins
    "roles": {
        r"(^|\.)word_embeddings\.weight$": "input_weight",
        r"(^|\.)h\.\d+\.input_layernorm\.(weight|bias)$": "hidden_bias",
        r"(^|\.)h\.\d+\.(self_attention|mlp)\.\w+\.weight$": "hidden_weight",
        r"(^|\.)ln_f\.(weight|bias)$": "input_bias",
        r"(^|\.)lm_head\.weight$": "output_weight",
    },
}


def falcon(width: int, depth: int):
    """A ``FalconForCausalLM`` of hidden size ``width`` with ``depth`` decoder layers."""
    from transformers import FalconConfig, FalconForCausalLM

    if width % HEAD_DIM:
        raise ValueError(f"width {width} is not a multiple of the head dimension {HEAD_DIM}")
    config = FalconConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=width,
        num_hidden_layers=depth,
        num_attention_heads=width // HEAD_DIM,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        tie_word_embeddings=False,
        alibi=False,
        attn_implementation="sdpa",
    )
    return FalconForCausalLM(config)
