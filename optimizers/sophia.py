"""Sophia: ``A = clip(m / max(ρ h, ε), 1)``.

Idealised update (App. C.5, Sophia): every entry of ``A`` is at most 1 in magnitude, so
``‖A‖_R ≤ ‖1_{n_out×n_in}‖_R = n_in`` — the AdamW scale, which the paper adopts. The paper
tabulates no ε for Sophia. Applies to weights and biases.
"""

from typing import Any

from spectral.optimizers import records_on_first_use
from spectral.spec import OptimizerSpec
from spectral.symbols import n_in

SPEC = OptimizerSpec(
    name="sophia",
    update_norm=n_in,
    applies_to="all",
    summary="clipped Hessian-preconditioned momentum",
    paper="App. C.5 Sophia (Table adamw-mup); k = 1: App. D.4",
    doc=__doc__,
)

# TORCH (the torch implementation the generated module builds, and how it was checked),
# PROBE (how `spectral probe` steps it to measure its update) and JAX (the optax
# implementation of the generated JAX module, or why it has none): built on first use,
# since deriving the rules needs SPEC alone (spectral.optimizers.records_on_first_use).
def _records() -> dict[str, Any]:
    from spectral.optimizers.entry import NoJax, ProbeSetup, TorchImpl

    TORCH = TorchImpl(
        cls="pytorch_optimizer.SophiaH",
        sharding="refused",
        sharding_note=(
            "its Hutchinson Hessian estimate differentiates the gradient again "
            "(loss.backward(create_graph=True)), and the gradients FSDP2 reduce-scatters "
            "onto the shards carry no graph"
        ),
        not_homogeneous=(
            "it divides the momentum (degree 1 in the gradient) by a Hessian estimate (degree 2 under W' = αW), so its step is of degree -1 until the clip binds"
        ),
        notes=(
            "Sophia: pytorch_optimizer.SophiaH, clip(m / max(h, eps), p) with Hutchinson",
            "Hessian estimates: call loss.backward(create_graph=True) before step().",
            "Fused attention kernels may lack a double backward: run the forward and",
            "backward under torch.nn.attention.sdpa_kernel(SDPBackend.MATH).",
            "The clip threshold p (default 0.01) bounds each entry by p rather than 1 as",
            "in the idealised clip(., 1): a constant factor on the step at every width,",
            "absorbed by the base lr (keep p fixed when transferring). Decoupled weight",
            "decay (lr * wd), as assumed. eps (1e-12) floors the Hessian estimate h; it is",
            "not scaled: it matters only above both h (a Hessian diagonal, whose scale the",
            "declaration cannot give) and |m|/p (where it turns the clipped step into an SGD",
            "step m/eps), so no eps rule is declared.",
        ),
    )

    PROBE = ProbeSetup(
        label="pytorch_optimizer.SophiaH(hessian=g⊙g)",
        kwargs={"foreach": False},
        note="Hessian estimate g⊙g passed to step(); the clip at ±p (p=0.01) is active",
        hessian=True,
    )

    JAX = NoJax(
        reason="optax.contrib.sophia cannot be one group of multi_transform",
        notes=(
            "optax.contrib.sophia estimates the Hessian diagonal by differentiating",
            "obj_fn(params) over the whole tree, while optax.multi_transform hands each",
            "group a masked tree; run it alone, or pass your own transformation.",
        ),
    )
    return {"TORCH": TORCH, "PROBE": PROBE, "JAX": JAX}


__getattr__ = records_on_first_use(__name__, _records)
