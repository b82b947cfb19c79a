// Rudder dashboard: plain JS, no build step, nothing loaded from outside this server.
// The token lives in sessionStorage and travels only in the Authorization header; live
// events are read with fetch() streaming (EventSource cannot send that header).
"use strict";

const TOKEN_KEY = "rudder.token";
const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);
const $ = (selector) => document.querySelector(selector);

const state = {
  token: sessionStorage.getItem(TOKEN_KEY),
  selected: null,        // job id
  jobStatus: null,
  stream: null,          // AbortController of the open event stream
  lastEventId: null,
  liveStep: 0,
  liveLr: null,
  jobsTimer: null,
};
const chart = new MetricChart($("#chart"), $("#legend"));

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error && body.error.message) || `HTTP ${status}`);
    this.status = status;
  }
}

async function api(path, options = {}) {
  const headers = { Authorization: `Bearer ${state.token}`, ...(options.headers || {}) };
  if (options.json !== undefined) {
    headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(options.json);
  }
  const response = await fetch(path, { ...options, headers });
  const body = response.headers.get("content-type")?.includes("json")
    ? await response.json() : null;
  if (response.status === 401) signOut("The token was refused; enter it again.");
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

// ------------------------------------------------------------------ sign in / out

async function signIn(token) {
  state.token = token;
  try {
    await api("/v1/jobs?limit=1");
  } catch (error) {
    $("#login-error").textContent = error.message;
    state.token = null;
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  $("#login").hidden = true;
  $("#app").hidden = false;
  $("#sign-out").hidden = false;
  $("#connection").textContent = "signed in";
  await refreshJobs();
  state.jobsTimer = setInterval(refreshJobs, 3000);
}

function signOut(message = "") {
  sessionStorage.removeItem(TOKEN_KEY);
  state.token = null;
  clearInterval(state.jobsTimer);
  if (state.stream) state.stream.abort();
  $("#app").hidden = true;
  $("#login").hidden = false;
  $("#sign-out").hidden = true;
  $("#connection").textContent = "not signed in";
  $("#login-error").textContent = message;
}

// ------------------------------------------------------------------ jobs list

async function refreshJobs() {
  if (!state.token) return;
  let page;
  try { page = await api("/v1/jobs?limit=50"); } catch { return; }
  const body = $("#jobs tbody");
  body.textContent = "";
  $("#jobs-empty").hidden = page.data.length > 0;
  for (const job of page.data) {
    const row = document.createElement("tr");
    row.dataset.jobId = job.id;
    if (job.id === state.selected) row.classList.add("selected");
    const cells = [job.name, job.status, job.progress.epoch, job.progress.step,
                   formatNumber(job.progress.current_lr)];
    for (const value of cells) {
      const cell = document.createElement("td");
      cell.textContent = String(value);
      row.append(cell);
    }
    row.children[1].className = `status-${job.status}`;
    row.addEventListener("click", () => selectJob(job.id));
    body.append(row);
    if (job.id === state.selected) showJob(job);
  }
}

// ------------------------------------------------------------------ one job

function showJob(job) {
  state.jobStatus = job.status;
  $("#job-title").textContent = `${job.name} (${job.id.slice(0, 8)})`;
  $("#job-status").textContent = job.status;
  $("#job-status").className = `status-${job.status}`;
  // Live events run ahead of the DB copy (written in batches): never step backwards.
  if (job.progress.step >= state.liveStep) {
    state.liveStep = job.progress.step;
    $("#job-epoch").textContent = job.progress.epoch;
    $("#job-step").textContent = job.progress.step;
    for (const [name, value] of Object.entries(job.progress.metrics || {})) setLatest(name, value);
  }
}

function setLatest(name, value) {
  let row = document.querySelector(`#latest tr[data-metric="${CSS.escape(name)}"]`);
  if (!row) {
    row = document.createElement("tr");
    row.dataset.metric = name;
    row.append(document.createElement("td"), document.createElement("td"));
    row.children[0].textContent = name;
    $("#latest tbody").append(row);
  }
  row.children[1].textContent = formatNumber(value);
}

async function selectJob(jobId) {
  if (state.stream) state.stream.abort();
  state.selected = jobId;
  state.lastEventId = null;
  state.liveStep = 0;
  state.liveLr = null;
  chart.clear();
  $("#latest tbody").textContent = "";
  $("#job-card").hidden = false;
  for (const row of document.querySelectorAll("#jobs tbody tr")) {
    row.classList.toggle("selected", row.dataset.jobId === jobId);
  }
  showJob(await api(`/v1/jobs/${jobId}`));
  await Promise.all([loadHistory(jobId), refreshLearningRate(jobId)]);
  openStream(jobId);
}

async function loadHistory(jobId) {
  let cursor = null;
  for (let page = 0; page < 20; page++) {
    const query = cursor === null ? "" : `?cursor=${encodeURIComponent(cursor)}`;
    const body = await api(`/v1/jobs/${jobId}/metrics${query}`);
    if (state.selected !== jobId) return;
    for (const p of body.points) chart.add(p.name, p.step, p.value);
    if (body.next_cursor === null) return;
    cursor = body.next_cursor;
  }
}

async function refreshLearningRate(jobId) {
  const lr = await api(`/v1/jobs/${jobId}/learning-rate`);
  if (state.selected !== jobId) return;
  // Live lr events beat the DB copy, which the worker writes a moment later.
  if (state.liveLr === null) $("#lr-current").textContent = formatNumber(lr.learning_rate);
  $("#lr-schedule").textContent = lr.schedule ? `schedule: ${lr.schedule.type}` : "no schedule";
  const body = $("#lr-changes tbody");
  body.textContent = "";
  for (const change of lr.changes.slice().reverse()) {
    const row = document.createElement("tr");
    for (const value of [formatNumber(change.requested_lr), change.mode, change.status,
                         change.applied_step ?? "–"]) {
      const cell = document.createElement("td");
      cell.textContent = String(value);
      row.append(cell);
    }
    body.append(row);
  }
}

// ------------------------------------------------------------------ live events

async function openStream(jobId) {
  const controller = new AbortController();
  state.stream = controller;
  const headers = { Authorization: `Bearer ${state.token}`, Accept: "text/event-stream" };
  if (state.lastEventId) headers["Last-Event-ID"] = state.lastEventId;
  $("#stream-state").textContent = "live";
  try {
    const response = await fetch(`/v1/jobs/${jobId}/events`, { headers, signal: controller.signal });
    if (!response.ok) throw new Error(`events: HTTP ${response.status}`);
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
    $("#stream-state").textContent = `reconnecting (${error.message})`;
  }
  if (controller.signal.aborted || state.selected !== jobId) return;
  if (TERMINAL.has(state.jobStatus)) { $("#stream-state").textContent = "finished"; return; }
  // The server closes streams after a maximum lifetime; pick up where we left off.
  setTimeout(() => { if (state.selected === jobId) openStream(jobId); }, 1000);
}

function setLiveLr(value) {
  state.liveLr = value;
  $("#lr-current").textContent = formatNumber(value);
}

function handleFrame(jobId, frame) {
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
  if (!event.data || state.selected !== jobId) return;
  if (event.id) state.lastEventId = event.id;
  const data = JSON.parse(event.data);
  if (event.type === "metric") {
    for (const [name, value] of Object.entries(data.values)) {
      chart.add(name, data.step, value);
      setLatest(name, value);
    }
    if (typeof data.values.lr === "number") setLiveLr(data.values.lr);
    if (data.step >= state.liveStep) {
      state.liveStep = data.step;
      $("#job-step").textContent = data.step;
      $("#job-epoch").textContent = data.epochs_done ?? data.epoch;
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
  } else if (event.type === "status") {
    state.jobStatus = data.status;
    $("#job-status").textContent = data.status;
    $("#job-status").className = `status-${data.status}`;
    refreshJobs();
  } else if (event.type === "checkpoint") {
    $("#control-message").textContent = `checkpoint at step ${data.step}`;
  } else if (event.type === "log") {
    $("#control-message").textContent = data.message;
  }
}

// ------------------------------------------------------------------ wiring

$("#token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  signIn($("#token-input").value.trim());
  $("#token-input").value = "";
});
$("#sign-out").addEventListener("click", () => signOut());

for (const button of document.querySelectorAll(".controls button")) {
  button.addEventListener("click", async () => {
    const action = button.dataset.action;
    try {
      const result = await api(`/v1/jobs/${state.selected}/${action}`, { method: "POST" });
      $("#control-message").textContent = result.pending
        ? `${action} sent to the worker` : `job is ${result.status}`;
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
    const result = await api(`/v1/jobs/${state.selected}/learning-rate`, {
      method: "PUT", json: { learning_rate: value, mode: $("#lr-mode").value },
    });
    $("#lr-message").textContent = `change ${result.change_id.slice(0, 8)} pending`;
    await refreshLearningRate(state.selected);
  } catch (error) {
    $("#lr-message").textContent = error.message;
  }
});

if (state.token) signIn(state.token);
