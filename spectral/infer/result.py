"""What ``spectral infer`` found: per-role fits, the ε, and the declaration if one fits.

:class:`Inference` is frozen data: it renders itself as JSON (:meth:`Inference.to_dict`),
as a TOML declaration with the measurements as comments (:meth:`Inference.toml`), or as
the reasons no declaration fits (:meth:`Inference.explain`); the CLI writes or prints them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import SpecError
from .fit import Exponent
from .protocol import G_SCALES, NOISE, RANKS, SEEDS

__all__ = ["EpsFit", "Inference", "RoleFit"]


@dataclass(frozen=True)
class RoleFit:
    """What one role's measurements say."""

    role: str
    shape: str
    width: Exponent
    """Exponent of ``‖ΔW‖_R / lr`` in ``n``."""
    G: Exponent
    """Exponent of ``‖ΔW‖_R / lr`` in ``G = ‖∇W‖_2``."""
    norms: tuple[float, ...]
    """``‖ΔW‖_R / lr`` at each width (geometric mean over seeds and ranks, ``G = 1``)."""
    weight: float
    """Exponent of ``‖ΔW‖_R`` in a factor on ``W`` (0 when the step ignores the weights)."""
    lr: float
    """Exponent of ``‖ΔW‖_R / lr`` in the lr (0 when the step is proportional to it)."""
    schedule: float
    """Exponent in ``n`` of the change from the last warm-up step to the measured one."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "shape": self.shape,
            "n": self.width.to_dict(),
            "G": self.G.to_dict(),
            "norms": [float(f"{x:.6g}") for x in self.norms],
            "weight_exponent": round(self.weight, 4),
            "lr_exponent": round(self.lr, 4),
            "schedule_exponent": round(self.schedule, 4),
        }


@dataclass(frozen=True)
class EpsFit:
    """The implementation's ε: where it sits, whether it acts, and its fitted scale."""

    key: str
    index: int | None
    default: Any
    active: bool
    why: str
    """One line: how it was classified (inert guard, growing step, declared)."""
    roles: dict[str, Exponent] = field(default_factory=dict)
    """Role → exponent in ``n`` of ``ε*`` (``G = 1``)."""
    G: Exponent | None = None
    thresholds: dict[str, tuple[float, ...]] = field(default_factory=dict)
    """Role → ``ε*`` at each of :attr:`widths`."""
    expression: str | None = None
    widths: tuple[int, ...] = ()

    @property
    def place(self) -> str:
        return self.key if self.index is None else f"{self.key}[{self.index}]"

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "index": self.index,
            "default": _jsonable(self.default),
            "declared": self.expression is not None,
            "why": self.why,
            "n": {r: e.to_dict() for r, e in self.roles.items()},
            "G": None if self.G is None else self.G.to_dict(),
            "thresholds": {r: [float(f"{x:.4g}") for x in v] for r, v in self.thresholds.items()},
            "widths": list(self.widths),
            "expression": self.expression,
        }


