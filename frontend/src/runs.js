// The runs list: sparklines of reward and accuracy, refreshed live while any run is active.
import { formatDuration, formatNumber, formatTimestamp, readJson } from "./_dom.js";

const REFRESH_MS = 5000;
const SVG = "http://www.w3.org/2000/svg";
const query = readJson("run-list-query", {});

function sparkline(values) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 80 20");
  svg.setAttribute("class", "spark");
  svg.setAttribute("aria-hidden", "true");
  const measured = values.filter((v) => typeof v === "number");
  if (measured.length < 2) return svg;
  const low = Math.min(0, ...measured);
  const high = Math.max(1, ...measured);
  const last = values.length - 1 || 1;
  // One polyline per measured stretch: a step where nothing was counted is a gap, never a 0.
  let stretch = [];
  const flush = () => {
    if (stretch.length > 1) {
      const line = document.createElementNS(SVG, "polyline");
      line.setAttribute("points", stretch.join(" "));
      svg.append(line);
    }
    stretch = [];
  };
  values.forEach((v, i) => {
    if (typeof v !== "number") return flush();
    stretch.push(`${(i / last) * 80},${19 - ((v - low) / (high - low || 1)) * 18}`);
  });
  flush();
  return svg;
}

function update(summary) {
  const row = document.querySelector(`tr[data-run-id="${Number(summary.id)}"]`);
  if (!row) return false;
  const state = row.querySelector("td.state");
  state.textContent = summary.state_label;
  state.className = `state state-${summary.state}`;
  row.querySelector("td.step").textContent = summary.total_steps ? `${summary.step} / ${summary.total_steps}` : String(summary.step);
  for (const [name, latest, values] of [["reward", summary.reward, summary.reward_series], ["accuracy", summary.accuracy, summary.accuracy_series]]) {
    const cell = row.querySelector(`td.${name}`);
    cell.querySelector(".value").textContent = formatNumber(latest);
    cell.querySelector(".sparkline").replaceChildren(sparkline(values));
  }
  // An evaluation trains nothing: its reward cell shows its pass@k, as the server renders it.
  if (summary.pass_at_k) {
    row.querySelector("td.reward .value").textContent = `pass@${summary.pass_at_k.k ?? "k"} ${formatNumber(summary.pass_at_k.pass_at_k)}`;
  }
  row.querySelector("td.elapsed").textContent = formatDuration(summary.elapsed_s);
  row.querySelector("td.created").textContent = formatTimestamp(summary.created_at);
  return true;
}

const initial = readJson("run-summaries", []);
initial.forEach(update);

async function refresh() {
  const params = new URLSearchParams(Object.entries(query).filter(([, v]) => v));
  const response = await fetch(`/api/runs/summaries?${params}`, { headers: { Accept: "application/json" } });
  if (!response.ok) return;
  const summaries = await response.json();
  const shown = new Set([...document.querySelectorAll("tr[data-run-id]")].map((row) => Number(row.dataset.runId)));
  const sameRuns = summaries.length === shown.size && summaries.every((s) => shown.has(s.id));
  if (!sameRuns) {
    location.reload(); // a run was launched or left the filter: the server renders the new order
    return;
  }
  summaries.forEach(update);
}

setInterval(() => { if (!document.hidden) refresh().catch(() => {}); }, REFRESH_MS);
