"""Tokens of a text corpus, prepared once.

--data-dir names a UTF-8 text file or a folder of .txt files. Global rank 0
turns it into a vocabulary (its characters, or the 256 byte values) and two
uint16 memmap files, the first 90% of the tokens for training and the last 10%
for validation (as nanoGPT's prepare.py splits by position). They live in
RUN_DIR/tokens/ with a fingerprint of the source: a later run of the same text
(a resume, a requeue) reads them instead of tokenising again.
"""

import json
from pathlib import Path

import numpy as np

from .config import ConfigError
from .metrics import write_atomically

VALIDATION_SHARE = 0.1
FILES = ("train.bin", "val.bin", "vocab.json")


class Vocabulary:
    """Characters of the corpus (sorted), or the 256 byte values."""

    def __init__(self, kind, chars=None):
        self.kind = kind
        self.chars = chars
        self.index = {char: i for i, char in enumerate(chars or ())}

    @classmethod
    def of_text(cls, kind, text):
        return cls(kind, sorted(set(text)) if kind == "char" else None)

    def __len__(self):
        return len(self.chars) if self.kind == "char" else 256

    def encode(self, text):
        if self.kind == "byte":
            return np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
        unknown = set(text) - self.index.keys()
        if unknown:
            raise ConfigError(
                f"characters outside the vocabulary: {''.join(sorted(unknown))!r}"
            )
        return np.fromiter((self.index[c] for c in text), np.uint16, len(text))

    def decode(self, ids):
        if self.kind == "byte":
            return bytes(ids).decode("utf-8", errors="replace")
        return "".join(self.chars[i] for i in ids)

    def state(self):
        """What the checkpoint keeps: plain lists, loadable with weights_only."""
        return {"kind": self.kind, "chars": self.chars}

    @classmethod
    def from_state(cls, state):
        return cls(state["kind"], state["chars"])


def corpus_files(data_dir):
    path = Path(data_dir)
    files = sorted(path.glob("*.txt")) if path.is_dir() else [path]
    if not files or not files[0].is_file():
        raise ConfigError(
            f"--data-dir {data_dir}: expected a UTF-8 text file or a folder of "
            ".txt files"
        )
    return files


def fingerprint(files, kind):
    """Which text and tokenizer the prepared files come from."""
    return {
        "tokenizer": kind,
        "files": [
            [str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns] for f in files
        ],
    }


def prepare(data_dir, folder, kind):
    """Tokenise the corpus into `folder`, unless it holds this corpus already."""
    files = corpus_files(data_dir)
    folder = Path(folder)
    source = fingerprint(files, kind)
    stamp = folder / "source.json"
    if stamp.exists() and json.loads(stamp.read_text()) == source:
        return
    text = "".join(read_text(f) for f in files)
    vocabulary = Vocabulary.of_text(kind, text)
    tokens = vocabulary.encode(text).astype(np.uint16)
    cut = int(len(tokens) * (1 - VALIDATION_SHARE))
    folder.mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)  # written last: a torn preparation is redone
    write_atomically(folder / "train.bin", tokens[:cut].tobytes())
    write_atomically(folder / "val.bin", tokens[cut:].tobytes())
    write_atomically(folder / "vocab.json", json.dumps(vocabulary.state()))
    write_atomically(stamp, json.dumps(source))


def read_text(path):
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path} is not UTF-8 text ({error.reason})") from None


def load(folder):
    """(training tokens, validation tokens, vocabulary) of a prepared folder."""
    folder = Path(folder)
    vocabulary = Vocabulary.from_state(json.loads((folder / "vocab.json").read_text()))
    train, val = (
        np.memmap(folder / name, dtype=np.uint16, mode="r") for name in FILES[:2]
    )
    return train, val, vocabulary
