"""The one JSON form of a command's result (`xaidash influence/concepts/attack/counterfactual/generate --out DIR`)
and of the results an Explain report carries beside its maps (explainers/figures/report_extras.py).

A result object is serialised generically (`result_json`): every field of a dataclass, its properties that give a
plain value (a verdict, a mean), then what its own `to_json()` says (names beside class indices), so a field a
result gains later appears without this module changing. An array of more than `INLINE` values (an image, a
perturbation) goes to its own `.npy` file and the JSON names the file, its shape and dtype.

A command's document (`result_document`) puts the result under one envelope: `schema` and `schema_version`, the
command, and `request` (the run, the inputs and every parameter the command was given). `write_result` writes it with
its array files through the writers `xaidash explain --out` uses (`report_files.json_text`, `write_files`);
`check_out_folder` says a bad --out (a file, under a file, not writable) in one line before any work."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from xaidash.explainers.figures import report_files
from xaidash.explainers.figures.jsonable import jsonable
from xaidash.explainers.params import ExplainError

SCHEMA_VERSION = 1
INLINE = 1024  # values of an array kept in the JSON itself; a larger one is written to arrays/<where>.npy
ARRAYS = "arrays"
PLAIN = (bool, int, float, str, type(None), np.bool_, np.integer, np.floating)
LEFT_OUT = ("func",)  # argparse's own entries: not parameters


def _npy(values: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, values, allow_pickle=False)
    return buf.getvalue()


def _where(path: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", path.strip(".")) or "value"


class _Serialiser:
    """Walks a result, collecting the array files as it goes (name -> .npy bytes)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.files: dict[str, bytes] = {}

    def value(self, v: Any, path: str) -> Any:
        if hasattr(v, "detach") and hasattr(v, "numpy"):  # a torch tensor, without importing torch
            v = v.detach().cpu().numpy()
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return self.fields(v, path)
        if isinstance(v, Mapping):
            return {str(k): self.value(x, f"{path}.{k}") for k, x in v.items()}
        if isinstance(v, np.ndarray):
            if v.size <= INLINE or v.dtype == object:
                return jsonable(v)
            name = f"{self.prefix}{ARRAYS}/{_where(path)}.npy"
            self.files[name] = _npy(v)
            return {"file": name, "shape": list(v.shape), "dtype": str(v.dtype)}
        if isinstance(v, (list, tuple)):
            return [self.value(x, f"{path}.{i}") for i, x in enumerate(v)]
        return jsonable(v)

    def fields(self, obj: Any, path: str) -> dict[str, Any]:
        out = {f.name: self.value(getattr(obj, f.name), f"{path}.{f.name}") for f in dataclasses.fields(obj)}
        for name, attr in inspect.getmembers(type(obj), lambda a: isinstance(a, property)):
            if name.startswith("_") or name in out:
                continue
            try:
                got = attr.fget(obj)
            except Exception:  # noqa: BLE001 - a property that cannot be read for this result is left out
                continue
            if isinstance(got, PLAIN):
                out[name] = jsonable(got)
        own = getattr(obj, "to_json", None)
        if callable(own) and _takes_no_arguments(own):
            said = own()
            if isinstance(said, Mapping):
                out = _merge(out, {str(k): self.value(v, f"{path}.{k}") for k, v in said.items()})
        return out


def _merge(found: Any, said: Any) -> Any:
    """What the walk found, refined by what a result's `to_json` says: mappings key by key and lists of the same
    length item by item (so a field found on a nested result survives its parent's hand-written dict); else `said`."""
    if isinstance(found, dict) and isinstance(said, dict):
        return {**found, **{k: _merge(found[k], v) if k in found else v for k, v in said.items()}}
    if isinstance(found, list) and isinstance(said, list) and len(found) == len(said):
        return [_merge(a, b) for a, b in zip(found, said, strict=True)]
    return said


def _takes_no_arguments(method: Any) -> bool:
    try:
        params = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return False
    return all(p.default is not inspect.Parameter.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params)


def result_json(result: Any, prefix: str = "") -> tuple[Any, dict[str, bytes]]:
    """(the result as plain JSON values, its array files: name -> .npy bytes, each name starting with `prefix`)."""
    walker = _Serialiser(prefix)
    return walker.value(result, "result"), walker.files


def parameters_of(args: argparse.Namespace, *, leave_out: tuple[str, ...] = ()) -> dict[str, Any]:
    """Every option a command was given (defaults included), by its argparse name, as plain JSON values."""
    return {k: jsonable(v) for k, v in sorted(vars(args).items()) if k not in (*LEFT_OUT, *leave_out)}


def result_document(
    command: str,
    result: Any,
    *,
    run: str | None,
    inputs: Mapping[str, Any],
    parameters: Mapping[str, Any],
    extra: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, bytes]]:
    """(the document, its array files). The result's fields sit at the top level beside the envelope (`schema`,
    `schema_version`, `command`, `request`: the run, the inputs and the parameters); `extra` adds facts the result
    itself does not hold (class names, other results), walked the same way. A result field named like an envelope key is refused (a programming error)."""
    walker = _Serialiser("")
    body = walker.value(result, "result")
    body = body if isinstance(body, dict) else {"result": body}
    more = walker.value(dict(extra or {}), "extra")
    envelope = {
        "schema": f"xaidash.{command}",
        "schema_version": SCHEMA_VERSION,
        "command": f"xaidash {command}",
        "request": {"run": run, "inputs": jsonable(dict(inputs)), "parameters": jsonable(dict(parameters))},
    }
    clash = set(envelope) & (set(body) | set(more))
    if clash:
        raise ValueError(f"the result's fields {sorted(clash)} collide with the document's envelope")
    return {**envelope, **body, **more}, walker.files


def check_out_folder(out: Path) -> None:
    """ExplainError when --out cannot become a folder we write into: it is a file, lies under a file, or its
    nearest existing folder is not writable. Creates nothing (a refusal later leaves no folder behind)."""
    if out.exists() and not out.is_dir():
        raise ExplainError(f"--out {out} is a file: give a folder (it is created when missing).")
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ExplainError(f"--out {out}: {existing} is a file, so no folder can be made under it.")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ExplainError(f"--out {out}: the folder {existing} is not writable; give a folder you can write to.")


def check_result_folder(out: Path, name: str) -> None:
    """`check_out_folder`, and a path that names a JSON file rather than a folder is refused with where the JSON
    goes (--out takes a folder: `name` is written into it)."""
    if out.suffix.lower() == ".json" and not out.is_dir():
        raise ExplainError(f"--out {out}: give a folder, not a .json file; {name} is written into it.")
    check_out_folder(out)


def make_out_folder(out: Path) -> None:
    """Create --out; ExplainError with the system's reason when that fails (/proc, a read-only disk)."""
    check_out_folder(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ExplainError(f"--out {out}: cannot create the folder ({err.strerror or err}).") from None


def write_result(
    out: Path, name: str, document: Mapping[str, Any], files: Mapping[str, bytes] | None = None
) -> list[Path]:
    """`document` as `out/name` (report.json's text: indented, UTF-8, no NaN) with its array files beside it, each
    written atomically; the paths written. ExplainError with the system's reason when the folder cannot be written."""
    make_out_folder(out)
    everything = {name: report_files.json_text(document).encode("utf-8"), **(files or {})}
    try:
        return report_files.write_files(everything, out)
    except OSError as err:
        raise ExplainError(f"Cannot write into {out}: {err.strerror or err}.") from None
