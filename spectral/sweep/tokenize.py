"""Token shards without a download: a BPE tokenizer trained here, on the bundled corpus.

The sweeps train on bytes (a vocabulary of 256); GPT-2 and the paper train on 50 257 BPE
tokens. ``spectral tokenize --out DIR --vocab-size 4096`` closes part of that distance
offline: it trains a byte-level BPE (the ``tokenizers`` package, as GPT-2's) on the **train
split only** of a text source (the stdlib corpus by default), encodes both splits, and writes
what ``spectral sweep --data DIR --vocab-size N`` reads — nanoGPT's layout:

* ``train.bin``, ``val.bin``: flat ``uint16`` token ids;
* ``tokenizer.json``: the trained tokenizer (``tokenizers.Tokenizer.from_file``);
* ``meta.json``: vocabulary size, source and its sha256, token counts, bytes per token.

The split is the byte corpus's (:func:`spectral.sweep.data.load_data`, the sweep's own), so
validation text is never seen by the tokenizer. Deterministic: the same text and
vocabulary give the same files.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..io import check_output, check_output_folder, write_atomic

__all__ = ["FILES", "train_bpe_shards"]

FILES = ("train.bin", "val.bin", "tokenizer.json", "meta.json")
MAX_VOCAB = 2**16
"""Token ids are stored as uint16, as nanoGPT's shards."""


def _train(text: str, vocab_size: int) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte stays encodable
        special_tokens=[],
    )
    chunks = text.splitlines(keepends=True)
    tok.train_from_iterator(chunks, trainer=trainer, length=len(chunks))
    return tok


def _encode(tok: Any, text: str) -> Any:
    import numpy as np

    lines = text.splitlines(keepends=True)
    ids: list[int] = []
    for enc in tok.encode_batch(lines):
        ids.extend(enc.ids)
    return np.asarray(ids, dtype=np.uint16)


def train_bpe_shards(out: str | os.PathLike[str], train: bytes, val: bytes, vocab_size: int, *,
                     source: dict[str, Any], force: bool = False) -> dict[str, Any]:
    """Train the tokenizer on ``train`` only, encode both splits, write :data:`FILES` into
    ``out``; returns the meta record. The splits are :func:`spectral.sweep.data.load_data`'s. Refuses
    existing files unless ``force`` (checked before any work)."""
    if not 256 < vocab_size <= MAX_VOCAB:
        raise SpecError(f"--vocab-size: a byte-level BPE needs more than 256 and at most {MAX_VOCAB} "
                        f"tokens (uint16 shards), got {vocab_size}")
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise SpecError(f"--out: {str(folder)!r} exists and is not a directory")
    if check_output_folder(folder, option="--out"):  # one that cannot be made: before the training
        for name in FILES:
            check_output(folder / name, force=force)
    train_text = train.decode("utf-8", errors="replace")
    val_text = val.decode("utf-8", errors="replace")
    tok = _train(train_text, vocab_size)
    train_ids, val_ids = _encode(tok, train_text), _encode(tok, val_text)
    top = int(max(train_ids.max(initial=0), val_ids.max(initial=0)))
    if top >= vocab_size:  # the trainer never exceeds the vocabulary; say so if it ever does
        raise SpecError(f"the tokenizer produced id {top}, not below --vocab-size {vocab_size}")
    meta = source | {
        "tokenizer": "byte-level BPE (tokenizers), trained on the train split only",
        "vocab_size": vocab_size,
        "trained_vocab": tok.get_vocab_size(),
        "source_sha256": hashlib.sha256(train + val).hexdigest(),
        "split": f"contiguous: first {len(train)} bytes train, last {len(val)} bytes validation",
        "train_tokens": int(train_ids.size),
        "val_tokens": int(val_ids.size),
        "bytes_per_token": round(len(train) / max(1, int(train_ids.size)), 4),
    }
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SpecError(f"--out: cannot create {str(folder)!r} ({exc.strerror or exc})") from None
    write_atomic(folder / "train.bin", train_ids.tobytes(), force=True)
    write_atomic(folder / "val.bin", val_ids.tobytes(), force=True)
    write_atomic(folder / "tokenizer.json", tok.to_str(pretty=False) + "\n", force=True)
    write_atomic(folder / "meta.json", json.dumps(meta, indent=2, sort_keys=True) + "\n", force=True)
    return meta
