// One answer followed while it is written (runs/views.py live_rollout): the run's WebSocket, only this answer's
// pieces. When its stored rollout arrives, the card becomes it in place (verdict, reward, Lean's messages), with a
// link to the proof attempt's page: no reload. A stored event the socket missed is fetched from the run's events.
import { el, readJson } from "./_dom.js";
import { rolloutCard } from "./_rollout_card.js";
import { WritingPanel } from "./_writing.js";

const context = readJson("live-rollout-context");
const state = document.getElementById("live-rollout-state");
const labels = { verdictLabels: context.verdictLabels, turnLabels: context.turnLabels };
const panel = new WritingPanel(document.getElementById("writing"), { runId: context.runId, marks: context.answerMarks,
  turnLabels: context.turnLabels, onlyKey: context.rolloutKey, storedCard: (rollout) => rolloutCard(rollout, labels) });
const first = readJson("live-rollout-answer");
if (first) panel.hear([first]);
panel.pinned.add(context.rolloutKey);

let lastNumber = context.lastEventNumber; // the run's events up to this one have been looked through
let isStored = state.textContent === "stored"; // stored, yet no proof attempt to go to: nothing to wait for
document.body.dataset.rolloutState = isStored ? "stored" : "writing";

function showStored(rollout) {
  if (isStored) return;
  isStored = true;
  panel.stored(rollout);
  state.replaceChildren("stored");
  if (rollout.attempt_id) state.after(" · ", el("a", { href: `/proofs/${Number(rollout.attempt_id)}/`, text: "its proof attempt" }));
  document.body.dataset.rolloutState = "stored";
}

function look(events) {
  for (const event of events) {
    lastNumber = Math.max(lastNumber, event.number);
    if (event.type === "rollout_finished" && event.payload?.rollout_key === context.rolloutKey) showStored(event.payload);
  }
}

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const socket = new WebSocket(`${scheme}://${location.host}/ws/runs/${context.runId}/events/?after=${lastNumber}`);
  socket.onopen = () => { document.body.dataset.live = "connected"; };
  socket.onmessage = (message) => {
    const data = JSON.parse(message.data);
    if (data.type === "progress") {
      if (isStored) return;
      panel.hear(data.pieces, data.sent_at);
      if (panel.answers.get(context.rolloutKey)?.isFinished) {
        state.textContent = "being checked by Lean";
        document.body.dataset.rolloutState = "checking";
      }
    } else if (data.type === "events") {
      look(data.events);
    }
  };
  socket.onclose = () => {
    document.body.dataset.live = "disconnected";
    setTimeout(connect, 2000);
  };
}
connect();

/** The run's events since the last one looked at, page by page (the socket dropped a message). */
async function findStored() {
  let page;
  do {
    const response = await fetch(`/api/runs/${context.runId}/events?after=${lastNumber}`, { headers: { Accept: "application/json" } });
    if (!response.ok) return;
    page = await response.json();
    look(page.events);
  } while (page.has_more && page.events.length && !isStored);
  // Neither being written nor among the events: forgotten (an evaluation's answer). The server says what is left.
  if (!isStored) location.reload();
}

// The writing list stops listing the answer once it is stored (or forgotten): then its stored event is due.
setInterval(async () => {
  if (document.hidden || isStored) return;
  const response = await fetch(`/api/runs/${context.runId}/writing`, { headers: { Accept: "application/json" } });
  if (response.ok && !(await response.json()).answers.some((a) => a.rollout_key === context.rolloutKey)) await findStored();
}, 5000);
