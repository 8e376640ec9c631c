// A trained rollout's answer drawn as tokens, each coloured by one figure of its token records
// (GET /api/proofs/attempts/<id>/tokens), with every figure of a token shown on hover and on keyboard focus.
// Token texts are model output: they go in through textContent only (el). Figure labels come from the page
// (json_script); the flag bits from the API, which reads them from trainer/observability/token_records.py.
import { countOf, el, NOT_MEASURED } from "./_dom.js";

const LN2 = Math.log(2);

// How each figure colours a token: [hue, strength in 0..1], or null where nothing was measured.
const COLOURINGS = {
  learner_logprob: (t) => (t.learner_logprob === null ? null : [0, 1 - Math.exp(t.learner_logprob)]),
  entropy: (t, scale) => (t.entropy === null ? null : [220, scale.entropy > 0 ? t.entropy / scale.entropy : 0]),
  // log(π_old / π_engine); a full colour at a ratio of 2 (or ½) and beyond, where the gap's share counts a token.
  mismatch: (t) => (t.mismatch === null ? null : [t.mismatch > 0 ? 0 : 220, Math.min(1, Math.abs(t.mismatch) / LN2)]),
  loss: (t) => (t.isContext ? [0, 0] : t.isChanged ? [30, 0.8] : [0, 0]),
};

function tokensOf(body) {
  const columns = body.tokens;
  const bits = body.flag_bits;
  return columns.token_texts.map((text, index) => {
    const learner = columns.learner_logprob[index];
    const engine = columns.engine_logprob[index];
    const flags = columns.flags[index];
    const names = Object.entries(bits).filter(([, bit]) => flags & bit).map(([name]) => name);
    return {
      index, text, flags, names,
      learner_logprob: learner, engine_logprob: engine,
      mismatch: learner === null || engine === null ? null : learner - engine,
      entropy: columns.entropy[index], loss_weight: columns.loss_weight[index],
      isContext: Boolean(flags & bits.context),
      isChanged: Boolean(flags & (bits.clip_low | bits.clip_high | bits.dual_clip | bits.capped)),
    };
  });
}

/** The answer in drawn units: one token, or a run of tokens that hold one character's bytes between them. The
 * records give such a run's whole text to its last token and the empty text to the ones before it
 * (trainer/observability/token_records.py TokenTexts), so the character is drawn once, spanning its tokens, and
 * never as a replacement character. */
export function characterUnits(tokens) {
  const units = [];
  let waiting = [];
  for (const token of tokens) {
    waiting.push(token);
    if (token.text !== "") {
      units.push({ tokens: waiting, text: token.text });
      waiting = [];
    }
  }
  if (waiting.length) units.push({ tokens: waiting, text: "" });
  return units;
}

function shown(value) {
  return value === null || value === undefined ? NOT_MEASURED : String(value);
}

function figureRows(token, labels) {
  return [
    ["token", JSON.stringify(token.text), "text"],
    ["position", String(token.index), "index"],
    [labels.learner_logprob, shown(token.learner_logprob), "learner_logprob"],
    [labels.engine_logprob, shown(token.engine_logprob), "engine_logprob"],
    [labels.mismatch, shown(token.mismatch), "mismatch"],
    [labels.entropy, shown(token.entropy), "entropy"],
    [labels.loss_weight, shown(token.loss_weight), "loss_weight"],
    [labels.flags, token.names.length ? token.names.join(", ") : "none", "flags"],
  ];
}

function describe(readout, unit, labels) {
  const facts = (token) => el("dl", { class: "facts token-facts" },
    ...figureRows(token, labels).flatMap(([label, value, name]) => [el("dt", { text: label }), el("dd", { "data-figure": name, text: value })]));
  if (unit.tokens.length === 1) {
    readout.replaceChildren(facts(unit.tokens[0]));
    return;
  }
  const first = unit.tokens[0].index;
  readout.replaceChildren(
    el("p", { class: "token-joined-note", text: `${JSON.stringify(unit.text)}: one piece of text over tokens ${first}–${first + unit.tokens.length - 1}, `
      + "whose bytes make whole characters only together; each token's figures:" }),
    ...unit.tokens.map(facts));
}