@dataclass(frozen=True)
class Inference:
    """The result of :func:`infer`: the fits, the checks, and the declaration if one fits."""

    target: str
    kwargs: dict[str, Any]
    group: dict[str, Any]
    lr: float
    widths: tuple[int, ...]
    d0: int
    warmup: int
    roles: tuple[RoleFit, ...]
    bias_roles: tuple[str, ...]
    """Bias roles measured (empty when the implementation refuses 1-D parameters)."""
    applies_to: str
    update_norm: str | None
    """The emitted expression (``None`` when no single declaration fits)."""
    exponents: dict[str, str]
    """``a``, ``b``, ``c``, ``g`` of the emitted expression."""
    eps: EpsFit | None
    problems: tuple[str, ...]
    """Why no single declaration fits (empty when one does)."""
    notes: tuple[str, ...]
    seconds: float
    name: str
    dtype: str = "float64"

    @property
    def fits(self) -> bool:
        return not self.problems and self.update_norm is not None

    def spec(self):
        """The :class:`~spectral.spec.OptimizerSpec` of the emitted declaration."""
        from ..engine.spec_file import parse_spec

        if not self.fits:
            raise SpecError(f"{self.target}: no single declaration fits")
        return parse_spec(self.toml_fields(), where=f"infer {self.target}")

    def toml_fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "update_norm": self.update_norm}
        if self.eps is not None and self.eps.expression is not None:
            out["eps"] = self.eps.expression
            out["eps_label"] = f"{self.target.rsplit('.', 1)[-1]} {self.eps.place}"
            out["eps_key"] = self.eps.key
            if self.eps.index is not None:
                out["eps_index"] = self.eps.index
        out["applies_to"] = self.applies_to
        out["summary"] = f"inferred by spectral infer from {self.target}"[:200]
        out["implementation"] = self.implementation_table()
        return out

    def implementation_table(self) -> dict[str, Any]:
        """``[implementation]``: the class measured and the arguments it was measured with
        (the measurement's own lr and zero weight decay left out), so that ``spectral
        codegen`` builds the same implementation with no ``factories=``."""
        kwargs = {
            k: list(v) if isinstance(v, tuple) else v
            for k, v in self.kwargs.items()
            if k not in ("lr", "weight_decay") and _toml_plain(v)
        }
        table: dict[str, Any] = {"class": self.target.replace(":", ".")}
        if kwargs:
            table["kwargs"] = kwargs
        group = {k: v for k, v in self.group.items() if _toml_plain(v)}
        if group:
            table["group"] = group
        default = None if self.eps is None else self.eps.default
        if isinstance(default, (tuple, list)) and self.eps is not None and self.eps.index is not None:
            default = default[self.eps.index]
        if isinstance(default, (int, float)) and not isinstance(default, bool) and default > 0:
            table["default_eps"] = float(default)
        return table

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "kwargs": _jsonable(self.kwargs),
            "group": _jsonable(self.group),
            "fits": self.fits,
            "update_norm": self.update_norm,
            "exponents": self.exponents,
            "applies_to": self.applies_to,
            "eps": None if self.eps is None else self.eps.to_dict(),
            "roles": {r.role: r.to_dict() for r in self.roles},
            "problems": list(self.problems),
            "notes": list(self.notes),
            "measurement": {
                "lr": self.lr,
                "widths": list(self.widths),
                "d0": self.d0,
                "warmup_steps": self.warmup,
                "ranks": list(RANKS),
                "seeds": list(SEEDS),
                "G": list(G_SCALES),
                "noise": NOISE,
                "dtype": self.dtype,
                "weight_decay": 0.0,
                "seconds": round(self.seconds, 2),
            },
            "spec": self.toml_fields() if self.fits else None,
        }

    def comments(self) -> list[str]:
        """The measurements, as the comment lines of the TOML file."""
        kw = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        if self.group:
            kw += (", " if kw else "") + "param group " + ", ".join(
                f"{k}={v!r}" for k, v in self.group.items()
            )
        lines = [
            f"Inferred by `spectral infer {self.target}`"
            + (f" with {kw}" if kw else "")
            + f" in {self.seconds:.0f} s.",
            f"Measured: ‖ΔW‖_R / lr of step {self.warmup + 1} after {self.warmup} warm-up steps "
            f"with one fixed gradient (lr = {self.lr:g}, weight_decay = 0, {self.dtype}),",
            f"widths {', '.join(map(str, self.widths))}, d0 = {self.d0}, gradient ranks "
            f"{', '.join(map(str, RANKS))} (+ noise {NOISE:g}), seeds "
            f"{', '.join(map(str, SEEDS))}, ‖∇W‖_2 = G ∈ {{{', '.join(f'{g:g}' for g in G_SCALES)}}}.",
            "Exponent: fit [95% interval incl. drift across widths] → rounded.",
            "",
        ]
        for r in self.roles:
            norms = " ".join(f"{x:.3g}" for x in r.norms)
            lines.append(f"{r.role:<14} {r.shape:<7} n: {r.width.text():<36} G: {r.G.text()}")
            lines.append(f"{'':<22} ‖ΔW‖_R/lr = {norms}")
        if self.exponents:
            e = self.exponents
            lines += [
                "",
                f"update_norm = n_in^a n_out^b min(n_in, n_out)^c G^g: a = {e['a']} (output), "
                f"b = {e['b']} (input), c = {e['c']} (hidden − a − b), g = {e['g']}.",
            ]
        if self.eps is not None:
            lines += ["", f"ε ({self.eps.place}, default {self.eps.default!r}): {self.eps.why}"]
            if self.eps.widths:
                lines.append(
                    f"  ε* at n = {', '.join(map(str, self.eps.widths))} (seed 0, ranks "
                    f"{', '.join(map(str, RANKS))}):"
                )
            for role, ex in self.eps.roles.items():
                th = " ".join(f"{x:.3g}" for x in self.eps.thresholds.get(role, ()))
                lines.append(f"  ε* {role:<14} n: {ex.text()}   ε* = {th}")
            if self.eps.G is not None:
                lines.append(f"  ε* in G (hidden_weight): {self.eps.G.text()}")
        lines += [""] + list(self.notes)
        return lines

    def toml(self) -> str:
        """The TOML declaration (``spectral derive --spec`` reads it), measurements as comments."""
        if not self.fits:
            raise SpecError(f"{self.target}: no single declaration fits")
        body = "".join(f"# {line}".rstrip() + "\n" for line in self.comments())
        fields = self.toml_fields()
        table = fields.pop("implementation")
        for key, value in fields.items():
            body += f"{key} = {json.dumps(value, ensure_ascii=False)}\n"
        body += "\n# the implementation measured: spectral codegen builds it (no factories=)\n"
        body += "[implementation]\n"
        for key, value in table.items():
            body += f"{key} = {_toml_value(value)}\n"
        return body

    def explain(self) -> str:
        """Why no single declaration fits, with the numbers (several lines)."""
        head = f"{self.target}: no single declaration fits its measured update:"
        return "\n".join([head] + [f"  - {p}" for p in self.problems])


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return repr(value)


def _toml_plain(value: Any, depth: int = 0) -> bool:
    """A value TOML can hold and a generated module can write: numbers, strings, booleans,
    and lists of them (None has no TOML form)."""
    if isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)) and depth < 2:
        return all(_toml_plain(v, depth + 1) for v in value)
    return False


def _toml_value(value: Any) -> str:
    """A TOML value: JSON's numbers, strings and arrays are TOML's; tables are inline."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        items = ", ".join(f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in value.items())
        return "{ " + items + " }" if items else "{}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)
