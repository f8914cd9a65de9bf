"""Hostile and careless input on ``spectral check`` and ``check(widths=...)`` (issue #39).

The command: every bad factory, config file and option is one ``error:`` line (exit code 2)
before any twin is built; a model that cannot be measured (NaN, inf, an output times 0, a
factory that ignores the width) is one line naming that (exit code 1); the generated config's
``spectral-check-*`` folder is gone afterwards on success, on an error, on Ctrl-C (130) and
on SIGTERM (143). The API: widths and seeds checked before any work, the time limit looked
at before every twin, wrappers unwrapped through any depth, a hook-free config's twins set
up hook-free, and no raw AttributeError or RuntimeError from a careless argument.
In-process (:func:`spectral.cli.main`); user code is tests/hostile_user.py.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from torch import nn  # noqa: E402

from spectral.cli import main  # noqa: E402
from spectral.codegen import load_generated  # noqa: E402
from spectral.errors import ConfigError  # noqa: E402
from spectral.torch import check_widths  # noqa: E402
from spectral.torch.optim.composite import unwrap_optimizer  # noqa: E402

TINY = ["--widths", "16,32,64"]


@pytest.fixture
def tmpdir_(tmp_path, monkeypatch):
    """$TMPDIR for this test alone: what the command leaves there is seen."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def left(folder: Path) -> list[str]:
    """Our leftovers (torch's own torchinductor_<user> cache folder is not ours)."""
    return sorted(n for n in os.listdir(folder) if not n.startswith("torchinductor_"))


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def error_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if "error:" in ln]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def no_work(monkeypatch):
    """A twin built fails the test: the refusal must come before the work."""
    import spectral.torch.config as widths

    def boom(*a, **k):
        raise AssertionError("the work started before the refusal")

    monkeypatch.setattr(widths, "check_widths", boom)


def llama_config(**changes) -> dict:
    config = transformers.LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        tie_word_embeddings=False,
    ).to_dict()
    config["architectures"] = ["LlamaForCausalLM"]
    config.update(changes)
    return config


def config_file(tmp_path: Path, data) -> str:
    path = tmp_path / "config.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


# --------------------------------------------------------------------------------------
# spectral check: refusals before any work (exit code 2)
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "factory,message",
    [
        ("raising_model", "the factory raised at width 16: RuntimeError: cannot build"),
        ("none_model", "the factory returned NoneType at width 16, not a torch.nn.Module"),
        ("no_argument_model", "no_argument_model() takes neither (width) nor (width, depth)"),
        (
            "three_argument_model",
            "three_argument_model(width, depth, vocab) takes neither (width) nor (width, depth)",
        ),
    ],
)
def test_check_factory_refused_in_one_line(factory, message, tmpdir_, capsys, no_work):
    code, out, err = run(["check", "adamw", "--model-factory", f"hostile_user:{factory}", *TINY], capsys)
    assert code == 2 and out == ""
    assert error_line(err) == f"error: --model-factory hostile_user:{factory}: {message}"
    assert left(tmpdir_) == []


UNKNOWN_TYPE = "no_such_model_type_" + "x" * 5000
HF_CONFIGS = [
    ({"architectures": ["models"]}, "architectures names models, which is not a transformers model class"),
    ({"architectures": ["pipeline"]}, "architectures names pipeline, which is not a transformers model class"),
    ({"architectures": ["AutoModel"]}, "architectures names AutoModel, an Auto class that picks a class"),
    ({"architectures": ["BertModel"]}, "architectures names BertModel, a bert model, but model_type is 'llama'"),
    ({"hidden_size": "big"}, "hidden_size must be a whole number from 1 to 2147483647, got 'big'"),
    ({"hidden_size": 64.5}, "hidden_size must be a whole number from 1 to 2147483647, got 64.5"),
    ({"hidden_size": -64}, "hidden_size must be a whole number from 1 to 2147483647, got -64"),
    ({"hidden_size": 10**20}, "hidden_size must be a whole number from 1 to 2147483647, got 10**20"),
    ({"hidden_size": 10**30}, "cannot read it: an integer of 31 digits in JSON (at most 30)"),
    ({"num_attention_heads": 0}, "num_attention_heads must be a whole number from 1 to"),
    ({"num_attention_heads": 3}, "a width of 64 is not a whole number of heads (num_attention_heads 3)"),
    ({"model_type": UNKNOWN_TYPE}, "transformers knows no model_type 'no_such_model_type_xxxxxxxxxxxxxxxxxxxxx...'"),
]


