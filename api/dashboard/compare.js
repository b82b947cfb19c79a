// Compare runs: a grid of metric panels (one per chosen metric, every run a line in its
// own colour, each run's steering markers, smoothing for per-step training curves, all
// zoomed together), and the spec fields that differ, model layers aligned by type.
"use strict";

const COMPARE_DEFAULT_METRICS = ["train_loss", "val_loss", "val_accuracy", "train_accuracy", "lr"];
const compareView = {
  ids: [], jobs: [], series: new Map(), timelines: new Map(), names: [], metrics: [],
  group: new ZoomGroup(), panels: [], smoothing: 0, path: null, loading: null,
};

function runLabel(job) { return `${job.name} (${shortId(job.id)})`; }
function runColour(i) { return PALETTE[i % PALETTE.length]; }

function showCompareEmpty(ids) {
  const empty = ids.length < 2;
  $("#compare-toolbar").hidden = empty;
  $("#compare-metrics").hidden = empty;
  $("#compare-diff-section").hidden = empty;
  $("#compare-help").hidden = !empty;
  $("#compare-help").textContent = ids.length === 1
    ? "Only one job is picked: tick at least one more in the Jobs list, then “Compare selected”."
    : "Nothing to compare yet: tick two or more jobs in the Jobs list and press “Compare selected” "
      + "(or open a link like /compare?jobs=ID1,ID2). Each chosen metric gets a panel with every run on it.";
  if (empty) { clearComparePanels(); $("#compare-grid").dataset.jobs = "0"; }
}

function clearComparePanels() {
  for (const panel of compareView.panels) panel.destroy();
  compareView.panels = [];
  $("#compare-grid").textContent = "";
}

async function openComparison(ids, metrics) {
  compareView.path = location.pathname + location.search;
  showCompareEmpty(ids);
  if (ids.length < 2) return;
  const key = ids.join(",");
  if (compareView.ids.join(",") === key && compareView.jobs.length) {
    if (metrics.length) compareView.metrics = metrics.filter((m) => compareView.names.includes(m));
    renderMetricChoices();
    drawComparison();
    return;
  }
  compareView.ids = ids;
  compareView.jobs = [];
  const loading = (compareView.loading = Symbol("compare"));
  let jobs, histories, timelines;
  try {
    jobs = await Promise.all(ids.map((id) => api(`/v1/jobs/${id}`)));
    histories = await Promise.all(ids.map((id) => api(`/v1/jobs/${id}/metrics/series?max_points=1000`)));
    timelines = await Promise.all(ids.map((id) => api(`/v1/jobs/${id}/timeline`).catch(() => ({ entries: [] }))));
  } catch (error) {
    if (compareView.loading !== loading) return;
    $("#compare-help").hidden = false;
    $("#compare-help").textContent = `Could not open the comparison: ${error.message}`;
    return;
  }
  if (compareView.loading !== loading) return;
  compareView.jobs = jobs;
  compareView.series = new Map(jobs.map((job, i) => [job.id, new Map(histories[i].series.map((s) => [s.name, s]))]));
  compareView.timelines = new Map(jobs.map((job, i) => [job.id, timelines[i].entries]));
  compareView.names = [...new Set(histories.flatMap((h) => h.series.map((s) => s.name)))].sort();
  const wanted = metrics.length ? metrics : COMPARE_DEFAULT_METRICS;
  compareView.metrics = wanted.filter((m) => compareView.names.includes(m));
  if (!compareView.metrics.length) compareView.metrics = compareView.names.slice(0, 4);
  compareView.group.range = null;
  $("#compare-jobs").textContent = jobs.map(runLabel).join(" vs ");
  renderMetricChoices();
  drawComparison();
  showSpecDifferences(jobs);
}

function renderMetricChoices() {
  const box = $("#compare-metric-list");
  box.textContent = "";
  for (const name of compareView.names) {
    const label = document.createElement("label");
    const tick = document.createElement("input");
    tick.type = "checkbox";
    tick.value = name;
    tick.checked = compareView.metrics.includes(name);
    tick.addEventListener("change", () => {
      compareView.metrics = compareView.names.filter((n) => (n === name ? tick.checked : compareView.metrics.includes(n)));
      history.replaceState(null, "", withQuery({ metrics: compareView.metrics.join(",") }));
      compareView.path = location.pathname + location.search;
      drawComparison();
    });
    label.append(tick, ` ${name}`);
    box.append(label);
  }
}

