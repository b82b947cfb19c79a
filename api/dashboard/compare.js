// Compare runs: one metric of several jobs overlaid on one chart (x = step), and the
// spec fields whose values differ between them.
"use strict";

const compareView = { jobs: [], series: new Map(), plot: null };

async function compareJobs(ids) {
  $("#compare-help").hidden = ids.length >= 2;
  const jobs = await Promise.all(ids.map((id) => api(`/v1/jobs/${id}`)));
  const histories = await Promise.all(ids.map((id) => api(`/v1/jobs/${id}/metrics/series?max_points=1000`)));
  compareView.jobs = jobs;
  compareView.series = new Map(jobs.map((job, i) => [job.id,
    new Map(histories[i].series.map((s) => [s.name, s]))]));
  $("#compare-jobs").textContent = jobs.map((j) => `${j.name} (${shortId(j.id)})`).join(" vs ");
  const names = [...new Set(histories.flatMap((h) => h.series.map((s) => s.name)))].sort();
  const select = $("#compare-metric");
  const previous = select.value;
  select.textContent = "";
  for (const name of names) select.append(new Option(name, name));
  const preferred = ["val_accuracy", "val_loss", "train_loss"].find((n) => names.includes(n));
  select.value = names.includes(previous) ? previous : (preferred ?? names[0] ?? "");
  drawComparison();
  showSpecDifferences(jobs);
}

function drawComparison() {
  const metric = $("#compare-metric").value;
  const container = $("#compare-chart");
  if (compareView.plot) compareView.plot.destroy();
  compareView.plot = null;
  container.textContent = "";
  const lines = compareView.jobs.map((job) => compareView.series.get(job.id).get(metric))
    .map((s) => s ?? { steps: [], values: [] });
  const xs = [...new Set(lines.flatMap((s) => s.steps))].sort((a, b) => a - b);
  const at = new Map(xs.map((x, i) => [x, i]));
  const data = [xs];
  for (const s of lines) {
    const ys = new Array(xs.length).fill(null);
    s.steps.forEach((step, i) => { ys[at.get(step)] = s.values[i]; });
    data.push(ys);
  }
  const series = [{ label: "step" }, ...compareView.jobs.map((job, i) => ({
    label: `${job.name} (${shortId(job.id)})`, stroke: PALETTE[i % PALETTE.length], width: 1.5,
    spanGaps: true, points: { show: false }, value: (u, v) => formatNumber(v),
  }))];
  const log = /(^|[_-])lr$/.test(metric);
  compareView.plot = new uPlot({
    width: Math.max(320, container.clientWidth || 900), height: 300, title: metric,
    scales: { x: { time: false }, y: log ? { distr: 3 } : {} },
    axes: [{ label: "step" }, { label: metric, size: 64, values: (u, t) => t.map(formatNumber) }],
    series, cursor: { drag: { x: true, y: false } },
  }, data, container);
  container.dataset.jobs = String(compareView.jobs.length);
  container.dataset.metric = metric;
  container.dataset.points = String(lines.reduce((n, s) => n + s.steps.length, 0));
}

function showSpecDifferences(jobs) {
  const flat = jobs.map((job) => flatten({ ...(job.spec || {}) }));
  const keys = [...new Set(flat.flatMap((f) => Object.keys(f)))].sort();
  const differing = keys.filter((k) => new Set(flat.map((f) => JSON.stringify(f[k] ?? null))).size > 1);
  const head = $("#compare-diff thead");
  const body = $("#compare-diff tbody");
  head.textContent = "";
  body.textContent = "";
  head.append(tableRow(["field", ...jobs.map((j) => `${j.name} (${shortId(j.id)})`)]));
  for (const key of differing) {
    const row = tableRow([key, ...flat.map((f) => (f[key] === undefined ? "(unset)" : f[key]))]);
    row.dataset.field = key;
    body.append(row);
  }
  if (!differing.length) body.append(tableRow(["(the specs are identical)"]));
}

function wireCompare() {
  $("#compare-metric").addEventListener("change", drawComparison);
}
