"""Model families: which parameter has which role and where the block multipliers go.

One module per family (an :class:`~spectral.families.adapter.Adapter`, data only, no
torch); :data:`ADAPTERS` lists them in the order they are tried (a family that has
another's names comes before it). :mod:`spectral.torch.model` applies them.
"""

from __future__ import annotations

from spectral.families.adapter import Adapter
from spectral.families.bert import BERT
from spectral.families.bloom import BLOOM
from spectral.families.falcon import FALCON
from spectral.families.gemma import GEMMA
from spectral.families.gemma2 import GEMMA2
from spectral.families.gpt2 import GPT2
from spectral.families.gptj import GPTJ
from spectral.families.granite import GRANITE
from spectral.families.hf_vit import HF_VIT
from spectral.families.litgpt import LITGPT
from spectral.families.llama import LLAMA
from spectral.families.mamba import MAMBA
from spectral.families.modernbert import MODERNBERT
from spectral.families.moe import MOE
from spectral.families.neox import NEOX
from spectral.families.olmo2 import OLMO2
from spectral.families.opt import OPT
from spectral.families.phi import PHI
from spectral.families.residual_mlp import RESIDUAL_MLP
from spectral.families.torchtitan import TORCHTITAN
from spectral.families.vit import VIT

__all__ = ["ADAPTERS", "DEFAULT_PATTERNS", "Adapter"]


# ---------------------------------------------------------------------------------------
# model families: which parameter is which role, where the multipliers go
# ---------------------------------------------------------------------------------------
# Names may carry a prefix: "module." (DDP), "_orig_mod." (torch.compile), "transformer." or
# "model." (Hugging Face), "_fsdp_wrapped_module." (FSDP1 with use_orig_params=True), so
# every pattern starts at a dot or at the start of the name: the families below are written
# without that anchor and make_adapter (spectral.families.adapter) puts it in front
# (spectral.patterns.anchored).
#
# Parameters the paper does not cover, and the role each gets on purpose:
# * LayerNorm/RMSNorm gains and biases inside a residual block: hidden_bias. They are
#   width-sized vectors with Theta(1) entries that feed the branch, as the block's first
#   bias b^(1) does: a Theta(1) change moves the branch input by Theta(1) and the residual
#   stream by alpha_l = Theta(1/L).
# * The final norm before the head: input_bias. It sits on the residual stream outside
#   every branch (no 1/L multiplier), as b_0 does, and its gradient has the scale of b_0's.
# * Position embeddings (and ViT's cls_token): input_weight. A table looked up by one-hot
#   positions is an input layer of fixed fan-in, exactly like the token embedding.
# * init_ sets norm gains to 1 and norm biases to 0 (not random): that keeps each
#   normalised feature at RMS 1, the Theta(1) scale the bias conditions ask for.
# * An output bias (lm_head.bias in Phi-2 and GPT-J, a classifier's bias): output_bias.
#   alpha_out scales the readout's whole output, bias included (docs/roles.md).
# Tied input/output embeddings are accepted where the config's rules allow them (every HP
# but the multiplier equal: spectral.torch.model.ties); the tied matrix has the role input_weight
# and alpha_out stays a hook on the logits. Any other shared parameter is refused.

"""Model families: which parameter has which role and where the block multipliers go.

An :class:`Adapter` names one family's modules and parameters by regular expressions; the
families the runtime knows are :data:`ADAPTERS`, tried in order (a family that has another's
names comes before it). Data only: :mod:`spectral.torch.model.classify` applies them.
"""

from __future__ import annotations

from spectral.families.adapter import Adapter
from spectral.patterns import anchored
from spectral.families.adapter import make_adapter

