// The run page, live: charts, the trainer's log, the proof viewer's rollout list.
// Every event has its run's next number (1, 2, 3…). Events are handled in that order, each once:
// one that arrives early (a number skipped: the channel layer drops messages for a slow client)
// waits while the page fetches the missing ones from /api/runs/<id>/events, page by page. The
// WebSocket resumes after the last number handled; while the run is active a quiet page asks the
// API now and then, so even a dropped final event still ends the run on the page.
// Model output is untrusted: text nodes only.
import { el, formatDuration, formatNumber, formatTimestamp, isTypingTarget, readJson } from "./_dom.js";
import { StepChart, evaluationSeries, formatErrorSeries, noFormatErrors, value } from "./_charts.js";
import { rolloutCard as storedRolloutCard, verdictText } from "./_rollout_card.js";
import { WritingPanel } from "./_writing.js";
import { PhaseTimeline } from "./_phase_timeline.js";

const MAX_ROLLOUT_NODES = 300; // a long run must not grow the page without bound
const MAX_LOG_NODES = 500;
const STATE_LABELS = { queued: "Queued", starting: "Starting", running: "Running", succeeded: "Succeeded", failed: "Failed", cancelled: "Cancelled" };
const ACTIVE = ["queued", "starting", "running"];

const context = readJson("run-context");
const series = readJson("run-series", { metrics: [], evaluations: [] });
let filters = readJson("rollout-filters-active", {});
let lastNumber = context.lastEventNumber; // every event up to this one is handled
let retryDelayMs = 500;
let received = 0;
const QUIET_CHECK_MS = 10000; // an active run's page that heard nothing this long asks the API
const early = new Map(); // number → event that arrived before the ones it follows
const MAX_EARLY_EVENTS = 2000;

// --- charts ------------------------------------------------------------------------------

