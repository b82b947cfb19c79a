// The job page: charts, runtime timeline, controls valid for the status, learning rate,
// hyperparameters, spec, log and checkpoints, kept current by the job's event stream
// (read with fetch() streaming: EventSource cannot send the Authorization header).
"use strict";

const HISTORY_POINTS = 2000;  // per metric; the API keeps each bucket's extremes
const jobView = {
  selected: null, job: null, status: null, stream: null, streaming: false,
  lastEventId: null, liveStep: 0, liveLr: null, panels: null,
};

function panels() {
  if (!jobView.panels) jobView.panels = new MetricPanels($("#charts"));
  return jobView.panels;
}

// Which controls a status allows (the API answers 409 to the others).
const CONTROLS = {
  pause: new Set(["queued", "running"]),
  resume: new Set(["paused"]),
  cancel: new Set(["queued", "running", "paused"]),
};

function setStatus(status, reason) {
  jobView.status = status;
  const badge = $("#job-status");
  badge.textContent = status;
  badge.className = `badge status-${status}`;
  for (const button of document.querySelectorAll(".controls button")) {
    button.hidden = !CONTROLS[button.dataset.action].has(status);
  }
  $("#lr-form").hidden = TERMINAL.has(status);
  const banner = $("#job-reason");
  const showReason = reason && (status === "failed" || status === "cancelled" || status === "paused");
  banner.hidden = !showReason;
  banner.textContent = showReason ? `${status}: ${reason}` : "";
  banner.classList.toggle("error", status === "failed");
  updateStreamLabel();
}

// "live" only while the stream is open and the job is actually training.
function updateStreamLabel() {
  const label = $("#stream-state");
  const status = jobView.status;
  let text;
  if (TERMINAL.has(status)) text = "finished";
  else if (!jobView.streaming) text = "connecting…";
  else if (status === "running") text = "live";
  else if (status === "paused") text = "paused";
  else text = "waiting for a worker";
  if (label.dataset.error && !TERMINAL.has(status)) text = `reconnecting (${label.dataset.error})`;
  label.textContent = text;
  label.classList.toggle("live", text === "live");
}

function showJob(job) {
  jobView.job = job;
  $("#job-title").textContent = `${job.name} · ${shortId(job.id)}`;
  $("#job-title").title = job.id;
  setStatus(job.status, job.status_reason);
  // Live events run ahead of the DB copy (written in batches): never step backwards.
  if (job.progress.step >= jobView.liveStep) {
    jobView.liveStep = job.progress.step;
    showProgress(job.progress.epoch, job.progress.step);
    for (const [name, value] of Object.entries(job.progress.metrics || {})) setLatest(name, value);
  }
}

function showProgress(epochsDone, step) {
  const total = jobView.job?.epochs_total;
  $("#job-epoch").textContent = total ? `${epochsDone}/${total}` : String(epochsDone);
  $("#job-step").textContent = String(step);
  $("#job-eta").textContent = eta(step, total);
}

// Remaining time from the steps an epoch takes and the pace since the job started.
function eta(step, totalEpochs) {
  const job = jobView.job;
  if (!job || jobView.status !== "running" || !job.started_at || !totalEpochs || step <= 0) return "";
  const starts = panels().store.epochStarts;
  if (!starts.has(0) || !starts.has(1)) return "ETA after the first epoch";
  const stepsPerEpoch = starts.get(1) - starts.get(0);
  const elapsed = (Date.now() - Date.parse(job.started_at)) / 1000;
  const remaining = stepsPerEpoch * totalEpochs - step;
  return remaining > 0 ? `ETA ${formatDuration((elapsed / step) * remaining)}` : "";
}

function setLatest(name, value) {
  let row = document.querySelector(`#latest tr[data-metric="${CSS.escape(name)}"]`);
  if (!row) {
    row = tableRow([name, ""]);
    row.dataset.metric = name;
    $("#latest tbody").append(row);
  }
  row.children[1].textContent = formatNumber(value);
}

async function selectJob(jobId) {
  if (jobView.stream) jobView.stream.abort();
  Object.assign(jobView, { selected: jobId, lastEventId: null, liveStep: 0, liveLr: null,
                           streaming: false, job: null });
  panels().clear();
  for (const id of ["#latest tbody", "#timeline tbody", "#log", "#checkpoints tbody",
                    "#hyperparameters tbody"]) $(id).textContent = "";
  $("#lr-message").textContent = "";
  $("#control-message").textContent = "";
  $("#stream-state").dataset.error = "";
  $("#job-card").hidden = false;
  for (const row of document.querySelectorAll("#jobs tbody tr")) {
    row.classList.toggle("selected", row.dataset.jobId === jobId);
  }
  const job = await api(`/v1/jobs/${jobId}`);
  if (jobView.selected !== jobId) return;
  showJob(job);
  showSpec(job.spec);
  await Promise.all([loadHistory(jobId), refreshLearningRate(jobId), refreshTimeline(jobId),
                     refreshCheckpoints(jobId)]);
  openStream(jobId);
}

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

async function loadHistory(jobId) {
  const body = await api(`/v1/jobs/${jobId}/metrics/series?max_points=${HISTORY_POINTS}`);
  if (jobView.selected !== jobId) return;
  const chart = panels();
  for (const s of body.series) {
    for (let i = 0; i < s.steps.length; i++) chart.addPoint(s.name, s.steps[i], s.values[i]);
  }
  chart.setEpochs(body.epochs);
  $("#charts").dataset.total = String(body.series.reduce((n, s) => n + s.total_points, 0));
}

