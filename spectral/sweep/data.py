"""Training text for the learning-rate sweeps: no download needed.

Three sources, chosen by :func:`load_data`'s ``source`` (the CLI's ``--data``):

* ``"stdlib"`` (default) — a byte-level corpus built at run time from the ``.py`` source of
  the running Python's standard library (``sysconfig.get_paths()["stdlib"]``; third-party
  ``site-packages``/``dist-packages`` excluded). Files are read in sorted order of their
  relative POSIX path and concatenated; the first ``n_bytes`` bytes are kept. Every Python
  installation ships this text, so the corpus needs no network. Its SHA-256 and the Python
  version are recorded, since another Python version gives other text.
* a text file, ``--data FILE.txt`` — its raw bytes (first ``n_bytes`` if given), byte
  vocabulary 256, split like the stdlib corpus.
* a folder of nanoGPT token shards, ``--data DIR --vocab-size 50304`` — flat ``uint16``
  ``.bin`` files as written by nanoGPT's ``data/openwebtext/prepare.py``. ``DIR/train.bin``
  and ``DIR/val.bin`` are used as the two splits when both exist; otherwise every ``*.bin``
  in sorted order is concatenated and split like a text corpus. Shards are memory-mapped.

Split (text sources): the first ``1 - val_fraction`` of the tokens train, the rest
validate — contiguous, so no window straddles the two and the split is the same on every
machine. :attr:`Corpus.description` records source, sizes, split and fingerprint; the sweep
writes it into every result.

Batches: :meth:`Corpus.train_batch` draws random windows from a caller-seeded
``torch.Generator`` (same seed, same batches, whatever the model); :meth:`Corpus.val_batches`
are evenly spaced windows of the validation split, identical for every run.

Only this module's batch methods import torch (and numpy, for shards); building a corpus
does not.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SpecError

__all__ = ["Corpus", "stdlib_files", "stdlib_bytes", "load_data", "split_point", "BYTE_VOCAB"]

BYTE_VOCAB = 256
DEFAULT_N_BYTES = 4 * 2**20
DEFAULT_VAL_FRACTION = 0.1
_EXCLUDED_DIRS = {"site-packages", "dist-packages", "__pycache__"}


def stdlib_files(root: str | os.PathLike[str] | None = None) -> list[Path]:
    """The standard library's ``.py`` files, sorted by relative POSIX path."""
    base = Path(root if root is not None else sysconfig.get_paths()["stdlib"])
    if not base.is_dir():
        raise SpecError(f"standard library folder {base} not found")
    found: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = [d for d in dirnames if d not in _EXCLUDED_DIRS]
        for name in filenames:
            if name.endswith(".py"):
                path = Path(dirpath) / name
                found.append((path.relative_to(base).as_posix(), path))
    found.sort(key=lambda t: t[0])
    return [p for _, p in found]


def stdlib_bytes(n_bytes: int = DEFAULT_N_BYTES, root: str | os.PathLike[str] | None = None) -> bytes:
    """The first ``n_bytes`` of the concatenated, sorted standard-library sources."""
    if n_bytes <= 0:
        raise SpecError(f"n_bytes must be positive, got {n_bytes}")
    chunks: list[bytes] = []
    total = 0
    for path in stdlib_files(root):
        try:
            data = path.read_bytes()
        except OSError:  # an unreadable file is skipped; the fingerprint records the result
            continue
        chunks.append(data)
        total += len(data)
        if total >= n_bytes:
            break
    return b"".join(chunks)[:n_bytes]


def split_point(n_tokens: int, val_fraction: float) -> int:
    """Index of the first validation token: train is ``[0, s)``, validation ``[s, n)``."""
    if not 0.0 < val_fraction < 1.0:
        raise SpecError(f"val_fraction must lie in (0, 1), got {val_fraction}")
    s = int(round(n_tokens * (1.0 - val_fraction)))
    return min(max(s, 1), n_tokens - 1)


