"""A bertviz-style head view and model view of a transformer's attention, as one self-contained HTML page
for `st.iframe` (no network: plain SVG, canvas and JavaScript, no libraries).

Head view (one layer): every token on the left sends a line to each token it attends to on the right, one
distinct colour per head, line opacity = the attention weight on one scale for all heads. A coloured
square per head toggles it (click) or shows it alone (double click); hovering a token keeps only its lines
and draws, beside the tokens it attends to, one bar per head as long as the weight.

Model view: every layer x head as a small head view on the same scale (opacity = weight, 0 to 1);
clicking a tile shows that layer and head in the head view.

Token texts come from user input: they travel as JSON inside a `<script type="application/json">` with
`<`, `>` and `&` escaped, and the page only ever sets them with `textContent`, never as markup.
"""

from __future__ import annotations

import html
import json
import uuid
from collections.abc import Sequence
from typing import Any, Final

import numpy as np

# One distinct colour per head: d3's category10 (what bertviz uses), then ten more picked greedily for the
# largest CIELAB distance to those before them, among colours of lightness 30-72 (dark enough for thin lines
# on white). Any two of the 20 lie at least 25 apart (tests/dashboard/test_head_view.py).
HEAD_PALETTE: Final[tuple[str, ...]] = (
    *("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"),
    *("#4000e0", "#e020e0", "#606000", "#006040", "#e0a060", "#0040c0", "#c00060", "#604060", "#8000a0", "#80a060"),
)
ROW: Final = 28  # px per token row in the head view
MIN_WEIGHT: Final = 0.01  # lines below this weight are not sent to the page (invisible at that opacity anyway)
MAX_CELLS: Final = 3_000_000  # layers x heads x T x T above this: only the chosen layer is sent, no model view


def head_colour(head: int) -> str:
    """The colour of a head (the palette repeats only past 20 heads)."""
    return HEAD_PALETTE[head % len(HEAD_PALETTE)]


