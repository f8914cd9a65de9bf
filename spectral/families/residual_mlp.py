"""The ``residual-mlp`` family: spectral.models.ResidualMLP."""

from __future__ import annotations

from spectral.families.adapter import make_adapter

__all__ = ["RESIDUAL_MLP"]

RESIDUAL_MLP = make_adapter(
    name="residual-mlp",  # spectral.models.ResidualMLP
    detect=r"blocks\.\d+\.layers\.\d+$",
    roles=(
        (r"input\.weight$", "input_weight"),
        (r"input\.bias$", "input_bias"),
        (r"blocks\.\d+\.layers\.\d+\.weight$", "hidden_weight"),
        (r"blocks\.\d+\.layers\.\d+\.bias$", "hidden_bias"),
        (r"output\.weight$", "output_weight"),
    ),
    input=(r"input$",),
    branches=(r"blocks\.\d+$",),
    output=(r"output$",),
    final=r"output$",
    branches_per_layer=1,
)