@pytest.mark.parametrize("changes,message", HF_CONFIGS)
def test_check_hf_config_refused_in_one_line(changes, message, tmp_path, tmpdir_, capsys, no_work):
    path = config_file(tmp_path, llama_config(**changes))
    code, out, err = run(["check", "adamw", "--hf-config", path], capsys)
    assert code == 2 and out == ""
    line = error_line(err)
    assert line.startswith(f"error: --hf-config {path}: {message}"), line
    assert len(line) < 300
    assert left(tmpdir_) == []


def test_check_hf_config_of_another_family(tmp_path, tmpdir_, capsys, no_work):
    config = transformers.GPT2Config(n_embd=64, n_head=4, n_layer=2).to_dict()
    path = config_file(tmp_path, {**config, "architectures": ["LlamaForCausalLM"]})
    code, out, err = run(["check", "adamw", "--hf-config", path], capsys)
    assert code == 2
    assert error_line(err) == (
        f"error: --hf-config {path}: architectures names LlamaForCausalLM, a llama model, but "
        "model_type is 'gpt2'"
    )


@pytest.mark.parametrize(
    "text,message",
    [
        ('{"model_type": "llama", "hidden_size": NaN}', "cannot read it: "),
        ('{"model_type": "llama", "x": ' + "[" * 100_000 + "]" * 100_000 + "}", "cannot read it: JSON nested more than 64 deep"),
    ],
)
def test_check_hf_config_unreadable_json(text, message, tmp_path, tmpdir_, capsys, no_work):
    path = config_file(tmp_path, text)
    code, out, err = run(["check", "adamw", "--hf-config", path], capsys)
    assert code == 2
    assert error_line(err).startswith(f"error: --hf-config {path}: {message}")


@pytest.mark.parametrize(
    "make,why",
    [
        (lambda p: os.mkfifo(p), "is a FIFO (named pipe), not a regular file"),
        (None, "is a character device, not a regular file"),
    ],
)
def test_check_hf_config_fifo_or_device_refused_without_blocking(make, why, tmp_path, tmpdir_, capsys, no_work):
    path = "/dev/zero"
    if make is not None:
        path = str(tmp_path / "config.json")
        make(path)
    code, out, err = run(["check", "adamw", "--hf-config", path], capsys)
    assert code == 2
    assert error_line(err) == f"error: --hf-config {path}: {why}"


def test_check_hf_config_larger_than_a_mebibyte(tmp_path, tmpdir_, capsys, no_work):
    path = config_file(tmp_path, json.dumps(llama_config(pad=" " * (1 << 20))))
    code, out, err = run(["check", "adamw", "--hf-config", path], capsys)
    assert code == 2
    assert error_line(err) == f"error: --hf-config {path}: the file is larger than 1024 KiB"


def test_check_repeated_widths_are_a_usage_error(capsys, no_work):
    code, out, err = run(["check", "adamw", "--hf-config", "x.json", "--widths", "64,64,64"], capsys)
    assert code == 2
    assert error_line(err).endswith(
        "argument --widths: expected at least 3 different integers, got 1 (64,64,64)"
    )


# --------------------------------------------------------------------------------------
# spectral check: nothing left behind
# --------------------------------------------------------------------------------------


def _stop_with(monkeypatch, action):
    """check_widths replaced by ``action`` (an interruption arriving mid-check)."""
    import spectral.torch.config as widths

    seen = []

    def interrupted(*a, **k):
        seen.extend(n for n in os.listdir(tempfile.gettempdir()) if n.startswith("spectral-check-"))
        action()

    monkeypatch.setattr(widths, "check_widths", interrupted)
    return seen


def _ctrl_c():
    raise KeyboardInterrupt


