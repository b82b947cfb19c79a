// The open job's event stream, read with fetch() streaming (EventSource cannot send the
// Authorization header): metrics to the charts, lr/command/status/checkpoint events to
// the side panels, log lines with the time they happened.
"use strict";

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

// A Redis stream id ("1700000000123-0") is the server's time of the entry, in ms.
function streamTime(id) {
  const ms = id ? Number(id.split("-")[0]) : NaN;
  return Number.isFinite(ms) && ms > 0 ? ms : null;
}

function handleFrame(jobId, frame) {
  const event = parseFrame(frame);
  if (!event.data || jobView.selected !== jobId) return;
  if (event.id) jobView.lastEventId = event.id;
  const data = JSON.parse(event.data);
  const happened = streamTime(event.id);
  if (event.type === "metric") {
    for (const [name, value] of Object.entries(data.values)) {
      panels().addPoint(name, data.step, value, data.epoch, data.time);
      setLatest(name, value);
    }
    if (typeof data.values.lr === "number") setLiveLr(data.values.lr);
    notePace(data.step, data.time);
    if (data.step >= jobView.liveStep) {
      jobView.liveStep = data.step;
      showProgress(data.epochs_done ?? data.epoch, data.step);
    }
  } else if (event.type === "lr" || event.type === "command") {
    if (event.type === "lr") {
      // status "rejected": the trainer refused the change; the lr in effect is unchanged.
      if (data.status === "rejected") {
        $("#lr-message").textContent = `rejected: ${data.reason}`;
      } else {
        setLiveLr(data.learning_rate);
        $("#lr-message").textContent = `applied at step ${data.applied_step}`;
      }
      refreshLearningRate(jobId);
    }
    refreshTimeline(jobId);
  } else if (event.type === "status") {
    setStatus(data.status, data.reason ?? jobView.job?.status_reason);
    refreshTimeline(jobId);
    refreshJobs();
  } else if (event.type === "checkpoint") {
    addLog("info", `checkpoint at step ${data.step} (epoch ${data.epoch})`, happened);
    refreshCheckpoints(jobId);
    refreshTimeline(jobId);
  } else if (event.type === "log") {
    addLog(data.level, data.message, happened);
  }
}

// `at`: when it happened (ms; the server's time of the event), not when it arrived here.
function addLog(level, message, at) {
  const item = document.createElement("li");
  item.className = `log-${level}`;
  const when = at ?? Date.now();
  const time = document.createElement("time");
  time.dateTime = new Date(when).toISOString();
  time.textContent = new Date(when).toLocaleTimeString();
  time.title = new Date(when).toLocaleString();
  item.append(time, ` ${level} ${message}`);
  item.dataset.time = String(when);
  $("#log").prepend(item);
  while ($("#log").children.length > 500) $("#log").lastChild.remove();
}

function setLiveLr(value) {
  jobView.liveLr = value;
  $("#lr-current").textContent = formatNumber(value);
}
