// Metric charts on uPlot (served from /vendor/, pinned in package-lock.json): one panel per
// metric family (loss, other metrics, learning rate on a log axis), x = step, epoch
// boundaries and runtime changes (lr, pause/resume, restarts, checkpoints) as markers.
//
//   const panels = new MetricPanels(document.querySelector("#charts"));
//   panels.addPoint("train_loss", 10, 0.52, 0);   // live: drawn on the next frame
//   panels.setMarkers([{kind: "lr", step: 31, title: "lr 0.01", detail: "..."}]);
"use strict";

const PALETTE = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2",
                 "#be185d", "#4b5563"];
const FAMILIES = [
  { key: "loss", label: "loss", test: (n) => /loss|entropy|perplexity|nll|mse|mae/i.test(n) },
  { key: "lr", label: "learning rate (log)", test: (n) => /(^|[_-])lr$|learning_rate/i.test(n) },
  { key: "metrics", label: "metrics", test: () => true },
];
// Steps are whole numbers: x ticks step by 1, 2, 5, 10, 20, 50, ...
const STEP_INCREMENTS = [1, 2, 5].flatMap((m) => [1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7].map((p) => m * p))
  .sort((a, b) => a - b);
const MARKER_COLOURS = { lr: "#7c3aed", status: "#d97706", checkpoint: "#059669" };

function familyOf(name) {
  return FAMILIES.find((f) => f.key === "lr" && f.test(name))?.key
    ?? FAMILIES.find((f) => f.test(name)).key;
}

// "val_loss" and "train_loss" share a colour; val is dashed, so they read as a pair.
function baseName(name) { return name.replace(/^(train|val|validation|test)[_-]/i, ""); }
function isValidation(name) { return /^(val|validation|test)[_-]/i.test(name); }
function splitOf(name) { return (/^(train|val|validation|test)[_-]/i.exec(name) || [""])[0]; }

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

// Points of one metric, sorted by step (the same step again replaces its value).
class PointStore {
  constructor() { this.series = new Map(); this.epochStarts = new Map(); }

  clear() { this.series.clear(); this.epochStarts.clear(); }

  add(name, step, value) {
    let s = this.series.get(name);
    if (!s) { s = { steps: [], values: [] }; this.series.set(name, s); }
    const n = s.steps.length;
    if (n === 0 || s.steps[n - 1] < step) { s.steps.push(step); s.values.push(value); return "append"; }
    let lo = 0, hi = n;  // binary search: history can arrive after live points
    while (lo < hi) { const mid = (lo + hi) >> 1; if (s.steps[mid] < step) lo = mid + 1; else hi = mid; }
    if (s.steps[lo] === step) { s.values[lo] = value; return "replace"; }
    s.steps.splice(lo, 0, step); s.values.splice(lo, 0, value);
    return "insert";
  }

  noteEpoch(epoch, step) {
    const known = this.epochStarts.get(epoch);
    if (known === undefined || step < known) this.epochStarts.set(epoch, step);
  }

  count() { let n = 0; for (const s of this.series.values()) n += s.steps.length; return n; }
}

// Two series hold the same numbers (softmax cross-entropy loss vs the cross-entropy
// metric): draw one, name both.
function identical(a, b) {
  if (a.steps.length < 3 || a.steps.length !== b.steps.length) return false;
  for (let i = 0; i < a.steps.length; i++) {
    if (a.steps[i] !== b.steps[i]) return false;
    if (Math.abs(a.values[i] - b.values[i]) > 1e-9 * Math.max(1, Math.abs(a.values[i]))) return false;
  }
  return true;
}

class MetricPanels {
  constructor(container) {
    this.container = container;
    this.store = new PointStore();
    this.panels = new Map();      // family key -> {plot, names, element}
    this.aliases = new Map();     // hidden name -> the name drawn for it
    this.markers = [];
    this.smoothing = 0;
    this.zoom = null;             // {min, max} of x while the user has zoomed in
    this.structureChanged = false;
    this.pending = false;
    this.syncing = false;
    window.addEventListener("resize", () => this.resize());
  }

  clear() {
    for (const p of this.panels.values()) p.plot.destroy();
    this.panels.clear();
    this.container.textContent = "";
    this.store.clear();
    this.aliases.clear();
    this.markers = [];
    this.zoom = null;
    this.requestDraw();
  }