def _sigterm():
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)  # the handler interrupts this


@pytest.mark.parametrize(
    "action,code,line", [(_ctrl_c, 130, "error: interrupted"), (_sigterm, 143, "error: terminated (SIGTERM)")]
)
def test_check_interrupted_leaves_no_folder(action, code, line, tmpdir_, capsys, monkeypatch):
    before = signal.getsignal(signal.SIGTERM)
    seen = _stop_with(monkeypatch, action)
    got, out, err = run(["check", "adamw", "--model-factory", "hostile_user:tiny_model", *TINY], capsys)
    assert got == code and error_line(err) == line
    assert len(seen) == 1  # the folder existed while the check ran
    assert left(tmpdir_) == []
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.slow
def test_check_success_leaves_no_folder(tmp_path, tmpdir_, capsys):
    path = config_file(tmp_path, llama_config())
    code, out, err = run(["check", "adamw", "--hf-config", path, "--widths", "32,64,128"], capsys)
    assert code == 0, out + err
    assert out.rstrip().endswith("every module within ±0.2 of its rules at widths 32,64,128")
    assert left(tmpdir_) == []


# --------------------------------------------------------------------------------------
# spectral check: models that cannot be measured (exit code 1)
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "factory,line",
    [
        (
            "nan_model",
            "the model's output is NaN at width 16 at init (first in the output of "
            "layers.0.self_attn.q_proj): no slope can be fitted; fix the model (or the base "
            "values) until it is finite",
        ),
        (
            "inf_output_model",
            "the model's output is inf at width 16 at init (every module measured is finite: "
            "it comes after them): no slope can be fitted; fix the model (or the base values) "
            "until it is finite",
        ),
        (
            "width_ignoring_model",
            "check across widths did not measure the model at width 32 (UnsupportedModelError: "
            "the twins at widths 16 and 32 are the same size (5456 parameters each): the "
            "factory must build the model at the width it is given)",
        ),
    ],
)
def test_check_model_that_cannot_be_measured_says_why(factory, line, tmpdir_, capsys):
    code, out, err = run(["check", "adamw", "--model-factory", f"hostile_user:{factory}", *TINY], capsys)
    assert code == 1, err
    assert out.splitlines() == [line]
    assert left(tmpdir_) == []


@pytest.mark.slow
def test_check_output_times_zero_is_not_a_success(tmpdir_, capsys):
    code, out, err = run(["check", "adamw", "--model-factory", "hostile_user:zero_output_model", *TINY], capsys)
    assert code == 1, err
    assert (
        "\nthe model's output is exactly 0 at init and after one step at widths 16, 32, 64: "
        "nothing learns (is it multiplied by 0 after the readout?)\n"
    ) in out
    assert left(tmpdir_) == []


# --------------------------------------------------------------------------------------
# check_widths and check(): the API
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile_check")
    return load_generated("adamw", None, base_width=64, base_depth=2, folder=folder)


