"""The JAX module (`spectral codegen --framework jax`): standalone, lint-clean, the PyTorch
module's numbers, and the PyTorch module's training step for step.

Shapes are tiny: every jit compile here runs on CPU.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax")
optax = pytest.importorskip("optax")
nnx = pytest.importorskip("flax.nnx")
import jax.numpy as jnp  # noqa: E402

import spectral.codegen.context  # noqa: E402
import spectral.scaling  # noqa: E402
from spectral.catalog import catalog, module_of  # noqa: E402
from spectral.codegen import render  # noqa: E402
from spectral.optimizers.entry import JaxImpl  # noqa: E402
from spectral.models.flax import GPT as JaxGPT  # noqa: E402
from spectral.models.flax import ResidualMLP as JaxMLP  # noqa: E402
from spectral.jax.labels import path_name  # noqa: E402

pytestmark = pytest.mark.generated  # also run on the --vendor form

ROOT = Path(__file__).resolve().parents[2]
RUFF = Path(sys.executable).parent / "ruff"
COMBOS = [(name, None) for name in catalog()] + [
    ("muon-kimi", "adamw"),
    ("muon", "adamw"),
    ("shampoo", "adamw"),
    ("sgd", "lion"),
]
IN_OPTAX = {name for name in catalog() if isinstance(module_of(name).JAX, JaxImpl)}
"""Catalog optimizers the JAX module builds from optax (the rest: transforms=)."""
PAIRS = [(256, 4), (512, 8), (2048, 32), (128, 2), (1000, 7)]
BASE = {"lr": 0.01, "init_std": 0.02, "weight_decay": 0.1, "eps": 1e-7, "multiplier": 1.5}


def label(hidden: str, others: str | None) -> str:
    return hidden if others is None else f"{hidden}+{others}"


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    # registered as `import` would: dataclasses look a class's module up by name
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def generate(folder: Path, hidden, others=None, *, framework="jax", base_width=16, base_depth=1):
    name = f"{framework}_{label(hidden, others)}_{base_width}_{base_depth}"
    path = folder / (re.sub(r"\W", "_", name) + ".py")
    path.write_text(
        render(hidden, others, base_width=base_width, base_depth=base_depth, framework=framework)
    )
    return load(path)


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("generated_jax")
    paths = {}
    for hidden, others in COMBOS:
        path = out / ("cfg_" + re.sub(r"\W", "_", label(hidden, others)) + ".py")
        path.write_text(render(hidden, others, base_width=256, base_depth=4, framework="jax"))
        paths[label(hidden, others)] = path
    return paths


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("jax_modules")


def mlp_params(width=8, depth=2, d_in=3, d_out=2, k=2):
    """The residual MLP's parameters as a plain nested dict (no flax)."""
    ones = lambda *s: jnp.ones(s, jnp.float32)  # noqa: E731
    return {
        "input": {"kernel": ones(d_in, width), "bias": ones(width)},
        "blocks": {
            str(li): {"layers": {str(i): {"kernel": ones(width, width), "bias": ones(width)}
                                 for i in range(k)}}
            for li in range(depth)
        },
        "output": {"kernel": ones(width, d_out)},
    }


def dotted(keypath) -> str:
    """A pytree key path as the dotted name the modules match ("blocks.0.layers.1.kernel";
    an nnx Variable's trailing ".value" dropped), written here independently of them."""
    parts = [str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))) for k in keypath]
    return ".".join(parts[:-1] if parts[-1] == "value" else parts)


def flat(tree) -> dict:
    return {dotted(kp): v for kp, v in jax.tree_util.tree_flatten_with_path(tree)[0]}


# ------------------------------------------------------------------------------------
# the file itself
# ------------------------------------------------------------------------------------


@pytest.mark.parametrize("hidden,others", COMBOS, ids=[label(*c) for c in COMBOS])
def test_deterministic_ascii_and_imports_only_jax_optax(hidden, others, generated):
    text = generated[label(hidden, others)].read_text(encoding="utf-8")
    assert render(hidden, others, base_width=256, base_depth=4, framework="jax") == text
    compile(text, "cfg_jax.py", "exec")
    assert text.isascii()
    imports = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            imports |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            imports.add(node.module)
    if spectral.codegen.context.VENDOR_DEFAULT:  # standalone: the standard library, jax and optax
        allowed = {"math", "re", "collections.abc", "typing", "dataclasses", "importlib",
                   "jax", "jax.numpy", "optax"}
        assert imports <= allowed, imports
    else:  # the numbers, bound to the runtime
        assert imports == {"spectral.jax"}, imports
    assert "--framework jax" in text.splitlines()[3]
    # the torch module is untouched by the framework argument
    assert render(hidden, others, base_width=256, base_depth=4, framework="torch") == render(
        hidden, others, base_width=256, base_depth=4
    )


