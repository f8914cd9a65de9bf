"""``spectral codegen --framework jax``: the same rules as a JAX / optax config of numbers.

The module is rendered from ``templates/jax_config.py.j2`` with the context that
:func:`spectral.codegen.render` builds for the PyTorch module, so ``BASE_WIDTH``,
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
from dataclasses import fields
from typing import Any

from ..catalog import module_of
from ..optimizers.entry import JaxImpl, NoJax

__all__ = ["JAX_RUNTIME", "render_jax"]

JAX_RUNTIME = (
    "spectral.errors",
    "spectral.scaling",
    "spectral.patterns",
    "spectral.optimizers.entry",
    "spectral.jax.labels",
    "spectral.jax.init",
    "spectral.jax.transforms",
    "spectral.jax.rules",
    "spectral.jax.optim",
    "spectral.jax.config",
)
"""The modules a vendored JAX config copies, in the order they build on one another."""

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


def render_jax(env: Any, context: dict[str, Any], p: Any, *, vendor: bool = False) -> str:
    """The JAX module's source from the PyTorch module's ``context`` (same numbers)."""
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
    template = env.get_template("jax_config.py.j2")
    source = template.render({**context, "kinds": kinds, "vendor": vendor})
    return _vendored(source) if vendor else source


def _vendored(source: str) -> str:
    """The standalone form: the config's docstring, the runtime's sources, its numbers."""
    from .vendor import assemble

    tree = ast.parse(source)
    doc_end = tree.body[0].end_lineno or 0
    lines = source.splitlines(keepends=True)
    header, tail = "".join(lines[:doc_end]), "".join(lines[doc_end:])
    return assemble(JAX_RUNTIME, tail, header=header)