def llama(width: int) -> nn.Module:
    return transformers.LlamaForCausalLM(
        transformers.LlamaConfig(**{**llama_config(hidden_size=width, intermediate_size=2 * width,
                                                   num_attention_heads=width // 16,
                                                   num_key_value_heads=width // 16, head_dim=16)})
    )


@pytest.mark.generated
@pytest.mark.parametrize(
    "widths,shown",
    [
        ([64.5, 128, 256], "[64.5, 128, 256]"),
        ([torch.tensor(64.5), 128, 256], "[tensor(64.5000), 128, 256]"),
        ([True, 64, 128], "[True, 64, 128]"),
        ([64, 128, float("inf")], "[64, 128, inf]"),
        ([64, 128, float("nan")], "[64, 128, nan]"),
        ([64, 128, "256"], "[64, 128, '256']"),
    ],
)
def test_widths_that_are_not_whole_numbers_are_refused(widths, shown, cfg, monkeypatch):
    import spectral.torch.check.widths as module

    monkeypatch.setattr(module, "twin_builder", lambda *a: pytest.fail("work started"))
    with pytest.raises(ConfigError) as raised:  # a bad argument raises, as in check()
        check_widths(cfg.CONFIG, nn.Linear(2, 2), widths, base={"lr": 1e-3})
    assert str(raised.value) == f"widths must be whole numbers, got {shown}"


@pytest.mark.generated
def test_whole_widths_of_other_types_are_taken(cfg, monkeypatch):
    import spectral.torch.check.widths as module

    built = []

    def builder(model, factory, *rest):
        def build(width):
            built.append(width)
            raise RuntimeError("stop")

        return build

    monkeypatch.setattr(module, "twin_builder", builder)
    check_widths(cfg.CONFIG, nn.Linear(2, 2), [torch.tensor(64), 128.0, 256], base={"lr": 1e-3})
    assert built == [64] and type(built[0]) is int


@pytest.mark.generated
@pytest.mark.parametrize("seeds", [10**40, 1001, 0, True, 2.0])
def test_seeds_out_of_range_are_refused_before_work(seeds, cfg):
    with pytest.raises(ConfigError) as raised:  # a bad argument raises, as in check()
        check_widths(cfg.CONFIG, nn.Linear(2, 2), [64, 128, 256], base={"lr": 1e-3}, seeds=seeds)
    assert str(raised.value).startswith("seeds must be a whole number from 1 to 1000, got ")


@pytest.mark.generated
def test_time_limit_is_looked_at_between_seeds(cfg):
    calls: list[int] = []
    started = time.monotonic()
    report = check_widths(
        cfg.CONFIG,
        nn.Linear(2, 2),
        [64, 128, 256],
        factory=lambda width: _slow_tiny(width, calls),
        base={"lr": 1e-3},
        seeds=1000,
        timeout=1.0,
    )
    assert time.monotonic() - started < 30.0  # 1000 seeds x 3 widths would take minutes
    assert report.problems[-1] == (
        "check across widths did not measure widths 64, 128, 256: the time limit of 1 s was reached"
    )
    assert set(calls) == {64} and 1 <= len(calls) < 10


def _slow_tiny(width, calls):
    import hostile_user

    calls.append(width)
    time.sleep(0.3)
    return hostile_user.tiny_model(width // 4, 1)


@pytest.mark.generated
def test_factory_returning_none_is_named(cfg):
    report = check_widths(cfg.CONFIG, nn.Linear(2, 2), [64, 128, 256], factory=lambda w: None, base={"lr": 1e-3})
    assert report.problems == [
        "check across widths did not measure the model at width 64 (UnsupportedModelError: "
        "factory(64) returned NoneType, not a torch.nn.Module)"
    ]


def test_unwrap_optimizer_goes_through_any_number_of_wrappers():
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(2))], lr=0.1)

    class Wrapper:
        def __init__(self, inner):
            self.optimizer = inner

    wrapped = opt
    for _ in range(50):
        wrapped = Wrapper(wrapped)
    assert unwrap_optimizer(wrapped) is opt
    a = Wrapper(None)
    a.optimizer = Wrapper(a)
    with pytest.raises(ValueError, match=r"^the optimizer's wrappers hold each other in a cycle \(Wrapper -> Wrapper -> Wrapper via '.optimizer'\): no optimizer inside them$"):
        unwrap_optimizer(a)


@pytest.mark.generated
def test_careless_arguments_are_one_line_errors(cfg):
    model = nn.Linear(4, 4)
    with pytest.raises(TypeError, match=r"^set_base_shapes: model must be a torch.nn.Module, got NoneType$"):
        cfg.set_base_shapes(None, factory=lambda w: nn.Linear(w, w))
    with pytest.raises(TypeError, match=r"^model must be a torch.nn.Module, got NoneType$"):
        cfg.check(None, 64, 2)
    m = llama(64)
    cfg.apply_multipliers(m, 64, 2)
    with pytest.raises(TypeError, match=r"^optimizer must be a torch.optim.Optimizer \(or a framework's wrapper of one\), got int$"):
        cfg.check(m, 64, 2, 42, measure=False, lr=1e-3)

    class Self:
        pass

    me = Self()
    me.optimizer = me
    with pytest.raises(TypeError, match=r"got Self$"):
        cfg.check(m, 64, 2, me, measure=False, lr=1e-3)
    del model


@pytest.mark.generated
def test_tensor_lr_on_the_meta_device_is_named(cfg):
    m = llama(64)
    cfg.apply_multipliers(m, 64, 2)
    meta = torch.tensor(1e-3, device="meta")
    message = r"^lr: a tensor lr on the meta device holds no value: put it on the device the model trains on$"
    with pytest.raises(TypeError, match=message):
        cfg.build_optimizers(m, 64, 2, lr=meta)
    with pytest.raises(TypeError, match=message):  # a bad argument raises there too
        cfg.check(m, 64, 2, measure=False, widths=[64, 128, 256], lr=meta)
    groups = cfg.param_groups(m, 64, 2, lr=1e-3)
    for group in groups:
        group["lr"] = torch.tensor(group["lr"], device="meta")
    opt = torch.optim.SGD(groups, lr=1e-3)
    problems = cfg.check(m, 64, 2, opt, measure=False, lr=1e-3)
    assert len(problems) == sum(len(g["params"]) for g in groups)  # one per parameter
    assert all(p.endswith("lr is a tensor on the meta device, which holds no value to check: put it on the CPU or the GPU") for p in problems), problems


@pytest.mark.generated
@pytest.mark.slow
def test_check_widths_through_accelerate_and_on_a_hook_free_config(cfg, tmp_path):
    accelerate = pytest.importorskip("accelerate")
    m = llama(64)
    cfg.apply_multipliers(m, 64, 2)
    opt = accelerate.Accelerator(cpu=True).prepare(cfg.build_optimizers(m, 64, 2, lr=3e-3))
    assert type(opt).__name__ == "AcceleratedOptimizer"
    assert cfg.check(m, 64, 2, opt, measure=False, widths=[64, 128, 256]) == []
    hook_free = load_generated("adamw", None, base_width=64, base_depth=2, folder=tmp_path, absorb=True)
    m = llama(64)
    hook_free.init_(m, 64, 2)
    opt = hook_free.build_optimizers(m, 64, 2, lr=3e-3)
    assert hook_free.check(m, 64, 2, opt, widths=[64, 128, 256]) == []


# --------------------------------------------------------------------------------------
# spectral check --hf-config: built as far as the check reads it, run before any verdict,
# transformers' logging kept off stderr (issue 50)
# --------------------------------------------------------------------------------------


@pytest.mark.slow  # transformers' Llama imported: seconds
def test_check_hf_config_of_a_million_layers_builds_the_twins_layers(tmp_path, tmpdir_, capsys, no_work):
    """It built all 10**6 layers before the twins (past a 100 s limit); the check reads two."""
    from spectral.cli.hf_config import hf_model
    from spectral.torch.check.twins import TWIN_LAYERS

    path = config_file(tmp_path, llama_config(num_hidden_layers=10**6))
    started = time.monotonic()
    model, notes = hf_model(path)
    assert model.config.num_hidden_layers == TWIN_LAYERS == len(model.model.layers) and notes == []
    assert time.monotonic() - started < 60
    with pytest.raises(AssertionError, match="the work started"):  # on to the twins
        main(["check", "adamw", "--hf-config", path, "--timeout", "60"])


KV3 = "LlamaForCausalLM cannot run this config: RuntimeError: The size of tensor a (4) must match the size of tensor b (3)"


@pytest.mark.parametrize("where", ["cpu", "meta"])
def test_check_hf_config_its_own_model_cannot_run_is_refused(where, tmp_path, tmpdir_, capsys, no_work, monkeypatch):
    """4 attention heads over 3 KV heads: the twins re-derive the heads and passed it (exit 0,
    "every module within ±0.2"); the model's own forward runs first, on the CPU when small and
    on the meta device when large."""
    import spectral.cli.hf_config as hf_config

    if where == "meta":
        monkeypatch.setattr(hf_config, "OWN_RUN_PARAMETERS", 0)
    path = config_file(tmp_path, llama_config(num_key_value_heads=3, bos_token_id=5000))
    code, out, err = run(["check", "adamw", "--hf-config", path], capsys)
    assert code == 2 and out == ""
    assert err == f"error: --hf-config {path}: {KV3} at non-singleton dimension 1\n"  # no transformers line
    assert left(tmpdir_) == []


@pytest.mark.parametrize(
    "config",
    [
        lambda: transformers.MixtralConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                                           num_attention_heads=4, num_key_value_heads=2, num_local_experts=4),
        lambda: transformers.GPT2Config(n_embd=64, n_head=4, n_layer=3, vocab_size=256),
    ],
    ids=["mixtral", "gpt2"],
)
def test_check_hf_config_that_runs_is_not_refused_on_either_device(config, tmp_path, monkeypatch):
    """The meta device checks shapes (the experts as one batched matmul: its grouped kernel
    wants bfloat16 there); a config that runs on the CPU runs there too."""
    import spectral.cli.hf_config as hf_config

    data = config().to_dict()
    data["architectures"] = [{"mixtral": "MixtralForCausalLM", "gpt2": "GPT2LMHeadModel"}[data["model_type"]]]
    path = config_file(tmp_path, data)
    for budget in (hf_config.OWN_RUN_PARAMETERS, 0):
        monkeypatch.setattr(hf_config, "OWN_RUN_PARAMETERS", budget)
        model, notes = hf_config.hf_model(path)
        assert notes == [] and next(model.parameters()).device.type == "meta"
        assert getattr(model.config, "_experts_implementation", None) != "batched_mm"  # put back


