"""Series to forecast, offline: sktime's Airline, Lynx and ShampooSales (read through its own loaders, from the
files inside its wheel) and `seasonal_trend`, a generated series whose future depends on known lags.

A forecast data set is a kind of target on the series modality (`DatasetInfo.forecast`): a sample is a window of
`window` past values (1, window) and its label the next `horizon` values (horizon,), in the series' units; the model
has one output per step ahead ('t+1' ... 't+H'), each a number in `regression`'s units.

The split is by time. The last `tail` steps of the series are held out:
- the test windows are every window whose targets all lie in the tail (the first forecasts the tail's first
  `horizon` steps, the last its final `horizon`): `tail - horizon + 1` windows; their inputs may reach back into the
  history, which is the past at forecast time;
- the training windows are every window whose targets all lie before the tail, so no training target is a tail value.
The inputs' per-channel mean and std and the target's facts are those of the history (the series before the tail).

`forecast:NAME?horizon=H&window=W` is the same series with another horizon and window (the form's choice); the
season and the tail stay the data set's (the tail grows to `horizon` when it is shorter).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from urllib.parse import parse_qsl

import numpy as np
import torch

from xaidash.data.errors import DatasetError
from xaidash.data.modalities.series import channel_stats
from xaidash.data.registry import DatasetInfo, Forecast, SeriesSplit, SplitName, register, register_factory
from xaidash.data.sets._tables import TableSource, regression_target

SYNTH_STEPS = 480
SYNTH_SEED = 11
SYNTH_SEASON = 12
SYNTH_TREND = 0.1  # per step
SYNTH_AR = 0.8  # the remainder's lag-1 coefficient
SYNTH_NOISE = 0.5
MAX_WINDOW = 4096


@lru_cache(maxsize=1)
def seasonal_trend() -> tuple[np.ndarray, list[str]]:
    """(values, step labels): y_t = 10 + 0.1 t + s[t mod 12] + e_t, with s a fixed seasonal profile (zero mean, a
    range of about 6) and e_t = 0.8 e_(t-1) + N(0, 0.5^2). The best forecast of y_(t+h) from the past is
    10 + 0.1 (t+h) + s[(t+h) mod 12] + 0.8^h e_t: it needs lag 12 (the season), lag 1 (the remainder) and the trend."""
    rng = np.random.default_rng(SYNTH_SEED)
    profile = 3.0 * np.sin(2 * np.pi * np.arange(SYNTH_SEASON) / SYNTH_SEASON) + rng.normal(0.0, 0.8, SYNTH_SEASON)
    profile -= profile.mean()
    e = np.zeros(SYNTH_STEPS)
    shocks = rng.normal(0.0, SYNTH_NOISE, SYNTH_STEPS)
    for i in range(1, SYNTH_STEPS):
        e[i] = SYNTH_AR * e[i - 1] + shocks[i]
    t = np.arange(SYNTH_STEPS)
    values = 10.0 + SYNTH_TREND * t + profile[t % SYNTH_SEASON] + e
    return values, [str(i) for i in range(SYNTH_STEPS)]


def _sktime(loader_name: str) -> Callable[[], tuple[np.ndarray, list[str]]]:
    @lru_cache(maxsize=1)
    def read() -> tuple[np.ndarray, list[str]]:
        import sktime.datasets  # type: ignore[import-untyped]  # imported on use: keeps `import data.sets` light

        series = getattr(sktime.datasets, loader_name)()
        return series.to_numpy(dtype=np.float64), [str(p) for p in series.index]

    return read


@dataclass(frozen=True)
class _Series:
    """A series to forecast: how its values are read, what they are, and its default forecast."""

    name: str
    read: Callable[[], tuple[np.ndarray, list[str]]]
    forecast: Forecast
    value_name: str
    unit: str
    step_name: str
    description: str
    url: str = ""

    def windows(self, split: SplitName) -> np.ndarray:
        """The first input step of each window of `split` (see the module's docstring for which)."""
        f = self.forecast
        length = len(self.read()[0])
        start = length - f.tail
        if split == "train":
            return np.arange(0, start - f.window - f.horizon + 1)
        return np.arange(max(start - f.window, 0), length - f.window - f.horizon + 1)

    def load(self, split: SplitName, root: Path, download: bool) -> SeriesSplit:
        values, steps = self.read()
        f = self.forecast
        first = self.windows(split)
        inputs = np.stack([values[i : i + f.window] for i in first]) if len(first) else np.zeros((0, f.window))
        targets = np.stack([values[i + f.window : i + f.window + f.horizon] for i in first])
        return SeriesSplit(
            series=torch.from_numpy(inputs.astype(np.float32))[:, None, :],
            labels=torch.from_numpy(targets.astype(np.float32)),
            ids=[steps[i + f.window] for i in first],  # the step forecast first ('1959-01')
        )

    def info(self) -> DatasetInfo:
        values, _ = self.read()
        f = self.forecast
        history = values[: len(values) - f.tail]
        mean, std = channel_stats(torch.tensor(history)[None, None, :])
        n_train, n_test = len(self.windows("train")), len(self.windows("test"))
        return DatasetInfo(
            name=self.name,
            modality="series",
            classes=f.steps,
            input_shape=(1, f.window),
            mean=tuple(mean),
            std=tuple(std),
            description=f"{self.description} Forecast: the next {f.horizon} {self.step_name}s from the last "
            f"{f.window}; the last {f.tail} {self.step_name}s held out ({n_train} training / {n_test} test windows).",
            builtin=True,
            channel_names=("value",),
            step_name=self.step_name,
            source_url=self.url,
            regression=regression_target(history, self.value_name, self.unit),
            forecast=f,
        )

    def source(self) -> TableSource:
        return TableSource(self.name, self.info, self.load)

    def with_options(self, argument: str) -> _Series:
        """The same series as 'forecast:NAME?horizon=H&window=W' names it (each option optional)."""
        options = dict(parse_qsl(argument.partition("?")[2], keep_blank_values=True))
        unknown = sorted(set(options) - {"horizon", "window"})
        if unknown:
            raise DatasetError(f"Unknown forecast option {unknown[0]!r} in {argument!r}: use horizon= and window=.")
        f = self.forecast
        horizon, window = _count(options, "horizon", f.horizon), _count(options, "window", f.window)
        length = len(self.read()[0])
        tail = max(f.tail, horizon)
        if length - tail - window - horizon + 1 < 2:
            raise DatasetError(
                f"{self.name} has {length} {self.step_name}s: with the last {tail} held out, a window of {window} "
                f"and a horizon of {horizon} leave fewer than 2 training windows; choose a shorter window or horizon."
            )
        changed = replace(f, horizon=horizon, window=window, tail=tail)
        return replace(self, name=f"forecast:{argument}", forecast=changed)


def _count(options: dict[str, str], key: str, default: int) -> int:
    text = options.get(key)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise DatasetError(f"The forecast's {key} must be a whole number of steps, not {text!r}.") from None
    if not 1 <= value <= MAX_WINDOW:
        raise DatasetError(f"The forecast's {key} must be between 1 and {MAX_WINDOW} steps, not {value}.")
    return value


SERIES: dict[str, _Series] = {
    s.name: s
    for s in (
        _Series(
            "airline",
            _sktime("load_airline"),
            Forecast(horizon=12, window=36, season=12, tail=24),
            "passengers",
            "thousand passengers",
            "month",
            "sktime's Airline series (Box & Jenkins): monthly international airline passengers, 1949-1960, in "
            "thousands (144 months); a trend and a season that grows with it; works offline.",
            url="https://www.sktime.net/en/stable/api_reference/auto_generated/sktime.datasets.load_airline.html",
        ),
        _Series(
            "lynx",
            _sktime("load_lynx"),
            Forecast(horizon=10, window=20, season=10, tail=20),
            "lynx trapped",
            "lynx",
            "year",
            "sktime's Lynx series: Canadian lynx trapped per year, 1821-1934 (114 years), a cycle of about ten "
            "years; works offline.",
            url="https://www.sktime.net/en/stable/api_reference/auto_generated/sktime.datasets.load_lynx.html",
        ),
        _Series(
            "shampoo_sales",
            _sktime("load_shampoo_sales"),
            Forecast(horizon=3, window=12, season=12, tail=9),
            "shampoo sales",
            "",
            "month",
            "sktime's ShampooSales series: monthly sales of a shampoo over three years (36 months), a rising trend; "
            "works offline.",
            url="https://www.sktime.net/en/stable/api_reference/auto_generated/sktime.datasets.load_shampoo_sales.html",
        ),
        _Series(
            "seasonal_trend",
            seasonal_trend,
            Forecast(horizon=12, window=48, season=SYNTH_SEASON, tail=96),
            "value",
            "",
            "step",
            "Generated series with known lags: 10 + 0.1 t, a fixed season of 12 steps and a remainder that keeps 0.8 "
            "of itself each step (plus noise of std 0.5); 480 steps. The best forecast reads lag 12 (the season), "
            "lag 1 (the remainder) and the trend.",
        ),
    )
}


def forecast_source(argument: str) -> TableSource:
    """The source of 'forecast:NAME?horizon=H&window=W'."""
    name = argument.partition("?")[0]
    if name not in SERIES:
        raise DatasetError(f"Unknown series {name!r} to forecast. Known: {', '.join(SERIES)}.")
    return SERIES[name].with_options(argument).source()


for _series in SERIES.values():
    register(_series.source())
register_factory("forecast", forecast_source, argument="<name>?horizon=H&window=W", own=False)