  addPoint(name, step, value, epoch) {
    if (!Number.isFinite(value)) return;
    if (!this.store.series.has(name)) this.structureChanged = true;
    this.store.add(name, step, value);
    if (epoch !== undefined && epoch !== null) this.store.noteEpoch(epoch, step);
    this.requestDraw();
  }

  setEpochs(boundaries) {
    for (const b of boundaries) this.store.noteEpoch(b.epoch, b.first_step);
    this.requestDraw();
  }

  setMarkers(entries) { this.markers = entries.filter((e) => e.step !== null); this.requestDraw(); }

  setSmoothing(weight) {
    const toggled = (weight > 0) !== (this.smoothing > 0);
    this.smoothing = weight;
    if (toggled) this.structureChanged = true;
    this.requestDraw();
  }

  requestDraw() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => { this.pending = false; this.flush(); });
  }

  // Once per frame at most: rebuild panels only when the set of series changed, else
  // hand each panel its new columns (uPlot redraws just that canvas).
  flush() {
    this.findAliases();
    if (this.structureChanged) { this.structureChanged = false; this.rebuild(); }
    for (const [, panel] of this.panels) panel.plot.setData(this.columns(panel), !this.zoom);
    if (this.zoom) for (const p of this.panels.values()) this.setX(p.plot, this.zoom);
    this.container.dataset.points = String(this.store.count());
    this.container.dataset.series = String(this.store.series.size);
    this.container.classList.toggle("empty", this.store.series.size === 0);
  }

  findAliases() {
    // A twin whose newest value parted from its kept series is drawn on its own again.
    for (const [hidden, kept] of this.aliases) {
      const a = this.store.series.get(hidden), b = this.store.series.get(kept);
      const [ia, ib] = [a.steps.length - 1, b.steps.length - 1];
      if (a.steps[ia] === b.steps[ib] && a.values[ia] !== b.values[ib]) {
        this.aliases.delete(hidden);
        this.structureChanged = true;
      }
    }
    const names = [...this.store.series.keys()].filter((n) => !this.aliases.has(n));
    for (let i = 0; i < names.length; i++) {
      for (let j = i + 1; j < names.length; j++) {
        const [a, b] = [names[i], names[j]];
        // Only metrics of one split are twins: train and val agreeing is news, not noise.
        if (this.aliases.has(b) || familyOf(a) !== familyOf(b) || splitOf(a) !== splitOf(b)) continue;
        if (identical(this.store.series.get(a), this.store.series.get(b))) {
          this.aliases.set(b, a);
          this.structureChanged = true;
        }
      }
    }
  }

  drawnNames(family) {
    return [...this.store.series.keys()]
      .filter((n) => familyOf(n) === family && !this.aliases.has(n)).sort();
  }

  // uPlot wants one x array and aligned y arrays (null where a series has no point).
  columns(panel) {
    const all = panel.names.map((n) => this.store.series.get(n));
    let xs;
    if (all.length === 1) xs = all[0].steps;
    else xs = [...new Set(all.flatMap((s) => s.steps))].sort((a, b) => a - b);
    const data = [xs];
    for (const s of all) {
      let ys = s.values;
      if (all.length > 1) {
        ys = new Array(xs.length).fill(null);
        let j = 0;
        for (let i = 0; i < s.steps.length; i++) {
          while (xs[j] < s.steps[i]) j++;
          ys[j] = s.values[i];
        }
      }
      data.push(ys);
      if (this.smoothing > 0) data.push(smoothEma(ys, this.smoothing));
    }
    return data;
  }

  rebuild() {
    for (const p of this.panels.values()) p.plot.destroy();
    this.panels.clear();
    this.container.textContent = "";
    for (const family of FAMILIES) {
      const names = this.drawnNames(family.key);
      if (!names.length) continue;
      const element = document.createElement("div");
      element.className = "panel";
      element.dataset.family = family.key;
      this.container.append(element);
      const plot = new uPlot(this.options(family, names), [[]], element);
      this.panels.set(family.key, { plot, names, element });
    }
  }

  label(name) {
    const twins = [...this.aliases].filter(([, kept]) => kept === name).map(([hidden]) => hidden);
    return twins.length ? `${name} = ${twins.join(" = ")}` : name;
  }

  options(family, names) {
    const bases = [...new Set([...this.store.series.keys()].map(baseName))].sort();
    const series = [{ label: "step" }];
    for (const name of names) {
      const colour = PALETTE[bases.indexOf(baseName(name)) % PALETTE.length];
      const dash = isValidation(name) ? [6, 4] : undefined;
      series.push({
        label: this.label(name), width: 1.5, dash, spanGaps: true, points: { show: false },
        stroke: () => (this.smoothing > 0 ? fade(colour, 0.25) : colour),
        value: (u, v) => formatNumber(v),
      });
      if (this.smoothing > 0) {
        series.push({ label: `${name} (smoothed)`, stroke: colour, width: 2, dash,
                      spanGaps: true, points: { show: false }, value: (u, v) => formatNumber(v) });
      }
    }
    const log = family.key === "lr";
    return {
      width: this.width(), height: 220, title: family.label,
      scales: { x: { time: false }, y: log ? { distr: 3 } : {} },
      axes: [
        { label: "step", stroke: "#4b5563", grid: { stroke: "#eef0f3" }, incrs: STEP_INCREMENTS },
        { label: family.label, size: 64, stroke: "#4b5563", grid: { stroke: "#eef0f3" },
          values: (u, ticks) => ticks.map((t) => formatNumber(t)) },
      ],
      series,
      cursor: { sync: { key: "rudder-job" }, drag: { x: true, y: false } },
      legend: { live: true },
      hooks: {
        draw: [(u) => this.drawEpochs(u)],
        setScale: [(u, key) => this.onZoom(u, key)],
        ready: [(u) => u.over.addEventListener("dblclick", () => { this.zoom = null; })],
      },
    };
  }

  width() { return Math.max(320, (this.container.clientWidth || 900) - 8); }

  resize() { for (const p of this.panels.values()) p.plot.setSize({ width: this.width(), height: 220 }); }

  setX(plot, range) {
    const s = plot.scales.x;
    if (s.min === range.min && s.max === range.max) return;
    this.syncing = true;
    plot.setScale("x", range);
    this.syncing = false;
  }

  // A drag-zoom in one panel zooms them all (double-click returns to everything).
  onZoom(u, key) {
    if (key !== "x" || this.syncing) return;
    const range = { min: u.scales.x.min, max: u.scales.x.max };
    if (u.select.width > 0) this.zoom = range;
    for (const p of this.panels.values()) if (p.plot !== u) this.setX(p.plot, range);
  }

  drawEpochs(u) {
    const ctx = u.ctx;
    const { top, height } = u.bbox;
    ctx.save();
    ctx.strokeStyle = "#9ca3af";
    ctx.fillStyle = "#6b7280";
    ctx.setLineDash([2, 4]);
    ctx.font = `${10 * devicePixelRatio}px system-ui, sans-serif`;
    for (const [epoch, step] of this.store.epochStarts) {
      if (epoch === 0 || step < u.scales.x.min || step > u.scales.x.max) continue;
      const x = Math.round(u.valToPos(step, "x", true));
      ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, top + height); ctx.stroke();
      ctx.fillText(`epoch ${epoch}`, x + 3, top + 12 * devicePixelRatio);
    }
    ctx.restore();
    this.placeMarkers(u);
  }

  // Markers are elements over the plot, so they can be hovered, focused and tested.
  placeMarkers(u) {
    for (const old of u.over.querySelectorAll(".marker")) old.remove();
    for (const entry of this.markers) {
      if (entry.step < u.scales.x.min || entry.step > u.scales.x.max) continue;
      const mark = document.createElement("div");
      mark.className = `marker marker-${entry.kind}`;
      mark.dataset.step = String(entry.step);
      mark.dataset.kind = entry.kind;
      mark.tabIndex = 0;
      const x = u.valToPos(entry.step, "x");
      mark.style.left = `${x}px`;
      // Near the right edge the hover text opens leftwards so it stays on the page.
      if (x > u.over.clientWidth * 0.6) mark.classList.add("tip-left");
      mark.style.borderColor = MARKER_COLOURS[entry.kind] || "#111827";
      const tip = document.createElement("span");
      tip.className = "marker-tip";
      tip.textContent = `step ${entry.step}: ${entry.title}${entry.detail ? ` (${entry.detail})` : ""}`;
      mark.append(tip);
      u.over.append(mark);
    }
  }
}

function formatNumber(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(3) : String(+v.toFixed(5));
}
