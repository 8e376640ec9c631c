// "Writing now": each answer while the model is still writing it (rollout_progress, runs/live.py), then,
// in the same card, "checking with Lean…", then the stored rollout (rollout_finished), which is the truth.
//
// Pieces carry `offset` in code points (the trainer's count); a JavaScript string counts UTF-16 units, so
// each card keeps its own code-point count. A piece that starts past the text the card has (a dropped
// frame) asks /api/runs/<id>/writing for the latest text instead of guessing. Model output is untrusted:
// text nodes only.
//
// A slow browser drops progress frames rather than delaying stored events:
// - a progress frame that reaches the page later than the quickest of the recent ones by more than
//   STALE_FRAME_S (the page was busy while it waited in the socket's queue) is dropped unread, and the latest
//   text is fetched once the page has caught up; the socket's stored events behind it are handled at once;
// - pieces only update state; the DOM is drawn once per animation frame, stored cards first and always,
//   cards still being written only within DRAW_BUDGET_MS (the rest wait for the next frame, merged).
// The list counts frames heard and dropped (data-progress-frames-heard, -dropped) for people and tests.
import { countOf, el, formatNumber } from "./_dom.js";
import { renderLeanView } from "./_lean.js";

const MAX_CARDS = 24;
const KEEP_STORED_MS = 15000; // a stored card stays this long in the panel (unless pinned), then leaves for the list
const SNAPSHOT_EVERY_MS = 2000;
// An answer checked but never stored (an evaluation's: they are scored, not stored) or one whose trainer went
// quiet (a cancelled run) leaves the panel after this long without news; the trainer's writing hash expires too.
const QUIET_ANSWER_MS = 120000;
const STALE_FRAME_S = 1.0;
const LAG_WINDOW_FRAMES = 40; // about 10 s of the forwarder's frames (4 a second): the quickest of them is "on time"
const DRAW_BUDGET_MS = 8;

/** The answer's parts as the format check names them (the marks come with the page: trainer/recipe/format_reward.py). */
export function answerParts(text, marks) {
  const parts = [];
  let cursor = 0;
  const thinkStart = text.indexOf(marks.thinkOpen);
  if (thinkStart >= 0) {
    const thinkEnd = text.indexOf(marks.thinkClose, thinkStart);
    parts.push({ kind: "prose", text: text.slice(0, thinkStart) });
    const bodyEnd = thinkEnd < 0 ? text.length : thinkEnd;
    parts.push({ kind: "think", text: text.slice(thinkStart + marks.thinkOpen.length, bodyEnd), isClosed: thinkEnd >= 0 });
    cursor = thinkEnd < 0 ? text.length : thinkEnd + marks.thinkClose.length;
  }
  const leanStart = text.lastIndexOf(marks.leanOpen);
  if (leanStart >= cursor) {
    parts.push({ kind: "prose", text: text.slice(cursor, leanStart) });
    const bodyStart = text.indexOf("\n", leanStart);
    const leanEnd = bodyStart < 0 ? -1 : text.indexOf(marks.fence, bodyStart);
    const body = bodyStart < 0 ? "" : text.slice(bodyStart + 1, leanEnd < 0 ? text.length : leanEnd);
    parts.push({ kind: "lean", text: body, isClosed: leanEnd >= 0 });
    cursor = leanEnd < 0 ? text.length : leanEnd + marks.fence.length;
  }
  parts.push({ kind: "prose", text: text.slice(cursor) });
  return parts.filter((part) => part.kind !== "prose" || part.text.trim());
}

/** The reasoning's own parts: prose, the Lean checks it asks for (<lean>…</lean>) and Lean's replies
 * (<lean_result>…</lean_result>, appended by the trainer), each marked open while it is still forming. */