const figure = (name) => document.querySelector(`[data-chart="${name}"]`);
// Words for the trainer's metric names come with the page (runs/step_phases.py): one list, no copy here.
const METRIC_LABELS = context.metricLabels || {};
const labelled = (key) => ({ label: METRIC_LABELS[key] || key, pick: value(key) });
// What a click on a chart's step opens: the training rollouts of that step, narrowed to what the chart counts.
const trainedAt = (step) => ({ step, purpose: "training" });
const formatErrorsAt = (step) => ({ step, purpose: "training", format_error: "any" });
const evaluatedAt = (step) => ({ step, purpose: "evaluation" });
const mismatchedAt = (step) => ({ step, purpose: "training", mismatch: "outside" });
const stepCharts = {
  reward: new StepChart(figure("reward"), { samplesOf: trainedAt, series: [
    { label: "mean", pick: value("reward/mean") },
    { label: "first attempts", pick: value("reward/first_attempt") },
    { label: "retries", pick: value("reward/retry") }], yAtLeast: [0, 1] }),
  accuracy: new StepChart(figure("accuracy"), { samplesOf: trainedAt, series: [{ label: "Lean accuracy", pick: value("lean/accuracy") }], yAtLeast: [0, 1] }),
  format_errors: new StepChart(figure("format_errors"), { samplesOf: formatErrorsAt, dynamicSeries: formatErrorSeries, yLabel: "share of answers", yAtLeast: [0, 1],
                                                          measuredNone: noFormatErrors }),
  response_length: new StepChart(figure("response_length"), { samplesOf: trainedAt, series: [
    { label: "mean", pick: value("response_length/mean") }, { label: "max", pick: value("response_length/max") }], yLabel: "tokens" }),
  time_split: new StepChart(figure("time_split"), { samplesOf: trainedAt, series: [
    { label: "generation", pick: value("time/generation_s") },
    { label: "verification (after generation)", pick: value("time/verification_tail_s") },
    { label: "learning", pick: value("time/learning_s") },
    { label: "weight sync", pick: value("time/weight_sync_s") }], yLabel: "s" }),
  tokens_per_second: new StepChart(figure("tokens_per_second"), { samplesOf: trainedAt, series: [
    { label: "generation", pick: value("generation/tokens_per_second") },
    { label: "learner", pick: value("learner/tokens_per_second") }] }),
  // The train–inference gap (trainer/observability/gap.py): the engine's log-probabilities of its tokens against the learner's.
  logprob_gap: new StepChart(figure("logprob_gap"), { samplesOf: trainedAt, series: [
    { label: "mean", pick: value("rollout/logprob_abs_diff_mean") },
    { label: "max", pick: value("rollout/logprob_abs_diff_max") }], yLabel: "|Δ log p| (nats)" }),
  // Asynchronous RL (issue 25): how stale the trained rollouts were, what was dropped for it, who waited.
  staleness: new StepChart(figure("staleness"), { samplesOf: trainedAt, series: [labelled("rollout/staleness_mean"), labelled("rollout/staleness_max")],
    yLabel: "updates behind", yAtLeast: [0, 1] }),
  dropped_stale: new StepChart(figure("dropped_stale"), { series: [labelled("rollout/dropped_stale")], yLabel: "rollouts", yAtLeast: [0, 1] }),
  idle: new StepChart(figure("idle"), { samplesOf: trainedAt, series: [labelled("time/generation_idle_s"), labelled("time/learner_idle_s")], yLabel: "s" }),
  ratio_outside: new StepChart(figure("ratio_outside"), { samplesOf: mismatchedAt, series: [
    { label: "ratio outside [0.5, 2]", pick: value("rollout/ratio_outside_share") }], yLabel: "share of tokens", yAtLeast: [0, 1] }),
  // Where each step's rollouts went (issue 47, trainer/learning/group_signal.py): the four shares sum to 1.
  group_signal: new StepChart(figure("group_signal"), { samplesOf: trainedAt, series: [labelled("batch/groups_with_signal"),
    labelled("batch/groups_all_fail"), labelled("batch/groups_all_pass"), labelled("batch/groups_unscored")],
    yLabel: "share of groups", yAtLeast: [0, 1] }),
  // An SFT run's own charts (trainer/sft/training.py train_step); a chart whose figure the page lacks draws nothing.
  sft_loss: new StepChart(figure("sft_loss"), { series: [{ label: "loss", pick: value("sft_loss") }] }),
  learning_rate: new StepChart(figure("learning_rate"), { series: [{ label: "learning rate", pick: value("learning_rate") }] }),
  grad_norm: new StepChart(figure("grad_norm"), { series: [{ label: "gradient norm", pick: value("grad_norm") }] }),
  sft_tokens_per_second: new StepChart(figure("sft_tokens_per_second"), { series: [{ label: "tokens/s", pick: value("tokens_per_second") }] }),
};
const evaluationChart = new StepChart(figure("evaluation"), { samplesOf: evaluatedAt, dynamicSeries: evaluationSeries, yAtLeast: [0, 1] });
const phaseTimeline = new PhaseTimeline(document.getElementById("phase-timeline"), { phases: context.phases || [] });

function showLatestMetrics(row) {
  const body = document.querySelector("#latest-metrics tbody");
  if (!body || !row) return;
  body.replaceChildren(el("tr", {}, el("th", { text: "step" }), el("td", { text: String(row.step) })));
  for (const [name, v] of Object.entries(row.values || {}).sort(([a], [b]) => a.localeCompare(b))) {
    const shown = typeof v === "number" ? formatNumber(v, 4) : JSON.stringify(v);
    const label = METRIC_LABELS[name];
    const heading = label ? el("th", {}, `${label} `, el("code", { class: "metric-name", text: name })) : el("th", { text: name });
    body.append(el("tr", {}, heading, el("td", { text: shown })));
  }
}

function addMetrics(rows) {
  for (const chart of Object.values(stepCharts)) chart.set(rows);
  phaseTimeline.set(rows);
  if (rows.length) showLatestMetrics(rows[rows.length - 1]);
  for (const row of rows) showStep(row.step); // an SFT run has no step_started: its metrics say how far it is
}

