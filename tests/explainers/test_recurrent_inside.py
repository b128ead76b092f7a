"""Inside a recurrent model: hidden states per layer equal torch's own (every layer, every step), gates equal their
closed form where the weights fix them, PCA equal to scikit-learn's on the stacked states, refusals in one line."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from sklearn.decomposition import PCA
from torch import nn

from xaidash.data.registry import DatasetInfo
from xaidash.explainers.inspection.recurrent import (
    GRU_GATES,
    LSTM_GATES,
    bundle_trace,
    recurrent_reason,
    trace_module,
    trajectories,
)
from xaidash.explainers.params import ExplainError
from xaidash.models.bundle import ModelBundle
from xaidash.models.registry import ModelSpec


class TinyRNN(nn.Module):
    """A stand-in for the zoo's series_gru / series_lstm: (N, C, T) -> logits, the RNN named `rnn`."""

    def __init__(self, cell: type[nn.GRU] | type[nn.LSTM], channels: int = 2, hidden: int = 6, layers: int = 2):
        super().__init__()
        self.rnn = cell(channels, hidden, num_layers=layers, batch_first=True, dropout=0.3 if layers > 1 else 0.0)
        self.head = nn.Linear(hidden, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x.transpose(1, 2))
        return self.head(out[:, -1])


def _reference_layers(rnn: nn.Module, xs: torch.Tensor) -> list[torch.Tensor]:
    """Layer k's h_t over time from torch itself: a copy of the module cut to k+1 layers returns layer k's output."""
    outs = []
    for k in range(rnn.num_layers):
        cut = copy.deepcopy(rnn)
        cut.num_layers = k + 1
        for name in [n for n in cut._flat_weights_names if int(n.rsplit("_l", 1)[1]) > k]:
            delattr(cut, name)
        cut._flat_weights_names = [n for n in cut._flat_weights_names if int(n.rsplit("_l", 1)[1]) <= k]
        cut._init_flat_weights()
        with torch.no_grad():
            outs.append(cut.eval()(xs)[0][0])
    return outs


@pytest.mark.parametrize("cell", [nn.GRU, nn.LSTM])
def test_every_layer_matches_torch(cell):
    torch.manual_seed(0)
    model = TinyRNN(cell, layers=3).train()  # training mode: the trace must switch dropout off itself
    x = torch.randn(1, 2, 40)
    trace = trace_module(model, model.rnn, x)
    assert model.training  # restored
    assert trace.kind == cell.__name__ and trace.steps == 40 and trace.units == 6 and len(trace.layers) == 3
    assert trace.gate_names == (LSTM_GATES if cell is nn.LSTM else GRU_GATES)
    for layer, ref in zip(trace.layers, _reference_layers(model.rnn, x.transpose(1, 2)), strict=True):
        np.testing.assert_allclose(layer.hidden, ref.numpy(), atol=1e-5)
        assert set(layer.gates) == set(trace.gate_names)
        assert all(g.shape == (40, 6) for g in layer.gates.values())
    model.eval()
    with torch.no_grad():
        _, state = model.rnn(x.transpose(1, 2))
    h_n = state[0] if cell is nn.LSTM else state
    for k, layer in enumerate(trace.layers):
        np.testing.assert_allclose(layer.hidden[-1], h_n[k, 0].numpy(), atol=1e-5)
        if cell is nn.LSTM:  # the cell state too: c_n of every layer
            np.testing.assert_allclose(layer.cell[-1], state[1][k, 0].numpy(), atol=1e-5)
    assert trace.error <= 1e-5


