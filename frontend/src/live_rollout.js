// One answer followed while it is written (runs/views.py live_rollout): the run's WebSocket, only this answer's
// pieces. When its stored rollout arrives (or the writing API stops listing it), the page reloads and the
// server sends it to the proof attempt's page, where the verdict and Lean's messages are drawn.
import { readJson } from "./_dom.js";
import { WritingPanel } from "./_writing.js";

const context = readJson("live-rollout-context");
const state = document.getElementById("live-rollout-state");
const panel = new WritingPanel(document.getElementById("writing"), { runId: context.runId, marks: context.answerMarks,
  turnLabels: context.turnLabels, onlyKey: context.rolloutKey, storedCard: () => null });
const first = readJson("live-rollout-answer");
if (first) panel.hear([first]);
panel.pinned.add(context.rolloutKey);

const wasStored = state.textContent === "stored"; // stored, yet no proof attempt to go to: nothing to wait for

function isStored() {
  if (wasStored) return;
  state.textContent = "stored";
  location.reload();
}

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const socket = new WebSocket(`${scheme}://${location.host}/ws/runs/${context.runId}/events/?after=${context.lastEventNumber}`);
  socket.onmessage = (message) => {
    const data = JSON.parse(message.data);
    if (data.type === "progress") {
      panel.hear(data.pieces);
      const answer = panel.answers.get(context.rolloutKey);
      if (answer?.isFinished) state.textContent = "being checked by Lean";
    } else if (data.type === "events") {
      if (data.events.some((e) => e.type === "rollout_finished" && e.payload?.rollout_key === context.rolloutKey)) isStored();
    }
  };
  socket.onclose = () => setTimeout(connect, 2000);
}
connect();

// A stored event missed (a dropped frame): the answer leaves the writing list once it is stored.
setInterval(async () => {
  if (document.hidden) return;
  const response = await fetch(`/api/runs/${context.runId}/writing`, { headers: { Accept: "application/json" } });
  if (response.ok && !(await response.json()).answers.some((a) => a.rollout_key === context.rolloutKey)) isStored();
}, 5000);
