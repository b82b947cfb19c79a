// The System view: the live workers and queues, and each worker's last hour (CPU, memory,
// training pace) as charts with a line per worker, on a wall-clock axis.
"use strict";

const systemView = { group: new ZoomGroup(), panels: new Map(), workers: [] };
const HISTORY_PANELS = [
  { key: "cpu", title: "CPU (% of the machine)", value: (s) => s.cpu_percent, range: () => [0, 100] },
  { key: "memory", title: "memory used (GiB)",
    value: (s) => (s.memory_used_bytes === null ? null : s.memory_used_bytes / 2 ** 30),
    range: (u, min, max) => [0, Math.max(1, max * 1.1)] },
  { key: "pace", title: "training pace (steps/s)", value: (s) => s.steps_per_second,
    range: (u, min, max) => [0, Math.max(1, (max ?? 0) * 1.1)] },
];

async function refreshSystem() {
  let body;
  try { body = await api("/v1/workers"); } catch { return; }
  const workers = $("#workers tbody");
  workers.textContent = "";
  $("#workers-empty").hidden = body.workers.length > 0;
  for (const w of body.workers) {
    const memory = w.memory_total_bytes
      ? `${(w.memory_used_bytes / 2 ** 30).toFixed(1)} / ${(w.memory_total_bytes / 2 ** 30).toFixed(1)} GiB`
      : "–";
    const gib = (bytes) => (bytes === null ? "?" : (bytes / 2 ** 30).toFixed(1));
    const gpu = w.gpus.length
      ? w.gpus.map((g) => `${g.name} ${g.utilization_percent ?? "?"}% `
                          + `${gib(g.memory_used_bytes)} / ${gib(g.memory_total_bytes)} GiB`).join(", ")
      : "none";
    const job = w.current_job_id ? jobLink(w.current_job_id, shortId(w.current_job_id))
      : cell(w.busy ? "busy (another user's job)" : "idle");
    const jobCell = job instanceof HTMLTableCellElement ? job : document.createElement("td");
    if (jobCell !== job) jobCell.append(job);
    // A job on several workers: each row says which rank of it this worker trains.
    if (w.current_job_id && w.ranks > 1) {
      const rank = document.createElement("span");
      rank.className = "muted worker-rank";
      rank.textContent = ` rank ${w.rank} of ${w.ranks}`;
      jobCell.append(rank);
    }
    const row = tableRow([w.worker_id, w.queues.join(", "), jobCell,
                          w.cpu_percent === null ? "–" : `${w.cpu_percent.toFixed(0)}%`, memory, gpu,
                          `${formatDuration(w.seconds_since_seen)} ago`]);
    row.dataset.workerId = w.worker_id;
    workers.append(row);
  }
  const queues = $("#queues tbody");
  queues.textContent = "";
  for (const q of body.queues) queues.append(tableRow([q.name, q.waiting]));
  await refreshSystemHistory();
}

async function refreshSystemHistory() {
  let body;
  try { body = await api("/v1/workers/history?minutes=60"); } catch { return; }
  const box = $("#worker-history");
  const workers = body.workers.filter((w) => w.samples.length);
  $("#worker-history-empty").hidden = workers.length > 0;
  box.dataset.workers = String(workers.length);
  box.dataset.samples = String(workers.reduce((n, w) => n + w.samples.length, 0));
  if (!workers.length) return;
  // One time axis for all workers: the union of their heartbeat times.
  const times = [...new Set(workers.flatMap((w) => w.samples.map((s) => s.time)))].sort((a, b) => a - b);
  const at = new Map(times.map((t, i) => [t, i]));
  for (const spec of HISTORY_PANELS) {
    let panel = systemView.panels.get(spec.key);
    if (!panel) {
      panel = new ChartPanel(box, { key: spec.key, title: spec.title, group: systemView.group,
                                    height: 180, yRange: spec.range });
      systemView.panels.set(spec.key, panel);
    }
    const data = [times];
    const series = workers.map((w, i) => {
      const ys = new Array(times.length).fill(null);
      for (const s of w.samples) ys[at.get(s.time)] = spec.value(s);
      data.push(ys);
      return { label: w.worker_id, stroke: PALETTE[i % PALETTE.length] };
    });
    panel.render(series, data, { xMode: "wall" });
  }
}