# ---------------------------------------------------------------------------------------
# model families: which parameter is which role, where the multipliers go
# ---------------------------------------------------------------------------------------
# Names may carry a prefix: "module." (DDP), "_orig_mod." (torch.compile), "transformer." or
# "model." (Hugging Face), "_fsdp_wrapped_module." (FSDP1 with use_orig_params=True), so
# every pattern starts at a dot or at the start of the name: the families below are written
# without that anchor and make_adapter (spectral.families.adapter) puts it in front
# (spectral.patterns.anchored).
#
# Parameters the paper does not cover, and the role each gets on purpose:
# * LayerNorm/RMSNorm gains and biases inside a residual block: hidden_bias. They are
#   width-sized vectors with Theta(1) entries that feed the branch, as the block's first
#   bias b^(1) does: a Theta(1) change moves the branch input by Theta(1) and the residual
#   stream by alpha_l = Theta(1/L).
# * The final norm before the head: input_bias. It sits on the residual stream outside
#   every branch (no 1/L multiplier), as b_0 does, and its gradient has the scale of b_0's.
# * Position embeddings (and ViT's cls_token): input_weight. A table looked up by one-hot
#   positions is an input layer of fixed fan-in, exactly like the token embedding.
# * init_ sets norm gains to 1 and norm biases to 0 (not random): that keeps each
#   normalised feature at RMS 1, the Theta(1) scale the bias conditions ask for.
# * An output bias (lm_head.bias in Phi-2 and GPT-J, a classifier's bias): output_bias.
#   alpha_out scales the readout's whole output, bias included (docs/roles.md).
# Tied input/output embeddings are accepted where the config's rules allow them (every HP
# but the multiplier equal: spectral.torch.model.ties); the tied matrix has the role input_weight
# and alpha_out stays a hook on the logits. Any other shared parameter is refused.


GPT2 = make_adapter(
    name="gpt2",  # nanoGPT's model.py, Hugging Face GPT-2, spectral.models.GPT
    detect=r"h\.\d+\.attn\.c_proj$",
    roles=(
        (r"wte\.weight$", "input_weight"),
        (r"wpe\.weight$", "input_weight"),
        (r"h\.\d+\.ln_[12]\.(weight|bias)$", "hidden_bias"),
        # spectral.models.GPT(experts=E): the router (E x n, docs/router.md) and the experts
        (r"h\.\d+\.mlp\.gate\.weight$", "router_weight"),
        (r"h\.\d+\.mlp\.experts\.\d+\.\w+\.weight$", "hidden_weight"),
        (r"h\.\d+\.mlp\.experts\.\d+\.\w+\.bias$", "hidden_bias"),
        (r"h\.\d+\.(attn|mlp)\.\w+\.weight$", "hidden_weight"),
        (r"h\.\d+\.(attn|mlp)\.\w+\.bias$", "hidden_bias"),
        (r"ln_f\.(weight|bias)$", "input_bias"),
        (r"lm_head\.weight$", "output_weight"),
    ),
    input=(r"wte$", r"wpe$"),
    branches=(r"h\.\d+\.attn\.c_proj$", r"h\.\d+\.mlp\.c_proj$"),
    output=(r"lm_head$",),
    final=r"ln_f$",
)

# Hugging Face Llama, Qwen2, Qwen3, Mistral, Phi-3 (fused qkv_proj and gate_up_proj are
# hidden matrices like the others), Cohere / Command-R (attention and MLP in parallel on
# one norm: still two branch ends per layer; its logit_scale is a fixed factor on the
# logits, the same at every width), StableLM, and others with these names.
LLAMA = make_adapter(
    name="llama",
    detect=r"layers\.\d+\.self_attn\.o_proj$",
    roles=(
        (r"embed_tokens\.weight$", "input_weight"),
        # norms first: Qwen3's self_attn.q_norm / k_norm would otherwise be matrices
        (r"layers\.\d+\.\w*norm\.(weight|bias)$", "hidden_bias"),
        (r"layers\.\d+\.self_attn\.[qk]_norm\.(weight|bias)$", "hidden_bias"),
        # StableLM's qk_layernorm: one LayerNorm per head
        (
            r"layers\.\d+\.self_attn\.[qk]_layernorm\.norms\.\d+\.(weight|bias)$",
            "hidden_bias",
        ),
        (r"layers\.\d+\.(self_attn|mlp)\.\w+\.weight$", "hidden_weight"),
        (r"layers\.\d+\.(self_attn|mlp)\.\w+\.bias$", "hidden_bias"),
        (r"norm\.(weight|bias)$", "input_bias"),
        (r"lm_head\.weight$", "output_weight"),
    ),
    input=(r"embed_tokens$",),
    branches=(r"layers\.\d+\.self_attn\.o_proj$", r"layers\.\d+\.mlp\.down_proj$"),
    output=(r"lm_head$",),
    final=r"norm$",
)

