// Step charts on uPlot: each chart owns a list of named series read from step-keyed values.
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

// Steps are whole numbers: the step axis never ticks at 1.2 or 1.4.
const STEP_INCREMENTS = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10000, 20000, 50000, 100000];

// Small values (a learning rate of 2e-5) keep their digits instead of all reading "0".
function axisValues(u, splits) {
  const largest = Math.max(...splits.map((v) => Math.abs(v ?? 0)));
  return splits.map((v) => (v === null ? "" : largest > 0 && largest < 0.01 ? v.toExponential(1) : String(+v.toPrecision(6))));
}

const PALETTE = ["#2f6fdb", "#d9480f", "#2b8a3e", "#ae3ec9", "#e8590c", "#1098ad", "#5c940d", "#c2255c", "#495057", "#f08c00"];

export function colour(index) {
  return PALETTE[index % PALETTE.length];
}

/**
 * A line chart over steps. `rows` is a list of {step, values}; each series names a `pick(values)`
 * function. New series (a format error category seen for the first time) rebuild the chart.
 */
export class StepChart {
  constructor(figure, { series = [], dynamicSeries = null, yLabel = "", yAtLeast = null, measuredNone = null,
                        samplesOf = null } = {}) {
    this.figure = figure;
    this.rows = new Map();
    if (!figure) return; // this kind of run has no such chart (an SFT run has no rewards)
    figure.stepChart = this; // what a page's browser tests read: the series and the step axis as drawn
    this.fixedSeries = series;
    this.dynamicSeries = dynamicSeries; // (rows) => [{label, pick}]
    this.yLabel = yLabel;
    // [low, high] the y axis always shows, for bounded values (shares, rewards): a constant 0 or 1
    // must not be drawn on uPlot's padded automatic range (0 to 100, or 0 to 2).
    this.yAtLeast = yAtLeast;
    // (rows) => what to say when steps were measured and none has a value to draw (every share was 0), or null
    this.measuredNone = measuredNone;
    // (step) => the rollout list's filters for the samples behind that step's point, or null: a click opens them
    this.samplesOf = samplesOf;
    if (samplesOf) {
      figure.classList.add("opens-samples");
      figure.title = "Click a step to open its rollouts.";
    }
    this.plot = null;
    this.seriesKey = "";
    this.empty = figure.appendChild(document.createElement("p"));
    this.empty.className = "chart-empty";
    this.emptyText = figure.dataset.empty || "No data yet.";
    // Where data-empty explains a run that never measured the figure, a run with no step yet says only that.
    this.beforeAnyStepText = figure.dataset.beforeAnyStep || this.emptyText;
    this.empty.textContent = this.emptyText;
    new ResizeObserver(() => this.plot?.setSize(this.size())).observe(figure);
  }

  size() {
    return { width: Math.max(240, this.figure.clientWidth - 8), height: 200 };
  }

  set(rows) {
    for (const row of rows) this.rows.set(row.step, row.values || {});
    if (this.figure) this.draw();
  }

  currentSeries(sortedRows) {
    const dynamic = this.dynamicSeries ? this.dynamicSeries(sortedRows) : [];
    return [...this.fixedSeries, ...dynamic].filter((s) => s.always || sortedRows.some(([, v]) => typeof s.pick(v) === "number"));
  }

  draw() {
    const sorted = [...this.rows.entries()].sort((a, b) => a[0] - b[0]);
    const series = this.currentSeries(sorted);
    this.empty.hidden = series.length > 0 && sorted.length > 0;
    if (!series.length || !sorted.length) {
      this.empty.textContent = (this.measuredNone && this.measuredNone(sorted)) || (sorted.length ? this.emptyText : this.beforeAnyStepText);
      return;
    }
    const data = [sorted.map(([step]) => step), ...series.map((s) => sorted.map(([, v]) => {
      const value = s.pick(v);
      // Not measured (null, absent) is null: uPlot leaves a gap there instead of drawing a 0.
      return typeof value === "number" && Number.isFinite(value) ? value : null;
    }))];
    const key = series.map((s) => s.label).join("\u0000");
    if (this.plot && key === this.seriesKey) {
      this.plot.setData(data);
      return;
    }
    this.plot?.destroy();
    this.seriesKey = key;
    this.plot = new uPlot({
      ...this.size(),
      scales: { x: { time: false }, ...(this.yAtLeast && { y: { range: (u, min, max) => [
        Math.min(this.yAtLeast[0], min ?? this.yAtLeast[0]), Math.max(this.yAtLeast[1], max ?? this.yAtLeast[1])] } }) },
      axes: [{ label: "step", stroke: "currentColor", grid: { stroke: "rgba(128,128,128,.2)" }, incrs: STEP_INCREMENTS },
             { label: this.yLabel, stroke: "currentColor", grid: { stroke: "rgba(128,128,128,.2)" }, values: axisValues }],
      series: [{ label: "step" }, ...series.map((s, i) => ({ label: s.label, stroke: s.colour || colour(i), width: 2, spanGaps: false, points: { show: sorted.length < 40 } }))],
    }, data, this.figure);
    if (this.samplesOf) this.plot.over.addEventListener("click", () => this.openSamples());
  }

  openSamples() {
    const index = this.plot?.cursor.idx;
    if (index === null || index === undefined) return;
    const step = this.plot.data[0][index];
    const filters = new URLSearchParams(this.samplesOf(step));
    window.location.assign(`${window.location.pathname}?${filters}#rollouts`);
  }
}

// The metric names the trainer publishes (trainer/loop/driver.py, trainer/loop/evaluation.py).
export const value = (key) => (v) => v[key];

export function evaluationSeries(rows) {
  const names = new Set();
  for (const [, values] of rows) for (const name of Object.keys(values)) names.add(name);
  const ks = [...names].map((n) => /^pass@(\d+)$/.exec(n)).filter(Boolean).map((m) => Number(m[1]));
  const largest = ks.length ? Math.max(...ks) : null;
  const wanted = [];
  // Plain names: our gated reward; acc/: the release's Lean validity without the format gate (trainer/loop/evaluation.py).
  for (const k of new Set([1, largest].filter((x) => x !== null))) {
    wanted.push([`pass@${k}`, `pass@${k}`], [`retry/pass@${k}`, `pass@${k} after retry`],
      [`acc/pass@${k}`, `pass@${k}, Lean only (release's acc)`]);
  }
  if (largest !== null) wanted.push([`best@${largest}/mean`, `best@${largest}`], [`retry/best@${largest}/mean`, `best@${largest} after retry`]);
  return wanted.filter(([key]) => names.has(key)).map(([key, label]) => ({ label, pick: value(key) }));
}

/**
 * One series per format error category (the release's names): its share of the step's answers,
 * as the release's formatting_errors.png draws it. A step without an answer count is not
 * measured, so it is left out rather than drawn as 0.
 */
export function formatErrorSeries(rows) {
  const categories = new Set();
  for (const [, values] of rows) for (const name of Object.keys(values.format_errors || {})) categories.add(name);
  return [...categories].sort().map((name) => ({ label: name.toUpperCase(), pick: (v) => formatErrorShare(v, name) }));
}

/** What the format error chart says when the steps counted their answers and none failed the check. */
export function noFormatErrors(rows) {
  const counted = rows.some(([, values]) => values.format_errors && typeof values.rollouts === "number" && values.rollouts > 0);
  return counted ? "No answer failed the format check." : null;
}

export function formatErrorShare(values, name) {
  const answers = values.rollouts;
  if (!values.format_errors || typeof answers !== "number" || answers <= 0) return null;
  return (values.format_errors[name] ?? 0) / answers;
}
