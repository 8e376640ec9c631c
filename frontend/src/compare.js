// Overlaid charts of several runs: one series per run, the same metric names as the run page.
import { readJson } from "./_dom.js";
import { StepChart, colour } from "./_charts.js";

const runs = readJson("compare-series", []);

function overlay(name, key, source = "metrics", yAtLeast = null) {
  // One chart, rows keyed by step, one column per run: values are {run-id: value}.
  const byStep = new Map();
  runs.forEach((run) => {
    for (const row of run[source]) {
      const values = byStep.get(row.step) || {};
      values[run.id] = row.values[key];
      byStep.set(row.step, values);
    }
  });
  const chart = new StepChart(document.querySelector(`[data-chart="${name}"]`), {
    series: runs.map((run, i) => ({ label: `${run.name} (#${run.id})`, pick: (v) => v[run.id], colour: colour(i) })),
    yAtLeast,
  });
  chart.set([...byStep.entries()].map(([step, values]) => ({ step, values })));
}

overlay("reward", "reward/mean", "metrics", [0, 1]);
overlay("accuracy", "lean/accuracy", "metrics", [0, 1]);
overlay("response_length", "response_length/mean");
overlay("format_error_share", "format_error_share", "metrics", [0, 1]);
overlay("tokens_per_second", "generation/tokens_per_second");
const evalKeys = runs.flatMap((run) => run.evaluations.flatMap((row) => Object.keys(row.values)));
const ks = evalKeys.map((k) => /^pass@(\d+)$/.exec(k)).filter(Boolean).map((m) => Number(m[1]));
overlay("evaluation", `pass@${ks.length ? Math.max(...ks) : 1}`, "evaluations", [0, 1]);
