"""Kim-style text CNN: word embeddings, parallel 1-D convolutions of widths 3/4/5, max over time."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from xaidash.data.registry import DatasetInfo
from xaidash.models.registry import DROPOUT, ModelError, ModelSpec, register
from xaidash.models.training.recipes import Recipe

EMBED_DIM, CHANNELS, KERNELS = 64, 64, (3, 4, 5)


class ConvBranch(nn.Module):
    """Conv1d -> ReLU -> max over the windows that lie inside the text.

    Windows made only of batch padding are zeroed before the max (ReLU outputs are >= 0,
    so zeros never win over a real window): a text scores the same alone or in a batch.
    """

    def __init__(self, dim: int, channels: int, kernel: int):
        super().__init__()
        self.kernel = kernel
        self.conv = nn.Conv1d(dim, channels, kernel)
        self.relu = nn.ReLU()
        self.pool = nn.AdaptiveMaxPool1d(1)

    def forward(self, emb: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        h = self.relu(self.conv(emb))  # (N, C, W)
        last = lengths.clamp(min=self.kernel) - self.kernel  # last window start inside the text
        inside = torch.arange(h.shape[-1], device=h.device)[None, :] <= last[:, None]
        return self.pool(h * inside[:, None, :].to(h.dtype)).squeeze(-1)


class TextCNN(nn.Module):
    def __init__(self, vocab_size: int, num_classes: int, pad_id: int = 0, dropout: float = 0.5):
        super().__init__()
        self.pad_id = pad_id
        self.embedding = nn.Embedding(vocab_size, EMBED_DIM, padding_idx=pad_id)
        self.convs = nn.ModuleList(ConvBranch(EMBED_DIM, CHANNELS, k) for k in KERNELS)
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(CHANNELS * len(KERNELS), num_classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        emb = self.embedding(ids).transpose(1, 2)  # (N, D, L)
        if emb.shape[-1] < max(KERNELS):
            # Pad the embedded sequence with zeros, which is what the padding id embeds to
            # (padding_idx rows start at zero and get no gradient), so that layer attributions
            # on `embedding` keep the input's length.
            emb = F.pad(emb, (0, max(KERNELS) - emb.shape[-1]))
        lengths = (ids != self.pad_id).sum(dim=1)
        feats = torch.cat([branch(emb, lengths) for branch in self.convs], dim=1)
        return self.fc(self.dropout(feats))


def check_vocab(name: str, vocab_size: int | None, pad_id: int) -> int:
    """The vocabulary size, or a ModelError saying what the text model needs."""
    if not vocab_size or int(vocab_size) < 2:
        raise ModelError(f"{name} needs vocab_size (the tokenizer's vocabulary size, at least 2); got {vocab_size!r}.")
    if not 0 <= pad_id < int(vocab_size):
        raise ModelError(f"{name}: pad_id {pad_id} is outside the vocabulary 0..{int(vocab_size) - 1}.")
    return int(vocab_size)


def build(info: DatasetInfo, vocab_size: int | None = None, pad_id: int = 0, dropout: float = 0.5, **_: Any) -> TextCNN:
    return TextCNN(check_vocab("text_cnn", vocab_size, pad_id), info.num_classes, pad_id, dropout)


# Tested on this project's 2-core CPU; expected_acc is the test accuracy measured there (README: Recipes).
RECIPES = {
    "cues": Recipe(epochs=3, batch_size=64, lr=5e-3, expected_acc=1.0, recommended=True),
    "sst2": Recipe(epochs=2, batch_size=64, lr=3e-3, weight_decay=0.01, expected_acc=0.799),
    "sms_spam": Recipe(epochs=5, batch_size=64, lr=5e-3, expected_acc=0.981, recommended=True),
    "text": Recipe(epochs=5, batch_size=64, lr=3e-3, weight_decay=0.01),
}

register(
    ModelSpec(
        name="text_cnn",
        modality="text",
        build=build,
        description=f"Word embeddings ({EMBED_DIM}) and parallel convolutions of widths 3/4/5 "
        f"({CHANNELS} channels each) with max-over-time pooling.",
        input_note="token ids from the data set's word vocabulary",
        embedding="embedding",
        recipes=RECIPES,
        options={"dropout": DROPOUT},
    )
)
