"""Initialisation by role: the model's own init rescaled by the rules (the default), or
every parameter drawn from N(0, init_std_of(role)^2) when a base ``init_std`` is given."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

from spectral.errors import UnsupportedModelError
from spectral.measure.fit import rms
from spectral.scaling import BIAS_ROLES, BaseValue, Rules, keeps_own_init, ratios
from spectral.torch.apply.absorb import carriers_of
from spectral.torch.apply.hooks import scale_norm_eps
from spectral.torch.model.classify import is_table, unwrap_model
from spectral.torch.model.placement import Placement
from spectral.torch.model.shapes import fans, is_norm
from spectral.torch.optim.sharded import normal_


def is_bias(name: str) -> bool:
    """A bias by its name (``bias``, ``in_proj_bias``); SSM vectors such as ``A_log``,
    ``D`` or a kernel are not, and keep the values their model gave them."""
    leaf = name.rpartition(".")[2]
    return leaf == "bias" or leaf.endswith("_bias")


def keeps_own_values(
    name: str, role: str, module: nn.Module, init_std: BaseValue | None
) -> bool:
    """Whether init_ leaves the parameter as the model initialised it: a vector-like
    parameter (SSM A_log, D, dt_bias, a depthwise kernel), or one with a bias role that is
    neither a bias nor a norm's parameter, unless ``init_std`` names its role. Its own
    initialisation is the model's (Mamba draws A_log and dt's bias on purpose); zero
    would kill it."""
    if keeps_own_init(role, init_std):  # hidden_vector, unless named
        return True
    named = isinstance(init_std, Mapping) and role in init_std
    return role in BIAS_ROLES and not (named or is_norm(module) or is_bias(name))


@torch.no_grad()
def init_by_role(
    rules: Rules,
    placement: Placement,
    width: float,
    depth: float,
    init_std: BaseValue | None = None,
    *,
    multiplier: BaseValue = 1.0,
) -> None:
    """Initialise every placed parameter by its role (the public ``init_`` in
    spectral.torch.config says how): the model's own init times each role's init_ratio,
    or, with ``init_std``, draws by role (:func:`draw_by_role`)."""
    model = placement.model
    scale_norm_eps(rules, placement, width, depth)
    if init_std is not None:
        draw_by_role(rules, placement, width, depth, init_std, multiplier=multiplier)
        _remember(model, InitRecord(width, depth, init_std, parameter_spreads(model)))
        return
    record = init_record(model)
    if record is not None and record.left_as_is(model, width, depth):
        return  # init_ ran on these values already: a second call scales nothing
    unset = not_finite(placement)
    if unset:
        raise UnsupportedModelError(unset_line(unset, "init_"))
    constant = all_constant(placement)
    if constant:
        raise UnsupportedModelError(unset_line(constant, "init_", constant=True))
    done: set[int] = set()
    scaled = own_init_factors(rules, placement, width, depth, multiplier)
    for _, p, s in scaled:
        if id(p) in done:  # a tied parameter: scaled once
            continue
        done.add(id(p))
        if s != 1.0:  # 1.0 leaves the tensor untouched: bit-identical at the base
            p.mul_(s)
    _remember(model, InitRecord(width, depth, None, parameter_spreads(model)))


def _holds_values(p: torch.Tensor) -> bool:
    return (
        p.device.type != "meta"
        and type(p).__name__ != "DTensor"
        and p.is_floating_point()
    )


def not_finite(placement: Placement) -> list[str]:
    """The names of the placed parameters holding NaN or inf (memory left as it was by
    ``to_empty`` after a meta-device build, or a broken init): init_ keeps the model's own
    values, so it cannot start from them."""
    return [
        name
        for name, p, _, _ in placement
        if _holds_values(p) and not bool(torch.isfinite(p.detach()).all())
    ]


def all_constant(placement: Placement) -> list[str]:
    """The names of the hidden matrices when every one of them holds a single value (all
    0.0: the memory ``to_empty`` left was finite, and nothing initialised it); [] when any
    holds two values. One constant branch end (a zero-init out-projection) is an init;
    every hidden matrix constant is none, and init_ would only scale the constant."""
    hidden = [
        (name, p)
        for name, p, role, _ in placement
        if role == "hidden_weight"
        and p.ndim >= 2
        and _holds_values(p)
        and p.numel() > 1
    ]
    if not hidden or any(bool((p != p.reshape(-1)[0]).any()) for _, p in hidden):
        return []
    return [name for name, _ in hidden]


def unset_line(names: list[str], who: str, constant: bool = False) -> str:
    """One line for parameters that hold no initialised values: NaN or inf, or (with
    ``constant``) every hidden matrix one value."""
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    shown = ", ".join(names[:3]) + more
    what = (
        f"every hidden matrix holds one value ({len(names)}: {shown})"
        if constant
        else f"{len(names)} parameter(s) hold NaN or inf ({shown})"
    )
    diverged = "" if constant else " or diverged"
    return (
        f"{who}: {what}: never initialised "
        f"(to_empty after a meta-device build leaves memory as it was){diverged}; run "
        "the model's own init first (reset_parameters(), init_weights()), or pass "
        "init_std= to init_ to draw every parameter by its role"
    )


def own_init_factors(
    rules: Rules,
    placement: Placement,
    width: float,
    depth: float,
    multiplier: BaseValue,
) -> list[tuple[str, torch.Tensor, float]]:
    """(name, parameter, factor) for every placed parameter: what init_ with no init_std
    multiplies it by. Its role's init_ratio times its carrier factor (hook-free form); a
    norm's parameters only the carrier factor; 1.0 for a vector that keeps its values. A
    parameter the model's own init draws with a width-dependent std (a family's
    own_width_exponents, torch's default 1/sqrt(fan_in): Placement.own_exponents) also
    gets that dependence divided out."""
    factors = carriers_of(rules, placement, width, depth, multiplier)
    r_n = ratios(width, depth, rules.base_width, rules.base_depth)[0]
    own = placement.own_exponents
    out: list[tuple[str, torch.Tensor, float]] = []
    for name, p, role, module in placement:
        s = factors.get(id(p), 1.0)
        if not is_norm(module):
            rules.covered(role, f"parameter {name!r}")
            if keeps_own_values(name, role, module, None):
                s = 1.0  # init_ leaves it as it is, carrier or not
            else:
                s *= rules.init_ratio(role, width, depth)
                if name in own:  # the model's own width law undone
                    s *= r_n ** -own[name]
        out.append((name, p, s))
    return out


def role_init_factors(
    rules: Rules,
    placement: Placement,
    width: float,
    depth: float,
    *,
    multiplier: BaseValue = 1.0,
) -> dict[str, float]:
    """Parameter name -> the factor ``init_`` (with no ``init_std``) multiplies it by: its
    role's init_ratio times its carrier factor (hook-free form); a norm's parameters only
    the carrier factor (1.0 outside the carriers); 1.0 for a vector that keeps its own
    values."""
    return {
        name: s
        for name, _, s in own_init_factors(rules, placement, width, depth, multiplier)
    }


@dataclass(frozen=True)
class InitRecord:
    """What init_ did to a model, for check() to compare the model with later."""

    width: float
    depth: float
    init_std: BaseValue | None
    """None: the model's own init rescaled; else the base std every draw was made from."""
    rms: dict[str, float]
    """Parameter name -> its root mean square right after init_ (readable ones only)."""

    def left_as_is(self, model: nn.Module, width: float, depth: float) -> bool:
        """Whether this is init_ with the model's own init at this size, and the model
        still holds the values it left."""
        own_here = (self.width, self.depth, self.init_std) == (width, depth, None)
        return own_here and self.holds(model)

    def holds(self, model: nn.Module) -> bool:
        """Whether every parameter still has the root mean square init_ left it with."""
        now = parameter_spreads(model)
        return now.keys() == self.rms.keys() and all(
            math.isclose(now[k], v, rel_tol=1e-6, abs_tol=1e-12)
            for k, v in self.rms.items()
        )


