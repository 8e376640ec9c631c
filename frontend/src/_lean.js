// Lean code with Lean's messages marked where Lean put them.
//
// Lean reports columns in Unicode code points; a JavaScript string is indexed in UTF-16 code
// units, where a character outside the Basic Multilingual Plane (𝔽, 𝓝) takes two. Columns are
// converted before slicing, so markers land right on lines full of ℕ, ≤, ₀ and 𝔽.
import { el } from "./_dom.js";

/** The UTF-16 offset in `text` of the code point at index `column` (clamped to the end). */
export function utf16Offset(text, column) {
  let units = 0;
  let points = 0;
  for (const character of text) {
    if (points >= column) break;
    units += character.length;
    points += 1;
  }
  return units;
}

/** The UTF-16 [start, end) a message marks on line `lineNumber`, or null when it marks nothing there. */
export function markedRange(lineText, lineNumber, message) {
  if (message.line === null || message.line === undefined) return null;
  const endLine = message.end_line ?? message.line;
  if (lineNumber < message.line || lineNumber > endLine) return null;
  const start = lineNumber === message.line ? utf16Offset(lineText, message.column ?? 0) : 0;
  let end = lineNumber === endLine && message.end_column !== null && message.end_column !== undefined
    ? utf16Offset(lineText, message.end_column)
    : lineText.length;
  if (end <= start) {
    // A point position: mark the one character there (a whole surrogate pair, never half of one).
    const next = lineText.codePointAt(start);
    end = next === undefined ? start : start + (next > 0xffff ? 2 : 1);
  }
  return [start, end];
}

function lineText(tokens) {
  return tokens.map(([, text]) => text).join("");
}

function renderLine(tokens, ranges) {
  const code = el("span", { class: "lean-src" });
  const boundaries = new Set([0]);
  for (const { start, end } of ranges) { boundaries.add(start); boundaries.add(end); }
  let offset = 0;
  for (const [cssClass, text] of tokens) {
    const cuts = [...boundaries].filter((b) => b > offset && b < offset + text.length).sort((a, b) => a - b);
    let from = 0;
    for (const cut of [...cuts.map((c) => c - offset), text.length]) {
      const piece = text.slice(from, cut);
      const pieceStart = offset + from;
      const covering = ranges.filter((r) => r.start <= pieceStart && pieceStart < r.end);
      const classes = [cssClass, ...covering.map((r) => `lean-mark sev-${r.severity}`)].filter(Boolean).join(" ");
      const span = el("span", { class: classes || null, text: piece });
      if (covering.length) span.dataset.message = covering.map((r) => r.index).join(" ");
      code.append(classes ? span : piece);
      from = cut;
    }
    offset += text.length;
  }
  // A message placed past the last character (a missing token at the end of the line) still shows.
  for (const range of ranges) {
    if (range.start >= offset) {
      code.append(el("span", { class: `lean-mark at-end sev-${range.severity}`, "data-message": String(range.index), text: " " }));
    }
  }
  return code;
}

/** Fill `container` with the code of `view` ({lines, messages}) and the messages beside their lines. */
export function renderLeanView(container, view) {
  const lines = view.lines.length ? view.lines : [[]];
  const messages = view.messages.map((m, index) => ({ ...m, index, severity: String(m.severity || "error").replace(/[^a-z]/g, "") }));
  const box = el("div", { class: "lean-lines", role: "group", "aria-label": "Lean code with Lean's messages" });
  const unplaced = messages.filter((m) => m.line === null || m.line === undefined || m.line > lines.length);
  lines.forEach((tokens, i) => {
    const lineNumber = i + 1;
    const text = lineText(tokens);
    const ranges = [];
    const notes = el("div", { class: "lean-notes" });
    for (const message of messages) {
      const range = markedRange(text, lineNumber, message);
      if (!range) continue;
      ranges.push({ start: range[0], end: range[1], severity: message.severity, index: message.index });
      if (lineNumber === message.line) {
        const where = `${message.line}:${message.column ?? 0}`;
        notes.append(el("div", { class: `lean-note sev-${message.severity}`, "data-message": String(message.index) },
          el("span", { class: "where", text: `${message.severity} at ${where}` }), el("pre", { text: message.text || "" })));
      }
    }
    box.append(el("div", { class: `lean-line${ranges.length ? " has-message" : ""}`, "data-line": String(lineNumber) },
      el("span", { class: "line-no", text: String(lineNumber) }), renderLine(tokens, ranges), notes));
  });
  container.replaceChildren();
  if (view.is_checked_code === false && view.messages.length === 0) {
    container.append(el("p", { class: "hint", text: "Never sent to Lean: this is the model's own code block." }));
  } else if (view.is_checked_code) {
    container.append(el("p", { class: "hint", text: "The code as Lean checked it: our header and the canonical statement, then the model's proof." }));
  }
  if (unplaced.length) {
    const general = el("ul", { class: "lean-messages unplaced" });
    for (const m of unplaced) general.append(el("li", { class: `sev-${m.severity}`, text: `${m.severity}: ${m.text || ""}` }));
    container.append(general);
  }
  container.append(el("pre", { class: "lean lean-code-view" }, box));
}
