"""The text an SAE is trained on, as contexts of token ids: a text data set of xaidash's (its train split) or a
user's text file or folder of text files.

Texts are tokenized, joined with the end-of-sequence token between them, and cut into windows of `context - 1`
tokens, each led by the beginning-of-sequence token (as SAELens's pretokenizer does), so every context starts the
way the model saw its training documents start. Position 0 of a context is an attention sink with outsized
activations: harvesting leaves it out."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import torch

from xaidash.data.errors import XaidashError
from xaidash.data.text_files import decode_text
from xaidash.models.registry import ModelError

TEXT_SUFFIXES = (".txt", ".md", ".text", ".csv", ".tsv", ".json", ".jsonl", ".html", ".rst")
MAX_FILE_BYTES = 200_000_000
TOKENIZE_BATCH = 2048  # texts per tokenizer call


def _file_texts(path: Path) -> list[str]:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ModelError(f"{path}: larger than {MAX_FILE_BYTES:,} bytes; split it into a folder of files.")
        text = decode_text(path.read_bytes(), str(path), error=ModelError).text
    except OSError as e:
        raise ModelError(f"{path}: cannot read it ({e.strerror or e}).") from None
    return [text] if text.strip() else []


def _folder_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)


def text_datasets() -> list[str]:
    """The registered data sets of texts, by name: the corpora offered by name."""
    from xaidash.data.modalities import modality_of
    from xaidash.data.registry import list_datasets

    return [d.name for d in list_datasets() if modality_of(d.modality).tokenized]


def corpus_texts(corpus: str) -> list[str]:
    """The texts of `corpus`: a registered text data set's train split, a text file, or the text files of a folder
    (suffixes TEXT_SUFFIXES, sorted by path). A ModelError line for an unknown name, an empty file or folder."""
    from xaidash.data.registry import get_info, load_split

    path = Path(corpus).expanduser()
    if path.is_file():
        texts = _file_texts(path)
        if not texts:
            raise ModelError(f"Corpus file {corpus} is empty: give a file with text in it.")
        return texts
    if path.is_dir():
        files = _folder_files(path)
        texts = [t for f in files for t in _file_texts(f)]
        if not texts:
            raise ModelError(
                f"Corpus folder {corpus} holds no text ({len(files)} files ending in "
                f"{', '.join(TEXT_SUFFIXES)} with text in them)."
            )
        return texts
    names = text_datasets()
    if corpus not in names:
        raise ModelError(f"Corpus {corpus!r} is neither a file, a folder nor a text data set ({', '.join(names)}).")
    try:
        split = load_split(get_info(corpus).name, "train")
    except XaidashError as e:
        raise ModelError(f"Corpus {corpus}: {e}") from None
    texts = [t for t in getattr(split, "texts", []) if t.strip()]
    if not texts:
        raise ModelError(f"Corpus {corpus} has no text in its train split.")
    return texts


def _separators(tokenizer: Any) -> tuple[int | None, int | None]:
    bos = getattr(tokenizer, "bos_token_id", None)
    eos = getattr(tokenizer, "eos_token_id", None)
    return bos, eos


def contexts_of(tokenizer: Any, texts: list[str], context: int) -> torch.Tensor:
    """(n_contexts, context) int64 token ids: the texts' tokens joined by the end-of-sequence token, cut into
    windows led by the beginning-of-sequence token (or, without one, windows of `context` tokens). The tail that
    does not fill a window is dropped."""
    bos, eos = _separators(tokenizer)
    stream: list[int] = []
    for start in range(0, len(texts), TOKENIZE_BATCH):
        batch = tokenizer(texts[start : start + TOKENIZE_BATCH], add_special_tokens=False)["input_ids"]
        for ids in batch:
            stream.extend(ids)
            if eos is not None:
                stream.append(eos)
    width = context - 1 if bos is not None else context
    n = len(stream) // width
    body = torch.tensor(stream[: n * width], dtype=torch.int64).reshape(n, width)
    if bos is None:
        return body
    return torch.cat([torch.full((n, 1), bos, dtype=torch.int64), body], dim=1)


@functools.lru_cache(maxsize=4)
def _cached(tokenizer_id: int, tokenizer: Any, corpus: str, stamp: tuple[Any, ...], context: int) -> torch.Tensor:
    return contexts_of(tokenizer, corpus_texts(corpus), context)


def _stamp(corpus: str) -> tuple[Any, ...]:
    """What changes when the corpus does: a file's or folder's modification times (a data set is fixed)."""
    path = Path(corpus).expanduser()
    if path.is_file():
        st = path.stat()
        return (st.st_mtime_ns, st.st_size)
    if path.is_dir():
        return tuple((str(p), p.stat().st_mtime_ns) for p in _folder_files(path))
    return ()


def corpus_contexts(tokenizer: Any, corpus: str, context: int) -> torch.Tensor:
    """`contexts_of` the corpus's texts, cached for the check that precedes the harvest (tokenizing SST-2 takes
    seconds)."""
    return _cached(id(tokenizer), tokenizer, corpus, _stamp(corpus), context)
