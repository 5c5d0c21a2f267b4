// a2x-local registry browser: the tree (expand/collapse, sizes), a search box with method choice, a service's
// details. Plain JavaScript against the server's own /v1 API; no CDN, no build step. Registry text is data: it is
// only ever put on the page as text (textContent), never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
let token = sessionStorage.getItem("a2x-token") || "";
let waitingForToken = null;

// Bidi controls (a right-to-left override makes "tool" + U+202E + "gnp.exe" read "toolexe.png") are shown as
// <U+202E>; the server's answers already do, this covers text from anywhere else.
const BIDI = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

function visible(text) {
  return String(text).replace(BIDI, (c) => "<U+" + c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0") + ">");
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = visible(text);
  return node;
}

// An id as ONE path segment: "/" and "." encoded too, so "../x" or ".." can never make the browser fetch another
// URL (encodeURIComponent leaves "." alone, and a bare ".." segment is resolved away by the URL parser).
function idPath(id) {
  return encodeURIComponent(id).replace(/\./g, "%2E");
}

async function api(path, options = {}) {
  const headers = Object.assign({ Accept: "application/json" }, options.headers || {});
  if (token) headers.Authorization = "Bearer " + token;
  const response = await fetch(path, Object.assign({}, options, { headers }));
  if (response.status === 401) {
    await askForToken();
    return api(path, options);
  }
  const body = await response.json().catch(() => ({ error: "BadAnswer", message: "the server sent no JSON" }));
  if (!response.ok) {
    const error = new Error(body.message || response.statusText);
    error.hint = body.hint;
    throw error;
  }
  return body;
}

function askForToken() {
  if (!waitingForToken) {
    waitingForToken = new Promise((resolve) => {
      const form = $("token-form");
      form.hidden = false;
      form.onsubmit = (event) => {
        event.preventDefault();
        token = $("token").value.trim();
        sessionStorage.setItem("a2x-token", token);
        form.hidden = true;
        waitingForToken = null;
        resolve();
      };
    });
  }
  return waitingForToken;
}

function showError(where, error) {
  where.replaceChildren(el("span", "error", error.message + (error.hint ? " (" + error.hint + ")" : "")));
}

// --- the tree ------------------------------------------------------------------------------------------------------

function serviceLink(service) {
  const link = el("a", "service-leaf", service.name);
  link.title = service.summary;
  link.dataset.service = service.id;
  link.href = "#";
  link.onclick = (event) => { event.preventDefault(); showService(service.id); };
  return link;
}

function nodeItem(category) {
  const item = el("li");
  item.dataset.node = category.id;
  item.setAttribute("role", "treeitem");
  const row = el("div", "node-row");
  const toggle = el("span", "toggle", category.children > 0 || category.size > 0 ? "+" : "·");
  row.append(toggle, el("span", "node-name", category.name), el("span", "size", category.size));
  row.title = category.summary;
  const body = el("ul");
  body.hidden = true;
  item.append(row, body);
  item.setAttribute("aria-expanded", "false");
  row.onclick = () => toggleNode(item, body, toggle);
  return item;
}

async function toggleNode(item, body, toggle) {
  const open = item.getAttribute("aria-expanded") === "true";
  if (open) {
    body.hidden = true;
    item.setAttribute("aria-expanded", "false");
    toggle.textContent = "+";
    return;
  }
  if (!item.dataset.loaded) {
    try {
      const node = await api("/v1/tree/nodes/" + idPath(item.dataset.node));
      fillNode(body, node);
      item.dataset.loaded = "1";
    } catch (error) {
      showError(body, error);
    }
  }
  body.hidden = false;
  item.setAttribute("aria-expanded", "true");
  toggle.textContent = "−";
}

function fillNode(list, node) {
  list.replaceChildren();
  for (const child of node.children) list.append(nodeItem(child));
  for (const service of node.services) {
    const item = el("li");
    item.append(serviceLink(service));
    list.append(item);
  }
  if (node.services_total > node.services.length) {
    list.append(el("li", "muted", "… " + (node.services_total - node.services.length) + " more services"));
  }
}

async function loadTree() {
  try {
    const tree = await api("/v1/tree");
    $("tree-info").textContent = "tree " + tree.build_id + ", " + tree.stats.services + " services, depth " +
      tree.stats.depth + (tree.stale ? " (stale)" : "");
    fillNode($("tree"), tree.root);
  } catch (error) {
    showError($("tree"), error);
  }
}

// --- search and details ---------------------------------------------------------------------------------------------

async function loadMethods() {
  const methods = await api("/v1/methods");
  const select = $("method");
  select.replaceChildren();
  for (const method of methods.filter((m) => m.available)) {
    const option = el("option", null, method.name);
    option.value = method.name;
    option.title = method.summary;
    option.selected = method.default;
    select.append(option);
  }
}

async function search(event) {
  event.preventDefault();
  const results = $("results");
  const message = $("message");
  const query = $("query").value.trim();
  if (!query) return;
  results.replaceChildren();
  message.textContent = "searching…";
  const body = { query, method: $("method").value, k: Number($("k").value) || null };
  try {
    const answer = await api("/v1/search", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    });
    const cost = answer.calls ? ", " + answer.calls + " model calls" : "";
    message.textContent = answer.hits.length + " results with " + answer.method + " in " +
      (answer.seconds * 1000).toFixed(1) + " ms" + cost;
    for (const hit of answer.hits) {
      const item = el("li");
      item.dataset.service = hit.service_id;
      item.append(el("span", "hit-name", hit.name || hit.service_id),
                  el("span", "hit-meta", hit.type + (hit.score !== null ? " · " + hit.score.toFixed(4) : "")),
                  el("span", "hit-summary", hit.summary || ""));
      item.onclick = () => showService(hit.service_id);
      results.append(item);
    }
  } catch (error) {
    showError(message, error);
  }
}

async function showService(id) {
  const details = $("details");
  details.hidden = false;
  details.replaceChildren(el("p", "muted", "loading…"));
  try {
    const service = await api("/v1/services/" + idPath(id));
    const where = service.categories.map((path) => path.map((c) => c.name).join(" › ")).join("; ");
    details.replaceChildren(
      el("h3", null, service.name),
      el("p", "muted", service.type + " · " + service.id + (service.source ? " · " + service.source : "")),
      el("p", null, service.description),
      el("p", "muted", where ? "Filed under: " + where : "Not in the active tree."),
      el("pre", null, JSON.stringify(service.metadata, null, 2)),
    );
    details.dataset.service = service.id;
  } catch (error) {
    showError(details, error);
  }
}

async function start() {
  $("search-form").addEventListener("submit", search);
  try {
    const health = await api("/healthz");
    $("status").textContent = health.services + " services · tree " + (health.tree ?? "none") +
      (health.engine ? " · model " + (health.engine.model || health.engine.engine) : " · no model");
    await loadMethods();
  } catch (error) {
    showError($("status"), error);
  }
  await loadTree();
  document.body.dataset.ready = "1";
}

start();