addMetrics(series.metrics);
evaluationChart.set(series.evaluations);

// --- state, step, timeline, elapsed ---------------------------------------------------------

function showStep(step) {
  const node = document.getElementById("run-step");
  if (Number(step) > Number(node.textContent)) node.textContent = String(step);
}

function setState(state, reason) {
  context.state = state;
  const badge = document.getElementById("run-state");
  badge.textContent = STATE_LABELS[state] || state;
  badge.className = `state-${state}`;
  const box = document.getElementById("failure-reason");
  if (reason && state === "failed") box.textContent = reason;
  box.hidden = state !== "failed" || !box.textContent;
  if (!ACTIVE.includes(state)) {
    document.getElementById("cancel-run")?.closest("form")?.remove();
    liveStatus.textContent = "finished";
    writing?.end(); // nothing is written after the end: answers never stored (an evaluation's) leave the panel
    redrawServerParts().catch(() => {});
  }
}

// What only the server can say (the pass@k report: runs/evaluation_results.py; the disk the run's folder takes and
// each checkpoint's size: runs/checkpoint_files.py) is drawn by the page's template, its one home. A page that
// watched the run end, or an evaluation arrive, takes those parts from a fresh copy of itself, so it reads as a reload.
const SERVER_DRAWN = ["#pass-at-k", "#disk-used", "#checkpoints", "#attempts"];
let serverPartsAsked = 0;
async function redrawServerParts() {
  const asked = ++serverPartsAsked;
  const response = await fetch(`${location.pathname}${location.search}`, { headers: { Accept: "text/html" } });
  if (!response.ok) return;
  const fresh = new DOMParser().parseFromString(await response.text(), "text/html"); // parsed, never run
  if (asked !== serverPartsAsked) return; // a later copy is on its way: an earlier one must not overwrite it
  for (const selector of SERVER_DRAWN) {
    const shown = document.querySelector(selector);
    const drawn = fresh.querySelector(selector);
    if (shown && drawn) shown.replaceWith(document.importNode(drawn, true));
  }
  document.body.dataset.serverPartsDrawn = String(Number(document.body.dataset.serverPartsDrawn || 0) + 1);
}

function addTimeline(state, reason, time) {
  document.getElementById("timeline").append(el("li", {},
    el("span", { class: `state-${state}`, text: STATE_LABELS[state] || state }), ` · ${formatTimestamp(time)}`,
    reason ? el("span", { class: "reason", text: ` — ${reason}` }) : null));
}

// Elapsed = training time over every attempt (runs/queries.py RunClock): the finished attempts'
// time plus, while one trains, the time since it started, on the server's clock.
const elapsed = document.getElementById("run-elapsed");
const clock = context.clock || { trainedS: 0, runningSince: null, serverNow: Date.now() / 1000 };
const serverOffsetS = clock.serverNow - Date.now() / 1000;
function showElapsed() {
  if (clock.runningSince === null) return;
  elapsed.textContent = formatDuration(clock.trainedS + Date.now() / 1000 + serverOffsetS - clock.runningSince);
}
setInterval(showElapsed, 1000);
/** The run stopped training at ``atS`` (server seconds): its elapsed time stops there. */
function stopClock(atS) {
  if (clock.runningSince === null) return;
  clock.trainedS += Math.max(0, atS - clock.runningSince);
  clock.runningSince = null;
  elapsed.textContent = formatDuration(clock.trainedS);
}

// --- the trainer's log ------------------------------------------------------------------------

const logList = document.getElementById("logs");
const logsEmpty = document.getElementById("logs-empty");

