"""A small transformer encoder for text: word embeddings, learned positions, 2 pre-norm blocks, mean pooling."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from xaidash.data.registry import DatasetInfo
from xaidash.models.registry import DROPOUT, ModelError, ModelSpec, register
from xaidash.models.training.recipes import Recipe
from xaidash.models.zoo._attention import Encoder
from xaidash.models.zoo.text_cnn import check_vocab

DIM, DEPTH, HEADS, MLP_DIM, MAX_LEN = 64, 2, 4, 128, 128


class TextTransformer(nn.Module):
    """forward(ids) -> logits; forward_with_attention(ids) -> (logits, [A_l (N, heads, L, L)]).

    Padding (ids == pad_id) is masked as a key, so attention to it is zero, and left out of
    the mean that pools the tokens into one vector.
    """

    def __init__(self, vocab_size: int, num_classes: int, pad_id: int = 0, dropout: float = 0.1):
        super().__init__()
        self.pad_id = pad_id
        self.embedding = nn.Embedding(vocab_size, DIM, padding_idx=pad_id)
        self.pos_embed = nn.Parameter(torch.zeros(1, MAX_LEN, DIM))
        # Words and positions start on the same small scale (as in BERT): with nn.Embedding's N(0, 1) the
        # positions are 50x weaker than the words, attention learns word order slowly, and negation ('not
        # good') with it (cues: 94% test accuracy after 5 epochs, 97% with this).
        nn.init.trunc_normal_(self.embedding.weight, std=0.02)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        with torch.no_grad():
            self.embedding.weight[pad_id].zero_()  # what padding_idx starts at (it gets no gradient)
        self.pos_drop = nn.Dropout(dropout)
        self.encoder = Encoder(DEPTH, DIM, HEADS, MLP_DIM, dropout)
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(DIM, num_classes)

    def forward_with_attention(self, ids: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        if ids.shape[1] > MAX_LEN:
            raise ModelError(
                f"text_transformer reads at most {MAX_LEN} tokens; got {ids.shape[1]} (lower the tokenizer's max_length)."
            )
        pad = ids == self.pad_id
        h = self.pos_drop(self.embedding(ids) + self.pos_embed[:, : ids.shape[1]])
        h, weights = self.encoder(h, pad)
        keep = (~pad).unsqueeze(-1).to(h.dtype)
        pooled = (h * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1.0)
        return self.fc(self.dropout(pooled)), weights

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.forward_with_attention(ids)[0]


def build(
    info: DatasetInfo, vocab_size: int | None = None, pad_id: int = 0, dropout: float = 0.1, **_: Any
) -> TextTransformer:
    return TextTransformer(check_vocab("text_transformer", vocab_size, pad_id), info.num_classes, pad_id, dropout)


# Tested on this project's 2-core CPU; expected_acc is the test accuracy measured there (README: Recipes).
RECIPES = {
    "cues": Recipe(epochs=8, batch_size=64, lr=5e-3, weight_decay=0.01, expected_acc=0.995),
    "sst2": Recipe(epochs=2, batch_size=64, lr=2e-3, weight_decay=0.01, expected_acc=0.815),
    "sms_spam": Recipe(epochs=5, batch_size=64, lr=3e-3, weight_decay=0.01, expected_acc=0.985),
    "text": Recipe(epochs=5, batch_size=64, lr=3e-3, weight_decay=0.01),
}

register(
    ModelSpec(
        name="text_transformer",
        modality="text",
        build=build,
        description=f"Transformer encoder: word embeddings, learned positions (up to {MAX_LEN} tokens), "
        f"{DEPTH} pre-norm blocks (dim {DIM}, {HEADS} heads), mean pooling over the words.",
        input_note=f"token ids from the data set's word vocabulary, at most {MAX_LEN} per text",
        embedding="embedding",
        attention=tuple(f"encoder.blocks.{i}.attn" for i in range(DEPTH)),
        recipes=RECIPES,
        options={"dropout": DROPOUT},
    )
)
