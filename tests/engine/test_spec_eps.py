"""Where an implementation reads ε: ``eps_key`` and ``eps_index`` in declarations and files."""

from __future__ import annotations

from fractions import Fraction

import pytest
import sympy as sp

from spectral import SpecError, catalog, derive
from spectral.codegen import torch as codegen_mod
from spectral.spec import MAX_EPS_INDEX, OptimizerSpec
from spectral.engine.spec_file import load_spec, parse_spec
from spectral.symbols import G, n_in, n_out
from spectral.transfer import eps_place

# generated (also run on the --vendor form): only the tests that render a module

ADAFACTOR_TOML = """
name = "adafactor"
update_norm = "sqrt(n_in / n_out)"
eps = "G**2"
applies_to = "matrices"
eps_key = "eps"
eps_index = 0
"""


def adafactor(**over) -> OptimizerSpec:
    """torch.optim.Adafactor's shape: ε is eps[0] of eps=(eps1, eps2)."""
    fields = dict(
        name="adafactor",
        update_norm=sp.sqrt(n_in / n_out),
        eps=G**2,
        applies_to="matrices",
        eps_index=0,
    )
    return OptimizerSpec(**(fields | over))


# ------------------------------------------------------------------------------------
# OptimizerSpec
# ------------------------------------------------------------------------------------


def test_defaults_are_a_float_under_eps():
    spec = OptimizerSpec(name="x", update_norm=n_in, eps=G)
    assert (spec.eps_key, spec.eps_index) == ("eps", None)
    assert eps_place(spec) == ("eps", None)
    bare = OptimizerSpec(name="x", update_norm=n_in)
    assert (bare.eps_key, bare.eps_index) == ("eps", None)


def test_eps_place_reads_the_declaration():
    assert eps_place(adafactor()) == ("eps", 0)
    assert eps_place(adafactor(eps_key="betas_eps", eps_index=15)) == ("betas_eps", 15)


def test_new_fields_take_part_in_equality_and_hash():
    a, b = adafactor(), adafactor()
    assert a == b and hash(a) == hash(b)
    assert a != adafactor(eps_index=1)
    assert a != adafactor(eps_key="eps2")
    assert a != adafactor(eps_index=None)
    assert len({a, b, adafactor(eps_index=1)}) == 2


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"eps_key": ""}, r"^eps_key: '' must be a Python identifier \(a-z, A-Z, 0-9, '_'"),
        ({"eps_key": "1eps"}, r"^eps_key: '1eps' must be a Python identifier"),
        ({"eps_key": "eps-1"}, r"^eps_key: 'eps-1' must be a Python identifier"),
        ({"eps_key": "a b"}, r"^eps_key: 'a b' must be a Python identifier"),
        ({"eps_key": 'e"ps'}, r"^eps_key: 'e\"ps' must be a Python identifier"),
        ({"eps_key": "ε"}, r"^eps_key: 'ε' must be a Python identifier"),
        ({"eps_key": "lambda"}, r"^eps_key: 'lambda' must be .* not a keyword\)"),
        ({"eps_key": "e" * 65}, r"^eps_key: 65 characters \(at most 64\)$"),
        ({"eps_key": 3}, r"^eps_key: 3 must be a Python identifier"),
        ({"eps_index": -1}, r"^eps_index: -1 must be an integer from 0 to 15 \(or absent"),
        ({"eps_index": 16}, r"^eps_index: 16 must be an integer from 0 to 15"),
        ({"eps_index": True}, r"^eps_index: True must be an integer from 0 to 15"),
        ({"eps_index": 0.0}, r"^eps_index: 0\.0 must be an integer from 0 to 15"),
        ({"eps_index": "0"}, r"^eps_index: '0' must be an integer from 0 to 15"),
    ],
)
def test_bad_places_are_refused(over, message):
    with pytest.raises(SpecError, match=message):
        adafactor(**over)


def test_limits_are_accepted():
    assert adafactor(eps_key="e" * 64).eps_key == "e" * 64
    assert adafactor(eps_key="_").eps_key == "_"
    assert adafactor(eps_index=MAX_EPS_INDEX).eps_index == 15 == MAX_EPS_INDEX


@pytest.mark.parametrize(
    ("over", "field"),
    [({"eps_key": "matrix_eps"}, "eps_key"), ({"eps_index": 0}, "eps_index")],
)
def test_a_place_without_eps_is_refused(over, field):
    with pytest.raises(
        SpecError,
        match=rf"^{field}: only meaningful when eps is declared; declare eps or drop {field}$",
    ):
        OptimizerSpec(name="x", update_norm=n_in, **over)