/** A milestone of the run (runs/queries.py LOGGED_EVENTS) in words; log lines and errors as written. */
function logText(event) {
  const p = event.payload || {};
  switch (event.type) {
    case "run_started": return (p.resumed_from_step ? `trainer started, resuming after step ${p.resumed_from_step}` +
      (p.total_steps ? ` of ${p.total_steps}` : "") : `trainer started${p.total_steps ? `: ${p.total_steps} steps to go` : ""}`) +
      (p.compute_dtype ? `; it ${p.compute_dtype.sentence}` : "");
    case "checkpoint_saved": return `checkpoint saved after step ${p.step}: ${p.path || "(no path)"}`;
    case "evaluation": return `evaluation after step ${p.step}: ${Object.entries(p.values || {}).filter(([k]) => /^pass@\d+$/.test(k))
      .map(([k, v]) => `${k} ${formatNumber(v)}`).join(", ") || "done"}`;
    case "run_finished": return `run ${p.status || "ended"} after step ${p.step ?? "?"}${p.reason ? `: ${p.reason}` : ""}`;
    default: return String(p.message ?? p.error ?? p.reason ?? JSON.stringify(p));
  }
}

function addLog(event) {
  const p = event.payload || {};
  const level = event.type === "error" ? "error" : String(p.level || "info").replace(/[^a-z]/g, "");
  const at = formatTimestamp(event.time).slice(11);
  logList.append(el("li", { class: `log-${level}` }, el("time", { text: at }), el("span", { class: "level", text: level }), el("span", { class: "message", text: logText(event) })));
  while (logList.children.length > MAX_LOG_NODES) logList.firstElementChild.remove();
  logsEmpty.hidden = true;
}
for (const event of readJson("run-logs", [])) addLog(event);
logsEmpty.hidden = logList.children.length > 0;

// --- checkpoints -------------------------------------------------------------------------------

function addCheckpoint(p) {
  const body = document.querySelector("#checkpoints tbody");
  body.querySelector("tr.empty")?.remove();
  body.querySelector(`tr[data-step="${Number(p.step)}"]`)?.remove();
  const link = (part, text) => el("a", { href: `/runs/${context.runId}/checkpoints/${Number(p.step)}/${part}.zip`, text });
  body.append(el("tr", { "data-step": String(p.step) }, el("td", { text: String(p.step) }), el("td", { text: formatTimestamp(Date.now() / 1000) }),
    el("td", {}, el("code", { text: p.path || "" })), el("td", {}, link("checkpoint", "whole checkpoint (zip, its size shown on reload)"), " · ",
    link("model", "export the model (Hugging Face folder, zip)"))));
}

// --- the proof viewer ----------------------------------------------------------------------------

const rolloutList = document.getElementById("rollouts");
const followBox = document.getElementById("follow");
const pauseButton = document.getElementById("pause");
const pendingNote = document.getElementById("pending");
let paused = false;
let pending = [];

/** The same filters the server applies (proofs/queries.py), for rollouts arriving live. */
export function matchesFilters(r, f) {
  // Full-text search is PostgreSQL's (its parser and lexemes): a live rollout cannot be matched here the same
  // way, so a searching page shows what the server found and says that new rollouts are not searched live.
  if (f.text) return false;
  // The mismatch is in the step's token records, written after the learner scored the step: never known live.
  if (f.mismatch) return false;
  if (f.step !== undefined && Number(r.step) !== Number(f.step)) return false;
  if (f.step_from !== undefined && Number(r.step) < Number(f.step_from)) return false;
  if (f.step_to !== undefined && Number(r.step) > Number(f.step_to)) return false;
  if (f.round !== undefined && Number(r.round ?? 0) !== Number(f.round)) return false;
  if (f.policy_version !== undefined && r.policy_version !== Number(f.policy_version)) return false;
  if (f.min_tokens !== undefined && !(Number(r.num_tokens) >= Number(f.min_tokens))) return false;
  if (f.max_tokens !== undefined && !(Number(r.num_tokens) <= Number(f.max_tokens))) return false;
  if (f.truncated && Boolean(r.is_truncated) !== (f.truncated === "yes")) return false;
  if (f.format_error === "any" && !r.format_error) return false;
  if (f.format_error && f.format_error !== "any" && r.format_error !== f.format_error) return false;
  if (f.purpose && Boolean(r.is_evaluation) !== (f.purpose === "evaluation")) return false;
  if (f.turn && r.turn !== f.turn) return false;
  if (f.verdict && (f.verdict === "none" ? Boolean(r.verdict) : r.verdict !== f.verdict)) return false;
  if (f.problem && r.problem_id !== f.problem) return false;
  if (f.reward === "censored" && r.reward !== null && r.reward !== undefined) return false;
  if (f.reward === "1" && !(r.reward > 0)) return false;
  if (f.reward === "0" && r.reward !== 0) return false;
  return true;
}

