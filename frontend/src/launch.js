// The launch form: the chosen preset's values and ranges in every field, and the summary of what the run will do.
// Every value, range and word comes from the platform (runs/launch_plan.py): the presets' through json_script,
// the summary of edited values from GET /api/runs/launch-summary. Nothing here knows a preset or a rule.
import { el, readJson } from "./_dom.js";

const presets = readJson("launch-presets", {});
const form = document.getElementById("launch-form");
const rows = document.getElementById("launch-summary-rows");
const status = document.getElementById("launch-summary-status");
const warnings = document.getElementById("launch-warnings");
// Neither changes the config: the summary is asked without them (as the API's launch-summary documents). The name
// goes, though it changes nothing either: a group's plan names its runs with it.
const NOT_SUMMARISED = new Set(["csrfmiddlewaretoken", "starting_checkpoint"]);
// The promptset does not change the config either, but what will not work on it is said before the launch.
const CONTRACT_NAMES = { promptset_version: "promptset_version_id" };
const WAIT_MS = 300;

function chosenPreset() {
  return form.elements.preset.value;
}

function showPreset(name) {
  const page = presets[name];
  for (const [field, shown] of Object.entries(page.fields)) {
    const input = form.elements[field];
    input.value = shown.value;
    input.placeholder = shown.placeholder;
    input.min = shown.min;
    input.max = shown.max;
    const allowed = form.querySelector(`[data-allowed-for="${field}"]`);
    if (allowed) allowed.textContent = shown.allowed;
  }
  for (const [field, text] of Object.entries(page.blankChoices)) {
    const blank = form.elements[field].querySelector('option[value=""]');
    if (blank) blank.textContent = text;
  }
  for (const item of document.querySelectorAll("#preset-descriptions [data-preset]")) {
    item.classList.toggle("chosen", item.dataset.preset === name);
  }
  drawSummary(page.summary, `The ${name} preset, as the trainer resolves it.`);
}

function drawSummary(summary, caption) {
  rows.replaceChildren(...summary.flatMap((row) => [
    el("dt", { text: row.label }),
    el("dd", {},
      el("strong", { text: row.value, "data-config-path": row.path || null, "data-figure": row.figure || null }),
      row.note ? " " : null, row.note ? el("span", { class: "muted", text: row.note }) : null),
  ]));
  rows.classList.remove("stale");
  status.textContent = caption;
}

function drawWarnings(list) {
  warnings.replaceChildren(...list.map((text) => el("li", { text })));
  warnings.hidden = list.length === 0;
}

// A group launch (seeds or a grid) lists the runs it will start, each with its cell and seed, before the launch.
function drawGroupPlan(plan) {
  const box = document.getElementById("launch-group-plan");
  box.hidden = !plan;
  if (!plan) return;
  document.getElementById("launch-group-count").textContent = plan.text;
  document.getElementById("launch-group-runs").replaceChildren(...plan.members.map((name) => el("li", { text: name })));
}

function askedFields() {
  const query = new URLSearchParams();
  for (const [key, value] of new FormData(form)) {
    if (!NOT_SUMMARISED.has(key) && value !== "") query.append(CONTRACT_NAMES[key] || key, value);
  }
  return query;
}

let asked = 0;
async function refreshSummary() {
  const number = ++asked;
  const query = askedFields();
  const response = await fetch(`/api/runs/launch-summary?${query}`, { headers: { Accept: "application/json" } });
  const body = await response.json();
  if (number !== asked) return; // a later change asked again: its answer is the one to show
  if (response.ok) {
    drawSummary(body.summary, `The ${body.preset} preset with the values above, as the trainer resolves them.`);
    drawWarnings(body.warnings || []);
    drawGroupPlan(body.runs);
    return;
  }
  rows.classList.add("stale");
  const problems = Object.entries(body.field_errors || {}).map(([field, messages]) => `${field}: ${messages.join("; ")}`);
  status.textContent = `The launch would be refused, so the summary below is out of date: ${problems.join(" · ") || body.detail}`;
}

let timer = null;
function refreshSoon() {
  clearTimeout(timer);
  timer = setTimeout(refreshSummary, WAIT_MS);
}

form.elements.preset.addEventListener("change", () => {
  showPreset(chosenPreset());
  refreshSummary();
});
form.addEventListener("input", (event) => {
  if (event.target.name !== "preset") refreshSoon();
});
for (const item of document.querySelectorAll("#preset-descriptions [data-preset]")) {
  item.classList.toggle("chosen", item.dataset.preset === chosenPreset());
}
// Sent back with errors, or a promptset already chosen: summarise what is there, with its warnings.
if (form.dataset.bound === "true" || form.elements.promptset_version.value) refreshSummary();