export function reasoningParts(text, marks) {
  const parts = [];
  let cursor = 0;
  if (!marks.toolCallOpen) return [{ kind: "prose", text }];
  while (cursor < text.length) {
    const call = text.indexOf(marks.toolCallOpen, cursor);
    const reply = text.indexOf(marks.toolReplyOpen, cursor);
    const next = [call, reply].filter((at) => at >= 0).sort((a, b) => a - b)[0];
    if (next === undefined) break;
    const isCall = next === call;
    const [open, close] = isCall ? [marks.toolCallOpen, marks.toolCallClose] : [marks.toolReplyOpen, marks.toolReplyClose];
    parts.push({ kind: "prose", text: text.slice(cursor, next) });
    const end = text.indexOf(close, next + open.length);
    parts.push({ kind: isCall ? "tool-call" : "tool-reply", text: text.slice(next + open.length, end < 0 ? text.length : end).replace(/^\n|\n$/g, ""),
      isClosed: end >= 0 });
    cursor = end < 0 ? text.length : end + close.length;
  }
  parts.push({ kind: "prose", text: text.slice(cursor) });
  return parts.filter((part) => part.kind !== "prose" || part.text.trim());
}

/** The reasoning drawn with its Lean checks: a call, then "waiting for Lean…" until Lean's reply is there. */
export function reasoningNodes(text, marks) {
  const parts = reasoningParts(text, marks);
  const nodes = [];
  parts.forEach((part, index) => {
    if (part.kind === "prose") { nodes.push(el("pre", { class: "reasoning", text: part.text })); return; }
    const isCall = part.kind === "tool-call";
    const label = isCall ? "Asks Lean" : "Lean's reply";
    nodes.push(el("div", { class: `${part.kind}${part.isClosed ? " closed" : " open"}` },
      el("span", { class: "tool-label", text: label }), el("pre", { class: "lean-code", text: part.text })));
    if (isCall && part.isClosed && parts[index + 1]?.kind !== "tool-reply") {
      nodes.push(el("p", { class: "tool-waiting", role: "status", text: "waiting for Lean…" }));
    }
  });
  return nodes;
}

function codePoints(text) {
  let count = 0;
  for (const _ of text) count += 1;
  return count;
}

export class WritingPanel {
  constructor(list, { runId, marks, turnLabels, storedCard, onlyKey = null }) {
    this.list = list;
    this.runId = runId;
    this.marks = marks;
    this.turnLabels = turnLabels;
    this.storedCard = storedCard;
    this.onlyKey = onlyKey; // the live rollout page follows one answer
    this.answers = new Map(); // rollout_key → state
    this.dirty = new Set();
    this.frame = null;
    this.lastSnapshotAt = 0;
    this.snapshotTimer = null;
    this.lags = []; // seconds from the forwarder's send to this page's reading, of the recent frames
    this.framesHeard = 0;
    this.isOver = false; // the run ended (end()): a late frame draws no answer the server no longer lists
    this.framesDropped = 0;
    this.pinned = new Set(new URLSearchParams(location.hash.slice(1)).getAll("pin"));
    setInterval(() => {
      for (const answer of [...this.answers.values()]) {
        if (!answer.stored && Date.now() - answer.heardAt > QUIET_ANSWER_MS) this.forget(answer.key, { evenPinned: true });
      }
    }, 5000);
  }

  /** A frame of pieces from the WebSocket (possibly many answers), sent by the forwarder at `sentAt` (Unix s). */
  hear(pieces, sentAt) {
    this.framesHeard += 1;
    if (this.isLate(sentAt)) {
      this.framesDropped += 1;
      this.count();
      this.snapshot().catch(() => {}); // once caught up: the latest text, in place of what was dropped
      return;
    }
    this.count();
    if (this.isOver) return;
    for (const piece of pieces) {
      if (this.onlyKey && piece.rollout_key !== this.onlyKey) continue;
      const answer = this.answers.get(piece.rollout_key) ?? this.start(piece);
      if (!answer || answer.stored) continue;
      if (piece.offset > answer.points) { this.snapshot().catch(() => {}); continue; } // a frame was dropped: fetch the latest
      const overlap = answer.points - piece.offset;
      const fresh = overlap > 0 ? [...piece.text].slice(overlap).join("") : piece.text;
      answer.text += fresh;
      answer.points += codePoints(fresh);
      this.note(answer, piece);
    }
    this.schedule();
  }

  /** Whether a frame waited in this page's queue: later than the quickest recent frame by STALE_FRAME_S. Measured
   * against the page's own recent best, so a clock apart from the server's, or a slow network, is no cause. */
  isLate(sentAt) {
    if (typeof sentAt !== "number") return false; // a piece from the page itself (the text so far)
    const lag = Date.now() / 1000 - sentAt;
    this.lags.push(lag);
    if (this.lags.length > LAG_WINDOW_FRAMES) this.lags.shift();
    return lag - Math.min(...this.lags) > STALE_FRAME_S;
  }

