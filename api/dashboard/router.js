// Deep links: every view has its own URL, so a reload, a bookmark or back/forward opens it
// again. The api serves the page at each of these paths.
//
//   /                     the job list (?status=running&q=name: its filters)
//   /jobs/<id>            the list with that job open
//   /compare?jobs=a,b     compare those jobs (&metrics=train_loss,val_accuracy)
//   /submit, /system      the submit form, the workers
"use strict";

const JOB_PATH = /^\/jobs\/([A-Za-z0-9-]{1,64})\/?$/;

function navigate(path, { replace = false } = {}) {
  if (location.pathname + location.search !== path) {
    history[replace ? "replaceState" : "pushState"](null, "", path);
  }
  applyRoute();
}

// The current URL's query with `changes` applied (empty values dropped), for filters
// that update the address without adding a history entry.
function withQuery(changes) {
  const params = new URLSearchParams(location.search);
  for (const [key, value] of Object.entries(changes)) {
    if (value) params.set(key, value); else params.delete(key);
  }
  const query = params.toString().replace(/%2C/g, ",");
  return `${location.pathname}${query ? `?${query}` : ""}`;
}

function applyRoute() {
  if (!session.token) return;
  const path = location.pathname;
  const params = new URLSearchParams(location.search);
  const job = JOB_PATH.exec(path);
  if (job) {
    showView("jobs");
    if (jobView.selected !== job[1]) selectJob(job[1]);
    return;
  }
  if (path === "/compare") {
    showView("compare");
    const ids = (params.get("jobs") || "").split(",").filter(Boolean);
    const metrics = (params.get("metrics") || "").split(",").filter(Boolean);
    openComparison(ids, metrics);
    return;
  }
  if (path === "/submit" || path === "/system") {
    showView(path.slice(1));
    return;
  }
  showView("jobs");
  if (jobView.selected) closeJob();
  applyListFilters(params);
}

function viewPath(view) {
  if (view === "jobs") return jobView.selected ? `/jobs/${jobView.selected}` : "/";
  if (view === "compare") return compareView.path || "/compare";
  return `/${view}`;
}

window.addEventListener("popstate", applyRoute);
