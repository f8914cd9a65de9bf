"""The frozen result of a derivation, consumed by renderers, the CLI and the code generator."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from .conditions import term_formula
from .roles import ALL_ROLES
from ..spec import OptimizerSpec
from .theta import Theta, format_monomial

if TYPE_CHECKING:
    from .axes import AxisRule

__all__ = [
    "Exponent",
    "Entry",
    "CheckGroup",
    "RoleScales",
    "TieDifference",
    "Derivation",
    "summary",
    "CONVENTIONS",
]

CONVENTIONS = ("Δ2", "C.4", "α")
"""Check groups that are not condition terms of the paper but conventions the solver used."""


@dataclass(frozen=True)
class Exponent:
    """An HP is ``base × r_n^{r_n} × r_L^{r_L}`` with ``r_n = n/n_base``, ``r_L = L/L_base``."""

    r_n: Fraction
    r_L: Fraction

    @classmethod
    def of(cls, theta: Theta) -> Exponent:
        a, b = theta.exponents
        return cls(a, b)

    @property
    def theta(self) -> Theta:
        return Theta.monomial(self.r_n, self.r_L)

    @property
    def is_sp(self) -> bool:
        """Standard parameterisation keeps every base value: exponent ``(0, 0)``."""
        return self.r_n == 0 and self.r_L == 0

    def as_strings(self) -> dict[str, str]:
        return {"r_n": str(self.r_n), "r_L": str(self.r_L)}

    def as_floats(self) -> tuple[float, float]:
        return float(self.r_n), float(self.r_L)

    def ratio(self, base: str, r_n: str = "r_n", r_L: str = "r_L") -> str:
        """Ratio form: ``η_base/r_n``, ``λ_base·√r_n``, ``ε_base/(r_n r_L)``."""
        factor = format_monomial(self.r_n, self.r_L, r_n, r_L)
        if factor == "1":
            return base
        if factor.startswith("1/"):
            return f"{base}{factor[1:]}"
        return f"{base}·{factor}"


@dataclass(frozen=True)
class Entry:
    """One derived HP of one role, with the condition that fixed it."""

    role: str
    hp: str
    exponent: Exponent
    condition: str
    """Label of the condition or convention that fixed it (``C2.2``, ``Δ2``, ``init``)."""
    explanation: str


@dataclass(frozen=True)
class RoleScales:
    """The Θ-values the solver used for one role (all in ``n`` and ``L``)."""

    role: str
    multiplier: Theta
    weight_norm: Theta
    """``‖W‖_R`` at init."""
    update_target: Theta
    """``‖ΔW‖_R`` required by the update condition."""
    loss_change: Theta
    """``ΔL`` one step of this role causes (App. C.4)."""
    gradient: Theta
    """``G = ‖∇W‖_2`` from the loss-sensitivity argument."""
    direction: Theta | None
    """``‖A‖_R`` from the optimizer declaration (``None`` where it does not apply)."""


@dataclass(frozen=True)
class CheckGroup:
    """How many condition terms of one kind were substituted and checked."""

    label: str
    description: str
    terms: int
    holds: bool


@dataclass(frozen=True)
class TieDifference:
    """One rule in which input_weight and output_weight differ (see ``Derivation.tie_differences``)."""

    hp: str
    input_weight: Exponent | None
    output_weight: Exponent | None
    """``None`` where the role has no such rule."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "hp": self.hp,
            "input_weight": None if self.input_weight is None else self.input_weight.as_strings(),
            "output_weight": None if self.output_weight is None else self.output_weight.as_strings(),
        }


TIED = ("input_weight", "output_weight")
"""The roles a tied embedding shares one matrix between (vocabulary × width)."""


