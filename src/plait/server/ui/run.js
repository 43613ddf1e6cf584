// A run: header with cancel/retry and tokens, approvals waiting, the graph coloured by step
// state, the Gantt chart, the steps table (virtualized) and the selected step's attempts,
// input, output (a model call's conversation: llmview.js), error, logs and partial outputs
// (a big run is read page by page: fetchRun).  Live from GET /api/runs/{id}/events: every
// event recolours what it names at once and schedules a (throttled) re-read of the run.

import { h, pill, fmtTime, fmtDuration, jsonView, toast, parseJSONInput, FINAL_RUN, FINAL_STEP,
  STATES, fmtCount, parseTime, runDuration, legend } from "./util.js";
import { get, post, lastResponseBytes } from "./api.js";
import { renderGraph, stepList, baseStep, aggregate } from "./graph.js";
import { gantt as makeGantt } from "./gantt.js";
import { virtualList } from "./vlist.js";
import { conversation, tokensText } from "./llmview.js";

export async function runPage(root, params, { go, onLeave, runId }) {
  const stats = { runId, bytes: 0, fetchMs: 0, renderMs: 0, fetches: 0, events: 0 };
  window.__plaitRunPage = stats;
  const t0 = performance.now();
  let run = await fetchRun(runId, stats);
  stats.fetchMs = performance.now() - t0;
  let definition = {};
  try {
    const wf = await get(`/api/workflows/${encodeURIComponent(run.workflow)}?version=${encodeURIComponent(run.version ?? "")}`);
    definition = wf.definition || {};
  } catch { /* a run of an unregistered or deleted definition: no graph */ }
  const defSteps = new Map(stepList(definition).map((st) => [st.id, st]));
  const emits = new Map();     // step -> [values] streamed by emit events
  const logs = new Map();      // step -> [log records] from note events
  const overlay = new Map();   // step -> status seen in an event since the last read
  let selected = params.get("step") || null;
  let filter = { text: "", status: "", members: null };
  let source = null;
  let closed = false;

  // ---- layout
  const title = h("h1", {});
  const statusEl = h("span", {});
  const liveEl = h("span", { class: "live", hidden: true }, "live");
  const actions = h("div", { class: "row" });
  const facts = h("dl", { class: "facts" });
  const runErr = h("div", { class: "errbox", hidden: true });
  const banner = h("div", { class: "banner", hidden: true, "data-testid": "approvals" });
  const graph = renderGraph(definition, { onSelect: (sel) => {
    if (sel.cluster) { filter.members = new Set(sel.cluster); tableNote(); redrawTable(); }
    else select(sel.step);
  } });
  const gantt = makeGantt({ onSelect: (id) => select(id) });
  const search = h("input", { type: "search", placeholder: "Filter steps…", "aria-label": "filter steps" });
  const stSel = h("select", { "aria-label": "step status" }, h("option", { value: "" }, "Any status"),
    STATES.map((st) => h("option", { value: st }, st.replace("_", " "))));
  const tableInfo = h("span", { class: "muted" });
  const table = virtualList({ rowHeight: 36, maxHeight: 432, className: "steps", renderRow: (id, el) => {
    const st = run.steps[id] || {};
    const status = statusOf(id);
    if (id === selected) el.classList.add("sel");
    el.dataset.step = id;
    const dur = durationOf(st);
    el.append(h("span", { class: "c-id", title: id }, id, st.cached ? h("span", { class: "muted" }, " · cached") : null),
      h("span", { class: "c-st" }, pill(status)),
      h("span", { class: "c-n" }, st.attempts ?? ""),
      h("span", { class: "c-t" }, fmtTime(st.started_at)),
      h("span", { class: "c-t" }, dur === null ? "—" : fmtDuration(dur)));
    el.addEventListener("click", () => select(id));
  } });
  const side = h("div", { class: "card side", "data-testid": "step-detail" });
  const legendEl = legend();
  root.append(
    h("div", { class: "card" },
      h("div", { class: "head" }, title, statusEl, liveEl, h("span", { class: "spacer" }), actions),
      facts, runErr),
    banner,
    h("div", { class: "layout" },
      h("div", {},
        h("div", { class: "card" }, h("h2", {}, "Graph"),
          defSteps.size ? graph.el : h("div", { class: "empty" }, "The definition of this run is not registered."),
          legendEl),
        h("div", { class: "card" }, h("h2", {}, "Timeline"), gantt.el),
        h("div", { class: "card" },
          h("div", { class: "head" }, h("h2", { style: "margin:0" }, "Steps"), tableInfo, h("span", { class: "spacer" }), search, stSel),
          h("div", { class: "vhead" }, h("span", { class: "c-id" }, "Step"), h("span", { class: "c-st" }, "Status"),
            h("span", { class: "c-n" }, "Attempts"), h("span", { class: "c-t" }, "Started"), h("span", { class: "c-t" }, "Duration")),
          table.el)),
      side));
  search.addEventListener("input", () => { filter.text = search.value.trim(); filter.members = null; tableNote(); redrawTable(); });
  stSel.addEventListener("change", () => { filter.status = stSel.value; redrawTable(); });

  // ---- derived state
  let mapItems = new Map();
  let stepIds = [];
  const index = () => {
    mapItems = new Map();
    stepIds = Object.keys(run.steps || {});
    for (const id of stepIds) {
      const base = baseStep(id);
      if (base !== null) (mapItems.get(base) || mapItems.set(base, []).get(base)).push(id);
    }
  };
  const stored = (id) => overlay.get(id) || run.steps?.[id]?.status || "pending";
  const countsOf = (items) => {
    const counts = {};
    for (const item of items) { const s1 = stored(item); counts[s1] = (counts[s1] || 0) + 1; }
    return counts;
  };
  // a map step is stored `waiting` while its items run: it shows what its items do
  const statusOf = (id) => {
    const status = stored(id);
    const items = status === "waiting" || status === "pending" ? mapItems.get(id) : null;
    return items && items.length ? aggregate(countsOf(items)) : status;
  };
  const graphState = (id) => {
    const st = run.steps?.[id];
    const items = mapItems.get(id);
    if (items && items.length) {
      const counts = countsOf(items);
      const done = items.reduce((n, item) => n + (FINAL_STEP.has(stored(item)) ? 1 : 0), 0);
      return { status: statusOf(id), done, total: items.length, counts, cached: st?.cached };
    }
    return { status: statusOf(id), cached: st?.cached };
  };
  function tableNote() {
    tableInfo.textContent = filter.members ? `${fmtCount(filter.members.size)} steps of one layer · ` : "";
    if (filter.members) tableInfo.append(h("a", { href: "#", onclick: (e) => { e.preventDefault(); filter.members = null; tableNote(); redrawTable(); } }, "show all"));
  }
  function redrawTable() {
    const text = filter.text.toLowerCase();
    const rows = stepIds.filter((id) => (!filter.members || filter.members.has(id) || filter.members.has(baseStep(id)))
      && (!text || id.toLowerCase().includes(text)) && (!filter.status || statusOf(id) === filter.status));
    table.setItems(rows);
  }

  // ---- header
  function drawHeader() {
    title.textContent = "";
    title.append(h("a", { href: `#/workflows/${encodeURIComponent(run.workflow)}?version=${run.version ?? ""}`, style: "color:inherit" }, run.workflow),
      h("span", { class: "muted", style: "font-weight:500" }, run.version != null ? ` v${run.version}` : ""));
    statusEl.textContent = "";
    statusEl.append(pill(run.status));
    statusEl.dataset.status = run.status;
    statusEl.setAttribute("data-testid", "run-status");
    liveEl.hidden = FINAL_RUN.has(run.status) || closed;
    const counts = {};
    for (const id of stepIds) { const st = statusOf(id); counts[st] = (counts[st] || 0) + 1; }
    facts.textContent = "";
    const fact = (k, v) => facts.append(h("div", {}, h("dt", {}, k), h("dd", {}, v)));
    fact("Run", h("span", { class: "mono" }, run.run_id));
    fact("Started", fmtTime(run.created_at ?? run.started_at));
    fact("Duration", runDuration(run));
    if (run.llm_tokens) fact("Tokens", h("span", { "data-testid": "run-tokens", title: tokensText(run.usage) || "" }, fmtCount(run.llm_tokens)));
    const budget = run.llm_budget;
    if (budget) fact("Token budget", h("span", { "data-testid": "run-token-budget" }, `${fmtCount(budget.used)} / ${fmtCount(budget.max_llm_tokens)} used${budget.used >= budget.max_llm_tokens ? " (spent)" : ""}`));
    fact("Steps", `${fmtCount(counts.completed || 0)} / ${fmtCount(stepIds.length)} completed${counts.failed ? ` · ${fmtCount(counts.failed)} failed` : ""}${counts.upstream_failed ? ` · ${fmtCount(counts.upstream_failed)} upstream failed` : ""}`);
    if (run.retry_of) fact("Retry of", h("a", { class: "mono", href: `#/runs/${encodeURIComponent(run.retry_of)}` }, run.retry_of));
    if (run.parent_run_id) fact("Parent run", h("a", { class: "mono", href: `#/runs/${encodeURIComponent(run.parent_run_id)}` }, run.parent_run_id));
    drawRunError();
    drawActions();
    drawBanner();
  }
  // a failed run names the step that failed first and that step's error
  function drawRunError() {
    const culprit = run.status === "failed" ? firstFailed() : null;
    runErr.hidden = !run.error && !culprit;
    runErr.textContent = "";
    const said = run.error ? errorText(run.error) : "";
    // the run's own error when it says more than the step's (a timeout, a cancel)
    if (said && !(culprit && said.includes(culprit))) runErr.append(h("div", {}, said));
    if (!culprit) return;
    runErr.append(h("div", { class: "culprit", "data-testid": "failed-step" }, "Step ",
      h("a", { href: "#", class: "mono", "data-step": culprit, onclick: (e) => { e.preventDefault(); select(culprit); } }, culprit), " failed:"),
    h("div", { "data-testid": "failed-error" }, clipLines(errorText(run.steps[culprit].error), 8)));
  }
  function firstFailed() {
    let best = null, at = Infinity;
    for (const id of stepIds) {
      const st = run.steps[id];
      if (st?.status !== "failed" || !st.error) continue;
      const t = parseTime(st.finished_at) ?? Infinity;
      if (best === null || t < at) { best = id; at = t; }
    }
    return best;
  }
  let actionsKey = "";
  function drawActions() {
    const final = FINAL_RUN.has(run.status);
    if (actionsKey === String(final)) return;
    actionsKey = String(final);
    actions.textContent = "";
    if (!final) {
      const form = eventForm("");
      form.hidden = true;
      actions.append(form, h("button", { class: "btn ghost", "data-action": "send-event", onclick: (e) => {
        form.hidden = !form.hidden; e.target.textContent = form.hidden ? "Send event…" : "Close";
      } }, "Send event…"));
      actions.append(h("button", { class: "btn danger", "data-action": "cancel", onclick: async (e) => {
        if (!confirm(`Cancel run ${run.run_id}?`)) return;
        e.target.disabled = true;
        try { await post(`/api/runs/${encodeURIComponent(run.run_id)}/cancel`); toast("Cancelling…"); refetch(); }
        catch (err) { toast(err.message, true); e.target.disabled = false; }
      } }, "Cancel run"));
    } else {
      // a select for small workflows; a text field (step id) for big ones
      const from = defSteps.size <= 200
        ? h("select", { "aria-label": "retry from" }, h("option", { value: "" }, "from the failed steps"),
          [...defSteps.keys()].map((id) => h("option", { value: id }, `from ${id}`)))
        : h("input", { "aria-label": "retry from", placeholder: "from step (default: failed steps)" });
      const input = h("textarea", { "aria-label": "retry input", placeholder: "Same input (or a new one as JSON)", style: "min-height:60px;width:320px" });
      const form = h("div", { class: "row", hidden: true }, from, input,
        h("button", { class: "btn", "data-action": "retry-go", onclick: async () => {
          try {
            const body = {};
            if (from.value) body.from = from.value;
            if (input.value.trim()) body.input = parseJSONInput(input.value, "The retry input");
            const res = await post(`/api/runs/${encodeURIComponent(run.run_id)}/retry`, body);
            toast(`Retrying as ${res.run_id}`);
            go(`#/runs/${encodeURIComponent(res.run_id)}`);
          } catch (err) { toast(err.message, true); }
        } }, "Start retry"));
      actions.append(form, h("button", { class: "btn ghost", "data-action": "retry", onclick: (e) => {
        form.hidden = !form.hidden; e.target.textContent = form.hidden ? "Retry…" : "Close";
      } }, "Retry…"));
    }
  }
  let bannerKey = "";
  function drawBanner() {
    // a decision recorded that nobody could apply: say so instead of asking again
    const stuck = run.continuation || null;
    const waiting = stepIds.filter((id) => statusOf(id) === "waiting" && isApproval(id) && id !== stuck?.step);
    const key = JSON.stringify(waiting.slice(0, 5).map((id) => [id, run.steps[id]?.waiting ?? null]).concat(waiting.length, stuck));
    if (key === bannerKey) return;
    bannerKey = key;
    banner.hidden = !waiting.length && !stuck;
    banner.textContent = "";
    if (stuck) banner.append(stuckNote(stuck));
    if (!waiting.length) return;
    banner.append(h("strong", {}, waiting.length === 1 ? "Waiting for approval" : `${waiting.length} steps waiting for approval`));
    for (const id of waiting.slice(0, 5)) {
      banner.append(h("div", { class: "ask", "data-step": id },
        h("div", { class: "row" }, h("span", { class: "mono" }, id), h("span", { class: "spacer" }), approveButtons(id, null)),
        asked(id)));
    }
    if (waiting.length > 5) banner.append(h("span", {}, `and ${waiting.length - 5} more (filter the table by "waiting")`));
  }
  function stuckNote(stuck) {
    return h("div", { class: "errbox", "data-testid": "continuation" },
      h("div", {}, "Decision on ", h("span", { class: "mono" }, stuck.step || "?"),
        " recorded, could not continue: ", String(stuck.error || "")),
      h("div", {}, "Continue it with: ", h("code", {}, String(stuck.command || ""))));
  }
  // what the step asks: its rendered prompt and the content under review (the
  // definition's author wrote them: text nodes only, never HTML)
  function asked(id) {
    const w = run.steps[id]?.waiting;
    if (!w) return null;
    const show = w.show === null || w.show === undefined ? null
      : typeof w.show === "string" ? h("pre", { class: "json show", "data-testid": "approval-show" }, w.show)
        : h("div", { class: "show", "data-testid": "approval-show" }, jsonView(w.show));
    return [w.prompt ? h("p", { class: "prompt", "data-testid": "approval-prompt" }, w.prompt) : null, show];
  }
  const isApproval = (id) => {
    const w = run.steps[id]?.waiting;
    if (w) return w.kind === "approval";
    if (mapItems.has(id)) return false;   // a map step waits for its items
    const def = defSteps.get(id) || defSteps.get(baseStep(id) || "");
    return !def || def.type === "approval" || def.type === "python";
  };
  // the steps whose attempts are waits as a whole (the timeline folds long ones)
  const waitsWhole = (id) => (defSteps.get(id) || defSteps.get(baseStep(id) || ""))?.type === "approval";
  function approveButtons(id, dataBox) {
    const act = async (approved, btn) => {
      let data = null;
      try { if (dataBox && dataBox.value.trim()) data = parseJSONInput(dataBox.value, "The approval data"); }
      catch (err) { toast(err.message, true); return; }
      btn.disabled = true;
      try {
        await post(`/api/runs/${encodeURIComponent(run.run_id)}/steps/${encodeURIComponent(id)}/approve`, { approved, data });
        toast(`${id} ${approved ? "approved" : "rejected"}`);
        overlay.set(id, "running");
        refetch();
      } catch (err) { toast(err.message, true); btn.disabled = false; }
    };
    return h("span", { class: "row" },
      h("button", { class: "btn ok small", "data-action": "approve", "data-step": id, onclick: (e) => act(true, e.target) }, "Approve"),
      h("button", { class: "btn danger small", "data-action": "reject", "data-step": id, onclick: (e) => act(false, e.target) }, "Reject"));
  }

  // an event for the run's waits on a name (ctx.wait_for_event, event steps)
  function eventForm(name) {
    const nameBox = h("input", { "aria-label": "event name", placeholder: "event name", value: name });
    const dataBox = h("textarea", { "aria-label": "event data", placeholder: "Optional data (JSON)", style: "min-height:40px;width:260px" });
    return h("div", { class: "row", "data-testid": "event-form" }, nameBox, dataBox,
      h("button", { class: "btn", "data-action": "send-event-go", onclick: async (e) => {
        const sent = nameBox.value.trim();
        let data = null;
        try {
          if (!sent) throw new Error("An event needs a name");
          if (dataBox.value.trim()) data = parseJSONInput(dataBox.value, "The event data");
        } catch (err) { toast(err.message, true); return; }
        e.target.disabled = true;
        try {
          await post(`/api/runs/${encodeURIComponent(run.run_id)}/signals/${encodeURIComponent(sent)}`, { data });
          toast(`event ${sent} sent`);
          refetch();
        } catch (err) { toast(err.message, true); }
        e.target.disabled = false;
      } }, "Send"));
  }
  // why a step waits for something other than a person: an event, a time
  function waitReason(w) {
    const until = w.until ? ` until ${fmtTime(w.until)}` : "";
    if (w.kind === "event") return `for event "${w.event}"${w.until ? ` (times out at ${fmtTime(w.until)})` : ""}`;
    if (w.kind === "sleep") return `sleeping${until}`;
    if (w.kind === "child") return "for its child run";
    return "";
  }

  // ---- the selected step
  let sideKey = "";
  function select(id) {
    selected = id;
    graph.select(graph.rep.get(id) || id);
    table.redraw();
    sideKey = "";
    drawSide();
    // the address names the step (shareable) without a navigation
    history.replaceState(null, "", `#/runs/${encodeURIComponent(run.run_id)}?step=${encodeURIComponent(id)}`);
  }
  function drawSide() {
    const st = selected ? run.steps?.[selected] : null;
    const key = JSON.stringify([selected, st, statusOf(selected), emits.get(selected)?.length, logs.get(selected)?.length]);
    if (key === sideKey) return;
    sideKey = key;
    side.textContent = "";
    if (!selected) {
      side.append(h("h2", {}, "Run"), h("h3", {}, "Input"), jsonView(run.input ?? null),
        h("h3", {}, "Output"), run.output === undefined || run.output === null ? h("div", { class: "muted" }, FINAL_RUN.has(run.status) ? "No output." : "Not finished yet.") : jsonView(run.output),
        h("div", { class: "note" }, "Click a step in the graph, the timeline or the table to see its attempts, input and output."));
      return;
    }
    const def = defSteps.get(selected) || defSteps.get(baseStep(selected) || "");
    const status = statusOf(selected);
    side.append(h("h2", {}, h("span", { class: "mono" }, selected), pill(status),
      h("span", { class: "spacer" }), h("a", { href: "#", class: "muted", onclick: (e) => { e.preventDefault(); selected = null; graph.select(null); table.redraw(); sideKey = ""; drawSide(); } }, "close")));
    const kv = h("dl", { class: "kv" });
    const row = (k, v) => { if (v !== undefined && v !== null && v !== "") kv.append(h("dt", {}, k), h("dd", {}, v)); };
    row("Type", def?.type);
    row("Attempts", st?.attempts);
    row("Started", st?.started_at ? fmtTime(st.started_at) : null);
    row("Finished", st?.finished_at ? fmtTime(st.finished_at) : null);
    const dur = durationOf(st || {});
    row("Duration", dur === null ? null : fmtDuration(dur));
    row("Skipped", st?.skip_reason);
    row("Fallback", st?.fallback_used ? "the fallback produced the output" : null);
    row("Cached", st?.cached ? "output reused from the cache" : null);
    row("Model", st?.llm?.model ? (st.output?.model && st.output.model !== st.llm.model ? `${st.llm.model} (answered by ${st.output.model})` : st.llm.model) : null);
    const tokens = tokensText(st?.usage);
    row("Tokens", tokens && (st?.llm ? tokens : `${tokens} with its child runs`));
    const runLink = (id) => h("a", { class: "mono", href: `#/runs/${encodeURIComponent(id)}`, "data-child-run": id }, id);
    const children = Array.isArray(st?.child_run_ids) ? st.child_run_ids : [];
    if (children.length > 1) {
      // a loop: every iteration's run (the last 20)
      row(`Child runs (${children.length})`, h("div", {}, children.slice(-20).map((id, i) =>
        h("div", {}, h("span", { class: "muted" }, `#${children.length - Math.min(20, children.length) + i + 1} `), runLink(id)))));
    } else if (st?.child_run_id) row("Child run", runLink(st.child_run_id));
    const items = mapItems.get(selected);
    if (items) row("Items", h("a", { href: "#", onclick: (e) => { e.preventDefault(); search.value = `${selected}[`; filter.text = search.value; redrawTable(); } }, `${fmtCount(items.length)} items (show in table)`));
    side.append(kv);
    if (status === "waiting" && isApproval(selected) && run.continuation?.step === selected) {
      side.append(h("h3", {}, "Approval"), stuckNote(run.continuation));
    } else if (status === "waiting" && isApproval(selected)) {
      const dataBox = h("textarea", { "aria-label": "approval data", placeholder: "Optional data for the step (JSON)", style: "min-height:56px" });
      side.append(h("h3", {}, "Approval"), h("div", { class: "ask", "data-testid": "approval-panel" }, asked(selected)), dataBox,
        h("div", { style: "margin-top:8px" }, approveButtons(selected, dataBox)));
    }
    const w = st?.waiting;
    if (status === "waiting" && w && w.kind !== "approval") {
      side.append(h("h3", {}, "Waiting"), h("div", { "data-testid": "wait-reason" }, waitReason(w)));
      if (w.kind === "event") side.append(eventForm(w.event || ""));
    }
    if (st?.error) side.append(h("h3", {}, "Error"), h("div", { class: "errbox" }, typeof st.error === "string" ? st.error : JSON.stringify(st.error, null, 2)));
    const partial = emits.get(selected);
    if (partial && partial.length) {
      // a streamed model answer emits its text so far ({content, call}): the latest
      // text of each call is shown, growing; other partial outputs are listed
      const streamed = new Map();
      const others = [];
      for (const v of partial) {
        if (v && typeof v === "object" && typeof v.content === "string" && "call" in v) streamed.set(v.call ?? "", v);
        else others.push(v);
      }
      for (const [call, v] of streamed) {
        side.append(h("h3", {}, call ? `Streamed answer (ctx.llm ${call})` : "Streamed answer"),
          h("div", { class: "streamed", "data-testid": "streamed" }, v.cut ? `… ${v.content}` : v.content));
      }
      if (others.length) {
        side.append(h("h3", {}, `Partial outputs (${others.length})`),
          h("div", { class: "emits", "data-testid": "emits" }, others.slice(-50).map((v) => jsonView(v))));
      }
    }
    // ctx.run calls whose results are stored: a later attempt gets them back, uncalled
    const journal = Array.isArray(st?.journal) ? st.journal : [];
    if (journal.length) {
      side.append(h("h3", {}, `Journaled calls (${journal.length})`),
        h("ul", { class: "journal", "data-testid": "journal" }, journal.slice(-100).map((j) =>
          h("li", {}, h("span", { class: "mono" }, j.name), h("span", { class: "muted" }, ` attempt ${j.attempt}, ${fmtTime(j.at)}`)))));
    }
    const talk = conversation(st);
    if (talk.length) side.append(...talk);
    else side.append(h("h3", {}, "Output"), st && st.output !== undefined && st.output !== null ? jsonView(st.output) : h("div", { class: "muted" }, "None yet."));
    const rendered = st?.input ?? st?.rendered_with ?? st?.with;
    if (rendered !== undefined) side.append(h("h3", {}, "Input (rendered)"), jsonView(rendered));
    if (def?.raw?.with !== undefined) side.append(h("h3", {}, "With (template)"), jsonView(def.raw.with));
    side.append(h("h3", {}, "Run input"), jsonView(run.input ?? null));
    const attempts = (run.attempts || []).filter((a) => a.step === selected);
    if (attempts.length) {
      side.append(h("h3", {}, "Attempts"), h("table", { class: "grid", "data-testid": "attempts" },
        h("thead", {}, h("tr", {}, ["#", "Status", "Started", "Took", "Worker"].map((t) => h("th", {}, t)))),
        h("tbody", {}, attempts.map((a) => [
          h("tr", {}, h("td", {}, a.attempt), h("td", {}, pill(a.status)), h("td", {}, fmtTime(a.started_at)),
            h("td", {}, fmtDuration(durationOf(a))), h("td", { class: "mono" }, a.worker ?? "—")),
          a.error ? h("tr", {}, h("td", { colspan: 5 }, h("div", { class: "errbox" }, typeof a.error === "string" ? a.error : JSON.stringify(a.error)))) : null,
        ]))));
    }
    const lines = logs.get(selected);
    if (lines && lines.length) {
      side.append(h("h3", {}, "Logs"), h("pre", { class: "json" }, lines.slice(-200).map((l) => `${fmtTime(l.at)} ${l.level || "INFO"} ${l.message ?? ""}\n`).join("")));
    }
  }

  // ---- drawing and live updates
  // the run's stored logs (GET /api/runs/{id} lists them); note events add newer ones
  function takeLogs() {
    if (!Array.isArray(run.logs)) return;
    logs.clear();
    for (const log of run.logs) {
      if (!log || !log.step) continue;
      (logs.get(log.step) || logs.set(log.step, []).get(log.step)).push(log);
    }
  }
  function draw() {
    const t = performance.now();
    takeLogs();
    index();
    drawHeader();
    graph.update(graphState);
    gantt.update(run, waitsWhole);
    redrawTable();
    drawSide();
    stats.renderMs = performance.now() - t;
  }
  draw();
  if (selected) select(selected);
  stats.firstRenderMs = performance.now() - t0;

  let pending = null;
  let lastFetch = performance.now();
  async function refetch() {
    if (pending) return;
    const wait = Math.max(0, Math.max(400, stats.fetchMs * 3 + stats.renderMs * 2) - (performance.now() - lastFetch));
    pending = setTimeout(async () => {
      const t = performance.now();
      try {
        run = await fetchRun(runId, stats);
        stats.fetchMs = performance.now() - t;
        stats.fetches++;
        overlay.clear();
        draw();
        if (FINAL_RUN.has(run.status)) stop();
      } catch (err) { toast(err.message, true); }
      finally { lastFetch = performance.now(); pending = null; }
    }, wait);
  }
  // events come in bursts (a stream replays a run's history first): recolour once a frame
  let painting = false;
  let indexStale = false;
  function repaint() {
    if (painting) return;
    painting = true;
    requestAnimationFrame(() => {
      painting = false;
      if (indexStale) { index(); indexStale = false; redrawTable(); }
      graph.update(graphState);
      table.redraw();
    });
  }
  function onEvent(ev) {
    stats.events++;
    const kind = ev.kind;
    const data = ev.data || {};
    // a partial output a step streamed (ctx.emit): stored as a note {"emit": {"value", ...}}
    const emitted = kind === "emit" ? data : (kind === "note" ? data.emit : undefined);
    if (emitted && ev.step_id) {
      (emits.get(ev.step_id) || emits.set(ev.step_id, []).get(ev.step_id)).push("value" in emitted ? emitted.value : emitted);
      if (ev.step_id === selected) sideSoon();
      return;
    }
    if (kind === "note" && ev.step_id && data.log) {
      (logs.get(ev.step_id) || logs.set(ev.step_id, []).get(ev.step_id)).push({ ...data.log, at: data.log.at ?? ev.at });
      if (ev.step_id === selected) sideSoon();
      return;
    }
    if (kind === "step" && ev.step_id && typeof (data.status ?? data.to) === "string") {
      overlay.set(ev.step_id, data.status ?? data.to);
      if (!run.steps[ev.step_id]) { run.steps[ev.step_id] = { status: data.status ?? data.to }; indexStale = true; }
      repaint();
    }
    // a final status waits for the re-read, so the page never shows "completed" without
    // the outputs and times that go with it
    const runTo = data.status ?? data.to;
    if (kind === "run" && typeof runTo === "string" && !FINAL_RUN.has(runTo) && !FINAL_RUN.has(run.status)) {
      run.status = runTo;
      drawHeader();
    }
    refetch();
  }
  let sidePending = false;
  function sideSoon() {
    if (sidePending) return;
    sidePending = true;
    requestAnimationFrame(() => { sidePending = false; drawSide(); });
  }
  function stop() {
    closed = true;
    if (source) { source.close(); source = null; }
    liveEl.hidden = true;
  }
  if (!FINAL_RUN.has(run.status)) {
    source = new EventSource(`/api/runs/${encodeURIComponent(runId)}/events`);
    source.onmessage = (msg) => { try { onEvent(JSON.parse(msg.data)); } catch { /* not JSON: ignore */ } };
    for (const kind of ["step", "attempt", "run", "note", "emit"]) {
      source.addEventListener(kind, (msg) => { try { onEvent(JSON.parse(msg.data)); } catch { /* ignore */ } });
    }
    source.onerror = () => { if (FINAL_RUN.has(run.status)) stop(); else refetch(); };
  }
  // a safety net for streams that break: re-read every few seconds while the run is live
  const poll = setInterval(() => { if (!closed && !document.hidden && !FINAL_RUN.has(run.status)) refetch(); else if (FINAL_RUN.has(run.status)) stop(); }, 3000);
  onLeave(() => { stop(); clearInterval(poll); if (pending) clearTimeout(pending); });
}

