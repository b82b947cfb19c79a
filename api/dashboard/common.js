// Shared by the dashboard's scripts: the API client (token from sessionStorage, sent only
// in the Authorization header), small DOM helpers and formatting.
//
//   const job = await api(`/v1/jobs/${id}`);
//   row.append(cell(shortId(job.id)));
"use strict";

const TOKEN_KEY = "rudder.token";
const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);
const $ = (selector) => document.querySelector(selector);

const session = { token: sessionStorage.getItem(TOKEN_KEY), onUnauthorized: null };

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error && body.error.message) || `HTTP ${status}`);
    this.status = status;
    this.details = body && body.error ? body.error.details : null;
  }
}

async function api(path, options = {}) {
  const headers = { Authorization: `Bearer ${session.token}`, ...(options.headers || {}) };
  if (options.json !== undefined) {
    headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(options.json);
  }
  const response = await fetch(path, { ...options, headers });
  const body = response.headers.get("content-type")?.includes("json")
    ? await response.json() : null;
  if (response.status === 401 && session.onUnauthorized) {
    session.onUnauthorized("The token was refused; enter it again.");
  }
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

function cell(value, className) {
  const td = document.createElement("td");
  td.textContent = value === null || value === undefined ? "–" : String(value);
  if (className) td.className = className;
  return td;
}

function tableRow(values) {
  const row = document.createElement("tr");
  for (const value of values) row.append(value instanceof Node ? value : cell(value));
  return row;
}

function shortId(id) { return id.slice(0, 8); }

function formatDuration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "–";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

function formatTime(iso) {
  if (!iso) return "–";
  const d = new Date(iso);
  return `${d.toLocaleDateString()} ${d.toLocaleTimeString()}`;
}

// The metric a list row shows: validation accuracy if there is one, else a loss.
function headlineMetric(metrics) {
  const names = Object.keys(metrics || {});
  const pick = ["val_accuracy", "val_loss", "train_accuracy", "train_loss"].find((n) => names.includes(n))
    ?? names.find((n) => n !== "lr");
  return pick ? `${pick} ${formatNumber(metrics[pick])}` : "–";
}

// A read-only YAML view of a spec (the API stores it as JSON).
function toYaml(value, indent = "") {
  if (Array.isArray(value)) {
    if (!value.length) return "[]";
    return value.map((item) => {
      const inner = toYaml(item, `${indent}  `);
      return `\n${indent}- ${isObject(item) ? inner.trimStart() : inner}`;
    }).join("");
  }
  if (isObject(value)) {
    const keys = Object.keys(value);
    if (!keys.length) return "{}";
    return keys.map((key) => {
      const v = value[key];
      const nested = (isObject(v) && Object.keys(v).length) || (Array.isArray(v) && v.length);
      return `\n${indent}${key}:${nested ? "" : " "}${toYaml(v, `${indent}  `)}`;
    }).join("");
  }
  if (typeof value === "string") return /^[\w./-]+$/.test(value) && !/^(true|false|null|[\d.e+-]+)$/i.test(value) ? value : JSON.stringify(value);
  return value === null ? "null" : String(value);
}

function isObject(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }

// {"optimizer": {"type": "adam"}} -> {"optimizer.type": "adam"}: for tables of fields.
function flatten(value, prefix = "", out = {}) {
  if (isObject(value)) {
    for (const [k, v] of Object.entries(value)) flatten(v, prefix ? `${prefix}.${k}` : k, out);
  } else if (Array.isArray(value) && value.some((v) => isObject(v) || Array.isArray(v))) {
    value.forEach((v, i) => flatten(v, `${prefix}[${i}]`, out));
  } else {
    out[prefix] = Array.isArray(value) ? JSON.stringify(value) : value;
  }
  return out;
}
