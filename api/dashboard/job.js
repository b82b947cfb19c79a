// The job page: status, progress with the total running time and an ETA from the recent
// pace, controls valid for the status, and the chart toolbar (smoothing, x axis). The
// side panels live in job-panels.js, the event stream in job-stream.js.
"use strict";

const HISTORY_POINTS = 2000;  // per metric; the API keeps each bucket's extremes
const PACE_WINDOW_S = 60;     // the ETA follows the steps/s of the last minute
const jobView = {
  selected: null, job: null, status: null, stream: null, streaming: false,
  lastEventId: null, liveStep: 0, liveEpochs: 0, liveLr: null, panels: null,
  pace: [], fetchedAt: 0, ticker: null,
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
  const wasRunning = jobView.status === "running";
  const trained = liveRunningSeconds();  // counted under the status it had until now
  jobView.status = status;
  // The server's running time was read while the job ran: keep counting from there, or
  // stop counting now it stopped.
  if (jobView.job && wasRunning && status !== "running") {
    jobView.job.running_seconds = trained;
    jobView.fetchedAt = Date.now();
  } else if (jobView.job && !wasRunning && status === "running") {
    jobView.fetchedAt = Date.now();
  }
  const badge = $("#job-status");
  badge.textContent = status;
  badge.className = `badge status-${status}`;
  for (const button of document.querySelectorAll(".controls button")) {
    button.hidden = !CONTROLS[button.dataset.action].has(status);
  }
  $("#lr-form").hidden = TERMINAL.has(status);
  updateRollbackAvailability();
  const banner = $("#job-reason");
  const showReason = reason && (status === "failed" || status === "cancelled" || status === "paused");
  banner.hidden = !showReason;
  banner.textContent = showReason ? `${status}: ${reason}` : "";
  banner.classList.toggle("error", status === "failed");
  updateStreamLabel();
  showTiming();
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
  jobView.fetchedAt = Date.now();
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
  jobView.liveEpochs = epochsDone;
  $("#job-epoch").textContent = total ? `${epochsDone}/${total}` : String(epochsDone);
  $("#job-step").textContent = String(step);
  showTiming();
}

// Seconds trained over every run: the server's sum, counted on while it runs.
function liveRunningSeconds() {
  const job = jobView.job;
  if (!job) return null;
  const base = job.running_seconds ?? 0;
  return jobView.status === "running" ? base + (Date.now() - jobView.fetchedAt) / 1000 : base;
}

function showTiming() {
  $("#job-duration").textContent = jobView.job?.started_at || jobView.status === "running"
    ? formatDuration(liveRunningSeconds()) : "–";
  $("#job-eta").textContent = eta();
}

// Steps per second over the last minute of live reports, else the server's figure.
function pace() {
  const samples = jobView.pace;
  if (samples.length >= 2) {
    const [first, last] = [samples[0], samples[samples.length - 1]];
    if (last.t - first.t >= 5 && last.step > first.step) return (last.step - first.step) / (last.t - first.t);
  }
  return jobView.job?.steps_per_second ?? null;
}

function notePace(step, time) {
  const samples = jobView.pace;
  if (!Number.isFinite(time)) return;
  if (samples.length && step <= samples[samples.length - 1].step) return;
  samples.push({ step, t: time });
  while (samples.length > 2 && time - samples[0].t > PACE_WINDOW_S) samples.shift();
}

// Remaining steps (epochs left × the steps an epoch takes) at the recent pace; nothing
// once the job is not running.
function eta() {
  const job = jobView.job;
  if (!job || jobView.status !== "running" || !job.epochs_total) return "";
  const perEpoch = panels().store.stepsPerEpoch(jobView.liveEpochs);
  if (!perEpoch) return "ETA after the first epoch";
  const remaining = perEpoch * job.epochs_total - jobView.liveStep;
  const rate = pace();
  if (remaining <= 0) return "";
  if (!rate) return "ETA: measuring the pace";
  return `ETA ${formatDuration(remaining / rate)} (${formatNumber(+rate.toFixed(2))} steps/s)`;
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

function closeJob() {
  if (jobView.stream) jobView.stream.abort();
  closeCheckpointActions();
  clearInterval(jobView.ticker);
  Object.assign(jobView, { selected: null, job: null, status: null, streaming: false });
  $("#job-card").hidden = true;
  for (const row of document.querySelectorAll("#jobs tbody tr.selected")) row.classList.remove("selected");
}

async function selectJob(jobId) {
  if (jobView.stream) jobView.stream.abort();
  closeCheckpointActions();
  clearInterval(jobView.ticker);
  Object.assign(jobView, { selected: jobId, lastEventId: null, liveStep: 0, liveEpochs: 0,
                           liveLr: null, streaming: false, job: null, status: null, pace: [],
                           abandoned: [], lineageCurves: [] });
  panels().clear();
  for (const id of ["#latest tbody", "#timeline tbody", "#log", "#checkpoints tbody",
                    "#hyperparameters tbody"]) $(id).textContent = "";
  for (const id of ["#lr-message", "#control-message", "#lr-schedule", "#job-eta"]) $(id).textContent = "";
  $("#lineage").hidden = true;
  $("#stream-state").dataset.error = "";
  $("#job-card").hidden = false;
  for (const row of document.querySelectorAll("#jobs tbody tr")) {
    row.classList.toggle("selected", row.dataset.jobId === jobId);
  }
  let job;
  try {
    job = await api(`/v1/jobs/${jobId}`);
  } catch (error) {
    if (jobView.selected !== jobId) return;
    $("#job-title").textContent = `job ${shortId(jobId)}`;
    $("#job-reason").hidden = false;
    $("#job-reason").textContent = error.status === 404 ? "No such job (or not yours)." : error.message;
    return;
  }
  if (jobView.selected !== jobId) return;
  showJob(job);
  showSpec(job.spec);
  jobView.ticker = setInterval(showTiming, 1000);
  // The history first: it is what the page is opened for, and the side panels' requests
  // would otherwise share the server with it.
  await loadHistory(jobId);
  if (jobView.selected !== jobId) return;
  await Promise.all([refreshLearningRate(jobId), refreshTimeline(jobId),
                     refreshCheckpoints(jobId), loadLineage(job)]);
  openStream(jobId);
}

async function loadHistory(jobId) {
  const body = await api(`/v1/jobs/${jobId}/metrics/series?max_points=${HISTORY_POINTS}&include_abandoned=true`);
  if (jobView.selected !== jobId) return;
  const chart = panels();
  const live = body.series.filter((s) => !s.abandoned);
  for (const s of live) {
    for (let i = 0; i < s.steps.length; i++) chart.addPoint(s.name, s.steps[i], s.values[i]);
  }
  chart.setEpochs(body.epochs);
  chart.setClock(body.clock);
  jobView.abandoned = body.series.filter((s) => s.abandoned).map((s) => ({
    name: s.name, steps: s.steps, values: s.values, kind: "abandoned",
    label: `${s.name} · rolled back (branch ${s.branch})`,
  }));
  chart.setExtras([...jobView.abandoned, ...(jobView.lineageCurves || [])]);
  $("#charts").dataset.total = String(live.reduce((n, s) => n + s.total_points, 0));
  showTiming();
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
  $("#x-axis").addEventListener("change", () => panels().setXMode($("#x-axis").value));
}