def test_the_default_key_without_eps_is_fine():
    assert OptimizerSpec(name="x", update_norm=n_in, eps_key="eps").eps_key == "eps"


# ------------------------------------------------------------------------------------
# the catalog
# ------------------------------------------------------------------------------------


def test_catalog_places():
    specs = catalog()
    assert eps_place(specs["shampoo"]) == ("matrix_eps", None)
    assert eps_place(specs["adamw"]) == ("eps", None)
    assert eps_place(specs["adafactor"]) == ("eps", 0)  # torch.optim.Adafactor(eps=(eps1, eps2))
    for name, spec in specs.items():
        if name not in ("shampoo", "adafactor"):
            assert eps_place(spec) == ("eps", None), name


# SOAP's ε (optimizers/soap.py), by hand. SOAP runs Adam on the rotated gradient
# Q_Lᵀ ∇W Q_R; with Q_L, Q_R the eigenbases of ∇W∇Wᵀ and ∇Wᵀ∇W that matrix is diag(Σ, 0),
# so ε is added to sqrt(v̂) = Σ: the singular values of a low-rank gradient, Θ(‖∇W‖₂) = Θ(G)
# (not Adam's entrywise G/sqrt(n_in n_out)). G per role from loss sensitivity (App. C.4):
#   input   ‖∇W₀‖₂ = Θ(sqrt(n_in/n_out)) = Θ(n^-1/2)  (n_in = d₀ fixed)   → ε_base/√r_n
#   hidden  ‖∇W_l‖₂ = Θ(sqrt(n_in/n_out)/L) = Θ(1/L) at k = 2             → ε_base/r_L
#           Θ(1/sqrt(L)) at k = 1 (App. D)                                 → ε_base/√r_L
#   output  ‖∇W_{L+1}‖₂ = Θ(1/sqrt(n_in n_out)) = Θ(n^-1/2)  (n_out fixed) → ε_base/√r_n
# Shampoo's ε is G² (Tab. muon-wd: ε_base/r_n, /r_L², /r_n; App. D.2: /r_n, /r_L, /r_n), so
# each SOAP exponent is half of Shampoo's. Measured: benchmarks/eps_threshold.py (ε* = 0.516 G
# at every width and role, docs/probe/soap-eps.json).
SOAP_EPS = {
    2: {"input_weight": (Fraction(-1, 2), 0), "hidden_weight": (0, -1), "output_weight": (Fraction(-1, 2), 0)},
    1: {"input_weight": (Fraction(-1, 2), 0), "hidden_weight": (0, Fraction(-1, 2)), "output_weight": (Fraction(-1, 2), 0)},
}
# the router (docs/router.md): ε = G = ‖∇W_r‖_2 = √n/L (k = 2), √(n/L) (k = 1)
SOAP_EPS[2]["router_weight"] = (Fraction(1, 2), -1)
SOAP_EPS[1]["router_weight"] = (Fraction(1, 2), Fraction(-1, 2))


@pytest.mark.parametrize("k", [1, 2])
def test_soap_eps_exponents(k):
    d = derive("soap", k=k)
    assert d.verified
    got = {role: (e.r_n, e.r_L) for role, hps in d.rules.items() for hp, e in hps.items() if hp == "eps"}
    assert got == SOAP_EPS[k]
    shampoo = derive("shampoo", k=k)
    for role, (a, b) in got.items():
        assert (2 * a, 2 * b) == (shampoo.rule(role, "eps").r_n, shampoo.rule(role, "eps").r_L)
    assert catalog()["soap"].eps == G and eps_place(catalog()["soap"]) == ("eps", None)


def test_sophia_declares_no_eps():
    """SophiaH's ε floors the Hessian estimate, whose scale no declaration symbol gives
    (docs/catalog.md, "ε of SOAP and Sophia")."""
    assert catalog()["sophia"].eps is None
    assert "eps" not in derive("sophia", k=2).hps


# ------------------------------------------------------------------------------------
# spec files
# ------------------------------------------------------------------------------------


def test_file_with_a_tuple_place(tmp_path):
    path = tmp_path / "adafactor.toml"
    path.write_text(ADAFACTOR_TOML, encoding="utf-8")
    spec = load_spec(path)
    assert (spec.eps_key, spec.eps_index) == ("eps", 0)
    assert spec == adafactor()


