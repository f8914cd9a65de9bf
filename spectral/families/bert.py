"""The ``bert`` family: the bert family."""

from __future__ import annotations

from spectral.families.adapter import make_adapter

__all__ = ["BERT"]

# Hugging Face BERT (post-norm: each branch's output goes through dense, then is added and
# normalised, h = LN(h + alpha * f(h))) and ModernBERT (pre-norm). The embeddings module's
# output, after its norm, is h_0. The masked-LM head's transform (width -> width, applied
# once outside the stream) is an outer_weight; the decoder is the readout, its bias an
# output_bias (BERT also keeps an unused cls.predictions.bias: no gradient, no step).
BERT = make_adapter(
    name="bert",
    detect=r"encoder\.layer\.\d+\.attention\.output\.dense$",
    roles=(
        (r"embeddings\.(word|position|token_type)_embeddings\.weight$", "input_weight"),
        (r"embeddings\.LayerNorm\.(weight|bias)$", "input_bias"),
        (r"encoder\.layer\.\d+\.[\w.]*LayerNorm\.(weight|bias)$", "hidden_bias"),
        (r"encoder\.layer\.\d+\.[\w.]+\.weight$", "hidden_weight"),
        (r"encoder\.layer\.\d+\.[\w.]+\.bias$", "hidden_bias"),
        (r"(pooler|predictions\.transform)\.dense\.weight$", "outer_weight"),
        (
            r"(pooler\.dense|predictions\.transform\.(dense|LayerNorm))\.(weight|bias)$",
            "outer_bias",
        ),
        (r"predictions\.decoder\.weight$", "output_weight"),
        (r"predictions\.(decoder\.)?bias$", "output_bias"),
    ),
    input=(r"embeddings$",),
    branches=(
        r"encoder\.layer\.\d+\.attention\.output\.dense$",
        r"encoder\.layer\.\d+\.output\.dense$",
    ),
    output=(r"predictions\.decoder$",),
    final=r"predictions\.transform$",
)