def _safe_json(obj: Any) -> str:
    """JSON that can sit inside a <script> element: no '<', '>' or '&' left to end it or open a tag."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def sparse_layers(weights: np.ndarray, min_weight: float = MIN_WEIGHT) -> list[list[list[int]]]:
    """weights (L, H, T, T) as, per layer and head, a flat list [i, j, w, i, j, w, ...] of the links with
    weight >= min_weight, w in thousandths (an integer: a third of the page's size)."""
    out: list[list[list[int]]] = []
    for layer in weights:
        per_head = []
        for head in layer:
            i, j = np.nonzero(head >= min_weight)
            w = np.rint(head[i, j] * 1000).astype(int)
            per_head.append(np.stack([i, j, w], 1).reshape(-1).tolist())
        out.append(per_head)
    return out


def views_height(tokens: int, layers: int, heads: int, model_view: bool) -> int:
    """Pixels the page needs (Streamlit cannot size an iframe to its content)."""
    head = 150 + tokens * ROW + 20  # the notes wrap to more lines in a narrow column (1024 px window)
    if not model_view:
        return head
    return head + 110 + layers * (tile_height(tokens) + 10) + 10


def tile_height(tokens: int) -> int:
    return int(min(150, max(80, tokens * 5)))


def attention_views_html(
    weights: np.ndarray,
    tokens: Sequence[str],
    *,
    layer: int = 0,
    heads: Sequence[int] | None = None,
    model_view: bool = True,
    min_weight: float = MIN_WEIGHT,
) -> tuple[str, int]:
    """(HTML, height in px) of the head view of `layer` (heads shown: `heads`, default all) and, with
    `model_view`, the grid of every layer x head. weights: (L, H, T, T), rows summing to one."""
    w = np.asarray(weights, dtype=np.float32)
    if w.ndim != 4 or w.shape[-1] != w.shape[-2] or w.shape[-1] != len(tokens):
        raise ValueError(f"weights must be (layers, heads, T, T) with T = {len(tokens)} tokens, got {w.shape}.")
    n_layers, n_heads, t = int(w.shape[0]), int(w.shape[1]), int(w.shape[-1])
    layer = int(min(max(layer, 0), n_layers - 1))
    if w.size > MAX_CELLS:  # a long text: send the chosen layer only
        w, layer_ids, model_view = w[layer : layer + 1], [layer], False
    else:
        layer_ids = list(range(n_layers))
    shown = sorted({int(h) for h in (range(n_heads) if heads is None else heads) if 0 <= int(h) < n_heads})
    data = {
        "tokens": [str(tok) for tok in tokens],
        "layers": layer_ids,
        "layer": layer_ids.index(layer),
        "heads": n_heads,
        "shown": shown or list(range(n_heads)),
        "colours": [head_colour(h) for h in range(n_heads)],
        "links": sparse_layers(w, min_weight),
        "modelView": bool(model_view),
        "row": ROW,
        "tileH": tile_height(t),
        "minWeight": min_weight,
    }
    uid = "hv" + uuid.uuid4().hex[:10]
    height = views_height(t, len(layer_ids), n_heads, model_view)
    note = html.escape(f"lines below a weight of {min_weight:g} are not drawn")
    page = _PAGE.replace("__UID__", uid).replace("__NOTE__", note).replace("__DATA__", _safe_json(data))
    return page, height


_PAGE = """<!doctype html>
<html><head><meta charset="utf-8">
<style>
  body { margin: 0; font-family: "Source Sans Pro", "Source Sans 3", system-ui, sans-serif; color: #262730; }
  #__UID__ .bar { display: flex; flex-wrap: wrap; align-items: center; gap: 6px 14px; margin: 4px 0 8px; }
  #__UID__ .heads { display: flex; flex-wrap: wrap; gap: 4px; }
  #__UID__ .head { width: 30px; height: 24px; border-radius: 4px; border: 2px solid transparent; color: white;
    font: 600 12px/20px system-ui, sans-serif; text-align: center; cursor: pointer; user-select: none; }
  #__UID__ .head.off { opacity: 0.22; }
  #__UID__ button { font: 13px system-ui, sans-serif; padding: 2px 8px; cursor: pointer; }
  #__UID__ select { font: 14px system-ui, sans-serif; }
  #__UID__ .note { font-size: 13px; color: #5f6368; }
  #__UID__ .scale { display: inline-flex; align-items: center; gap: 6px; font-size: 13px; color: #5f6368; }
  #__UID__ .scale span.grad { display: inline-block; width: 120px; height: 12px; border: 1px solid #bbb;
    background: linear-gradient(to right, rgba(38,39,48,0), rgba(38,39,48,1)); }
  #__UID__ svg text { font-size: 16px; dominant-baseline: middle; cursor: default; }
  #__UID__ svg text.dim { fill: #b0b0b0; }
  #__UID__ .grid { display: grid; gap: 6px; align-items: center; }
  #__UID__ .grid canvas { border: 2px solid #e6e6e6; border-radius: 3px; cursor: pointer; background: white; }
  #__UID__ .grid canvas.active { border-color: #262730; }
  #__UID__ .lab { font-size: 12px; color: #5f6368; text-align: center; }
  #__UID__ h4 { margin: 18px 0 4px; font-size: 17px; }
</style></head>
<body><div id="__UID__">
  <div class="bar">
    <label>Layer <select class="layer"></select></label>
    <div class="heads"></div>
    <button class="all">all heads</button><button class="none">one head</button>
    <span class="scale">weight 0 <span class="grad"></span> 1</span>
  </div>
  <div class="note">Click a head's square to hide or show it, double-click to show it alone. Hover a token to keep
  only its lines; bars beside the other column give each head's weight. Opacity = attention weight, one scale for
  every head (__NOTE__).</div>
  <svg class="hv"></svg>
  <div class="mv"></div>
</div>
<script type="application/json" id="__UID__-data">__DATA__</script>
<script>
(function () {
  "use strict";
  const D = JSON.parse(document.getElementById("__UID__-data").textContent);
  const root = document.getElementById("__UID__");
  const NS = "http://www.w3.org/2000/svg";
  const T = D.tokens.length, ROW = D.row, TOP = 10;
  let layer = D.layer, hover = null;  // hover: {side: "left"|"right", index}
  const on = new Array(D.heads).fill(false);
  D.shown.forEach(h => { on[h] = true; });

  function el(name, attrs, parent) {
    const e = document.createElementNS(NS, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  // token widths: measured once with a hidden text element
  const svg = root.querySelector("svg.hv");
  const probe = el("text", {x: 0, y: 0}, svg);
  let widest = 40;
  D.tokens.forEach(t => { probe.textContent = t; widest = Math.max(widest, probe.getComputedTextLength()); });
  svg.removeChild(probe);
  const AVAIL = Math.max(480, root.clientWidth || 800);
  const BOX = Math.min(220, widest + 16), BARS = Math.min(110, Math.max(60, AVAIL / 10));
  const GAP = Math.max(160, Math.min(420, AVAIL - 2 * BOX - 2 * BARS - 24));
  const WIDTH = BOX * 2 + GAP + BARS * 2 + 20;
  svg.setAttribute("width", WIDTH);
  svg.setAttribute("height", TOP + T * ROW + 10);
  const xl = BARS + BOX, xr = xl + GAP;  // bars | left tokens | lines | right tokens | bars
  const y = i => TOP + i * ROW + ROW / 2;

  const layerSel = root.querySelector("select.layer");
  D.layers.forEach((l, k) => { const o = document.createElement("option"); o.value = k; o.textContent = l;
    layerSel.appendChild(o); });
  layerSel.value = layer;
  layerSel.addEventListener("change", () => { layer = +layerSel.value; draw(); });

  const headsBox = root.querySelector(".heads");
  const squares = [];
  for (let h = 0; h < D.heads; h++) {
    const s = document.createElement("div");
    s.className = "head"; s.textContent = h; s.style.background = D.colours[h];
    s.title = "head " + h + ": click to hide/show, double-click to show alone";
    s.addEventListener("click", () => { on[h] = !on[h]; draw(); });
    s.addEventListener("dblclick", () => { on.fill(false); on[h] = true; draw(); });
    headsBox.appendChild(s); squares.push(s);
  }
  root.querySelector("button.all").addEventListener("click", () => { on.fill(true); draw(); });
  root.querySelector("button.none").addEventListener("click", () => {
    const first = Math.max(0, on.indexOf(true)); on.fill(false); on[first] = true; draw(); });

  const gLines = el("g", {}, svg), gBars = el("g", {}, svg), gText = el("g", {}, svg);
  const left = [], right = [];
  D.tokens.forEach((t, i) => {
    const a = el("text", {x: xl - 8, y: y(i), "text-anchor": "end"}, gText); a.textContent = t;
    const b = el("text", {x: xr + 8, y: y(i), "text-anchor": "start"}, gText); b.textContent = t;
    a.addEventListener("mouseenter", () => { hover = {side: "left", index: i}; draw(); });
    b.addEventListener("mouseenter", () => { hover = {side: "right", index: i}; draw(); });
    a.addEventListener("mouseleave", () => { hover = null; draw(); });
    b.addEventListener("mouseleave", () => { hover = null; draw(); });
    left.push(a); right.push(b);
  });

  function draw() {
    squares.forEach((s, h) => s.classList.toggle("off", !on[h]));
    layerSel.value = layer;
    gLines.replaceChildren(); gBars.replaceChildren();
    const active = on.reduce((n, v) => n + (v ? 1 : 0), 0) || 1;
    const heads = D.links[layer];
    const barW = BARS / active;
    let slot = 0;
    for (let h = 0; h < D.heads; h++) {
      if (!on[h]) continue;
      const L = heads[h];
      for (let k = 0; k < L.length; k += 3) {
        const i = L[k], j = L[k + 1], w = L[k + 2] / 1000;
        if (hover && ((hover.side === "left" && i !== hover.index) || (hover.side === "right" && j !== hover.index)))
          continue;
        const op = hover ? Math.min(1, 0.1 + w) : Math.min(1, w * (active > 4 ? 0.8 : 1));
        // each head's lines run a little apart from the others' so that colours do not mix where they overlap
        const dy = (slot - (active - 1) / 2) * Math.min(2.5, (ROW - 8) / active);
        el("line", {x1: xl, y1: y(i) + dy, x2: xr, y2: y(j) + dy, stroke: D.colours[h],
          "stroke-width": hover ? 2.5 : 2, "stroke-opacity": op.toFixed(3)}, gLines);
        if (hover) {  // a bar per head beside the tokens on the other side, as long as the weight
          const other = hover.side === "left" ? j : i;
          const x = hover.side === "left" ? xr + BOX + 6 + slot * barW : 2 + slot * barW;
          const r = el("rect", {x: x, y: y(other) - ROW / 2 + 3, width: Math.max(1, barW - 1),
            height: (ROW - 6), fill: D.colours[h], "fill-opacity": Math.max(0.08, w).toFixed(3)}, gBars);
          const tip = el("title", {}, r);
          tip.textContent = "head " + h + ": " + D.tokens[i] + " \\u2192 " + D.tokens[j] + " " + w.toFixed(3);
        }
      }
      slot += 1;
    }
    left.forEach((e, i) => e.setAttribute("class", hover && hover.side === "right" ? "" :
      (hover && hover.index !== i ? "dim" : "")));
    right.forEach((e, i) => e.setAttribute("class", hover && hover.side === "left" ? "" :
      (hover && hover.index !== i ? "dim" : "")));
    drawTiles();
  }

  // ---- model view: every layer x head on one scale ----
  const tiles = [];
  if (D.modelView) {
    const mv = root.querySelector(".mv");
    const h4 = document.createElement("h4"); h4.textContent = "Model view: every layer \\u00d7 head"; mv.appendChild(h4);
    const note = document.createElement("div"); note.className = "note";
    note.textContent = "Each tile is a small head view (tokens top to bottom on both sides; line opacity = weight, " +
      "the same 0\\u20131 scale in every tile, as in the bar above). Click a tile to show it above.";
    mv.appendChild(note);
    const TW = Math.max(48, Math.min(120, Math.floor((AVAIL - 70) / D.heads) - 10)), TH = D.tileH;
    const grid = document.createElement("div"); grid.className = "grid";
    grid.style.gridTemplateColumns = "56px repeat(" + D.heads + ", " + (TW + 4) + "px)";
    grid.appendChild(document.createElement("div"));
    for (let h = 0; h < D.heads; h++) {
      const lab = document.createElement("div"); lab.className = "lab"; lab.textContent = "head " + h;
      lab.style.color = D.colours[h]; lab.style.fontWeight = "600"; grid.appendChild(lab);
    }
    D.layers.forEach((l, k) => {
      const lab = document.createElement("div"); lab.className = "lab"; lab.textContent = "layer " + l;
      grid.appendChild(lab);
      for (let h = 0; h < D.heads; h++) {
        const c = document.createElement("canvas");
        const dpr = window.devicePixelRatio || 1;
        c.width = TW * dpr; c.height = TH * dpr; c.style.width = TW + "px"; c.style.height = TH + "px";
        c.title = "layer " + l + ", head " + h;
        const ctx = c.getContext("2d"); ctx.scale(dpr, dpr);
        const yy = i => 4 + (T > 1 ? i * (TH - 8) / (T - 1) : (TH - 8) / 2);
        ctx.strokeStyle = D.colours[h]; ctx.lineWidth = 1.2;
        const L = D.links[k][h];
        for (let q = 0; q < L.length; q += 3) {
          ctx.globalAlpha = Math.min(1, L[q + 2] / 1000);
          ctx.beginPath(); ctx.moveTo(8, yy(L[q])); ctx.lineTo(TW - 8, yy(L[q + 1])); ctx.stroke();
        }
        c.addEventListener("click", () => { layer = k; on.fill(false); on[h] = true; draw();
          root.scrollIntoView({behavior: "smooth"}); });
        grid.appendChild(c); tiles.push({c: c, k: k, h: h});
      }
    });
    mv.appendChild(grid);
  }
  function drawTiles() { tiles.forEach(t => t.c.classList.toggle("active", t.k === layer && on[t.h])); }
  draw();
})();
</script></body></html>
"""
