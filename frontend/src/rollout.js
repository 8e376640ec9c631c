// A rollout's page: the Lean code, highlighted, with each of Lean's messages at its line and column; the answer
// as tokens coloured by the learner's figures (_tokens.js).
import { readJson } from "./_dom.js";
import { renderLeanView } from "./_lean.js";
import { drawTokens } from "./_tokens.js";

const views = readJson("code-views", {});
for (const container of document.querySelectorAll("[data-code-view]")) {
  const view = views[container.dataset.codeView];
  if (view) renderLeanView(container, view);
}
const tokenSection = document.getElementById("token-view");
if (tokenSection) drawTokens(tokenSection, readJson("token-labels", {}));
