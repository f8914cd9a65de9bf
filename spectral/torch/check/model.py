"""check: do the model and the optimizer do what the rules say?"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from spectral.errors import ConfigTypeError, UnsupportedModelError
from spectral.scaling import RUN_KEYS, BaseValue, BaseValues
from spectral.torch.apply.absorb import absorbed_problems
from spectral.torch.apply.hooks import (
    builtin_multipliers,
    our_hooks,
    placement_problems,
    placements,
)
from spectral.torch.apply.init import (
    all_constant,
    init_record,
    not_finite,
    unset_line,
)
from spectral.torch.check.clipping import clipping_problems
from spectral.torch.check.compiled import compiled_problems
from spectral.torch.check.foreign import foreign_hook_problems
from spectral.torch.check.forward import example_batch, measured_problems
from spectral.torch.check.params import init_problems
from spectral.torch.check.run_rules import run_rule_problems
from spectral.torch.check.widths import fixed_rank_notes, widths_report
from spectral.torch.model.classify import Adapter
from spectral.torch.model.placement import Placement
from spectral.torch.model.trace import structure_disagreements, traced_structure
from spectral.torch.model.shapes import fans, head_dims, is_norm
from spectral.torch.optim.composite import (
    CompositeOptimizer,
    lr_ratio_problem,
    unwrap_optimizer,
)
from spectral.torch.optim.groups import role_param_groups
from spectral.torch.rules import TorchRules


class Findings(list[str]):
    """check()'s answer: a list of problems, one line each ([] when all is right), and
    ``notes``: what it could not judge and why (a model past its init, a parameter too
    small to judge), which are not problems."""

    def __init__(self, problems: Sequence[str] = (), notes: Sequence[str] = ()):
        super().__init__(problems)
        self.notes = list(notes)


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)


def _head_dim_problems(model: nn.Module, head_dim: int | None) -> list[str]:
    """The model's head dimensions against the base model's (none given: nothing)."""
    if head_dim is None:
        return []
    return [
        f"head dimension {found} differs from the base model's {head_dim}: the rules "
        "assume a fixed head dimension as the width grows (heads = width / head_dim) "
        "or 1/d attention scaling"
        for found in sorted(head_dims(model) - {head_dim})
    ]


def _size_problems(placement: Placement, width: float) -> list[str]:
    """The width given against the model's: the fan-out of its input weights."""
    found: dict[int, str] = {}
    for name, p, role, module in placement:
        if role == "input_weight" and p.ndim == 2 and not is_norm(module):
            found.setdefault(fans(module, p)[0], name)
    if not found or width in found:
        # one input weight of the width is enough: OPT projects a narrower token table
        # up to the width, and its position table has the width
        return []
    n, name = next(iter(found.items()))
    return [
        (
            f"the model's width is {n} ({name}), check was given width {width}: the rules at "
            "another size give other numbers"
        )
    ]


def _multiplier_problems(
    rules: TorchRules,
    model: nn.Module,
    width: float,
    depth: float,
    multiplier: BaseValue,
    family: Adapter | None,
) -> list[str]:
    problems = []
    hooks = our_hooks(model)
    builtin = builtin_multipliers(model)
    want = rules.multipliers(width, depth, multiplier)
    if not hooks and not builtin:
        message = (
            "block multipliers are not applied: call apply_multipliers(model, width, "
            f"depth) (alpha in/hidden/out = {want['input']:.6g}/{want['hidden']:.6g}/"
            f"{want['output']:.6g} at this size)"
        )
        return [message]
    if hooks and builtin:
        problems.append(
            "block multipliers applied twice: the model applies them in its forward pass "
            "and apply_multipliers hooks are installed too"
        )
    seen: dict[int, str] = {}
    for name, module, _, hook in hooks:
        if id(module) in seen:
            problems.append(f"block multiplier applied twice on {name or 'the model'}")
        seen[id(module)] = name
        layer, factor = hook.layer, hook.factor
        if not _close(factor, want[layer]):
            problems.append(
                f"{name}: alpha_{layer} is {factor:.6g}, the rules give {want[layer]:.6g} at "
                f"width {width}, depth {depth} (apply_multipliers for another size?)"
            )
    if hooks and family is not None:
        placed = placements(model, family)
        problems += placement_problems(placed, family, depth)
        for layer, modules in placed.items():
            for name, module in modules:
                if id(module) not in seen:
                    problems.append(f"alpha_{layer} missing on {name}")
    for module in model.modules():
        if getattr(module, "applies_mup_multipliers", False) and hasattr(
            module, "alpha_input"
        ):
            got: dict[str, Any] = {
                "input": module.alpha_input,
                "hidden": module.alpha_hidden,
                "output": module.alpha_output,
            }
            for layer, value in got.items():
                if not _close(float(value), want[layer]):
                    problems.append(
                        f"{type(module).__name__}: alpha_{layer} is {float(value):.6g}, the "
                        f"rules give {want[layer]:.6g} at width {width}, depth {depth}"
                    )
    return problems


