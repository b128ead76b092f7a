"""Inside a recurrent model (issue 31): for one prepared series, the hidden state of every layer of the model's
nn.GRU / nn.LSTM at every time step and its gate activations, and a PCA of the hidden states over time.

torch's nn.GRU / nn.LSTM return the hidden states of the last layer (and every layer's final state), never their
gates: the gates are recomputed here from the module's own weights (`weight_ih_l{k}`, `weight_hh_l{k}`, biases), in
torch's gate order, with the input the module actually received (captured by a hook on the real forward pass). The
recomputed hidden states are checked against the module's own outputs before anything is returned, so a variant this
recomputation does not cover (projections, packed sequences) is refused rather than drawn wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from xaidash.data.registry import SeriesSplit
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle

# torch's order of the gates inside weight_ih / weight_hh (documented in nn.LSTM / nn.GRU)
LSTM_GATES = ("input", "forget", "cell candidate", "output")
GRU_GATES = ("reset", "update", "new")
MATCH_TOL = 1e-5  # recomputed h_t against the module's own output


@dataclass
class LayerTrace:
    """One layer for one series: hidden (T, H) h_t; gates name -> (T, H) activations; cell (T, H) c_t (LSTM)."""

    hidden: np.ndarray
    gates: dict[str, np.ndarray]
    cell: np.ndarray | None = None


@dataclass
class RecurrentTrace:
    """Every layer of the recurrent module for one series; `error`: the largest |recomputed - torch's| h_t."""

    path: str
    kind: str  # "LSTM" | "GRU"
    layers: list[LayerTrace]
    error: float

    @property
    def steps(self) -> int:
        return int(self.layers[0].hidden.shape[0])

    @property
    def units(self) -> int:
        return int(self.layers[0].hidden.shape[1])

    @property
    def gate_names(self) -> tuple[str, ...]:
        return LSTM_GATES if self.kind == "LSTM" else GRU_GATES


@dataclass
class Trajectories:
    """The PCA of one layer's hidden states, fitted on every step of every series given.

    points: one (T_i, k) array per series; explained: (k,) explained variance ratio of each component."""

    layer: int
    points: list[np.ndarray]
    explained: np.ndarray
    labels: list[str] = field(default_factory=list)


def recurrent_reason(bundle: ModelBundle) -> str | None:
    """Why the inside view cannot read this model (one line), or None when it can."""
    path = bundle.spec.recurrent
    if not path:
        return f"{bundle.spec.name} has no recurrent layer (its model spec declares none): pick a GRU or LSTM run."
    try:
        module = bundle.model.get_submodule(path)
    except AttributeError:
        return f"{bundle.spec.name} declares recurrent layer {path!r}, but the model has no such module."
    return module_reason(module, path)


def module_reason(module: nn.Module, path: str) -> str | None:
    """Why `module` is not an RNN whose gates can be recomputed here, or None."""
    if not isinstance(module, nn.GRU | nn.LSTM):
        return f"{path!r} is a {type(module).__name__}, not an nn.GRU or nn.LSTM."
    if module.bidirectional:
        return f"{path!r} is bidirectional; the inside view reads unidirectional GRU/LSTM layers."
    if isinstance(module, nn.LSTM) and module.proj_size > 0:
        return f"{path!r} is an LSTM with projections (proj_size={module.proj_size}); not supported."
    return None


