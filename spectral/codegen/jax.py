"""``spectral codegen --framework jax``: the same rules as a JAX / optax config of numbers.

The module is rendered from ``templates/jax_config.py.j2`` with the context that
:mod:`spectral.codegen.context` builds for every target, so ``BASE_WIDTH``,
``BASE_DEPTH``, ``K``, ``OPTIMIZERS``, ``RULES`` and ``DEFAULT_EPS`` are the same numbers
in both and ``hparams`` (:class:`spectral.scaling.Rules`, shared) returns exactly what the
PyTorch module's returns. What differs is how each optimizer is built: the ``JAX`` record
of each catalog file (:class:`~spectral.optimizers.entry.JaxImpl`, with the notes on how it
was checked as comments) or, where optax has none (``NoJax``), the reason, which the
runtime :mod:`spectral.jax` gives when ``optimizer()`` is called without
``transforms={name: fn}``. ``vendor=True`` writes one standalone file (standard library,
jax and optax only), assembled by :mod:`spectral.codegen.vendor` from the runtime's own sources.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import fields

from ..catalog import module_of
from ..errors import SpecError
from ..optimizers.entry import JaxImpl, NoJax
from ..spec import OptimizerSpec
from ..templating import environment
from ..transfer import Plan
from .context import build, vendor_default

# JAX_RUNTIME is made by __getattr__ when first asked
__all__ = ["JAX_RUNTIME", "check_options", "render"]  # noqa: F822


def __getattr__(name: str) -> tuple[str, ...]:
    # derived when first asked, as spectral.codegen.torch's TORCH_RUNTIME
    if name == "JAX_RUNTIME":
        from .vendor import runtime_modules

        return runtime_modules("jax")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_LINE = 88  # ruff format's default width: the module passes `ruff format --check`


def _record(name: str, impl: JaxImpl) -> str:
    """The dict entry ``"name": JaxImpl(...),`` as ruff format lays it out: the fields that
    differ from the defaults, notes left out (they are written as comments above it)."""
    args = [repr(impl.transform)]
    for f in fields(impl):
        if f.name in ("transform", "notes"):
            continue
        value = getattr(impl, f.name)
        default = f.default_factory() if callable(f.default_factory) else f.default
        if value != default:
            args.append(f"{f.name}={value!r}")
    args = [a.replace("'", '"') if '"' not in a else a for a in args]
    line = f'"{name}": JaxImpl(' + ", ".join(args) + "),"
    if len(line) + 4 > _LINE:
        line = f'"{name}": JaxImpl(\n' + "".join(f"        {a},\n" for a in args) + "    ),"
    ast.parse("{" + line + "}")  # a literal the module can run
    return line


def _jax_record(name: str, builtin: bool) -> JaxImpl | NoJax:
    """The catalog file's JAX record; a user's declaration has no implementation."""
    module = module_of(name) if builtin else None
    if module is None:
        return NoJax(reason="a user declaration; no implementation is known")
    record = getattr(module, "JAX", None)
    if not isinstance(record, (JaxImpl, NoJax)):
        return NoJax(reason="no optax factory is set up for it")
    return record


def check_options(*, vendor: bool | None, absorb: bool) -> None:
    """Refuses the hook-free form: the JAX runtime has none (nothing would carry the
    multipliers, and the module written would still expect them applied)."""
    if absorb:
        raise SpecError(
            "--absorb-multipliers applies to --framework torch only: the JAX runtime has no "
            "hook-free form (its model applies multipliers(width, depth) itself)"
        )


def render(
    hidden: str | OptimizerSpec | Plan,
    others: str | OptimizerSpec | None = None,
    k: int = 2,
    *,
    base_width: int,
    base_depth: int,
    catalog: Mapping[str, OptimizerSpec] | None = None,
    command: str | None = None,
    vendor: bool | None = None,
    all_roles: bool = False,
    absorb: bool = False,
    base_run: Mapping[str, float] | None = None,
) -> str:
    """The JAX module's source; arguments as :func:`spectral.codegen.render`'s."""
    check_options(vendor=vendor, absorb=absorb)
    vendor = vendor_default(vendor)
    p, context = build(
        hidden, others, k, base_width=base_width, base_depth=base_depth, framework="jax",
        catalog=catalog, command=command, vendor=vendor, all_roles=all_roles, base_run=base_run,
    )  # fmt: skip
    kinds = []
    for kind in context["kinds"]:
        name = kind["name"]
        record = _jax_record(name, p.is_builtin(name))
        if isinstance(record, JaxImpl):
            entry = {"impl": _record(name, record), "notes": record.notes, "reason": ""}
        else:
            reason = f"{name}: {record.reason}."
            entry = {"impl": None, "notes": record.notes, "reason": reason}
        kinds.append({**kind, **entry})
    template = environment().get_template("jax_config.py.j2")
    source = template.render({**context, "kinds": kinds, "vendor": vendor})
    return _vendored(source) if vendor else source


def _vendored(source: str) -> str:
    """The standalone form: the config's docstring, the runtime's sources, its numbers."""
    from .vendor import runtime_modules, standalone

    return standalone(source, runtime_modules("jax"))
