// Actions on one of the job's checkpoints: "fork from here" (a new job that starts from
// it, with overrides) and "roll back to here" (this job rewinds to it). Opened from a
// checkpoint marker on the charts (click, or Enter/Space on the focused marker) or from a
// row of the checkpoints table. They live in one dialog outside the charts, because the
// markers are redrawn with every point that arrives.
//
//   openCheckpointActions(120, "fork");  // the dialog for step 120, fork form open
"use strict";

const ROLLBACK_STATUSES = new Set(["paused", "running"]);
const ROLLBACK_POLL_MS = 1000;
const ROLLBACK_POLLS = 120;  // give up watching a pending rollback after ~2 minutes
const actionsView = { step: null, opener: null, watching: null };

// Why the job cannot roll back now ("" when it can): the API refuses (409) a job that is
// neither paused nor running.
function rollbackRefusal(status) {
  if (ROLLBACK_STATUSES.has(status)) return "";
  return `Only a paused or running job can roll back; this one is ${status ?? "loading"}.`;
}

// Roll back buttons (the table's and the dialog's) follow the job's status.
function updateRollbackAvailability() {
  const reason = rollbackRefusal(jobView.status);
  for (const button of document.querySelectorAll('[data-checkpoint-action="rollback"]')) {
    button.disabled = Boolean(reason);
    button.title = reason;
  }
  $("#rollback-refusal").textContent = reason;
  if (reason) $("#rollback-form").hidden = true;
}

// The table's cell for a checkpoint's row: the same two actions as its marker.
function checkpointActionCell(step) {
  const td = document.createElement("td");
  td.className = "checkpoint-actions";
  for (const [action, text] of [["fork", "Fork from here"], ["rollback", "Roll back to here"]]) {
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = text;
    button.dataset.checkpointAction = action;
    button.dataset.step = String(step);
    if (action === "rollback") button.className = "danger";
    button.addEventListener("click", () => openCheckpointActions(step, action, button));
    td.append(button);
  }
  const reason = rollbackRefusal(jobView.status);
  const rollback = td.lastChild;
  rollback.disabled = Boolean(reason);
  rollback.title = reason;
  return td;
}

function openCheckpointActions(step, action, opener) {
  const dialog = $("#checkpoint-dialog");
  actionsView.step = step;
  actionsView.opener = opener ?? document.activeElement;
  dialog.dataset.step = String(step);
  $("#checkpoint-title").textContent = `Checkpoint at step ${step}`;
  $("#rollback-question").textContent = `Roll ${jobView.job?.name ?? "this job"} back to step `
    + `${step}? Its metric points after step ${step} are kept as an abandoned branch (drawn `
    + "faded), its later checkpoints are deleted, and training continues from this one.";
  $("#fork-form").reset();
  clearFieldErrors();
  setActionMessage("");
  $("#fork-form").hidden = true;
  $("#rollback-form").hidden = true;
  if (!dialog.open) dialog.showModal();
  updateRollbackAvailability();
  showActionForm(action);
}

function showActionForm(action) {
  if (action === "rollback" && rollbackRefusal(jobView.status)) action = null;
  $("#fork-form").hidden = action !== "fork";
  $("#rollback-form").hidden = action !== "rollback";
  if (action === "fork") $("#fork-lr").focus();
  else if (action === "rollback") $("#rollback-confirm").focus();
  else $('#checkpoint-dialog [data-checkpoint-action="fork"]').focus();
}

function closeCheckpointActions() {
  const dialog = $("#checkpoint-dialog");
  if (dialog.open) dialog.close();
}

function setActionMessage(text, isError = false) {
  const message = $("#checkpoint-message");
  message.textContent = text;
  message.classList.toggle("error", isError);
}

function clearFieldErrors() {
  for (const input of document.querySelectorAll("#fork-form [aria-invalid]")) {
    input.removeAttribute("aria-invalid");
  }
}

// The fork form's input for a field the API named ("overrides.epochs" -> the epochs
// box); anything without its own box belongs to the free overrides box.
function inputForField(field) {
  const name = String(field).replace(/^overrides\.?/, "");
  return document.querySelector(`#fork-form [data-override="${CSS.escape(name)}"]`)
    ?? $("#fork-overrides");
}

function mergeInto(target, source) {
  for (const [key, value] of Object.entries(source)) {
    if (isObject(value) && isObject(target[key])) mergeInto(target[key], value);
    else target[key] = value;
  }
  return target;
}

// The free box (YAML or JSON; js-yaml 4's load() builds plain data only) with the common
// fields' values on top. Throws an Error naming "overrides" when the box is not a mapping.
function forkOverrides() {
  const text = $("#fork-overrides").value.trim();
  let overrides = {};
  if (text) {
    try {
      overrides = text.startsWith("{") ? JSON.parse(text) : jsyaml.load(text);
    } catch (error) {
      throw new Error(`overrides: not YAML or JSON (${String(error.message).split("\n")[0]})`);
    }
    if (!isObject(overrides)) throw new Error("overrides: must be a mapping of spec fields");
  }
  for (const input of document.querySelectorAll("#fork-form [data-override]")) {
    if (input.value.trim() === "") continue;
    const path = input.dataset.override.split(".");
    const leaf = { [path.pop()]: Number(input.value) };
    mergeInto(overrides, path.reduceRight((inner, key) => ({ [key]: inner }), leaf));
  }
  return overrides;
}

