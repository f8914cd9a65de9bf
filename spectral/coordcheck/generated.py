"""The generated config module every point of a coordinate check is built from.

:func:`config_module` renders (once per process and parameterization, into one temporary
folder) the module ``spectral codegen`` writes, so that the check exercises exactly what a
user's training script imports.
"""

from __future__ import annotations

import math
from typing import Any

from .config import CoordCheckConfig

__all__ = ["base_init_std", "config_module"]


_FOLDER: list[str] = []


def _folder() -> str:
    """One temporary folder per process for the rendered config modules."""
    import tempfile

    if not _FOLDER:
        import atexit
        import shutil

        _FOLDER.append(tempfile.mkdtemp(prefix="spectral-coordcheck-"))
        # removed as the process ends (Ctrl-C included): nothing left in $TMPDIR
        atexit.register(shutil.rmtree, _FOLDER[0], ignore_errors=True)
    return _FOLDER[0]


def config_module(cfg: CoordCheckConfig, param: str) -> Any:
    """The config module :mod:`spectral.codegen` generates for ``param`` (``mup-k1``: k = 1,
    ``mup``: :meth:`CoordCheckConfig.rules_k`; ``sp`` uses the ``mup`` module at the base size)."""
    from ..codegen.torch import load_generated  # the derivation engine: only when a check runs

    k = cfg.rules_k("mup" if param == "sp" else param)
    return load_generated(
        cfg.hidden,
        cfg.others,
        k,
        base_width=cfg.base_width,
        base_depth=cfg.base_depth,
        folder=_folder(),
    )


def base_init_std(cfg: CoordCheckConfig) -> float:
    """The generated module's ``init_std`` (σ of the matrices at the base size): GPT-2's
    (and Hugging Face's ``initializer_range``) 0.02 for the GPT and factory models,
    ``1/√n_base`` for the MLP (its dense input layer gets ``σ/√d_in``)."""
    return 1.0 / math.sqrt(cfg.base_width) if cfg.model == "mlp" else 0.02