// The labels come with the page (run-context, from trainer/verification/verdicts.py): one list, no copy here.
const VERDICT_LABELS = context.verdictLabels || {};
const TURN_LABELS = context.turnLabels || {};

// The rounds of correction this page has seen (retry.max_rounds), by rollout key: each answer's round, verdict and the
// answer it corrects, so that a later round arriving live draws its trajectory (round 0 → 1 → …) from the earlier
// ones, whether they came live, with a fetched page (earlier_rounds) or in the page as stored (the cards' data).
const MAX_KNOWN_ROUNDS = 5000; // the oldest are forgotten: a long run must not grow the page without bound
const knownRounds = new Map();

function rememberRound(entry) {
  if (!entry.rollout_key || !Number.isInteger(entry.round)) return;
  knownRounds.delete(entry.rollout_key);
  knownRounds.set(entry.rollout_key, entry);
  if (knownRounds.size > MAX_KNOWN_ROUNDS) knownRounds.delete(knownRounds.keys().next().value);
}

function rememberRollout(r) {
  let parent = null;
  for (const earlier of r.earlier_rounds || []) {
    rememberRound({ ...earlier, parent_rollout_key: parent });
    parent = earlier.rollout_key;
  }
  rememberRound({ rollout_key: r.rollout_key, attempt_id: r.attempt_id, round: r.round, verdict: r.verdict,
    label: verdictText(r, VERDICT_LABELS), parent_rollout_key: r.parent_rollout_key || parent });
}

function earlierRounds(r) {
  const chain = [];
  let key = r.parent_rollout_key;
  while (key && knownRounds.has(key) && chain.length < 16) {
    const entry = knownRounds.get(key);
    chain.unshift(entry);
    key = entry.parent_rollout_key;
  }
  // Only a whole chain: a trajectory that starts after round 0 would misstate where the problem began.
  return chain.length && chain[0].round === 0 ? chain : (r.earlier_rounds || []);
}

for (const card of document.querySelectorAll("#rollouts > li.rollout[data-round]")) {
  const items = [...card.querySelectorAll(".round-trajectory > li")];
  if (!items.length) {
    rememberRound({ rollout_key: card.dataset.rolloutKey, round: Number(card.dataset.round),
      attempt_id: Number(card.dataset.attemptId) || null, parent_rollout_key: card.dataset.parentRolloutKey || null,
      label: card.querySelector(".rollout-head .verdict")?.textContent.trim() || "—" });
    continue;
  }
  let parent = null;
  for (const item of items) {
    rememberRound({ rollout_key: item.dataset.rolloutKey, round: Number(item.dataset.round), parent_rollout_key: parent,
      attempt_id: Number(item.dataset.attemptId) || null, label: item.querySelector(".round-verdict")?.textContent || "—" });
    parent = item.dataset.rolloutKey;
  }
}

const rolloutCard = (r) => {
  rememberRollout(r);
  return storedRolloutCard(r, { verdictLabels: VERDICT_LABELS, turnLabels: TURN_LABELS, earlierRounds });
};

// Answers still being written (frontend/src/_writing.js); an SFT run's page has no panel.
const writingList = document.getElementById("writing");
const writing = writingList && new WritingPanel(writingList, { runId: context.runId, marks: context.answerMarks,
  turnLabels: TURN_LABELS, storedCard: rolloutCard });

