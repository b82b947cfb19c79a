// Rudder dashboard: plain JS, no build step, nothing loaded from outside this server.
// This file signs in and out and switches views; the views live in job.js, jobs.js,
// compare.js, submit.js and charts.js.
"use strict";

async function signIn(token) {
  session.token = token;
  try {
    await api("/v1/jobs?limit=1");
  } catch (error) {
    $("#login-error").textContent = error.message;
    session.token = null;
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  $("#login").hidden = true;
  $("#app").hidden = false;
  $("#tabs").hidden = false;
  $("#sign-out").hidden = false;
  $("#connection").textContent = "signed in";
  await refreshJobs();
  clearInterval(listView.timer);
  listView.timer = setInterval(() => { refreshJobs(); if (currentView() === "system") refreshSystem(); }, 3000);
}

function signOut(message = "") {
  sessionStorage.removeItem(TOKEN_KEY);
  session.token = null;
  clearInterval(listView.timer);
  if (jobView.stream) jobView.stream.abort();
  $("#app").hidden = true;
  $("#tabs").hidden = true;
  $("#login").hidden = false;
  $("#sign-out").hidden = true;
  $("#connection").textContent = "not signed in";
  $("#login-error").textContent = message;
}
session.onUnauthorized = signOut;

function currentView() { return document.querySelector("#tabs button.active")?.dataset.view; }

function showView(name) {
  for (const button of document.querySelectorAll("#tabs button")) {
    button.classList.toggle("active", button.dataset.view === name);
  }
  for (const view of document.querySelectorAll(".view")) view.hidden = view.id !== `view-${name}`;
  if (name === "system") refreshSystem();
  if (name === "compare" && !compareView.jobs.length) $("#compare-help").hidden = false;
}

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
    const gpu = w.gpus.length
      ? w.gpus.map((g) => `${g.name} ${g.utilization_percent ?? "?"}% ${(g.memory_used_bytes / 2 ** 30).toFixed(1)} GiB`).join(", ")
      : "none";
    const row = tableRow([w.worker_id, w.queues.join(", "), w.current_job_id ? shortId(w.current_job_id) : (w.busy ? "busy (another user's job)" : "idle"),
                          w.cpu_percent === null ? "–" : `${w.cpu_percent.toFixed(0)}%`, memory, gpu,
                          `${formatDuration(w.seconds_since_seen)} ago`]);
    row.dataset.workerId = w.worker_id;
    workers.append(row);
  }
  const queues = $("#queues tbody");
  queues.textContent = "";
  for (const q of body.queues) queues.append(tableRow([q.name, q.waiting]));
}

// Without uPlot (node_modules not installed) say how to fix it instead of failing quietly.
if (typeof uPlot === "undefined") {
  const banner = $("#vendor-missing");
  banner.hidden = false;
  banner.textContent = "The chart library is not installed on this server: run `make dashboard-deps` "
    + "(npm ci) in the Rudder checkout and reload.";
}

$("#token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  signIn($("#token-input").value.trim());
  $("#token-input").value = "";
});
$("#sign-out").addEventListener("click", () => signOut());
for (const button of document.querySelectorAll("#tabs button")) {
  button.addEventListener("click", () => showView(button.dataset.view));
}
wireJobPage();
wireJobList();
wireCompare();
wireSubmit();
if (session.token) signIn(session.token);
