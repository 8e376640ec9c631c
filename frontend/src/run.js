// The run page, live: one WebSocket, events rendered as text (model output is untrusted),
// a bounded rollout list, and on reconnect everything missed since the last event id.
const MAX_ROLLOUT_NODES = 300;
const STATE_LABELS = { queued: "Queued", starting: "Starting", running: "Running", succeeded: "Succeeded", failed: "Failed", cancelled: "Cancelled" };

const context = JSON.parse(document.getElementById("run-context").textContent);
let lastEventId = context.lastEventId;
let retryDelayMs = 500;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

function setState(state, reason) {
  const badge = document.getElementById("run-state");
  badge.textContent = STATE_LABELS[state] || state;
  badge.className = `state-${state}`;
  if (reason) {
    const box = document.getElementById("failure-reason");
    box.textContent = reason;
    box.hidden = state !== "failed";
  }
  if (!["queued", "starting", "running"].includes(state)) document.getElementById("cancel-run")?.closest("form")?.remove();
}

function rolloutCard(event) {
  const r = event.payload;
  const verdictText = r.format_error || r.verdict || "—";
  const reward = r.reward === null || r.reward === undefined ? "censored" : String(r.reward);
  const title = r.attempt_id
    ? el("a", { href: `/proofs/${r.attempt_id}/`, text: r.problem_name || r.problem_id })
    : el("span", { text: r.problem_name || r.problem_id });
  const head = el("div", { class: "rollout-head" }, title,
    ` · step ${r.step} · ${r.turn === "retry" ? "Retry" : "First attempt"} · `,
    el("span", { class: "verdict", text: verdictText }), ` · reward ${reward}`);
  if (r.is_standin_verdict) head.append(" ", el("span", { class: "badge standin", text: "stand-in" }));
  const card = el("li", { class: `rollout verdict-${r.verdict || "none"} fresh`, "data-rollout-key": r.rollout_key }, head);
  if (r.reasoning) card.append(el("details", {}, el("summary", { text: "Reasoning" }), el("pre", { class: "reasoning", text: r.reasoning })));
  card.append(el("pre", { class: "lean-code", text: r.lean_code || "(no Lean code block)" }));
  if (r.lean_messages?.length) {
    const list = el("ul", { class: "lean-messages" });
    for (const m of r.lean_messages) {
      const where = m.line ? ` at ${m.line}:${m.column}` : "";
      list.append(el("li", { class: `sev-${m.severity}`, text: `${m.severity}${where}: ${m.text}` }));
    }
    card.append(list);
  }
  if (r.reasons?.length && !r.reward) card.append(el("p", { class: "zero-reason", text: (r.is_censored ? "Censored: " : "") + r.reasons.join("; ") }));
  return card;
}

function addMetricsRow(payload) {
  const v = payload.values || {};
  const fmt = (x, d = 3) => (typeof x === "number" ? x.toFixed(d) : "");
  const body = document.querySelector("#metrics tbody");
  body.querySelector(`tr[data-step="${payload.step}"]`)?.remove();
  body.append(el("tr", { "data-step": String(payload.step) },
    el("td", { text: String(payload.step) }), el("td", { text: fmt(v.reward_mean) }), el("td", { text: fmt(v.lean_accuracy) }),
    el("td", { text: fmt(v.format_valid_share) }), el("td", { text: String(v.censored_count ?? "") }), el("td", { text: fmt(v.tokens_per_second, 1) })));
}

function addTimeline(state, reason) {
  const text = `${STATE_LABELS[state] || state} · ${new Date().toISOString().slice(0, 19).replace("T", " ")}${reason ? " — " + reason : ""}`;
  document.getElementById("timeline").append(el("li", { text }));
}

function handle(event) {
  const p = event.payload;
  switch (event.type) {
    case "rollout_finished": {
      const list = document.getElementById("rollouts");
      list.prepend(rolloutCard(event));
      while (list.children.length > MAX_ROLLOUT_NODES) list.lastElementChild.remove();
      break;
    }
    case "run_started": setState("running"); addTimeline("running", "the trainer started"); break;
    case "step_started": document.getElementById("run-step").textContent = String(p.step); break;
    case "metrics": addMetricsRow(p); break;
    case "run_finished": setState(p.status, p.reason); addTimeline(p.status, p.reason); break;
  }
}

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const socket = new WebSocket(`${scheme}://${location.host}/ws/runs/${context.runId}/events/?after=${lastEventId}`);
  socket.onopen = () => { retryDelayMs = 500; document.body.dataset.live = "connected"; };
  socket.onmessage = (message) => {
    const event = JSON.parse(message.data);
    if (event.id <= lastEventId) return;
    lastEventId = event.id;
    handle(event);
  };
  socket.onclose = (close) => {
    document.body.dataset.live = "disconnected";
    if (close.code === 4403) return;  // not allowed to watch: reconnecting would not help
    setTimeout(connect, retryDelayMs);
    retryDelayMs = Math.min(retryDelayMs * 2, 10000);
  };
}

connect();