function insertRollouts(rollouts) {
  // Only the newest MAX_ROLLOUT_NODES can stay on the page, so a burst builds no more than that.
  const shown = new Set([...rolloutList.children].map((node) => node.dataset.rolloutKey));
  const fresh = rollouts.filter((r) => !shown.has(r.rollout_key)).slice(-MAX_ROLLOUT_NODES);
  if (!fresh.length) return;
  rolloutList.querySelector("li.empty")?.remove();
  const fragment = document.createDocumentFragment();
  for (const r of fresh.reverse()) fragment.append(rolloutCard(r));
  rolloutList.prepend(fragment);
  while (rolloutList.children.length > MAX_ROLLOUT_NODES) rolloutList.lastElementChild.remove();
  if (followBox.checked) rolloutList.scrollTop = 0;
}

function showPending() {
  pendingNote.hidden = pending.length === 0;
  pendingNote.textContent = `${pending.length >= MAX_ROLLOUT_NODES ? `${MAX_ROLLOUT_NODES}+` : pending.length} new while paused`;
}

function setPaused(value) {
  paused = value;
  pauseButton.setAttribute("aria-pressed", String(paused));
  pauseButton.textContent = paused ? "Resume" : "Pause";
  document.body.dataset.viewerPaused = String(paused);
  if (!paused) {
    insertRollouts(pending);
    pending = [];
  }
  showPending();
}

// An SFT run's page has no proof viewer: its controls are absent.
pauseButton?.addEventListener("click", () => setPaused(!paused));
followBox?.addEventListener("change", () => { if (followBox.checked) rolloutList.scrollTop = 0; });

let batch = [];
function queueRollout(payload) {
  if (!matchesFilters(payload, filters)) return;
  if (paused) {
    pending.push(payload);
    if (pending.length > MAX_ROLLOUT_NODES) pending = pending.slice(-MAX_ROLLOUT_NODES);
    showPending();
    return;
  }
  batch.push(payload);
  if (batch.length === 1) requestAnimationFrame(() => { const now = batch; batch = []; insertRollouts(now); });
}

const filterForm = document.getElementById("rollout-filters");
filterForm?.addEventListener("submit", async (submit) => {
  submit.preventDefault();
  const params = new URLSearchParams();
  for (const [key, v] of new FormData(filterForm)) if (v !== "") params.set(key, String(v));
  const response = await fetch(`/api/proofs/runs/${context.runId}/rollouts?${params}`, { headers: { Accept: "application/json" } });
  if (!response.ok) {
    const problem = await response.json().catch(() => ({}));
    rolloutList.replaceChildren(el("li", { class: "empty errorlist", role: "alert", text: problem.detail ? String(problem.detail) : `The filters were refused (HTTP ${response.status}).` }));
    return;
  }
  const page = await response.json();
  filters = Object.fromEntries(params);
  if (filters.step !== undefined) filters.step = Number(filters.step);
  history.replaceState(null, "", `?${params}#rollouts`);
  document.getElementById("older-rollouts")?.closest("p")?.remove();
  rolloutList.replaceChildren();
  pending = pending.filter((r) => matchesFilters(r, filters));
  showPending();
  if (!page.rollouts.length) rolloutList.append(el("li", { class: "empty", text: "No rollouts match these filters yet." }));
  else insertRollouts([...page.rollouts].reverse());
});
for (const field of filterForm?.querySelectorAll("select") ?? []) field.addEventListener("change", () => filterForm.requestSubmit());

