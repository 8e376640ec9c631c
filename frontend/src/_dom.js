// DOM building for untrusted text: every string goes in through textContent, never as markup.
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) if (child !== null && child !== undefined && child !== false) node.append(child);
  return node;
}

export function readJson(id, fallback = null) {
  const node = document.getElementById(id);
  return node ? JSON.parse(node.textContent) : fallback;
}

// The same three formats as the template filters (platform/runs/templatetags/formatting.py):
// a page never formats a duration, a moment or an unmeasured number any other way.
export const NOT_MEASURED = "–"; // nothing was counted: never drawn or written as 0

export function formatNumber(value, digits = 3) {
  if (typeof value !== "number" || !Number.isFinite(value)) return NOT_MEASURED;
  return Number.isInteger(value) ? String(value) : value.toFixed(digits);
}

/** "1 token", "2 tokens": a count with its noun, as Django's pluralize writes it in the templates. */
export function countOf(count, noun, plural = `${noun}s`) {
  return `${count} ${Number(count) === 1 ? noun : plural}`;
}

export function formatDuration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return NOT_MEASURED;
  seconds = Math.max(0, seconds);
  if (seconds < 1) return `${seconds.toFixed(1)} s`;
  const s = Math.floor(seconds);
  const hours = Math.floor(s / 3600), minutes = Math.floor((s % 3600) / 60), rest = s % 60;
  const pad = (n) => String(n).padStart(2, "0");
  if (hours) return `${hours} h ${pad(minutes)} min`;
  if (minutes) return `${minutes} min ${pad(rest)} s`;
  return `${rest} s`;
}

/** Unix seconds (or an ISO string) as "2026-11-30 09:38:12 UTC". */
export function formatTimestamp(moment) {
  if (moment === null || moment === undefined || moment === "") return NOT_MEASURED;
  const date = typeof moment === "number" ? new Date(moment * 1000) : new Date(moment);
  return `${date.toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

// Typing in a form field must not trigger the page's single-key shortcuts.
export function isTypingTarget(target) {
  return target instanceof HTMLElement && (target.isContentEditable || ["INPUT", "SELECT", "TEXTAREA", "BUTTON"].includes(target.tagName));
}
