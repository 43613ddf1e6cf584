// A model call on the run page's step panel: the messages an llm step sent (the run
// document's step entry `llm`) as a conversation, each message a block with its role,
// then the answer's content as text and its JSON pretty-printed.  Everything here was
// written by a definition's author or a model: text nodes only, never HTML.

import { h, jsonView, fmtCount } from "./util.js";

const TEXT_CAP = 20_000; // characters of one message shown before "show all"

// "1,234 (prompt 1,000 · completion 234)", or null when the entry used no tokens
export function tokensText(usage) {
  if (!usage || typeof usage !== "object") return null;
  const n = (k) => fmtCount(Number(usage[k]) || 0);
  return `${n("total_tokens")} (prompt ${n("prompt_tokens")} · completion ${n("completion_tokens")})`;
}

// the tools a message asks for, one line each: "calls name(arguments)"; a request's
// messages carry OpenAI's shape ({function: {name, arguments: "JSON text"}}), an answer
// plait's ({name, arguments}: parsed)
function callsText(calls) {
  if (!Array.isArray(calls) || calls.length === 0) return "";
  return calls.map((c) => {
    const name = c?.function?.name ?? c?.name ?? "?";
    const args = c?.function?.arguments ?? c?.arguments;
    return `calls ${name}(${typeof args === "string" ? args : JSON.stringify(args ?? {})})`;
  }).join("\n");
}

// one message: its role as a label, its content as text (a content that is not text,
// such as a list of parts, as indented JSON), then the tools it calls
function message(role, content, extra = {}, calls = null) {
  const called = callsText(calls);
  const said = typeof content === "string" ? content
    : content === null || content === undefined ? "" : JSON.stringify(content, null, 2);
  const text = said && called ? `${said}\n${called}` : said || called ||
    (content === null || content === undefined ? "" : String(content));
  const body = h("div", { class: "msg-text" });
  const show = (all) => {
    body.textContent = all || text.length <= TEXT_CAP ? text : text.slice(0, TEXT_CAP);
    if (!all && text.length > TEXT_CAP) {
      body.append("… ", h("a", { href: "#", onclick: (e) => { e.preventDefault(); show(true); } },
        `show all ${fmtCount(text.length)} characters`));
    }
  };
  show(false);
  const known = ["system", "user", "assistant", "tool", "developer"].includes(role) ? role : "other";
  return h("div", { class: `msg role-${known}`, "data-role": String(role ?? "?"), ...extra },
    h("div", { class: "msg-role" }, String(role ?? "?")), body);
}

// the step panel's sections for a model call: [elements], empty when the step made none
export function conversation(step) {
  const sent = step?.llm;
  const out = step?.output;
  const answer = out && typeof out === "object" && (typeof out.content === "string" ||
    (Array.isArray(out.tool_calls) && out.tool_calls.length > 0)) ? out : null;
  if (!sent && !answer) return [];
  const parts = [];
  if (sent) {
    const messages = Array.isArray(sent.messages) ? sent.messages : [];
    parts.push(h("h3", {}, `Conversation (attempt ${sent.attempt ?? "?"})`),
      h("div", { class: "convo", "data-testid": "conversation" },
        messages.map((m) => message(m?.role, m?.content, {}, m?.tool_calls)),
        answer ? message("assistant", answer.content, { "data-testid": "answer" },
          answer.tool_calls) : null));
    if (sent.cut) parts.push(h("div", { class: "note" }, `Cut when stored: ${sent.cut}`));
  } else if (answer) {
    parts.push(h("h3", {}, "Answer"),
      h("div", { class: "convo" }, message("assistant", answer.content, { "data-testid": "answer" },
        answer.tool_calls)));
  }
  if (answer && answer.json !== null && answer.json !== undefined) {
    parts.push(h("h3", {}, "Answer as JSON"), h("div", { "data-testid": "answer-json" }, jsonView(answer.json)));
  }
  if (answer) {
    parts.push(h("details", { class: "raw" }, h("summary", {}, "Raw output"), jsonView(out)));
  }
  return parts;
}
