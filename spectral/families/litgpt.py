"""The ``litgpt`` family: the litgpt family."""

from __future__ import annotations

from spectral.families.adapter import make_adapter

__all__ = ["LITGPT"]

# litgpt's GPT (litgpt/model.py): transformer.{wte, h.N, ln_f} and lm_head. A block adds
# post_attention_norm(attn(norm_1(h))) and post_mlp_norm(mlp(norm_2(.))): nn.Identity, or
# norms after the branch (Gemma2-like configs), so alpha_hidden goes on their outputs and
# each branch adds alpha_hidden * f(h) either way. scale_embeddings=True (Gemma configs)
# multiplies wte's output by sqrt(n_embd) in GPT.forward: divided out as Gemma's is. Its
# Gemma configs' RMSNorm(add_unit_offset=True) computes x_hat * (1 + w): check() names
# those norms; pass adapter=<this adapter>._replace(norm_offset=1.0) for them. Its
# soft-capping (final_logit_softcapping, attention_logit_softcapping: tanh(x / c) * c, c
# fixed) is accepted as Gemma2's is: the capped logits and scores are Theta(1) at every
# width under muP, so a cap of fixed height bends them alike at every width
# (tests/torch/test_training_stacks.py measures the capped logits' slopes).
LITGPT = make_adapter(
    name="litgpt",
    detect=r"transformer\.h\.\d+\.post_attention_norm$",
    roles=(
        (r"wte\.weight$", "input_weight"),
        (r"h\.\d+\.(attn\.)?\w*norm\w*\.(weight|bias)$", "hidden_bias"),
        (r"h\.\d+\.(attn|mlp)\.\w+\.weight$", "hidden_weight"),
        (r"h\.\d+\.(attn|mlp)\.\w+\.bias$", "hidden_bias"),
        (r"ln_f\.(weight|bias)$", "input_bias"),
        (r"lm_head\.weight$", "output_weight"),
    ),
    input=(r"transformer\.wte$",),
    branches=(r"h\.\d+\.post_attention_norm$", r"h\.\d+\.post_mlp_norm$"),
    output=(r"lm_head$",),
    final=r"ln_f$",
    input_scale_sqrt=("scale_embeddings", "n_embd"),
)