// Keyboard: j/k or the arrows move through the list, Enter opens, f follows, p pauses.
function cards() {
  return [...rolloutList.querySelectorAll(":scope > li.rollout")];
}
function moveFocus(delta) {
  const all = cards();
  if (!all.length) return;
  const current = all.indexOf(document.activeElement);
  const next = all[Math.min(all.length - 1, Math.max(0, current === -1 ? 0 : current + delta))];
  next.focus();
  next.scrollIntoView({ block: "nearest" });
  if (delta !== 0 && followBox.checked && next !== all[0]) followBox.checked = false; // reading older ones: stop tailing
}
document.addEventListener("keydown", (key) => {
  if (!rolloutList || key.ctrlKey || key.metaKey || key.altKey || isTypingTarget(key.target)) return;
  const inList = rolloutList.contains(document.activeElement);
  if (key.key === "j" || (inList && key.key === "ArrowDown")) { moveFocus(+1); key.preventDefault(); }
  else if (key.key === "k" || (inList && key.key === "ArrowUp")) { moveFocus(-1); key.preventDefault(); }
  else if (key.key === "Enter" && inList && document.activeElement.matches("li.rollout")) {
    const link = document.activeElement.querySelector(".rollout-head a");
    if (link) location.href = link.href;
  } else if (key.key === "f") { followBox.checked = !followBox.checked; followBox.dispatchEvent(new Event("change")); }
  else if (key.key === "p") setPaused(!paused);
});

// --- events ----------------------------------------------------------------------------------------

function handle(event) {
  const p = event.payload || {};
  switch (event.type) {
    case "rollout_finished": rememberRollout(p); queueRollout(p); writing?.stored(p); break;
    case "run_started":
      setState("running");
      addTimeline("running", "the trainer started", event.time);
      if (clock.runningSince === null) clock.runningSince = event.time;
      if (p.total_steps) document.getElementById("run-total-steps").textContent = ` of ${p.total_steps}`;
      // The trainer's own words for the precision it chose on its machine (trainer/compute_dtype.py).
      if (p.compute_dtype) document.getElementById("compute-precision-sentence").textContent = `the trainer ${p.compute_dtype.sentence}`;
      addLog(event);
      break;
    case "step_started": showStep(p.step); break;
    case "metrics": addMetrics([{ step: p.step, attempt: event.attempt ?? null, values: p.values || {} }]); break;
    case "evaluation":
      evaluationChart.set([{ step: p.step, values: p.values || {} }]);
      if (context.kind === "eval") redrawServerParts().catch(() => {}); // its pass@k, as the server reports it
      addLog(event);
      break;
    case "checkpoint_saved": addCheckpoint(p); addLog(event); break;
    case "log": case "error": addLog(event); break;
    // What the placement group waits for, or where each actor runs: the attempts list (runs/_attempts.html) says it.
    case "placement": redrawServerParts().catch(() => {}); break;
    case "run_finished":
      stopClock(event.time);
      setState(p.status, p.reason);
      addTimeline(p.status, p.reason, event.time);
      addLog(event);
      catchUp(); // anything stored after it (a late log line), and the run's row as it ends
      break;
  }
}

// --- waiting for the cluster ---------------------------------------------------------------------
// A queued or starting run says what it waits for (runs/queries.py waiting_reason), so minutes of
// "Starting" read as waiting for CPUs, not as a hang.
const waitingNote = document.getElementById("run-waiting");
async function showWaiting() {
  if (!["queued", "starting"].includes(context.state)) {
    waitingNote.hidden = true;
    return;
  }
  const response = await fetch(`/api/runs/${context.runId}/waiting`, { headers: { Accept: "application/json" } });
  if (!response.ok) return;
  const answer = await response.json();
  waitingNote.textContent = answer.reason;
  waitingNote.hidden = !answer.reason;
}
showWaiting().catch(() => {});
setInterval(() => { if (!document.hidden) showWaiting().catch(() => {}); }, 5000);

// --- in order, each once, nothing missed ---------------------------------------------------------

const liveStatus = document.getElementById("live-status");
let lastHeardAt = Date.now();

