"""How one catalog optimizer runs: the implementation data each ``optimizers/<name>.py`` holds.

Standard library only, so the runtime (:mod:`spectral.torch`, :mod:`spectral.jax`) and the
generated config modules can build optimizers from these records without importing sympy.
A declaration (``SPEC``, the engine's side) says how large the update is; these records say
which real implementation takes that step and how it was checked against the declaration.
``spectral codegen`` writes the records of the optimizers a config uses into the module as
literals (``repr`` of each record is valid Python), so a generated file holds numbers and
names, never code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["COMPENSATIONS", "JaxImpl", "NoJax", "ProbeSetup", "SHARDINGS", "TorchImpl"]

SHARDINGS = ("elementwise", "gathered", "refused")
"""How an optimizer steps FSDP2-sharded (DTensor) parameters: on the shards as they are
(its update acts entry by entry), on gathered whole matrices, or not at all."""

COMPENSATIONS = ("muon-shape", "sso-shape")
"""Per-matrix factors by which an implementation's step exceeds the declared one; the
runtime divides the group's lr by the factor and multiplies its weight decay by it."""


@dataclass(frozen=True)
class TorchImpl:
    """A torch optimizer class and the arguments that make its step the declared one.

    ``cls`` is a dotted path (``"torch.optim.AdamW"``, ``"pytorch_optimizer.Lion"``),
    imported when the optimizer is built. ``fixed`` holds arguments the rules need (a user
    value that differs is refused); ``defaults`` arguments given unless the user gives their
    own; ``group_defaults`` keys written into every param group.
    """

    cls: str
    fixed: dict[str, Any] = field(default_factory=dict)
    defaults: dict[str, Any] = field(default_factory=dict)
    group_defaults: dict[str, Any] = field(default_factory=dict)
    compensation: str | None = None
    """One of :data:`COMPENSATIONS`, or None when the step is the declared one."""
    default_eps: float | None = None
    """The implementation's default eps: the base value when none is given."""
    sharding: str = "gathered"
    """One of :data:`SHARDINGS`."""
    sharding_note: str = ""
    """Why a ``"refused"`` optimizer cannot step sharded parameters."""
    coupling_option: str | None = None
    """An option that, when on, scales every step by one norm over all parameters
    (refused on sharded parameters)."""
    notes: tuple[str, ...] = ()
    """Comment lines: the idealised update against the implementation, and the fixes."""
    not_homogeneous: str = ""
    """Why the implementation's step is not homogeneous in the gradient as its declaration
    is (a trust ratio, a Hessian, a warm-up that switches rules): its hyperparameters cannot
    absorb a multiplier (``--absorb-multipliers`` refuses; tests/engine/test_absorb.py measures it)."""

    def __post_init__(self) -> None:
        if self.sharding not in SHARDINGS:
            raise ValueError(f"sharding: {self.sharding!r}; use one of {SHARDINGS}")
        if self.compensation is not None and self.compensation not in COMPENSATIONS:
            raise ValueError(
                f"compensation: {self.compensation!r}; use one of {COMPENSATIONS}"
            )
        if self.sharding == "refused" and not self.sharding_note:
            raise ValueError("sharding='refused' needs a sharding_note saying why")
        if "." not in self.cls:
            raise ValueError(f"cls: {self.cls!r} must be a dotted path (module.Class)")


@dataclass(frozen=True)
class JaxImpl:
    """An optax transformation that takes the declared step.

    ``recipe`` says how :mod:`spectral.jax` calls ``transform`` (a dotted path):
    ``"decoupled"``: ``transform(learning_rate, weight_decay=..., [eps=...,] **kwargs)``;
    ``"coupled"``: ``chain(add_decayed_weights(wd), transform(learning_rate, [eps=...,]
    **kwargs))``; ``"unscaled-muon"``: ``chain(transform(<(in, out) kernels>, **kwargs),
    add_decayed_weights(wd), scale_by_learning_rate(learning_rate))``. eps is passed only
    to an optimizer whose declaration has an eps rule. ``fixed`` holds arguments the rules
    need (a user value that differs is refused).
    """

    transform: str
    recipe: str = "decoupled"
    fixed: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.recipe not in ("decoupled", "coupled", "unscaled-muon"):
            raise ValueError(f"recipe: {self.recipe!r}")
        if "." not in self.transform:
            raise ValueError(
                f"transform: {self.transform!r} must be a dotted path (optax.name)"
            )


@dataclass(frozen=True)
class NoJax:
    """Why the JAX module has no factory for this optimizer."""

    reason: str
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProbeSetup:
    """How ``spectral probe`` steps the real implementation (``TORCH.cls``) of an optimizer.

    The probe builds ``cls([{"params": [W], **group_keys}], lr=1.0, weight_decay=0.0,
    **kwargs)``, takes ``steps`` steps with one gradient and measures the last change.
    """

    label: str
    """Human-readable class and arguments (recorded in probe results)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    group_keys: dict[str, Any] = field(default_factory=dict)
    steps: int = 1
    note: str = ""
    hessian: bool = False
    """SophiaH: pass a diagonal Hessian estimate ``g * g`` to ``step``."""
    init: str | None = None
    """``"unit-sphere"``: start from ``|W|_F = 1`` instead of the muP init (LAMB)."""
