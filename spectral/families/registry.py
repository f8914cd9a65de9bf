"""The families in the order they are tried, and every family's patterns, by names no
runtime redefines: spectral.families re-exports them as ADAPTERS and DEFAULT_PATTERNS for
the torch runtime, and the JAX runtime (spectral.jax.labels) reads them in its path dialect
and defines its own ADAPTERS, in the same namespace when a config is vendored.
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
from spectral.families.megatron import MEGATRON
from spectral.families.modernbert import MODERNBERT
from spectral.families.moe import MOE
from spectral.families.neox import NEOX
from spectral.families.olmo2 import OLMO2
from spectral.families.opt import OPT
from spectral.families.phi import PHI
from spectral.families.residual_mlp import RESIDUAL_MLP
from spectral.families.torchtitan import TORCHTITAN
from spectral.families.vit import VIT

__all__ = ["FAMILIES", "FAMILY_PATTERNS"]


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
# but the multiplier equal: spectral.engine.ties); the tied matrix has the role input_weight
# and alpha_out stays a hook on the logits. Any other shared parameter is refused.

FAMILIES: tuple[Adapter, ...] = (
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
    MEGATRON,
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
FAMILY_PATTERNS: tuple[tuple[str, str], ...] = tuple(
    dict.fromkeys(pair for adapter in FAMILIES for pair in adapter.roles)
)
"""Every family's (parameter-name pattern, role) pairs; classify's fallback."""