def _parts(inner: Any) -> list[Any] | None:
    """The optimizers a container holds as ``.optimizers`` (torchtitan's
    OptimizersContainer, whose own param_groups is one placeholder), each unwrapped; None
    for an optimizer that is no such container."""
    parts = getattr(inner, "optimizers", None)
    if isinstance(inner, CompositeOptimizer) or not isinstance(parts, (list, tuple)):
        return None
    found = [unwrap_optimizer(part) for part in parts]
    if not found or not all(
        isinstance(getattr(part, "param_groups", None), list) for part in found
    ):
        return None
    return found


def optimizer_groups(optimizer: Any) -> list[dict[str, Any]]:
    """Every param group the optimizer steps: through framework wrappers (``.optimizer``)
    and containers of several optimizers (``.optimizers``)."""
    inner = unwrap_optimizer(optimizer)
    parts = _parts(inner)
    if parts is not None:
        return [group for part in parts for group in part.param_groups]
    if not isinstance(getattr(inner, "param_groups", None), list):
        raise ConfigTypeError(
            "optimizer must be a torch.optim.Optimizer (or a framework's wrapper of one), "
            f"got {type(inner).__name__}"
        )
    return inner.param_groups


def optimizer_base(optimizer: Any) -> dict[str, Any]:
    """The base values build_optimizers recorded on the optimizer (or on one inside a
    container); {} when none did."""
    inner = unwrap_optimizer(optimizer)
    for part in [inner, *(_parts(inner) or [])]:
        base = getattr(part, "base", None)
        if isinstance(base, Mapping) and base:
            return dict(base)
    return {}


def _optimizer_problems(
    rules: TorchRules,
    model: nn.Module,
    width: float,
    depth: float,
    optimizer: torch.optim.Optimizer,
    base: Mapping[str, Any],
    placement: Placement,
) -> list[str]:
    groups = optimizer_groups(optimizer)
    base = {k: v for k, v in base.items() if k != "init_std"}  # init_ only
    if not base:
        base = optimizer_base(optimizer)
    if "lr" not in base:
        return [
            (
                "cannot check the optimizer without its base values: pass lr=... (and "
                "weight_decay=, eps= as given to build_optimizers)"
            )
        ]
    names = {id(p): n for n, p in model.named_parameters()}
    expected = {
        id(p): g
        for g in role_param_groups(rules, placement, width, depth, **base)
        for p in g["params"]
    }
    problems, trained = [], set()
    now: list[dict[str, Any]] = []  # each group's lr now against its rule's
    for group in groups:
        first = expected.get(id(group["params"][0])) if group["params"] else None
        if first is not None:
            rule = first["lr"]
            name = group.get("name") or f"{first['role']}/{first['optimizer']}"
            now.append(
                {
                    "name": name,
                    "lr": _as_float(group.get("lr")),
                    "rule_lr": _as_float(rule),
                }
            )
        for p in group["params"]:
            trained.add(id(p))
            want = expected.get(id(p))
            name = names.get(id(p), "<a parameter not in the model>")
            if want is None:
                problems.append(
                    f"{name}: in the optimizer but frozen or not in the model"
                )
                continue
            problems += _group_value_problems(rules, group, want, name)
    for p_id, want in expected.items():
        if p_id not in trained:
            problems.append(
                f"{names[p_id]} ({want['role']}): not trained by the optimizer"
            )
    ratios = lr_ratio_problem(now)
    if ratios is not None:
        problems.append(ratios)
    firsts = [
        (expected.get(id(g["params"][0])) if g["params"] else None, g) for g in groups
    ]
    roled = [(w["role"], w["optimizer"], g) for w, g in firsts if w is not None]
    run = {k: base.get(k) for k in RUN_KEYS}
    if any(run[k] is not None for k in ("steps", "tokens", "batch")):  # a run to judge
        kept = {k: _as_float(v) for k, v in base.items()}
        at_base = rules.hparams(
            width, depth, **{k: v for k, v in kept.items() if k not in RUN_KEYS}
        )
        problems += run_rule_problems(rules.along, rules.base_run, run, roled, at_base)
    return problems


