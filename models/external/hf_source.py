"""`hf:PATH_OR_ID`: a Hugging Face image or sequence classifier, from a folder or the hub.

The folder is what `save_pretrained` writes: config.json, the weights, and the image processor's
or tokenizer's files. An id (`google/vit-base-patch16-224`) is read from the local Hugging Face
cache, downloaded when the machine is online, and refused with a message when neither works.
Labels come from `id2label`, the input size and normalisation from the image processor, attention
weights from eager attention. The run folder keeps the config and the processor or tokenizer files
in `hf/`, so the model is rebuilt from the run folder alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xaidash.data.errors import plain_message
from xaidash.data.modalities import IMAGE, TEXT
from xaidash.data.paths import offline
from xaidash.models.external.hf_models import quiet_transformers, wrap_image, wrap_text
from xaidash.models.external.linking import image_probe, text_probe
from xaidash.models.external.options import ImportOptions
from xaidash.models.external.registry import ImportSource, Loaded, Rebuilt, register
from xaidash.models.registry import Modality, ModelError

HF_FOLDER = "hf"  # inside the run folder
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
MAX_TEXT_LENGTH = 512
_GENERIC_LABEL = re.compile(r"^(LABEL_)?\d+$")
_HUB_FILES = ["*.json", "*.safetensors", "*.txt", "*.model"]  # config, weights, processor and tokenizer files


def _looks_like_path(text: str) -> bool:
    return text.startswith(("/", ".", "~")) or "\\" in text or text.count("/") > 1


def resolve_folder(argument: str) -> Path:
    """The model folder: the path given, or the hub id's snapshot in the local cache (downloaded when online)."""
    path = Path(argument).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ModelError(
                f"hf:{argument} is a file; give the folder save_pretrained wrote (config.json and weights)."
            )
        return path
    if _looks_like_path(argument):
        raise ModelError(f"hf:{argument}: no such folder.")
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    cached_only = offline()
    try:
        folder = Path(snapshot_download(argument, local_files_only=cached_only, allow_patterns=_HUB_FILES))
        # Older repositories hold pytorch_model.bin only (transformers reads it with weights_only=True).
        if not any((folder / f).is_file() for f in WEIGHT_FILES):
            folder = Path(
                snapshot_download(
                    argument, local_files_only=cached_only, allow_patterns=[*_HUB_FILES, "pytorch_model*"]
                )
            )
        return folder
    except HFValidationError:
        raise ModelError(f"hf:{argument}: no such folder, and not a valid Hugging Face model id.") from None
    except LocalEntryNotFoundError:
        if cached_only:
            raise ModelError(
                f"hf:{argument}: no such folder, and the model id is not in the local Hugging Face cache while "
                "downloads are off (XAIDASH_OFFLINE / HF_HUB_OFFLINE). Download it on a machine with network "
                f"(hf download {argument}) and copy the cache, or give the folder save_pretrained wrote."
            ) from None
        raise ModelError(f"hf:{argument}: could not download it (no network?) and it is not cached.") from None
    except Exception as e:  # noqa: BLE001 - the hub's many errors (unknown repo, gated, network) read the same here
        raise ModelError(f"hf:{argument}: no such folder, and the hub refused the id: {plain_message(e)}") from None


def _class_names(config: Any) -> tuple[str, ...] | None:
    """id2label's names, or None when they are transformers' placeholders (LABEL_0, ...)."""
    id2label = {int(k): str(v) for k, v in (getattr(config, "id2label", None) or {}).items()}
    names = tuple(id2label.get(i, "") for i in range(int(config.num_labels)))
    if not all(names) or all(_GENERIC_LABEL.match(n) for n in names) or len(set(names)) != len(names):
        return None
    return names


def _size(value: Any) -> tuple[int, int] | None:
    if isinstance(value, int):
        return value, value
    if isinstance(value, dict):
        h = value.get("height") or value.get("shortest_edge")
        w = value.get("width") or value.get("shortest_edge")
        if h and w:
            return int(h), int(w)
    return None


def _image_input(
    folder: Path, config: Any, notes: list[str]
) -> tuple[tuple[int, ...], tuple[float, ...], tuple[float, ...], Any]:
    """(input shape, mean, std, processor) from the image processor; the config's image_size without one."""
    from transformers import AutoImageProcessor

    channels = int(getattr(config, "num_channels", 3) or 3)
    try:
        processor = AutoImageProcessor.from_pretrained(str(folder))
    except (OSError, ValueError):
        processor = None
    if processor is None:
        size = getattr(config, "image_size", None)
        notes.append("no image processor (preprocessor_config.json) in the folder: inputs are not normalised")
        hw = (int(size), int(size)) if isinstance(size, int) else None
        return ((channels, *hw) if hw else ()), (), (), None
    d = processor.to_dict()
    hw = _size(d.get("crop_size")) if d.get("do_center_crop") and d.get("crop_size") else None
    hw = hw or _size(d.get("size"))
    if hw is None and isinstance(getattr(config, "image_size", None), int):
        hw = (config.image_size, config.image_size)
    mean: tuple[float, ...] = ()
    std: tuple[float, ...] = ()
    if d.get("do_normalize", True) and d.get("image_mean") is not None:
        mean = tuple(float(v) for v in d["image_mean"])
        std = tuple(float(v) for v in d["image_std"])
    return ((channels, *hw) if hw else ()), mean, std, processor