def test_gates_equal_their_closed_form_when_the_weights_fix_them():
    torch.manual_seed(1)
    model = TinyRNN(nn.LSTM, channels=1, hidden=4, layers=1)
    with torch.no_grad():
        model.rnn.weight_ih_l0.zero_()
        model.rnn.weight_hh_l0.zero_()
        model.rnn.bias_hh_l0.zero_()
        bias = torch.tensor([-1.0, 2.0, 0.5, 0.0]).repeat_interleave(4)  # i, f, g, o: one value per gate
        model.rnn.bias_ih_l0.copy_(bias)
    trace = trace_module(model, model.rnn, torch.randn(1, 1, 10))
    gates = trace.layers[0].gates
    np.testing.assert_allclose(gates["input"], 1 / (1 + np.exp(1.0)), atol=1e-6)
    np.testing.assert_allclose(gates["forget"], 1 / (1 + np.exp(-2.0)), atol=1e-6)
    np.testing.assert_allclose(gates["cell candidate"], np.tanh(0.5), atol=1e-6)
    np.testing.assert_allclose(gates["output"], 0.5, atol=1e-6)
    # c_t = f c_{t-1} + i g from zero: a geometric sum
    f, ig = 1 / (1 + np.exp(-2.0)), np.tanh(0.5) / (1 + np.exp(1.0))
    np.testing.assert_allclose(trace.layers[0].cell[:, 0], [ig * sum(f**j for j in range(t + 1)) for t in range(10)])


def test_gru_update_gate_near_one_keeps_the_state():
    torch.manual_seed(2)
    model = TinyRNN(nn.GRU, channels=1, hidden=3, layers=1)
    with torch.no_grad():
        model.rnn.bias_ih_l0[3:6] = 30.0  # z ≈ 1: h_t = z h_{t-1} + (1 - z) n stays at h_0 = 0
    trace = trace_module(model, model.rnn, torch.randn(1, 1, 12))
    assert trace.layers[0].gates["update"].min() > 0.999
    assert np.abs(trace.layers[0].hidden).max() < 1e-6


def test_initial_state_passed_by_the_model_is_used():
    class WithH0(TinyRNN):
        def forward(self, x):
            h0 = torch.full((self.rnn.num_layers, len(x), self.rnn.hidden_size), 0.7)
            out, _ = self.rnn(x.transpose(1, 2), h0)
            return self.head(out[:, -1])

    torch.manual_seed(3)
    model = WithH0(nn.GRU)
    trace = trace_module(model, model.rnn, torch.randn(1, 2, 15))
    assert trace.error <= 1e-5


def test_refusals_are_one_line():
    model = TinyRNN(nn.GRU)
    with pytest.raises(ExplainError, match=r"not an nn\.GRU or nn\.LSTM"):
        trace_module(model, model.head, torch.randn(1, 2, 5), "head")
    bi = nn.GRU(2, 3, batch_first=True, bidirectional=True)
    with pytest.raises(ExplainError, match="bidirectional"):
        trace_module(bi, bi, torch.randn(1, 5, 2))
    with pytest.raises(ExplainError, match="one series"):
        trace_module(model, model.rnn, torch.randn(2, 2, 5))


def _bundle(recurrent: str | None) -> ModelBundle:
    info = DatasetInfo("toy", "series", ("a", "b", "c"), (2, 30), (1.0, -2.0), (2.0, 0.5), channel_names=("x", "y"))
    spec = ModelSpec("toy_rnn", "series", lambda info: TinyRNN(nn.GRU), recurrent=recurrent)
    torch.manual_seed(4)
    return ModelBundle(TinyRNN(nn.GRU), spec, info, torch.device("cpu"))


def test_bundle_trace_feeds_the_standardised_series():
    bundle = _bundle("rnn")
    raw = torch.randn(2, 30) * 3
    trace = bundle_trace(bundle, raw)
    prepared = ((raw - torch.tensor([[1.0], [-2.0]])) / torch.tensor([[2.0], [0.5]])).unsqueeze(0)
    direct = trace_module(bundle.model, bundle.model.rnn, prepared)
    np.testing.assert_allclose(trace.layers[-1].hidden, direct.layers[-1].hidden, atol=1e-6)
    assert recurrent_reason(bundle) is None


