// Submit a job from the browser: a pasted or uploaded spec (YAML or JSON) goes to
// POST /v1/jobs as JSON; the API's validation errors are shown next to the spec lines
// of the fields they name.
"use strict";

function parseSpec(text) {
  const trimmed = text.trim();
  if (!trimmed) throw new Error("the spec is empty");
  // js-yaml 4's load() knows only plain data types: no code runs from a spec.
  return trimmed.startsWith("{") ? JSON.parse(trimmed) : jsyaml.load(trimmed);
}

// The line of "optimizer.learning_rate" in YAML or JSON text: each name in the path is
// looked for after the line of the previous one. -1 when it cannot be found.
function locateField(lines, field) {
  let at = -1;
  for (const part of field.split(/[.[\]]/).filter(Boolean)) {
    if (/^\d+$/.test(part)) continue;
    const key = new RegExp(`^\\s*(- )?["']?${part.replace(/[^\w-]/g, "\\$&")}["']?\\s*:`);
    const found = lines.findIndex((line, i) => i > at && key.test(line));
    if (found < 0) return at;
    at = found;
  }
  return at;
}

function showFieldErrors(text, details) {
  const list = $("#submit-errors");
  list.textContent = "";
  const lines = text.split("\n");
  const notes = new Map();
  const unplaced = [];
  for (const detail of details) {
    const line = locateField(lines, detail.field);
    if (line < 0) unplaced.push(detail); else notes.set(line, [...(notes.get(line) || []), detail]);
  }
  for (const detail of unplaced) list.append(errorItem(detail));
  lines.forEach((line, i) => {
    if (!notes.has(i)) return;
    const context = document.createElement("li");
    context.className = "spec-line";
    const code = document.createElement("code");
    code.textContent = `${i + 1} | ${line}`;
    context.append(code);
    for (const detail of notes.get(i)) context.append(errorItem(detail, "div"));
    list.append(context);
  });
}

function errorItem(detail, tag = "li") {
  const item = document.createElement(tag);
  item.className = "field-error";
  item.dataset.field = detail.field;
  const name = document.createElement("strong");
  name.textContent = detail.field;
  item.append(name, `: ${detail.message}`);
  return item;
}

function wireSubmit() {
  $("#spec-file").addEventListener("change", async () => {
    const file = $("#spec-file").files[0];
    if (file) $("#spec-text").value = await file.text();
  });
  $("#submit-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = $("#spec-text").value;
    const message = $("#submit-message");
    $("#submit-errors").textContent = "";
    $("#submit-parse-error").hidden = true;
    message.className = "";
    let spec;
    try {
      spec = parseSpec(text);
    } catch (error) {
      // js-yaml's message ends with a snippet of the lines around the mistake: keep its
      // lines (and their alignment) instead of running them into one paragraph.
      message.className = "error";
      const [headline, ...snippet] = String(error.message).split("\n");
      message.textContent = `could not read the spec: ${headline}`;
      const pre = $("#submit-parse-error");
      pre.textContent = snippet.join("\n").replace(/^\n+|\s+$/g, "");
      pre.hidden = !pre.textContent;
      return;
    }
    try {
      const job = await api("/v1/jobs", { method: "POST", json: spec });
      message.textContent = `submitted ${job.name} (${shortId(job.id)}), ${job.status}`;
      await refreshJobs();
      navigate(`/jobs/${job.id}`);
    } catch (error) {
      message.className = "error";
      message.textContent = error.message;
      if (Array.isArray(error.details)) showFieldErrors(text, error.details);
    }
  });
}
