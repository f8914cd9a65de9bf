"""TOML optimizer declarations: valid files derive; every bad file names itself and the field."""

from __future__ import annotations

import pytest

import spectral
from spectral import IncomparableError, SpecError, derive
from spectral.engine.spec_file import MAX_BYTES, load_spec


def write(tmp_path, text: str | bytes, name: str = "my.toml"):
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_full_spec_loads(tmp_path):
    path = write(
        tmp_path,
        """
name = "my-adam"
update_norm = "n_in"
eps = "G / sqrt(n_in * n_out)"
applies_to = "all"
eps_label = "My ε"
eps_key = "eps"
eps_index = 1
summary = "sign descent"
""",
    )
    spec = spectral.load_spec(path)  # the lazy attribute of the package
    assert spec.name == "my-adam" and spec.eps_label == "My ε" and spec.summary == "sign descent"
    assert (spec.eps_key, spec.eps_index) == ("eps", 1)
    assert derive(spec, k=2).to_dict()["rules"] == derive("adamw", k=2).to_dict()["rules"]


def test_defaults(tmp_path):
    spec = load_spec(write(tmp_path, 'name = "m"\nupdate_norm = "sqrt(n_in/n_out)"\n'))
    assert spec.applies_to == "all" and spec.eps is None and spec.eps_label == "ε"
    assert spec.summary == "" and (spec.eps_key, spec.eps_index) == ("eps", None)


def test_expression_the_catalog_never_uses(tmp_path):
    path = write(
        tmp_path,
        'name = "odd"\nupdate_norm = "n_in**(3/4) * max(1, n_out/n_in)"\napplies_to = "matrices"\n',
    )
    d = derive(load_spec(path), k=2)
    assert d.verified and all(c.holds for c in d.checks)
    assert str(d.rule("hidden_weight", "lr").r_n) == "-3/4"


def test_incomparable_spec_loads_but_does_not_derive(tmp_path):
    spec = load_spec(write(tmp_path, 'name = "bad"\nupdate_norm = "n_in + L"\n'))
    with pytest.raises(IncomparableError):
        derive(spec, k=2)


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ('name = "x"\nupdate_norm = "q"\n', "update_norm", "unknown name 'q'"),
        ('name = "x"\nupdate_norm = "n_in"\neps = "n_in ^ 2"\n', "eps", "write **"),
        ('name = "x"\nupdate_norm = 3\n', "update_norm", "expected a string, got an integer"),
        ('name = "x"\nupdate_norm = ["n_in"]\n', "update_norm", "expected a string, got an array"),
        ('name = 7\nupdate_norm = "n_in"\n', "name", "expected a string"),
        ('update_norm = "n_in"\n', "name", "required field is missing"),
        ('name = "x"\n', "update_norm", "required field is missing"),
        ('name = "x"\nupdate_norm = "n_in"\nlr = "1"\n', "lr", "unknown field"),
        ('name = "x"\nupdate_norm = "n_in"\napplies_to = "biases"\n', "applies_to", "'all' or"),
        ('name = "x"\nupdate_norm = "0"\n', "update_norm", "not positive"),
        ('name = "x"\nupdate_norm = "0 * n_in"\n', "update_norm", "not positive"),
        ('name = "x"\nupdate_norm = "-n_in"\n', "update_norm", "not positive"),
        ('name = "x"\nupdate_norm = "n_in - n_out"\n', "update_norm", "difference"),
        ('name = "x"\nupdate_norm = "n_in - 1"\n', "update_norm", "difference"),
        ('name = "x"\nupdate_norm = "n_in/0"\n', "update_norm", "division by zero"),
        ('name = "x"\nupdate_norm = ""\n', "update_norm", "empty"),
        ('name = "x"\nupdate_norm = "n_in**n_out"\n', "update_norm", "must be a number"),
        ('name = "X Y"\nupdate_norm = "n_in"\n', "name", "a-z"),
        ('name = "x"\nupdate_norm = "n_in"\neps_label = "a\\nb"\n', "eps_label", "control"),
        ('name = "x"\nupdate_norm = "lambda: 1"\n', "update_norm", "not allowed"),
        ('name = "x"\nupdate_norm = "n_in.__class__"\n', "update_norm", "not allowed"),
        ('name = "x"\nupdate_norm = "n_in"\neps = "G"\neps_index = "0"\n', "eps_index",
         "expected an integer, got a string"),
        ('name = "x"\nupdate_norm = "n_in"\neps = "G"\neps_index = 99\n', "eps_index",
         "from 0 to 15"),
        ('name = "x"\nupdate_norm = "n_in"\neps = "G"\neps_key = "eps[0]"\n', "eps_key",
         "must be a Python identifier"),
        ('name = "x"\nupdate_norm = "n_in"\neps_key = "matrix_eps"\n', "eps_key",
         "only meaningful when eps is declared"),
    ],
)
def test_bad_fields_name_file_and_field(tmp_path, text, field, words):
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    message = str(info.value)
    assert message.startswith(f"{path}: {field}: "), message
    assert words in message


def test_code_in_an_expression_is_refused_and_never_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, "name = \"x\"\nupdate_norm = \"__import__('os').system('touch x')\"\n")
    with pytest.raises(SpecError, match=r"my\.toml: update_norm: only sqrt, max and min"):
        load_spec(path)
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b'name = "x\nupdate_norm = "n_in"\n', "invalid TOML"),
        (b'name = "x"\nname = "y"\n', "line 2"),
        (b'name = "\xff\xfe"\n', "not UTF-8"),
        (b"#" * (MAX_BYTES + 1), "larger than 64 KiB"),
    ],
)
def test_bad_files(tmp_path, content, words):
    path = write(tmp_path, content)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert str(info.value).startswith(f"{path}: ") and words in str(info.value)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(SpecError, match="no such file"):
        load_spec(tmp_path / "nope.toml")
    with pytest.raises(SpecError, match="is a directory"):
        load_spec(tmp_path)


def test_file_at_the_size_limit_is_read(tmp_path):
    body = 'name = "x"\nupdate_norm = "n_in"\n'
    path = write(tmp_path, body + "#" * (MAX_BYTES - len(body)))
    assert load_spec(path).name == "x"
