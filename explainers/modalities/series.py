"""Time series, explained: a series typed as comma-separated values (';' between a multivariate series' channels) or
read from a CSV file of series (one per row), resampled to the model's length; maps with one value per time step (a
method's output over (C, T) summed over the channels, the per-channel maps kept), drawn as the series' lines over the
attribution band with its colour bar (and a channel x time heatmap), scored by hiding time steps (each channel's
training mean) and against the true window of a generated set.

A map's labels are one per step, '{step name} {t}: {channel}={value}; …' (the series' raw values): the figure JSON
carries the series with the map through them, so a report and the hover chart can draw it again."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import altair as alt
import numpy as np
import torch
from PIL import Image

from xaidash.data.errors import ExplainError
from xaidash.data.modalities.series import SERIES, SeriesModality
from xaidash.data.registry import DatasetInfo
from xaidash.explainers.figures.png import png_bytes
from xaidash.explainers.inspection.attention import TokenLayout, query_row
from xaidash.explainers.modalities.base import ADAPTERS, Drawing, Maps, TypingGuide, extend
from xaidash.explainers.modalities.row_maps import RowMaps
from xaidash.explainers.modalities.series_curves import series_perturbation_curve
from xaidash.explainers.modalities.series_draw import chart_inputs, draw_series, series_chart, with_bar
from xaidash.explainers.modalities.series_read import (
    csv_spec,
    file_series,
    series_problem,
    training_series,
    typed_series,
)
from xaidash.explainers.perturbation_curves import CurveResult, Mode
from xaidash.explainers.registry import MethodOutput
from xaidash.models.bundle import ModelBundle

LABEL_SEP = ": "  # a step's label: '{step name} {t}', LABEL_SEP, '{channel}={value}; …'


def step_labels(info: DatasetInfo, series: torch.Tensor) -> list[str]:
    """One label per step of a raw series (C, T): where it is and its value in every channel."""
    s = torch.as_tensor(series, dtype=torch.float32)
    names = list(info.channel_names) or [f"channel {c + 1}" for c in range(s.shape[0])]
    names += [f"channel {c + 1}" for c in range(len(names), s.shape[0])]
    # Python floats first: indexing a tensor per value cost 0.12 s for 100 series of 150 steps, the whole of
    # Occlusion's fixed cost on a GPU (issue 31).
    by_step = list(zip(*s.cpu().tolist(), strict=True))
    return [
        f"{info.step_name} {t}{LABEL_SEP}"
        + "; ".join(f"{name}={v:.6g}" for name, v in zip(names, values, strict=False))
        for t, values in enumerate(by_step)
    ]


def parse_labels(labels: Sequence[str] | None) -> tuple[np.ndarray, tuple[str, ...], str] | None:
    """(series (C, T), channel names, step name) from step labels; None when they are not a series' labels."""
    if not labels:
        return None
    try:
        rows: list[list[float]] = []
        names: tuple[str, ...] = ()
        for label in labels:
            _, sep, cells = label.partition(LABEL_SEP)
            pairs = [cell.rpartition("=") for cell in cells.split("; ")]
            if not sep or any(not p[1] for p in pairs):
                return None
            names = tuple(p[0] for p in pairs)
            rows.append([float(p[2]) for p in pairs])
        step_name = labels[0].partition(LABEL_SEP)[0].rpartition(" ")[0] or "step"
        return np.asarray(rows, np.float32).T, names, step_name
    except ValueError:
        return None


