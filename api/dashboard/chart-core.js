// The chart panel every view draws with (job page, compare, system): a header with the
// panel's title and a log/linear toggle, a uPlot chart whose y ticks share one number
// format and whose axis is as wide as its widest tick, and drag-to-zoom shared by a group
// of panels that holds while new points arrive, until a double-click.
//
//   const group = new ZoomGroup();
//   const panel = new ChartPanel(container, { key: "loss", title: "loss", group });
//   panel.render([{ label: "train_loss", stroke: "#2563eb" }], [[1, 2], [0.9, 0.7]]);
"use strict";

const PALETTE = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2",
                 "#be185d", "#4b5563"];
// Steps are whole numbers: x ticks step by 1, 2, 5, 10, 20, 50, ...
const STEP_INCREMENTS = [1, 2, 5].flatMap((m) => [1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7].map((p) => m * p))
  .sort((a, b) => a - b);
const X_LABELS = { step: "step", epoch: "epoch", wall: "time", relative: "time since start" };

function formatNumber(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(3) : String(+v.toFixed(5));
}

// One format for all of an axis's ticks: either every tick in exponent form with the same
// mantissa digits, or every tick fixed with the same decimals (never "0.001" next to "1e-4").
function formatTicks(ticks, log = false) {
  const finite = ticks.filter((t) => Number.isFinite(t));
  const positive = finite.filter((t) => t > 0);
  // A log axis spanning three decades reads better as 1e-3 ... 1e0 than 0.001 ... 1.000.
  const wide = log && positive.length > 1 && Math.max(...positive) / Math.min(...positive) >= 1e3;
  const exponent = wide || finite.some((t) => t !== 0 && (Math.abs(t) < 1e-3 || Math.abs(t) >= 1e5));
  if (exponent) {
    let digits = 0;  // the fewest mantissa digits that write every tick exactly
    while (digits < 3 && finite.some((t) => Math.abs(+t.toExponential(digits) - t) > 1e-9 * Math.abs(t))) digits++;
    return ticks.map((t) => (Number.isFinite(t) ? t.toExponential(digits).replace("e+", "e") : ""));
  }
  let decimals = 0;
  for (const t of finite) {
    const text = String(+t.toFixed(6));
    const dot = text.indexOf(".");
    if (dot >= 0) decimals = Math.max(decimals, text.length - dot - 1);
  }
  return ticks.map((t) => (Number.isFinite(t) ? t.toFixed(decimals) : ""));
}

// Seconds as "1h 05m" / "4m 10s" / "12s" for a relative-time axis.
function formatSpan(seconds) {
  const s = Math.round(seconds);
  if (Math.abs(s) < 60) return `${s}s`;
  if (Math.abs(s) < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

// TensorBoard's smoothing: a debiased exponential moving average, gaps left alone.
function smoothEma(values, weight) {
  const out = new Array(values.length);
  let last = 0, count = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === null || !Number.isFinite(v)) { out[i] = v; continue; }
    last = last * weight + (1 - weight) * v;
    count++;
    out[i] = last / (1 - weight ** count);
  }
  return out;
}

