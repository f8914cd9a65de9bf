"""Real torch optimizers built from their implementation records (TorchImpl)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import torch

from spectral.errors import ConfigError, MissingDependencyError
from spectral.optimizers.entry import TorchImpl


def fixed_kwargs(
    kwargs: Mapping[str, Any], required: Mapping[str, Any]
) -> dict[str, Any]:
    """kwargs with the arguments the rules need; a user value that differs is refused."""
    for key, value in required.items():
        if key in kwargs and kwargs[key] != value:
            raise ConfigError(f"{key}={kwargs[key]!r} would break muP; use {value!r}")
    return {**kwargs, **required}


class TorchFactory:
    """factory(groups, **kwargs) -> the implementation ``impl`` names, set up as recorded.

    A class rather than a closure, so the optimizer that holds it pickles and deep-copies.
    """

    def __init__(self, name: str, impl: TorchImpl):
        self.name, self.impl = name, impl

    def __call__(
        self, groups: list[dict[str, Any]], **kwargs: Any
    ) -> torch.optim.Optimizer:
        impl = self.impl
        module_name, _, class_name = impl.cls.rpartition(".")
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError) as exc:
            package = module_name.split(".")[0].replace("_", "-")
            raise MissingDependencyError(
                f"{self.name} is built by {impl.cls}, which cannot be imported ({exc}); "
                f"install it (pip install {package})"
            ) from None
        for group in groups:
            for key, value in impl.group_defaults.items():
                group[key] = value
        arguments = fixed_kwargs({**impl.defaults, **kwargs}, impl.fixed)
        return cls(groups, **arguments)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TorchFactory) and (other.name, other.impl) == (
            self.name,
            self.impl,
        )

    def __hash__(self) -> int:
        return hash((self.name, self.impl.cls))

    def __repr__(self) -> str:
        return f"TorchFactory({self.name!r}, {self.impl.cls})"