RECORD_ATTRIBUTE = "_spectral_init_record"
"""The model attribute init_ leaves its InitRecord in: an attribute, so that a deepcopy or a
pickled model keeps it (a state_dict does not: a model loaded from one starts without)."""


def innermost(model: nn.Module) -> nn.Module:
    """The user's module inside the wrappers that hold it: Fabric's, torch.compile's
    (``_orig_mod``), DDP's (``module``), so that names carry no wrapper's prefix."""
    for _ in range(8):  # wrappers of wrappers, a few deep
        inner = unwrap_model(model)
        inner = getattr(inner, "_orig_mod", inner)
        if type(inner).__name__ in ("DistributedDataParallel", "DataParallel"):
            inner = getattr(inner, "module", inner)
        if inner is model or not isinstance(inner, nn.Module):
            return model
        model = inner
    return model


def parameter_spreads(model: nn.Module) -> dict[str, float]:
    """Parameter name (inside any wrapper: :func:`innermost`) -> root mean square, for the
    parameters this process holds (not on meta, not a DTensor shard)."""
    return {
        name: rms(p)
        for name, p in innermost(model).named_parameters()
        if p.device.type != "meta"
        and type(p).__name__ != "DTensor"
        and p.is_floating_point()
        and p.numel() > 0
    }


