// The job page's metric charts: one ChartPanel per metric family (loss, metrics, learning
// rate), zoomed together; the x axis in steps, epochs, wall-clock or relative time; epoch
// boundaries and runtime changes as markers; abandoned branches (rollbacks) and the
// lineage's curves (the parent up to the fork, each child from its fork) drawn faded.
//
//   const panels = new MetricPanels(document.querySelector("#charts"));
//   panels.addPoint("train_loss", 10, 0.52, 0, 1700000000.5);  // drawn on the next frame
//   panels.setMarkers([{kind: "lr", step: 31, title: "lr 0.01", detail: "..."}]);
"use strict";

const EXTRA_STYLES = {
  abandoned: { alpha: 0.3, dash: [3, 3] },  // rolled back: what the run was, not what it is
  parent: { alpha: 0.4, dash: [1, 3] },
  child: { alpha: 0.55, dash: [8, 4] },
};

class MetricPanels {
  constructor(container) {
    this.container = container;
    this.store = new PointStore();
    this.group = new ZoomGroup();
    this.panels = new Map();      // family key -> ChartPanel
    this.aliases = new Map();     // hidden name -> the name drawn for it
    this.extras = [];             // {name, label, steps, values, kind}
    this.markers = [];
    this.smoothing = 0;
    this.xMode = "step";
    this.logScale = new Map([["lr", true]]);
    this.pending = false;
    window.addEventListener("resize", () => { for (const p of this.panels.values()) p.resize(); });
  }

  clear() {
    for (const p of this.panels.values()) p.destroy();
    this.panels.clear();
    this.container.textContent = "";
    this.store.clear();
    this.aliases.clear();
    this.extras = [];
    this.markers = [];
    this.group.range = null;
    this.requestDraw();
  }

  addPoint(name, step, value, epoch, time) {
    if (!Number.isFinite(value)) return;
    this.store.add(name, step, value);
    if (epoch !== undefined && epoch !== null) this.store.noteEpoch(epoch, step);
    if (time !== undefined) this.store.noteTime(step, time);
    this.requestDraw();
  }

  setEpochs(boundaries) {
    for (const b of boundaries) this.store.noteEpoch(b.epoch, b.first_step, b.last_step ?? b.first_step);
    this.requestDraw();
  }

  setClock(clock) {
    if (!clock) return;
    clock.steps.forEach((step, i) => this.store.noteTime(step, clock.times[i]));
    this.requestDraw();
  }

  setExtras(extras) { this.extras = extras; this.requestDraw(); }

  setMarkers(entries) { this.markers = entries.filter((e) => e.step !== null); this.requestDraw(); }

  setSmoothing(weight) { this.smoothing = weight; this.requestDraw(); }

  setXMode(mode) {
    if (mode === this.xMode) return;
    this.xMode = mode;
    this.group.range = null;  // a zoom in steps means nothing on a time axis
    this.requestDraw();
  }

