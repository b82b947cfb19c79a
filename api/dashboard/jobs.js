// The job list: short id, name, status, progress, created, duration, current metric;
// filtered by status (by the API) and name (here), refreshed every few seconds.
"use strict";

const listView = { timer: null, jobs: [], compare: new Set() };

async function refreshJobs() {
  if (!session.token) return;
  const status = $("#status-filter").value;
  let page;
  try {
    page = await api(`/v1/jobs?limit=200${status ? `&status=${encodeURIComponent(status)}` : ""}`);
  } catch { return; }
  listView.jobs = page.data;
  renderJobs();
  const selected = page.data.find((job) => job.id === jobView.selected);
  // The stream owns the open job's live values; the list refreshes only its fields.
  if (selected && selected.status !== jobView.status && !jobView.streaming) showJob({ ...selected, spec: jobView.job?.spec });
}

function renderJobs() {
  const needle = $("#job-search").value.trim().toLowerCase();
  const jobs = listView.jobs.filter((job) => !needle || job.name.toLowerCase().includes(needle));
  const body = $("#jobs tbody");
  body.textContent = "";
  $("#jobs-empty").hidden = jobs.length > 0;
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
    const row = tableRow([tickCell, cell(shortId(job.id), "mono"), job.name,
                          cell(job.status, `status-${job.status}`), progress,
                          formatTime(job.created_at), formatDuration(jobDuration(job)),
                          headlineMetric(p.metrics)]);
    row.dataset.jobId = job.id;
    row.dataset.status = job.status;
    row.title = job.id;
    if (job.id === jobView.selected) row.classList.add("selected");
    row.addEventListener("click", () => selectJob(job.id));
    body.append(row);
  }
}

function wireJobList() {
  $("#job-search").addEventListener("input", renderJobs);
  $("#status-filter").addEventListener("change", refreshJobs);
  $("#compare-selected").addEventListener("click", () => {
    showView("compare");
    compareJobs([...listView.compare]);
  });
}
