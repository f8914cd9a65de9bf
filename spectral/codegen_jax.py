"""``spectral codegen --framework jax``: the same rules as a standalone JAX / optax module.

The module is rendered from ``templates/jax_config.py.j2`` with the context that
:func:`spectral.codegen.render` builds for the PyTorch module, so ``BASE_WIDTH``,
``BASE_DEPTH``, ``K``, ``OPTIMIZERS``, ``RULES``, ``DEFAULT_EPS`` and the arithmetic
(``{{ scaling }}``, the body of :mod:`spectral.scaling`) are the same text in both: its
``hparams`` returns exactly what the PyTorch module's returns. It imports only the standard
library, ``jax`` and ``optax``; parameters are read as pytrees (flax ``nnx`` states and
``linen`` params dicts alike), so flax is not needed at all.

What differs is how each optimizer is built: :data:`JAX_IMPLEMENTATIONS` names, per catalog
optimizer, the optax transformation and how it was checked against the idealised update
(the notes become comments above its factory). Optimizers optax does not implement have no
entry: the generated ``optimizer()`` refuses them by name unless the user passes
``transforms={name: fn}``.
"""

from __future__ import annotations

import textwrap
from typing import Any

from .codegen import Implementation

__all__ = ["JAX_IMPLEMENTATIONS", "MISSING_IN_OPTAX", "render_jax"]

JAX_IMPLEMENTATIONS: dict[str, Implementation] = {
    "sgd": Implementation(
        factory=(
            "return optax.chain(",
            "    optax.add_decayed_weights(weight_decay),",
            "    optax.sgd(learning_rate, **kwargs),",
            ")",
        ),
        notes=(
            "SGD: optax.add_decayed_weights, then optax.sgd. Idealised: dW = -eta (grad +",
            "lambda W). The decay is added to the gradient (coupled, as torch.optim.SGD",
            "does); with the default momentum=None the step is exactly the idealised one,",
            "and with momentum mu (optax.trace, torch's buffer without dampening) both",
            "terms grow by about 1/(1 - mu) alike, so the rules still hold.",
        ),
    ),
    "adamw": Implementation(
        factory=("return optax.adamw(learning_rate, eps=eps, weight_decay=weight_decay, **kwargs)",),
        notes=(
            "AdamW: optax.adamw = scale_by_adam, add_decayed_weights, scale by -lr:",
            "dW = -eta (m_hat / (sqrt(v_hat) + eps) + lambda W), the step of",
            "torch.optim.AdamW (decoupled decay, eps outside the square root, the declared",
            "place; b1 = 0.9, b2 = 0.999 in both). eps is scaled per role (base default",
            "1e-8, optax's and torch's). optax's default weight_decay=1e-4 is replaced by",
            "each role's value.",
        ),
    ),
    "lion": Implementation(
        factory=("return optax.lion(learning_rate, weight_decay=weight_decay, **kwargs)",),
        notes=(
            "Lion: optax.lion, sign(b1 m + (1 - b1) g) with decoupled weight decay (lr *",
            "wd), b1 = 0.9, b2 = 0.99: the idealised sign step, and the step of",
            "pytorch_optimizer.Lion. optax's default weight_decay=1e-3 is replaced by each",
            "role's value. Lion has no eps.",
        ),
    ),
    "muon-kimi": Implementation(
        factory=(
            "kwargs = _fixed(kwargs, consistent_rms=0.2)",
            "return optax.contrib.muon(learning_rate, weight_decay=weight_decay, **kwargs)",
        ),
        notes=(
            "Muon-Kimi: optax.contrib.muon(consistent_rms=0.2), which multiplies the",
            "orthogonalised momentum by 0.2 * sqrt(max(fan_in, fan_out)), then adds",
            "wd * W and scales by -lr: exactly dW = -eta (0.2 sqrt(max(n_in, n_out)) U V^T",
            "+ lambda W), the catalog's update RMS, as torch.optim.Muon(adjust_lr_fn=",
            "'match_rms_adamw') does. No compensation is needed (the default",
            "consistent_rms=None would scale by sqrt(max(1, fan_out / fan_in)) instead).",
            "Differences from torch.optim.Muon that do not change the scaling: (1)",
            "Newton-Schulz runs in the momentum's dtype (float32 here; torch casts to",
            "bfloat16) and divides by ||X||_F + 1e-8 (torch: max(||X||_F, 1e-7)); (2) with",
            "nesterov=True (both defaults) optax bias-corrects the momentum and the",
            "gradient separately, b m_t / (1 - b^(t+1)) + (1 - b) g_t / (1 - b^t), where",
            "torch takes b m_t + (1 - b) g_t: the same direction at step 1, a slightly",
            "different mix later (nesterov=False: both orthogonalise m_t, identical). 2-D",
            "kernels only; Newton-Schulz is transpose-equivariant, so a (in, out) flax",
            "kernel and a (out, in) torch weight get the same step.",
        ),
    ),
    "muon": Implementation(
        factory=(
            "dims = optax.contrib.MuonDimensionNumbers()  # a (in, out) kernel",
            "return optax.chain(",
            "    optax.contrib.scale_by_muon(",
            "        weight_dimension_numbers=lambda tree: jax.tree.map(lambda _: dims, tree),",
            "        **kwargs,",
            "    ),",
            "    optax.add_decayed_weights(weight_decay),",
            "    optax.scale_by_learning_rate(learning_rate),",
            ")",
        ),
        notes=(
            "Muon: the transformations optax.contrib.muon is made of, without its",
            "scale_by_shape. optax.contrib.muon always rescales the orthogonalised step (by",
            "sqrt(max(1, fan_out / fan_in)), or by consistent_rms * sqrt(max(fan_in,",
            "fan_out))), while the idealised Muon steps by U V^T alone; chaining",
            "scale_by_muon, add_decayed_weights and scale_by_learning_rate gives exactly",
            "dW = -eta (U V^T + lambda W), the step the PyTorch module reaches by dividing",
            "torch.optim.Muon's lr by its shape factor. Newton-Schulz in float32 (torch:",
            "bfloat16); optax's Nesterov mix bias-corrects (see muon-kimi).",
        ),
    ),
}
"""Catalog optimizer → the optax transformation the generated module builds, and why."""