// GET /api/runs/{id} answers a run of more than 2,000 steps in pages (steps_next is the
// cursor of the next one): read them all and join them into the one document the page
// draws: every step entry in order, every attempt and log
async function fetchRun(runId, stats) {
  const path = `/api/runs/${encodeURIComponent(runId)}`;
  const run = await get(path);
  let bytes = lastResponseBytes;
  let pages = 1;
  for (let next = run.steps_next; next; pages++) {
    const page = await get(`${path}?steps_after=${encodeURIComponent(next)}`);
    bytes += lastResponseBytes;
    Object.assign(run.steps, page.steps);
    run.attempts = (run.attempts || []).concat(page.attempts || []);
    run.logs = (run.logs || []).concat(page.logs || []);
    next = page.steps_next;
  }
  delete run.steps_next;
  stats.bytes = bytes;
  stats.pages = pages;
  return run;
}

const errorText = (err) => (typeof err === "string" ? err : JSON.stringify(err, null, 2));
function clipLines(text, n) {
  const lines = String(text).split("\n");
  const cut = lines.length > n ? `${lines.slice(0, n).join("\n")}\n… (open the step for all of it)` : String(text);
  return cut.length > 1200 ? `${cut.slice(0, 1200)}…` : cut;
}

function durationOf(st) {
  const a = parseTime(st.started_at);
  if (a === null) return null;
  const b = parseTime(st.finished_at);
  return ((b ?? Date.now()) - a) / 1000;
}
