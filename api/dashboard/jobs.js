// The job list: short id, name, status, progress, created, total running time, current
// metric; filtered by status (by the API) and name (here), refreshed every few seconds.
// The filters are part of the URL (?status=&q=).
"use strict";

const listView = { timer: null, jobs: [], compare: new Set(), loaded: false };

async function refreshJobs() {
  if (!session.token) return;
  const status = $("#status-filter").value;
  let page;
  try {
    page = await api(`/v1/jobs?limit=200${status ? `&status=${encodeURIComponent(status)}` : ""}`);
  } catch { return; }
  if (status !== $("#status-filter").value) return;  // the filter changed meanwhile
  listView.jobs = page.data;
  listView.loaded = true;
  renderJobs();
  const selected = page.data.find((job) => job.id === jobView.selected);
  // The stream owns the open job's live values; the list refreshes only its fields.
  if (selected && selected.status !== jobView.status && !jobView.streaming) {
    showJob({ ...selected, spec: jobView.job?.spec, steps_per_second: jobView.job?.steps_per_second });
  }
}

function applyListFilters(params) {
  const status = params.get("status") || "";
  const search = params.get("q") || "";
  const filter = $("#status-filter");
  if ([...filter.options].some((o) => o.value === status) && filter.value !== status) {
    filter.value = status;
    refreshJobs();
  }
  if ($("#job-search").value !== search) { $("#job-search").value = search; renderJobs(); }
}

// What the list says when it shows no row: nothing submitted yet, or nothing matches.
function emptyListMessage(needle, status) {
  if (!listView.loaded) return "Loading jobs…";
  if (!needle && !status) return null;
  const parts = [status && `status “${status}”`, needle && `a name containing “${needle}”`].filter(Boolean);
  return `No jobs match ${parts.join(" and ")}.`;
}

function renderJobs() {
  const needle = $("#job-search").value.trim().toLowerCase();
  const status = $("#status-filter").value;
  const jobs = listView.jobs.filter((job) => !needle || job.name.toLowerCase().includes(needle));
  const body = $("#jobs tbody");
  body.textContent = "";
  const message = jobs.length ? null : emptyListMessage(needle, status);
  $("#jobs-empty").hidden = jobs.length > 0 || message !== null;
  $("#jobs-no-match").hidden = jobs.length > 0 || message === null;
  $("#jobs-no-match").textContent = message ?? "";
  $("#jobs").classList.toggle("empty", jobs.length === 0);
  for (const job of jobs) {
    const tick = document.createElement("input");
    tick.type = "checkbox";
    tick.className = "compare-tick";
    tick.checked = listView.compare.has(job.id);
    tick.setAttribute("aria-label", `compare ${job.name}`);
    tick.addEventListener("click", (e) => {
      e.stopPropagation();
      if (tick.checked) listView.compare.add(job.id); else listView.compare.delete(job.id);
      $("#compare-selected").disabled = listView.compare.size < 2;
    });
    const tickCell = document.createElement("td");
    tickCell.append(tick);
    const p = job.progress;
    const progress = document.createElement("td");
    progress.className = "progress";
    const bar = document.createElement("progress");
    bar.max = job.epochs_total || 1;
    bar.value = Math.min(p.epoch, bar.max);
    progress.append(bar, ` ${p.epoch}/${job.epochs_total ?? "?"} · step ${p.step}`);
    const duration = cell(job.started_at ? formatDuration(job.running_seconds) : "–", "duration");
    duration.title = "time spent training, over every run";
    const row = tableRow([tickCell, cell(shortId(job.id), "mono"), job.name,
                          cell(job.status, `status-${job.status}`), progress,
                          formatTime(job.created_at), duration, headlineMetric(p.metrics)]);
    row.dataset.jobId = job.id;
    row.dataset.status = job.status;
    row.title = job.id;
    if (job.id === jobView.selected) row.classList.add("selected");
    row.addEventListener("click", () => navigate(`/jobs/${job.id}`));
    body.append(row);
  }
}

function wireJobList() {
  $("#job-search").addEventListener("input", () => {
    renderJobs();
    if (location.pathname === "/") history.replaceState(null, "", withQuery({ q: $("#job-search").value.trim() }));
  });
  $("#status-filter").addEventListener("change", () => {
    listView.jobs = [];
    listView.loaded = false;
    renderJobs();
    refreshJobs();
    if (location.pathname === "/") history.replaceState(null, "", withQuery({ status: $("#status-filter").value }));
  });
  $("#compare-selected").addEventListener("click", () => {
    navigate(`/compare?jobs=${[...listView.compare].join(",")}`);
  });
}
