"""The Adapter type: where the rules meet one model family, by module and parameter names.

:class:`Adapter` holds a family's patterns and what its forward pass does that the rules
must undo; :func:`make_adapter` builds one (or a variant of another) with every name pattern
anchored. The families themselves are data in :mod:`spectral.families`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from spectral.patterns import anchored


class Adapter(NamedTuple):
    """Where the rules meet one family of models, by module and parameter names.

    Every pattern is a regular expression searched in a name from named_modules() or
    named_parameters(). The multipliers are forward hooks that scale a module's output:
    alpha_in on each `input` module (the embedding output h_0), alpha_hidden on each
    `branches` module (the last map of a residual branch, so the branch adds
    alpha_hidden * f(h)), alpha_out on each `output` module (the logits).
    """

    name: str
    detect: str
    """The family is recognised when a module name matches this."""
    roles: tuple[tuple[str, str], ...]
    """(parameter-name pattern, role), searched in order; the first match wins."""
    input: tuple[str, ...]
    branches: tuple[str, ...]
    output: tuple[str, ...]
    final: str = ""
    """The module whose input is h_L, the residual stream after the last block."""
    branches_per_layer: int = 2
    """Residual branches per layer (attention + MLP); depth counts layers."""
    embeddings: tuple[str, ...] = ()
    """Input parameters that are lookup tables although their module is no nn.Embedding
    (drawn with init_std, not init_std / sqrt(fan_in))."""
    detect_type: str = ""
    """When set, the family is recognised only if some module's class name matches this
    too: Gemma's module names are Llama's, its RMSNorm class is its own."""
    input_scale: tuple[str, ...] = ()
    """Attributes of the input module, tried in order, holding a factor its forward pass
    multiplies into the embedding output (Gemma: sqrt(hidden_size)). The alpha_in hook
    divides it out, so h_0 is alpha_in times the looked-up row at every width."""
    input_scale_sqrt: tuple[str, str] | tuple[()] = ()
    """(config flag, config width): when the model's config sets the flag, its forward
    multiplies the input module's output by sqrt(width) after that module (litgpt's
    scale_embeddings, n_embd); the alpha_in hook divides it out, as for input_scale."""
    norm_offset: float = 0.0
    """The family's norms compute x_hat * (norm_offset + w) (Gemma: 1 + w); init_ sets
    w = 1 - norm_offset, so every effective gain starts at 1."""
    refuse: tuple[tuple[str, str], ...] = ()
    """(config attribute, what it does): a model whose config sets the attribute (anything
    but None, False or 0) is refused with that reason, as the rules do not cover it."""
    config_scales: tuple[tuple[str, str, int], ...] = ()
    """(layer, config attribute, power): the model's forward pass multiplies that layer's
    scaled output by config.attribute ** power outside the hooked module (Granite's
    embedding_multiplier on h_0, residual_multiplier on each branch, 1 / logits_scaling on
    the logits); the layer's hook divides it out, so the rules' multiplier is the whole
    factor whatever the config says, width-scaled or not."""
    aliases: tuple[str, ...] = ()
    """Parameter names under a module the forward pass never calls, whose tensor another
    module uses (T5's ``shared.weight``, which the encoder calls as ``embed_tokens``): the
    same parameter listed twice, not a tie (a traced structure fills it in)."""
    own_width_exponents: tuple[tuple[str, float], ...] = ()
    """(parameter-name pattern, exponent): the family's own init draws that parameter with
    a std proportional to width**exponent (torchtitan's lm_head: dim**-0.5). init_, which
    keeps the model's own init as the base, divides that move out, so the parameter
    starts at its std at the base width times the rule's ratio."""


_PATTERN_FIELDS = (
    "detect",
    "roles",
    "input",
    "branches",
    "output",
    "final",
    "embeddings",
    "aliases",
    "own_width_exponents",
)
"""The fields that hold name patterns (detect_type matches class names, not names)."""


def make_adapter(base: Adapter | None = None, **fields: Any) -> Adapter:
    """An Adapter from ``fields``, or ``base`` with ``fields`` replaced; every name pattern
    given gets the anchor ``(^|\\.)`` in front (spectral.patterns.anchored)."""
    fields = {
        key: anchored(value) if key in _PATTERN_FIELDS else value
        for key, value in fields.items()
    }
    return Adapter(**fields) if base is None else base._replace(**fields)
