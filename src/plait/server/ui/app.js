// plait's web UI: a hash router over four pages (runs, a run, workflows, login).

import { h, toast } from "./util.js";
import { get, post, setUnauthorizedHandler } from "./api.js";
import { runsPage } from "./runs.js";
import { runPage } from "./run.js";
import { workflowsPage } from "./workflows.js";

const app = document.getElementById("app");
const logoutBtn = document.getElementById("logout");
let leaveHooks = [];
let generation = 0;
let session = { authenticated: true, auth_required: false };

function go(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

function leave() {
  for (const fn of leaveHooks) { try { fn(); } catch { /* already gone */ } }
  leaveHooks = [];
}

async function route() {
  leave();
  const gen = ++generation;
  const hash = location.hash.replace(/^#/, "") || "/runs";
  const [path, query] = hash.split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  for (const a of document.querySelectorAll("[data-nav]")) a.classList.toggle("active", a.dataset.nav === parts[0]);
  app.textContent = "";
  if (session.auth_required && !session.authenticated) return loginPage();
  const root = h("div", {});
  app.append(root);
  const ctx = { go, onLeave: (fn) => leaveHooks.push(fn) };
  try {
    if (parts[0] === "runs" && parts[1]) await runPage(root, params, { ...ctx, runId: parts[1] });
    else if (parts[0] === "workflows") await workflowsPage(root, params, { ...ctx, name: parts[1] || null });
    else await runsPage(root, params, ctx);
  } catch (err) {
    if (gen !== generation) return;
    if (err.status === 401) return;
    root.append(h("div", { class: "card" }, h("h2", {}, err.status === 404 ? "Not found" : "Something went wrong"),
      h("div", { class: "errbox" }, err.message), h("a", { href: "#/runs" }, "Back to runs")));
  }
}

function loginPage() {
  const token = h("input", { type: "password", name: "token", autocomplete: "current-password", placeholder: "PLAIT_API_TOKEN", required: true });
  const err = h("div", { class: "errbox", hidden: true });
  const form = h("form", { "data-testid": "login", onsubmit: async (e) => {
    e.preventDefault();
    err.hidden = true;
    try {
      await post("/api/login", { token: token.value });
      session = { ...session, authenticated: true };
      logoutBtn.hidden = false;
      route();
    } catch (ex) {
      err.hidden = false;
      err.textContent = ex.status === 401 ? "That token is not valid." : ex.message;
    }
  } }, h("label", {}, "API token", token), err, h("button", { class: "btn", type: "submit" }, "Sign in"));
  app.append(h("div", { class: "card login" }, h("h1", {}, "Sign in to plait"),
    h("p", { class: "muted" }, "This server needs its API token (PLAIT_API_TOKEN)."), form));
  token.focus();
}

setUnauthorizedHandler(() => {
  if (!session.authenticated) return;
  session = { ...session, authenticated: false };
  toast("Your session ended: sign in again.", true);
  route();
});

logoutBtn.addEventListener("click", async () => {
  try { await post("/api/logout"); } catch { /* signed out anyway */ }
  session = { ...session, authenticated: false };
  logoutBtn.hidden = true;
  route();
});

async function start() {
  try { session = await get("/api/session"); } catch { /* an older server: no session route */ }
  logoutBtn.hidden = !(session.auth_required && session.authenticated);
  window.addEventListener("hashchange", route);
  route();
}
start();