/** Each unit coloured by the most marked of its tokens (a character over two tokens shows the stronger figure). */
function paint(spans, units, tokens, figure) {
  const colouring = COLOURINGS[figure];
  const scale = { entropy: Math.max(0, ...tokens.map((t) => t.entropy ?? 0)) };
  units.forEach((unit, index) => {
    const colours = unit.tokens.map((token) => colouring(token, scale)).filter((colour) => colour !== null);
    const colour = colours.length ? colours.reduce((a, b) => (b[1] > a[1] ? b : a)) : null;
    const span = spans[index];
    span.classList.toggle("token-unmeasured", colour === null);
    span.style.backgroundColor = colour === null || colour[1] <= 0
      ? "" : `hsla(${colour[0]}, 85%, 50%, ${Math.min(1, Math.max(0, colour[1])).toFixed(3)})`;
  });
}

// While a step's records are being written (the API's state "pending"), ask again this often.
const PENDING_RETRY_MS = 3000;

export function drawTokens(section, labels) {
  const status = section.querySelector("#token-status");
  const holder = section.querySelector("#tokens");
  const readout = section.querySelector("#token-readout");
  const chooser = section.querySelector("#token-figure");
  fetch(section.dataset.tokensUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
    .then((response) => {
      if (!response.ok) throw new Error(`the token records did not load (HTTP ${response.status})`);
      return response.json();
    })
    .then((body) => {
      if (body.state === "pending") {
        // Not written yet, not missing: the step's file comes after its learner step. Draw it once it is there.
        status.textContent = `${labels.pending} (${body.reason}.)`;
        section.dataset.tokens = "pending";
        setTimeout(() => drawTokens(section, labels), PENDING_RETRY_MS);
        return;
      }
      if (!body.is_recorded) {
        status.textContent = `${labels.not_recorded} ${body.reason}.`;
        section.dataset.tokens = "none";
        return;
      }
      const tokens = tokensOf(body);
      const units = characterUnits(tokens);
      const spans = units.map((unit, position) => {
        const some = (test) => unit.tokens.some(test);
        return el("span", {
          class: ["token", unit.tokens.length > 1 && "token-joined", some((t) => t.isContext) && "token-context",
                  some((t) => t.isChanged) && "token-changed", some((t) => t.names.includes("capped")) && "token-capped"]
            .filter(Boolean).join(" "),
          "data-index": unit.tokens[0].index, "data-unit": position, "data-tokens": unit.tokens.length,
          tabindex: position === 0 ? "0" : "-1", text: unit.text,
        });
      });
      holder.replaceChildren(...spans);
      const show = (position) => {
        describe(readout, units[position], labels);
        readout.dataset.index = String(units[position].tokens[0].index);
      };
      holder.addEventListener("mouseover", (event) => {
        const span = event.target.closest(".token");
        if (span) show(Number(span.dataset.unit));
      });
      holder.addEventListener("focusin", (event) => {
        const span = event.target.closest(".token");
        if (!span) return;
        for (const other of holder.querySelectorAll(".token[tabindex='0']")) other.tabIndex = -1;
        span.tabIndex = 0;
        show(Number(span.dataset.unit));
      });
      // One tab stop for the whole answer; the arrow keys walk its tokens (a roving tabindex).
      holder.addEventListener("keydown", (event) => {
        const span = event.target.closest(".token");
        if (!span) return;
        const position = Number(span.dataset.unit);
        const next = { ArrowRight: position + 1, ArrowLeft: position - 1, Home: 0, End: spans.length - 1 }[event.key];
        if (next === undefined || next < 0 || next >= spans.length) return;
        event.preventDefault();
        spans[next].focus();
      });
      const repaint = () => {
        paint(spans, units, tokens, chooser.value);
        section.dataset.figure = chooser.value;
      };
      chooser.addEventListener("change", repaint);
      repaint();
      status.textContent = `${countOf(tokens.length, "token")} · advantage ${shown(body.advantage)}`;
      section.dataset.tokens = "drawn";
    })
    .catch((error) => {
      status.textContent = error.message;
      section.dataset.tokens = "failed";
    });
}
