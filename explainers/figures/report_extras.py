"""What an explain session computed beside the maps, as part of its report: an attack, a counterfactual, the
training samples behind a prediction (`ReportExtra`, one per input and kind). Built from the result objects by
explainers/session_extras.py; written into report.json (`extras`: the result's every field, through
`result_json`), the report's files (each figure as PNG, large arrays as .npy, under extras/input_NN_<kind>/) and
the HTML page (a section under the input's maps)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from xaidash.explainers.figures.html_parts import esc
from xaidash.explainers.figures.png import data_uri

FOLDER = "extras"


@dataclass
class ExtraFigure:
    """A picture of the result: its title, PNG bytes and a caption."""

    title: str
    png: bytes
    caption: str = ""


@dataclass
class ReportExtra:
    """One result for input `input`: `kind` (what produced it: attack, counterfactual, training_samples), the title
    and the lines the page shows, the result as plain JSON (`data`, array files in `files`), its figures, and a table
    (rows of column -> text) where the result is a list (the training samples)."""

    input: int
    kind: str
    title: str
    lines: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    figures: list[ExtraFigure] = field(default_factory=list)
    table: list[dict[str, str]] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)

    @property
    def folder(self) -> str:
        return folder_of(self.input, self.kind)

    def figure_file(self, j: int) -> str:
        return f"{self.folder}/figure_{j:02d}.png"

    def all_files(self) -> dict[str, bytes]:
        """The figures as PNGs and the result's array files, by their names among the report's files."""
        return {**{self.figure_file(j): f.png for j, f in enumerate(self.figures)}, **self.files}

    def to_json(self) -> dict[str, Any]:
        return {
            "input": self.input,
            "kind": self.kind,
            "title": self.title,
            "lines": list(self.lines),
            "result": self.data,
            "figures": [
                {"title": f.title, "caption": f.caption, "file": self.figure_file(j)}
                for j, f in enumerate(self.figures)
            ],
            "table": [dict(r) for r in self.table],
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any], files: Mapping[str, bytes]) -> ReportExtra:
        figures = [
            ExtraFigure(str(f["title"]), files[f["file"]], str(f.get("caption", "")))
            for f in d.get("figures") or []
            if f.get("file") in files
        ]
        folder = folder_of(int(d["input"]), str(d["kind"]))
        kept = {k: v for k, v in files.items() if k.startswith(f"{folder}/") and not k.endswith(".png")}
        return cls(
            int(d["input"]),
            str(d["kind"]),
            str(d["title"]),
            [str(x) for x in d.get("lines") or []],
            dict(d.get("result") or {}),
            figures,
            [{str(k): str(v) for k, v in r.items()} for r in d.get("table") or []],
            kept,
        )

    def html(self) -> str:
        """The section under the input's maps: title, lines, figures (each with its caption), the table."""
        lines = "".join(f"<p>{esc(t)}</p>" for t in self.lines)
        cards = "".join(
            f'<figure class="card" style="margin:0"><div class="title">{esc(f.title)}</div>'
            f'<img class="map" alt="{esc(f.title)}" src="{data_uri(f.png)}">'
            f'<div class="small muted">{esc(f.caption)}</div></figure>'
            for f in self.figures
        )
        table = ""
        if self.table:
            head = list(self.table[0])
            rows = "".join(
                "<tr>" + "".join(f"<td>{esc(r.get(c, ''))}</td>" for c in head) + "</tr>" for r in self.table
            )
            table = "<table><tr>" + "".join(f"<th>{esc(c)}</th>" for c in head) + f"</tr>{rows}</table>"
        maps = f'<div class="maps">{cards}</div>' if cards else ""
        return f'<div class="extra {esc(self.kind)}"><h3>{esc(self.title)}</h3>{lines}{maps}{table}</div>'


def folder_of(i: int, kind: str) -> str:
    """Where an input's result of this kind keeps its files among the report's files."""
    return f"{FOLDER}/input_{i:02d}_{kind}"


def extras_html(extras: list[ReportExtra]) -> str:
    """An input's extras, one block each under its maps (empty when there are none)."""
    return "".join(x.html() for x in extras)
