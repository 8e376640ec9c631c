// A rollout's page: the Lean code, highlighted, with each of Lean's messages at its line and column.
import { readJson } from "./_dom.js";
import { renderLeanView } from "./_lean.js";

const views = readJson("code-views", {});
for (const container of document.querySelectorAll("[data-code-view]")) {
  const view = views[container.dataset.codeView];
  if (view) renderLeanView(container, view);
}
