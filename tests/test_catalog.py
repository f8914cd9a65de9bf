"""The optimizer catalog: parametrised over the registry, so a new entry is tested at once."""

from __future__ import annotations

import doctest
import importlib

import pytest

from spectral.catalog import modules as catalog_modules
import sympy as sp

import spectral
from spectral import OptimizerSpec, SpecError, UnknownOptimizerError, catalog, derive
from spectral.catalog import build_catalog, resolve
from spectral.engine.roles import ROLE_NAMES, ROLES
from spectral.symbols import SYMBOLS, n_in

CATALOG = sorted(catalog())
PAPER = {"muon-kimi", "muon", "shampoo", "soap", "sgd", "adamw", "lion", "sophia", "sso"}
"""The optimizers the paper tabulates (tests/engine/test_paper_tables.py pins their rules)."""
MORE = {
    "adam", "nadam", "radam", "adafactor", "adopt", "adan", "mars", "schedulefree-adamw",
    "lamb", "signsgd", "scion", "normuon",
}
"""Declared from their own papers and checked against their implementations."""
OUTSIDE = {"lamb", "schedulefree-adamw", "adafactor", "radam"}
"""Implementations that break an assumption of the framework somewhere: their notes say which."""


def test_catalog_is_complete():
    assert set(CATALOG) == PAPER | MORE
    assert len(CATALOG) >= 20
    assert list(catalog())[: len(PAPER)] == [
        "muon-kimi", "muon", "shampoo", "soap", "sgd", "adamw", "lion", "sophia", "sso"
    ]


@pytest.mark.parametrize("name", CATALOG)
def test_declaration_is_documented(name):
    spec = catalog()[name]
    assert spec.doc and "Idealised update (" in spec.doc, "docstring: the idealised update"
    # where it comes from: the paper's appendix, or the optimizer's own paper (year, Alg./Sec.)
    source = spec.doc[spec.doc.index("Idealised update (") :].split(")")[0]
    assert "App." in source or any(ch.isdigit() for ch in source), source
    assert spec.paper and spec.summary
    assert spec.update_norm.free_symbols <= set(SYMBOLS.values())


@pytest.mark.parametrize("name", sorted(OUTSIDE))
def test_departures_from_the_framework_are_noted(name):
    """An implementation outside the framework's assumptions is declared with a note saying
    which assumption fails and what the rules then mean."""
    doc = catalog()[name].doc
    assert "Outside the" in doc and "rules" in doc


@pytest.mark.parametrize("name", CATALOG)
@pytest.mark.parametrize("k", [1, 2, 3])
def test_every_declaration_derives_and_verifies(name, k):
    d = derive(name, k=k)
    spec = catalog()[name]
    assert d.verified and d.terms_checked > 0
    assert all(c.holds for c in d.checks)
    # matrix-only optimizers: every weight role (the router's included), no bias
    weights = tuple(r.name for r in ROLES if not r.is_bias)
    expected_roles = ROLE_NAMES if spec.applies_to == "all" else weights
    assert d.roles == expected_roles
    for role in d.roles:
        assert set(d.rules[role]) == set(d.hps)
        assert ("eps" in d.rules[role]) == spec.has_eps


@pytest.mark.parametrize("name", CATALOG)
def test_explanations_name_a_condition(name):
    for e in derive(name, k=2).entries:
        assert e.explanation.startswith(f"{e.hp}({e.role}) = Θ(")
        assert e.condition in e.explanation or e.condition == "init"


def test_duplicate_names_are_refused():
    spec = catalog()["adamw"]
    with pytest.raises(ValueError, match="duplicate optimizer name 'adamw'"):
        build_catalog([spec, spec])


@pytest.mark.parametrize("name", CATALOG)
def test_a_name_resolves_to_its_catalog_declaration(name):
    """resolve() imports the one module a name lives in; it finds the catalog's own object."""
    assert resolve(name) is catalog()[name]
    assert resolve(f" {name.upper()} ") is catalog()[name]


def test_unknown_names_list_the_known_ones():
    with pytest.raises(
        UnknownOptimizerError, match="unknown optimizer 'adamx'; known optimizers: adafactor, adam, adamw, adan"
    ):
        derive("adamx")


def test_per_call_catalog_does_not_mutate_the_global_one():
    mine = OptimizerSpec(name="mine", update_norm=n_in)
    assert derive("mine", catalog={"mine": mine}).optimizer == "mine"
    assert "mine" not in catalog()


@pytest.mark.parametrize("bad", [0, -1, 65, 2.0, True, "2"])
def test_bad_k_is_refused(bad):
    with pytest.raises(SpecError, match="k must be an integer from 1 to 64"):
        derive("adamw", k=bad)


def test_non_positive_declarations_are_refused():
    with pytest.raises(SpecError, match="not positive"):
        OptimizerSpec(name="zero", update_norm=sp.Integer(0))
    with pytest.raises(SpecError, match="not positive"):
        OptimizerSpec(name="neg", update_norm=-n_in)
    with pytest.raises(SpecError, match="unknown symbols x"):
        OptimizerSpec(name="x", update_norm=sp.Symbol("x", positive=True))