def test_bundle_without_recurrent_layer_gets_one_line():
    reason = recurrent_reason(_bundle(None))
    assert reason is not None and "no recurrent layer" in reason and "\n" not in reason
    with pytest.raises(ExplainError, match="no recurrent layer"):
        bundle_trace(_bundle(None), torch.randn(2, 30))
    assert "no such module" in str(recurrent_reason(_bundle("lstm")))


def test_trajectories_are_scikit_learns_pca_on_all_steps():
    torch.manual_seed(5)
    model = TinyRNN(nn.LSTM)
    traces = [trace_module(model, model.rnn, torch.randn(1, 2, n)) for n in (20, 25, 30)]
    traj = trajectories(traces, layer=0, labels=["a", "b", "c"])
    assert traj.layer == 0 and [p.shape for p in traj.points] == [(20, 2), (25, 2), (30, 2)]
    stacked = np.concatenate([t.layers[0].hidden for t in traces]).astype(np.float64)
    pca = PCA(2).fit(stacked)
    np.testing.assert_allclose(traj.explained, pca.explained_variance_ratio_, rtol=1e-5)
    np.testing.assert_allclose(np.concatenate(traj.points), pca.transform(stacked), atol=1e-5)
    assert 0 < traj.explained.sum() <= 1 + 1e-6
    one = trajectories(traces[:1], components=10)  # capped at the 6 units
    assert one.points[0].shape == (20, 6) and one.layer == 1
    with pytest.raises(ExplainError, match="layer"):
        trajectories(traces, layer=5)


def test_charts_carry_the_trace_values():
    from xaidash.explainers.inspection.recurrent_charts import (
        gate_chart,
        gate_frame,
        series_chart,
        top_units,
        trajectory_chart,
        trajectory_frame,
    )

    torch.manual_seed(6)
    model = TinyRNN(nn.GRU, hidden=30, layers=2)
    x = torch.randn(1, 2, 20)
    trace = trace_module(model, model.rnn, x)
    traj = trajectories([trace], labels=["test #0 (a)"])
    df = trajectory_frame(traj)
    assert list(df["step"]) == list(range(20)) and set(df["series"]) == {"test #0 (a)"}
    np.testing.assert_allclose(df[["PC1", "PC2"]].to_numpy(), traj.points[0], atol=1e-6)
    spec = trajectory_chart(traj).to_dict()
    assert "PC1 (" in str(spec) and "viridis" in str(spec)
    update = trace.layers[1].gates["update"]
    units = top_units(update, 5)
    assert len(units) == 5 and set(units) == set(np.argsort(-update.std(0))[:5])
    frame = gate_frame(update, units)
    assert len(frame) == 20 * 5
    assert frame.query("unit == @units[0] and step == 3")["activation"].item() == pytest.approx(update[3, units[0]])
    assert "redblue" in str(gate_chart(trace, 1, "new").to_dict())  # tanh gate: -1..1 diverging
    assert "unit (24 of 30" in str(gate_chart(trace, 0, "reset").to_dict())
    assert "channel" in str(series_chart(x[0].numpy(), ("x", "y")).to_dict())


def test_first_series_of_every_class():
    from xaidash.data.registry import SeriesSplit
    from xaidash.explainers.inspection.recurrent import first_per_class, series_tensor

    split = SeriesSplit(torch.arange(5 * 2 * 4, dtype=torch.float32).reshape(5, 2, 4), torch.tensor([2, 0, 2, 0, 2]))
    got = first_per_class(split, ("a", "b", "c"))
    assert [n for n, _ in got] == ["test #1 (a)", "test #0 (c)"]  # class b has no series
    assert torch.equal(got[1][1], split.series[0])
    assert [n for n, _ in first_per_class(split, ("a", "b", "c"), skip="test #1 (a)")] == ["test #0 (c)"]
    with pytest.raises(ExplainError, match="one series"):
        series_tensor("a text")
