"""SST-2 and the SMS Spam Collection, read from the shared offline copies."""

from __future__ import annotations

import io
import zipfile
from urllib.error import URLError

import pytest
import torch

from xaidash.data.errors import DatasetUnavailable
from xaidash.data.paths import data_root
from xaidash.data.registry import get_info, get_source, load_split
from xaidash.data.sets import text_archives


def test_infos():
    assert get_info("sst2").classes == ("negative", "positive")
    assert get_info("sms_spam").classes == ("ham", "spam")
    for name in ("sst2", "sms_spam"):
        info = get_info(name)
        assert info.modality == "text" and not info.builtin and info.source_url


def test_sst2(offline_data):
    assert get_source("sst2").is_available(offline_data)
    train, test = load_split("sst2", "train"), load_split("sst2", "test")
    assert (len(train), len(test)) == (67349, 872)
    assert train.labels.dtype == torch.int64 and set(train.labels.tolist()) == {0, 1}
    assert torch.bincount(test.labels).tolist() == [428, 444]
    assert train.texts[0] == "hide new secretions from the parental units"
    assert train.labels[0] == 0 and all(isinstance(t, str) and t for t in train.texts[:1000])
    assert train.rationales is None


def test_sms_spam(offline_data):
    assert get_source("sms_spam").is_available(offline_data)
    train, test = load_split("sms_spam", "train"), load_split("sms_spam", "test")
    assert len(train) + len(test) == 5574
    assert len(test) == 1115
    counts = torch.bincount(train.labels, minlength=2) + torch.bincount(test.labels, minlength=2)
    assert counts.tolist() == [4827, 747]
    assert abs(test.labels.float().mean().item() - 747 / 5574) < 0.005  # stratified
    # A partition of the file: every message lands in exactly one split (the raw file repeats some texts).
    from collections import Counter

    lines = (offline_data / "smsspamcollection" / "SMSSpamCollection").read_text(encoding="utf-8").splitlines()
    assert Counter(train.texts) + Counter(test.texts) == Counter(line.split("\t", 1)[1].strip() for line in lines)
    again = load_split("sms_spam", "test")
    assert again.texts == test.texts and torch.equal(again.labels, test.labels)
    assert any("\u00a3" in t for t in train.texts + test.texts)  # the pound sign survives decoding


@pytest.mark.parametrize("name, folder", [("sst2", "SST-2"), ("sms_spam", "smsspamcollection")])
def test_missing_offline(name, folder):
    assert not get_source(name).is_available(data_root())
    with pytest.raises(DatasetUnavailable) as err:
        load_split(name, "train")
    assert str(data_root() / folder) in str(err.value)
    assert "https://" in str(err.value) and "OFFLINE" in str(err.value)


def test_download_false(monkeypatch):
    monkeypatch.delenv("XAIDASH_OFFLINE")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(DatasetUnavailable, match="download=False"):
        load_split("sst2", "test", download=False)


class _FakeResponse(io.BytesIO):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _zip(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, body in files.items():
            archive.writestr(name, body)
    return buffer.getvalue()


def test_download_unpacks_the_official_layouts(tmp_path, monkeypatch):
    """Online, a missing archive is fetched once and unpacked where the readers look (no real network)."""
    monkeypatch.delenv("XAIDASH_OFFLINE")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    archives = {
        text_archives.SST2_URL: _zip(
            {
                "SST-2/train.tsv": "sentence\tlabel\ngreat fun \t1\ndull \t0\n",
                "SST-2/dev.tsv": 'sentence\tlabel\n"quoted" stuff \t1\n',
            }
        ),
        text_archives.SMS_URL: _zip(
            {
                "SMSSpamCollection": "".join(f"{'spam' if i % 4 == 0 else 'ham'}\tmessage {i}\n" for i in range(20)),
                "readme": "about",
            }
        ),
    }
    fetched: list[str] = []

    def fake_urlopen(url: str, timeout: float):
        assert timeout == text_archives.DOWNLOAD_TIMEOUT_S
        fetched.append(url)
        return _FakeResponse(archives[url])

    monkeypatch.setattr(text_archives, "urlopen", fake_urlopen)
    test = load_split("sst2", "test", root=tmp_path)
    assert test.texts == ['"quoted" stuff'] and test.labels.tolist() == [1]
    assert load_split("sst2", "train", root=tmp_path).texts == ["great fun", "dull"]
    sms = load_split("sms_spam", "test", root=tmp_path)
    assert len(sms) == 4 and sms.labels.tolist().count(1) == 1
    assert (tmp_path / "smsspamcollection" / "readme").is_file()
    assert fetched == [text_archives.SST2_URL, text_archives.SMS_URL]  # each archive once


def test_failed_download_is_unavailable(tmp_path, monkeypatch):
    monkeypatch.delenv("XAIDASH_OFFLINE")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)

    def no_network(url: str, timeout: float):
        raise URLError("no route to host")

    monkeypatch.setattr(text_archives, "urlopen", no_network)
    with pytest.raises(DatasetUnavailable, match=r"download failed.*no route to host"):
        load_split("sms_spam", "train", root=tmp_path)
    monkeypatch.setattr(text_archives, "urlopen", lambda url, timeout: _FakeResponse(_zip({"other.txt": "x"})))
    with pytest.raises(DatasetUnavailable, match="did not hold"):
        load_split("sms_spam", "train", root=tmp_path)