def record_init(model: nn.Module, width: float, depth: float) -> None:
    """Record on ``model`` that its own init was scaled by the rules at this size, by
    something other than init_ (torchtitan's scaled ``param_init`` entries), so that
    check() judges it as it judges init_'s."""
    _remember(model, InitRecord(width, depth, None, parameter_spreads(model)))


def _remember(model: nn.Module, record: InitRecord) -> None:
    innermost(model).__dict__[RECORD_ATTRIBUTE] = record


def init_record(model: nn.Module) -> InitRecord | None:
    """What the last init_ did to ``model`` (the module inside any wrapper); None when
    init_ has not run on it (or on the model it was deep-copied from)."""
    record = innermost(model).__dict__.get(RECORD_ATTRIBUTE)
    return record if isinstance(record, InitRecord) else None


@torch.no_grad()
def draw_by_role(
    rules: Rules,
    placement: Placement,
    width: float,
    depth: float,
    init_std: BaseValue = 0.02,
    *,
    multiplier: BaseValue = 1.0,
) -> None:
    """Replace every parameter by a draw by its role: N(0, init_std_of(role)^2), what
    ``init_(..., init_std=...)`` does (sigma_base is ``init_std``, not the model's own).

    Norm gains are always set to 1 and norm biases to 0 (a norm's parameters share the
    bias roles, but a normalised feature must keep RMS 1; where a family's norms compute
    x_hat * (1 + w), as Gemma's do, its adapter's norm_offset makes that w = 0); other
    biases start at 0 unless their role is named in init_std (the paper's base bias
    variance is 0). A vector that is neither a bias nor a norm gain (Mamba's A_log and
    D, a depthwise convolution's kernel: role hidden_vector, or a bias role by name) keeps
    the values the model gave it unless init_std names its role: init_ touches only what
    it has a rule for. A dense input layer (not an embedding) is drawn with
    init_std / sqrt(d_in), its fixed fan-in: the paper's input variance is sigma^2 for
    one-hot (language) inputs and sigma^2/d_0 for dense ones. In the hook-free form the
    parameters of each module a multiplier scaled carry it: their std, and a norm's gain,
    times the multiplier (spectral.torch.apply.absorb).
    """
    family = placement.family
    factors = carriers_of(rules, placement, width, depth, multiplier)
    for name, p, role, module in placement:
        s = factors.get(id(p), 1.0)
        if is_norm(module):
            if name.endswith("bias"):
                p.zero_()
            else:  # gain 1: x_hat * (norm_offset + w) for families that offset w
                p.fill_(s - (family.norm_offset if family is not None else 0.0))
            continue
        rules.covered(role, f"parameter {name!r}")
        if keeps_own_values(name, role, module, init_std):
            continue
        d_in = None
        if role == "input_weight" and not is_table(name, module, family):
            d_in = fans(module, p)[1]
        std = rules.init_std_of(role, width, depth, init_std, d_in) * s
        if std == 0.0:
            p.zero_()
        else:
            normal_(p, std)  # a sharded (DTensor) p: the one-process draw