def _check_loading(info: dict[str, Any], folder: Path) -> None:
    missing, unexpected = sorted(info.get("missing_keys") or []), sorted(info.get("unexpected_keys") or [])
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing from the checkpoint: {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
        if unexpected:
            parts.append(f"not in the model: {', '.join(unexpected[:5])}{' ...' if len(unexpected) > 5 else ''}")
        raise ModelError(
            f"The weights in {folder} do not fit its config ({'; '.join(parts)}). A base checkpoint without a "
            "trained classification head cannot be explained: fine-tune it first, then save_pretrained."
        )


def _from_pretrained(auto: Any, folder: Path) -> Any:
    try:
        model, info = auto.from_pretrained(
            str(folder), attn_implementation="eager", output_loading_info=True, local_files_only=True
        )
    except (OSError, ValueError, RuntimeError) as e:
        raise ModelError(f"transformers could not load {folder}: {str(e).splitlines()[0]}") from None
    _check_loading(info, folder)
    return model.float().eval()


def _tokenizer(folder: Path, config: Any) -> Any:
    from transformers import AutoTokenizer

    from xaidash.models.zoo.minilm import HFTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(folder))
    except (OSError, ValueError, TypeError) as e:
        raise ModelError(
            f"{folder} has no usable tokenizer ({str(e).splitlines()[0]}): save it beside the model with "
            "tokenizer.save_pretrained(folder)."
        ) from None
    if not getattr(tok, "is_fast", False):
        raise ModelError(
            f"The tokenizer in {folder} is a slow (Python) tokenizer; xaidash needs a fast one (tokenizer.json)."
        )
    if tok.pad_token_id is None:
        raise ModelError(f"The tokenizer in {folder} has no padding token; set tokenizer.pad_token and save it again.")
    limits = [MAX_TEXT_LENGTH, int(getattr(tok, "model_max_length", MAX_TEXT_LENGTH) or MAX_TEXT_LENGTH)]
    positions = getattr(config, "max_position_embeddings", None)
    if isinstance(positions, int) and positions > 0:
        limits.append(positions)
    return HFTokenizer(tok, max_length=min(limits))


@dataclass(frozen=True)
class _Found:
    """What the import of any task reads: the folder, its config, what the user gave and the run's name, record and
    notes so far."""

    folder: Path
    config: Any
    argument: str
    options: ImportOptions
    name: str
    record: dict[str, Any]
    notes: list[str]


def _load_image(found: _Found, hf: Any) -> Loaded:
    folder, config = found.folder, found.config
    shape, mean, std, processor = _image_input(folder, config, found.notes)
    shape = found.options.input_shape or shape
    if not shape:
        raise ModelError(f"{folder} says nothing about the input size: give --input-shape, e.g. 3x224x224.")
    model = wrap_image(hf, image_probe(shape))
    files = [lambda run: hf.config.save_pretrained(str(run / HF_FOLDER))]
    if processor is not None:
        files.append(lambda run: processor.save_pretrained(str(run / HF_FOLDER)))
    return Loaded(
        model=model,
        modality=IMAGE.id,
        name=found.name,
        num_classes=int(config.num_labels),
        record=found.record,
        classes=_class_names(config),
        input_shape=tuple(shape),
        mean=found.options.mean or mean,
        std=found.options.std or std,
        files=files,
        notes=found.notes,
        description=f"Hugging Face {type(hf).__name__} ({config.model_type}), imported from {found.argument}.",
    )


def _load_text(found: _Found, hf: Any) -> Loaded:
    config = found.config
    tokenizer = _tokenizer(found.folder, config)
    model = wrap_text(hf, tokenizer.pad_id, text_probe(tokenizer))
    found.record["max_length"] = tokenizer.max_length
    hf_tokenizer = tokenizer._tok
    return Loaded(
        model=model,
        modality=TEXT.id,
        name=found.name,
        num_classes=int(config.num_labels),
        record=found.record,
        classes=_class_names(config),
        tokenizer=tokenizer,
        files=[
            lambda run: hf.config.save_pretrained(str(run / HF_FOLDER)),
            lambda run: hf_tokenizer.save_pretrained(str(run / HF_FOLDER)),
        ],
        notes=found.notes,
        description=f"Hugging Face {type(hf).__name__} ({config.model_type}), imported from {found.argument}; "
        f"its own tokenizer, at most {tokenizer.max_length} tokens.",
    )


def _rebuild_image(hf: Any, config: Any, folder: Path, record: dict[str, Any]) -> Rebuilt:
    from xaidash.models.external.hf_models import HFImageClassifier, HFImageClassifierWithAttention

    cls = HFImageClassifierWithAttention if record.get("attention") else HFImageClassifier
    return Rebuilt(cls(hf))


