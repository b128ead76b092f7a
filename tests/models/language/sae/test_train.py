"""Training on the real SmolLM2: Stop leaves a resumable state, resuming ends at the planned step with the weights
an uninterrupted training reaches (same batches, same Adam moments); settings that cannot work are refused with
one line and leave nothing behind."""

from __future__ import annotations

import dataclasses
import threading

import pytest
import torch
from smollm2_run import smollm2_lm, smollm2_run

from xaidash.models.language.sae import store
from xaidash.models.language.sae.config import SaeConfig
from xaidash.models.language.sae.harvest import harvested_positions, special_ids
from xaidash.models.language.sae.train import SaeEvent, train_sae
from xaidash.models.registry import ModelError

SMALL = SaeConfig(
    layer=1, width=64, k=8, corpus="cues", tokens=2048, batch_tokens=128, heldout_tokens=256, lr=3e-3, context=32
)


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    return smollm2_lm(tmp_path_factory)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return smollm2_run(tmp_path_factory)


def _weights(run, sae_id):
    from safetensors.torch import load_file

    return load_file(str(store.sae_folder(run, sae_id) / store.WEIGHTS))


def test_stop_then_resume_reaches_the_uninterrupted_weights(run, lm):
    whole = train_sae(run, SMALL, lambda e: None, threading.Event(), lm=lm)
    assert whole.status == "finished" and whole.metrics is not None

    stop = threading.Event()
    events: list[SaeEvent] = []

    def on_event(e: SaeEvent) -> None:
        events.append(e)
        if e.phase == "train" and e.step == 5:
            stop.set()

    stopped = train_sae(run, SMALL, on_event, stop, lm=lm)
    assert stopped.status == "stopped" and stopped.metrics is None
    assert events[-1].phase == "stopped" and events[-1].step == 5
    assert store.has_state(stopped.folder)
    assert store.load_sae(run, stopped.id).width == 64  # the weights as they were at the stop are usable
    with pytest.raises(ModelError, match="only a stopped SAE can be resumed"):
        train_sae(run, None, lambda e: None, threading.Event(), resume=whole.id, lm=lm)

    resumed_events: list[SaeEvent] = []
    resumed = train_sae(run, None, resumed_events.append, threading.Event(), resume=stopped.id, lm=lm)
    assert resumed.status == "finished" and resumed.metrics is not None and not store.has_state(resumed.folder)
    steps = [e.step for e in resumed_events if e.phase == "train"]
    assert steps == list(range(6, SMALL.total_steps + 1))
    for name, tensor in _weights(run, whole.id).items():
        torch.testing.assert_close(_weights(run, resumed.id)[name], tensor, msg=name)
    lines = (resumed.folder / store.EVENTS).read_text().splitlines()
    assert len(lines) == SMALL.total_steps  # the curve has every step once


def test_each_architecture_trains_and_jumprelu_keeps_its_threshold(run, lm):
    for arch in ("jumprelu", "standard"):
        config = dataclasses.replace(SMALL, architecture=arch, k=None, tokens=512, sparsity=1e-3)
        record = train_sae(run, config, lambda e: None, threading.Event(), lm=lm)
        assert record.status == "finished"
        weights = _weights(run, record.id)
        assert ("threshold" in weights) == (arch == "jumprelu")
        assert weights["W_enc"].shape == (576, 64) and weights["W_dec"].shape == (64, 576)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"width": 0}, "Width 0"),
        ({"layer": 30}, "Layer 30 is out of range"),
        ({"layer": -1}, "Layer -1 is out of range"),
        ({"k": 65}, "k 65"),
        ({"site": "mlp_out"}, "Unknown site"),
        ({"architecture": "gated"}, "Unknown SAE architecture"),
        ({"tokens": 100}, "fewer than one batch"),
        ({"corpus": "no-such-corpus"}, "neither a file, a folder nor a text data set"),
        ({"heldout_tokens": 10_000_000}, "fewer than one batch"),
        ({"lr": 0.0}, "Learning rate"),
    ],
)
def test_settings_that_cannot_work_get_one_line_and_leave_nothing(run, lm, change, message, tmp_path):
    before = {r.id for r in store.list_saes(run)}
    with pytest.raises(ModelError, match=message) as e:
        train_sae(run, dataclasses.replace(SMALL, **change), lambda e: None, threading.Event(), lm=lm)
    assert "\n" not in str(e.value)
    assert {r.id for r in store.list_saes(run)} == before


def test_empty_and_tiny_text_files_are_refused(run, lm, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    folder = tmp_path / "none"
    folder.mkdir()
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("A short text. " * 20)
    cases = [(empty, "is empty"), (folder, "holds no text"), (tiny, "fewer than one batch")]
    for corpus, message in cases:
        with pytest.raises(ModelError, match=message):
            train_sae(run, dataclasses.replace(SMALL, corpus=str(corpus)), lambda e: None, threading.Event(), lm=lm)


def test_a_text_folder_is_a_corpus(lm, tmp_path):
    from xaidash.models.language.sae.corpus import contexts_of, corpus_texts

    (tmp_path / "a.txt").write_text("one two three")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.md").write_text("four five")
    (tmp_path / "c.bin").write_bytes(b"\x00\x01")
    assert corpus_texts(str(tmp_path)) == ["one two three", "four five"]
    ids = contexts_of(lm.tokenizer, ["one two three four five six seven"] * 4, 8)
    assert ids.shape[1] == 8 and bool((ids[:, 0] == lm.tokenizer.bos_token_id).all())
    stream = ids[:, 1:].reshape(-1).tolist()
    one = lm.tokenizer("one two three four five six seven", add_special_tokens=False)["input_ids"]
    assert stream[: len(one) + 1] == [*one, lm.tokenizer.eos_token_id]


def test_a_stop_while_harvesting_resumes_the_harvest_where_it_stopped(run, lm):
    stop = threading.Event()

    def on_event(e: SaeEvent) -> None:
        if e.phase == "harvest" and e.tokens_seen >= 1000:
            stop.set()

    stopped = train_sae(run, SMALL, on_event, stop, lm=lm)
    assert stopped.status == "stopped" and not store.has_state(stopped.folder)
    with pytest.raises(ModelError, match="no weights yet"):
        store.load_sae(run, stopped.id)
    first = sorted(p.name for p in (stopped.folder / store.ACTIVATIONS).iterdir())

    seen: list[SaeEvent] = []
    resumed = train_sae(run, None, seen.append, threading.Event(), resume=stopped.id, lm=lm)
    assert resumed.status == "finished"
    harvested = [e.tokens_seen for e in seen if e.phase == "harvest"]
    assert harvested and harvested[0] > 128  # it went on from the chunks already on disk
    assert set(first) <= {p.name for p in (resumed.folder / store.ACTIVATIONS).iterdir()}
    tokens, heldout = store.corpus_tokens(run, resumed.id)
    index = torch.cat([i for _, i in store.activation_chunks(run, resumed.id, "train")])
    usable = harvested_positions(tokens[~heldout], special_ids(lm.tokenizer))
    assert len(set(index.tolist())) == len(index) == int(usable.sum()) >= SMALL.tokens
