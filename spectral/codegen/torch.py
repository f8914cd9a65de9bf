"""``spectral codegen``: a PyTorch config module of numbers from derived rules.

The module is rendered from ``templates/torch_config.py.j2``: the derived exponents, base
sizes, role → optimizer map and each optimizer's implementation record (``TORCH`` of its
catalog file, with the notes on how it was checked as comments), bound to the runtime
:mod:`spectral.torch` that applies them. Its contract: ``BASE_WIDTH``, ``BASE_DEPTH``,
``K``, ``OPTIMIZERS``, ``RULES``, ``hparams``, ``multipliers``, ``classify``, ``init_``,
``param_groups``, ``build_optimizers``, ``check``, ``set_base_shapes``. ``vendor=True`` writes one standalone
file instead (standard library and torch only), assembled by :mod:`spectral.codegen.vendor` from
the runtime's own sources, so both forms run the same code.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any
from fractions import Fraction
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
import textwrap

from ..catalog import module_of
from ..io import write_atomic
from ..text import for_docstring
from ..engine.result import Exponent
from ..spec import OptimizerSpec
from ..transfer import Plan, eps_place, plan

__all__ = ["FRAMEWORKS", "TORCH_RUNTIME", "load_generated", "render", "write"]

FRAMEWORKS = ("torch", "jax", "torchtitan")
"""What ``render(framework=...)`` writes a module for."""

TORCH_RUNTIME = (
    "spectral.scaling",
    "spectral.patterns",
    "spectral.optimizers.entry",
    "spectral.measure.fit",
    "spectral.torch.model.ties",
    "spectral.families.adapter",
    "spectral.families.gpt2",
    "spectral.families.llama",
    "spectral.families.gemma",
    "spectral.families.olmo2",
    "spectral.families.gemma2",
    "spectral.families.granite",
    "spectral.families.phi",
    "spectral.families.gptj",
    "spectral.families.falcon",
    "spectral.families.bloom",
    "spectral.families.moe",
    "spectral.families.residual_mlp",
    "spectral.families.neox",
    "spectral.families.opt",
    "spectral.families.litgpt",
    "spectral.families.torchtitan",
    "spectral.families.vit",
    "spectral.families.mamba",
    "spectral.families.bert",
    "spectral.families.modernbert",
    "spectral.families.hf_vit",
    "spectral.families",
    "spectral.torch.model.shapes",
    "spectral.torch.model.classify",
    "spectral.torch.optim.factories",
    "spectral.torch.optim.sharded",
    "spectral.torch.rules",
    "spectral.torch.apply.hooks",
    "spectral.torch.apply.absorb",
    "spectral.torch.apply.init",
    "spectral.torch.optim.composite",
    "spectral.torch.optim.experts",
    "spectral.torch.optim.groups",
    "spectral.torch.check.forward",
    "spectral.torch.check.twins",
    "spectral.torch.check.verdict",
    "spectral.torch.check.widths",
    "spectral.torch.check.model",
    "spectral.torch.apply.export",
    "spectral.torch.config",
)
"""The modules a vendored PyTorch config copies, in the order they build on one another."""

VENDOR_DEFAULT = False
"""What ``render(vendor=None)`` and :func:`load_generated` write: the importing form. The
test suite sets it to True (``SPECTRAL_TEST_VENDOR=1``) to run every generated-module test
on the standalone form too."""


_ASCII_HP = {"multiplier": "alpha", "init_var": "sigma^2", "lr": "lr", "weight_decay": "wd"}


def _ascii_power(sym: str, e: Fraction) -> str:
    if e == 1:
        return sym
    text = str(e)
    return f"{sym}^{text}" if e.denominator == 1 and e > 0 else f"{sym}^({text})"


def _comment(hp: str, e: Exponent) -> str:
    base = _ASCII_HP.get(hp, hp)
    parts = [_ascii_power(s, x) for s, x in (("r_n", e.r_n), ("r_L", e.r_L)) if x != 0]
    base += "_base"
    return base if not parts else f"{base} * " + " * ".join(parts)


def _version() -> str:
    try:
        return version("spectral-mup")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0"


def _environment():
    from ..templating import environment

    return environment()


def _measured(name: str, spec: OptimizerSpec) -> Any:
    """The TorchImpl of a declaration that records the class it was measured on
    (``spectral infer`` writes ``[implementation]``): built as it was measured."""
    import textwrap

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


def _impl_literal(impl: object) -> str:
    """A TorchImpl as Python: the fields that differ from the defaults, notes left out
    (they are written as comments above it)."""
    from dataclasses import fields

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


def _title(p: Plan) -> str:
    if p.others is None:
        return p.hidden
    return f"{p.hidden} (hidden weights) + {p.others} (the rest)"


def _assignment(p: Plan) -> str:
    by_opt: dict[str, list[str]] = {}
    for r, o in p.optimizers.items():
        by_opt.setdefault(o, []).append(r)
    text = "Roles: " + "; ".join(f"{o} trains {', '.join(rs)}" for o, rs in by_opt.items())
    return "\n".join(textwrap.wrap(text + ".", 88))


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
) -> str:
    """The source of the config module (deterministic: same inputs, same bytes).

    ``hidden`` may be a :class:`~spectral.transfer.Plan` already derived (the CLI derives
    once); its own ``others``, ``k`` and catalog then apply.

    ``framework="jax"`` renders the JAX / optax module (:mod:`spectral.codegen.jax`) from
    the same rules and numbers; ``"torch"`` (the default) the PyTorch one. ``vendor=True``
    writes the standalone form (the runtime's sources copied in); None takes
    :data:`VENDOR_DEFAULT` (False: the module imports the runtime). ``all_roles`` adds
    the roles placed by their dimensions (``docs/roles.md``; a derived ``Plan`` has its own).
    ``absorb=True`` writes the hook-free form (:mod:`spectral.engine.absorb`): every
    multiplier 1, carried by the init, lr, weight decay and eps of the modules it scaled.
    """
    if vendor is None:
        vendor = VENDOR_DEFAULT
    for what, v in (("base width", base_width), ("base depth", base_depth)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            from ..errors import SpecError

            raise SpecError(f"{what} must be a positive integer, got {v!r}")
    if framework not in FRAMEWORKS:
        from ..errors import SpecError

        raise SpecError(f"framework must be one of {', '.join(FRAMEWORKS)}, got {framework!r}")
    if isinstance(hidden, Plan):  # already derived (the CLI derives once)
        p, k = hidden, hidden.k
    else:
        p = plan(hidden, others, k, catalog=catalog, all_roles=all_roles)
    if command is None:
        command = f"spectral codegen {p.hidden}"
        if p.others:
            command += f" --others {p.others}"
        command += f" --k {k} --base-width {base_width} --base-depth {base_depth}"
        if p.all_roles:
            command += " --all-roles"
        if framework != "torch":
            command += f" --framework {framework}"
        if vendor:
            command += " --vendor"
        if absorb:
            command += " --absorb-multipliers"
    rules = []
    for r, hps in p.rules.items():
        rules.append(
            {
                "name": r,
                "optimizer": p.optimizers[r],
                "hps": [
                    {
                        "name": hp,
                        "a": repr(float(e.r_n)),
                        "b": repr(float(e.r_L)),
                        "comment": _comment(hp, e),
                    }
                    for hp, e in hps.items()
                ],
            }
        )
    kinds = []
    for name in dict.fromkeys(p.optimizers.values()):
        spec = p.derivations[name].spec
        module = module_of(name) if p.is_builtin(name) else None
        impl = None if module is None else module.TORCH
        if impl is None and spec.implementation is not None:
            impl = _measured(name, spec)
        if impl is None:
            notes: tuple[str, ...] = (
                f"{name}: a user declaration (update_norm = {spec.update_norm}); no",
                "implementation is known. Pass build_optimizers(...,",
                f"factories={{'{name}': fn}}), fn(groups, **kwargs) -> torch optimizer, whose",
                "step is the declared one: dW = -lr * (A + weight_decay * W).",
            )
        else:
            notes = impl.notes
        kinds.append(
            {
                "name": name,
                "matrix_only": not spec.applies_to_biases,
                "has_eps": spec.has_eps,
                "eps_key": eps_place(spec)[0],
                "eps_index": eps_place(spec)[1],
                "default_eps": repr(impl.default_eps)
                if spec.has_eps and impl is not None and impl.default_eps is not None
                else None,
                "notes": notes,
                "impl": None if impl is None else _impl_literal(impl),
            }
        )
    uncovered_note = ""
    if p.uncovered:
        who = f"--others {p.others}" if p.others else f"{p.hidden} (and no --others)"
        uncovered_note = (
            f"{who} trains matrices only, so no optimizer trains\n"
            f"{', '.join(p.uncovered)}: the model must have no biases and no norm\n"
            "parameters (init_ and param_groups raise otherwise, naming the parameter)."
        )
    env = _environment()
    context = dict(
        title=_title(p),
        command=for_docstring(command),  # holds user paths: keep the docstring closed
        version=_version(),
        k=k,
        base_width=base_width,
        base_depth=base_depth,
        optimizers=list(p.optimizers.items()),
        rules=rules,
        kinds=kinds,
        kind_names=[kd["name"] for kd in kinds],
        assignment=_assignment(p),
        uncovered=p.uncovered,
        uncovered_note=uncovered_note,
        absorbed=absorbed_context(p) if absorb or framework == "torchtitan" else None,
    )
    if framework == "jax":
        from .jax import render_jax

        return render_jax(env, context, p, vendor=vendor)
    if framework == "torchtitan":
        from .torchtitan import render_torchtitan

        return render_torchtitan(env, context, p)
    template = env.get_template("torch_config.py.j2")
    if not vendor:
        return template.render(**context, vendor=False)
    return _vendored(template.render(**context, vendor=True))


def absorbed_context(p: Plan) -> list[dict[str, Any]]:
    """Per optimizer of the plan: (p, q) and the carriers' absorbed rules, verified by
    :func:`spectral.engine.absorb.absorb`; refused where the implementation's step is not
    homogeneous in the gradient as its declaration is."""
    from ..engine.absorb import absorb
    from ..errors import SpecError

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
                _comment(hp, e) for hp, e in a.rules[r].items() if hp != "multiplier"
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


def _vendored(source: str) -> str:
    """The standalone form: the config's docstring, the runtime's sources, its numbers."""
    from .vendor import assemble

    tree = ast.parse(source)
    doc_end = tree.body[0].end_lineno or 0
    lines = source.splitlines(keepends=True)
    header, tail = "".join(lines[:doc_end]), "".join(lines[doc_end:])
    return assemble(TORCH_RUNTIME, tail, header=header)


def write(path: str | Path, source: str, *, force: bool = False) -> Path:
    """Write the module atomically; an existing file is kept unless ``force``."""
    return write_atomic(path, source, force=force)


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
):
    """Render the config module, write it to ``folder/<name>.py`` and import it.

    ``hidden`` and ``others`` are catalog names or declarations (a user's spec: its module
    has no built-in factory, so pass ``build_optimizers(..., factories={spec.name: fn})``);
    ``all_roles`` as in :func:`render`.
    The file is rewritten only when its bytes differ; the imported module is cached per
    (inputs, folder), so the sweep and the coordinate check build every point from the same
    module object. ``absorb=True``: the hook-free form. Imports torch (the generated module
    does).
    """
    import hashlib
    import importlib.util
    import sys

    from ..catalog import catalog

    if vendor is None:
        vendor = VENDOR_DEFAULT
    key = (hidden, others, k, base_width, base_depth, str(folder), name, vendor, all_roles, absorb)
    if key in _LOADED:
        return _LOADED[key]
    labels = [x if isinstance(x, str) else x.name for x in (hidden, others) if x is not None]
    same = len(labels) == 2 and labels[0] == labels[1]
    source = render(hidden, None if same else others, k,
                    base_width=base_width, base_depth=base_depth, vendor=vendor,
                    all_roles=all_roles, absorb=absorb)
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
