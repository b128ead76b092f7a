"""The libraries' own per-input calls for text LIME and KernelSHAP (registers no method).

`lime_text_reference` is lime's `LimeTextExplainer.explain_instance` (perturbed strings, re-tokenized,
one input at a time) and `kernel_shap_text_reference` captum's `KernelShap.attribute` on one input's
ids, both over the same words as the methods in `text.py`. Kept as the references the batched device
paths are tested (tests/explainers/test_text_batching.py) and benchmarked (bench/text_explain_speed.py) against.
"""

from __future__ import annotations

import numpy as np
import torch

from xaidash.data.tokenizer import word_spans
from xaidash.explainers.baselines import padding_ids
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle


def _word_ids(bundle: ModelBundle, text: str) -> tuple[torch.Tensor, list[int | None]]:
    """The text's ids (1, L) on the device and the word index of each id position."""
    x = bundle.prepare([text])
    return x, bundle.tokenizer.word_ids(text)[: x.shape[1]]


def lime_text_reference(
    bundle: ModelBundle, text: str, target: int, samples: int, *, seed: int = 0, batch_size: int = 256
) -> np.ndarray:
    """lime's `LimeTextExplainer(bow=False, mask_string="")` on the words the model reads: one weight per
    word (`split_words(text)` up to the last word with an id)."""
    from lime.lime_text import LimeTextExplainer

    _, ids = _word_ids(bundle, text)
    present = [w for w in ids if w is not None]
    if not present:
        raise ExplainError("The text has no word the model can read.")
    n_words = max(present) + 1

    def classifier(texts: list[str]) -> np.ndarray:
        return bundle.predict_proba(texts, batch_size=batch_size).numpy()

    explainer = LimeTextExplainer(
        class_names=list(bundle.info.classes),
        split_expression=lambda s: [s[a:b] for a, b in word_spans(s)][:n_words],
        bow=False,
        mask_string="",
        random_state=seed,
    )
    exp = explainer.explain_instance(text, classifier, labels=(int(target),), num_features=n_words, num_samples=samples)
    weights = np.zeros(n_words, dtype=np.float32)
    for feature, weight in exp.local_exp[int(target)]:
        if feature < n_words:  # text after the cut can form one more lime "word": the model never read it
            weights[feature] = weight
    return weights


def kernel_shap_text_reference(
    bundle: ModelBundle, text: str, target: int, samples: int, *, seed: int = 0, batch_size: int = 256
) -> np.ndarray:
    """captum's `KernelShap` over the words with ids (absent: their pieces padded), for the target
    probability, coalitions drawn from torch's generator seeded with `seed`: one value per word."""
    from captum.attr import KernelShap

    x, ids = _word_ids(bundle, text)
    present = sorted({w for w in ids if w is not None})
    if not present:
        raise ExplainError("The text has no word the model can read.")
    base = padding_ids(bundle, [text], x)
    feature_of = {w: k for k, w in enumerate(present)}
    # Special tokens join feature 0; their baseline equals the input, so that feature only moves its word.
    mask = torch.tensor([[feature_of[w] if w is not None else 0 for w in ids]], device=x.device)
    values = np.zeros(present[-1] + 1, dtype=np.float32)
    bundle.model.eval()
    with torch.no_grad():
        ends = torch.softmax(bundle.model(torch.cat([x, base])), dim=-1)[:, int(target)]
    if len(present) == 1:  # one player: its Shapley value is the whole difference
        values[present] = float(ends[0] - ends[1])
        return values

    def proba(ids: torch.Tensor) -> torch.Tensor:
        return torch.softmax(bundle.model(ids), dim=-1)

    with torch.random.fork_rng(devices=[x.device] if x.device.type == "cuda" else []):
        torch.manual_seed(seed)  # captum draws coalitions from torch's global generator; the caller's is kept
        phi = KernelShap(proba).attribute(
            x,
            baselines=base,
            target=int(target),
            feature_mask=mask,
            n_samples=samples,
            perturbations_per_eval=max(1, min(batch_size, samples)),
            return_input_shape=False,
        )
    values[present] = phi[0].detach().cpu().numpy()
    return values
