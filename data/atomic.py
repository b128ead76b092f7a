"""Atomic file writes for every layer: readers never see half a file, and a failed write leaves no
temporary file behind. Run folders, checkpoints, caches of projections and activations use these."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def atomic_write(path: Path, write: Callable[[Path], object]) -> None:
    """Call `write(tmp)` on a temporary path in the same folder, then rename it over `path` (what `write`
    returns is ignored: Path.write_bytes returns a count)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if (failed := _os_error(e, path)) is not None:
            raise failed from None
        raise


# How libraries written in Rust (safetensors) report a failed write: SafetensorError('Error while serializing: I/O error:
# No space left on device (os error 28)'). Raised as the OSError it is, every save's `except OSError` reports it
# ('the disk is full') instead of a traceback.
_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def _os_error(e: BaseException, path: Path) -> OSError | None:
    """The OSError behind a write failure that another library wrapped (None: not one, or already an OSError)."""
    if isinstance(e, OSError) or not isinstance(e, Exception):
        return None
    match = _OS_ERROR.search(str(e))
    if match is None:
        return None
    number = int(match.group(1))
    return OSError(number, os.strerror(number), str(path))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    atomic_write(path, lambda tmp: tmp.write_bytes(data))


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, json.dumps(obj, indent=2, default=str).encode())
