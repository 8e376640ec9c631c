// The phases of each step on one time axis (issue 25): one row per step, one lane per phase, placed at the
// seconds since the attempt's run_started that the step's `time/phases` metric gives (the trainer's clock; each
// attempt has its own, so only the latest attempt's steps share an axis). What each phase spans, its label and
// the order of the lanes come with the page (runs/step_phases.py); the colours are the stylesheet's
// `.phase-<name>`, the legend's too. A phase the metrics do not carry is "not recorded": no bar, never a 0.
// The metrics are the trainer's, so every word goes in as text (frontend/src/_dom.js).
import { el, formatNumber } from "./_dom.js";

const PHASES_METRIC = "time/phases";
export const MAX_STEPS_DRAWN = 40; // the latest ones: a long run's page stays readable and quick to redraw
const NICE_STEPS = [1, 2, 5];

/** The phase's interval {start, end} in seconds, or null when not recorded (absent, or not two ordered numbers). */
export function phaseInterval(phases, name) {
  const interval = phases && typeof phases === "object" && !Array.isArray(phases) ? phases[name] : undefined;
  if (!Array.isArray(interval) || interval.length !== 2) return null;
  const [start, end] = interval;
  const isNumber = (v) => typeof v === "number" && Number.isFinite(v);
  if (!isNumber(start) || !isNumber(end) || end < start) return null;
  return { start, end };
}

const seconds = (v) => `${formatNumber(v, 1)} s`;

/** Tick positions for [from, to]: about six, at 1, 2 or 5 × 10^k seconds. */
function ticks(from, to) {
  const rough = (to - from) / 6;
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = NICE_STEPS.map((n) => n * power).find((n) => n >= rough) ?? 10 * power;
  const out = [];
  for (let t = Math.ceil(from / step) * step; t <= to + step * 1e-9; t += step) out.push(+t.toPrecision(12));
  return out;
}

export class PhaseTimeline {
  constructor(container, { phases = [] } = {}) {
    this.container = container;
    this.phases = phases; // [{name, label}], in lane order
    this.rows = new Map(); // step → {attempt, phases}
    if (container) container.phaseTimeline = this; // what the browser tests read
  }

  /** `rows`: [{step, attempt, values}], the run's stored metrics or one live `metrics` event. */
  set(rows) {
    for (const row of rows) this.rows.set(Number(row.step), { attempt: row.attempt ?? null, phases: (row.values || {})[PHASES_METRIC] });
    if (this.container) this.draw();
  }

  draw() {
    const steps = [...this.rows.entries()].sort((a, b) => a[0] - b[0]);
    if (!steps.length) {
      const text = this.container.dataset.beforeAnyStep || this.container.dataset.empty || "No step yet.";
      this.container.replaceChildren(el("p", { class: "chart-empty", text }));
      return;
    }
    // The latest attempt's steps: an earlier attempt's seconds count from another start.
    const attempt = steps[steps.length - 1][1].attempt;
    const ofAttempt = steps.filter(([, row]) => row.attempt === attempt);
    const shown = ofAttempt.slice(-MAX_STEPS_DRAWN).map(([step, row]) => ({
      step, intervals: this.phases.map((phase) => ({ phase, interval: phaseInterval(row.phases, phase.name) })),
    }));
    const recorded = shown.flatMap((row) => row.intervals.map((i) => i.interval).filter(Boolean));
    const notes = [];
    const earlier = steps.length - ofAttempt.length;
    if (earlier) {
      notes.push(`${earlier} step${earlier === 1 ? " of an earlier attempt is" : "s of earlier attempts are"} not drawn: ` +
        "their times count from another attempt's start.");
    }
    if (ofAttempt.length > shown.length) notes.push(`The latest ${shown.length} of this attempt's ${ofAttempt.length} steps are drawn.`);
    const noteNodes = notes.map((text) => el("p", { class: "hint phase-note", text }));
    if (!recorded.length) {
      this.container.replaceChildren(el("p", { class: "chart-empty", text: this.container.dataset.empty || "Not recorded." }), ...noteNodes);
      return;
    }
    const from = Math.min(...recorded.map((i) => i.start));
    let to = Math.max(...recorded.map((i) => i.end));
    if (to <= from) to = from + 1; // every recorded phase took no time: the axis still spans a second
    const at = (t) => `${(100 * (t - from)) / (to - from)}%`;

    const axis = el("div", { class: "phase-axis", "aria-hidden": "true" });
    for (const t of ticks(from, to)) {
      const tick = el("span", { class: "phase-tick", text: seconds(t) });
      tick.style.left = at(t);
      axis.append(tick);
    }
    const list = el("ol", { class: "phase-rows" });
    for (const { step, intervals } of shown) {
      const count = intervals.filter((i) => i.interval).length;
      const words = intervals.map(({ phase, interval }) => (interval
        ? `${phase.label} ${seconds(interval.start)} to ${seconds(interval.end)} (${seconds(interval.end - interval.start)})`
        : `${phase.label}: not recorded`));
      const track = el("div", { class: "phase-track" });
      intervals.forEach(({ phase, interval }, lane) => {
        if (!interval) return; // not recorded: an empty lane, never a zero-length bar
        const bar = el("span", {
          class: `phase-bar phase-${phase.name}`, "data-phase": phase.name, "data-start": interval.start, "data-end": interval.end,
          title: `step ${step} · ${phase.label}: ${seconds(interval.end - interval.start)}, from ${seconds(interval.start)} to ${seconds(interval.end)}`,
        });
        bar.style.left = at(interval.start);
        bar.style.width = `${(100 * (interval.end - interval.start)) / (to - from)}%`;
        bar.style.top = `${lane * 7}px`;
        track.append(bar);
      });
      if (!count) track.append(el("span", { class: "phase-missing-row", text: "not recorded" }));
      list.append(el("li", {
        class: "phase-row", "data-step": step, "data-recorded": count === intervals.length ? "all" : count ? "some" : "none",
        "aria-label": `step ${step}: ${words.join("; ")}`,
      }, el("span", { class: "phase-step", text: `step ${step}` }), track));
    }
    const caption = el("p", { class: "phase-axis-label",
      text: attempt === null ? "seconds since the attempt started" : `seconds since attempt ${attempt} of the run started` });
    this.container.replaceChildren(...noteNodes, list, el("div", { class: "phase-axis-row" }, el("span"), axis), caption);
  }
}