  requestDraw() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => { this.pending = false; this.flush(); });
  }

  // Once per frame at most: each panel gets its columns; a panel rebuilds its plot only
  // when its set of series (or its scale) changed. The zoom stays as it is.
  flush() {
    this.findAliases();
    const axis = new StepAxis(this.store, this.xMode);
    this.axis = axis;
    const wanted = FAMILIES.filter((f) => this.drawnNames(f.key).length);
    for (const [key, panel] of this.panels) {
      if (!wanted.some((f) => f.key === key)) { panel.destroy(); this.panels.delete(key); }
    }
    for (const family of wanted) {
      if (!this.panels.has(family.key)) {
        this.panels.set(family.key, new ChartPanel(this.container, {
          key: family.key, title: family.label, group: this.group,
          log: this.logScale.get(family.key) ?? false,
          onLogChange: (key, log) => { this.logScale.set(key, log); this.requestDraw(); },
          decorate: (u, panel) => this.decorate(u, panel),
        }));
      }
      const panel = this.panels.get(family.key);
      if (axis.usable()) {
        const [series, data] = this.columns(family.key, axis);
        panel.render(series, data, { xMode: this.xMode });
      }
    }
    // Keep the families' order; move elements only when it is wrong (a move would
    // interrupt a drag or a hover in progress).
    const order = wanted.map((f) => this.panels.get(f.key).element);
    if (order.some((element, i) => this.container.children[i] !== element)) this.container.append(...order);
    this.container.dataset.points = String(this.store.count());
    this.container.dataset.series = String(this.store.series.size);
    this.container.dataset.xMode = this.xMode;
    this.container.classList.toggle("empty", this.store.series.size === 0);
  }

  findAliases() {
    // A twin whose newest value parted from its kept series is drawn on its own again.
    for (const [hidden, kept] of this.aliases) {
      const a = this.store.series.get(hidden), b = this.store.series.get(kept);
      const [ia, ib] = [a.steps.length - 1, b.steps.length - 1];
      if (a.steps[ia] === b.steps[ib] && a.values[ia] !== b.values[ib]) this.aliases.delete(hidden);
    }
    const names = [...this.store.series.keys()].filter((n) => !this.aliases.has(n));
    for (let i = 0; i < names.length; i++) {
      for (let j = i + 1; j < names.length; j++) {
        const [a, b] = [names[i], names[j]];
        // Only metrics of one split are twins: train and val agreeing is news, not noise.
        if (this.aliases.has(b) || familyOf(a) !== familyOf(b) || splitOf(a) !== splitOf(b)) continue;
        if (identical(this.store.series.get(a), this.store.series.get(b))) this.aliases.set(b, a);
      }
    }
  }

  drawnNames(family) {
    return [...this.store.series.keys()]
      .filter((n) => familyOf(n) === family && !this.aliases.has(n)).sort();
  }

  label(name) {
    const twins = [...this.aliases].filter(([, kept]) => kept === name).map(([hidden]) => hidden);
    return twins.length ? `${name} = ${twins.join(" = ")}` : name;
  }

  colour(name) {
    const bases = [...new Set([...this.store.series.keys()].map(baseName))].sort();
    return PALETTE[Math.max(0, bases.indexOf(baseName(name))) % PALETTE.length];
  }

  // uPlot wants one x array and aligned y arrays (null where a series has no point).
  // Extras (branches, lineage) are placed by step, so only on the step and epoch axes.
  columns(family, axis) {
    const names = this.drawnNames(family);
    const extras = axis.mode === "step" || axis.mode === "epoch"
      ? this.extras.filter((e) => familyOf(e.name) === family && !this.aliases.has(e.name)) : [];
    const lines = [...names.map((n) => this.store.series.get(n)), ...extras];
    const steps = [...new Set(lines.flatMap((s) => s.steps))].sort((a, b) => a - b);
    const at = new Map(steps.map((s, i) => [s, i]));
    let last = -Infinity;
    const xs = steps.map((s) => (last = Math.max(last, axis.x(s))));  // never backwards
    const align = (s) => {
      const ys = new Array(steps.length).fill(null);
      s.steps.forEach((step, i) => { ys[at.get(step)] = s.values[i]; });
      return ys;
    };
    const series = [], data = [xs];
    for (const name of names) {
      const colour = this.colour(name);
      const dash = isValidation(name) ? [6, 4] : undefined;
      const ys = align(this.store.series.get(name));
      if (this.smoothing > 0 && smoothable(name)) {
        series.push({ label: this.label(name), stroke: fade(colour, 0.25), width: 1, dash });
        series.push({ label: `${name} (smoothed)`, stroke: colour, width: 2, dash });
        data.push(ys, smoothEma(ys, this.smoothing));
      } else {
        series.push({ label: this.label(name), stroke: colour, dash });
        data.push(ys);
      }
    }
    for (const extra of extras) {
      const style = EXTRA_STYLES[extra.kind];
      series.push({ label: extra.label, stroke: fade(this.colour(extra.name), style.alpha),
                    width: 1, dash: style.dash });
      data.push(align(extra));
    }
    return [series, data];
  }

  decorate(u, panel) {
    const toX = (step) => this.axis.x(step);
    drawEpochs(u, panel, this.store.epochEnds(), toX);
    placeMarkers(u, this.markers, toX);
  }
}
