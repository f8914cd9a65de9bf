"""A Hugging Face Llama for ``spectral coord-check --model-factory examples/hf_llama.py:llama``.

``llama(width, depth)`` builds ``transformers.LlamaForCausalLM`` from a config (nothing is
downloaded), small enough to train for a few steps on a CPU. What the μP rules need from
the config:

* ``head_dim`` fixed (``HEAD_DIM``) and ``num_attention_heads = width // HEAD_DIM``: the
  rules assume the head dimension stays fixed as the width grows (more heads, not wider
  ones), so the attention logits keep their 1/√head_dim scale;
* ``tie_word_embeddings=False``: the input and output embeddings get different
  multipliers, initialisations and learning rates;
* everything else as in Llama (SwiGLU MLP with ``intermediate_size = 8/3·width`` rounded up
  to a multiple of 32, RMSNorm, RoPE, no biases).

The spectral config module recognises the family by its module names (``embed_tokens``,
``layers.N.self_attn.o_proj``, ``layers.N.mlp.down_proj``, ``norm``, ``lm_head``), so its
``apply_multipliers``, ``init_`` and ``build_optimizers`` work on the model as it is.
"""

from __future__ import annotations

HEAD_DIM = 16
"""Fixed head dimension: widths must be multiples of it."""
VOCAB_SIZE = 256
"""Byte-sized vocabulary: the coordinate check draws random token ids below it."""
MAX_POSITIONS = 128
"""Longest sequence the model accepts (RoPE table); the check uses 32 tokens."""


def intermediate_size(width: int) -> int:
    """Llama's SwiGLU hidden size, 8/3·width, rounded up to a multiple of 32."""
    return -(-8 * width // 96) * 32  # ceil(8·width / 3 / 32) · 32


def llama(width: int, depth: int):
    """A ``LlamaForCausalLM`` of hidden size ``width`` with ``depth`` decoder layers."""
    from transformers import LlamaConfig, LlamaForCausalLM

    if width % HEAD_DIM:
        raise ValueError(f"width {width} is not a multiple of the head dimension {HEAD_DIM}")
    config = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=width,
        intermediate_size=intermediate_size(width),
        num_hidden_layers=depth,
        num_attention_heads=width // HEAD_DIM,
        num_key_value_heads=width // HEAD_DIM,
        head_dim=HEAD_DIM,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=False,
        attn_implementation="sdpa",
    )
    return LlamaForCausalLM(config)
