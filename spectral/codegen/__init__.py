"""Code generation: config modules written from derived rules, one module per target.

:mod:`~spectral.codegen.context` builds what every module is rendered from (the numbers,
the rules, the docstring text); each target renders its framework's module from it:
:mod:`~spectral.codegen.torch` (PyTorch, the default), :mod:`~spectral.codegen.jax`
(JAX/optax), :mod:`~spectral.codegen.torchtitan` (torchtitan's param_groups) and
:mod:`~spectral.codegen.megatron` (Megatron-core's config_overrides), the
torch-based ones sharing :mod:`~spectral.codegen.torch_records`. No target imports another;
:func:`render` picks one. :mod:`~spectral.codegen.vendor` lays the runtime's own sources end
to end for ``--vendor``. Nothing here imports torch or jax.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType

from ..errors import SpecError
from ..io import write_atomic
from ..spec import OptimizerSpec
from ..transfer import Plan
from . import jax, megatron, torch, torchtitan
from .torch import load_generated

__all__ = ["FRAMEWORKS", "TORCH_RUNTIME", "check_options", "load_generated", "render", "write"]

_TARGETS: dict[str, ModuleType] = {
    "torch": torch,
    "jax": jax,
    "torchtitan": torchtitan,
    "megatron": megatron,
}

FRAMEWORKS = tuple(_TARGETS)
"""What ``render(framework=...)`` writes a module for."""


def __getattr__(name: str) -> tuple[str, ...]:
    if name == "TORCH_RUNTIME":  # derived from the sources when first asked
        return torch.TORCH_RUNTIME
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _target(framework: str) -> ModuleType:
    if framework not in _TARGETS:
        raise SpecError(f"framework must be one of {', '.join(FRAMEWORKS)}, got {framework!r}")
    return _TARGETS[framework]


def check_options(framework: str, *, vendor: bool | None = None, absorb: bool = False) -> None:
    """Refuses a form the target cannot write (the JAX module has no hook-free form, the
    torchtitan one no standalone form) before anything is derived."""
    _target(framework).check_options(vendor=vendor, absorb=absorb)


def render(
    hidden: str | OptimizerSpec | Plan,
    others: str | OptimizerSpec | None = None,
    k: int = 2,
    *,
    base_width: int,
    base_depth: int,
    catalog: Mapping[str, OptimizerSpec] | None = None,
    command: str | None = None,
    framework: str = "torch",
    vendor: bool | None = None,
    all_roles: bool = False,
    absorb: bool = False,
    base_run: Mapping[str, float] | None = None,
) -> str:
    """The source of the config module (deterministic: same inputs, same bytes).

    ``hidden`` may be a :class:`~spectral.transfer.Plan` already derived (the CLI derives
    once); its own ``others``, ``k`` and catalog then apply. ``framework``: one of
    :data:`FRAMEWORKS`. ``vendor=True`` writes the standalone form (the runtime's sources
    copied in); None takes :data:`~spectral.codegen.context.VENDOR_DEFAULT` (False: the
    module imports the runtime). ``all_roles`` adds the roles placed by their dimensions
    (``docs/roles.md``; a derived ``Plan`` has its own). ``absorb=True`` writes the hook-free
    form (:mod:`spectral.engine.absorb`): every multiplier 1, carried by the init, lr,
    weight decay and eps of the modules it scaled. ``command``: the line the module's
    docstring says regenerates it (default: the ``spectral codegen`` line of these inputs).
    ``base_run``: the horizon and batch the base values were tuned at (``base_steps`` or
    ``base_tokens``, ``base_batch``): the module records them as the defaults of a run's,
    whose lr, weight decay and eps then move by the rules along them (issue 49).
    """
    target: Callable[..., str] = _target(framework).render
    return target(
        hidden, others, k, base_width=base_width, base_depth=base_depth, catalog=catalog,
        command=command, vendor=vendor, all_roles=all_roles, absorb=absorb, base_run=base_run,
    )  # fmt: skip


def write(path: str | Path, source: str, *, force: bool = False) -> Path:
    """Write the module atomically; an existing file is kept unless ``force``."""
    return write_atomic(path, source, force=force)