function accept(event) {
  if (event.number <= lastNumber) return; // already handled (a resent backlog entry, a fetched one)
  if (event.number > lastNumber + 1) {
    if (early.size >= MAX_EARLY_EVENTS) early.clear(); // far behind: the fetch brings them again, in order
    early.set(event.number, event);
    catchUp();
    return;
  }
  apply(event);
  while (early.has(lastNumber + 1)) {
    const next = early.get(lastNumber + 1);
    early.delete(lastNumber + 1);
    apply(next);
  }
  for (const number of early.keys()) if (number <= lastNumber) early.delete(number);
}

function apply(event) {
  lastNumber = event.number;
  received += 1;
  lastHeardAt = Date.now();
  document.body.dataset.eventsReceived = String(received);
  document.body.dataset.lastEventNumber = String(lastNumber);
  handle(event);
}

let catchingUp = null;
/** Fetch, page by page, every event after the last one handled; then what the run's row says. */
function catchUp() {
  if (catchingUp) { catchingUp.again = true; return catchingUp.done; }
  const state = { again: false };
  state.done = (async () => {
    try {
      do {
        state.again = false;
        let page;
        do {
          const response = await fetch(`/api/runs/${context.runId}/events?after=${lastNumber}`, { headers: { Accept: "application/json" } });
          if (!response.ok) throw new Error(`HTTP ${response.status}`);
          page = await response.json();
          for (const event of page.events) accept(event);
        } while (page.has_more && page.events.length);
        showRunRow(page);
      } while (state.again);
      if (document.body.dataset.live === "connected") liveStatus.textContent = "live";
    } catch (error) {
      liveStatus.textContent = `could not fetch missed events (${error.message}); trying again`;
      setTimeout(catchUp, 2000);
    } finally {
      catchingUp = null;
      lastHeardAt = Date.now();
    }
  })();
  catchingUp = state;
  return state.done;
}

/** The run's row, as the API read it: a run ended by the platform (a dead Ray job) has no event to say so. */
function showRunRow(page) {
  const count = document.getElementById("dead-letter-count");
  if (count) {
    count.textContent = String(page.dead_letters);
    document.getElementById("dead-letters").hidden = !page.dead_letters;
  }
  if (page.state !== context.state && !ACTIVE.includes(page.state)) {
    setState(page.state, page.failure_reason);
    addTimeline(page.state, page.failure_reason, Date.now() / 1000);
    stopClock(Date.now() / 1000 + serverOffsetS); // ended by the platform: no event says when it stopped
  }
}

setInterval(() => {
  if (ACTIVE.includes(context.state) && Date.now() - lastHeardAt > QUIET_CHECK_MS) {
    lastHeardAt = Date.now();
    catchUp();
  }
}, 1000);

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const socket = new WebSocket(`${scheme}://${location.host}/ws/runs/${context.runId}/events/?after=${lastNumber}`);
  socket.onopen = () => {
    retryDelayMs = 500;
    document.body.dataset.live = "connected";
    // "live" only while something can still happen: a finished run's page says so instead.
    liveStatus.textContent = ACTIVE.includes(context.state) ? "live" : "finished";
    if (ACTIVE.includes(context.state)) writing?.snapshot().catch(() => {}); // opened (or back) mid-answer
  };
  socket.onmessage = (message) => {
    const data = JSON.parse(message.data);
    lastHeardAt = Date.now();
    // The server's word on where the run is, after the capped backlog: further on means fetch the rest.
    if (data.type === "position") { if (data.last_number > lastNumber) catchUp(); return; }
    if (data.type === "progress") { writing?.hear(data.pieces, data.sent_at); return; } // live text: no number, never stored
    for (const event of data.events) accept(event); // a batch: up to 100 live events, or a backlog page
  };
  socket.onclose = (close) => {
    document.body.dataset.live = "disconnected";
    if (close.code === 4403) {
      liveStatus.textContent = "not allowed to watch this run live";
      return; // reconnecting would not help
    }
    liveStatus.textContent = `reconnecting in ${Math.round(retryDelayMs / 100) / 10} s…`;
    setTimeout(connect, retryDelayMs);
    retryDelayMs = Math.min(retryDelayMs * 2, 10000);
  };
}

connect();