@dataclass(frozen=True)
class SeriesAdapter(RowMaps, SeriesModality):
    # ---- reading inputs ----------------------------------------------------------------------------------------
    def read_input(self, spec: str, bundle: ModelBundle, fit: str = "crop") -> tuple[Any, str]:
        """A CSV file of series (`series.csv` holding one, or `series.csv:ROW`, ROW counting data rows from 1), else
        comma-separated values ('; ' between channels); resampled to the model's length."""
        info, named = bundle.info, csv_spec(spec.strip())
        if named is None:
            read = typed_series(spec, info)
            return read.series, read.description
        path, number = named
        if number is None:
            every = file_series(path, info, None)
            if len(every) > 1:
                raise ExplainError(
                    f"{path.name} holds {len(every)} series: name one as {path.name}:ROW (1 to {len(every)})."
                )
            return every[0].series, every[0].description
        read = file_series(path, info, number)[0]
        return read.series, read.description

    def read_inputs(self, spec: str, bundle: ModelBundle) -> list[tuple[Any, str]]:
        """Every series of a CSV file (`series.csv`), or the one `read_input` reads."""
        named = csv_spec(spec.strip())
        if named is None or named[1] is not None:
            return [self.read_input(spec, bundle)]
        return [(r.series, r.description) for r in file_series(named[0], bundle.info, None)]

    def typing_guide(self, info: Any, example: Any) -> TypingGuide:
        channels, steps = info.input_shape
        series = self.as_batch(example)[0]
        names = ", ".join(info.channel_names) if channels > 1 and info.channel_names else ""
        return TypingGuide(
            caption=f"A series of {steps} {info.step_name}s"
            + (f", {channels} channels in order: {names}" if channels > 1 else "")
            + "; another length is resampled to it by linear interpolation",
            label="Series: one a line, values separated by commas" + (", channels by ';'" if channels > 1 else ""),
            help="numbers in each channel's own units; a series of another length is resampled to "
            f"{steps} {info.step_name}s",
            example="; ".join(", ".join(f"{float(v):.4g}" for v in row) for row in series),
            empty="Type a series: values separated by commas" + (", channels by ';'." if channels > 1 else "."),
            file_label="A .csv file of numbers, one series per row (an optional header row)",
            file_hint="Upload a UTF-8 .csv file holding one series per row."
            if channels == 1
            else f"A CSV file holds univariate series; {info.name} has {channels} channels: type them instead.",
        )

    def preview(self, info: Any, raws: Sequence[Any]) -> Any:
        """Series as a table: their length and, per channel, the values (drawn as a sparkline)."""
        import pandas as pd

        series = [self.as_batch(r)[0] for r in raws]
        names = list(info.channel_names) or [f"channel {c + 1}" for c in range(series[0].shape[0] if series else 0)]
        data: dict[str, Any] = {info.step_name + "s": [int(s.shape[1]) for s in series]}
        for c, name in enumerate(names):
            data[name] = [[float(v) for v in s[c]] for s in series]
        return pd.DataFrame(data)

    def sample_problem(self, raw: Any, bundle: ModelBundle, name: str) -> str | None:
        problem = series_problem(bundle.info, self.as_batch(raw))
        return None if problem is None else f"{name}: {problem}."

    def checked(self, bundle: ModelBundle, inputs: Any) -> torch.Tensor:
        try:
            series = self.as_batch(inputs).detach().float().cpu()
        except (TypeError, ValueError, RuntimeError):
            raise ExplainError(f"A series must be numbers: (channels, steps) of {bundle.info.name}.") from None
        problem = series_problem(bundle.info, series)
        if problem:
            raise ExplainError(f"Cannot explain these series: {problem}.")
        return series

    def background(self, bundle: ModelBundle, n: int, seed: int) -> torch.Tensor | None:
        series = training_series(bundle, n, seed)
        return None if series is None else bundle.prepare(series)

    # ---- maps --------------------------------------------------------------------------------------------------
    def to_maps(self, bundle: ModelBundle, raw: Any, out: MethodOutput) -> Maps:
        """(N, C, T) or (N, 1, T) over the prepared series -> (N, T) (channels summed), with (N, C, T) kept for a
        multivariate series' heatmap; labels: each step's values."""
        channels, steps = bundle.info.input_shape
        attr = torch.as_tensor(out.attributions).detach().float()
        if attr.dim() == 2:
            attr = attr.unsqueeze(1)
        if attr.dim() != 3 or attr.shape[1] not in (1, channels) or attr.shape[2] != steps:
            raise ExplainError(
                f"A series map has ({channels}, {steps}) or (1, {steps}) values per series; the method gave shape "
                f"{tuple(attr.shape)}."
            )
        series = self.as_batch(raw)
        per_channel = attr.cpu().numpy().astype(np.float32)
        keep = per_channel if attr.shape[1] == channels and channels > 1 else None
        return Maps(per_channel.sum(1), [step_labels(bundle.info, s) for s in series], keep)

    def map_labels(self, labels: list[list[str]] | None, index: int) -> list[str] | None:
        return None if not labels else labels[index]

    def stored(self, maps: Any, labels: list[str] | None) -> tuple[Any, list[list[str]] | None]:
        return np.asarray(maps, dtype=np.float32).reshape(1, -1), None if labels is None else [list(labels)]

    def attention_map(self, bundle: ModelBundle, raw: Any, x: torch.Tensor, matrix: torch.Tensor) -> torch.Tensor:
        """(N, T, T) -> (N, T): the attention each step receives, averaged over the query rows (no class token)."""
        steps = x.shape[-1]
        if matrix.shape[-1] != steps:
            raise ExplainError(
                f"Attention covers {matrix.shape[-1]} tokens but the series has {steps} steps: the model must have "
                "one token per step and no class token."
            )
        return query_row(matrix, "mean")

    def token_layout(self, bundle: ModelBundle, raw: Any, tokens: int) -> TokenLayout:
        steps = bundle.info.input_shape[-1]
        if tokens != steps:
            raise ExplainError(f"The attention covers {tokens} tokens but the series has {steps} steps.")
        return TokenLayout([f"{bundle.info.step_name} {t}" for t in range(tokens)], None, None)

    # ---- drawing -----------------------------------------------------------------------------------------------
    def draw(
        self,
        values: np.ndarray,
        *,
        signed: bool,
        scale: float,
        clipped: bool,
        units: str,
        display: str,
        background: np.ndarray | None,
        labels: Sequence[str] | None,
        upscale: int,
    ) -> Drawing:
        read = parse_labels(labels)
        # the labels' values first: a figure read back from its JSON (no input) is drawn as it was drawn
        series = read[0] if read is not None else background
        names, step_name = (read[1], read[2]) if read is not None else ((), "step")
        img = draw_series(
            values, series, signed=signed, scale=scale, display=display, channel_names=names, step_name=step_name
        )
        figure = with_bar(img, signed=signed, scale=scale, clipped=clipped, units=units)
        return Drawing(
            map_png=png_bytes(img), figure_png=png_bytes(figure), labels=None if labels is None else tuple(labels)
        )

    def redraw(
        self,
        values: np.ndarray,
        *,
        signed: bool,
        scale: float,
        display: str,
        background: np.ndarray | None,
        upscale: int | None,
    ) -> Image.Image | None:
        width = int(720 * max(1.0, (upscale or 224) / 224))
        return draw_series(values, background, signed=signed, scale=scale, display=display, width=width)

    def background_image(self, image: Any) -> np.ndarray | None:
        """The raw series (C, T) a map is drawn under."""
        if image is None:
            return None
        s = np.asarray(torch.as_tensor(image, dtype=torch.float32).cpu(), np.float32)
        return s.reshape(1, -1) if s.ndim == 1 else s

    def display_values(self, explanation: Any, index: int, display: str) -> np.ndarray:
        channels = explanation.channel_attributions
        if display == "heatmap" and channels is not None:  # channel x time, as the heatmap draws it
            return np.asarray(channels[index], np.float32)
        return np.asarray(explanation.item(index))

    def chart(
        self,
        values: np.ndarray,
        raw: Any,
        *,
        signed: bool,
        scale: float,
        units: str,
        channels: Any = None,
        step_name: str = "step",
        labels: Sequence[str] | None = None,
    ) -> alt.Chart | None:
        names = tuple(channels) if channels is not None else ()
        read = parse_labels(labels) if labels else None
        if read is not None and channels is None:  # a drawn figure's words name the channels and the step
            names, step_name = tuple(read[1]), read[2]
        if raw is None and read is not None:  # and carry the series' values
            raw = read[0]
        if raw is None:
            return None
        if np.ndim(values) == 2:  # per-channel maps: the heatmap PNG shows them
            return None
        v, s = chart_inputs(values, raw)
        return series_chart(v, s, signed=signed, scale=scale, units=units, channel_names=names, step_name=step_name)

    def figure_json(self, values: np.ndarray, labels: Sequence[str] | None) -> dict[str, Any]:
        read = parse_labels(labels)
        return {
            "words": list(labels or ()),
            "attributions": [float(v) if np.isfinite(v) else None for v in np.asarray(values, np.float64).ravel()],
            "series": None if read is None else [[float(v) for v in row] for row in read[0]],
            "channels": None if read is None else list(read[1]),
            "step_name": None if read is None else read[2],
        }

    # ---- metrics (the maps: RowMaps) -------------------------------------------------------------------------
    def perturbation_curve(
        self, bundle: ModelBundle, raw: Any, attributions: Any, *, mode: Mode, steps: int, batch_size: int = 256
    ) -> CurveResult:
        """Time steps replaced by each channel's training mean in order of |attribution| (deletion), or put back into
        the mean series (insertion)."""
        series = self.checked(bundle, raw)
        return series_perturbation_curve(bundle, series, attributions, mode=mode, steps=steps, batch_size=batch_size)


SERIES_ADAPTER = ADAPTERS.register(
    extend(
        SERIES,
        SeriesAdapter,
        displays=("line", "heatmap"),
        metrics=(
            "deletion_auc",
            "insertion_auc",
            "rationale_pointing",
            "rationale_energy",
            "completeness_gap",
            "sparseness",
            "complexity",
            "random_logit",
            "seconds",
        ),
        region="time step",
        gradient_unit="standardised value",
        map_files="png",
        stores_values=True,
        attackable=False,
    )
)