MISSING_IN_OPTAX: dict[str, tuple[str, ...]] = {
    "shampoo": ("optax implements no Shampoo",),
    "soap": ("optax implements no SOAP",),
    "sso": ("optax implements no spectral-sphere optimizer (SSO)",),
    "sophia": (
        "optax.contrib.sophia cannot be one group of multi_transform",
        "optax.contrib.sophia estimates the Hessian diagonal by differentiating",
        "obj_fn(params) over the whole tree, while optax.multi_transform hands each",
        "group a masked tree; run it alone, or pass your own transformation.",
    ),
}
"""Catalog optimizers the JAX module has no factory for: (reason, further note lines)."""


def render_jax(env: Any, context: dict[str, Any], p: Any) -> str:
    """The JAX module's source from the PyTorch module's ``context`` (same numbers)."""
    kinds = []
    for kind in context["kinds"]:
        name = kind["name"]
        builtin = p.is_builtin(name)
        impl = JAX_IMPLEMENTATIONS.get(name) if builtin else None
        if impl is not None:
            kinds.append({**kind, "notes": impl.notes, "factory": impl.factory, "reason": ""})
            continue
        if builtin:
            reason, *more = MISSING_IN_OPTAX.get(name, ("no optax factory is set up for it",))
        else:
            reason, more = "a user declaration; no implementation is known", []
        how = (
            f"optimizer() refuses it unless given transforms={{'{name}': fn}}, fn(*, "
            "learning_rate, weight_decay, **kwargs) returning an optax.GradientTransformation "
            "whose step is the declared one: dW = -lr * (A + weight_decay * W) (eps= too "
            "where the optimizer has an eps rule)."
        )
        notes = (f"{name}: {reason}.", *more, *textwrap.wrap(how, 84))
        kinds.append({**kind, "notes": notes, "factory": (), "reason": f"{name}: {reason}."})
    return env.get_template("jax_config.py.j2").render({**context, "kinds": kinds})