# Gemma's forward multiplies the embedding output by sqrt(hidden_size) (the embedding
# module's embed_scale), which would make h_0 grow with the width; the alpha_in hook
# divides it out. Its RMSNorm computes x_hat * (1 + w), so init_ sets w = 0.
GEMMA = make_adapter(
    LLAMA,
    name="gemma",  # Hugging Face Gemma: Llama's names, its own norm class
    detect_type=r"^GemmaRMSNorm$",
    input_scale=("scalar_embed_scale", "embed_scale"),
    norm_offset=1.0,
)

# OLMo2 and OLMo3 add h + post_norm(f(h)) with no norm before the sublayer: a norm after
# o_proj / down_proj would normalise a multiplier placed there away, so alpha_hidden scales
# the post-norms' outputs and each branch adds alpha_hidden * f(h). Plain embeddings and
# x_hat * w norms.
OLMO2 = make_adapter(
    LLAMA,
    name="olmo2",  # Hugging Face OLMo2, OLMo3 (and Llama-named models with these post-norms)
    detect=r"layers\.\d+\.post_feedforward_layernorm$",
    branches=(
        r"layers\.\d+\.post_attention_layernorm$",
        r"layers\.\d+\.post_feedforward_layernorm$",
    ),
)

# Gemma2 and Gemma3 add h + post_norm(f(pre_norm(h))): OLMo2's branch ends, Gemma's
# embedding scale and norms. Gemma2's soft-capping (tanh(x / c) * c on the logits and on the
# attention scores, c fixed) is accepted: under muP both are Theta(1) at every width, so
# the cap bends them the same way at every width (tests/test_model_classes.py measures the
# capped logits' slopes).
GEMMA2 = make_adapter(
    OLMO2,
    name="gemma2",  # Hugging Face Gemma2, Gemma3 (text)
    detect=r"layers\.\d+\.pre_feedforward_layernorm$",
    input_scale=GEMMA.input_scale,
    norm_offset=GEMMA.norm_offset,
)

# Granite: Llama's names and its own norm class; its forward multiplies h_0 by
# embedding_multiplier, each branch by residual_multiplier and divides the logits by
# logits_scaling (IBM's own muP convention: real configs grow logits_scaling with the
# size). The hooks divide all three out, so the rules' multipliers are the whole factors;
# attention_multiplier scales the attention scores with the head dimension fixed, the same
# at every width.
GRANITE = make_adapter(
    LLAMA,
    name="granite",  # Hugging Face Granite (dense)
    detect_type=r"^GraniteRMSNorm$",
    config_scales=(
        ("input", "embedding_multiplier", 1),
        ("hidden", "residual_multiplier", 1),
        ("output", "logits_scaling", -1),
    ),
)

# Phi-2 (Hugging Face Phi): attention and MLP in parallel on one norm (two branch ends per
# layer), biases everywhere, and a bias on the readout: output_bias.
PHI = make_adapter(
    name="phi",
    detect=r"layers\.\d+\.self_attn\.dense$",
    roles=(
        (r"embed_tokens\.weight$", "input_weight"),
        (
            r"layers\.\d+\.(\w*layernorm|self_attn\.[qk]_layernorm)\.(weight|bias)$",
            "hidden_bias",
        ),
        (r"layers\.\d+\.(self_attn|mlp)\.\w+\.weight$", "hidden_weight"),
        (r"layers\.\d+\.(self_attn|mlp)\.\w+\.bias$", "hidden_bias"),
        (r"final_layernorm\.(weight|bias)$", "input_bias"),
        (r"lm_head\.weight$", "output_weight"),
        (r"lm_head\.bias$", "output_bias"),
    ),
    input=(r"embed_tokens$",),
    branches=(r"layers\.\d+\.self_attn\.dense$", r"layers\.\d+\.mlp\.fc2$"),
    output=(r"lm_head$",),
    final=r"final_layernorm$",
)

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

