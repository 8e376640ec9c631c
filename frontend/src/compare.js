// The compare page's chart: one line per run, per group its seeds' mean with a band (and each seed on demand).
// Every number comes from the page (runs/comparison.py, json_script): the means, bands and smoothing are the
// server's, so the chart draws and computes nothing. The view lives in the URL: a change submits the form.
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { readJson } from "./_dom.js";
import { colour } from "./_charts.js";

const form = document.getElementById("compare-choice");
for (const field of form.querySelectorAll("select:not([multiple]), input")) {
  field.addEventListener("change", () => form.requestSubmit());
}

const chart = readJson("compare-chart-data", null);
const figure = document.getElementById("compare-chart");

function translucent(hex, alpha) {
  const [r, g, b] = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
  return `rgba(${r},${g},${b},${alpha})`;
}

function draw() {
  // One x array for every line (uPlot's shape): the union of their x values; a line without a point there is null,
  // a gap it spans (seeds measured at different steps), never a 0.
  const xs = [...new Set(chart.columns.flatMap((c) => [...c.line.map((p) => p[0]), ...c.seedLines.flatMap((s) => s.points.map((p) => p[0]))]))]
    .sort((a, b) => a - b);
  const at = new Map(xs.map((x, i) => [x, i]));
  const column = (points, index) => {
    const values = new Array(xs.length).fill(null);
    for (const point of points) values[at.get(point[0])] = point[index];
    return values;
  };
  const series = [{ label: chart.axisLabel }];
  const data = [xs];
  const bands = [];
  chart.columns.forEach((c, i) => {
    const stroke = colour(i);
    const name = c.kind === "group" ? `${c.name} (mean of ${c.seeds} seeds)` : `${c.name} (#${c.id})`;
    series.push({ label: name, stroke, width: 2, spanGaps: true, points: { show: xs.length < 40 } });
    data.push(column(c.line, 1));
    if (c.kind === "group") {
      const mean = series.length - 1;
      series.push({ label: `${c.name} (band high)`, stroke: translucent(stroke, 0.35), width: 1, spanGaps: true, points: { show: false } });
      data.push(column(c.line, 3));
      series.push({ label: `${c.name} (band low)`, stroke: translucent(stroke, 0.35), width: 1, spanGaps: true, points: { show: false } });
      data.push(column(c.line, 2));
      bands.push({ series: [mean + 1, mean + 2], fill: translucent(stroke, 0.15) });
      for (const seed of c.seedLines) {
        series.push({ label: `${seed.name} (#${seed.id})`, stroke: translucent(stroke, 0.6), width: 1, dash: [4, 3], spanGaps: true, points: { show: false } });
        data.push(column(seed.points, 1));
      }
    }
  });
  const size = () => ({ width: Math.max(240, figure.clientWidth - 8), height: 260 });
  const plot = new uPlot({
    ...size(),
    scales: { x: { time: false } },
    bands,
    axes: [{ label: chart.axisLabel, stroke: "currentColor", grid: { stroke: "rgba(128,128,128,.2)" } },
           { label: chart.metric, stroke: "currentColor", grid: { stroke: "rgba(128,128,128,.2)" } }],
    series,
  }, data, figure);
  new ResizeObserver(() => plot.setSize(size())).observe(figure);
  figure.compareChart = { plot, series: series.map((s) => s.label) }; // what the browser tests read: the lines as drawn
}

if (chart && figure) {
  if (chart.columns.some((c) => c.line.length)) draw();
  else figure.appendChild(Object.assign(document.createElement("p"), { className: "chart-empty", textContent: `No run has measured ${chart.metric} yet.` }));
}

// A grid's parallel coordinates, on uPlot as the other charts: x is the axis number (each varied field, then the
// final metric), y each value scaled to its axis's range; a tick under each axis gives its name and its range.
function drawParallel(grid, figure) {
  const axes = grid.axes.length;
  const ranges = grid.axes.map((_, i) => {
    const values = grid.lines.map((line) => (i < axes - 1 ? line.values[i] : line.final)).filter((v) => typeof v === "number");
    return values.length ? [Math.min(...values), Math.max(...values)] : [0, 1];
  });
  const scaled = (value, i) => {
    if (typeof value !== "number") return null; // not measured: no point, never 0
    const [low, high] = ranges[i];
    return high > low ? (value - low) / (high - low) : 0.5;
  };
  const finals = ranges[axes - 1];
  const data = [grid.axes.map((_, i) => i), ...grid.lines.map((line) => [...line.values, line.final].map(scaled))];
  const shade = (line) => {
    // Better final metric, darker line; the value is on the axis, so the colour is never the only carrier.
    const share = typeof line.final === "number" && finals[1] > finals[0] ? (line.final - finals[0]) / (finals[1] - finals[0]) : 0.5;
    return `rgba(47,111,219,${(0.25 + 0.75 * share).toFixed(2)})`;
  };
  const number = (v) => (Math.abs(v) > 0 && Math.abs(v) < 0.01 ? v.toExponential(1) : String(+v.toPrecision(4)));
  const size = () => ({ width: Math.max(240, figure.clientWidth - 8), height: 240 });
  const plot = new uPlot({
    ...size(),
    scales: { x: { time: false, range: [-0.1, axes - 0.9] }, y: { range: [-0.05, 1.05] } },
    axes: [{ stroke: "currentColor", splits: () => grid.axes.map((_, i) => i), grid: { stroke: "rgba(128,128,128,.5)" },
             values: (u, splits) => splits.map((i) => `${grid.axes[i]} (${number(ranges[i][0])}–${number(ranges[i][1])})`) },
           { show: false }],
    series: [{ label: "axis" }, ...grid.lines.map((line) => ({ label: `${line.name} (#${line.id})`, stroke: shade(line), width: 2, spanGaps: false }))],
    legend: { show: false },
  }, data, figure);
  new ResizeObserver(() => plot.setSize(size())).observe(figure);
  figure.parallelChart = { plot, lines: grid.lines, ranges };
}

const grids = readJson("compare-grids", []);
for (const [index, grid] of grids.entries()) {
  const target = document.querySelector(`[data-parallel="${index}"]`);
  if (target) drawParallel(grid, target);
}
