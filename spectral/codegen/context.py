"""What every generated config module is rendered from, whatever its framework.

:func:`build` derives the rules once (or takes a :class:`~spectral.transfer.Plan` already
derived) and returns the template context the targets share: the numbers (base sizes,
``k``, role → optimizer, each role's exponents, each optimizer's ε place and default ε),
the docstring text (title, the command that regenerates the module, the roles' assignment,
the note on roles no optimizer trains) and the version. A target (:mod:`~spectral.codegen.torch`,
:mod:`~spectral.codegen.jax`, :mod:`~spectral.codegen.torchtitan`) adds what only it knows:
how each optimizer is built in its framework. Nothing here imports torch or jax.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from fractions import Fraction
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from ..catalog import module_of
from ..engine.result import Exponent
from ..errors import SpecError
from ..spec import OptimizerSpec
from ..text import for_docstring
from ..transfer import Plan, eps_place, plan

__all__ = [
    "BASE_RUN_KEYS",
    "VENDOR_DEFAULT",
    "build",
    "check_base_run",
    "comment",
    "vendor_default",
]

VENDOR_DEFAULT = False
"""What ``render(vendor=None)`` and :func:`~spectral.codegen.load_generated` write: the
importing form. The test suite sets it to True (``SPECTRAL_TEST_VENDOR=1``) to run every
generated-module test on the standalone form too."""

_ASCII_HP = {"multiplier": "alpha", "init_var": "sigma^2", "lr": "lr", "weight_decay": "wd"}


def vendor_default(vendor: bool | None) -> bool:
    """``vendor``, or :data:`VENDOR_DEFAULT` (read when called: the test suite sets it)."""
    return VENDOR_DEFAULT if vendor is None else vendor


def _ascii_power(sym: str, e: Fraction) -> str:
    if e == 1:
        return sym
    text = str(e)
    return f"{sym}^{text}" if e.denominator == 1 and e > 0 else f"{sym}^({text})"


def comment(hp: str, e: Exponent) -> str:
    """The rule ``hp = base * r_n^a * r_L^b`` in ASCII, as a comment of the module."""
    base = _ASCII_HP.get(hp, hp)
    parts = [_ascii_power(s, x) for s, x in (("r_n", e.r_n), ("r_L", e.r_L)) if x != 0]
    base += "_base"
    return base if not parts else f"{base} * " + " * ".join(parts)


def _version() -> str:
    try:
        return version("spectral-mup")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0"


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


def _check_sizes(base_width: object, base_depth: object) -> None:
    for what, v in (("base width", base_width), ("base depth", base_depth)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise SpecError(f"{what} must be a positive integer, got {v!r}")


def _command(
    p: Plan,
    k: int,
    base_width: int,
    base_depth: int,
    framework: str,
    vendor: bool,
    absorb: bool,
    base_run: Mapping[str, float],
) -> str:
    """The ``spectral codegen`` line that writes the same module (Python callers)."""
    command = f"spectral codegen {p.hidden}"
    if p.others:
        command += f" --others {p.others}"
    command += f" --k {k} --base-width {base_width} --base-depth {base_depth}"
    for key, value in base_run.items():
        command += f" --{key.replace('_', '-')} {value:g}"
    if p.all_roles:
        command += " --all-roles"
    if framework != "torch":
        command += f" --framework {framework}"
    if vendor:
        command += " --vendor"
    if absorb:
        command += " --absorb-multipliers"
    return command


def _rules(p: Plan) -> list[dict[str, Any]]:
    """Per role: its optimizer and each HP's exponents (as Python floats and a comment)."""
    return [
        {
            "name": r,
            "optimizer": p.optimizers[r],
            "hps": [
                {
                    "name": hp,
                    "a": repr(float(e.r_n)),
                    "b": repr(float(e.r_L)),
                    "comment": comment(hp, e),
                }
                for hp, e in hps.items()
            ],
        }
        for r, hps in p.rules.items()
    ]


def _along(p: Plan) -> list[dict[str, Any]]:
    """Per optimizer: its rules along the horizon and the batch (``HP × r_D**d × r_B**b``),
    the same for every role it trains."""
    out = []
    for name in p.along():  # checks that every role of an optimizer has the same rules
        d = p.derivations[name]
        rows = []
        for a in d.along(d.roles[0]):
            pairs = (("r_D", a.horizon), ("r_B", a.batch))
            parts = [_ascii_power(sym, x) for sym, x in pairs if x]
            rows.append(
                {
                    "name": a.hp,
                    "d": repr(float(a.horizon)),
                    "b": repr(float(a.batch)),
                    "comment": "held" if not parts else " * ".join(parts),
                }
            )
        out.append({"name": name, "hps": rows})
    return out