  count() {
    this.list.dataset.progressFramesHeard = String(this.framesHeard);
    this.list.dataset.progressFramesDropped = String(this.framesDropped);
  }

  /** A card for an answer heard of first now; null when the panel is full of answers still being written (the
   * answer appears in the list once stored). A stored, unpinned card makes room. */
  start(piece) {
    if (!this.onlyKey && this.answers.size >= MAX_CARDS && !this.makeRoom()) return null;
    const answer = { key: piece.rollout_key, step: piece.step, problemId: piece.problem_id, turn: piece.turn, text: "",
      points: 0, tokens: 0, firstTime: piece.time, firstTokens: piece.tokens, lastTime: piece.time, isFinished: false,
      leanLines: null, stored: null, node: null, heardAt: Date.now() };
    this.answers.set(piece.rollout_key, answer);
    return answer;
  }

  makeRoom() {
    const oldest = [...this.answers.values()].find((answer) => answer.stored && !this.pinned.has(answer.key));
    if (oldest) this.forget(oldest.key);
    return Boolean(oldest);
  }

  note(answer, piece) {
    answer.tokens = Math.max(answer.tokens, piece.tokens);
    answer.heardAt = Date.now();
    answer.lastTime = piece.time;
    answer.isFinished ||= piece.is_finished;
    if (piece.lean_lines) answer.leanLines = piece.lean_lines;
    this.dirty.add(answer.key);
  }

  /** The latest text of every answer not yet stored (a page opened mid-answer, or one that missed a frame); at most
   * once every SNAPSHOT_EVERY_MS, a call in between asks for one when that time is up. */
  async snapshot() {
    if (this.isOver) return;
    const wait = this.lastSnapshotAt + SNAPSHOT_EVERY_MS - Date.now();
    if (wait > 0) {
      this.snapshotTimer ??= setTimeout(() => { this.snapshotTimer = null; this.snapshot().catch(() => {}); }, wait);
      return;
    }
    this.lastSnapshotAt = Date.now();
    const response = await fetch(`/api/runs/${this.runId}/writing`, { headers: { Accept: "application/json" } });
    if (!response.ok) return;
    const { answers } = await response.json();
    if (this.isOver) return; // the run ended while the answers were fetched
    for (const latest of answers) {
      if (this.onlyKey && latest.rollout_key !== this.onlyKey) continue;
      const answer = this.answers.get(latest.rollout_key) ?? this.start(latest);
      if (!answer || answer.stored || codePoints(latest.text) < answer.points) continue;
      answer.text = latest.text;
      answer.points = codePoints(latest.text);
      this.note(answer, latest);
    }
    this.schedule();
  }

  /** The stored rollout arrived: its card takes the live one's place. */
  stored(rollout) {
    if (this.onlyKey && rollout.rollout_key !== this.onlyKey) return;
    // One that never streamed here is the list's; the live rollout page shows its answer however it came.
    const answer = this.answers.get(rollout.rollout_key) ?? (this.onlyKey ? this.start(rollout) : null);
    if (!answer) return;
    answer.stored = rollout;
    this.dirty.add(answer.key);
    this.schedule();
    if (!this.onlyKey) setTimeout(() => this.forget(answer.key), KEEP_STORED_MS);
  }

  /** The run ended: nothing more will be written or stored, so the panel says what a reload of the page says (a
   * finished run's page asks for no answer being written: run.js takes a snapshot only while the run is active). An
   * answer never stored (an evaluation's, or one whose format check failed) leaves now; a pinned stored card stays. */
  end() {
    this.isOver = true;
    for (const answer of [...this.answers.values()]) this.forget(answer.key, { evenPinned: !answer.stored });
  }

  forget(key, { evenPinned = false } = {}) {
    if (this.pinned.has(key) && !evenPinned) return;
    const answer = this.answers.get(key);
    answer?.node?.remove();
    this.answers.delete(key);
    this.showEmpty();
  }

