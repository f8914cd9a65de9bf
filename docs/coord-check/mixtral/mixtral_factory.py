"""A Hugging Face Mixtral for ``spectral coord-check --model-factory ...``.

``mixtral(width, depth)`` builds ``transformers.MixtralForCausalLM`` from a config (nothing
is downloaded), small enough to train a few steps on a CPU. The built-in ``moe`` adapter
places it: the router (``mlp.gate``) has the derived ``router_weight`` role, the fused
experts are hidden matrices stepped one expert matrix at a time, and alpha_hidden scales
the output of ``self_attn.o_proj`` and of the MoE block (the gated sum of the experts).

What the rules need from the config: ``num_attention_heads = width // HEAD_DIM`` (a fixed
head dimension), ``tie_word_embeddings=False`` here (a tie is allowed for AdamW and
Muon-Kimi+AdamW, but the check measures the untied model), no dropout. Four experts, two
per token, expert width 2n: the experts are Theta(n) x Theta(n) matrices as the rules assume.
"""

from __future__ import annotations

HEAD_DIM = 16
"""Fixed head dimension: widths must be multiples of it."""
VOCAB_SIZE = 256
"""Byte-sized vocabulary: the coordinate check draws random token ids below it."""


def mixtral(width: int, depth: int):
    """A tiny Mixtral of this residual width and number of layers."""
    from transformers import MixtralConfig, MixtralForCausalLM

    config = MixtralConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=width,
        intermediate_size=2 * width,
        num_hidden_layers=depth,
        num_attention_heads=width // HEAD_DIM,
        num_key_value_heads=width // HEAD_DIM,
        head_dim=HEAD_DIM,
        num_local_experts=4,
        num_experts_per_tok=2,
        max_position_embeddings=128,
        tie_word_embeddings=False,
        attention_dropout=0.0,
        router_jitter_noise=0.0,
    )
    return MixtralForCausalLM(config)