def _group_value_problems(
    rules: TorchRules, group: Mapping[str, Any], want: Mapping[str, Any], name: str
) -> list[str]:
    """One parameter's lr, weight decay and eps in its optimizer group against the rule's."""
    # the lr before any schedule: OneCycleLR's max_lr, a scheduler's initial_lr, the
    # composite's rule_lr (set_lr_factor's schedule), else the lr itself
    lr = group.get("lr")
    for key in ("rule_lr", "initial_lr", "max_lr"):
        lr = group.get(key, lr)
    checks = [
        ("lr", lr, want["lr"]),
        ("weight_decay", group.get("weight_decay"), want["weight_decay"]),
    ]
    opt_name = want["optimizer"]
    if "spectral_eps" in want or any(k in want for k, _ in rules.eps_places.values()):
        key, index = rules.eps_places.get(opt_name, ("eps", None))
        got = group.get(key)
        if index is not None and isinstance(got, (tuple, list)) and index < len(got):
            got = got[index]
        checks.append(("eps", got, want.get("spectral_eps", want.get(key))))
    problems = []
    for what, got, rule in checks:
        if isinstance(got, torch.Tensor) and got.device.type == "meta":
            problems.append(
                f"{name} ({want['role']}): {what} is a tensor on the meta device, "
                "which holds no value to check: put it on the CPU or the GPU"
            )
            continue
        rule, got = _as_float(rule), _as_float(got)
        if rule is None:
            continue
        if not isinstance(got, (int, float)) or not _close(float(got), rule):
            problems.append(
                f"{name} ({want['role']}): {what} is {got!r}, the rule gives {rule:.6g}"
            )
    return problems


def _as_float(value: Any) -> Any:
    """A one-element tensor (a tensor lr) as its float; anything else as it is."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return None if value.device.type == "meta" else float(value)
    return value


def _anchored_width_check(
    rules: TorchRules,
    placement: Placement,
    size: tuple[float, float],
    widths: Sequence[int],
    optimizer: Any,
    base: Mapping[str, Any],
    **options: Any,
) -> tuple[list[str], list[str]]:
    """check_widths anchored on the model at ``size``: (problems, notes)."""
    report = widths_report(
        rules,
        placement,
        widths,  # checked there: a str is refused, not read one character at a time
        anchor=size,
        base={**optimizer_base(optimizer), **base},
        **options,
    )
    return report.problems, report.notes


def _drawn_with(model: nn.Module, init_std: BaseValue | None) -> dict[str, Any]:
    """{"init_std": ...} when the model's parameters were drawn (init_std given to check,
    or the one init_ drew them with), so that the twins are set up as the model was; {}
    for the model's own init."""
    record = init_record(model)
    drawn = init_std if init_std is not None else getattr(record, "init_std", None)
    return {} if drawn is None else {"init_std": drawn}


