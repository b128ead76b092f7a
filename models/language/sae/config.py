"""An SAE's settings, checked against the language model before anything is written, and the time they take.

The expected time comes from measured throughputs: the rates an earlier SAE of the same run recorded (this
machine, this model) when there is one, else the rates `bench/sae_speed.py` measured on a 2-core CPU (below)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from xaidash.models.language.model import LanguageModel
from xaidash.models.language.sites import check_layer, site_of
from xaidash.models.registry import ModelError

ARCHITECTURES = ("topk", "jumprelu", "standard")  # SAELens's training SAEs xaidash offers (train.TRAINING)
MAX_WIDTH = 1 << 17
MIN_CONTEXT = 8  # tokens: position 0 is left out of the training data, and a context needs a few to predict

# Measured on the 2-core CPU shared with other work (one torch thread), SmolLM2-135M at layer 15, width 2,304:
# decoder-layer tokens per second while harvesting (layer L costs L + 1 layers; 7,700-9,600 seen) and SAE
# training MACs per second (3 products of d_in x width per token; 1.05e10-1.33e10 seen).
CPU_LAYER_TOKENS_S = 9_000.0
CPU_TRAIN_MACS_S = 1.2e10


@dataclass(frozen=True)
class SaeConfig:
    """What to train: at decoder layer `layer`'s `site` (models.language.sites.SITES), an SAE of `width` features
    of `architecture` (k active features for topk; `sparsity` is the L1 (standard) or L0 (jumprelu) coefficient),
    on `tokens` activations harvested from `corpus` (a text data set's name, or a text file or folder) cut into
    contexts of `context` tokens, trained on for `epochs` passes of `batch_tokens` activations a step at learning
    rate `lr`; `heldout_tokens` of other contexts are kept aside for the evaluation. Harvesting costs a forward
    pass per token and training far less, so a few epochs over fewer tokens make a better SAE in the same time."""

    layer: int
    site: str = "resid"
    architecture: str = "topk"
    width: int = 2304
    k: int | None = 32
    corpus: str = "sst2"
    tokens: int = 300_000
    context: int = 64
    batch_tokens: int = 1024
    lr: float = 1e-3
    heldout_tokens: int = 8192
    seed: int = 0
    sparsity: float = 1.0
    epochs: int = 1

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> SaeConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in obj.items() if k in names})

    @property
    def total_steps(self) -> int:
        return max(1, self.tokens * self.epochs // self.batch_tokens)

    def check_settings(self) -> None:
        """The settings alone (no model, no corpus): one ModelError line for the first that cannot work."""
        site_of(self.site)
        if self.architecture not in ARCHITECTURES:
            raise ModelError(
                f"Unknown SAE architecture {self.architecture!r}: choose one of {', '.join(ARCHITECTURES)}."
            )
        if not 1 <= self.width <= MAX_WIDTH:
            raise ModelError(f"Width {self.width}: an SAE needs between 1 and {MAX_WIDTH:,} features.")
        if self.architecture == "topk" and (self.k is None or not 1 <= self.k <= self.width):
            raise ModelError(f"k {self.k}: a topk SAE keeps between 1 and width ({self.width}) features active.")
        if self.context < MIN_CONTEXT:
            raise ModelError(f"Context {self.context}: use at least {MIN_CONTEXT} tokens per context.")
        if self.batch_tokens < 1 or self.tokens < self.batch_tokens:
            raise ModelError(
                f"{self.tokens:,} training tokens are fewer than one batch of {self.batch_tokens:,}: "
                "ask for more tokens or a smaller batch."
            )
        if not 1 <= self.epochs <= 100:
            raise ModelError(f"Epochs {self.epochs}: train between 1 and 100 passes over the harvested tokens.")
        if self.heldout_tokens < 1:
            raise ModelError("Held-out tokens must be at least 1: the SAE is evaluated on them.")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ModelError(f"Learning rate {self.lr}: it must be a positive number.")
        if not (self.sparsity >= 0 and math.isfinite(self.sparsity)):
            raise ModelError(f"Sparsity coefficient {self.sparsity}: it must be zero or more.")

    def check(self, lm: LanguageModel) -> int:
        """Check the settings against the language model and the corpus (read and tokenized here); the number of
        contexts the corpus gives. One ModelError line for the first setting that cannot work."""
        from xaidash.models.language.sae.corpus import corpus_contexts

        self.check_settings()
        check_layer(lm, self.layer)
        if self.context > lm.context:
            raise ModelError(f"Context {self.context}: {lm.name} reads at most {lm.context:,} tokens at once.")
        n = int(corpus_contexts(lm.tokenizer, self.corpus, self.context).shape[0])
        per = self.context - 1  # position 0 is not harvested
        need_heldout = math.ceil(self.heldout_tokens / per)
        need_batch = math.ceil(self.batch_tokens / per)
        if n < need_heldout + need_batch:
            raise ModelError(
                f"Corpus {self.corpus!r} gives {n:,} contexts of {self.context} tokens ({n * per:,} tokens): fewer "
                f"than one batch of {self.batch_tokens:,} plus {self.heldout_tokens:,} held-out tokens. Give a "
                "larger corpus or ask for fewer tokens."
            )
        return n


@dataclass(frozen=True)
class Rates:
    """Throughputs: decoder-layer tokens per second while harvesting, SAE-training MACs per second."""

    layer_tokens_s: float = CPU_LAYER_TOKENS_S
    train_macs_s: float = CPU_TRAIN_MACS_S


def expected_seconds(config: SaeConfig, d_in: int, num_layers: int, rates: Rates | None = None) -> dict[str, float]:
    """Expected seconds for harvesting, training and evaluating `config` (keys harvest, train, evaluate, total).
    Harvesting stops at the SAE's layer; training costs about three d_in x width products per token (encoder
    forward and backward; the topk decoder touches k rows)."""
    r = rates or Rates()
    # a corpus smaller than `tokens` is harvested whole: this is the upper bound
    harvest = (config.tokens + config.heldout_tokens) * (config.layer + 1) / r.layer_tokens_s
    macs = 3.0 * d_in * config.width * config.tokens * config.epochs
    train = macs / r.train_macs_s
    # evaluation: three full passes (clean, reconstructed, zero-ablated) over the held-out contexts; the
    # unembedding costs about as much as four of SmolLM2's layers
    evaluate = 3 * config.heldout_tokens * (num_layers + 4) / r.layer_tokens_s
    return {"harvest": harvest, "train": train, "evaluate": evaluate, "total": harvest + train + evaluate}