def test_file_defaults():
    spec = parse_spec({"name": "x", "update_norm": "n_in", "eps": "G"})
    assert (spec.eps_key, spec.eps_index) == ("eps", None)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"eps_index": "0"}, "f.toml: eps_index: expected an integer, got a string"),
        ({"eps_index": 0.5}, "f.toml: eps_index: expected an integer, got a float"),
        ({"eps_index": True}, "f.toml: eps_index: expected an integer, got a boolean"),
        ({"eps_index": [0, 1]}, "f.toml: eps_index: expected an integer, got an array"),
        ({"eps_index": 16}, "f.toml: eps_index: 16 must be an integer from 0 to 15"),
        ({"eps_index": -1}, "f.toml: eps_index: -1 must be an integer from 0 to 15"),
        ({"eps_key": 1}, "f.toml: eps_key: expected a string, got an integer"),
        ({"eps_key": {"a": 1}}, "f.toml: eps_key: expected a string, got a table"),
        ({"eps_key": "eps 1"}, "f.toml: eps_key: 'eps 1' must be a Python identifier"),
        ({"eps_key": "x\ny"}, "f.toml: eps_key: 'x\\ny' must be a Python identifier"),
        ({"eps_key": "e" * 300}, "f.toml: eps_key: 300 characters (at most 64)"),
    ],
)
def test_bad_file_values(extra, message):
    data = {"name": "x", "update_norm": "n_in", "eps": "G"} | extra
    with pytest.raises(SpecError) as info:
        parse_spec(data, where="f.toml")
    assert str(info.value).startswith(message), str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("extra", [{"eps_key": "matrix_eps"}, {"eps_index": 1}])
def test_file_place_without_eps(extra):
    field = next(iter(extra))
    with pytest.raises(SpecError) as info:
        parse_spec({"name": "x", "update_norm": "n_in"} | extra, where="f.toml")
    assert str(info.value) == (
        f"f.toml: {field}: only meaningful when eps is declared; declare eps or drop {field}"
    )


def test_unknown_field_lists_the_new_fields():
    with pytest.raises(SpecError) as info:
        parse_spec({"name": "x", "update_norm": "n_in", "eps_keys": "eps"}, where="f.toml")
    assert str(info.value).startswith("f.toml: eps_keys: unknown field; the fields are ")
    assert "eps_key, eps_index" in str(info.value)


# ------------------------------------------------------------------------------------
# codegen: the template gets each optimizer's place
# ------------------------------------------------------------------------------------


def _rendered_kinds(monkeypatch, *args, **kwargs) -> tuple[str, list[dict]]:
    """Render, and keep the ``kinds`` the template was given."""
    seen: dict = {}
    real = codegen_mod._environment

    class Spy:
        def __init__(self, env):
            self.env = env

        def get_template(self, name):
            template = self.env.get_template(name)

            class Wrapped:
                def render(self, **context):
                    seen.update(context)
                    return template.render(**context)

            return Wrapped()

    monkeypatch.setattr(codegen_mod, "_environment", lambda: Spy(real()))
    source = codegen_mod.render(*args, **kwargs)
    return source, seen["kinds"]


@pytest.mark.generated
def test_render_passes_eps_index_of_a_user_spec(monkeypatch):
    spec = adafactor()
    source, kinds = _rendered_kinds(monkeypatch, spec, "adamw", base_width=64, base_depth=2)
    compile(source, "<generated>", "exec")
    by_name = {kd["name"]: kd for kd in kinds}
    assert set(by_name) == {"adafactor", "adamw"}
    assert (by_name["adafactor"]["eps_key"], by_name["adafactor"]["eps_index"]) == ("eps", 0)
    assert (by_name["adamw"]["eps_key"], by_name["adamw"]["eps_index"]) == ("eps", None)


@pytest.mark.generated
def test_render_alone_with_eps_index(monkeypatch):
    source, kinds = _rendered_kinds(monkeypatch, adafactor(eps_index=1), base_width=64, base_depth=2)
    compile(source, "<generated>", "exec")
    assert [(kd["name"], kd["eps_key"], kd["eps_index"]) for kd in kinds] == [("adafactor", "eps", 1)]


@pytest.mark.generated
def test_render_shampoo_reads_matrix_eps(monkeypatch):
    _, kinds = _rendered_kinds(monkeypatch, "shampoo", "adamw", base_width=64, base_depth=2)
    places = {kd["name"]: (kd["eps_key"], kd["eps_index"]) for kd in kinds}
    assert places == {"shampoo": ("matrix_eps", None), "adamw": ("eps", None)}
