"""The parameters of the residual network, grouped into roles, and their dimensions.

    h_0     = α_0 (W_0 x + b_0)                                  input layer
    h_l     = h_{l-1} + α_l · block_l(h_{l-1}),   l = 1..L        k maps per block
    h_{L+1} = α_{L+1} W_{L+1} h_L                                 output layer

``d_0`` and ``d_{L+1}`` are fixed (Θ(1)); every hidden dimension is Θ(n). A bias of size
``n_out`` is an ``n_out × 1`` matrix (``n_in = 1``), so one treatment serves both.

A block may be gated by a *router* ``W_r`` (``E × n``, ``E`` fixed: a mixture of experts'
router, any gate or per-block projection to a Θ(1) size): its logits ``z = α_r W_r h_{l-1}``
feed a gate ``g(z)`` (a softmax) that multiplies the block's paths,
``block_l(h) = Σ_e g_e(z) · W_e⁽ᵏ⁾ … W_e⁽¹⁾ h``. It has its own multiplier ``α_r`` (layer
``router``): the block multiplier ``α_l`` scales the gated output, not the logits. See
``docs/router.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .theta import Theta

__all__ = ["Role", "ROLES", "ROLE_NAMES", "HPS", "HP_LABELS", "role"]

Layer = Literal["input", "hidden", "output", "router"]

_N = Theta.monomial(1, 0)
_ONE = Theta.one()


@dataclass(frozen=True)
class Role:
    name: str
    label: str
    layer: Layer
    is_bias: bool
    n_in: Theta
    n_out: Theta
    symbol: str
    """How the parameter is written in condition terms (``W``, ``b``, ``W_0``)."""

    @property
    def readout(self) -> bool:
        """The output layer, whose init is Θ(1) in width-μP (its multiplier is 1/n)."""
        return self.layer == "output"

    @property
    def in_block(self) -> bool:
        """Inside a residual block: hidden weights and biases, and routers."""
        return self.layer in ("hidden", "router")

    @property
    def gate(self) -> bool:
        """A router: its own layer's multiplier on its logits, its gate inside a block."""
        return self.layer == "router"


ROLES: tuple[Role, ...] = (
    Role("input_weight", "Input weights", "input", False, _ONE, _N, "W_0"),
    Role("hidden_weight", "Hidden weights", "hidden", False, _N, _N, "W"),
    Role("output_weight", "Output weights", "output", False, _N, _ONE, "W_{L+1}"),
    Role("router_weight", "Router weights", "router", False, _N, _ONE, "W_r"),
    Role("input_bias", "Input biases", "input", True, _ONE, _N, "b_0"),
    Role("hidden_bias", "Hidden biases", "hidden", True, _ONE, _N, "b"),
)
ROLE_NAMES: tuple[str, ...] = tuple(r.name for r in ROLES)
_BY_NAME = {r.name: r for r in ROLES}

HPS: tuple[str, ...] = ("multiplier", "init_var", "lr", "weight_decay", "eps")
HP_LABELS = {
    "multiplier": "Block Multiplier",
    "init_var": "Initial Variance",
    "lr": "Learning Rate",
    "weight_decay": "Weight Decay",
    "eps": "ε",
}


def role(name: str) -> Role:
    return _BY_NAME[name]
