"""What the measurements share: role shapes, the μP-aligned init, the step's norm, factories.

:mod:`spectral.measure.probe` (a declaration against its implementation), :mod:`spectral.infer` (a
declaration from an implementation) and :mod:`spectral.coordcheck` (rules against training)
measure the same things the same way; this module holds those pieces, so that none of the
three imports another (the RMS, the slope fit and the tolerances are
:mod:`~spectral.measure.fit`'s, which the runtime shares):

* :data:`SHAPES` and :data:`D0` — the matrix (or vector) each role is measured on;
* :func:`mup_init` — the probe's μP-aligned initial weights;
* :func:`rms_operator_norm` — the RMS→RMS operator norm of a step;
* :func:`factory_label` and :func:`checked_factory` — a user's optimizer factory, named and
  wrapped so that its failures are one-line :class:`~spectral.errors.SpecError`\\ s.

torch is passed in (``torch`` arguments) or imported inside functions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..errors import SpecError, first_line

__all__ = [
    "D0",
    "SHAPES",
    "checked_factory",
    "factory_label",
    "mup_init",
    "rms_operator_norm",
]

D0 = 32
"""Fixed input/output dimension ``d0`` of the input and output roles."""

SHAPES: dict[str, tuple[str, Callable[[int, int], tuple[int, ...]]]] = {
    "input_weight": ("n × d0", lambda n, d0: (n, d0)),
    "hidden_weight": ("n × n", lambda n, d0: (n, n)),
    "output_weight": ("d0 × n", lambda n, d0: (d0, n)),
    "input_bias": ("n", lambda n, d0: (n,)),
    "hidden_bias": ("n", lambda n, d0: (n,)),
}
"""Role name → (shape as text, ``(n, d0) → (n_out, n_in)``); a bias is a vector of ``n``."""


def mup_init(shape: tuple[int, ...], gen: Any, torch: Any) -> Any:
    """μP-aligned init ``σ² = min(1, n_out/n_in)/n_in``; biases 0 (only SSO looks at ``W``)."""
    if len(shape) == 1:
        return torch.zeros(shape)
    n_out, n_in = shape
    var = min(1.0, n_out / n_in) / n_in  # the readout's Θ(1) init is irrelevant to one step
    return torch.randn(shape, generator=gen, dtype=torch.float64).float() * math.sqrt(var)


def rms_operator_norm(delta: Any, torch: Any) -> float:
    """``sqrt(n_in/n_out)·‖Δ‖_2``; a vector of length ``n`` is an ``n × 1`` matrix."""
    d = delta.detach().to(torch.float64)
    if d.ndim == 1:
        return float(d.norm() / math.sqrt(d.numel()))
    n_out, n_in = d.shape
    return float(math.sqrt(n_in / n_out) * torch.linalg.matrix_norm(d, ord=2))


def factory_label(factory: Callable[..., Any]) -> str:
    """``module:qualname`` of a factory (its ``repr`` when it has no such names)."""
    module = getattr(factory, "__module__", None)
    qual = getattr(factory, "__qualname__", None)
    return f"{module}:{qual}" if module and qual else repr(factory)


def checked_factory(factory: Callable[..., Any], label: str) -> Callable[..., Any]:
    """``factory`` whose failures are one-line :class:`SpecError`\\ s naming ``label``: an
    exception it raises, or a result that is not a ``torch.optim.Optimizer``."""

    def call(groups: list, **kwargs: Any) -> Any:
        import torch

        try:
            opt = factory(groups, **kwargs)
        except Exception as exc:  # the user's code: any failure is bad input
            raise SpecError(f"factory {label} raised {first_line(exc)}") from None
        if not isinstance(opt, torch.optim.Optimizer):
            raise SpecError(
                f"factory {label} returned {type(opt).__name__}, not a torch.optim.Optimizer; "
                "it is called as fn(param_groups, **kwargs)"
            )
        return opt

    return call