FALCON = make_adapter(
    name="falcon",  # Hugging Face Falcon (parallel attention/MLP, or sequential)
    detect=r"h\.\d+\.self_attention\.dense$",
    roles=(
        (r"word_embeddings\.weight$", "input_weight"),
        # input_layernorm, post_attention_layernorm, ln_attn / ln_mlp (new architecture)
        (r"h\.\d+\.(\w*layernorm|ln_attn|ln_mlp)\.(weight|bias)$", "hidden_bias"),
        (r"h\.\d+\.(self_attention|mlp)\.\w+\.weight$", "hidden_weight"),
        (r"h\.\d+\.(self_attention|mlp)\.\w+\.bias$", "hidden_bias"),
        (r"ln_f\.(weight|bias)$", "input_bias"),
        (r"lm_head\.weight$", "output_weight"),
    ),
    input=(r"word_embeddings$",),
    # parallel_attn: h + attn(ln(h)) + mlp(ln(h)), two branches per layer as in GPT-NeoX
    branches=(
        r"h\.\d+\.self_attention\.dense$",
        r"h\.\d+\.mlp\.dense_4h_to_h$",
    ),
    output=(r"lm_head$",),
    final=r"ln_f$",
)

# BLOOM: Falcon's names, plus a LayerNorm on the embedding output (word_embeddings_layernorm)
# that would normalise alpha_in away: h_0 is that norm's output, so alpha_in scales it.
# Its ALiBi slopes 2^(-8i/heads) take the same spread of values at every head count (the
# share of heads with a slope in any range stays put as the heads grow with the width);
# tests/test_model_classes.py measures BLOOM's slopes (and Falcon's with alibi=True).
BLOOM = make_adapter(
    FALCON,
    name="bloom",  # Hugging Face BLOOM
    detect=r"word_embeddings_layernorm$",
    input=(r"word_embeddings_layernorm$",),
)
BLOOM = BLOOM._replace(
    roles=(
        *anchored(((r"word_embeddings_layernorm\.(weight|bias)$", "input_bias"),)),
        *FALCON.roles,
    )
)

MOE = make_adapter(
    # Hugging Face mixtures of experts with Llama's names (transformers 5): Mixtral, Qwen2-MoE,
    # Qwen3-MoE, OLMoE, DeepSeek-V3; before "llama", whose detect matches them too.
    name="moe",
    detect=r"layers\.\d+\.(mlp|block_sparse_moe)\.experts$",
    roles=(
        # the router (E x n, inside the block) and Qwen2-MoE's shared-expert gate (1 x n):
        # maps from the width to a fixed size, docs/router.md
        (r"layers\.\d+\.(mlp|block_sparse_moe)\.gate\.weight$", "router_weight"),
        (r"layers\.\d+\.mlp\.shared_expert_gate\.weight$", "router_weight"),
        # fused experts (E, 2I, n) / (E, n, I), or transformers 4's lists of Linear: hidden
        # matrices, stepped one expert matrix at a time (spectral.torch.optim.experts)
        (
            (
                r"layers\.\d+\.(mlp|block_sparse_moe)\.experts\."
                r"(gate_up_proj|gate_proj|up_proj|down_proj)$"
            ),
            "hidden_weight",
        ),
        (
            r"layers\.\d+\.(mlp|block_sparse_moe)\.experts\.\d+\.\w+\.weight$",
            "hidden_weight",
        ),
        (r"layers\.\d+\.\w*norm\.(weight|bias)$", "hidden_bias"),
        (r"layers\.\d+\.self_attn\.\w*norm\.(weight|bias)$", "hidden_bias"),
        (r"layers\.\d+\.(self_attn|mlp)\.(\w+\.)?\w+\.weight$", "hidden_weight"),
        (r"layers\.\d+\.(self_attn|mlp)\.(\w+\.)?\w+\.bias$", "hidden_bias"),
        (r"norm\.(weight|bias)$", "input_bias"),
        (r"lm_head\.weight$", "output_weight"),
    ),
    input=(r"embed_tokens$",),
    # the MoE block's output: the gated sum of the experts (and the shared expert), where
    # alpha_hidden goes; a dense layer's mlp (Qwen2-MoE's mlp_only_layers) is hooked whole
    branches=(
        r"layers\.\d+\.self_attn\.o_proj$",
        r"layers\.\d+\.(mlp|block_sparse_moe)$",
    ),
    output=(r"lm_head$",),
    final=r"norm$",
)