// Each run's steering markers (commands, lr changes, pause/resume/restart) in the run's
// colour; not its start and end, which every run has.
const STEERING_STATUS = /paus|resum|restart|requeued/;
function runMarkers() {
  return compareView.jobs.flatMap((job, i) => (compareView.timelines.get(job.id) || [])
    .filter((e) => e.step !== null && (e.kind === "lr" || e.kind === "command"
      || (e.kind === "status" && STEERING_STATUS.test(e.title))))
    .map((e) => ({ ...e, colour: runColour(i), run: job.id, runLabel: runLabel(job) })));
}

function drawComparison() {
  clearComparePanels();
  const grid = $("#compare-grid");
  const markers = runMarkers();
  let points = 0;
  for (const metric of compareView.metrics) {
    const lines = compareView.jobs.map((job) => compareView.series.get(job.id).get(metric) ?? { steps: [], values: [] });
    const xs = [...new Set(lines.flatMap((s) => s.steps))].sort((a, b) => a - b);
    const at = new Map(xs.map((x, i) => [x, i]));
    const smooth = compareView.smoothing > 0 && smoothable(metric);
    const series = [], data = [xs];
    lines.forEach((s, i) => {
      const ys = new Array(xs.length).fill(null);
      s.steps.forEach((step, k) => { ys[at.get(step)] = s.values[k]; });
      points += s.steps.length;
      const label = runLabel(compareView.jobs[i]);
      if (smooth) {
        series.push({ label, stroke: fade(runColour(i), 0.25), width: 1 });
        series.push({ label: `${label} (smoothed)`, stroke: runColour(i), width: 2 });
        data.push(ys, smoothEma(ys, compareView.smoothing));
      } else {
        series.push({ label, stroke: runColour(i) });
        data.push(ys);
      }
    });
    const panel = new ChartPanel(grid, {
      key: metric, title: metric, group: compareView.group, height: 240,
      log: familyOf(metric) === "lr",
      decorate: (u) => placeMarkers(u, markers, (step) => step),
    });
    panel.element.dataset.metric = metric;
    compareView.panels.push(panel);
    panel.render(series, data);
  }
  grid.dataset.jobs = String(compareView.jobs.length);
  grid.dataset.metrics = compareView.metrics.join(",");
  grid.dataset.points = String(points);
}

// Model layers keyed by type and rank ("Dense#2" is the second Dense), so inserting a
// Dropout does not make every later layer look changed.
function alignedSpec(spec) {
  const copy = { ...(spec || {}) };
  const model = Array.isArray(copy.model) ? copy.model : null;
  delete copy.model;
  const flat = flatten(copy);
  if (model) {
    const seen = new Map();
    for (const layer of model) {
      const type = layer && layer.type ? layer.type : "layer";
      seen.set(type, (seen.get(type) || 0) + 1);
      const key = `model.${type}#${seen.get(type)}`;
      const { type: _, ...fields } = layer || {};
      flat[key] = "present";
      Object.assign(flat, flatten(fields, key));
    }
  } else if (spec && spec.model !== undefined) {
    Object.assign(flat, flatten({ model: spec.model }));
  }
  return flat;
}

function showSpecDifferences(jobs) {
  const flat = jobs.map((job) => alignedSpec(job.spec));
  const keys = [...new Set(flat.flatMap((f) => Object.keys(f)))].sort();
  let differing = keys.filter((k) => new Set(flat.map((f) => JSON.stringify(f[k] ?? null))).size > 1);
  // A layer only some runs have is one row; its fields would only repeat "(absent)".
  const partial = differing.filter((k) => /^model\.[^.]+#\d+$/.test(k));
  differing = differing.filter((k) => !partial.some((p) => k.startsWith(`${p}.`)));
  const head = $("#compare-diff thead");
  const body = $("#compare-diff tbody");
  head.textContent = "";
  body.textContent = "";
  head.append(tableRow(["field", ...jobs.map(runLabel)]));
  for (const key of differing) {
    const row = tableRow([key, ...flat.map((f) => (f[key] === undefined ? "(absent)" : f[key]))]);
    row.dataset.field = key;
    body.append(row);
  }
  if (!differing.length) body.append(tableRow(["(the specs are identical)"]));
}

function wireCompare() {
  $("#compare-smoothing").addEventListener("input", () => {
    compareView.smoothing = Number($("#compare-smoothing").value);
    $("#compare-smoothing-value").textContent = compareView.smoothing.toFixed(2);
    drawComparison();
  });
}