  schedule() {
    if (this.frame !== null || document.hidden && !this.onlyKey) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = null;
      const began = performance.now();
      const dirty = [...this.dirty].map((key) => this.answers.get(key)).filter(Boolean);
      this.dirty = new Set(dirty.map((answer) => answer.key));
      for (const answer of dirty.sort((a, b) => Boolean(b.stored) - Boolean(a.stored))) {
        if (!answer.stored && performance.now() - began > DRAW_BUDGET_MS) break; // the next frame draws the rest
        this.draw(answer);
        this.dirty.delete(answer.key);
      }
      this.showEmpty();
      if (this.dirty.size) this.schedule();
    });
  }

  showEmpty() {
    const empty = this.list.querySelector(":scope > li.empty");
    if (empty) empty.hidden = this.answers.size > 0;
  }

  togglePin(key) {
    if (this.pinned.has(key)) this.pinned.delete(key); else this.pinned.add(key);
    const params = new URLSearchParams();
    for (const pinnedKey of this.pinned) params.append("pin", pinnedKey);
    history.replaceState(null, "", `${location.pathname}${location.search}${this.pinned.size ? `#${params}` : ""}`);
    const answer = this.answers.get(key);
    if (answer) { this.dirty.add(key); this.schedule(); if (answer.stored && !this.pinned.has(key)) setTimeout(() => this.forget(key), KEEP_STORED_MS); }
  }

  draw(answer) {
    if (!answer.node) {
      answer.node = el("li", { class: "writing", tabindex: "0", "data-rollout-key": answer.key });
      this.list.prepend(answer.node);
    }
    const node = answer.node;
    const isPinned = this.pinned.has(answer.key);
    node.classList.toggle("pinned", isPinned);
    if (isPinned && node !== this.list.firstElementChild) this.list.prepend(node);
    if (answer.stored) {
      const card = this.storedCard(answer.stored);
      node.replaceChildren(...card.childNodes);
      node.className = `${card.className} writing stored${isPinned ? " pinned" : ""}`;
      node.dataset.state = "stored";
      node.prepend(this.pinButton(answer.key, isPinned));
      return;
    }
    const seconds = answer.lastTime - answer.firstTime;
    const rate = seconds > 0 ? (answer.tokens - answer.firstTokens) / seconds : null;
    const status = answer.isFinished ? "checking with Lean…" : "writing…";
    node.dataset.state = answer.isFinished ? "checking" : "writing";
    const head = el("div", { class: "rollout-head" },
      el("a", { href: `/runs/${this.runId}/rollouts/${encodeURIComponent(answer.key)}/`, text: answer.problemId }),
      ` · step ${answer.step} · ${this.turnLabels[answer.turn] || answer.turn} · `,
      el("span", { class: "tokens", text: countOf(answer.tokens, "token") }), " · ",
      el("span", { class: "rate", text: rate === null ? "– tokens/s" : `${formatNumber(rate, 1)} tokens/s` }), " · ",
      el("span", { class: "status", role: "status", text: status }));
    const body = [this.pinButton(answer.key, isPinned), head];
    for (const part of answerParts(answer.text, this.marks)) {
      if (part.kind === "think") {
        body.push(el("details", { class: "think", open: !part.isClosed || isPinned },
          el("summary", { text: part.isClosed ? "Reasoning" : "Thinking…" }), ...reasoningNodes(part.text, this.marks)));
      } else if (part.kind === "lean") {
        const box = el("div", { class: `lean-block${part.isClosed ? " closed" : " open"}` });
        if (part.isClosed && answer.leanLines) renderLeanView(box, { lines: answer.leanLines, messages: [] });
        else box.append(el("pre", { class: "lean-code", text: part.text }));
        body.push(box);
      } else {
        body.push(el("pre", { class: "prose", text: part.text }));
      }
    }
    node.replaceChildren(...body);
    for (const pre of node.querySelectorAll("pre")) pre.scrollTop = pre.scrollHeight; // follow the writing
  }

  pinButton(key, isPinned) {
    const button = el("button", { type: "button", class: "pin", "aria-pressed": String(isPinned), text: isPinned ? "Unpin" : "Pin" });
    button.addEventListener("click", () => this.togglePin(key));
    return button;
  }
}