RESIDUAL_MLP = make_adapter(
    name="residual-mlp",  # spectral.models.ResidualMLP
    detect=r"blocks\.\d+\.layers\.\d+$",
    roles=(
        (r"input\.weight$", "input_weight"),
        (r"input\.bias$", "input_bias"),
        (r"blocks\.\d+\.layers\.\d+\.weight$", "hidden_weight"),
        (r"blocks\.\d+\.layers\.\d+\.bias$", "hidden_bias"),
        (r"output\.weight$", "output_weight"),
    ),
    input=(r"input$",),
    branches=(r"blocks\.\d+$",),
    output=(r"output$",),
    final=r"output$",
    branches_per_layer=1,
)

NEOX = make_adapter(
    name="neox",  # Hugging Face GPT-NeoX (Pythia)
    detect=r"layers\.\d+\.attention\.dense$",
    roles=(
        (r"embed_in\.weight$", "input_weight"),
        (r"layers\.\d+\.\w*layernorm\.(weight|bias)$", "hidden_bias"),
        (r"layers\.\d+\.(attention|mlp)\.\w+\.weight$", "hidden_weight"),
        (r"layers\.\d+\.(attention|mlp)\.\w+\.bias$", "hidden_bias"),
        (r"final_layer_norm\.(weight|bias)$", "input_bias"),
        (r"(embed_out|lm_head)\.weight$", "output_weight"),
    ),
    input=(r"embed_in$",),
    # The parallel residual (use_parallel_residual=True) adds both branches to the same
    # stream, h + attn(ln1(h)) + mlp(ln2(h)): still two branches per layer, each scaled.
    branches=(
        r"layers\.\d+\.attention\.dense$",
        r"layers\.\d+\.mlp\.dense_4h_to_h$",
    ),
    output=(r"(embed_out|lm_head)$",),  # embed_out before transformers 5
    final=r"final_layer_norm$",
)

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
# (tests/test_training_stacks.py measures the capped logits' slopes).
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
)

VIT = make_adapter(
    name="vit",  # timm's VisionTransformer
    detect=r"blocks\.\d+\.attn\.proj$",
    roles=(
        # The patch embedding is a dense input layer (a Conv2d over pixels): its fan-in
        # C * p * p stays fixed as the width grows, so it is drawn init_std / sqrt(fan_in).
        (r"patch_embed\.proj\.weight$", "input_weight"),
        (r"patch_embed\.proj\.bias$", "input_bias"),
        # pos_embed is a learned vector per position added to h_0, as GPT-2's wpe is: a
        # table looked up by one-hot positions, so input_weight (not input_bias, which
        # adds the same vector at every position). cls_token (and reg_token) is a one-row
        # table looked up at its own position, where it is summed with that position's
        # pos_embed row; both rows must follow one rule. All three are in `embeddings`.
        (r"(cls_token|reg_token|pos_embed)$", "input_weight"),
        (r"blocks\.\d+\.(\w+\.)?\w*norm\d?\.(weight|bias)$", "hidden_bias"),
        (r"blocks\.\d+\.(attn|mlp)\.\w+\.weight$", "hidden_weight"),
        (r"blocks\.\d+\.(attn|mlp)\.\w+\.bias$", "hidden_bias"),
        # the final norm on h_L, or fc_norm on the pooled h_L (timm's global_pool="avg")
        (r"(fc_)?norm\.(weight|bias)$", "input_bias"),
        (r"head\.weight$", "output_weight"),
        # head.bias (timm's default head has one) gets no default, like lm_head.bias.
    ),
    # timm adds cls_token and pos_embed to the patch embeddings in _pos_embed, a method,
    # and passes the sum h_0 through pos_drop (an nn.Dropout, there even at p=0): the
    # one module whose output is the whole of h_0.
    input=(r"pos_drop$",),
    branches=(r"blocks\.\d+\.attn\.proj$", r"blocks\.\d+\.mlp\.fc2$"),
    output=(r"head$",),
    # the top-level norm: not patch_embed.norm nor blocks.N.mlp.norm (timm has both)
    final=r"^(?!.*\b(blocks|patch_embed)\.)(.*\.)?norm$",
    embeddings=(r"cls_token$", r"reg_token$", r"pos_embed$"),
)

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

