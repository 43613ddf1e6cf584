// The REST API (docs/rest.md), called with the session cookie; every state-changing
// request carries the CSRF token read from the plait_csrf cookie.

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

function csrfToken() {
  for (const part of document.cookie.split(";")) {
    const [name, ...rest] = part.trim().split("=");
    if (name === "plait_csrf") return decodeURIComponent(rest.join("="));
  }
  return "";
}

let onUnauthorized = () => {};
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

export let lastResponseBytes = 0;

export async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") headers["X-CSRF-Token"] = csrfToken();
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, {
    method, headers, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await resp.text();
  lastResponseBytes = text.length;
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = text; }
  }
  if (!resp.ok) {
    const err = data && typeof data === "object" && data.error ? data.error : {};
    if (resp.status === 401 && path !== "/api/login") onUnauthorized();
    throw new ApiError(resp.status, err.code || `http_${resp.status}`,
      err.message || `${method} ${path} failed with HTTP ${resp.status}`, err.details);
  }
  return data;
}

export const get = (path) => api("GET", path);
export const post = (path, body) => api("POST", path, body ?? {});

export function qs(params) {
  const out = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") out.set(k, v);
  const text = out.toString();
  return text ? `?${text}` : "";
}
