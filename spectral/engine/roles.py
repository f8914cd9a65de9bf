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

Beyond the paper's network and the router (:data:`ROLES`, the default of every table),
:data:`EXTRA_ROLES` place a parameter by its dimensions — ``n_in`` and ``n_out`` each
Θ(n) or Θ(1) — and by where it sits: outside the residual stream, inside a branch, or in
the readout. Each is derived and verified like the rest (``docs/roles.md``):

* ``output_bias`` (``b_{L+1}``, d_{L+1} × 1): the readout's bias. It shares α_{L+1} (the
  multiplier scales the readout's whole output), so its effect on the logits is Θ(1) only
  with its own rules; as ``input_bias`` it shrinks as 1/n.
* ``outer_weight`` (``W_o``, n × n): a width → width map outside the residual stream, applied
  once (a BERT MLM-head transform, a pooler); layer ``outer``, multiplier α_o = Θ(1).
  ``outer_bias`` (``b_o``, n × 1) is its bias: ``input_bias``'s rules, its own name.
* ``rank_down_weight`` (``D``, r × n) and ``rank_up_weight`` (``U``, n × r), r = Θ(1), inside a
  branch: a fixed-rank factorisation (DeepSeek's ``q_a_proj``/``kv_a_proj_with_mqa`` and
  ``q_b_proj``/``kv_b_proj``, Mamba's ``x_proj`` and ``dt_proj``, bottleneck adapters; an up
  projection may end the branch). Blocks of ``k ≥ 2`` maps only: a factorised map is two maps.
* ``normed_rank_down_weight`` (``D_N``, r × n): a rank-down map whose output a scale-invariant
  norm reads (DeepSeek's ``q_a_proj``/``kv_a_proj_with_mqa`` under ``q_a_layernorm``/
  ``kv_a_layernorm``, Jamba's ``x_proj`` under its dt, B and C norms). The chains see the
  norm's output ``N(D_N h)``: Θ(1) whatever ``D_N``'s scale, moving by the *relative* change
  ``‖ΔD_N h‖/‖D_N h‖``; the terms N1.1/N2.1 ask the norm's input to be Θ(1) at init (so a
  fixed ε stays negligible) and to move by Θ(1) (``spectral.engine.conditions``).
* ``hidden_vector`` (``v``, n × 1): a per-channel vector inside a branch that is neither a bias
  nor a norm gain (SSM ``A_log``, ``D``, ``dt_bias``, layer-scale γ, a depthwise conv kernel
  whose fan-in is its receptive field, Θ(1)). Vector-like: the rules of ``hidden_bias``; the
  runtime keeps the model's own initial values unless an init std is named for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .dims import GROWS

from .theta import Theta

__all__ = [
    "Role",
    "ROLES",
    "ROLE_NAMES",
    "EXTRA_ROLES",
    "ALL_ROLES",
    "ALL_ROLE_NAMES",
    "HPS",
    "HP_LABELS",
    "role",
    "role_for",
]

Layer = Literal["input", "hidden", "output", "router", "outer"]

_N = Theta.monomial(1, 0)
_ONE = Theta.one()


@dataclass(frozen=True)
class Role:
    """One kind of parameter of the network: where it sits (its layer), whether it is a
    bias, and how its dimensions grow (``n_in``, ``n_out``: Θ(n) or Θ(1))."""

    name: str
    label: str
    layer: Layer
    is_bias: bool
    n_in: Theta
    n_out: Theta
    symbol: str
    """How the parameter is written in condition terms (``W``, ``b``, ``W_0``)."""
    min_k: int = 1
    """Smallest block depth ``k`` whose blocks can hold it (a factorised map is two maps)."""
    why_min_k: str = ""
    """Why it needs ``k ≥ min_k``: the note a derivation at a smaller ``k`` carries."""
    normed: bool = False
    """Its output is read by a scale-invariant norm (RMSNorm, LayerNorm): the block's chains
    hold the norm's output ``N(p h)``, not ``p`` (``spectral.engine.conditions``)."""

    @property
    def readout(self) -> bool:
        """The output layer's matrix, whose init is Θ(1) in width-μP (its multiplier 1/n)."""
        return self.layer == "output" and not self.is_bias

    @property
    def in_block(self) -> bool:
        """Inside a residual block: hidden weights and biases, and routers."""
        return self.layer in ("hidden", "router")

    @property
    def gate(self) -> bool:
        """A router: its own layer's multiplier on its logits, its gate inside a block."""
        return self.layer == "router"


def _role(
    name: str,
    label: str,
    layer: Layer,
    is_bias: bool,
    symbol: str,
    min_k: int = 1,
    why_min_k: str = "",
    normed: bool = False,
) -> Role:
    """A role whose dimensions are read from :data:`spectral.engine.dims.GROWS`."""
    out_grows, in_grows = GROWS[name]
    n_in, n_out = (_N if in_grows else _ONE), (_N if out_grows else _ONE)
    return Role(name, label, layer, is_bias, n_in, n_out, symbol, min_k, why_min_k, normed)


