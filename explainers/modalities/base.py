"""The explaining half of a modality adapter: what the explainers need to know about a kind of input beyond what
`xaidash.data.modalities` declares (how an input is read from a file or typed text, how a method's raw output
becomes one map per input, how a map is drawn and stored, which metrics apply, the words a legend uses).

Each adapter subclasses its data-level class (so it also batches, prepares and describes inputs) and registers in
`ADAPTERS`; `adapter_of(name)` is how every explainer, figure and page gets it. Nothing here imports the explaining
code above it (`api`, the metric specs, the figures' `MapFigure`), so all of those may ask an adapter."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import torch
from PIL import Image

from xaidash.data.errors import ExplainError
from xaidash.data.modalities import Modality
from xaidash.data.specs import Registry
from xaidash.explainers.inspection.attention import TokenLayout
from xaidash.explainers.perturbation_curves import CurveResult, Mode
from xaidash.models.bundle import ModelBundle

if TYPE_CHECKING:
    import altair as alt

    from xaidash.explainers.registry import MethodOutput


@dataclass(frozen=True)
class Maps:
    """A method's output as maps: `attributions` one map per input (images (N, H, W); texts a list of 1-D word
    scores), `labels` the features each map scores when they are named (a text's words), `channels` the
    per-channel maps when the method made them (images (N, C, H, W); graphs one (nodes, features) array per input)."""

    attributions: np.ndarray | list[np.ndarray]
    labels: list[list[str]] | None = None
    channels: np.ndarray | list[np.ndarray] | None = None


@dataclass(frozen=True)
class Drawing:
    """A map as drawn: an image map (PNG bytes of the map, and of the map with its colour bar below) or a strip
    of highlighted features (HTML, and the labels it shows)."""

    map_png: bytes | None = None
    figure_png: bytes | None = None
    tokens_html: str | None = None
    labels: tuple[str, ...] | None = None


@dataclass(frozen=True)
class TypingGuide:
    """How a page asks for inputs typed as values or given as a CSV file (sources 'values' and 'rows file'): the
    caption above the box, the box's label and help, the example it starts with, what to say when it is empty; the
    file uploader's label and what to say before a file is given."""

    caption: str
    label: str
    help: str
    example: str
    empty: str
    file_label: str
    file_hint: str


@dataclass(frozen=True)
class ExplainingModality(Modality):
    """Facts: `displays` how its maps can be shown (the first is the default); `metrics` the ids of the quality
    metrics that apply to its maps (explainers/metrics/registry.py); `region` what a perturbation hides, in the
    legend's words (None: the map's unit); `gradient_unit` what a gradient is taken with respect to; `target`
    what a map explains ("class", or a generated "token"); `map_files` the report's file suffix for a drawn map
    ('png' or 'html'); `stores_values` whether a report keeps the map's values beside it as a .npy file (text
    maps carry their scores in the JSON); `attackable` whether inputs can be perturbed within a pixel budget;
    `counterfactuals` the counterfactual searches its inputs allow when it names them (explainers/robust/searches.py;
    empty: a pixel budget and a patch where `attackable`, else word edits)."""

    displays: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    region: str | None = None
    gradient_unit: str = "input"
    target: str = "class"
    map_files: str = "png"
    stores_values: bool = True
    attackable: bool = False
    counterfactuals: tuple[str, ...] = ()

    # ---- reading inputs ----------------------------------------------------------------------------------------
    def read_input(self, spec: str, bundle: ModelBundle, fit: str = "crop") -> tuple[Any, str]:
        """(raw input, description) of what a user named that is not a data set's sample: a file, or typed text."""
        raise ExplainError(f"{self.label.capitalize()} cannot be read from {spec!r}.")

    def read_inputs(self, spec: str, bundle: ModelBundle) -> list[tuple[Any, str]]:
        """Every input a file holds (a CSV of table rows), each as `read_input` gives one: [(raw, description)]."""
        return [self.read_input(spec, bundle)]

    def typing_guide(self, info: Any, example: Any) -> TypingGuide | None:
        """The words a page asks for typed values or a CSV file with (see `TypingGuide`); None where this modality
        has neither source."""
        return None

    def preview(self, info: Any, raws: Sequence[Any]) -> Any:
        """Inputs read from a file as a table to show before they are explained (a pandas DataFrame, one row per
        input; a list-valued column is drawn as a sparkline)."""
        import pandas as pd

        return pd.DataFrame({self.sample: [self.one_line(r, info) for r in raws]})

    def input_cells(self, info: Any, raw: Any) -> tuple[str, ...] | None:
        """One input's values as people read them, 'name = value' per feature, when an input is shown as such (a
        table row); None where it is shown as itself (a picture, a text)."""
        return None

    def sample_problem(self, raw: Any, bundle: ModelBundle, name: str) -> str | None:
        """Why a data set's sample cannot go into the model as it is (None: it can)."""
        return None

    def checked(self, bundle: ModelBundle, inputs: Any) -> Any:
        """Inputs as the batch `explain` works on, refused with a message when they cannot be explained."""
        raise NotImplementedError

    def background(self, bundle: ModelBundle, n: int, seed: int) -> torch.Tensor | None:
        """`n` prepared training samples (a seeded pick) that SHAP and mean baselines compare against; None when
        this kind of input has none (the methods then use their own stand-in)."""
        return None

    # ---- maps --------------------------------------------------------------------------------------------------
    def to_maps(self, bundle: ModelBundle, raw: Any, out: MethodOutput) -> Maps:
        """A method's raw output as one map per input at the input's resolution (see `Maps`)."""
        raise NotImplementedError

    def map_labels(self, labels: list[list[str]] | None, index: int) -> list[str] | None:
        """The features map `index` scores, when they are named (a text's words); None for a picture's pixels."""
        return None

    def stored(self, maps: Any, labels: list[str] | None) -> tuple[Any, list[list[str]] | None]:
        """One stored map (and its labels) as an `Explanation`'s attributions and labels for one input."""
        raise NotImplementedError

    def attention_map(self, bundle: ModelBundle, raw: Any, x: torch.Tensor, matrix: torch.Tensor) -> torch.Tensor:
        """(N, T, T) token-to-token attention of the prepared inputs `x` -> one map per input over its features:
        the row the prediction reads (a class token's), or the mean row, laid out as the input is."""
        raise ExplainError(f"Attention maps are not drawn over {self.label}.")

    def token_layout(self, bundle: ModelBundle, raw: Any, tokens: int) -> TokenLayout:
        """What the `tokens` positions of one input's attention are (labels, patch grid, the query row)."""
        raise ExplainError(f"Attention is not shown for {self.label}.")

    def display_values(self, explanation: Any, index: int, display: str) -> np.ndarray:
        """The values map `index` of an `Explanation` is drawn from in `display`: its map (a multivariate series'
        heatmap: its per-channel maps, where the method made them)."""
        return np.asarray(explanation.item(index))

    def display(self, requested: str | None = None) -> str:
        """The display a map is drawn with: `requested` when this modality has it, else its default."""
        return requested if requested in self.displays else self.displays[0]

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
        """The map drawn on colour `scale`, with its colour bar (see `Drawing`)."""
        raise NotImplementedError

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
        """The map drawn again at another size (the enlarged view); None where a map has no size to change."""
        return None

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
        """An interactive chart of map `values` over the input `raw` (a series: its line over the attribution band,
        a tooltip per step), on colour `scale` with the legend's `units`; `channels` the input's channel names and
        `step_name` what one step is (`DatasetInfo.channel_names`, `step_name`), or read from the map's `labels`
        where they carry them (a drawn `MapFigure`'s words); None where maps are pictures."""
        return None

    def background_image(self, image: Any) -> np.ndarray | None:
        """The input an overlay is drawn on, (H, W, 3) in [0, 1]; None where maps are not drawn over the input."""
        return None

    def figure_json(self, values: np.ndarray, labels: Sequence[str] | None) -> dict[str, Any]:
        """What a figure's JSON carries of its map besides the common fields (a text map: its words and scores)."""
        return {}

    def labels_from_json(self, d: dict[str, Any]) -> tuple[str, ...] | None:
        """A map's feature labels from its figure's JSON (a text map's words), else None."""
        return tuple(str(w) for w in d["words"]) if "words" in d else None

    def values_from_json(self, d: dict[str, Any]) -> np.ndarray | None:
        """A map's values from its figure's JSON when the JSON carries them (text maps), else None."""
        return None

    # ---- metrics -----------------------------------------------------------------------------------------------
    # What the quality metrics of `metrics` ask of a modality (explainers/metrics/registry.py): an adapter lists a
    # metric there only when it implements what that metric calls.
    def metric_inputs(self, bundle: ModelBundle, inputs: Any) -> Any:
        """Inputs (one or a batch) as the metrics take them, refused with a message when the model cannot read them."""
        raise NotImplementedError

    def metric_maps(self, attributions: Any) -> list[np.ndarray]:
        """One float32 map per input as the metrics read it, from an `Explanation` of this modality or its maps."""
        raise NotImplementedError

    def magnitudes(self, attributions: Any, device: torch.device | None) -> list[torch.Tensor]:
        """|map| per input as float64 rows (sparseness, complexity): batched where the maps share one size."""
        raise NotImplementedError

    def map_similarity(self, a: np.ndarray, b: np.ndarray) -> float:
        """How alike two maps of one input are (the random-logit test); NaN when it is undefined."""
        raise NotImplementedError

    def perturbation_curve(
        self, bundle: ModelBundle, raw: Any, attributions: Any, *, mode: Mode, steps: int, batch_size: int = 256
    ) -> CurveResult:
        """The target's probability as the most relevant features are removed ('deletion') or put back
        ('insertion'), `steps` chunks at a time, and its area (see explainers/metrics/deletion.py)."""
        raise NotImplementedError


A = TypeVar("A", bound=ExplainingModality)


def extend(data: Modality, cls: type[A], **facts: Any) -> A:
    """The explaining adapter `cls` of a registered data-level modality: the same declared facts, plus `facts`."""
    own = {f.name: getattr(data, f.name) for f in fields(data)}
    return cls(**{**own, **facts})


def _unknown(key: object, known: list[str]) -> str:
    return f"Unknown modality {key!r}. Known: {', '.join(known)}."


ADAPTERS: Registry[ExplainingModality] = Registry("modality", error=ExplainError, unknown=_unknown)


def adapter_of(name: str) -> ExplainingModality:
    """The explaining adapter of a modality (`bundle.modality`, `explanation.modality`, a figure's modality)."""
    return ADAPTERS.get(name)
