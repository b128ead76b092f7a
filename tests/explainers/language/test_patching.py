"""Activation patching on the real SmolLM2: batched patches against a plain loop (one patch per forward pass, heads
replaced in o_proj's input itself), the identities (clean into clean restores everything; the last layer's last
position restores everything), refusals, and the names example's known circuit shape."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from smollm2_run import smollm2_lm
from torch import nn

from xaidash.explainers.language import patching as P
from xaidash.models.language.model import LanguageModel
from xaidash.models.language.sites import editing
from xaidash.models.registry import ModelError


@pytest.fixture(scope="module")
def lm(tmp_path_factory: pytest.TempPathFactory) -> LanguageModel:
    torch.set_num_threads(1)
    return smollm2_lm(tmp_path_factory)


@pytest.fixture(scope="module")
def names(lm: LanguageModel) -> P.PatchingSetup:
    return P.prepare(lm, P.NAMES_CLEAN, P.NAMES_CORRUPTED, P.NAMES_ANSWER, P.NAMES_WRONG)


@pytest.fixture(scope="module")
def caches(lm: LanguageModel, names: P.PatchingSetup) -> tuple[P.Cache, P.Cache]:
    return (
        P.cache_run(lm, names.clean, names.answer, names.wrong),
        P.cache_run(lm, names.corrupted, names.answer, names.wrong),
    )


def _replace_head(lm: LanguageModel, layer: int, head: int, clean_in: torch.Tensor) -> Any:
    """Reference: put the clean head's slice straight into o_proj's input (no W_O algebra)."""
    dh = clean_in.shape[-1] // lm.num_heads

    def pre(module: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
        x = args[0].clone()
        x[..., head * dh : (head + 1) * dh] = clean_in[..., head * dh : (head + 1) * dh]
        return (x, *args[1:])

    return P.o_proj(lm, layer).register_forward_pre_hook(pre)


@torch.no_grad()
def _one_by_one(lm: LanguageModel, setup: P.PatchingSetup, clean: P.Cache, patch: P.Patch) -> float:
    """Reference: one forward pass of the corrupted prompt with this one patch."""
    ids = setup.corrupted
    if patch.kind == "head":
        handle = _replace_head(lm, patch.layer, patch.index, clean.heads_in[patch.layer])
        try:
            logits = lm.logits(ids)
        finally:
            handle.remove()
    else:

        def edit(out: torch.Tensor) -> torch.Tensor:
            out = out.clone()
            if patch.kind == "resid":
                out[:, patch.index] = clean.resid[patch.layer][patch.index]
            else:
                out[:] = clean.mlp[patch.layer]
            return out

        with editing(lm, patch.layer, patch.kind, edit):
            logits = lm.logits(ids)
    return float(P.logit_diff(logits, setup.answer, setup.wrong)[0])


def test_batched_patches_match_a_plain_loop(lm, names, caches) -> None:
    clean, corrupted = caches
    patches = [
        P.Patch("resid", 3, 1),
        P.Patch("resid", 12, 9),
        P.Patch("resid", 25, 13),
        P.Patch("head", 23, 3),
        P.Patch("head", 16, 0),
        P.Patch("head", 5, 8),
        P.Patch("mlp", 0),
        P.Patch("mlp", 21),
    ]
    batched = P.patch_diffs(lm, names.corrupted, clean, corrupted, patches, names.answer, names.wrong, batch=3)
    loop = np.array([_one_by_one(lm, names, clean, p) for p in patches])
    np.testing.assert_allclose(batched, loop, atol=2e-3)
    # the patches change the answer, so the comparison is not between equal unpatched runs
    assert np.ptp(loop) > 1.0


def test_clean_patched_into_itself_restores_everything(lm, names, caches) -> None:
    clean, _ = caches
    patches = P.all_patches(lm, names.clean.shape[1])[::37]
    diffs = P.patch_diffs(lm, names.clean, clean, clean, patches, names.answer, names.wrong)
    np.testing.assert_allclose(diffs, clean.logit_diff, atol=2e-3)


def test_the_last_layer_restores_everything(lm, names, caches) -> None:
    clean, corrupted = caches
    last = lm.num_layers - 1
    t = names.clean.shape[1]
    patches = [P.Patch("resid", last, pos) for pos in range(t)]
    diffs = P.patch_diffs(lm, names.corrupted, clean, corrupted, patches, names.answer, names.wrong)
    frac = (diffs - corrupted.logit_diff) / (clean.logit_diff - corrupted.logit_diff)
    # after the last block only the last position's residual stream reaches the next-token logits
    np.testing.assert_allclose(frac[-1], 1.0, atol=1e-4)
    np.testing.assert_allclose(frac[:-1], 0.0, atol=1e-4)


@pytest.mark.slow
def test_names_example_finds_the_name_positions_then_the_last(lm, names) -> None:
    result = P.patch_prompts(lm, names)
    assert result.clean_diff > 2 and result.corrupted_diff < -2  # the model gets both prompts right
    n = lm.num_layers
    early = slice(0, n // 2)
    names_at = [i for i, (a, b) in enumerate(zip(names.clean_tokens, names.corrupted_tokens, strict=True)) if a != b]
    assert names_at == [1, 3, 9]
    # early-middle layers: the answer lives at the name positions (the second subject most), nowhere else
    assert result.resid[early, 9].min() > 0.5 and result.resid[early, 1].min() > 0.5
    others = [i for i in range(result.resid.shape[1]) if i not in names_at]
    assert np.abs(result.resid[early][:, others]).max() < 0.15
    # late layers: it has moved to the last position, and the move happens in one layer's attention
    assert result.resid[-6:, -1].min() > 0.75 and result.resid[-6:, 9].max() < 0.2
    moved = int(np.argmax(result.resid[:, -1] > 0.5))
    assert result.heads[moved].max() > 0.3
    text = "\n".join(P.carriers(result))
    assert f"L{moved}H{int(result.heads[moved].argmax())}" in text
    assert result.forward_passes == 2 + -(-(n * 14 + n * lm.num_heads + n) // P.DEFAULT_BATCH)


def test_refusals_are_one_line(lm) -> None:
    with pytest.raises(ModelError, match="14 tokens and the corrupted one 15"):
        P.prepare(lm, P.NAMES_CLEAN, P.NAMES_CORRUPTED + " the", " Mary", " John")
    with pytest.raises(ModelError, match=r"is \d+ tokens"):
        P.prepare(lm, P.NAMES_CLEAN, P.NAMES_CORRUPTED, " Maryanne Smith", " John")
    with pytest.raises(ModelError, match="same token"):
        P.prepare(lm, P.NAMES_CLEAN, P.NAMES_CORRUPTED, " John", " John")
    with pytest.raises(ModelError, match="clean and a corrupted"):
        P.prepare(lm, " ", P.NAMES_CORRUPTED, " Mary", " John")
    same = P.prepare(lm, P.NAMES_CLEAN, P.NAMES_CLEAN, " Mary", " John")
    with pytest.raises(ModelError, match="nothing to restore"):
        P.patch_prompts(lm, same)


def test_ranges_in_words() -> None:
    assert P._ranges([3, 4, 5, 9]) == "3-5, 9"
    assert P._ranges([0]) == "0"
