"""``spectral tokenize``: a BPE tokenizer trained on a local text, and its token shards.

The shards (:mod:`spectral.sweep.tokenize`) are what ``spectral sweep --data DIR
--vocab-size N`` reads.
"""

from __future__ import annotations

import argparse
import shlex

from ..sweep import data
from ..sweep.tokenize import train_bpe_shards
from ..text import for_terminal
from . import options
from .common import wrote

__all__ = ["DESCRIPTION", "configure_tokenize", "run_tokenize"]

DESCRIPTION = (
    "Train a byte-level BPE tokenizer (the tokenizers package) on the train split of a local text "
    "(default: the standard library's .py sources, as spectral sweep uses) and write nanoGPT-style "
    "uint16 shards train.bin / val.bin, tokenizer.json and meta.json into --out. No download."
)


def configure_tokenize(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", "-o", required=True, metavar="DIR", help="folder for the shards (created if missing)")
    p.add_argument("--vocab-size", type=options.integer(257, 2**16), default=4096,
                   help="BPE vocabulary, 257 to 65536 (default 4096)")
    p.add_argument("--data", default="stdlib", help="'stdlib' (default) or a text file")
    p.add_argument("--n-bytes", type=options.integer(1024, 2**40), default=data.DEFAULT_N_BYTES,
                   help=f"bytes of text to use (default {data.DEFAULT_N_BYTES}, the sweep's CPU preset)")
    p.add_argument("--val-fraction", type=options.floats(0.0, 1.0, lo_open=True, hi_open=True),
                   default=data.DEFAULT_VAL_FRACTION)
    p.add_argument("--force", action="store_true", help="replace existing shards in --out")


def run_tokenize(args: argparse.Namespace) -> int:
    corpus = data.load_data(args.data, n_bytes=args.n_bytes, val_fraction=args.val_fraction)
    source = {k: v for k, v in corpus.description.items() if k in ("source", "path", "python", "order")}
    meta = train_bpe_shards(args.out, bytes(corpus.train), bytes(corpus.val), args.vocab_size, source=source,
                            force=args.force)
    wrote(args.out, f": {meta['train_tokens']} train / {meta['val_tokens']} validation tokens, "
          f"vocabulary {meta['vocab_size']}, {meta['bytes_per_token']} bytes per token")
    print(f"use it: spectral sweep --data {for_terminal(shlex.quote(args.out))} --vocab-size {meta['vocab_size']} …")
    return 0