function fade(hex, alpha) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${n >> 16},${(n >> 8) & 255},${n & 255},${alpha})`;
}

// A y axis as wide as its widest tick label (uPlot's autosize recipe), so labels never
// run into the panel's edge or title.
function fittedAxisSize(u, values, axisIdx, cycleNum) {
  const axis = u.axes[axisIdx];
  if (cycleNum > 1) return axis._size;
  let size = axis.ticks.size + axis.gap + 8;
  const longest = (values ?? []).reduce((acc, v) => (String(v).length > acc.length ? String(v) : acc), "");
  if (longest) { u.ctx.font = axis.font[0]; size += u.ctx.measureText(longest).width / devicePixelRatio; }
  return Math.ceil(size);
}

// Panels that zoom together: a drag in one sets the x range of all; the range holds when
// new data arrives (each render re-applies it) until a double-click in any of them.
class ZoomGroup {
  constructor() { this.panels = new Set(); this.range = null; }

  add(panel) { this.panels.add(panel); }

  remove(panel) { this.panels.delete(panel); }

  zoomTo(range) {
    if (!(range.max > range.min)) return;
    this.range = range;
    for (const p of this.panels) p.applyZoom();
  }

  reset() {
    this.range = null;
    for (const p of this.panels) p.applyZoom();
  }
}

class ChartPanel {
  constructor(parent, { key, title, group, log = false, height = 220, logToggle = true,
                        onLogChange = null, decorate = null, yRange = null }) {
    this.key = key;
    this.group = group;
    this.log = log;
    this.height = height;
    this.decorate = decorate;     // (u) => void: epochs, markers drawn over the plot
    this.yRange = yRange;         // (u, min, max) => [lo, hi] on a linear scale, else auto
    this.onLogChange = onLogChange;
    this.element = document.createElement("div");
    this.element.className = "panel";
    this.element.dataset.family = key;
    const head = document.createElement("div");
    head.className = "panel-head";
    this.titleElement = document.createElement("span");
    this.titleElement.className = "panel-title";
    this.titleElement.textContent = title;
    head.append(this.titleElement);
    if (logToggle) {
      this.logButton = document.createElement("button");
      this.logButton.type = "button";
      this.logButton.className = "log-toggle";
      this.logButton.addEventListener("click", () => this.setLog(!this.log));
      head.append(this.logButton);
      this.updateLogButton();
    }
    this.body = document.createElement("div");
    this.element.append(head, this.body);
    parent.append(this.element);
    this.plot = null;
    this.signature = null;
    this.xMode = "step";
    group.add(this);
  }

  updateLogButton() {
    if (!this.logButton) return;
    this.logButton.textContent = this.log ? "log scale" : "linear scale";
    this.logButton.setAttribute("aria-pressed", String(this.log));
    this.logButton.title = `switch to ${this.log ? "linear" : "log"} scale`;
    this.element.dataset.scale = this.log ? "log" : "linear";
  }

  setLog(log) {
    this.log = log;
    this.updateLogButton();
    this.signature = null;  // the y scale's distribution is fixed when a plot is built
    if (this.onLogChange) this.onLogChange(this.key, log);
  }

  destroy() {
    if (this.plot) this.plot.destroy();
    this.group.remove(this);
    this.element.remove();
  }

  width() { return Math.max(280, (this.element.clientWidth || 900) - 4); }

  // series: [{label, stroke, width?, dash?}]; data: [xs, ys...] (null where no point).
  // A log axis cannot show values <= 0: they become gaps.
  render(series, data, { xMode = "step" } = {}) {
    if (this.log) data = [data[0], ...data.slice(1).map((ys) => ys.map((v) => (v > 0 ? v : null)))];
    const signature = JSON.stringify([series.map((s) => [s.label, s.stroke, s.dash, s.width]),
                                      this.log, xMode]);
    this.xMode = xMode;
    if (signature !== this.signature || !this.plot) {
      if (this.plot) this.plot.destroy();
      this.body.textContent = "";
      this.plot = new uPlot(this.options(series, xMode), data, this.body);
      this.signature = signature;
      this.applyZoom();
      return;
    }
    // setData re-fits x to the data, pending until the batch commits (plot.scales still
    // shows the old range meanwhile): set the zoom unconditionally, in the same batch.
    this.plot.batch(() => {
      this.plot.setData(data, true);
      if (this.group.range) this.plot.setScale("x", this.group.range);
    });
  }

  applyZoom() {
    if (!this.plot) return;
    const range = this.group.range ?? this.dataRange();
    if (range) this.setX(range);
  }

  dataRange() {
    const xs = this.plot.data[0];
    return xs && xs.length ? { min: xs[0], max: xs[xs.length - 1] } : null;
  }

  setX(range) {
    const s = this.plot.scales.x;
    if (s.min === range.min && s.max === range.max) return;
    this.plot.setScale("x", range);
  }

  resize() { if (this.plot) this.plot.setSize({ width: this.width(), height: this.height }); }

  xAxis(xMode) {
    const axis = { label: X_LABELS[xMode], stroke: "#4b5563", grid: { stroke: "#eef0f3" } };
    if (xMode === "step") axis.incrs = STEP_INCREMENTS;
    if (xMode === "relative") axis.values = (u, ticks) => ticks.map(formatSpan);
    if (xMode === "epoch") axis.values = (u, ticks) => ticks.map((t) => String(+t.toFixed(2)));
    return axis;
  }

  options(series, xMode) {
    return {
      width: this.width(), height: this.height,
      scales: { x: { time: xMode === "wall" },
                y: this.log ? { distr: 3 } : (this.yRange ? { range: this.yRange } : {}) },
      axes: [
        this.xAxis(xMode),
        { stroke: "#4b5563", grid: { stroke: "#eef0f3" }, size: fittedAxisSize,
          values: (u, ticks) => formatTicks(ticks, this.log) },
      ],
      series: [{ label: X_LABELS[xMode] }, ...series.map((s) => ({
        label: s.label, stroke: s.stroke, width: s.width ?? 1.5, dash: s.dash, spanGaps: true,
        points: { show: false }, value: (u, v) => formatNumber(v),
      }))],
      cursor: { sync: { key: `zoom-${this.groupId()}` }, drag: { x: true, y: false, setScale: false } },
      legend: { live: true },
      hooks: {
        draw: [(u) => { if (this.decorate) this.decorate(u, this); }],
        setSelect: [(u) => this.onSelect(u)],
        ready: [(u) => u.over.addEventListener("dblclick", () => this.group.reset())],
      },
    };
  }

  groupId() {
    if (!this.group.id) this.group.id = Math.random().toString(36).slice(2);
    return this.group.id;
  }

  // A drag ends here: zoom the whole group to the dragged x range.
  onSelect(u) {
    const { left, width } = u.select;
    if (width < 3) return;
    const range = { min: u.posToVal(left, "x"), max: u.posToVal(left + width, "x") };
    u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
    this.group.zoomTo(range);
  }
}
