"""Concrete hyperparameters for a target model: the math behind ``spectral transfer``.

Every hyperparameter is ``base × r_n^a × r_L^b`` with ``r_n = width/base_width`` and
``r_L = depth/base_depth``; the initial standard deviation is
``init_std × sqrt(r_n^a r_L^b)`` from the variance rule. Pure Python, no torch. The
arithmetic lives in :mod:`spectral.scaling`, whose lines ``spectral codegen`` copies into
every generated module, so what ``spectral transfer`` prints is what training applies.

Hybrid optimizers (:func:`plan`) follow the paper's experiments: the *hidden* optimizer
takes the matrices inside the residual blocks — the hidden weights, and routers (an
``E × n`` gate inside a block: its derived rules hold for every optimizer, and matrix
optimizers train it in practice; see ``docs/router.md``) — and the *others* optimizer
every other role (input and output weights, all biases) — Muon-Kimi on hidden matrices,
AdamW on embeddings, head and biases. ``all_roles=True`` adds the roles placed by their
dimensions (``docs/roles.md``): the fixed-rank factors of a block go with the hidden
matrices, the output bias, the outer map and its bias and the vectors of a block with the
others.
Without *others*, the hidden optimizer takes every role it applies to; a matrix-only
optimizer then leaves the bias roles uncovered (fine for a bias-free model; anything that
needs them raises, naming the role and suggesting ``others="adamw"``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any
from dataclasses import dataclass, field

from .catalog import catalog as builtin_catalog
from .errors import SpecError
from .engine.result import Derivation, Exponent
from .engine.roles import ALL_ROLE_NAMES, ROLE_NAMES, role
from .scaling import BaseValues, along_factor, run_ratios, scale_rules
from .catalog import derive
from .spec import OptimizerSpec

__all__ = [
    "DEFAULT_EPS",
    "HP_OUT",
    "Plan",
    "eps_place",
    "hparams",
    "momentum_factors",
    "plan",
    "scale_rules",  # re-exported from spectral.scaling
]

class _DefaultEps(Mapping[str, float]):
    """Optimizer -> its implementation's default ε (``TORCH.default_eps`` of its catalog
    file), read when first asked, so importing this module loads no optimizer module."""

    def _table(self) -> dict[str, float]:
        from .catalog import modules

        return {
            m.SPEC.name: m.TORCH.default_eps for m in modules() if m.TORCH.default_eps is not None
        }

    def __getitem__(self, name: str) -> float:
        return self._table()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


DEFAULT_EPS: Mapping[str, float] = _DefaultEps()
"""The implementations' default ε, used as the base value when none is given:
``torch.optim.AdamW(eps=1e-8)``, ``pytorch_optimizer.Shampoo(matrix_eps=1e-6)``, and so on
(torch's Adafactor: ``eps=(None, 1e-3)``, whose ``None`` is the float32 machine epsilon).
Each lives in its optimizer's file (``TORCH.default_eps``)."""


def eps_place(spec: OptimizerSpec) -> tuple[str, int | None]:
    """Where an implementation reads ε: ``(param-group key, index in its tuple or None)``.

    Declared with the optimizer (``eps_key``, ``eps_index``) rather than listed here, so a
    spec file can place ε too (``torch.optim.Adafactor``: ``("eps", 0)``).
    """
    return spec.eps_key, spec.eps_index


HP_OUT = ("multiplier", "init_std", "lr", "weight_decay", "eps")
"""The keys of one role in :func:`hparams`' result, in order."""

@dataclass(frozen=True)
class Plan:
    """Which optimizer takes which role, and the rules each role gets from it."""

    hidden: str
    others: str | None
    k: int
    optimizers: dict[str, str]
    """Role → optimizer name, for the roles some optimizer takes (in ``ALL_ROLE_NAMES`` order)."""
    derivations: dict[str, Derivation]
    """Optimizer name → its verified derivation."""
    uncovered: tuple[str, ...]
    """Roles no optimizer takes (bias roles of a matrix-only optimizer without others)."""
    omitted: dict[str, str] = field(default_factory=dict)
    """Roles no derivation has at this ``k``, each with why (fixed-rank factors at k = 1)."""
    all_roles: bool = False
    """Whether the roles placed by their dimensions were asked for (``--all-roles``)."""

    @property
    def rules(self) -> dict[str, dict[str, Exponent]]:
        """Role → HP → exponent, each role from its own optimizer's derivation."""
        return {r: dict(self.derivations[o].rules[r]) for r, o in self.optimizers.items()}

    @property
    def specs(self) -> dict[str, OptimizerSpec]:
        return {name: d.spec for name, d in self.derivations.items()}

    def along(self) -> dict[str, dict[str, tuple[float, float]]]:
        """Optimizer -> HP -> (d, b) along the horizon and the batch (``HP × r_D^d r_B^b``):
        the ``ALONG`` table of the generated module. The laws are an optimizer's, so every
        role it trains has the same (``Derivation.along`` lists them per role)."""
        out: dict[str, dict[str, tuple[float, float]]] = {}
        for name in dict.fromkeys(self.optimizers.values()):
            d = self.derivations[name]
            per_role = {r: {a.hp: a.as_floats() for a in d.along(r)} for r in d.roles}
            first = next(iter(per_role.values()))
            if any(v != first for v in per_role.values()):  # not one law per optimizer
                raise SpecError(f"{name}: its roles disagree along the horizon and the batch")
            out[name] = first
        return out

    def exponents(self) -> dict[str, dict[str, tuple[float, float]]]:
        """Rules as ``(a, b)`` floats: the ``RULES`` table of the generated module."""
        return {r: {hp: e.as_floats() for hp, e in hps.items()} for r, hps in self.rules.items()}

    def has_eps(self, name: str) -> bool:
        return self.derivations[name].spec.has_eps

    def is_builtin(self, name: str) -> bool:
        """True when ``name`` is the catalog's own declaration (so its implementation is known)."""
        return builtin_catalog().get(name) == self.derivations[name].spec

    @property
    def label(self) -> str:
        return self.hidden if self.others is None else f"{self.hidden}+{self.others}"


def plan(
    hidden: str | OptimizerSpec,
    others: str | OptimizerSpec | None = None,
    k: int = 2,
    *,
    catalog: Mapping[str, OptimizerSpec] | None = None,
    all_roles: bool = False,
) -> Plan:
    """Assign roles to ``hidden`` (and ``others``) and derive each optimizer's rules;
    ``all_roles`` adds the roles placed by their dimensions (``docs/roles.md``)."""
    d_hidden = derive(hidden, k, catalog=catalog, all_roles=all_roles)
    derivations = {d_hidden.optimizer: d_hidden}
    d_others = None
    if others is not None:
        d_others = derive(others, k, catalog=catalog, all_roles=all_roles)
        if d_others.optimizer == d_hidden.optimizer:
            raise SpecError(
                f"--others {d_others.optimizer} is the hidden optimizer itself; leave --others "
                "out to give it every role"
            )
        derivations[d_others.optimizer] = d_others
    optimizers: dict[str, str] = {}
    uncovered: list[str] = []
    omitted = {r: why for d in derivations.values() for r, why in d.omitted}
    for r in ALL_ROLE_NAMES if all_roles else ROLE_NAMES:
        if r in omitted:
            continue
        block_matrix = role(r).in_block and not role(r).is_bias
        if block_matrix and r in d_hidden.roles:
            optimizers[r] = d_hidden.optimizer
        elif d_others is not None and r in d_others.roles:
            optimizers[r] = d_others.optimizer
        elif d_others is None and r in d_hidden.roles:
            optimizers[r] = d_hidden.optimizer
        else:
            uncovered.append(r)
    p = Plan(
        hidden=d_hidden.optimizer,
        others=None if d_others is None else d_others.optimizer,
        k=k,
        optimizers=optimizers,
        derivations=derivations,
        uncovered=tuple(uncovered),
        omitted=omitted,
        all_roles=all_roles,
    )
    # Block multipliers come from the init conditions alone, so every optimizer must agree
    # on them layer by layer; a hybrid would be inconsistent otherwise.
    rules = p.rules
    by_layer: dict[str, Exponent] = {}
    for r, hps in rules.items():
        layer = role(r).layer
        m = hps["multiplier"]
        if by_layer.setdefault(layer, m) != m:
            raise SpecError(f"the optimizers disagree on the {layer} block multiplier")
    return p


def hparams(
    p: Plan,
    base_width: float,
    base_depth: float,
    width: float,
    depth: float,
    **base: Any,
) -> dict[str, dict[str, float]]:
    """:func:`scale_rules` for a :class:`Plan`: what ``spectral transfer --format json`` prints
    and what the generated module's ``hparams`` returns (base values:
    :class:`spectral.scaling.BaseValues`, with the run's horizon and batch: ``steps`` or
    ``tokens``, ``batch``, ``base_steps`` or ``base_tokens``, ``base_batch``).

    >>> p = plan("adamw")
    >>> hp = hparams(p, 256, 4, 256, 4, lr=1e-3, weight_decay=0.1, steps=4000, base_steps=1000)
    >>> round(hp["hidden_weight"]["lr"] / 1e-3, 6) == round(4 ** -0.32, 6)
    True
    """
    return scale_rules(
        p.optimizers,
        p.exponents(),
        base_width,
        base_depth,
        width,
        depth,
        BaseValues.of(base, "hparams"),
        DEFAULT_EPS,
        p.along(),
    )


def momentum_factors(p: Plan, **run: float | None) -> dict[str, float]:
    """Role -> the factor of ``1 - beta`` (every momentum of its optimizer) at this horizon
    and batch: 1.0 where held (keywords: :data:`spectral.scaling.RUN_KEYS`)."""
    r_d, r_b = run_ratios(run)
    along = p.along()
    return {r: along_factor(along, o, "momentum", r_d, r_b) for r, o in p.optimizers.items()}
