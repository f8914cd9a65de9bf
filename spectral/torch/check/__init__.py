"""Checking a model and its optimizer against the rules, at one width and across widths.

:mod:`~spectral.torch.check.forward` (the forward pass measured at one width),
:mod:`~spectral.torch.check.twins` (the model rebuilt at other widths),
:mod:`~spectral.torch.check.twin_rows` (one twin set up, run and stepped: its rows),
:mod:`~spectral.torch.check.verdict` (slopes across widths judged),
:mod:`~spectral.torch.check.widths` (the check across widths) and
:mod:`~spectral.torch.check.model` (``check``: every parameter, group and hook).
"""
