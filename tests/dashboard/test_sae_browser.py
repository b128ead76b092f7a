"""The feature browser on a tiny page script over the session's tiny SAE: the address chooses the feature and
follows the picker, search by text lists features with links, a bad SAE id is one message."""

from __future__ import annotations

import shutil

import pytest
import torch
from streamlit.testing.v1 import AppTest
from tiny_sae import tiny_sae

from xaidash.explainers.language import sae_features as sf
from xaidash.models.language.sae.store import sae_folder

PAGE = """
import os
from pathlib import Path
from xaidash.dashboard.components.sae_browser import browse_features
from xaidash.models.runs.store import Run
browse_features(Run(Path(os.environ["SB_RUN"])), os.environ["SB_SAE"])
"""


@pytest.fixture(scope="module")
def sae(tmp_path_factory):
    """The tiny SAE copied under a copy of its run (the browser writes the feature index there)."""
    run, sae_id = tiny_sae(tmp_path_factory)
    root = tmp_path_factory.mktemp("browser") / run.id
    shutil.copytree(run.path, root, ignore=shutil.ignore_patterns("saes"))
    shutil.copytree(sae_folder(run, sae_id), sae_folder(root, sae_id))
    return root, sae_id


def page(monkeypatch, root, sae_id, **params: str) -> AppTest:
    monkeypatch.setenv("SB_RUN", str(root))
    monkeypatch.setenv("SB_SAE", sae_id)
    at = AppTest.from_string(PAGE, default_timeout=180)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_address_opens_a_feature_and_follows_the_picker(sae, monkeypatch):
    root, sae_id = sae
    index = sf.feature_index(root, sae_id)
    live = torch.nonzero(index.density > 0).flatten().tolist()
    at = page(monkeypatch, root, sae_id, sae=sae_id, feature=str(live[1]))
    assert at.number_input[0].value == live[1]
    assert at.subheader[0].value == f"Feature {live[1]}"
    assert at.metric[0].value == f"{float(index.density[live[1]]):.3%}"
    assert any("Top activating contexts" in m.value for m in at.markdown)
    at.number_input[0].set_value(live[2]).run()
    assert not at.exception
    assert at.query_params["feature"] == str(live[2]) and at.query_params["sae"] == sae_id
    assert at.subheader[0].value == f"Feature {live[2]}"


def test_search_lists_features_with_links(sae, monkeypatch):
    root, sae_id = sae
    at = page(monkeypatch, root, sae_id)
    at.text_input[0].input("a wonderful film").run()
    assert not at.exception
    table = at.dataframe[0].value
    assert len(table) > 0
    assert all(link.startswith(f"features?run={root.name}&sae={sae_id}&feature=") for link in table["open"])
    assert (table["largest activation"].diff().dropna() <= 0).all()


def test_an_unknown_sae_is_one_message(sae, monkeypatch):
    root, _ = sae
    at = page(monkeypatch, root, "no-such-sae")
    assert len(at.error) == 1 and "no SAE 'no-such-sae'" in at.error[0].value
