"""A model placed once: its family, each parameter's role, what grows, which ties hold.

:func:`place` reads a model the way every entry point needs it — the family (found by its
module names, or the adapter given), every parameter's role (its name, then its shape), the
ties the rules allow — into a :class:`Placement`, and attaches it to the model as the
attribute ``spectral_placement`` (as microsoft/mup writes ``p.infshape``), so that
``apply_multipliers``, ``init_``, ``param_groups``, ``build_optimizers``, ``check`` and
``fold_multipliers`` on the same model read it once between them. The public binding
(:mod:`spectral.torch.config`) is the only code that places a model; every function below
it takes the Placement as a value.

Invalidation: the attribute is read again only while nothing it was read from has changed:
the same ``patterns=``, adapter and rules, the same parameter objects under the same names
and shapes, and no new record of which dimensions grow (``set_base_shapes``). Anything else
places the model again and replaces the attribute. A deep copy or a pickle of the model
carries no placement (the attribute becomes None): the copy is placed when first used.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from torch import nn

from spectral.errors import ConfigTypeError
from spectral.families import Adapter
from spectral.patterns import Patterns, role_pairs
from spectral.torch.model.classify import (
    AdapterLike,
    as_adapter,
    classify_parameters,
    unwrap_model,
)
from spectral.torch.model.own_init import own_exponents
from spectral.torch.model.shapes import base_shapes

Entry = tuple[str, nn.Parameter, str, nn.Module]
"""(name, parameter, role, owning module)."""


@dataclass(frozen=True, eq=False)
class Placement:
    """Where the rules meet one model: made by :func:`place`, read by every entry point.

    The family is found when the placement is made; the roles are read the first time
    they are asked for (so an entry point can refuse a model with no family before it
    reads a role). Iterating yields ``(name, parameter, role, owning module)`` for every
    parameter, a tied input/output embedding once (as ``input_weight``).
    """

    family: Adapter | None
    """The model's family (module patterns for hooks, carriers and checks), or None."""
    patterns: tuple[tuple[str, str], ...]
    """The user's (pattern, role) pairs, tried before the family's."""
    rules: Any
    """The config whose roles and ties the placement was read against (None: any)."""
    model_ref: weakref.ref[nn.Module]
    """The (unwrapped) model, weakly: the model holds its placement as an attribute."""
    given: Adapter | None = None
    """The adapter the user gave (None: the family was found), to read twins alike."""
    state: tuple[Any, ...] = ()
    """What the placement was read from: the parameters under their names and shapes."""

    def __reduce__(self) -> tuple[Any, ...]:
        # a deep copy or pickle of the model is another model: it is placed afresh
        return (_stale, ())

    @property
    def model(self) -> nn.Module:
        """The (unwrapped) model this placement reads."""
        return self._model()

    @functools.cached_property
    def _entries(self) -> tuple[tuple[str, nn.Parameter, str, nn.Module | None], ...]:
        model = self._model()
        placed = classify_parameters(
            model, list(self.patterns), self.family, self.rules
        )
        # the root module is held weakly (through model_ref): the table keeps placements
        # while their model lives, and a placement holding its own key would keep it forever
        return tuple(
            (name, p, role, None if module is model else module)
            for name, p, role, module in placed
        )

    def _model(self) -> nn.Module:
        model = self.model_ref()
        if model is None:
            raise ReferenceError("the model of this placement no longer exists")
        return model

    @property
    def entries(self) -> tuple[Entry, ...]:
        """Every parameter: (name, parameter, role, owning module)."""
        root = self._model()
        return tuple(
            (name, p, role, root if module is None else module)
            for name, p, role, module in self._entries
        )

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self._entries)

    @functools.cached_property
    def own_exponents(self) -> dict[str, float]:
        """Parameter name -> the exponent of the width in the std the model's own init
        drew it with, where not 0 (spectral.torch.model.own_init): read the first time it
        is asked for, which init_ does before it scales anything."""
        return own_exponents(self.entries, self.family)

    def roles(self) -> dict[str, str]:
        """Parameter name -> role."""
        return {name: role for name, _, role, _ in self._entries}


ATTRIBUTE = "spectral_placement"
"""The model attribute that holds its Placement (None after a copy: placed again)."""


def _stale() -> None:
    """What a copied placement becomes: nothing (the copy is placed when first used)."""


def placed_alike(placement: Placement, other: nn.Module) -> Placement:
    """Another model (a twin at another width) placed as ``placement``'s was: the same
    patterns, its family (given or found: the twin is not read anew), the same rules."""
    given = placement.given
    family = given if given is not None else placement.family
    return place(other, placement.rules, patterns=placement.patterns, adapter=family)


def _kept(model: nn.Module, state: tuple[Any, ...]) -> Placement | None:
    """The placement attached to ``model`` (unwrapped) while it still holds (read from
    the model's ``state`` now), else None."""
    kept = model.__dict__.get(ATTRIBUTE)
    if not isinstance(kept, Placement) or kept.model_ref() is not model:
        return None
    return kept if kept.state == state else None


def _state(model: nn.Module) -> tuple[Any, ...]:
    """What a placement was read from in the model: the parameter objects under their
    names and shapes, and the record of growing dimensions it holds (set_base_shapes: a
    new record with other facts places the model again)."""
    params = tuple(
        (name, id(p), tuple(p.shape))
        for name, p in model.named_parameters(remove_duplicate=False)
    )
    found = base_shapes(model)
    record = (
        None if found is None or found[1]["source"] != "set_base_shapes" else found[1]
    )
    return params, record


def place(
    model: nn.Module,
    rules: Any = None,
    *,
    patterns: Patterns | None = None,
    adapter: AdapterLike | None = None,
    example_input: Any = None,
) -> Placement:
    """The model's :class:`Placement`: read once, kept with the model while it holds.

    ``patterns`` (regular expression -> role, tried first) and ``adapter`` (an Adapter, a
    family name or a dict of its fields; found from the module names when None) say where
    the rules meet the model; ``rules`` (the config) decides which roles and ties it
    covers. Reading the roles raises one error naming every parameter nothing places.
    ``example_input``: what the model's forward takes (a tensor, a tuple of positional
    arguments or a dict of keyword arguments), for the one traced forward pass when no
    family's names place the model and no batch can be built for it.

    What one call gives is remembered for the model: a later call without ``patterns``,
    ``adapter`` or ``rules`` reads the model as the earlier one did, so ``patterns=``
    need be given once (to the first call). A call that gives another value, or a model
    whose parameters changed since, is placed again.
    """
    if not isinstance(model, nn.Module):
        raise ConfigTypeError(f"expected an nn.Module, got {type(model).__name__}")
    model = unwrap_model(model)
    pairs = tuple(role_pairs(patterns))
    given = as_adapter(adapter)  # a name or a dict checked, without reading the model
    state = _state(model)
    old = _kept(model, state)
    if old is not None and old.family is None and example_input is not None:
        old = None  # found no family without an example: read again with the one given
    if old is not None:
        pairs = pairs or old.patterns
        given = given if given is not None else old.given
        same_rules = rules is None or rules == old.rules
        # the family the placement found, passed back by an entry point that read it
        # from the placement, is the same reading, not another adapter
        same_family = given == old.given or given == old.family
        if pairs == old.patterns and same_family and same_rules:
            return old
        rules = old.rules if rules is None else rules
    family = given if given is not None else as_adapter(None, model, example_input)
    placement = Placement(
        family=family,
        patterns=pairs,
        rules=rules,
        model_ref=weakref.ref(model),
        given=given,
        state=state,
    )
    model.__dict__[ATTRIBUTE] = placement
    return placement
