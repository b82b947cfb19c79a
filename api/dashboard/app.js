// Rudder dashboard: plain JS, no build step, nothing loaded from outside this server.
// This file signs in and out and switches views; the views live in job*.js, jobs.js,
// compare.js, submit.js and system.js, the charts in chart-*.js and charts.js, the URLs
// in router.js.
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
  applyListFilters(new URLSearchParams(location.search));
  await refreshJobs();
  applyRoute();
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

// Shows a view; the URL is the router's business (navigate() calls this).
function showView(name) {
  const changed = currentView() !== name;
  for (const button of document.querySelectorAll("#tabs button")) {
    button.classList.toggle("active", button.dataset.view === name);
  }
  for (const view of document.querySelectorAll(".view")) view.hidden = view.id !== `view-${name}`;
  if (name === "system" && changed) refreshSystem();
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
  button.addEventListener("click", () => navigate(viewPath(button.dataset.view)));
}
wireJobPage();
wireCheckpointActions();
wireJobList();
wireCompare();
wireSubmit();
if (session.token) signIn(session.token);
