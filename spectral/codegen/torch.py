"""``spectral codegen --framework torch`` (the default): a PyTorch config module of numbers.

The module is rendered from ``templates/torch_config.py.j2`` with the shared context
(:mod:`spectral.codegen.context`: the derived exponents, base sizes, role → optimizer map)
and each optimizer's implementation record (:mod:`spectral.codegen.torch_records`: ``TORCH``
of its catalog file, with the notes on how it was checked as comments), bound to the
runtime :mod:`spectral.torch` that applies them. Its contract: ``BASE_WIDTH``,
``BASE_DEPTH``, ``K``, ``OPTIMIZERS``, ``RULES``, ``hparams``, ``multipliers``,
``classify``, ``init_``, ``param_groups``, ``build_optimizers``, ``check``,
``set_base_shapes``. ``vendor=True`` writes one standalone file instead (standard library
and torch only), assembled by :mod:`spectral.codegen.vendor` from the runtime's own
sources (``TORCH_RUNTIME``: spectral.torch, spectral.families and what they import, derived
from their sources), so both forms run the same code. :func:`load_generated`
writes and imports one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..io import write_atomic
from ..spec import OptimizerSpec
from ..transfer import Plan
from .context import build, vendor_default
from .torch_records import absorbed_context, torch_kinds

# TORCH_RUNTIME is made by __getattr__ when first asked
__all__ = ["TORCH_RUNTIME", "check_options", "load_generated", "render"]  # noqa: F822


def __getattr__(name: str) -> tuple[str, ...]:
    # derived when first asked (spectral.codegen.vendor reads every runtime source: a
    # moment that writing an importing config does not need)
    if name == "TORCH_RUNTIME":
        from .vendor import runtime_modules

        return runtime_modules("torch")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _environment():
    from ..templating import environment

    return environment()


def check_options(*, vendor: bool | None, absorb: bool) -> None:
    """Every form is written: importing or standalone, hooked or hook-free."""


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
    """The PyTorch config module's source (deterministic: same inputs, same bytes).

    Arguments as :func:`spectral.codegen.render`'s. ``vendor=True`` writes the standalone
    form (the runtime's sources copied in); None takes
    :data:`~spectral.codegen.context.VENDOR_DEFAULT`. ``absorb=True`` writes the hook-free
    form (:mod:`spectral.engine.absorb`): every multiplier 1, carried by the init, lr, weight
    decay and eps of the modules it scaled.
    """
    vendor = vendor_default(vendor)
    p, context = build(
        hidden, others, k, base_width=base_width, base_depth=base_depth, framework="torch",
        catalog=catalog, command=command, vendor=vendor, all_roles=all_roles, absorb=absorb,
        base_run=base_run,
    )  # fmt: skip
    context["kinds"] = torch_kinds(context["kinds"], p)
    if absorb:
        context["absorbed"] = absorbed_context(p)
    source = _environment().get_template("torch_config.py.j2").render(**context, vendor=vendor)
    return _vendored(source) if vendor else source


def _vendored(source: str) -> str:
    """The standalone form: the config's docstring, the runtime's sources, its numbers."""
    from .vendor import runtime_modules, standalone

    return standalone(source, runtime_modules("torch"))


_LOADED: dict[tuple, object] = {}


def load_generated(
    hidden: str | OptimizerSpec,
    others: str | OptimizerSpec | None = None,
    k: int = 2,
    *,
    base_width: int,
    base_depth: int,
    folder: str | Path,
    name: str | None = None,
    vendor: bool | None = None,
    all_roles: bool = False,
    absorb: bool = False,
    base_run: Mapping[str, float] | None = None,
):
    """Render the config module, write it to ``folder/<name>.py`` and import it.

    ``hidden`` and ``others`` are catalog names or declarations (a user's spec: its module
    has no built-in factory, so pass ``build_optimizers(..., factories={spec.name: fn})``);
    ``all_roles`` and ``base_run`` as in :func:`render`.
    The file is rewritten only when its bytes differ; the imported module is cached per
    (inputs, folder), so the sweep and the coordinate check build every point from the same
    module object. ``absorb=True``: the hook-free form. Imports torch (the generated module
    does).
    """
    import hashlib
    import importlib.util
    import sys

    from ..catalog import catalog

    vendor = vendor_default(vendor)
    run = tuple(sorted((base_run or {}).items()))
    key = (hidden, others, k, base_width, base_depth, str(folder), name, vendor, all_roles, absorb,
           run)  # fmt: skip
    if key in _LOADED:
        return _LOADED[key]
    labels = [x if isinstance(x, str) else x.name for x in (hidden, others) if x is not None]
    same = len(labels) == 2 and labels[0] == labels[1]
    source = render(hidden, None if same else others, k,
                    base_width=base_width, base_depth=base_depth, vendor=vendor,
                    all_roles=all_roles, absorb=absorb, base_run=base_run)
    if name is None:
        name = "config_" + "_".join(labels) + f"_k{k}"
        user = [x for x in (hidden, others) if isinstance(x, OptimizerSpec)]
        if any(catalog().get(x.name) != x for x in user):
            # a user's declaration may share a catalog name: never share its file
            name += "_" + hashlib.sha256(source.encode()).hexdigest()[:10]
        if vendor:
            name += "_vendored"
        if all_roles:
            name += "_all_roles"
        if absorb:
            name += "_absorbed"
        if run:
            name += "_" + hashlib.sha256(repr(run).encode()).hexdigest()[:10]
    name = name.replace("+", "_").replace("-", "_").replace(".", "_")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    if not path.is_file() or path.read_text(encoding="utf-8") != source:
        write_atomic(path, source, force=True)
    spec = importlib.util.spec_from_file_location(f"spectral_generated_{name}", path)
    if spec is None or spec.loader is None:  # a .py path always has a loader
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    # registered like an import: torch.compile looks hook functions' modules up by name
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    _LOADED[key] = module
    return module
