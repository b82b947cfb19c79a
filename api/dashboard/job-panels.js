// The job page's side panels: the runtime timeline (every steering command by kind,
// status changes, checkpoints; abandoned ones faded), checkpoints, the learning rate and
// the schedule in effect, hyperparameters, the spec, and the lineage (parent, children,
// rollbacks) whose curves the charts overlay.
"use strict";

const LINEAGE_CHILDREN_DRAWN = 5;

function showSpec(spec) {
  $("#job-spec").textContent = spec ? toYaml(spec).trimStart() : "(not available)";
  const body = $("#hyperparameters tbody");
  body.textContent = "";
  if (!spec) return;
  const wanted = { epochs: spec.epochs, batch_size: spec.data?.batch_size, loss: spec.loss,
                   optimizer: spec.optimizer, lr_scheduler: spec.lr_scheduler,
                   initializer: spec.initializer, seed: spec.seed };
  for (const [key, value] of Object.entries(flatten(wanted))) {
    if (value !== undefined) body.append(tableRow([key, value ?? "none"]));
  }
}

function timelineWhat(entry) {
  if (entry.kind === "command") return entry.command_kind || "command";
  return entry.kind === "lr" ? "set_lr" : entry.kind;
}

async function refreshTimeline(jobId) {
  const body = await api(`/v1/jobs/${jobId}/timeline`);
  if (jobView.selected !== jobId) return;
  panels().setMarkers(body.entries);
  const rows = $("#timeline tbody");
  rows.textContent = "";
  for (const entry of body.entries.slice().reverse()) {
    const kind = document.createElement("td");
    const key = document.createElement("i");
    key.className = "key";
    key.style.background = markerColour(entry);
    kind.append(key, timelineWhat(entry));
    const row = tableRow([entry.step ?? "–", kind, entry.title, entry.detail
      + (entry.abandoned ? " · abandoned by a rollback" : "")]);
    row.dataset.kind = entry.kind;
    if (entry.command_kind) row.dataset.commandKind = entry.command_kind;
    if (entry.abandoned) row.classList.add("abandoned");
    row.title = formatTime(entry.time);
    rows.append(row);
  }
}

async function refreshCheckpoints(jobId) {
  const body = await api(`/v1/jobs/${jobId}/checkpoints`);
  if (jobView.selected !== jobId) return;
  const rows = $("#checkpoints tbody");
  rows.textContent = "";
  for (const checkpoint of body.data.slice().reverse()) {
    const links = document.createElement("td");
    for (const file of checkpoint.files) {
      const link = document.createElement("a");
      link.href = "#";
      link.textContent = file.name;
      link.addEventListener("click", (e) => { e.preventDefault(); download(file.url, file.name); });
      links.append(link, " ");
    }
    const row = tableRow([checkpoint.step, checkpoint.epoch,
                          `${(checkpoint.size / 1024).toFixed(1)} KiB`, links,
                          checkpointActionCell(checkpoint.step)]);
    row.dataset.step = String(checkpoint.step);
    rows.append(row);
  }
}

// Downloads go through fetch so the token stays in a header, never in a URL.
async function download(url, name) {
  const response = await fetch(url, { headers: { Authorization: `Bearer ${session.token}` } });
  if (!response.ok) { $("#control-message").textContent = `download failed: HTTP ${response.status}`; return; }
  const link = document.createElement("a");
  link.href = URL.createObjectURL(await response.blob());
  link.download = name;
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
}

// The schedule in effect, not the spec's: an override replaces it with a constant, a
// set_schedule with another one from its step, a scaled change keeps its shape.
function describeSchedule(effect) {
  const applied = (effect.changes || []).filter((c) => c.status === "applied" && !c.abandoned);
  const lastLr = applied.filter((c) => c.kind === "set_lr").pop();
  const params = (p) => Object.entries(p || {}).map(([k, v]) => `${k}=${v}`).join(" ");
  if (!effect.schedule) {
    const override = applied.filter((c) => c.kind === "set_lr" && c.params.mode === "override").pop();
    if (!override) return "no schedule (constant)";
    let text = `constant since step ${override.applied_step} (override; the spec's schedule no longer applies)`;
    if (lastLr !== override) text += ` · set again at step ${lastLr.applied_step}`;
    return text;
  }
  const s = effect.schedule;
  let text = `schedule: ${s.type} ${params(s.params)}`.trim();
  if (s.from_step > 1) text += ` from step ${s.from_step}`;
  if (lastLr && lastLr.params.mode === "scale") text += ` · scaled at step ${lastLr.applied_step}`;
  return text;
}