def traced_notes(
    model: nn.Module, family: Adapter | None, example_input: Any
) -> list[str]:
    """Where the adapter and the model's traced structure put a multiplier or the final
    module differently, one line each (check's notes: a named family or a user's adapter
    may be right where the trace reads the model otherwise). Nothing when the trace
    refuses the model or cannot run it (check's other lines say what is wrong)."""
    if family is None or family.name.endswith("traced"):
        return []
    try:
        structure = traced_structure(model, example_input)  # the placement's trace
    except UnsupportedModelError:
        return []
    return [
        f"traced structure: {line}"
        for line in structure_disagreements(model, family, structure)
    ]


def _unset_line(placement: Placement) -> str | None:
    """The one line for placed parameters that hold NaN or inf (never initialised)."""
    unset = not_finite(placement)
    if unset:
        return unset_line(unset, "check")
    constant = all_constant(placement)
    return unset_line(constant, "check", constant=True) if constant else None


def _forward_problems(
    compiled: nn.Module, model: nn.Module, placement: Placement, example_input: Any
) -> list[str]:
    """What running the model shows: code compiled before the hooks (alone: the forward
    checks would measure that stale code too), then the forward checks and any hook of
    the user's that changes a placed module's output."""
    # the cached code first: the example batch compiles afresh, in front of it
    stale = compiled_problems(compiled, placement.family, example_input)
    if stale:
        return stale
    problems = measured_problems(model, placement.family, example_input)
    if placement.family is not None:
        owners = {n.rpartition(".")[0]: m for n, _, _, m in placement}
        batch = example_input
        if batch is None:
            batch = example_batch(model, placement.family)
        problems += foreign_hook_problems(model, owners, batch)
    return problems


def check_model(
    rules: TorchRules,
    placed: Placement | str,
    width: float,
    depth: float,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    given: nn.Module,
    multiplier: BaseValue = 1.0,
    head_dim: int | None = None,
    example_input: Any = None,
    measure: bool = True,
    widths: Sequence[int] | None = None,
    factory: Callable[[int], nn.Module] | None = None,
    timeout: float | None = 120.0,
    seeds: int = 1,
    trainer: Any = None,
    **base: Any,
) -> list[str]:
    """Problems found on the placed model and optimizer (the public ``check`` in
    spectral.torch.config says what is judged). ``placed``: the model's placement, or the
    one line that says why it has none (a parameter no role places, a tie refused);
    ``given``: the model as the user passed it (inside any wrapper)."""
    if not isinstance(measure, bool):
        raise ConfigTypeError(f"measure must be True or False, got {measure!r}")
    BaseValues.of(base, "check")  # a misspelt base value is one line, not ignored
    init_std = base.pop("init_std", None)  # given: judge the draws init_ makes with it
    base.update(_drawn_with(given, init_std))
    if isinstance(placed, str):  # found on the model: one line, nothing else
        return Findings([placed])
    unset = _unset_line(placed)
    if unset is not None:
        return Findings([unset])
    placement, model = placed, placed.model
    problems = _size_problems(placement, width)
    if rules.absorbed is None:
        family = placement.family
        problems += _multiplier_problems(rules, model, width, depth, multiplier, family)
    else:  # hook-free form: no hooks, and every multiplier sits in parameters
        problems += absorbed_problems(rules, placement, width, depth, multiplier)
        measure = False  # the forward checks look for the hooks' factors
    problems += _head_dim_problems(model, head_dim) + clipping_problems(rules, trainer)
    if optimizer is not None:
        problems += _optimizer_problems(
            rules, model, width, depth, optimizer, base, placement
        )
    if measure and not problems:
        problems += _forward_problems(given, model, placement, example_input)
    size = (width, depth)
    found, notes = init_problems(
        rules, placement, size, init_std, multiplier, optimizer
    )
    problems += found
    notes += traced_notes(model, placement.family, example_input) if measure else []
    notes += fixed_rank_notes(placement)
    if widths is not None:
        found, more = _anchored_width_check(
            rules,
            placement,
            size,
            widths,
            optimizer,
            base,
            factory=factory,
            multiplier=multiplier,
            example_input=example_input,
            timeout=timeout,
            seeds=seeds,
        )
        problems += [line for line in found if line not in problems]
        notes += [line for line in more if line not in notes]
    return Findings(problems, notes)
