// Workflows: the latest version of each, a version's graph and definition, and a form that
// starts a run with JSON input.

import { h, jsonView, toast, parseJSONInput, fmtCount } from "./util.js";
import { get, post, qs } from "./api.js";
import { renderGraph, stepList } from "./graph.js";

export async function workflowsPage(root, params, { go, name }) {
  const wfs = await get("/api/workflows");
  const list = h("div", { class: "wf-list", "data-testid": "workflows" });
  for (const wf of wfs) {
    list.append(h("a", { href: `#/workflows/${encodeURIComponent(wf.name)}`, class: wf.name === name ? "on" : "", "data-workflow": wf.name },
      h("span", {}, wf.name), h("span", { class: "muted" }, `v${wf.version}`)));
  }
  if (!wfs.length) list.append(h("div", { class: "empty" }, "No workflows registered. POST a definition to /api/workflows or run one with the CLI."));
  const detail = h("div", {});
  root.append(h("div", { class: "head" }, h("h1", {}, "Workflows")),
    h("div", { class: "wf-layout" }, h("div", { class: "card" }, h("h2", {}, "Registered"), list), detail));
  const chosen = name || (wfs[0] && wfs[0].name);
  if (!chosen) return;
  if (!name) list.querySelector("a")?.classList.add("on");
  const version = params.get("version");
  const wf = await get(`/api/workflows/${encodeURIComponent(chosen)}${qs({ version })}`);
  const def = wf.definition || {};
  const verSelect = h("select", { "aria-label": "version" },
    (wf.versions || [wf.version]).slice().sort((a, b) => b - a).map((v) => h("option", { value: v }, `version ${v}`)));
  verSelect.value = String(wf.version);
  verSelect.addEventListener("change", () => go(`#/workflows/${encodeURIComponent(wf.name)}${qs({ version: verSelect.value })}`));
  const graph = renderGraph(def, { onSelect: () => {} });
  graph.update(() => ({ status: "pending" }));
  const input = h("textarea", { name: "input", "aria-label": "run input (JSON)", spellcheck: "false" }, JSON.stringify(skeleton(def.input), null, 2));
  const startBtn = h("button", { class: "btn", type: "submit" }, "Start run");
  const err = h("div", { class: "errbox", hidden: true });
  const form = h("form", { "data-testid": "start-run", onsubmit: async (e) => {
    e.preventDefault();
    err.hidden = true;
    try {
      const body = { workflow: `${wf.name}@${wf.version}`, input: parseJSONInput(input.value, "The input") };
      startBtn.disabled = true;
      const res = await post("/api/runs", body);
      toast(`Started run ${res.run_id}`);
      go(`#/runs/${encodeURIComponent(res.run_id)}`);
    } catch (ex) {
      err.hidden = false;
      err.textContent = ex.details ? `${ex.message}\n${JSON.stringify(ex.details, null, 2)}` : ex.message;
    } finally { startBtn.disabled = false; }
  } }, h("label", {}, "Input (JSON)", input), err, h("div", { class: "row" }, startBtn,
    h("a", { href: `#/runs${qs({ workflow: wf.name })}` }, "Runs of this workflow")));
  const nSteps = stepList(def).length;
  detail.append(
    h("div", { class: "card" },
      h("div", { class: "head" }, h("h1", {}, wf.name), verSelect, h("span", { class: "spacer" }),
        h("span", { class: "muted mono", title: "fingerprint" }, String(wf.fingerprint || "").slice(0, 16))),
      def.description ? h("p", { class: "muted" }, def.description) : null,
      graph.el,
      h("div", { class: "note" }, `${fmtCount(nSteps)} steps${graph.clustered ? " · wide layers are drawn as one cluster each" : ""}`)),
    h("div", { class: "card" }, h("h2", {}, "Start a run"), form),
    h("div", { class: "card" }, h("h2", {}, "Definition"), jsonView(def)));
}

// a starting input from the input schema: each required property with an empty value
function skeleton(schema) {
  if (!schema || typeof schema !== "object" || schema.type !== "object") return {};
  const out = {};
  for (const key of schema.required || []) {
    const t = (schema.properties || {})[key]?.type;
    out[key] = t === "number" || t === "integer" ? 0 : t === "boolean" ? false : t === "array" ? [] : t === "object" ? {} : "";
  }
  return out;
}