def test_result_is_frozen():
    d = derive("adamw")
    with pytest.raises(AttributeError):
        d.k = 3  # type: ignore[misc]


def test_json_shape_matches_the_issue():
    d = derive("adamw", k=2).to_dict()
    assert d["optimizer"] == "adamw" and d["k"] == 2 and d["verified"] is True
    assert d["rules"]["hidden_weight"] == {
        "multiplier": {"r_n": "0", "r_L": "-1"},
        "init_var": {"r_n": "-1", "r_L": "0"},
        "lr": {"r_n": "-1", "r_L": "0"},
        "weight_decay": {"r_n": "1", "r_L": "0"},
        "eps": {"r_n": "-1", "r_L": "-1"},
    }
    assert list(d["rules"]) == list(ROLE_NAMES)


def test_public_api_is_pinned():
    assert sorted(spectral.__all__) == sorted(
        [
            "derive", "catalog", "resolve", "load_spec", "OptimizerSpec", "Derivation", "Entry",
            "Exponent", "CheckGroup", "RoleScales", "Theta", "ROLE_NAMES", "HPS", "MAX_K",
            "SpectralError", "SpecError", "UnknownOptimizerError", "DerivationError",
            "IncomparableError", "VerificationError", "ConfigError", "ConfigTypeError",
            "UnsupportedModelError",
        ]
    )
    for name in spectral.__all__:
        assert getattr(spectral, name) is not None


ENGINE_MODULES = [
    "engine.theta", "engine.expr", "engine.conditions", "engine.solve", "engine.verify",
    "engine.result", "spec", "catalog", "engine.roles", "engine.axes", "engine.degree",
    "scaling", "transfer",
]


@pytest.mark.parametrize("module", ENGINE_MODULES)
def test_doctests(module):
    mod = importlib.import_module(f"spectral.{module}")
    failures, _ = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert failures == 0


def test_package_doctest():
    failures, _ = doctest.testmod(spectral)
    assert failures == 0
    assert catalog() is catalog()


@pytest.mark.parametrize("module", catalog_modules(), ids=lambda m: m.SPEC.name)
def test_every_optimizer_file_is_complete(module):
    """One file holds everything about an optimizer: a file missing a part fails here."""
    import importlib

    from spectral.optimizers.entry import JaxImpl, NoJax, ProbeSetup, TorchImpl
    from spectral.measure.probe import PROBE_BUILDERS
    from spectral.transfer import DEFAULT_EPS

    spec = module.SPEC
    assert module.__doc__ and spec.summary and spec.paper, spec.name
    torch_impl = module.TORCH
    assert isinstance(torch_impl, TorchImpl), spec.name
    assert torch_impl.notes, f"{spec.name}: TORCH.notes must say how it was checked"
    assert all(line.isascii() for line in torch_impl.notes), "notes land in generated code"
    owner, _, cls = torch_impl.cls.rpartition(".")
    assert hasattr(importlib.import_module(owner), cls), torch_impl.cls
    # an eps rule needs the implementation's default (the base value), and only then
    assert (torch_impl.default_eps is not None) == spec.has_eps, spec.name
    assert (spec.name in DEFAULT_EPS) == spec.has_eps
    assert isinstance(module.PROBE, ProbeSetup), spec.name
    assert PROBE_BUILDERS[spec.name].name == module.PROBE.label
    assert isinstance(module.JAX, (JaxImpl, NoJax)), spec.name
    if isinstance(module.JAX, JaxImpl):
        assert module.JAX.notes, spec.name
    else:
        assert module.JAX.reason, spec.name


def test_implementation_records_are_built_on_first_read():
    """A catalog file's TORCH, PROBE and JAX are built by its _records() the first time one
    is read, then are plain attributes of the module, the same objects on every read; a
    name the file lacks is an AttributeError, and a probe for a dunder builds nothing."""
    import types

    from spectral.optimizers import records_on_first_use

    built = []

    def build():
        built.append(1)
        return {"TORCH": object(), "PROBE": object(), "JAX": object()}

    module = types.ModuleType("spectral.optimizers._probe_records")
    module.__getattr__ = records_on_first_use(module.__name__, build)
    import sys

    sys.modules[module.__name__] = module
    try:
        assert not hasattr(module, "__wrapped__") and not built
        torch_record = module.TORCH
        assert built == [1] and vars(module)["TORCH"] is torch_record is module.TORCH
        assert module.JAX is vars(module)["JAX"] and built == [1]
        with pytest.raises(AttributeError, match="has no attribute 'NOPE'"):
            module.NOPE  # noqa: B018
        assert built == [1]
    finally:
        del sys.modules[module.__name__]
    adamw = importlib.import_module("spectral.optimizers.adamw")
    assert adamw.TORCH is adamw.TORCH and adamw.TORCH.cls == "torch.optim.AdamW"