async function refreshTimeline(jobId) {
  const body = await api(`/v1/jobs/${jobId}/timeline`);
  if (jobView.selected !== jobId) return;
  panels().setMarkers(body.entries);
  const rows = $("#timeline tbody");
  rows.textContent = "";
  for (const entry of body.entries.slice().reverse()) {
    const row = tableRow([entry.step ?? "–", entry.title, entry.detail]);
    row.dataset.kind = entry.kind;
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
    rows.append(tableRow([checkpoint.step, checkpoint.epoch,
                          `${(checkpoint.size / 1024).toFixed(1)} KiB`, links]));
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

async function refreshLearningRate(jobId) {
  const lr = await api(`/v1/jobs/${jobId}/learning-rate`);
  if (jobView.selected !== jobId) return;
  // Live lr events beat the DB copy, which the worker writes a moment later.
  if (jobView.liveLr === null) $("#lr-current").textContent = formatNumber(lr.learning_rate);
  const schedule = lr.schedule ? Object.entries(lr.schedule).map(([k, v]) => `${k}=${v}`).join(" ") : "";
  $("#lr-schedule").textContent = lr.schedule ? `schedule: ${schedule}` : "no schedule";
}

async function openStream(jobId) {
  const controller = new AbortController();
  jobView.stream = controller;
  const headers = { Authorization: `Bearer ${session.token}`, Accept: "text/event-stream" };
  if (jobView.lastEventId) headers["Last-Event-ID"] = jobView.lastEventId;
  const label = $("#stream-state");
  try {
    const response = await fetch(`/v1/jobs/${jobId}/events`, { headers, signal: controller.signal });
    if (!response.ok) throw new Error(`events: HTTP ${response.status}`);
    jobView.streaming = true;
    label.dataset.error = "";
    updateStreamLabel();
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        handleFrame(jobId, buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
      }
    }
  } catch (error) {
    if (controller.signal.aborted) return;
    label.dataset.error = error.message;
  }
  jobView.streaming = false;
  if (controller.signal.aborted || jobView.selected !== jobId) return;
  updateStreamLabel();
  if (TERMINAL.has(jobView.status)) return;
  // The server closes streams after a maximum lifetime; pick up where we left off.
  setTimeout(() => { if (jobView.selected === jobId) openStream(jobId); }, 1000);
}

function parseFrame(frame) {
  const event = { type: "message", data: "", id: null };
  for (const line of frame.split("\n")) {
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") event.type = value;
    else if (field === "data") event.data += value;
    else if (field === "id") event.id = value;
  }
  return event;
}

function handleFrame(jobId, frame) {
  const event = parseFrame(frame);
  if (!event.data || jobView.selected !== jobId) return;
  if (event.id) jobView.lastEventId = event.id;
  const data = JSON.parse(event.data);
  if (event.type === "metric") {
    for (const [name, value] of Object.entries(data.values)) {
      panels().addPoint(name, data.step, value, data.epoch);
      setLatest(name, value);
    }
    if (typeof data.values.lr === "number") setLiveLr(data.values.lr);
    if (data.step >= jobView.liveStep) {
      jobView.liveStep = data.step;
      showProgress(data.epochs_done ?? data.epoch, data.step);
    }
  } else if (event.type === "lr") {
    // status "rejected": the trainer refused the change; the lr in effect is unchanged.
    if (data.status === "rejected") {
      $("#lr-message").textContent = `rejected: ${data.reason}`;
    } else {
      setLiveLr(data.learning_rate);
      $("#lr-message").textContent = `applied at step ${data.applied_step}`;
    }
    refreshLearningRate(jobId);
    refreshTimeline(jobId);
  } else if (event.type === "status") {
    setStatus(data.status, data.reason ?? jobView.job?.status_reason);
    refreshTimeline(jobId);
    refreshJobs();
  } else if (event.type === "checkpoint") {
    addLog("info", `checkpoint at step ${data.step} (epoch ${data.epoch})`);
    refreshCheckpoints(jobId);
    refreshTimeline(jobId);
  } else if (event.type === "log") {
    addLog(data.level, data.message);
  }
}

function addLog(level, message) {
  const item = document.createElement("li");
  item.className = `log-${level}`;
  item.textContent = `${new Date().toLocaleTimeString()} ${level} ${message}`;
  $("#log").prepend(item);
  while ($("#log").children.length > 500) $("#log").lastChild.remove();
}

function setLiveLr(value) {
  jobView.liveLr = value;
  $("#lr-current").textContent = formatNumber(value);
}

function wireJobPage() {
  for (const button of document.querySelectorAll(".controls button")) {
    button.addEventListener("click", async () => {
      const action = button.dataset.action;
      try {
        const result = await api(`/v1/jobs/${jobView.selected}/${action}`, { method: "POST" });
        $("#control-message").textContent = result.pending
          ? `${action} sent to the worker` : `job is ${result.status}`;
        if (!result.pending) setStatus(result.status, null);
        await refreshJobs();
      } catch (error) {
        $("#control-message").textContent = error.message;
      }
    });
  }
  $("#lr-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const value = Number($("#lr-input").value);
    try {
      const result = await api(`/v1/jobs/${jobView.selected}/learning-rate`, {
        method: "PUT", json: { learning_rate: value, mode: $("#lr-mode").value },
      });
      $("#lr-message").textContent = `change ${shortId(result.change_id)} pending`
        + (result.warning ? ` (warning: ${result.warning})` : "");
    } catch (error) {
      $("#lr-message").textContent = error.message;
    }
  });
  $("#smoothing").addEventListener("input", () => {
    const weight = Number($("#smoothing").value);
    $("#smoothing-value").textContent = weight.toFixed(2);
    panels().setSmoothing(weight);
  });
}