def _capture(model: nn.Module, module: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, Any, torch.Tensor]:
    """(the module's input (T, F) for the one series, its initial state or None, its output (T, H)), from a real
    forward pass of the whole model on x (1, C, T)."""
    seen: dict[str, Any] = {}

    def pre(mod: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        seen["input"] = args[0] if args else kwargs.get("input")
        seen["hx"] = args[1] if len(args) > 1 else kwargs.get("hx")

    def post(mod: nn.Module, args: Any, output: Any) -> None:
        seen["output"] = output[0]

    handles = [module.register_forward_pre_hook(pre, with_kwargs=True), module.register_forward_hook(post)]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in handles:
            h.remove()
    if "input" not in seen:
        raise ExplainError("The model's forward pass never ran its recurrent layer.")
    inp, out = seen["input"], seen["output"]
    if not isinstance(inp, torch.Tensor) or not isinstance(out, torch.Tensor):
        raise ExplainError("The recurrent layer received a packed sequence; the inside view reads padded tensors.")
    if inp.dim() != 3 or inp.shape[0 if module.batch_first else 1] != 1:
        raise ExplainError(f"The recurrent layer's input has shape {tuple(inp.shape)}; expected one series.")
    if not module.batch_first:
        inp, out = inp.transpose(0, 1), out.transpose(0, 1)
    return inp[0], seen["hx"], out[0]


def _initial(module: nn.RNNBase, hx: Any, layer: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(h0, c0 or None) of one layer for the one series: what the model passed, else zeros."""
    zeros = torch.zeros(module.hidden_size, dtype=torch.float64)
    if hx is None:
        return zeros, (zeros.clone() if isinstance(module, nn.LSTM) else None)
    if isinstance(module, nn.LSTM):
        return hx[0][layer, 0].double().cpu(), hx[1][layer, 0].double().cpu()
    return hx[layer, 0].double().cpu(), None


def _weights(module: nn.RNNBase, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    w_ih, w_hh = getattr(module, f"weight_ih_l{k}"), getattr(module, f"weight_hh_l{k}")
    rows = w_ih.shape[0]
    b_ih = getattr(module, f"bias_ih_l{k}", None) if module.bias else None
    b_hh = getattr(module, f"bias_hh_l{k}", None) if module.bias else None
    zero = torch.zeros(rows)
    return tuple(  # type: ignore[return-value]
        t.detach().double().cpu() for t in (w_ih, w_hh, zero if b_ih is None else b_ih, zero if b_hh is None else b_hh)
    )


def _lstm_layer(module: nn.RNNBase, k: int, xs: torch.Tensor, hx: Any) -> LayerTrace:
    """c_t = f*c + i*g; h_t = o*tanh(c_t) with i, f, g, o in torch's order (nn.LSTM's documentation)."""
    w_ih, w_hh, b_ih, b_hh = _weights(module, k)
    h, c = _initial(module, hx, k)
    assert c is not None
    pre_x = xs @ w_ih.T + b_ih  # (T, 4H): the input part of every step at once
    hs, cs, gates = [], [], []
    for t in range(len(xs)):
        i, f, g, o = (pre_x[t] + w_hh @ h + b_hh).chunk(4)
        i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
        c = f * c + i * g
        h = o * torch.tanh(c)
        hs.append(h)
        cs.append(c)
        gates.append(torch.stack([i, f, g, o]))
    g_all = torch.stack(gates).numpy()  # (T, 4, H)
    return LayerTrace(
        torch.stack(hs).numpy(), {n: g_all[:, j] for j, n in enumerate(LSTM_GATES)}, torch.stack(cs).numpy()
    )


def _gru_layer(module: nn.RNNBase, k: int, xs: torch.Tensor, hx: Any) -> LayerTrace:
    """n = tanh(W_in x + b_in + r*(W_hn h + b_hn)); h_t = (1-z)*n + z*h with r, z, n in torch's order (nn.GRU)."""
    w_ih, w_hh, b_ih, b_hh = _weights(module, k)
    h, _ = _initial(module, hx, k)
    pre_x = xs @ w_ih.T + b_ih  # (T, 3H)
    hs, gates = [], []
    for t in range(len(xs)):
        xr, xz, xn = pre_x[t].chunk(3)
        hr, hz, hn = (w_hh @ h + b_hh).chunk(3)
        r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
        n = torch.tanh(xn + r * hn)
        h = (1 - z) * n + z * h
        hs.append(h)
        gates.append(torch.stack([r, z, n]))
    g_all = torch.stack(gates).numpy()
    return LayerTrace(torch.stack(hs).numpy(), {n: g_all[:, j] for j, n in enumerate(GRU_GATES)})


def trace_module(model: nn.Module, module: nn.Module, x: torch.Tensor, path: str = "rnn") -> RecurrentTrace:
    """Every layer's hidden states and gates of `module` (inside `model`) for one prepared input x (1, ...).

    Layer k's input is layer k-1's hidden state (dropout between layers is off in eval mode, where this runs).
    Refused when the recomputed last layer differs from the module's own output by more than MATCH_TOL."""
    if reason := module_reason(module, path):
        raise ExplainError(reason)
    was_training = model.training
    model.eval()
    try:
        xs, hx, out = _capture(model, module, x)
    finally:
        model.train(was_training)
    assert isinstance(module, nn.RNNBase)  # module_reason refused anything else
    step = _lstm_layer if isinstance(module, nn.LSTM) else _gru_layer
    layers: list[LayerTrace] = []
    inp = xs.detach().double().cpu()
    for k in range(module.num_layers):
        layers.append(step(module, k, inp, hx))
        inp = torch.from_numpy(layers[-1].hidden)
    error = float(np.abs(layers[-1].hidden - out.detach().double().cpu().numpy()).max())
    if not error <= MATCH_TOL:
        raise ExplainError(
            f"The recomputed hidden states of {path!r} differ from the module's own by {error:.2g} (> {MATCH_TOL:g}): "
            "this recurrent layer is not a plain GRU/LSTM."
        )
    kind = "LSTM" if isinstance(module, nn.LSTM) else "GRU"
    return RecurrentTrace(path, kind, [_as_float32(layer) for layer in layers], error)


def _as_float32(layer: LayerTrace) -> LayerTrace:
    gates = {n: g.astype(np.float32) for n, g in layer.gates.items()}
    cell = None if layer.cell is None else layer.cell.astype(np.float32)
    return LayerTrace(layer.hidden.astype(np.float32), gates, cell)


def series_tensor(raw: object) -> torch.Tensor:
    """A raw series as a float tensor (C, T) or (1, C, T); ExplainError for anything else (a text)."""
    if isinstance(raw, str) or not isinstance(raw, torch.Tensor | np.ndarray) or np.ndim(raw) not in (2, 3):
        raise ExplainError("The inside view of a recurrent model reads one series (channels x time steps).")
    return torch.as_tensor(raw, dtype=torch.float32)


def first_per_class(split: object, classes: tuple[str, ...], skip: str = "") -> list[tuple[str, torch.Tensor]]:
    """('test INDEX (class)', raw series) of the first series of every class in a series split, but `skip`."""
    if not isinstance(split, SeriesSplit):
        raise ExplainError("The series of every class need a data set of series.")
    labels = split.labels.numpy()
    out = []
    for c, name in enumerate(classes):
        hits = np.flatnonzero(labels == c)
        label = f"test #{int(hits[0])} ({name})" if hits.size else ""
        if hits.size and label != skip:
            out.append((label, split.series[int(hits[0])]))
    return out


def bundle_trace(bundle: ModelBundle, raw: object) -> RecurrentTrace:
    """The trace of the bundle's declared recurrent layer for one raw series (C, T) or (1, C, T)."""
    if reason := recurrent_reason(bundle):
        raise ExplainError(reason)
    raw = series_tensor(raw)
    x = bundle.prepare(raw if raw.dim() == 3 else raw.unsqueeze(0))
    if len(x) != 1:
        raise ExplainError(f"The inside view reads one series at a time; got {len(x)}.")
    path = str(bundle.spec.recurrent)
    return trace_module(bundle.model, bundle.model.get_submodule(path), x.to(bundle.device), path)


def trajectories(
    traces: list[RecurrentTrace], layer: int = -1, components: int = 2, labels: list[str] | None = None
) -> Trajectories:
    """PCA (scikit-learn) of `layer`'s hidden states over every step of every trace, fitted on them all so the
    trajectories share one plane and can be compared; components is capped by the data's rank bound."""
    from sklearn.decomposition import PCA

    if not traces:
        raise ExplainError("The PCA of hidden states needs at least one series.")
    n_layers = len(traces[0].layers)
    if not -n_layers <= layer < n_layers:
        raise ExplainError(f"Layer {layer} does not exist: the recurrent module has {n_layers} layer(s).")
    hidden = [t.layers[layer].hidden for t in traces]
    stacked = np.concatenate(hidden).astype(np.float64)
    k = max(1, min(components, stacked.shape[0], stacked.shape[1]))
    pca = PCA(n_components=k).fit(stacked)
    points = [pca.transform(h.astype(np.float64)).astype(np.float32) for h in hidden]
    return Trajectories(layer % n_layers, points, pca.explained_variance_ratio_.astype(np.float32), list(labels or []))