def test_check_keeps_third_party_logging_off_stderr(tmp_path, tmpdir_, capsys, monkeypatch):
    """transformers' own config warnings (bos_token_id outside the vocabulary), its loggers
    and torch's warnings: off stderr, shown with --verbose; spectral's notes stay."""
    import warnings

    import spectral.torch.config as widths
    from spectral.torch.check.verdict import WidthReport

    def fake(rules, model, sizes, **kw):
        transformers.utils.logging.get_logger("transformers.somewhere").warning("a transformers line")
        warnings.warn_explicit("a torch warning", UserWarning, filename=torch.__file__, lineno=1)
        warnings.warn("the twins have a head per 8 of the width", UserWarning, stacklevel=2)
        return WidthReport(sizes, [], [])

    monkeypatch.setattr(widths, "check_widths", fake)
    import logging

    root = logging.getLogger("transformers")
    # another test in this process may have turned transformers' verbosity down
    monkeypatch.setattr(root, "level", logging.WARNING)
    monkeypatch.setattr(logging.getLogger("transformers.somewhere"), "disabled", False)
    before = (list(root.handlers), root.propagate)
    path = config_file(tmp_path, llama_config(bos_token_id=5000))
    for verbose in ([], ["--verbose"]):
        code, out, err = run(["check", "adamw", "--hf-config", path, *verbose], capsys)
        assert code == 0
        own = "note: the twins have a head per 8 of the width\n"
        if not verbose:
            assert err == own
        else:
            assert own in err and "note: transformers: a transformers line\n" in err
            assert "note: torch: a torch warning\n" in err
    assert (list(root.handlers), root.propagate) == before  # put back


def test_check_time_limit_is_one_line_and_leaves_no_alarm(tmpdir_, capsys):
    """A factory that hangs: exit code 2, one line naming it, the alarm gone (it repeated
    every second and, fired into the clean-up, killed the process with SIGALRM)."""
    previous = signal.getsignal(signal.SIGALRM)
    started = time.monotonic()
    code, out, err = run(["check", "adamw", "--model-factory", "hostile_user:hanging_model", *TINY,
                          "--timeout", "0.5"], capsys)
    assert code == 2 and out == ""
    assert error_line(err) == (
        "error: the check across widths did not return within 0.5 s "
        "(the time limit of one measurement; raise it with --timeout SECONDS)"
    )
    assert err.count("\n") == 1 and time.monotonic() - started < 30
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0) and signal.getsignal(signal.SIGALRM) == previous
    time.sleep(1.2)  # nothing left to fire
    assert left(tmpdir_) == []