ROLES: tuple[Role, ...] = (
    _role("input_weight", "Input weights", "input", False, "W_0"),
    _role("hidden_weight", "Hidden weights", "hidden", False, "W"),
    _role("output_weight", "Output weights", "output", False, "W_{L+1}"),
    _role("router_weight", "Router weights", "router", False, "W_r"),
    _role("input_bias", "Input biases", "input", True, "b_0"),
    _role("hidden_bias", "Hidden biases", "hidden", True, "b"),
)
"""The paper's network and the router: what ``spectral derive`` tabulates by default."""
ROLE_NAMES: tuple[str, ...] = tuple(r.name for r in ROLES)

_FACTORISED = (
    "a fixed-rank factor is one of at least two maps of its branch (n → r → n), so blocks of "
    "k = 1 map (Condition \"one-layer\") cannot hold it; derive with k ≥ 2"
)

EXTRA_ROLES: tuple[Role, ...] = (
    _role("output_bias", "Output biases", "output", True, "b_{L+1}"),
    _role("outer_weight", "Outer weights", "outer", False, "W_o"),
    _role("outer_bias", "Outer biases", "outer", True, "b_o"),
    _role("rank_down_weight", "Rank-down weights", "hidden", False, "D", 2, _FACTORISED),
    _role(
        "normed_rank_down_weight", "Normed rank-down weights", "hidden", False, "D_N", 2,
        _FACTORISED, normed=True,
    ),
    _role("rank_up_weight", "Rank-up weights", "hidden", False, "U", 2, _FACTORISED),
    _role("hidden_vector", "Hidden vectors", "hidden", True, "v"),
)
"""Roles placed by their dimensions beyond the paper's network (``docs/roles.md``):
derived with ``derive(..., all_roles=True)`` (``spectral derive --format json`` always,
the other formats with ``--all-roles``) and by every :func:`spectral.transfer.plan`, so a
generated config gives each of them its numbers."""

ALL_ROLES: tuple[Role, ...] = ROLES + EXTRA_ROLES
ALL_ROLE_NAMES: tuple[str, ...] = tuple(r.name for r in ALL_ROLES)
_BY_NAME = {r.name: r for r in ALL_ROLES}

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


Where = Literal["input", "outside", "branch", "router", "readout"]
Kind = Literal["matrix", "bias", "vector"]

_BY_SHAPE: dict[tuple[str, str, bool, bool], str] = {
    ("input", "matrix", False, True): "input_weight",
    ("input", "bias", False, True): "input_bias",
    ("outside", "matrix", True, True): "outer_weight",
    ("outside", "bias", False, True): "outer_bias",
    ("branch", "matrix", True, True): "hidden_weight",
    ("branch", "matrix", True, False): "rank_down_weight",
    ("branch", "matrix", False, True): "rank_up_weight",
    ("branch", "bias", False, True): "hidden_bias",
    ("branch", "vector", False, True): "hidden_vector",
    ("router", "matrix", True, False): "router_weight",
    ("readout", "matrix", True, False): "output_weight",
    ("readout", "bias", False, False): "output_bias",
}


_NORMED = {"rank_down_weight": "normed_rank_down_weight"}
"""A role whose rules change when a norm reads its output -> the role it then has."""


def role_for(
    where: Where, kind: Kind, in_grows: bool, out_grows: bool, *, normed: bool = False
) -> str:
    """The role of a parameter from where it sits and which of its dimensions grow with the
    width (``docs/roles.md``); one-line ``ValueError`` for a combination no role holds.

    ``where``: ``input`` (the embedding layer), ``outside`` (another map outside the
    residual stream, applied once: a pooler), ``branch`` (inside a residual branch),
    ``router`` (a gate's logits), ``readout``. ``kind``: ``matrix``, ``bias`` (a bias or a
    norm gain) or ``vector`` (another per-channel parameter: SSM ``A_log``, a depthwise
    kernel). ``in_grows``/``out_grows``: whether the fan-in (a conv kernel's counts its
    receptive field, ``in_channels/groups × kernel size``) and the fan-out are Θ(n); a
    vector's fan-in is Θ(1). ``normed``: a scale-invariant norm reads the map's output
    (DeepSeek's ``q_a_layernorm`` after ``q_a_proj``). Only a rank-down map's rules change
    with it: every other matrix's output is Θ(1) at init already, so the norm leaves its
    rules as they are.

    >>> role_for("branch", "matrix", True, False)
    'rank_down_weight'
    >>> role_for("branch", "matrix", True, False, normed=True)
    'normed_rank_down_weight'
    >>> role_for("readout", "bias", False, False)
    'output_bias'
    """
    key = (where, kind, in_grows, out_grows)
    if key in _BY_SHAPE:
        found = _BY_SHAPE[key]
        return _NORMED.get(found, found) if normed else found
    shape = f"{'n' if out_grows else 'r'} × {'n' if in_grows else 'r'}"
    raise ValueError(
        f"no role for a {kind} of shape {shape} (n: grows with the width, r: fixed) in "
        f"the {where}; the roles by place and shape are listed in docs/roles.md"
    )