def test_ruff_clean(generated):
    files = [str(p) for p in generated.values()]
    for extra in (["--config", str(ROOT / "pyproject.toml")], ["--isolated"]):
        r = subprocess.run(
            [str(RUFF), "check", "--no-cache", *extra, *files], capture_output=True, text=True
        )
        assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run(
        [str(RUFF), "format", "--check", "--isolated", *files], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_runtime_imports_only_the_standard_library_jax_and_optax():
    code = (
        "import spectral.jax, sys; "
        "bad = {'sympy', 'pydantic', 'jinja2', 'rich', 'torch', 'flax'} & set(sys.modules); "
        "assert not bad, bad"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def _roots(text: str) -> set[str]:
    """The top-level packages a module's import statements name."""
    roots = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            roots.add((node.module or "").split(".")[0])
    return roots


def test_the_issues_module_is_numbers_and_the_vendored_one_standalone():
    """Issue 20: the module for Muon-Kimi + AdamW holds numbers and bindings (at most 170
    lines); --vendor copies spectral.jax in and imports neither spectral nor sympy."""
    args = ("muon-kimi", "adamw")
    kw = dict(base_width=256, base_depth=4, framework="jax")
    text = render(*args, **kw, vendor=False)
    # issue 49 added ALONG (one small table per optimizer) and BASE_RUN: numbers too
    assert len(text.splitlines()) <= 170
    assert _roots(text) == {"spectral"}
    vendored = render(*args, **kw, vendor=True)
    assert _roots(vendored) <= {"math", "re", "collections", "typing", "dataclasses",
                                "importlib", "jax", "optax"}
    assert "--vendor" in vendored.splitlines()[3]
    assert "def build_optimizer(" in vendored and "def build_optimizer(" not in text
    # the numbers are the same text in both forms
    numbers = text.split("BASE_WIDTH = ", 1)[1]
    assert vendored.endswith(numbers)


def test_every_jax_record_names_an_installed_optax_function():
    from spectral.jax.transforms import resolve

    for name in IN_OPTAX:
        record = module_of(name).JAX
        assert callable(resolve(record.transform)), name
        assert record.notes and all(line.isascii() for line in record.notes), name
    with pytest.raises(ValueError, match="cannot import optax.nosuch"):
        resolve("optax.nosuch")


@pytest.mark.parametrize("hidden,others", COMBOS, ids=[label(*c) for c in COMBOS])
def test_implementations_are_the_catalog_files_records(hidden, others, folder):
    """IMPLEMENTATIONS holds each optimizer's JAX record (notes as comments), and
    NO_IMPLEMENTATION the reason of each one optax lacks."""
    mod = generate(folder, hidden, others)
    for name in set(mod.OPTIMIZERS.values()):
        record = module_of(name).JAX
        if isinstance(record, JaxImpl):
            got = mod.IMPLEMENTATIONS[name]
            assert (got.transform, got.recipe, got.fixed) == (
                record.transform, record.recipe, record.fixed)
            assert name not in mod.NO_IMPLEMENTATION
        else:
            assert mod.NO_IMPLEMENTATION[name] == f"{name}: {record.reason}."
            assert name not in mod.IMPLEMENTATIONS


@pytest.mark.parametrize("hidden,others", [("muon-kimi", "adamw"), ("muon", "lion"),
                                           ("sgd", None)])
@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_both_forms_give_the_same_numbers_and_the_same_step(hidden, others, tmp_path):
    """The importing module and the --vendor one: identical hparams and multipliers, and
    identical init and optax updates for one step of the flax reference MLP."""
    forms = []
    for vendor in (False, True):
        path = tmp_path / f"cfg_{'vendored' if vendor else 'importing'}.py"
        path.write_text(render(hidden, others, base_width=16, base_depth=1,
                               framework="jax", vendor=vendor))
        forms.append(load(path))
    importing, vendored = forms
    assert "Config" not in vars(vendored) or vendored.Config is not importing.Config
    for w, d in PAIRS:
        for eps in (None, 1e-6):
            args = dict(BASE, eps=eps)
            assert importing.hparams(w, d, **args) == vendored.hparams(w, d, **args)
        assert importing.multipliers(w, d, 1.5) == vendored.multipliers(w, d, 1.5)
    width, depth = 32, 2
    model = JaxMLP(XF_IN, XF_OUT, width, depth, multipliers=importing, rngs=nnx.Rngs(0))
    graphdef, state = nnx.split(model, nnx.Param)
    x = jax.random.normal(jax.random.key(1), (XF_BATCH, XF_IN))
    y = jax.random.normal(jax.random.key(2), (XF_BATCH, XF_OUT))
    results = []
    for mod in forms:
        params = mod.init(state, jax.random.key(0), width, depth, init_std=0.5)
        tx = mod.optimizer(params, width, depth, lr=0.01, weight_decay=0.1)
        grads = jax.grad(lambda p: jnp.mean((nnx.merge(graphdef, p)(x) - y) ** 2))(params)
        updates, _ = jax.jit(tx.update)(grads, tx.init(params), params)
        results.append((flat(mod.labels(params)), flat(params), flat(updates)))
    (labels_i, params_i, updates_i), (labels_v, params_v, updates_v) = results
    assert labels_i == labels_v
    assert set(params_i) == set(params_v) == set(updates_i) == set(updates_v)
    for path in params_i:
        np.testing.assert_array_equal(np.asarray(params_i[path]), np.asarray(params_v[path]))
        np.testing.assert_array_equal(np.asarray(updates_i[path]), np.asarray(updates_v[path]))
        assert float(np.abs(np.asarray(updates_i[path])).max()) > 0, path


def test_the_papers_optimizers_that_optax_has_are_built_from_optax():
    assert IN_OPTAX >= {"sgd", "adamw", "lion", "muon", "muon-kimi"}


def test_unknown_framework_is_refused():
    from spectral.errors import SpecError

    with pytest.raises(SpecError, match="framework must be one of torch, jax, torchtitan, megatron, got 'tf'"):
        render("adamw", base_width=64, base_depth=2, framework="tf")


_BLOCKED = r"""
import importlib.util, json, sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None  # `import name` raises ImportError
import jax, jax.numpy as jnp, optax
base = json.loads(sys.argv[2])
out = {}
for path in sys.argv[3:]:
    spec = importlib.util.spec_from_file_location("m", path)
    m = importlib.util.module_from_spec(spec)
    sys.modules["m"] = m  # as `import` does: dataclasses look their module up
    spec.loader.exec_module(m)
    res = {"hparams": {}, "multipliers": {}}
    for w, d in [(256, 4), (512, 8), (2048, 32), (128, 2), (1000, 7)]:
        for eps in (None, 1e-6):
            res["hparams"][f"{w}x{d}x{eps}"] = m.hparams(w, d, **dict(base, eps=eps))
        res["multipliers"][f"{w}x{d}"] = m.multipliers(w, d, 1.5)
    if path.endswith("cfg_muon_kimi_adamw.py"):  # the issue's module trains, flax-free
        ones = lambda *s: jnp.ones(s)
        params = {"input": {"kernel": ones(3, 8)},
                  "blocks": {"0": {"layers": {"0": {"kernel": ones(8, 8)}}}},
                  "output": {"kernel": ones(8, 2)}}
        params = m.init(params, jax.random.key(0), 512, 8, init_std=0.02)
        tx = m.optimizer(params, 512, 8, lr=0.01, weight_decay=0.1)
        grads = jax.tree.map(jnp.ones_like, params)
        updates, _ = jax.jit(tx.update)(grads, tx.init(params), params)
        res["labels"] = jax.tree.leaves(m.labels(params))
        res["finite"] = all(bool(jnp.all(jnp.isfinite(u))) for u in jax.tree.leaves(updates))
    out[path] = res
print(json.dumps(out))
"""


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_imports_without_torch_sympy_flax_and_equals_torch_module(generated, tmp_path):
    """In a process where torch, sympy and flax cannot be imported (nor spectral, for the
    standalone form), every JAX module loads, builds its optimizer and steps; its hparams
    and multipliers equal the PyTorch module's for the same arguments, for every catalog
    optimizer."""
    pytest.importorskip("torch")
    files = [str(p) for p in generated.values()]
    blocked = ["torch", "sympy", "flax", "pydantic", "jinja2", "rich"]
    if spectral.codegen.context.VENDOR_DEFAULT:
        blocked.append("spectral")
    r = subprocess.run(
        [sys.executable, "-c", _BLOCKED, ",".join(blocked), json.dumps(BASE), *files],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    results = json.loads(r.stdout)
    for hidden, others in COMBOS:
        lab = label(hidden, others)
        got = results[str(generated[lab])]
        torch_mod = generate(tmp_path, hidden, others, framework="torch", base_width=256,
                             base_depth=4)
        for w, d in PAIRS:
            for eps in (None, 1e-6):
                want = torch_mod.hparams(w, d, **dict(BASE, eps=eps))
                assert got["hparams"][f"{w}x{d}x{eps}"] == want, (lab, w, d, eps)
            assert got["multipliers"][f"{w}x{d}"] == torch_mod.multipliers(w, d, 1.5)
        if lab == "muon-kimi+adamw":
            assert got["finite"] is True
            assert got["labels"] == ["hidden_weight", "input_weight", "output_weight"]
        else:
            assert "labels" not in got


@pytest.mark.parametrize("hidden,others", COMBOS, ids=[label(*c) for c in COMBOS])
def test_constants_equal_torch_module(hidden, others, folder):
    pytest.importorskip("torch")
    j = generate(folder, hidden, others)
    t = generate(folder, hidden, others, framework="torch")
    for name in ("BASE_WIDTH", "BASE_DEPTH", "K", "OPTIMIZERS", "RULES", "MATRIX_ONLY",
                 "DEFAULT_EPS"):
        assert getattr(j, name) == getattr(t, name), name
    kinds = set(j.OPTIMIZERS.values())
    assert set(j.TRANSFORMS) == kinds & IN_OPTAX
    assert set(j.NO_IMPLEMENTATION) == kinds - IN_OPTAX


def test_cli_writes_the_jax_module(tmp_path, capsys):
    from spectral.cli import main

    out = tmp_path / "cfg_jax.py"
    args = ["codegen", "muon-kimi", "--others", "adamw", "--framework", "jax",
            "--base-width", "64", "--base-depth", "2", "-o", str(out)]
    assert main(args) == 0
    command = ("spectral codegen muon-kimi --others adamw --k 2 --base-width 64 "
               "--base-depth 2 --framework jax")
    assert out.read_text() == render(
        "muon-kimi", "adamw", base_width=64, base_depth=2, command=command, framework="jax"
    )
    capsys.readouterr()
    assert main(["codegen", "adamw", "--framework", "tf", "--base-width", "8",
                 "--base-depth", "2"]) == 2
    assert "invalid choice: 'tf'" in capsys.readouterr().err


# ------------------------------------------------------------------------------------
# labels, init, optimizer
# ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hybrid(folder):
    return generate(folder, "muon-kimi", "adamw", base_width=16, base_depth=1)


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_labels_flax_nnx_mlp_and_gpt(hybrid):
    # abstract models (shapes only): labels read paths and shapes, nothing is computed
    mlp = nnx.eval_shape(lambda: JaxMLP(3, 2, 8, 2, rngs=nnx.Rngs(0)))
    got = flat(hybrid.labels(nnx.state(mlp, nnx.Param)))
    assert got == {
        "blocks.0.layers.0.bias": "hidden_bias",
        "blocks.0.layers.0.kernel": "hidden_weight",
        "blocks.0.layers.1.bias": "hidden_bias",
        "blocks.0.layers.1.kernel": "hidden_weight",
        "blocks.1.layers.0.bias": "hidden_bias",
        "blocks.1.layers.0.kernel": "hidden_weight",
        "blocks.1.layers.1.bias": "hidden_bias",
        "blocks.1.layers.1.kernel": "hidden_weight",
        "input.bias": "input_bias",
        "input.kernel": "input_weight",
        "output.kernel": "output_weight",
    }
    gpt = nnx.eval_shape(lambda: JaxGPT(64, 1, block_size=8, rngs=nnx.Rngs(0)))
    got = flat(hybrid.labels(nnx.state(gpt, nnx.Param)))
    assert got["wte.embedding"] == got["wpe.embedding"] == "input_weight"
    assert got["h.0.attn.c_attn.kernel"] == got["h.0.mlp.c_proj.kernel"] == "hidden_weight"
    assert got["h.0.ln_1.scale"] == got["h.0.mlp.c_fc.bias"] == "hidden_bias"
    assert got["ln_f.scale"] == got["ln_f.bias"] == "input_bias"
    assert got["lm_head.kernel"] == "output_weight"
    assert len(got) == 17


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_labels_flax_linen_naming(hybrid):
    import flax.linen as nn

    class Block(nn.Module):
        @nn.compact
        def __call__(self, h):
            return nn.Dense(8, name="layers_1")(nn.relu(nn.Dense(8, name="layers_0")(h)))

    class MLP(nn.Module):
        def setup(self):
            self.input = nn.Dense(8)
            self.blocks = [Block() for _ in range(2)]
            self.output = nn.Dense(2, use_bias=False)

        def __call__(self, x):
            h = self.input(x)
            for b in self.blocks:
                h = h + b(h)
            return self.output(h)

    variables = MLP().init(jax.random.key(0), jnp.ones((1, 3)))
    got = flat(hybrid.labels(variables))
    assert got["params.blocks_1.layers_0.kernel"] == "hidden_weight"
    assert got["params.blocks_0.layers_1.bias"] == "hidden_bias"
    assert got["params.input.kernel"] == "input_weight"
    assert got["params.output.kernel"] == "output_weight"
    # the linen tree trains like any other
    tx = hybrid.optimizer(variables, 32, 2, lr=0.01)
    grads = jax.tree.map(jnp.ones_like, variables)
    updates, _ = jax.jit(tx.update)(grads, tx.init(variables), variables)
    assert all(bool(jnp.all(jnp.isfinite(u))) for u in jax.tree.leaves(updates))


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_labels_patterns_route_and_one_error_for_every_unplaced_leaf(hybrid):
    params = {
        "embed": {"table": jnp.ones((10, 8))},
        "body": [{"w": jnp.ones((8, 8)), "b": jnp.ones(8)}],
        "head": {"w": jnp.ones((8, 4))},
    }
    with pytest.raises(ValueError, match=r"4 parameter\(s\) match no role pattern: "
                       r"body\.0\.b \(8,\); body\.0\.w \(8, 8\); embed\.table \(10, 8\); "
                       r"head\.w \(8, 4\)\. Pass patterns="):
        hybrid.labels(params)
    patterns = {r"^embed\.": "input_weight", r"^body\.\d+\.w$": "hidden_weight",
                r"^body\.\d+\.b$": "hidden_bias", r"^head\.w$": "output_weight"}
    got = flat(hybrid.labels(params, patterns=patterns))
    assert got == {"body.0.b": "hidden_bias", "body.0.w": "hidden_weight",
                   "embed.table": "input_weight", "head.w": "output_weight"}
    # a custom table is drawn like an embedding when the adapter says so
    adapter = {"roles": patterns, "embeddings": [r"^embed\.table$"]}
    new = flat(hybrid.init(params, jax.random.key(0), 16, 1, init_std=0.5, adapter=adapter))
    assert float(np.asarray(new["embed.table"]).std()) > 0.3  # not 0.5 / sqrt(10)
    with pytest.raises(ValueError, match="maps to unknown role 'hiden_weight'"):
        hybrid.labels(params, patterns={".*": "hiden_weight"})


def test_tied_embeddings_follow_the_rules_as_in_torch(hybrid):
    """A readout through wte.attend (an input_weight and no output_weight) is one matrix
    read both ways: allowed where the config's rules for the two roles agree but for the
    multiplier (spectral.engine.ties, torch's policy; AdamW's do), refused without a
    config to decide; one array under two paths is refused."""
    from spectral.engine.ties import tie_differences

    gpt = nnx.eval_shape(lambda: JaxGPT(64, 1, block_size=8, rngs=nnx.Rngs(0)))
    state = nnx.to_pure_dict(nnx.state(gpt, nnx.Param))
    del state["lm_head"]  # readout through wte.attend: tied
    with pytest.raises(ValueError, match="input_weight but no output_weight.*no config's rules given"):
        hybrid.labels(state)
    assert tie_differences(hybrid.CONFIG) == []
    tied = flat(hybrid.labels(state, rules=hybrid.CONFIG))
    assert tied["wte.embedding"] == "input_weight" and "output_weight" not in tied.values()
    table = jnp.ones((16, 8))
    with pytest.raises(ValueError, match="'input.kernel' and 'output.kernel' are one array"):
        hybrid.labels({"input": {"kernel": table}, "output": {"kernel": table}})


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_init_draws_each_role_with_its_std(hybrid):
    width, depth = 64, 4
    model = nnx.eval_shape(lambda: JaxGPT(width, 1, block_size=8, rngs=nnx.Rngs(0)))
    state = nnx.state(model, nnx.Param)
    new = flat(hybrid.init(state, jax.random.key(1), width, depth, init_std=0.5))
    again = flat(hybrid.init(state, jax.random.key(1), width, depth, init_std=0.5))
    assert all(np.array_equal(new[k], again[k]) for k in new)
    for path, value in new.items():
        assert value.dtype == jnp.float32
        value = np.asarray(value)
        if path.endswith(".scale"):
            assert np.all(value == 1.0), path
        elif path.endswith(".bias"):
            assert np.all(value == 0.0), path
        else:
            role = hybrid.classify(path)
            want = hybrid.init_std_of(role, width, depth, 0.5)  # tables: no 1/sqrt(d_in)
            assert float(value.std()) == pytest.approx(want, rel=0.1), path
    assert hybrid.init_std_of("hidden_weight", width, depth, 0.5) == 0.5 / math.sqrt(4)
    # a dense input kernel is drawn with init_std / sqrt(d_in)
    mlp = nnx.eval_shape(lambda: JaxMLP(100, 2, width, 1, rngs=nnx.Rngs(0)))
    new = flat(hybrid.init(nnx.state(mlp, nnx.Param), jax.random.key(0), width, depth,
                           init_std=0.5))
    assert float(np.asarray(new["input.kernel"]).std()) == pytest.approx(0.05, rel=0.1)
    assert np.all(np.asarray(new["input.bias"]) == 0.0)


def _own_mlp(width: int, depth: int, seed: int = 0) -> dict:
    """The residual MLP's parameters (mlp_params' layout) with the model's own values: a
    draw of its own, biases included, that init_ never made."""
    rng = np.random.default_rng(seed)
    return jax.tree_util.tree_map(
        lambda leaf: jnp.asarray(rng.normal(0.0, 0.3, leaf.shape).astype(np.float32)),
        mlp_params(width, depth),
    )


def test_init_keeps_the_models_own_values_at_the_base(hybrid):
    """init with no init_std: at the base (16 x 1) every leaf comes back as the model's own
    init made it, bit for bit; no key is needed (issue 35)."""
    own = _own_mlp(16, 1)
    new = flat(hybrid.init(own, None, 16, 1))
    assert new.keys() == flat(own).keys()
    assert all(np.array_equal(np.asarray(new[k]), np.asarray(v)) for k, v in flat(own).items())


def test_init_is_the_own_init_times_the_rules_ratio(hybrid):
    """Away from the base (64 x 4: r_n = r_L = 4) each leaf is its own value times its
    role's std ratio: hidden kernels x r_n^-1/2 = 0.5, everything else x 1, exactly."""
    width, depth = 64, 4
    own = flat(_own_mlp(width, depth))
    new = flat(hybrid.init(_own_mlp(width, depth), jax.random.key(0), width, depth))
    for path, value in own.items():
        role = hybrid.classify(path)
        ratio = hybrid.CONFIG.init_ratio(role, width, depth)
        assert ratio == (0.5 if role == "hidden_weight" else 1.0), path
        assert np.array_equal(np.asarray(new[path]), np.asarray(value) * np.float32(ratio)), path


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_optimizer_applies_each_roles_lr_and_schedule(folder):
    """SGD from zero weights with unit gradients steps by exactly -lr of each role."""
    sgd = generate(folder, "sgd")
    params = jax.tree.map(jnp.zeros_like, mlp_params())
    grads = jax.tree.map(jnp.ones_like, params)
    hp = sgd.hparams(32, 4, lr={"hidden_weight": 0.2, "default": 0.1})
    roles = flat(sgd.labels(params))
    for schedule, factor in ((None, 1.0), (lambda count: 0.5, 0.5)):
        tx = sgd.optimizer(params, 32, 4, lr={"hidden_weight": 0.2, "default": 0.1},
                           weight_decay=0.3, schedule=schedule)
        updates, _ = tx.update(grads, tx.init(params), params)
        for path, u in flat(updates).items():
            want = -factor * hp[roles[path]]["lr"]
            np.testing.assert_allclose(np.asarray(u), want, rtol=1e-6, err_msg=path)
    assert hp["hidden_weight"]["lr"] != hp["input_weight"]["lr"]


def test_optimizer_refuses_what_optax_lacks_and_takes_transforms(folder):
    shampoo = generate(folder, "shampoo", "adamw")
    params = mlp_params()
    with pytest.raises(ValueError, match=r"shampoo: optax implements no Shampoo\. Pass "
                       r"transforms=\{'shampoo': 'fn'\}"):
        shampoo.optimizer(params, 32, 2, lr=0.01)

    def mine(*, learning_rate, weight_decay, eps):
        assert eps == shampoo.hparams(32, 2, lr=1)["hidden_weight"]["eps"]
        return optax.chain(optax.add_decayed_weights(weight_decay), optax.sgd(learning_rate))

    tx = shampoo.optimizer(params, 32, 2, lr=0.01, transforms={"shampoo": mine})
    updates, _ = jax.jit(tx.update)(jax.tree.map(jnp.ones_like, params), tx.init(params), params)
    assert set(flat(shampoo.labels(params)).values()) == {
        "input_weight", "input_bias", "hidden_weight", "hidden_bias", "output_weight"}
    assert all(bool(jnp.all(jnp.isfinite(u))) for u in jax.tree.leaves(updates))
    sophia = generate(folder, "sophia")
    with pytest.raises(ValueError, match="optax.contrib.sophia cannot be one group"):
        sophia.optimizer(params, 32, 2, lr=0.01)


def test_optimizer_refusals(hybrid, folder):
    params = mlp_params()
    with pytest.raises(ValueError, match=r"sets learning_rate, which the rules set per role"):
        hybrid.optimizer(params, 32, 2, lr=0.01, optimizer_kwargs={"adamw": {"learning_rate": 1}})
    with pytest.raises(ValueError, match="consistent_rms=0.5 would break muP; use 0.2"):
        hybrid.optimizer(params, 32, 2, lr=0.01,
                         optimizer_kwargs={"muon-kimi": {"consistent_rms": 0.5}})
    bad = dict(params, blocks={"0": {"layers": {"0": {"kernel": jnp.ones((2, 8, 8))}}}})
    with pytest.raises(ValueError, match=r"'blocks\.0\.layers\.0\.kernel' \(shape \(2, 8, 8\)\)"
                       r" has role hidden_weight, trained by muon-kimi, which takes 2-D"):
        hybrid.optimizer(bad, 32, 2, lr=0.01)
    muon_only = generate(folder, "muon")
    with pytest.raises(ValueError, match="has role hidden_bias, which no optimizer here trains"):
        muon_only.optimizer(params, 32, 2, lr=0.01)


@pytest.mark.slow  # trains
def test_gpt_trains_with_nnx_optimizer(hybrid):
    """The flax GPT, the module's init and optimizer, nnx.Optimizer: the loss goes down."""
    width, depth = 64, 1
    model = JaxGPT(width, depth, block_size=16, multipliers=hybrid, rngs=nnx.Rngs(0))
    nnx.update(model, hybrid.init(nnx.state(model, nnx.Param), jax.random.key(0), width,
                                  depth, init_std=0.02))
    tx = hybrid.optimizer(nnx.state(model, nnx.Param), width, depth, lr=0.01)
    opt = nnx.Optimizer(model, tx, wrt=nnx.Param)
    idx = jnp.asarray(np.frombuffer(b"the cat sat on the mat, the cat sat", np.uint8)[:17])[None]

    @nnx.jit
    def step(model, opt):
        def loss_fn(model):
            logits = model(idx[:, :-1])
            return optax.softmax_cross_entropy_with_integer_labels(logits, idx[:, 1:]).mean()

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        opt.update(model, grads)
        return loss

    losses = [float(step(model, opt)) for _ in range(8)]
    assert losses[0] == pytest.approx(math.log(256), rel=0.05)
    assert losses[-1] < losses[0] - 1.0, losses


# ------------------------------------------------------------------------------------
# the same residual MLP in torch and in flax, trained by both modules
# ------------------------------------------------------------------------------------

XF_W, XF_D, XF_BASE_W, XF_BASE_D, XF_IN, XF_OUT, XF_BATCH, XF_STEPS = 32, 2, 16, 1, 8, 4, 16, 5


def _ns_float32(grad, ns_coefficients, ns_steps, eps):
    """torch.optim.Muon's Newton-Schulz iteration (the same polynomial, normalisation and
    transpose) in float32 instead of bfloat16."""
    a, b, c = ns_coefficients
    x = grad.float()
    tall = x.size(0) > x.size(1)
    if tall:
        x = x.T
    x = x / x.norm().clamp(min=eps)
    for _ in range(ns_steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if tall else x


def _train_both(folder, hidden, others, lr, kwargs=None):
    """Per step 1..XF_STEPS: per-role update norms (since init) and outputs on a fresh batch,
    from the torch module training spectral.models.ResidualMLP and the JAX module training
    spectral.models.flax.ResidualMLP, both starting from the same weights."""
    import torch

    from spectral.models import ResidualMLP as TorchMLP

    t_mod = generate(folder, hidden, others, framework="torch")
    j_mod = generate(folder, hidden, others)
    torch.manual_seed(0)
    t_model = TorchMLP(XF_IN, XF_OUT, XF_W, XF_D, multipliers=t_mod)
    t_mod.init_(t_model, XF_W, XF_D, 0.5)
    j_model = JaxMLP(XF_IN, XF_OUT, XF_W, XF_D, multipliers=j_mod, rngs=nnx.Rngs(0))
    assert (j_model.alpha_input, j_model.alpha_hidden, j_model.alpha_output) == (
        t_model.alpha_input, t_model.alpha_hidden, t_model.alpha_output)
    state = nnx.state(j_model, nnx.Param)
    # torch stores nn.Linear.weight as (out, in), flax the kernel as (in, out)
    copied = {name: p.detach().numpy() for name, p in t_model.named_parameters()}
    state = jax.tree_util.tree_map_with_path(
        lambda kp, _: jnp.asarray(_as_flax(copied[_torch_name(path_name(kp))])), state
    )
    base = {"lr": lr, "weight_decay": 0.1}
    t_opt = t_mod.build_optimizers(t_model, XF_W, XF_D, optimizer_kwargs=kwargs, **base)
    tx = j_mod.optimizer(state, XF_W, XF_D, optimizer_kwargs=kwargs, **base)
    graphdef = nnx.graphdef(j_model)
    opt_state = tx.init(state)

    @jax.jit
    def j_step(state, opt_state, x, y):
        grads = jax.grad(lambda s: jnp.mean((nnx.merge(graphdef, s)(x) - y) ** 2))(state)
        updates, opt_state = tx.update(grads, opt_state, state)
        return optax.apply_updates(state, updates), opt_state

    gen = np.random.default_rng(0)
    t_roles = {n: t_mod.classify(n) for n, _ in t_model.named_parameters()}
    t_start = {n: p.detach().clone() for n, p in t_model.named_parameters()}
    j_roles, j_start = flat(j_mod.labels(state)), flat(state)
    steps = []
    for _ in range(XF_STEPS):
        x = gen.standard_normal((XF_BATCH, XF_IN)).astype(np.float32)
        y = gen.standard_normal((XF_BATCH, XF_OUT)).astype(np.float32)
        t_opt.zero_grad()
        torch.nn.functional.mse_loss(t_model(torch.from_numpy(x)), torch.from_numpy(y)).backward()
        t_opt.step()
        state, opt_state = j_step(state, opt_state, x, y)
        probe = gen.standard_normal((XF_BATCH, XF_IN)).astype(np.float32)
        t_sq, j_sq = {}, {}
        for name, p in t_model.named_parameters():
            delta = (p.detach() - t_start[name]).double()
            t_sq[t_roles[name]] = t_sq.get(t_roles[name], 0.0) + float((delta**2).sum())
        for path, value in flat(state).items():
            delta = np.asarray(value, np.float64) - np.asarray(j_start[path], np.float64)
            j_sq[j_roles[path]] = j_sq.get(j_roles[path], 0.0) + float((delta**2).sum())
        with torch.no_grad():
            t_out = t_model(torch.from_numpy(probe)).numpy()
        j_out = np.asarray(nnx.merge(graphdef, state)(probe))
        steps.append(({r: math.sqrt(v) for r, v in t_sq.items()},
                      {r: math.sqrt(v) for r, v in j_sq.items()}, t_out, j_out))
    return steps


def _torch_name(path: str) -> str:
    return path.replace(".kernel", ".weight")


def _as_flax(array: np.ndarray) -> np.ndarray:
    return array.T if array.ndim == 2 else array


def _assert_agree(steps, *, norms: float, outputs: float):
    for step in (1, XF_STEPS):
        t_norms, j_norms, t_out, j_out = steps[step - 1]
        assert set(t_norms) == set(j_norms)
        for role, t in t_norms.items():
            assert j_norms[role] == pytest.approx(t, rel=norms), (step, role)
            assert t > 0, role
        scale = float(np.abs(t_out).max())
        assert float(np.abs(j_out - t_out).max()) <= outputs * scale, step


# optax computes Adam's bias corrections 1 - b^t in float32, where b2 = 0.999 is
# 0.99900001: 1 - b2 is off by 1.3e-5 and its square root by 6e-6, the largest difference
# from torch (which computes them in Python floats); 3e-5 leaves room for that and the
# float32 rounding of the two frameworks' matmuls.
FLOAT32 = 3e-5


@pytest.mark.parametrize(
    "hidden,lr", [("sgd", 0.05), ("adamw", 0.01), ("lion", 0.001)], ids=["sgd", "adamw", "lion"]
)
@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_cross_framework_identity(folder, hidden, lr):
    pytest.importorskip("torch")
    if hidden == "lion":
        pytest.importorskip("pytorch_optimizer")
    _assert_agree(_train_both(folder, hidden, None, lr), norms=FLOAT32, outputs=FLOAT32)


@pytest.mark.parametrize("hidden", ["muon-kimi", "muon"])
@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_cross_framework_identity_muon_float32(folder, monkeypatch, hidden):
    """Muon-Kimi + AdamW (and Muon + AdamW) agree to float32 tolerance once both run the
    same algorithm: torch's Newton-Schulz in float32 (it casts to bfloat16) and Nesterov
    off on both sides (optax bias-corrects the Nesterov mix of momentum and gradient,
    torch does not; without Nesterov both orthogonalise the same momentum)."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.optim._muon, "_zeropower_via_newtonschulz", _ns_float32)
    kwargs = {hidden: {"nesterov": False}}
    steps = _train_both(folder, hidden, "adamw", 0.01, kwargs)
    _assert_agree(steps, norms=FLOAT32, outputs=FLOAT32)


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_cross_framework_muon_kimi_defaults(folder):
    """With both libraries' defaults the two differ by what the implementations do, not by
    the rules: torch's bfloat16 Newton-Schulz (8-bit mantissa) moves the hidden step's norm
    by 1.5% at step 1 (measured; the other roles still agree to float32), and from step 2
    on the different Nesterov mix and the hidden layers' changed outputs move the rest by
    up to 0.15% and the outputs by 1.3% at step 5 (measured). The bounds are about 3x."""
    pytest.importorskip("torch")
    steps = _train_both(folder, "muon-kimi", "adamw", 0.01)
    first, last = steps[0], steps[-1]
    for (t_norms, j_norms, t_out, j_out), others, outputs in ((first, FLOAT32, 2e-3),
                                                              (last, 5e-3, 4e-2)):
        for role, t in t_norms.items():
            tol = 4e-2 if role == "hidden_weight" else others
            assert j_norms[role] == pytest.approx(t, rel=tol), role
        assert float(np.abs(j_out - t_out).max()) <= outputs * float(np.abs(t_out).max())


# ------------------------------------------------------------------------------------
# docs/jax.md and the JAX coordinate check
# ------------------------------------------------------------------------------------


@pytest.mark.slow  # trains
def test_docs_train_with_it_in_jax(tmp_path, monkeypatch, capsys):
    """The "Train with it in JAX" block of docs/jax.md runs as written, against the module
    its `spectral codegen` command writes."""
    from spectral.cli import main

    text = (ROOT / "docs" / "jax.md").read_text(encoding="utf-8")
    command = re.search(r"^spectral codegen .*--framework jax.*$", text, re.M).group(0)
    assert command.endswith("-o cfg_jax.py")
    section = text.split("## Train with it in JAX", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    assert main(command.split()[1:]) == 0
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "cfg_jax", raising=False)
    capsys.readouterr()
    exec(compile(blocks[0], "docs/jax.md", "exec"), {"__name__": "docs_jax"})
    out = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"loss \d+\.\d{3} -> \d+\.\d{3}", out[0]), out
    cfg = sys.modules["cfg_jax"]
    assert out[1] == str(cfg.hparams(128, 4, lr=0.01)["hidden_weight"])


@pytest.mark.slow
def test_coordcheck_jax_small_sweep(capsys):
    """A tiny sweep through the generated JAX module: the slope table of `spectral
    coord-check`, μP flat over width and depth, SP not (AdamW at 10 steps)."""
    from spectral.cli.coord_check_jax import main
    from spectral.coordcheck.jax import JaxCoordCheckConfig, run_coord_check_jax
    from spectral.coordcheck.jax import slope_table

    cfg = JaxCoordCheckConfig(
        optimizer="adamw", parameterizations=("sp", "mup"), widths=(32, 128), depths=(2, 8),
        steps=4, seeds=1, lr=0.03,
    )
    result = run_coord_check_jax(cfg)
    rows = {(s["parameterization"], s["axis"], s["metric"]): s for s in result["slopes"]}
    assert set(rows) == {(p, a, m) for p in ("sp", "mup") for a in ("width", "depth")
                         for m in ("h", "delta_h")}
    for axis in ("width", "depth"):
        assert abs(rows[("mup", axis, "delta_h")]["slope"]) <= 0.15, axis
        assert rows[("sp", axis, "delta_h")]["slope"] > 0.3, axis
    assert result["pass"] is True
    assert len(result["points"]) == 2 * 4 * (cfg.steps + 1)
    table = slope_table(result)
    assert "coord check (JAX) — mlp, adamw: log–log slopes at step 4" in table
    assert re.search(r"mup\s+width\s+‖h_L\(t\)−h_L\(0\)‖\s+[+-]0\.\d{3}\s+pass", table)
    assert main(["--optimizer", "nosuch", "--quiet"]) == 2
    assert "error:" in capsys.readouterr().err


@pytest.mark.parametrize("run", ["mlp-k2-adamw", "mlp-k2-muon-kimi"])
def test_committed_jax_coord_check_numbers(run):
    """docs/jax/*.json (python -m spectral.cli.coord_check_jax, full sweep): the μP slopes of
    ‖h_L(t) − h_L(0)‖ are within ±0.15 over width and depth, and docs/jax.md shows them."""
    result = json.loads((ROOT / "docs" / "jax" / f"{run}.json").read_text(encoding="utf-8"))
    cfg = result["config"]
    assert (cfg["widths"], cfg["depths"], cfg["steps"], cfg["seeds"]) == (
        [64, 128, 256, 512], [4, 8, 16, 32, 64, 128], 10, 3)
    assert result["pass"] is True
    doc = (ROOT / "docs" / "jax.md").read_text(encoding="utf-8")
    for s in result["slopes"]:
        if s["parameterization"] == "mup" and s["metric"] == "delta_h":
            assert abs(s["slope"]) <= 0.15, s
            assert f"{s['slope']:+.2f}".replace("-", "−") in doc


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_user_declaration_needs_transforms(tmp_path, capsys):
    """--spec in the JAX module: no factory, refused by name until transforms= gives one,
    which then gets the declaration's eps."""
    from spectral.cli import main

    spec = tmp_path / "mine.toml"
    spec.write_text('name = "mine"\nupdate_norm = "n_in"\neps = "G / sqrt(n_in * n_out)"\n')
    out = tmp_path / "cfg_mine.py"
    assert main(["codegen", "muon-kimi", "--others", "mine", "--spec", str(spec),
                 "--framework", "jax", "--base-width", "16", "--base-depth", "1",
                 "-o", str(out)]) == 0
    mod = load(out)
    assert mod.NO_IMPLEMENTATION == {
        "mine": "mine: a user declaration; no implementation is known."}
    params = mlp_params()
    with pytest.raises(ValueError, match=r"^mine: a user declaration; no implementation is "
                       r"known\. Pass transforms=\{'mine': 'fn'\}"):
        mod.optimizer(params, 32, 2, lr=0.01)
    seen = []

    def mine(*, learning_rate, weight_decay, eps):
        seen.append((learning_rate, weight_decay, eps))
        return optax.sgd(learning_rate)

    tx = mod.optimizer(params, 32, 2, lr=0.01, eps=1e-3, transforms={"mine": mine})
    hp = mod.hparams(32, 2, lr=0.01, eps=1e-3)
    want = [(h["lr"], h["weight_decay"], h["eps"]) for r, h in hp.items()
            if mod.OPTIMIZERS[r] == "mine"]
    assert sorted(seen) == sorted(want) and len(want) == 4
    updates, _ = jax.jit(tx.update)(jax.tree.map(jnp.ones_like, params), tx.init(params), params)
    assert all(bool(jnp.all(jnp.isfinite(u))) for u in jax.tree.leaves(updates))
