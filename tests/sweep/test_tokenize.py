"""``spectral tokenize``: a BPE tokenizer trained locally, written as shards the sweep reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
tokenizers = pytest.importorskip("tokenizers")

from spectral.cli import main  # noqa: E402
from spectral.sweep.data import load_data, split_point, stdlib_bytes  # noqa: E402

SMALL = ["--vocab-size", "320", "--n-bytes", "65536"]


def _make(tmp_path: Path, name: str = "tok", *extra: str) -> Path:
    out = tmp_path / name
    assert main(["tokenize", "--out", str(out), *SMALL, *extra]) == 0
    return out


def test_shards_round_trip_to_the_text_and_the_sweep_reads_them(tmp_path: Path, capsys):
    out = _make(tmp_path)
    assert "--vocab-size 320" in capsys.readouterr().out
    meta = json.loads((out / "meta.json").read_text())
    train = np.fromfile(out / "train.bin", dtype=np.uint16)
    val = np.fromfile(out / "val.bin", dtype=np.uint16)
    assert meta["vocab_size"] == 320 and meta["train_tokens"] == train.size and meta["val_tokens"] == val.size
    assert int(max(train.max(), val.max())) < 320
    text = stdlib_bytes(65536)
    cut = split_point(len(text), 0.1)
    tok = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    assert tok.decode(train.tolist()) == text[:cut].decode("utf-8", errors="replace")
    assert tok.decode(val.tolist()) == text[cut:].decode("utf-8", errors="replace")
    assert meta["bytes_per_token"] > 1.0  # merges happened
    corpus = load_data(str(out), vocab_size=320)
    assert corpus.vocab_size == 320 and len(corpus.train) == train.size


def test_same_input_same_bytes(tmp_path: Path):
    a, b = _make(tmp_path, "a"), _make(tmp_path, "b")
    for name in ("train.bin", "val.bin", "tokenizer.json", "meta.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_existing_shards_are_kept_without_force(tmp_path: Path, capsys):
    out = _make(tmp_path)
    before = (out / "train.bin").read_bytes()
    assert main(["tokenize", "--out", str(out), "--vocab-size", "300", "--n-bytes", "65536"]) != 0
    assert "exists" in capsys.readouterr().err
    assert (out / "train.bin").read_bytes() == before
    assert main(["tokenize", "--out", str(out), "--vocab-size", "300", "--n-bytes", "65536", "--force"]) == 0
    assert json.loads((out / "meta.json").read_text())["vocab_size"] == 300


@pytest.mark.parametrize("args", [["--vocab-size", "256"], ["--vocab-size", "70000"], ["--n-bytes", "10"]])
def test_bad_sizes_are_usage_errors(tmp_path: Path, capsys, args):
    assert main(["tokenize", "--out", str(tmp_path / "x"), *args]) == 2
    assert "error" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_a_file_in_the_way_is_refused(tmp_path: Path, capsys):
    (tmp_path / "f").write_text("x")
    assert main(["tokenize", "--out", str(tmp_path / "f"), *SMALL]) != 0
    assert "not a directory" in capsys.readouterr().err
