// A stored rollout as a card: the run page's list, its "Writing now" panel once an answer is stored, and the live
// rollout page once its answer is stored all draw it here. Labels come with each page (trainer's lists, through
// json_script), never a copy in JavaScript. Model output is untrusted: text nodes only.
import { el, formatTimestamp } from "./_dom.js";

/** A rollout's verdict in words: a format error's category where Lean never saw it (proofs.queries.round_summary). */
export function verdictText(r, verdictLabels = {}) {
  return r.format_error || verdictLabels[r.verdict] || r.verdict || "—";
}

// ``earlierRounds(r)``: the rounds of correction before ``r`` ({rollout_key, attempt_id, round, label, verdict}, round 0
// first); the run page knows them from the answers it has seen, a stored page from ``r.earlier_rounds``.
export function rolloutCard(r, { verdictLabels = {}, turnLabels = {}, earlierRounds = (x) => x.earlier_rounds } = {}) {
  const shownVerdict = verdictText(r, verdictLabels);
  const reward = r.reward === null || r.reward === undefined ? "censored" : String(r.reward);
  const name = r.problem_name || r.problem_id;
  const title = r.attempt_id ? el("a", { href: `/proofs/${Number(r.attempt_id)}/`, text: name }) : el("span", { text: name });
  // The policy that wrote it (issue 25), only where the trainer said: older events have none.
  const policy = Number.isInteger(r.policy_version) ? el("span", { class: "policy-version", text: ` (written by policy v${r.policy_version})`,
    title: `The policy that wrote this answer: its weights had ${r.policy_version} learner update${r.policy_version === 1 ? "" : "s"}.` }) : null;
  const head = el("div", { class: "rollout-head" }, title,
    r.is_evaluation ? ` · evaluation of step ${r.step}` : ` · step ${r.step}`, policy, ` · ${turnLabels[r.turn] || r.turn}`,
    // Rounds of correction beyond the release's one retry (retry.max_rounds): which round (round 1 is the "Retry"),
    // and the answer it corrects.
    Number.isInteger(r.round) && r.round > 1 ? el("span", { class: "round", text: ` · round ${r.round}`,
      title: `Corrects ${r.parent_rollout_key || "an earlier answer"}` }) : null, " · ",
    el("span", { class: "verdict", text: shownVerdict }), ` · reward ${reward}`);
  if (r.is_standin_verdict) head.append(" ", el("span", { class: "badge standin", text: "stand-in" }));
  const verdictClass = String(r.verdict || "none").replace(/[^a-z_]/g, "");
  const card = el("li", { class: `rollout verdict-${verdictClass} fresh`, tabindex: "0", "data-rollout-key": r.rollout_key,
    "data-attempt-id": r.attempt_id || null, "data-round": Number.isInteger(r.round) ? r.round : null,
    "data-parent-rollout-key": r.parent_rollout_key || null });
  card.append(head);
  const earlier = earlierRounds(r) || [];
  if (earlier.length) card.append(roundTrajectory([...earlier, { ...r, label: shownVerdict }], r.rollout_key));
  if (r.reasoning) card.append(el("details", {}, el("summary", { text: "Reasoning" }), el("pre", { class: "reasoning", text: r.reasoning })));
  if (r.tool_calls?.length) card.append(toolCallList(r.tool_calls, verdictLabels));
  card.append(el("pre", { class: "lean-code", text: r.lean_code || "(no Lean code block)" }));
  if (r.lean_messages?.length) {
    const list = el("ul", { class: "lean-messages" });
    for (const m of r.lean_messages) {
      // Lean's lines count the code it checked (our header, the statement, the proof), not the block shown here.
      const where = m.line ? ` at line ${m.line}:${m.column} of the code Lean checked (its page numbers it)` : "";
      list.append(el("li", { class: `sev-${String(m.severity).replace(/[^a-z]/g, "")}`, text: `${m.severity}${where}: ${m.text}` }));
    }
    card.append(list);
  }
  if (r.is_censored) card.append(el("p", { class: "zero-reason", text: `Censored: ${(r.reasons || []).join("; ") || "the verifier could not decide"} — not counted as wrong.` }));
  else if (!r.reward && r.format_error) card.append(el("p", { class: "zero-reason", text: `Format: ${r.format_error}` }));
  else if (!r.reward && r.reasons?.length) card.append(el("p", { class: "zero-reason", text: r.reasons.join("; ") }));
  return card;
}

// The Lean checks the answer asked for inside its reasoning (rollout.lean_tool_calls), as stored: each snippet, Lean's
// reply and verdict, and how long the answer waited for it.
export function toolCallList(calls, verdictLabels = {}) {
  const list = el("ol", { class: "tool-calls", "aria-label": "Lean checks asked inside the reasoning" });
  for (const call of calls) {
    const waited = Number(call.answered_at) - Number(call.asked_at);
    const verdict = call.is_decided ? (verdictLabels[call.verdict] || call.verdict) : "no verdict: the verifier could not decide";
    list.append(el("li", { class: `tool-call verdict-${String(call.verdict).replace(/[^a-z_]/g, "")}` },
      el("span", { class: "tool-label", text: `Asked Lean at ${formatTimestamp(Number(call.asked_at))} · ${verdict}` +
        (Number.isFinite(waited) ? ` · answered in ${waited.toFixed(2)} s` : "") }),
      el("pre", { class: "lean-code", text: call.snippet }),
      el("pre", { class: "tool-reply", text: call.reply.trim() })));
  }
  return list;
}

// A problem's rounds of correction up to this answer, as one line: round 0 (the first attempt) → 1 → … → this one,
// each with its verdict and a link to its page. The same markup as frontend/templates/proofs/_round_trajectory.html.
export function roundTrajectory(rounds, currentKey) {
  const list = el("ol", { class: "round-trajectory", "aria-label": "This answer's rounds of correction, the first attempt first" });
  for (const round of rounds) {
    const isCurrent = round.rollout_key === currentKey;
    const name = `round ${round.round}`;
    list.append(el("li", { class: `trajectory-round verdict-${String(round.verdict || "none").replace(/[^a-z_]/g, "")}${isCurrent ? " current" : ""}`,
      "data-round": round.round, "data-rollout-key": round.rollout_key, "data-attempt-id": round.attempt_id || null, title: round.round === 0 ? "the first attempt" : null },
      isCurrent || !round.attempt_id ? el("span", { class: "round-name", text: name })
        : el("a", { class: "round-name", href: `/proofs/${Number(round.attempt_id)}/`, text: name }),
      " ", el("span", { class: "round-verdict", text: round.label })));
  }
  return list;
}