MODERNBERT = make_adapter(
    name="modernbert",
    detect=r"layers\.\d+\.attn\.Wo$",
    roles=(
        (r"embeddings\.tok_embeddings\.weight$", "input_weight"),
        (r"embeddings\.norm\.(weight|bias)$", "input_bias"),
        (r"layers\.\d+\.(attn|mlp)_norm\.(weight|bias)$", "hidden_bias"),
        (r"layers\.\d+\.(attn|mlp)\.\w+\.weight$", "hidden_weight"),
        (r"layers\.\d+\.(attn|mlp)\.\w+\.bias$", "hidden_bias"),
        (r"final_norm\.(weight|bias)$", "input_bias"),
        (r"head\.dense\.weight$", "outer_weight"),
        (r"head\.(dense|norm)\.(weight|bias)$", "outer_bias"),
        (r"decoder\.weight$", "output_weight"),
        (r"decoder\.bias$", "output_bias"),
    ),
    input=(r"embeddings$",),
    branches=(r"layers\.\d+\.attn\.Wo$", r"layers\.\d+\.mlp\.Wo$"),
    output=(r"decoder$",),
    final=r"final_norm$",
)

# Hugging Face ViT (transformers 5 names): the patch embedding is a Conv2d of fixed fan-in
# C * p * p (input_weight, drawn init_std / sqrt(fan_in)), cls_token and the position
# table are tables added into h_0 (the embeddings module's output); the classifier is the
# readout, its bias an output_bias.
HF_VIT = make_adapter(
    name="hf-vit",
    detect=r"layers\.\d+\.layernorm_before$",
    roles=(
        (r"embeddings\.(cls_token|position_embeddings)$", "input_weight"),
        (r"patch_embeddings\.projection\.weight$", "input_weight"),
        (r"patch_embeddings\.projection\.bias$", "input_bias"),
        (r"layers\.\d+\.layernorm_(before|after)\.(weight|bias)$", "hidden_bias"),
        (r"layers\.\d+\.(attention|mlp)\.\w+\.weight$", "hidden_weight"),
        (r"layers\.\d+\.(attention|mlp)\.\w+\.bias$", "hidden_bias"),
        (r"layernorm\.(weight|bias)$", "input_bias"),
        (r"classifier\.weight$", "output_weight"),
        (r"classifier\.bias$", "output_bias"),
    ),
    input=(r"embeddings$",),
    branches=(r"layers\.\d+\.attention\.o_proj$", r"layers\.\d+\.mlp\.fc2$"),
    output=(r"classifier$",),
    final=r"layernorm$",
    embeddings=(r"embeddings\.cls_token$", r"embeddings\.position_embeddings$"),
)

ADAPTERS: tuple[Adapter, ...] = (
    GPT2,
    LITGPT,
    GRANITE,  # before Llama, whose names it has
    # Gemma2 before OLMo2 before Gemma and Llama: each has the names of those after it
    GEMMA2,
    OLMO2,
    GEMMA,
    MOE,
    LLAMA,
    BLOOM,  # before Falcon, whose names it has
    FALCON,
    RESIDUAL_MLP,
    NEOX,
    OPT,
    TORCHTITAN,
    VIT,
    MAMBA,
    BERT,
    MODERNBERT,
    HF_VIT,
    # last: their generic patterns must not come before the others' in DEFAULT_PATTERNS
    PHI,
    GPTJ,
)
"""Known families, tried in order (the first that recognises the model wins, so a family
comes before those whose names it shares); pass adapter= for any other model."""
DEFAULT_PATTERNS: tuple[tuple[str, str], ...] = tuple(
    dict.fromkeys(pair for adapter in ADAPTERS for pair in adapter.roles)
)
"""Every family's (parameter-name pattern, role) pairs; classify's fallback."""
