"""Which dimensions of each role grow with the width: the one table every reader shares.

A role's matrix is ``n_out x n_in``; each is either Theta(n) (grows with the width) or
Theta(1) (fixed: a vocabulary, a rank, a number of experts). The engine builds its Theta
dimensions from this table (spectral.engine.roles), the runtime reads it to check a
parameter's shape against its role, to judge a slope across widths and to find the
width -> fixed maps inside a block; the JAX runtime reads the same. Standard library only:
importing it loads no sympy (spectral.engine's __init__ imports nothing), and a vendored config copies it.
"""

from __future__ import annotations

from types import MappingProxyType

__all__ = ["GROWS", "WIDTH_TO_FIXED", "NORM_READ", "fan_in_grows", "fan_out_grows"]

GROWS = MappingProxyType(
    {
        # role: (n_out grows, n_in grows)
        "input_weight": (True, False),
        "hidden_weight": (True, True),
        "output_weight": (False, True),
        "router_weight": (False, True),
        "input_bias": (True, False),
        "hidden_bias": (True, False),
        "output_bias": (False, False),
        "outer_weight": (True, True),
        "outer_bias": (True, False),
        "rank_down_weight": (False, True),
        "normed_rank_down_weight": (False, True),
        "rank_up_weight": (True, False),
        "hidden_vector": (True, False),
    }
)
"""Role -> (whether n_out grows with the width, whether n_in does); a bias is an
n_out x 1 matrix (n_in = 1, fixed)."""

WIDTH_TO_FIXED = ("rank_down_weight", "router_weight")
"""Roles of a width -> fixed map inside a block (the readout, also width -> fixed, ends
the network): their rules' init variance is 1/n^2, so their output at init is
Theta(n^-1/2) (docs/roles.md)."""

NORM_READ = ("normed_rank_down_weight",)
"""Roles of a width -> fixed map inside a block whose output a scale-invariant norm reads
(DeepSeek's q_a_proj / kv_a_proj_with_mqa under q_a_layernorm / kv_a_layernorm, Jamba's
x_proj under its dt, B and C norms): their rules' init variance is 1/n, so the norm's
input is Theta(1) at init and its epsilon needs no scaling; not in WIDTH_TO_FIXED
(docs/roles.md, "Rank-down maps a norm reads")."""


def fan_in_grows(role: str) -> bool:
    """Whether the role's fan-in (n_in) grows with the width; KeyError for no role."""
    return GROWS[role][1]


def fan_out_grows(role: str) -> bool:
    """Whether the role's fan-out (n_out) grows with the width; KeyError for no role."""
    return GROWS[role][0]
