"""The writers of a report: its JSON as text, a text map as its own page, the raw attributions as .npy, and a report's
files (name -> bytes, `ExplainReport.files()`) written to a folder, read back from one, or packed in one zip.

Reproducible by construction: the same report gives the same bytes in the CLI's folder, the dashboard's zip and the
stored view (fixed zip timestamps and permissions; PNGs from `png.png_bytes`)."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from xaidash.data.atomic import atomic_write_bytes
from xaidash.explainers.figures.html_parts import esc
from xaidash.explainers.figures.map_figure import MapFigure

REPORT_JSON = "report.json"
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # fixed, so the same report zips to the same bytes


def json_text(data: Mapping[str, Any]) -> str:
    """A report's plain-JSON dict as report.json's text: indented, UTF-8 kept, no NaN."""
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False)


def npy_bytes(values: Any) -> bytes:
    """A map's values as float32 .npy bytes (the attributions an image map is drawn again from)."""
    buf = io.BytesIO()
    np.save(buf, np.asarray(values, dtype=np.float32))
    return buf.getvalue()


def text_map_page(fig: MapFigure, input_name: str) -> str:
    """A word strip as its own small page: the highlighted words, their colour bar and the caption."""
    title = esc(f"{fig.label} · {input_name}")
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{title}</title></head>'
        f'<body style="font-family:sans-serif;max-width:720px;margin:16px">'
        f"<h3>{title}</h3>{fig.tokens_html}{fig.colorbar_html()}"
        f'<p style="color:#555;font-size:13px">{esc(fig.caption.text())}</p></body></html>\n'
    )


def write_files(files: Mapping[str, bytes], path: str | Path) -> list[Path]:
    """Every file under `path` (created), each written atomically; the paths written."""
    root = Path(path)
    written = []
    for name, data in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(target, data)
        written.append(target)
    return written


def read_files(path: str | Path) -> dict[str, bytes]:
    """Every file under `path`, by its name relative to it ('maps/input_00_ig.png')."""
    root = Path(path)
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def zip_bytes(files: Mapping[str, bytes]) -> bytes:
    """The files as one zip (fixed timestamps: the same files give the same bytes)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, data)
    return buf.getvalue()
