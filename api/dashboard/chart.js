// A small line chart drawn on <canvas>: one series per metric name, x = step.
// Loss-like and accuracy-like metrics differ in scale, so each series is normalised
// to its own min..max and the legend shows its latest value.
"use strict";

const PALETTE = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2",
                 "#be185d", "#4b5563"];

class MetricChart {
  constructor(canvas, legend) {
    this.canvas = canvas;
    this.legend = legend;
    this.series = new Map();   // name -> [[step, value], ...] sorted by step
    this.pending = false;
  }

  clear() {
    this.series.clear();
    this.requestDraw();
  }

  add(name, step, value) {
    if (!Number.isFinite(value)) return;
    let points = this.series.get(name);
    if (!points) { points = []; this.series.set(name, points); }
    const last = points[points.length - 1];
    if (last && last[0] === step) { last[1] = value; }
    else if (!last || last[0] < step) { points.push([step, value]); }
    else {  // out of order (history arriving after live events): insert in place
      const at = points.findIndex((p) => p[0] >= step);
      if (points[at][0] === step) points[at][1] = value; else points.splice(at, 0, [step, value]);
    }
    this.requestDraw();
  }

  pointCount() {
    let n = 0;
    for (const points of this.series.values()) n += points.length;
    return n;
  }

  requestDraw() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => { this.pending = false; this.draw(); });
  }

  draw() {
    const ctx = this.canvas.getContext("2d");
    const { width, height } = this.canvas;
    const pad = { left: 48, right: 12, top: 12, bottom: 28 };
    ctx.clearRect(0, 0, width, height);
    this.canvas.dataset.points = String(this.pointCount());
    let minStep = Infinity, maxStep = -Infinity;
    for (const points of this.series.values()) {
      if (!points.length) continue;
      minStep = Math.min(minStep, points[0][0]);
      maxStep = Math.max(maxStep, points[points.length - 1][0]);
    }
    ctx.strokeStyle = "#e5e7eb";
    ctx.fillStyle = "#6b7280";
    ctx.font = "11px system-ui, sans-serif";
    ctx.strokeRect(pad.left, pad.top, width - pad.left - pad.right,
                   height - pad.top - pad.bottom);
    if (!Number.isFinite(minStep)) {
      ctx.fillText("waiting for metrics…", pad.left + 10, pad.top + 20);
      this.legend.textContent = "";
      return;
    }
    if (maxStep === minStep) maxStep = minStep + 1;
    const plotW = width - pad.left - pad.right, plotH = height - pad.top - pad.bottom;
    const x = (step) => pad.left + ((step - minStep) / (maxStep - minStep)) * plotW;
    for (let i = 0; i <= 4; i++) {  // step ticks
      const step = Math.round(minStep + ((maxStep - minStep) * i) / 4);
      ctx.fillText(String(step), x(step) - 8, height - 10);
    }
    ctx.fillText("step", width - pad.right - 24, height - 10);
    this.legend.textContent = "";
    let colour = 0;
    for (const [name, points] of this.series) {
      const stroke = PALETTE[colour++ % PALETTE.length];
      let lo = Infinity, hi = -Infinity;
      for (const [, v] of points) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
      const span = hi - lo || Math.abs(hi) || 1;
      const y = (v) => pad.top + plotH - ((v - lo) / span) * (plotH - 4) - 2;
      ctx.strokeStyle = stroke;
      ctx.lineWidth = 1.5;
      ctx.beginPath();
      points.forEach(([s, v], i) => (i ? ctx.lineTo(x(s), y(v)) : ctx.moveTo(x(s), y(v))));
      ctx.stroke();
      if (points.length === 1) ctx.fillRect(x(points[0][0]) - 2, y(points[0][1]) - 2, 4, 4);
      const item = document.createElement("span");
      const swatch = document.createElement("i");
      swatch.style.background = stroke;
      item.append(swatch, `${name} ${formatNumber(points[points.length - 1][1])}` +
                  ` (${formatNumber(lo)}–${formatNumber(hi)})`);
      this.legend.append(item);
    }
  }
}

function formatNumber(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(3) : String(+v.toFixed(5));
}
