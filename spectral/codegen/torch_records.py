"""What the targets built on the PyTorch runtime share: each optimizer's ``TorchImpl``.

The torch and torchtitan modules (and a Megatron one, when written) build their optimizers
from the same implementation record: the ``TORCH`` of the optimizer's catalog file, or for a
declaration ``spectral infer`` measured, the class it was measured on. :func:`torch_kinds`
adds it (as Python, with its notes as comments) to the shared context's optimizers, and
:func:`absorbed_context` gives the hook-free numbers, refused where the implementation's step
is not homogeneous in the gradient as its declaration is. Nothing here imports torch.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import fields
from typing import Any

from ..catalog import module_of
from ..errors import SpecError
from ..spec import OptimizerSpec
from ..transfer import Plan
from .context import comment

__all__ = ["absorbed_context", "impl_literal", "torch_impl", "torch_kinds"]


def _measured(name: str, spec: OptimizerSpec) -> Any:
    """The TorchImpl of a declaration that records the class it was measured on
    (``spectral infer`` writes ``[implementation]``): built as it was measured."""
    from spectral.optimizers.entry import TorchImpl

    assert spec.implementation is not None
    path, kwargs, group, eps = spec.implementation
    text = (
        f"{name}: {path}, the class this declaration was measured on by spectral infer "
        f"(update_norm = {spec.update_norm}), built with the arguments it was measured "
        "with; it runs gathered on FSDP2 shards (its update is not known to be "
        "entry-wise). A measured declaration holds for the measured regime only: check "
        "it with spectral coord-check before a long run."
    )
    return TorchImpl(
        cls=path,
        defaults={k: v for k, v in kwargs},
        group_defaults={k: v for k, v in group},
        default_eps=eps if spec.has_eps else None,
        notes=tuple(textwrap.wrap(text, 84)),
    )


def torch_impl(name: str, p: Plan) -> Any:
    """The optimizer's TorchImpl: its catalog file's, the measured class's, or None (a
    user's declaration with no known implementation)."""
    spec = p.derivations[name].spec
    module = module_of(name) if p.is_builtin(name) else None
    impl = None if module is None else module.TORCH
    if impl is None and spec.implementation is not None:
        impl = _measured(name, spec)
    return impl


def impl_literal(impl: object) -> str:
    """A TorchImpl as Python: the fields that differ from the defaults, notes left out
    (they are written as comments above it)."""
    args = [f"{impl.cls!r}"]  # type: ignore[attr-defined]
    for f in fields(impl):  # type: ignore[arg-type]
        if f.name in ("cls", "notes", "not_homogeneous"):  # comments; codegen refuses
            continue
        value = getattr(impl, f.name)
        default = f.default_factory() if callable(f.default_factory) else f.default
        if value != default:
            args.append(f"{f.name}={value!r}")
    args = [a.replace("'", '"') if '"' not in a else a for a in args]
    text = "TorchImpl(" + ", ".join(args) + ")"
    if len(text) > 60:  # as ruff format lays it out: one argument a line
        text = "TorchImpl(\n" + "".join(f"        {a},\n" for a in args) + "    )"
    ast.parse(text)  # a literal the module can run
    return text


def torch_kinds(kinds: list[dict[str, Any]], p: Plan) -> list[dict[str, Any]]:
    """The shared context's optimizers with each one's TorchImpl (``impl``, Python) and the
    notes written above it."""
    out = []
    for kind in kinds:
        name = kind["name"]
        impl = torch_impl(name, p)
        if impl is None:
            spec = p.derivations[name].spec
            notes: tuple[str, ...] = (
                f"{name}: a user declaration (update_norm = {spec.update_norm}); no",
                "implementation is known. Pass build_optimizers(...,",
                f"factories={{'{name}': fn}}), fn(groups, **kwargs) -> torch optimizer, whose",
                "step is the declared one: dW = -lr * (A + weight_decay * W).",
            )
        else:
            notes = impl.notes
        out.append({**kind, "notes": notes, "impl": None if impl is None else impl_literal(impl)})
    return out


def absorbed_context(p: Plan) -> list[dict[str, Any]]:
    """Per optimizer of the plan: (p, q) and the carriers' absorbed rules, verified by
    :func:`spectral.engine.absorb.absorb`; refused where the implementation's step is not
    homogeneous in the gradient as its declaration is."""
    from ..engine.absorb import absorb

    out = []
    for name in dict.fromkeys(p.optimizers.values()):
        module = module_of(name) if p.is_builtin(name) else None
        impl = None if module is None else module.TORCH
        reason = getattr(impl, "not_homogeneous", "")
        if reason:
            raise SpecError(f"--absorb-multipliers: {name} cannot absorb a multiplier: {reason}")
        a = absorb(p.derivations[name])
        roles = [r for r, o in p.optimizers.items() if o == name]
        carried = []
        for r in roles:
            text = f"{name}, {r}: " + ", ".join(
                comment(hp, e) for hp, e in a.rules[r].items() if hp != "multiplier"
            )
            carried += textwrap.wrap(text, 84, subsequent_indent="    ")
        out.append(
            {
                "name": name,
                "p": repr(float(a.p)),
                "q": "None" if a.q is None else repr(float(a.q)),
                "carried": carried,
            }
        )
    return out
