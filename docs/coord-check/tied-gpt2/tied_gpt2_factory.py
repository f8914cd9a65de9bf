"""A Hugging Face GPT-2 with tied embeddings, for ``spectral coord-check --model-factory``.

``gpt2(width, depth)`` builds ``transformers.GPT2LMHeadModel`` from a config (nothing is
downloaded) with ``tie_word_embeddings=True``: one matrix is the token embedding and the
readout. The rules allow the tie for AdamW and Muon-Kimi+AdamW (input and output weights
differ in the multiplier only, which is applied on the logits; docs/ties.md). Head
dimension 16, no dropout.
"""

from __future__ import annotations

HEAD_DIM = 16
VOCAB_SIZE = 256


def gpt2(width: int, depth: int):
    """A tiny tied GPT-2 of this residual width and number of layers."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=VOCAB_SIZE,
        n_positions=128,
        n_embd=width,
        n_layer=depth,
        n_head=width // HEAD_DIM,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        tie_word_embeddings=True,
    )
    return GPT2LMHeadModel(config)
