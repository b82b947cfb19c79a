// What is drawn over a chart: epoch boundaries (lines and labels thinned to what fits, so
// a long run shows "epoch 10, 20, ..." instead of a dark band) and the runtime-change
// markers (lr changes, every other steering command by its kind, pause/resume/restart,
// checkpoints) as focusable elements with the change on hover.
//
//   drawEpochs(u, panel, [[1, 10], [2, 20]], (step) => step);
//   placeMarkers(u, [{kind: "lr", step: 31, title: "lr 0.01", detail: "..."}], (s) => s);
"use strict";

const MARKER_COLOURS = { lr: "#7c3aed", status: "#d97706", checkpoint: "#059669", command: "#0f766e" };
// Steering commands by kind, so a rollback reads differently from a freeze at a glance.
const COMMAND_COLOURS = {
  set_hyperparameters: "#2563eb", set_schedule: "#4f46e5", freeze: "#0891b2",
  unfreeze: "#0891b2", evaluate: "#6b7280", checkpoint: "#059669", set_rules: "#a16207",
  rollback: "#dc2626", pause: "#d97706", cancel: "#991b1b", stop: "#991b1b",
};
const STRIDES = [1, 2, 5].flatMap((m) => [1, 10, 100, 1000].map((p) => m * p)).sort((a, b) => a - b);
const MIN_LINE_GAP = 6;   // css px between two drawn epoch lines

function markerColour(entry) {
  if (entry.colour) return entry.colour;
  if (entry.kind === "command") return COMMAND_COLOURS[entry.command_kind] || MARKER_COLOURS.command;
  return MARKER_COLOURS[entry.kind] || "#111827";
}

// The smallest stride (1, 2, 5, 10, ...) whose epochs are at least `gap` px apart.
function strideFor(xs, gap) {
  for (const stride of STRIDES) {
    let ok = true;
    for (let i = stride; i < xs.length && ok; i += stride) ok = xs[i] - xs[i - stride] >= gap;
    if (ok) return stride;
  }
  return STRIDES[STRIDES.length - 1];
}

// Epoch boundaries: `ends` = [[epoch, step after which it starts], ...]; `toX` maps a
// step to the panel's x. Records what it drew on the panel (epochLines, epochLabels).
function drawEpochs(u, panel, ends, toX) {
  const ctx = u.ctx;
  const { top, height } = u.bbox;
  const dpr = devicePixelRatio;
  const min = u.scales.x.min, max = u.scales.x.max;
  const visible = ends.map(([epoch, step]) => [epoch, toX(step)]).filter(([, x]) => x >= min && x <= max);
  const xs = visible.map(([, x]) => u.valToPos(x, "x"));
  ctx.save();
  ctx.font = `${10 * dpr}px system-ui, sans-serif`;
  const lastLabel = visible.length ? `epoch ${visible[visible.length - 1][0]}` : "";
  const labelWidth = ctx.measureText(lastLabel).width / dpr + 8;
  const lineStride = strideFor(xs, MIN_LINE_GAP);
  let labelStride = strideFor(xs, labelWidth);
  while (labelStride % lineStride) {  // labelled epochs are among the lines drawn
    const next = STRIDES[STRIDES.indexOf(labelStride) + 1];
    labelStride = next ?? labelStride * lineStride;
  }
  const lines = [], labels = [];
  // Thin by epoch number, so the labelled epochs are round ones (10, 20, ...) as you pan.
  visible.forEach(([epoch], i) => {
    if (epoch % lineStride) return;
    const x = Math.round(u.valToPos(visible[i][1], "x", true)) + 0.5;  // canvas px
    const labelled = epoch % labelStride === 0;
    ctx.strokeStyle = labelled ? "#9ca3af" : "#e5e7eb";
    ctx.setLineDash(labelled ? [2, 4] : [1, 5]);
    ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, top + height); ctx.stroke();
    lines.push(epoch);
    if (labelled) {
      const text = `epoch ${epoch}`;
      const w = ctx.measureText(text).width;
      ctx.fillStyle = "rgba(107,114,128,0.8)";  // no box: a label must not hide a curve
      ctx.fillText(text, x + 4, top + 12 * dpr);
      labels.push({ epoch, x: xs[i], width: w / dpr + 4 });
    }
  });
  ctx.restore();
  panel.epochLines = lines;
  panel.epochLabels = labels;
}

// Markers are elements over the plot, so they can be hovered, focused and tested.
function placeMarkers(u, entries, toX) {
  for (const old of u.over.querySelectorAll(".marker")) old.remove();
  for (const entry of entries) {
    if (entry.step === null || entry.step === undefined) continue;
    const value = toX(entry.step);
    if (value < u.scales.x.min || value > u.scales.x.max) continue;
    const mark = document.createElement("div");
    mark.className = `marker marker-${entry.kind}${entry.abandoned ? " abandoned" : ""}`;
    mark.dataset.step = String(entry.step);
    mark.dataset.kind = entry.kind;
    if (entry.command_kind) mark.dataset.commandKind = entry.command_kind;
    if (entry.run) mark.dataset.run = entry.run;
    mark.tabIndex = 0;
    const x = u.valToPos(value, "x");
    mark.style.left = `${x}px`;
    // Near the right edge the hover text opens leftwards so it stays on the page.
    if (x > u.over.clientWidth * 0.6) mark.classList.add("tip-left");
    mark.style.borderColor = markerColour(entry);
    const tip = document.createElement("span");
    tip.className = "marker-tip";
    const prefix = entry.runLabel ? `${entry.runLabel}: ` : "";
    tip.textContent = `${prefix}step ${entry.step}: ${entry.title}${entry.detail ? ` (${entry.detail})` : ""}`
      + (entry.abandoned ? " [abandoned by a rollback]" : "");
    mark.append(tip);
    u.over.append(mark);
  }
}