async function refreshLearningRate(jobId) {
  const [lr, effect] = await Promise.all([
    api(`/v1/jobs/${jobId}/learning-rate`),
    api(`/v1/jobs/${jobId}/hyperparameters`).catch(() => null),
  ]);
  if (jobView.selected !== jobId) return;
  // Live lr events beat the DB copy, which the worker writes a moment later.
  if (jobView.liveLr === null) $("#lr-current").textContent = formatNumber(lr.learning_rate);
  const fallback = lr.schedule ? `schedule: ${lr.schedule.type}` : "no schedule (constant)";
  $("#lr-schedule").textContent = effect ? describeSchedule(effect) : fallback;
}

function jobLink(id, text) {
  const link = document.createElement("a");
  link.href = `/jobs/${id}`;
  link.textContent = text;
  link.addEventListener("click", (e) => { e.preventDefault(); navigate(`/jobs/${id}`); });
  return link;
}

// Lineage: links both ways, and the curves of the parent (up to the fork) and of the
// children (from their fork) drawn faded behind this job's own.
async function loadLineage(job) {
  jobView.lineageCurves = [];
  let lineage;
  try { lineage = await api(`/v1/jobs/${job.id}/lineage`); } catch { return; }
  if (jobView.selected !== job.id) return;
  const box = $("#lineage");
  const list = $("#lineage-list");
  list.textContent = "";
  const parent = lineage.parent;
  if (parent) {
    const item = document.createElement("li");
    item.dataset.relation = "parent";
    item.append("forked from ", parent.exists ? jobLink(parent.id, `${parent.name} (${shortId(parent.id)})`)
      : `${shortId(parent.id)} (deleted)`, ` at step ${parent.fork_step}`);
    list.append(item);
  }
  for (const child of lineage.children) {
    const item = document.createElement("li");
    item.dataset.relation = "child";
    item.append("fork ", jobLink(child.id, `${child.name} (${shortId(child.id)})`),
                ` from step ${child.fork_step} · ${child.status}`);
    list.append(item);
  }
  for (const rollback of lineage.rollbacks) {
    const item = document.createElement("li");
    item.dataset.relation = "rollback";
    item.textContent = `rolled back to step ${rollback.to_step ?? "?"}`
      + (rollback.abandoned_points ? ` (${rollback.abandoned_points} points set aside, branch ${rollback.branch})` : "");
    list.append(item);
  }
  box.hidden = list.children.length === 0;
  const relatives = [];
  if (parent && parent.exists) relatives.push({ id: parent.id, name: parent.name, kind: "parent", step: parent.fork_step });
  for (const child of lineage.children.slice(0, LINEAGE_CHILDREN_DRAWN)) {
    relatives.push({ id: child.id, name: child.name, kind: "child", step: child.fork_step });
  }
  const curves = await Promise.all(relatives.map(async (r) => {
    try {
      const body = await api(`/v1/jobs/${r.id}/metrics/series?max_points=1000`);
      return body.series.map((s) => lineageCurve(s, r)).filter((c) => c.steps.length);
    } catch { return []; }
  }));
  if (jobView.selected !== job.id) return;
  jobView.lineageCurves = curves.flat();
  panels().setExtras([...(jobView.abandoned || []), ...jobView.lineageCurves]);
}

// The parent's points up to the fork step, or a child's from its fork step on.
function lineageCurve(series, relative) {
  const keep = series.steps.map((step) => (relative.kind === "parent" ? step <= relative.step : step >= relative.step));
  const label = relative.kind === "parent" ? `parent ${relative.name}` : `fork ${relative.name}`;
  return {
    name: series.name, kind: relative.kind, label: `${series.name} · ${label}`,
    steps: series.steps.filter((_, i) => keep[i]), values: series.values.filter((_, i) => keep[i]),
  };
}