async function submitFork(event) {
  event.preventDefault();
  clearFieldErrors();
  const jobId = jobView.selected;
  let overrides;
  try {
    overrides = forkOverrides();
  } catch (error) {
    $("#fork-overrides").setAttribute("aria-invalid", "true");
    setActionMessage(error.message, true);
    return;
  }
  setActionMessage(`forking from step ${actionsView.step}…`);
  try {
    const child = await api(`/v1/jobs/${jobId}/fork`, {
      method: "POST", json: { step: actionsView.step, overrides },
    });
    closeCheckpointActions();
    refreshJobs();
    navigate(`/jobs/${child.id}`);
  } catch (error) {
    // Only the message and the named field change: the form keeps what was typed.
    setActionMessage(error.message, true);
    for (const detail of Array.isArray(error.details) ? error.details : []) {
      if (detail.field) inputForField(detail.field).setAttribute("aria-invalid", "true");
    }
  }
}

async function submitRollback(event) {
  event.preventDefault();
  const jobId = jobView.selected;
  const step = actionsView.step;
  setActionMessage(`rolling back to step ${step}…`);
  let answer;
  try {
    answer = await api(`/v1/jobs/${jobId}/rollback`, { method: "POST", json: { step } });
  } catch (error) {
    setActionMessage(error.message, true);
    return;
  }
  $("#rollback-form").hidden = true;
  showRollbackState(answer.status, step, answer.applied_step, null);
  if (answer.status === "pending") watchRollback(jobId, answer.command_id, step);
  else await reloadAfterRollback(jobId);
}

function showRollbackState(status, step, appliedStep, reason) {
  const text = {
    applied: `rolled back to step ${appliedStep ?? step} (applied); the timeline records it`,
    pending: `rollback to step ${step} pending: the worker rewinds at its next step boundary`,
    rejected: `rollback to step ${step} rejected: ${reason}`,
  }[status] ?? `rollback to step ${step}: ${status}`;
  setActionMessage(text, status === "rejected");
  const dialog = $("#checkpoint-dialog");
  dialog.dataset.rollback = status;
  $("#control-message").textContent = text;
}

// A running job's rollback is pending until its worker confirms it; follow the command
// until it is applied or rejected, then show the rewound history.
async function watchRollback(jobId, commandId, step) {
  actionsView.watching = commandId;
  await refreshTimeline(jobId);
  for (let i = 0; i < ROLLBACK_POLLS && actionsView.watching === commandId; i++) {
    await new Promise((resolve) => setTimeout(resolve, ROLLBACK_POLL_MS));
    if (jobView.selected !== jobId) return;
    let command;
    try { command = await api(`/v1/jobs/${jobId}/commands/${commandId}`); } catch { continue; }
    if (command.status === "pending") continue;
    actionsView.watching = null;
    showRollbackState(command.status, step, command.applied_step, command.reason);
    await reloadAfterRollback(jobId);
    return;
  }
}

// The rollback set points aside and deleted later checkpoints: draw the job again.
async function reloadAfterRollback(jobId) {
  let job;
  try { job = await api(`/v1/jobs/${jobId}`); } catch { return; }
  if (jobView.selected !== jobId) return;
  jobView.liveStep = 0;
  showJob(job);
  panels().clear();
  await loadHistory(jobId);
  if (jobView.selected !== jobId) return;
  await Promise.all([refreshTimeline(jobId), refreshCheckpoints(jobId), loadLineage(job)]);
}

// A checkpoint marker (not one a rollback abandoned) opens the actions for its step.
function markerTarget(event) {
  const mark = event.target.closest?.(".marker-checkpoint");
  return mark && !mark.classList.contains("abandoned") ? mark : null;
}

function wireCheckpointActions() {
  const charts = $("#charts");
  charts.addEventListener("click", (event) => {
    const mark = markerTarget(event);
    if (mark) openCheckpointActions(Number(mark.dataset.step), null, mark);
  });
  charts.addEventListener("keydown", (event) => {
    const mark = markerTarget(event);
    if (!mark || (event.key !== "Enter" && event.key !== " ")) return;
    event.preventDefault();
    openCheckpointActions(Number(mark.dataset.step), null, mark);
  });
  const dialog = $("#checkpoint-dialog");
  for (const button of dialog.querySelectorAll("[data-checkpoint-action]")) {
    button.addEventListener("click", () => showActionForm(button.dataset.checkpointAction));
  }
  for (const button of dialog.querySelectorAll("[data-close]")) {
    button.addEventListener("click", closeCheckpointActions);
  }
  // Focus goes back where the dialog was opened from, if that is still on the page.
  dialog.addEventListener("close", () => {
    if (actionsView.opener?.isConnected) actionsView.opener.focus();
  });
  $("#fork-form").addEventListener("submit", submitFork);
  $("#rollback-form").addEventListener("submit", submitRollback);
}