BASE_RUN_KEYS = ("base_steps", "base_tokens", "base_batch")
"""What a config may record of the run its base values were tuned at."""


def check_base_run(base_run: Mapping[str, float] | None) -> dict[str, float]:
    """The base horizon and batch a config records, checked: known keys, positive numbers,
    steps or tokens (not both)."""
    from ..scaling import _run_number

    out: dict[str, float] = {}
    for key, value in (base_run or {}).items():
        if key not in BASE_RUN_KEYS:
            raise SpecError(f"base_run: unknown key {key!r}; use {', '.join(BASE_RUN_KEYS)}")
        if value is not None:
            try:
                out[key] = _run_number(key, value)
            except ValueError as exc:
                raise SpecError(f"base_run: {exc}") from None
    if {"base_steps", "base_tokens"} <= set(out):
        raise SpecError("base_run: give the base horizon as base_steps or base_tokens, not both")
    return {k: out[k] for k in BASE_RUN_KEYS if k in out}


def _default_eps(name: str, p: Plan, spec: OptimizerSpec) -> str | None:
    """The implementation's default ε as Python, one number in every framework: its catalog
    file's (``TORCH.default_eps``) or, for a measured declaration, the one it was measured
    with; None where the optimizer has no ε or no default is known."""
    module = module_of(name) if p.is_builtin(name) else None
    impl = None if module is None else module.TORCH
    if impl is not None:
        eps = impl.default_eps
    elif spec.implementation is not None:
        eps = spec.implementation[3]
    else:
        eps = None
    return repr(eps) if spec.has_eps and eps is not None else None


def _kinds(p: Plan) -> list[dict[str, Any]]:
    """Per optimizer, in the order the roles name them: what every framework's module says
    of it (a target adds how its framework builds it)."""
    kinds = []
    for name in dict.fromkeys(p.optimizers.values()):
        spec = p.derivations[name].spec
        key, index = eps_place(spec)
        kinds.append(
            {
                "name": name,
                "matrix_only": not spec.applies_to_biases,
                "has_eps": spec.has_eps,
                "eps_key": key,
                "eps_index": index,
                "default_eps": _default_eps(name, p, spec),
            }
        )
    return kinds


def _uncovered_note(p: Plan) -> str:
    if not p.uncovered:
        return ""
    who = f"--others {p.others}" if p.others else f"{p.hidden} (and no --others)"
    return (
        f"{who} trains matrices only, so no optimizer trains\n"
        f"{', '.join(p.uncovered)}: the model must have no biases and no norm\n"
        "parameters (init_ and param_groups raise otherwise, naming the parameter)."
    )


def build(
    hidden: str | OptimizerSpec | Plan,
    others: str | OptimizerSpec | None = None,
    k: int = 2,
    *,
    base_width: int,
    base_depth: int,
    framework: str,
    catalog: Mapping[str, OptimizerSpec] | None = None,
    command: str | None = None,
    vendor: bool = False,
    all_roles: bool = False,
    absorb: bool = False,
    base_run: Mapping[str, float] | None = None,
) -> tuple[Plan, dict[str, Any]]:
    """(the plan, the shared template context); arguments as ``spectral.codegen.render``'s.

    ``framework`` names the target only in the default ``command`` line; ``absorbed`` is
    left None for the target to fill (the hook-free numbers depend on the implementation).
    ``base_run``: the horizon and batch the base values were tuned at (``base_steps`` or
    ``base_tokens``, ``base_batch``), the module's defaults for a run's.
    """
    _check_sizes(base_width, base_depth)
    run = check_base_run(base_run)
    if isinstance(hidden, Plan):  # already derived (the CLI derives once)
        p, k = hidden, hidden.k
    else:
        p = plan(hidden, others, k, catalog=catalog, all_roles=all_roles)
    if command is None:
        command = _command(p, k, base_width, base_depth, framework, vendor, absorb, run)
    kinds = _kinds(p)
    context = dict(
        title=_title(p),
        command=for_docstring(command),  # holds user paths: keep the docstring closed
        version=_version(),
        k=k,
        base_width=base_width,
        base_depth=base_depth,
        optimizers=list(p.optimizers.items()),
        rules=_rules(p),
        along=_along(p),
        base_run=[(key, repr(value)) for key, value in run.items()],
        kinds=kinds,
        kind_names=[kd["name"] for kd in kinds],
        assignment=_assignment(p),
        uncovered=p.uncovered,
        uncovered_note=_uncovered_note(p),
        absorbed=None,
    )
    return p, context