def _rebuild_text(hf: Any, config: Any, folder: Path, record: dict[str, Any]) -> Rebuilt:
    from xaidash.models.external.hf_models import HFTextClassifier, HFTextClassifierWithAttention

    tokenizer = _tokenizer(folder, config)
    tokenizer.max_length = int(record.get("max_length", tokenizer.max_length))
    text_cls = HFTextClassifierWithAttention if record.get("attention") else HFTextClassifier
    return Rebuilt(text_cls(hf, tokenizer.pad_id), tokenizer=tokenizer)


@dataclass(frozen=True)
class HFTask:
    """One kind of Hugging Face classifier xaidash imports: the modality it reads (what the run's record keeps as
    its `task`), the architectures that name it (`...ForImageClassification`, or a model type in transformers'
    mapping for the task), its Auto class, and how its model is wrapped on import and on rebuild."""

    modality: Modality
    suffix: str
    mapping: str  # transformers.models.auto.modeling_auto's model types of the task
    auto: str  # the transformers Auto class that builds it
    load: Callable[[_Found, Any], Loaded]  # (what was found, the transformers model)
    rebuild: Callable[[Any, Any, Path, dict[str, Any]], Rebuilt]  # (model, config, folder, record)

    def auto_class(self) -> Any:
        import transformers

        return getattr(transformers, self.auto)


TASKS = (
    HFTask(
        "image",
        "ForImageClassification",
        "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
        "AutoModelForImageClassification",
        _load_image,
        _rebuild_image,
    ),
    HFTask(
        "text",
        "ForSequenceClassification",
        "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
        "AutoModelForSequenceClassification",
        _load_text,
        _rebuild_text,
    ),
)
_BY_RECORD = {task.modality: task for task in TASKS}  # a run's record names its task by the modality it reads


def _task(config: Any, folder: Path) -> HFTask:
    """The task of the config's architecture (or, without one, its model type), or a message saying what is
    supported."""
    from transformers.models.auto import modeling_auto

    archs = list(getattr(config, "architectures", None) or [])
    for task in TASKS:
        if any(a.endswith(task.suffix) for a in archs):
            return task
    for task in TASKS:
        if not archs and config.model_type in getattr(modeling_auto, task.mapping):
            return task
    raise ModelError(
        f"{folder} holds a {', '.join(archs) or config.model_type} model: xaidash imports image classifiers "
        "(...ForImageClassification) and text classifiers (...ForSequenceClassification)."
    )


def load(argument: str, options: ImportOptions) -> Loaded:
    from transformers import AutoConfig

    folder = resolve_folder(argument)
    if not (folder / "config.json").is_file():
        raise ModelError(f"{folder} has no config.json: give the folder save_pretrained wrote.")
    if not any((folder / f).is_file() for f in WEIGHT_FILES):
        raise ModelError(
            f"{folder} has a config.json but no weights ({' or '.join(WEIGHT_FILES[::2])}): save the model with "
            "model.save_pretrained(folder)."
        )
    with quiet_transformers():
        try:
            config = AutoConfig.from_pretrained(str(folder))
        except (OSError, ValueError) as e:
            raise ModelError(f"{folder}/config.json cannot be read by transformers: {str(e).splitlines()[0]}") from None
        task = _task(config, folder)
        from_hub = not Path(argument).expanduser().exists()  # a hub id: its snapshot folder is named by a hash
        name = options.name or f"hf:{argument if from_hub else folder.resolve().name}"
        record: dict[str, Any] = {
            "task": task.modality,
            "folder": HF_FOLDER,
            "given": argument,
            "read_from": str(folder),
        }
        hf = _from_pretrained(task.auto_class(), folder)
        return task.load(_Found(folder, config, argument, options, name, record, []), hf)


def rebuild(record: dict[str, Any], run_dir: Path) -> Rebuilt:
    """The architecture from the run's hf/ folder (config, processor or tokenizer); weights come after."""
    from transformers import AutoConfig

    folder = run_dir / record.get("folder", HF_FOLDER)
    with quiet_transformers():
        try:
            config = AutoConfig.from_pretrained(str(folder))
        except (OSError, ValueError) as e:
            raise ModelError(f"{folder} cannot be read ({str(e).splitlines()[0]}); import the model again.") from None
        task = _BY_RECORD[record["task"]]
        hf = task.auto_class().from_config(config, attn_implementation="eager").float().eval()
        return task.rebuild(hf, config, folder, record)


register(
    ImportSource(
        prefix="hf",
        label="Hugging Face folder or id",
        argument="PATH_OR_ID",
        help="a folder written by save_pretrained (config.json, weights, image processor or tokenizer), or a hub id "
        "(from the local cache, downloaded when online): image classifiers (ViT, DeiT, ConvNeXt, ResNet, Swin, ...) "
        "and sequence classifiers (BERT, DistilBERT, RoBERTa, MiniLM, ...)",
        load=load,
        rebuild=rebuild,
    )
)