@dataclass(frozen=True)
class Derivation:
    """HP rules for one optimizer and block depth ``k``; produced only if verified."""

    optimizer: str
    k: int
    spec: OptimizerSpec
    roles: tuple[str, ...]
    hps: tuple[str, ...]
    entries: tuple[Entry, ...]
    scales: tuple[RoleScales, ...]
    checks: tuple[CheckGroup, ...]
    verified: bool
    omitted: tuple[tuple[str, str], ...] = ()
    """Roles asked for but not derived, each with why (a fixed-rank factor at ``k = 1``)."""
    axes: tuple[AxisRule, ...] = ()
    """The rules along the horizon and the batch (:mod:`spectral.engine.axes`), per role."""

    def along(self, role: str) -> tuple[AxisRule, ...]:
        """The rules of one role along the horizon and the batch, in ``AXIS_HPS`` order."""
        return tuple(a for a in self.axes if a.role == role)

    def along_dict(self) -> dict[str, dict[str, dict[str, str]]]:
        """Role -> HP -> ``{"r_D": exponent, "r_B": exponent, "basis": why}`` (exact strings)."""
        return {r: {a.hp: a.as_strings() for a in self.along(r)} for r in self.roles}

    def entry(self, role: str, hp: str) -> Entry:
        for e in self.entries:
            if e.role == role and e.hp == hp:
                return e
        raise KeyError(f"no rule for {hp} of {role} (roles: {', '.join(self.roles)})")

    def rule(self, role: str, hp: str) -> Exponent:
        return self.entry(role, hp).exponent

    @property
    def rules(self) -> dict[str, dict[str, Exponent]]:
        out: dict[str, dict[str, Exponent]] = {r: {} for r in self.roles}
        for e in self.entries:
            out[e.role][e.hp] = e.exponent
        return out

    def tie_differences(self) -> tuple[TieDifference, ...]:
        """The rules input_weight and output_weight do not share, the multiplier aside.

        A tied embedding is one matrix read both ways (``h_0 = α_0 W e_x``, logits
        ``α_{L+1} W h_L``): the multipliers are applied in the forward pass, so they may
        differ, but one matrix has one init, one lr, one weight decay and one ε. Exponents
        are compared exactly; an empty result means the tie is allowed.

        >>> from spectral import derive
        >>> derive("adamw").tie_differences()
        ()
        >>> [d.hp for d in derive("sso").tie_differences()]
        ['lr', 'weight_decay']
        """
        rules = self.rules
        a, b = (rules.get(r, {}) for r in TIED)
        return tuple(
            TieDifference(hp, a.get(hp), b.get(hp))
            for hp in self.hps
            if hp != "multiplier" and a.get(hp) != b.get(hp)
        )

    @property
    def tie_allowed(self) -> bool:
        """Whether input_weight and output_weight may share one matrix (:meth:`tie_differences`)."""
        return not self.tie_differences()

    @property
    def terms_checked(self) -> int:
        return sum(c.terms for c in self.checks)

    @property
    def verification_summary(self) -> str:
        """How many condition terms the verification covers and how: ``3 + 6·2^k = 393 219
        condition terms at k = 16, checked factor by factor (…), plus 14 checks of …``."""
        return summary(self)

    def to_dict(self, *, along: bool = False) -> dict[str, Any]:
        """The JSON shape: exponents as exact rational strings, keys in a fixed order;
        ``along`` adds the rules along the horizon and the batch (key ``"along"``)."""
        out: dict[str, Any] = {
            "optimizer": self.optimizer,
            "k": self.k,
            "verified": self.verified,
            "rules": {
                r: {hp: exp.as_strings() for hp, exp in hps.items()} for r, hps in self.rules.items()
            },
            "tie_embeddings": {
                "allowed": self.tie_allowed,
                "differences": [t.to_dict() for t in self.tie_differences()],
            },
        }
        if self.omitted:  # only roles beyond the default set are ever omitted
            out["omitted"] = dict(self.omitted)
        if along:
            out["along"] = self.along_dict()
        return out


def _grouped(n: int) -> str:
    """``196612`` → ``196 612``."""
    return f"{n:,}".replace(",", " ")


def summary(result: Derivation) -> str:
    """How many terms the verification covers and how they were checked, in one sentence.

    >>> from spectral import derive
    >>> summary(derive("adamw", k=16))
    '3 + 6·2^k = 393 219 condition terms at k = 16, checked factor by factor (the largest and smallest term of each chain), plus 14 checks of the conventions Δ2, C.4 and α'
    """
    roles = tuple(r for r in ALL_ROLES if r.name in result.roles)
    a, b = term_formula(roles)
    formula = ("" if b == 1 else f"{b}·") + "2^k"
    if a:
        formula = f"{a} + {formula}"
    total = a + b * 2**result.k
    conventions = sum(c.terms for c in result.checks if c.label in CONVENTIONS)
    return (
        f"{formula} = {_grouped(total)} condition terms at k = {result.k}, checked factor by "
        "factor (the largest and smallest term of each chain), plus "
        f"{conventions} checks of the conventions Δ2, C.4 and α"
    )
