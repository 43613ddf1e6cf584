// The runs list: filters by workflow and status, newest first, live status by polling the
// first page, older pages with the `next` cursor.  Top-level runs only, unless "Child
// runs" is ticked (then each child run names its parent); a parent's run page links its
// children either way.

import { h, pill, fmtTime, runDuration, toast } from "./util.js";
import { get, qs } from "./api.js";

export async function runsPage(root, params, { go, onLeave }) {
  const wfSelect = h("select", { name: "workflow", "aria-label": "workflow" }, h("option", { value: "" }, "All workflows"));
  const stSelect = h("select", { name: "status", "aria-label": "status" }, h("option", { value: "" }, "Any status"),
    ...["pending", "running", "waiting", "completed", "failed", "cancelled"].map((st) => h("option", { value: st }, st)));
  wfSelect.value = params.get("workflow") || "";
  const childBox = h("input", { type: "checkbox", name: "children", "aria-label": "show child runs" });
  childBox.checked = params.get("children") === "1";
  const body = h("tbody", {});
  const moreBtn = h("button", { class: "btn ghost", hidden: true }, "Load older runs");
  const table = h("table", { class: "grid", "data-testid": "runs" },
    h("thead", {}, h("tr", {}, ["Run", "Workflow", "Status", "Created", "Duration"].map((t) => h("th", {}, t)))), body);
  const live = h("span", { class: "live" }, "live");
  root.append(
    h("div", { class: "head" }, h("h1", {}, "Runs"), live, h("span", { class: "spacer" }),
      h("a", { class: "btn", href: "#/workflows" }, "Start a run")),
    h("div", { class: "card" },
      h("div", { class: "toolbar" }, h("label", {}, "Workflow", wfSelect), h("label", {}, "Status", stSelect),
        h("label", { title: "runs started by the workflow and loop steps of other runs" }, "Child runs", childBox)),
      table, h("div", { class: "more" }, moreBtn)));
  get("/api/workflows").then((wfs) => {
    for (const wf of wfs) wfSelect.append(h("option", { value: wf.name }, wf.name));
    wfSelect.value = params.get("workflow") || "";
  }).catch(() => {});
  stSelect.value = params.get("status") || "";
  const refilter = () => go(`#/runs${qs({ workflow: wfSelect.value, status: stSelect.value, children: childBox.checked ? "1" : "" })}`);
  wfSelect.addEventListener("change", refilter);
  stSelect.addEventListener("change", refilter);
  childBox.addEventListener("change", refilter);

  const filters = { workflow: params.get("workflow") || "", status: params.get("status") || "",
    children: childBox.checked ? "true" : "" };
  let pages = [];       // first page is refreshed live; older pages are kept as loaded
  let next = null;
  const rowFor = (run) => h("tr", { class: "click", "data-run": run.run_id, onclick: () => go(`#/runs/${encodeURIComponent(run.run_id)}`) },
    h("td", {}, h("a", { class: "mono", href: `#/runs/${encodeURIComponent(run.run_id)}` }, run.run_id)),
    h("td", {}, run.workflow, h("span", { class: "muted" }, run.version != null ? ` v${run.version}` : ""), parentOf(run)),
    h("td", {}, pill(run.status)),
    h("td", { class: "muted" }, fmtTime(run.created_at)),
    h("td", { class: "muted" }, runDuration(run)));
  const draw = () => {
    body.textContent = "";
    const seen = new Set();
    const runs = pages.flat().filter((r) => !seen.has(r.run_id) && seen.add(r.run_id));
    if (!runs.length) body.append(h("tr", {}, h("td", { colspan: 5, class: "empty" }, "No runs yet. Start one from the Workflows page.")));
    for (const run of runs) body.append(rowFor(run));
    moreBtn.hidden = !next;
  };
  const load = async (before) => get(`/api/runs${qs({ ...filters, limit: 25, before })}`);
  moreBtn.addEventListener("click", async () => {
    try {
      const page = await load(next);
      pages.push(page.runs);
      next = page.next;
      draw();
    } catch (err) { toast(err.message, true); }
  });
  const refresh = async () => {
    try {
      const page = await load();
      if (pages.length <= 1) next = page.next;
      pages[0] = page.runs;
      draw();
    } catch (err) { toast(err.message, true); }
  };
  await refresh();
  const timer = setInterval(() => { if (!document.hidden) refresh(); }, 2000);
  onLeave(() => clearInterval(timer));
}

// "child of <parent>" under a child run's workflow (a link to the parent's run page).
function parentOf(run) {
  if (!run.parent_run_id) return null;
  const href = `#/runs/${encodeURIComponent(run.parent_run_id)}`;
  return h("div", { class: "muted", "data-parent": run.parent_run_id },
    "child of ", h("a", { class: "mono", href, onclick: (e) => e.stopPropagation() }, run.parent_run_id.slice(0, 8)));
}