@dataclass
class Corpus:
    """Train and validation token streams plus a description of where they came from."""

    train: Any
    """A ``bytes`` object (byte vocabulary) or a 1-D ``numpy.uint16`` memmap (token shards)."""
    val: Any
    vocab_size: int
    description: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.description.setdefault("vocab_size", self.vocab_size)
        self.description.setdefault("train_tokens", len(self.train))
        self.description.setdefault("val_tokens", len(self.val))
        self._tensors: dict[str, Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        # to a --jobs worker: the tokens, not the tensors made of them here (it makes its own)
        return {k: v for k, v in self.__dict__.items() if k != "_tensors"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._tensors = {}

    def _tensor(self, split: str):
        import torch

        if split not in self._tensors:
            src = self.train if split == "train" else self.val
            if isinstance(src, (bytes, bytearray)):
                t = torch.frombuffer(bytearray(src), dtype=torch.uint8).long()
            else:
                import numpy as np

                t = torch.from_numpy(np.asarray(src, dtype=np.int64))
            self._tensors[split] = t
        return self._tensors[split]

    def _check_len(self, split: str, block_size: int) -> Any:
        data = self._tensor(split)
        if len(data) < block_size + 1:
            raise SpecError(
                f"{split} split has {len(data)} tokens, fewer than block_size + 1 = {block_size + 1}"
            )
        return data

    def train_batch(self, batch_size: int, block_size: int, generator: Any, device: str = "cpu"):
        """``(x, y)``: ``batch_size`` random windows of the training split (``y`` = ``x`` shifted by one)."""
        import torch

        data = self._check_len("train", block_size)
        ix = torch.randint(0, len(data) - block_size, (batch_size,), generator=generator)
        offs = torch.arange(block_size + 1)
        win = data[ix[:, None] + offs[None, :]]
        return win[:, :-1].to(device), win[:, 1:].to(device)

    def val_batches(self, n_batches: int, batch_size: int, block_size: int, device: str = "cpu"):
        """``n_batches`` batches of evenly spaced validation windows; the same for every run."""
        import torch

        data = self._check_len("val", block_size)
        n_win = n_batches * batch_size
        last = len(data) - block_size - 1
        starts = torch.linspace(0, last, n_win).round().long() if n_win > 1 else torch.zeros(1).long()
        offs = torch.arange(block_size + 1)
        out = []
        for b in range(n_batches):
            ix = starts[b * batch_size : (b + 1) * batch_size]
            win = data[ix[:, None] + offs[None, :]]
            out.append((win[:, :-1].to(device), win[:, 1:].to(device)))
        return out


def _bytes_corpus(data: bytes, val_fraction: float, desc: dict[str, Any]) -> Corpus:
    if len(data) < 2:
        raise SpecError(f"corpus has {len(data)} bytes; need at least 2")
    s = split_point(len(data), val_fraction)
    desc.update(
        n_bytes=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        split=f"contiguous: first {s} bytes train, last {len(data) - s} bytes validation",
        val_fraction=val_fraction,
    )
    return Corpus(train=data[:s], val=data[s:], vocab_size=BYTE_VOCAB, description=desc)


def _shard_corpus(folder: Path, vocab_size: int | None, val_fraction: float) -> Corpus:
    import numpy as np

    train_f, val_f = folder / "train.bin", folder / "val.bin"
    if not (train_f.is_file() and val_f.is_file()) and not any(f.is_file() for f in folder.glob("*.bin")):
        raise SpecError(f"no .bin token shards in {folder}")
    if vocab_size is None:
        raise SpecError(f"{folder} holds token shards: pass --vocab-size (GPT-2: 50304)")
    if train_f.is_file() and val_f.is_file():
        train = np.memmap(train_f, dtype=np.uint16, mode="r")
        val = np.memmap(val_f, dtype=np.uint16, mode="r")
        split = "train.bin / val.bin as given"
        files = ["train.bin", "val.bin"]
    else:
        shards = sorted(folder.glob("*.bin"))
        if not shards:
            raise SpecError(f"no .bin token shards in {folder}")
        arrays = [np.memmap(f, dtype=np.uint16, mode="r") for f in shards]
        allt = np.concatenate(arrays) if len(arrays) > 1 else arrays[0]
        s = split_point(len(allt), val_fraction)
        train, val = allt[:s], allt[s:]
        split = f"contiguous over sorted shards: first {s} tokens train, last {len(allt) - s} validation"
        files = [f.name for f in shards]
    top = int(max(int(train.max()) if len(train) else 0, int(val.max()) if len(val) else 0))
    if top >= vocab_size:
        raise SpecError(f"token id {top} in {folder} is not below --vocab-size {vocab_size}")
    desc = {"source": "shards", "path": str(folder), "files": files, "split": split}
    return Corpus(train=train, val=val, vocab_size=vocab_size, description=desc)


def load_data(
    source: str | os.PathLike[str] | None = "stdlib",
    *,
    n_bytes: int | None = DEFAULT_N_BYTES,
    val_fraction: float = DEFAULT_VAL_FRACTION,
    vocab_size: int | None = None,
) -> Corpus:
    """The corpus named by ``source``: ``"stdlib"``/``None``, a text file or a shard folder.

    ``n_bytes`` caps text sources (``None``: the whole file; the stdlib corpus needs a cap).
    ``vocab_size`` is required for token shards and must be 256 (or ``None``) for text.
    """
    if source is None or str(source) == "stdlib":
        if vocab_size not in (None, BYTE_VOCAB):
            raise SpecError(f"the stdlib corpus is byte-level (vocab 256), not {vocab_size}")
        data = stdlib_bytes(n_bytes or DEFAULT_N_BYTES)
        desc = {
            "source": "stdlib",
            "path": sysconfig.get_paths()["stdlib"],
            "python": platform.python_version(),
            "order": "sorted .py files (relative POSIX path), site-packages excluded",
        }
        return _bytes_corpus(data, val_fraction, desc)
    path = Path(source)
    if path.is_dir():
        return _shard_corpus(path, vocab_size, val_fraction)
    if path.is_file():
        if vocab_size not in (None, BYTE_VOCAB):
            raise SpecError(f"a text file is read as bytes (vocab 256), not {vocab_size}")
        with open(path, "rb") as fh:
            data = fh.read(n_bytes) if n_bytes else fh.read()
        return _bytes_corpus(data, val_fraction, {"source": "file", "path": str(path)})
    raise SpecError(f"--data {source}: neither 'stdlib', a text file nor a folder of .bin shards")
