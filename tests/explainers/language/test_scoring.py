"""The batched scorer of perturbed prompts (explainers/language/scoring.py): the cached-prefix passes give the same
log-probabilities as one plain pass per row, a contrast is the difference of two targets' scores, out-of-memory
halves the batch, identical rows run once, and hidden features take the baseline token while the template stays."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from tiny_lm import tiny_lm

from xaidash.explainers.language.query import PromptQuery, make_query
from xaidash.explainers.language.scoring import explained, masked_rows, passes, score_rows
from xaidash.explainers.params import ExplainError
from xaidash.models.language.generate import generate
from xaidash.models.language.model import LanguageModel
from xaidash.models.language.prompt import build_prompt

TEXT = "what is the capital of france ? it is a city in a country"


class Counting(torch.nn.Module):
    """The model, recording each pass's (rows, positions run, cached positions); raises out-of-memory for passes
    of more than `limit` rows."""

    def __init__(self, model: torch.nn.Module, limit: int | None = None) -> None:
        super().__init__()
        self.inner, self.limit = model, limit
        self.config = model.config
        self.calls: list[tuple[int, int, int]] = []

    def forward(self, input_ids: torch.Tensor, cache=None, **kwargs):
        if self.limit is not None and input_ids.shape[0] > self.limit:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        cached = 0 if cache is None else cache.get_seq_length()
        self.calls.append((input_ids.shape[0], input_ids.shape[1], cached))
        return self.inner(input_ids=input_ids, cache=cache, **kwargs)


def task_for(kind: str, steps: int = 4, **kw) -> tuple[LanguageModel, PromptQuery]:
    lm = tiny_lm(kind, seed=1)
    prompt = build_prompt(lm, TEXT)
    answer = generate(lm, prompt, max_new_tokens=steps)
    return lm, make_query(lm, prompt, answer.ids, **kw)


def plain_scores(lm: LanguageModel, task: PromptQuery, rows: torch.Tensor) -> torch.Tensor:
    """One uncached pass per row over [row ; target[:-1]]: the definition the scorer must meet."""
    targets = torch.tensor(task.target_ids)
    out = []
    for row in rows:
        ids = torch.cat([row, targets[:-1]])[None]
        with torch.no_grad():
            logits = lm.model(input_ids=ids).logits[0, len(row) - 1 :].float()
        out.append(torch.log_softmax(logits, -1).gather(1, targets[:, None])[:, 0])
    return torch.stack(out)


def random_masks(task: PromptQuery, n: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    keep = torch.randint(0, 2, (n, task.n_features), generator=g)
    ablate = torch.ones(task.n_features, task.n_features, dtype=torch.long).fill_diagonal_(0)
    return torch.cat([torch.ones(1, task.n_features, dtype=torch.long), ablate, keep])


def with_model(lm: LanguageModel, model: torch.nn.Module) -> LanguageModel:
    return dataclasses.replace(lm, model=model)


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_cached_prefix_passes_equal_plain_passes(kind: str) -> None:
    lm, task = task_for(kind, batch_size=5)
    rows = masked_rows(lm, task, random_masks(task, 12))
    counting = Counting(lm.model)
    scores, batch = score_rows(with_model(lm, counting), task, rows)
    assert scores.shape == (len(rows), task.n_steps) and 1 <= batch <= 5
    torch.testing.assert_close(scores, plain_scores(lm, task, rows), atol=2e-5, rtol=1e-5)
    # the prompt's own pass (one row), then passes that start after a reused prefix of the prompt
    assert counting.calls[0] == (1, len(task.prompt), 0)
    assert any(cached > 0 for _, _, cached in counting.calls[1:])
    for _, run, cached in counting.calls[1:]:
        assert cached + run == len(task.prompt) + task.n_steps - 1  # positions continue after the prefix


def test_feature_ablation_rows_reuse_more_prefix_for_later_features() -> None:
    lm, task = task_for("llama", batch_size=64)
    n = task.n_features
    rows = masked_rows(lm, task, torch.ones(n, n, dtype=torch.long).fill_diagonal_(0))
    counting = Counting(lm.model)
    score_rows(with_model(lm, counting), task, rows)
    run = sum(b * positions for b, positions, _ in counting.calls[1:])
    full = n * (len(task.prompt) + task.n_steps - 1)
    assert run < full  # the template before the first feature, at least, is never run again


def test_a_span_sums_its_steps_and_a_contrast_is_the_difference_of_two_targets() -> None:
    lm, base = task_for("llama", steps=4, span=(1, 3))
    rows = masked_rows(lm, base, random_masks(base, 6))
    scores, _ = score_rows(lm, base, rows)
    torch.testing.assert_close(explained(base, scores), scores[:, 1] + scores[:, 2])

    prompt = base.prompt
    contrast = next(t for t in range(lm.vocab_size) if t != base.target_ids[2])
    task = make_query(lm, prompt, base.target_ids, span=(2, 3), contrast=contrast)
    other = list(base.target_ids)
    other[2] = contrast
    against = make_query(lm, prompt, other, span=(2, 3))
    got, _ = score_rows(lm, task, rows)
    own, _ = score_rows(lm, make_query(lm, prompt, base.target_ids, span=(2, 3)), rows)
    theirs, _ = score_rows(lm, against, rows)
    torch.testing.assert_close(got[:, 2], own[:, 2] - theirs[:, 2])
    torch.testing.assert_close(got[:, :2], own[:, :2])  # the steps before it are read as they are
    torch.testing.assert_close(explained(task, got), own[:, 2] - theirs[:, 2])


def test_out_of_memory_halves_the_batch_and_gives_the_same_scores() -> None:
    lm, task = task_for("gpt2", batch_size=16)
    rows = masked_rows(lm, task, random_masks(task, 20))
    expected, _ = score_rows(lm, task, rows)
    limited = Counting(lm.model, limit=3)
    scores, batch = score_rows(with_model(lm, limited), task, rows)
    assert batch <= 3 and all(b <= 3 for b, _, _ in limited.calls)
    torch.testing.assert_close(scores, expected, atol=2e-5, rtol=1e-5)


def test_out_of_memory_at_one_row_is_an_explain_error() -> None:
    lm, task = task_for("llama")

    class Never(Counting):
        def forward(self, input_ids: torch.Tensor, cache=None, **kwargs):
            if self.calls:  # every pass after the prompt's own, whatever its size
                raise torch.OutOfMemoryError("CUDA out of memory.")
            return super().forward(input_ids, cache=cache, **kwargs)

    rows = masked_rows(lm, task, random_masks(task, 2))
    with pytest.raises(ExplainError, match=r"Out of memory .* one row at a time"):
        score_rows(with_model(lm, Never(lm.model)), task, rows)


def test_identical_rows_are_scored_once() -> None:
    lm, task = task_for("llama")
    masks = random_masks(task, 3)
    rows = masked_rows(lm, task, torch.cat([masks, masks, masks]))
    counting = Counting(lm.model)
    scores, _ = score_rows(with_model(lm, counting), task, rows)
    assert sum(b for b, _, _ in counting.calls[1:]) == len(torch.unique(rows, dim=0))
    n = len(masks)
    torch.testing.assert_close(scores[:n], scores[n : 2 * n])
    torch.testing.assert_close(scores[:n], scores[2 * n :])


def test_hidden_features_take_the_baseline_token_and_the_template_stays() -> None:
    lm, task = task_for("llama", baseline_id=0)
    prompt = torch.tensor(task.prompt.ids)
    grouped = dataclasses.replace(task, features=(task.features[0] + task.features[1], *task.features[2:]))
    keep = torch.ones(2, grouped.n_features, dtype=torch.long)
    keep[1, 0] = 0
    rows = masked_rows(lm, grouped, keep)
    assert torch.equal(rows[0], prompt)
    hidden = (rows[1] != prompt).nonzero()[:, 0].tolist()
    assert hidden == list(grouped.features[0]) and set(rows[1, hidden].tolist()) == {0}
    template = [p for p in range(len(prompt)) if p not in set(task.prompt.features)]
    hidden_all = masked_rows(lm, task, torch.zeros(1, task.n_features))
    assert template and torch.equal(hidden_all[0, template], prompt[template])


def test_passes_cover_the_rows_in_order_within_the_batch() -> None:
    starts = [3, 3, 4, 10, 11, 12, 30, 31]
    for size, overhead in ((3, 0.0), (3, 25.0), (8, 1e9), (1, 5.0)):
        chunks = passes(starts, size, 40, overhead)
        assert [a for a, _ in chunks] == [0] + [b for _, b in chunks[:-1]] and chunks[-1][1] == len(starts)
        assert all(0 < b - a <= size for a, b in chunks)
    assert len(passes(starts, 8, 40, 1e9)) == 1  # a pass costs more than any reuse saves: one pass
    assert passes(starts, 8, 40, 0.0) == [(0, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7), (7, 8)]


def test_rows_of_another_length_are_refused() -> None:
    lm, task = task_for("llama")
    with pytest.raises(ExplainError, match="Rows to score must be"):
        score_rows(lm, task, torch.zeros(2, len(task.prompt) + 1, dtype=torch.long))
    empty, batch = score_rows(lm, task, torch.zeros(0, len(task.prompt), dtype=torch.long))
    assert empty.shape == (0, task.n_steps) and batch == 0


def test_a_model_without_a_reusable_cache_runs_whole_rows() -> None:
    lm, task = task_for("gpt2")

    class NoCache(Counting):
        def forward(self, input_ids: torch.Tensor, cache=None, **kwargs):
            out = super().forward(input_ids, cache=cache, **kwargs)
            out.cache = None
            return out

    model = NoCache(lm.model)
    rows = masked_rows(lm, task, random_masks(task, 4))
    scores, _ = score_rows(with_model(lm, model), task, rows)
    assert all(cached == 0 for _, _, cached in model.calls)
    torch.testing.assert_close(scores, plain_scores(lm, task, rows), atol=2e-5, rtol=1e-5)
