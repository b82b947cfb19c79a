// What the job page's charts hold: each metric's points by step, the recorded epoch/step
// pairs, and when each step was reported (for the wall-clock and relative-time x axes).
//
//   const store = new PointStore();
//   store.add("train_loss", 10, 0.52);
//   store.noteEpoch(0, 10);              // step 10 was reported in epoch 0
//   store.epochEnds();                   // [[1, 10]]: epoch 1 starts after step 10
"use strict";

const FAMILIES = [
  { key: "loss", label: "loss", test: (n) => /loss|entropy|perplexity|nll|mse|mae/i.test(n) },
  { key: "lr", label: "learning rate", test: (n) => /(^|[_-])lr$|learning_rate/i.test(n) },
  { key: "metrics", label: "metrics", test: () => true },
];

function familyOf(name) {
  return FAMILIES.find((f) => f.key === "lr" && f.test(name))?.key
    ?? FAMILIES.find((f) => f.test(name)).key;
}

// "val_loss" and "train_loss" share a colour; val is dashed, so they read as a pair.
function baseName(name) { return name.replace(/^(train|val|validation|test)[_-]/i, ""); }
function isValidation(name) { return /^(val|validation|test)[_-]/i.test(name); }
function splitOf(name) { return (/^(train|val|validation|test)[_-]/i.exec(name) || [""])[0]; }

// Smoothing is for noisy per-step training curves: never the learning rate (a step change
// must stay a step) nor a validation series (one point per epoch, nothing to average).
function smoothable(name) { return familyOf(name) !== "lr" && !isValidation(name); }

// Two series hold the same numbers (softmax cross-entropy loss vs the cross-entropy
// metric): draw one, name both.
function identical(a, b) {
  if (a.steps.length < 3 || a.steps.length !== b.steps.length) return false;
  for (let i = 0; i < a.steps.length; i++) {
    if (a.steps[i] !== b.steps[i]) return false;
    if (Math.abs(a.values[i] - b.values[i]) > 1e-9 * Math.max(1, Math.abs(a.values[i]))) return false;
  }
  return true;
}

function insertSorted(s, step, value) {
  const n = s.steps.length;
  if (n === 0 || s.steps[n - 1] < step) { s.steps.push(step); s.values.push(value); return; }
  let lo = 0, hi = n;  // binary search: history can arrive after live points
  while (lo < hi) { const mid = (lo + hi) >> 1; if (s.steps[mid] < step) lo = mid + 1; else hi = mid; }
  if (s.steps[lo] === step) { s.values[lo] = value; return; }
  s.steps.splice(lo, 0, step); s.values.splice(lo, 0, value);
}

// Points of each metric sorted by step (the same step again replaces its value), the
// first and last step reported in each epoch, and the time each step was reported.
class PointStore {
  constructor() { this.series = new Map(); this.epochs = new Map(); this.clock = { steps: [], values: [] }; }

  clear() { this.series.clear(); this.epochs.clear(); this.clock = { steps: [], values: [] }; }

  add(name, step, value) {
    let s = this.series.get(name);
    if (!s) { s = { steps: [], values: [] }; this.series.set(name, s); }
    insertSorted(s, step, value);
  }

  noteEpoch(epoch, step, last = step) {
    const known = this.epochs.get(epoch);
    if (!known) { this.epochs.set(epoch, { first: step, last }); return; }
    known.first = Math.min(known.first, step);
    known.last = Math.max(known.last, last);
  }

  noteTime(step, seconds) { if (Number.isFinite(seconds)) insertSorted(this.clock, step, seconds); }

  // [epoch, step after which it starts] for every epoch after the first seen: the
  // epoch-end point (validation) is recorded at an epoch's last step, so the boundary is
  // exact however sparsely the steps in between were reported.
  epochEnds() {
    const known = [...this.epochs.entries()].sort((a, b) => a[0] - b[0]);
    const ends = [];
    for (let i = 1; i < known.length; i++) {
      const [epoch] = known[i];
      const previous = known[i - 1];
      if (previous[0] === epoch - 1) ends.push([epoch, previous[1].last]);
    }
    return ends;
  }

  // Steps one epoch takes (from two consecutive complete epochs, or the first epoch of a
  // job that started at step 1); null before that is known.
  stepsPerEpoch(epochsDone) {
    const ends = this.epochEnds();
    if (ends.length >= 2) return ends[ends.length - 1][1] - ends[ends.length - 2][1];
    const first = this.epochs.get(0);
    if (first && first.first <= 1 && epochsDone >= 1) return first.last;
    return null;
  }

  count() { let n = 0; for (const s of this.series.values()) n += s.steps.length; return n; }
}

// Maps a step to the x of the axis mode chosen: the step itself, a fractional epoch
// (epoch e spans the steps after the end of e-1 up to its own end), the wall-clock time it
// was reported, or the seconds since the first report.
class StepAxis {
  constructor(store, mode) {
    this.mode = mode;
    this.ends = store.epochEnds();
    this.clock = store.clock;
    this.start = store.clock.values.length ? store.clock.values[0] : 0;
  }

  usable() { return this.mode === "step" || this.mode === "epoch" || this.clock.steps.length >= 2; }

  x(step) {
    if (this.mode === "step") return step;
    if (this.mode === "epoch") return this.epochOf(step);
    const t = interpolate(this.clock.steps, this.clock.values, step);
    return this.mode === "wall" ? t : t - this.start;
  }

  epochOf(step) {
    const ends = this.ends;
    if (!ends.length) return 0;
    let i = 0;
    while (i < ends.length && ends[i][1] < step) i++;
    // Before the first boundary or past the last, extend the nearest epoch's length.
    const [lo, hi] = i === 0 ? [ends[0][1] - width(ends, 0), ends[0][1]]
      : i >= ends.length ? [ends[ends.length - 1][1], ends[ends.length - 1][1] + width(ends, ends.length - 1)]
        : [ends[i - 1][1], ends[i][1]];
    const epoch = i === 0 ? ends[0][0] - 1 : i >= ends.length ? ends[ends.length - 1][0] : ends[i][0] - 1;
    return epoch + (step - lo) / Math.max(1, hi - lo);
  }
}

function width(ends, i) {
  if (ends.length >= 2) return i > 0 ? ends[i][1] - ends[i - 1][1] : ends[1][1] - ends[0][1];
  return Math.max(1, ends[0][1]);
}

// Linear interpolation on sorted xs (extrapolated from the nearest two points).
function interpolate(xs, ys, x) {
  const n = xs.length;
  if (n === 0) return 0;
  if (n === 1) return ys[0];
  let lo = 0, hi = n - 1;
  if (x <= xs[0]) hi = 1;
  else if (x >= xs[n - 1]) lo = n - 2;
  else {
    while (hi - lo > 1) { const mid = (lo + hi) >> 1; if (xs[mid] <= x) lo = mid; else hi = mid; }
  }
  const span = xs[hi] - xs[lo];
  return span === 0 ? ys[lo] : ys[lo] + ((x - xs[lo]) / span) * (ys[hi] - ys[lo]);
}
