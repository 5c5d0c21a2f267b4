// a2x-local registry browser: the tree (expand/collapse, sizes, paged), a search box (method, type filter, paged
// results), a plan view for tasks of several steps, a service's details, and deep links (#/search?q=...,
// #/plan?q=..., #/service/ID). Plain JavaScript against the server's own /v1 API; no CDN, no build step. Registry
// text is data: it is only ever put on the page as text (textContent), never as HTML. Long searches and plans
// stream their progress (NDJSON), shown as they come.
"use strict";

const $ = (id) => document.getElementById(id);
let token = sessionStorage.getItem("a2x-token") || "";
let waitingForToken = null;
let limits = { max_k: 100, default_k: 10, max_query_chars: 4000, page_size: 20 };
let rootId = "root";
let current = null;        // the search on screen: {body, cursor} for "more results"
let defaultMethod = "";     // the server's default search method (a link without `method` runs it)
let generation = 0;        // bumped by every new search, plan or error: late answers of older ones are dropped

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

function headers(extra) {
  const all = Object.assign({ Accept: "application/json" }, extra || {});
  if (token) all.Authorization = "Bearer " + token;
  return all;
}

function failure(body, status) {
  const error = new Error((body && body.message) || "the server answered " + status);
  error.hint = body && body.hint;
  error.code = body && body.error;
  return error;
}

async function api(path, options = {}) {
  const response = await fetch(path, Object.assign({}, options, { headers: headers(options.headers) }));
  if (response.status === 401) {
    await askForToken();
    return api(path, options);
  }
  const body = await response.json().catch(() => ({ error: "BadAnswer", message: "the server sent no JSON" }));
  if (!response.ok) throw failure(body, response.status);
  return body;
}

// POST with progress: the server streams {"progress", "message"} lines, then {"result"} or {"error"}.
async function streamed(path, body, onProgress) {
  const response = await fetch(path, {
    method: "POST", body: JSON.stringify(body),
    headers: headers({ "Content-Type": "application/json", Accept: "application/x-ndjson" }),
  });
  if (response.status === 401) {
    await askForToken();
    return streamed(path, body, onProgress);
  }
  if (!response.ok) {
    throw failure(await response.json().catch(() => null), response.status);
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    buffered += decoder.decode(value || new Uint8Array(), { stream: !done });
    let newline;
    while ((newline = buffered.indexOf("\n")) >= 0) {
      const line = buffered.slice(0, newline).trim();
      buffered = buffered.slice(newline + 1);
      if (!line) continue;
      const item = JSON.parse(line);
      if (item.result) return item.result;
      if (item.error) throw failure(item.error, item.status);
      if (item.message) onProgress(item.message);
    }
    if (done) throw failure({ message: "the answer ended early" }, 0);
  }
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

// Everything the previous search, plan or service left on screen goes; answers still on their way are dropped.
function clearWork() {
  generation += 1;
  current = null;
  $("results").replaceChildren();
  $("more-results").hidden = true;
  for (const id of ["plan", "details"]) {
    $(id).hidden = true;
    $(id).replaceChildren();
    delete $(id).dataset.service;
  }
  $("message").textContent = "";
  return generation;
}

function failed(error) {
  clearWork();
  showError($("message"), error);
}

// --- the tree ------------------------------------------------------------------------------------------------------

function serviceLink(service, className) {
  const link = el("a", className || "service-leaf", service.name);
  link.title = service.summary || "";
  link.dataset.service = service.id;
  link.href = "#/service/" + idPath(service.id);
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
      fillNode(body, await api("/v1/tree/nodes/" + idPath(item.dataset.node)), item.dataset.node);
      item.dataset.loaded = "1";
    } catch (error) {
      showError(body, error);
    }
  }
  body.hidden = false;
  item.setAttribute("aria-expanded", "true");
  toggle.textContent = "−";
}

// One page of a category: its sub-categories, then its services; "more" fetches the next page of both.
function fillNode(list, node, nodeId, append) {
  if (!append) list.replaceChildren();
  for (const child of node.children) list.append(nodeItem(child));
  for (const service of node.services) {
    const item = el("li");
    item.append(serviceLink(service));
    list.append(item);
  }
  if (node.next_cursor) {
    const more = el("li");
    const button = el("button", "link more-node", "more…");
    button.type = "button";
    button.onclick = async () => {
      more.remove();
      try {
        const next = await api("/v1/tree/nodes/" + idPath(nodeId) + "?cursor=" + encodeURIComponent(node.next_cursor));
        fillNode(list, next, nodeId, true);
      } catch (error) {
        showError(list, error);
      }
    };
    more.append(button);
    list.append(more);
  }
}

async function loadTree() {
  try {
    const tree = await api("/v1/tree");
    rootId = tree.root.id;
    $("tree-info").textContent = "tree " + tree.build_id + ", " + tree.stats.services + " services, depth " +
      tree.stats.depth + (tree.stale ? " (stale)" : "");
    fillNode($("tree"), tree.root, tree.root.id);
  } catch (error) {
    showError($("tree"), error);
  }
}

// --- search ---------------------------------------------------------------------------------------------------------

// The controls as a request; route() has checked k (a link's, or the box's through linkTo) before a request is sent.
function searchBody() {
  const k = Number($("k").value) || limits.default_k;
  const body = { query: $("query").value.trim(), method: $("method").value || null, k };
  if ($("type").value) body.type = $("type").value;
  return body;
}

function hitItem(hit) {
  const item = el("li");
  item.dataset.service = hit.service_id;
  const meta = hit.type + (hit.score !== undefined && hit.score !== null ? " · " + hit.score.toFixed(4) : "") +
    (hit.category ? " · " + hit.category : "");
  item.append(el("span", "hit-name", hit.name), el("span", "hit-meta", meta), el("span", "hit-summary", hit.summary));
  item.onclick = () => { location.hash = "#/service/" + idPath(hit.service_id); };
  return item;
}

async function runSearch(body) {
  const mine = clearWork();
  $("query").value = body.query;
  $("message").textContent = "searching…";
  try {
    const answer = await streamed("/v1/search", body, (message) => {
      if (mine === generation) $("message").textContent = message;
    });
    if (mine !== generation) return;
    current = { body, cursor: answer.next_cursor, shown: answer.hits.length };
    showHits(answer);
  } catch (error) {
    if (mine === generation) failed(error);
  }
}

function showHits(answer) {
  const shown = current ? current.shown : answer.hits.length;
  $("message").textContent = shown + (shown === 1 ? " result" : " results") + " with " + answer.method + (answer.ranked ? "" : " (chosen by the model)") +
    (answer.next_cursor ? "; more below" : "");
  for (const hit of answer.hits) $("results").append(hitItem(hit));
  $("more-results").hidden = !answer.next_cursor;
}

async function moreResults() {
  if (!current || !current.cursor) return;
  const mine = generation;
  try {
    const answer = await api("/v1/search", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify(Object.assign({}, current.body, { cursor: current.cursor })),
    });
    if (mine !== generation) return;
    current.cursor = answer.next_cursor;
    current.shown += answer.hits.length;
    showHits(answer);
  } catch (error) {
    if (mine === generation) failed(error);
  }
}

// --- plans ----------------------------------------------------------------------------------------------------------

function candidateLink(candidate) {
  return serviceLink({ id: candidate.id, name: candidate.name, summary: "" }, "candidate");
}

function confidenceBadges(step, choice) {
  const badges = [];
  const confidence = choice.confidence ?? step.confidence;
  if (confidence !== undefined && confidence !== null) {
    badges.push(el("span", "badge", "confidence " + Number(confidence).toFixed(2)));
  }
  if (choice.named) badges.push(el("span", "badge named", "named in the request"));
  if (choice.low_confidence || step.low_confidence) badges.push(el("span", "badge low", "low confidence"));
  const runnerUp = choice.runner_up ?? step.runner_up;
  if (runnerUp) badges.push(el("span", "badge", "runner-up " + (runnerUp.name || runnerUp.id || runnerUp)));
  return badges;
}

function showPlan(plan) {
  const view = $("plan");
  const order = (plan.groups || []).map((group) => group.join(" + ")).join(" → ");
  const steps = el("ol", "steps");
  for (const step of plan.steps) {
    const item = el("li", "step");
    item.dataset.step = step.id;
    const head = el("div", "step-head");
    head.append(el("span", "step-id", step.id), document.createTextNode(step.task));
    if (step.depends_on && step.depends_on.length) head.append(el("span", "hit-meta", "after " + step.depends_on.join(", ")));
    item.append(head);
    const choice = el("div", "choice");
    if (step.choice) {
      choice.append(document.createTextNode("→ "), candidateLink(step.choice),
                    el("span", "hit-meta", "score " + Number(step.choice.score).toFixed(3)),
                    ...confidenceBadges(step, step.choice));
    } else {
      choice.append(el("span", "error", "no service: " + (step.error || "nothing found")));
    }
    item.append(choice);
    if (step.alternatives && step.alternatives.length) {
      const alternatives = el("div", "alternatives", "alternatives: ");
      step.alternatives.forEach((candidate, index) => {
        if (index) alternatives.append(document.createTextNode(", "));
        alternatives.append(candidateLink(candidate));
      });
      item.append(alternatives);
    }
    steps.append(item);
  }
  view.replaceChildren(
    el("h3", null, "Plan: " + plan.request),
    el("p", "muted", plan.steps.length + " steps · split by " + plan.decomposer + " · searched with " + plan.method +
       (order ? " · order: " + order : "")),
    steps,
    ...(plan.notes || []).map((note) => el("p", "muted", "note: " + note)),
  );
  view.hidden = false;
}

// A plan searches its steps with the chosen method and k (candidates per step), as a search would.
function planBody() {
  const { query, method, k } = searchBody();
  return { request: query, method, k };
}

async function runPlan(body) {
  const mine = clearWork();
  $("query").value = body.request;
  $("message").textContent = "planning…";
  try {
    const plan = await streamed("/v1/compose", body, (message) => {
      if (mine === generation) $("message").textContent = message;
    });
    if (mine !== generation) return;
    $("message").textContent = "";
    showPlan(plan);
  } catch (error) {
    if (mine === generation) failed(error);
  }
}

// --- a service -----------------------------------------------------------------------------------------------------

function placement(path) {
  if (path.length === 1 && path[0].id === rootId) return "the root (" + path[0].name + ")";
  return path.map((category) => category.name).join(" › ");
}

async function showService(id) {
  const details = $("details");
  const mine = generation;
  details.hidden = false;
  details.replaceChildren(el("p", "muted", "loading…"));
  try {
    const service = await api("/v1/services/" + idPath(id));
    if (mine !== generation) return;
    const where = service.categories.map(placement).join("; ");
    details.replaceChildren(
      el("h3", null, service.name),
      el("p", "muted", service.type + " · " + service.id + (service.source ? " · " + service.source : "")),
      el("p", null, service.description),
      el("p", "muted", where ? "Filed under: " + where : "Not in the active tree."),
      el("pre", null, JSON.stringify(service.metadata, null, 2)),
    );
    details.dataset.service = service.id;
    details.scrollIntoView({ block: "nearest" });
  } catch (error) {
    if (mine === generation) failed(error);
  }
}

// --- deep links: #/search?q=..., #/plan?q=..., #/service/ID ---------------------------------------------------------

// The pages a link opens and the parameters each takes: anything else in a link is an error on the page, never
// dropped (a link that silently ran something other than it says would mislead whoever shared it). A Map, not an
// object: a link's page is looked up as typed, and an object would find its prototype's members there (#constructor,
// #__proto__, #toString), which are no page.
const PAGES = new Map([["/search", ["q", "method", "type", "k"]], ["/plan", ["q", "method", "k"]]]);
const PAGE_LIST = "#/search?q=…, #/plan?q=… and #/service/ID";

// A part of a link as an error shows it: cut, since a link may hold anything.
function quoted(text) {
  return "'" + (text.length > 80 ? text.slice(0, 80) + "…" : text) + "'";
}

function listed(names) {
  return names.length > 1 ? names.slice(0, -1).join(", ") + " and " + names[names.length - 1] : names.join("");
}

// Why a link's service id cannot be fetched, or null: '.' and '..' are path steps the browser resolves away (even
// encoded as %2E%2E), so the page would fetch /v1/ instead; no registry id is either.
function serviceIdProblem(id) {
  if (!id) return "this link names no service: #/service/ID";
  if (id === "." || id === "..") {
    return "'" + id + "' is not a service id: no id is '.' or '..' (a browser resolves such a path step away)";
  }
  return null;
}

// Why a link's parameters cannot run as they are, or null: an unknown or repeated parameter, a bad k.
function paramsProblem(path, params) {
  const allowed = PAGES.get(path);
  for (const key of new Set(params.keys())) {
    if (!allowed.includes(key)) {
      return "unknown parameter " + quoted(key) + " in this #" + path + " link; it takes " + listed(allowed);
    }
    if (params.getAll(key).length > 1) return quoted(key) + " is given twice in this link; give it once";
  }
  const k = params.get("k");
  if (k !== null && !(/^[0-9]{1,9}$/.test(k) && Number(k) >= 1 && Number(k) <= limits.max_k)) {
    return "k in this link must be a whole number from 1 to " + limits.max_k + " (this server's bounds); it is " +
      quoted(k);
  }
  return null;
}

// A link says everything it runs: what it leaves out (method, k, type) is the default, never the previous link's.
function route() {
  const hash = location.hash.replace(/^#/, "");
  if (hash.startsWith("/service/")) {
    const encoded = hash.slice("/service/".length);
    let id;
    try {
      id = decodeURIComponent(encoded);
    } catch (error) {   // a URIError: a cut or foreign %-sequence (say %E0%A4%A) names no service
      failed(new Error("this link's service id is not valid percent-encoding: " + encoded));
      return;
    }
    const problem = serviceIdProblem(id);
    if (problem) failed(new Error(problem));
    else showService(id);
    return;
  }
  const mark = hash.indexOf("?");
  const path = mark < 0 ? hash : hash.slice(0, mark);
  if (path === "/" || path === "") {
    clearWork();     // no link: nothing to run, and nothing of the previous one stays
    return;
  }
  if (!PAGES.has(path)) {
    failed(new Error("unknown page " + quoted("#" + path) + " in this link; this page opens " + PAGE_LIST));
    return;
  }
  const params = new URLSearchParams(mark < 0 ? "" : hash.slice(mark + 1));
  const problem = paramsProblem(path, params);
  if (problem) {
    failed(new Error(problem));
    return;
  }
  const text = (params.get("q") || "").trim();
  if (!text) {
    clearWork();     // a link without a query: nothing to run, and nothing of the previous one stays
    return;
  }
  const method = params.get("method");
  const offered = Array.from($("method").options, (option) => option.value);
  if (method && !offered.includes(method)) {
    failed(new Error("unknown search method '" + method + "' in this link; choose one of: " +
      (offered.length ? offered.join(", ") : "none (this server offers no search method now)")));
    return;
  }
  // A search link's type must be one the registry holds: a select given another value shows "all types", so the
  // link would silently search everything.
  const type = path === "/search" ? params.get("type") || "" : "";
  const types = Array.from($("type").options, (option) => option.value).filter(Boolean);
  if (type && !types.includes(type)) {
    failed(new Error("unknown service type '" + type + "' in this link; choose one of: " +
      (types.length ? types.join(", ") : "none (this registry holds no services now)")));
    return;
  }
  $("query").value = text;
  $("method").value = method || defaultMethod;
  $("k").value = params.get("k") || limits.default_k;
  if (path === "/plan") {
    runPlan(planBody());
    return;
  }
  $("type").value = type;
  runSearch(searchBody());
}

// The controls as a link: k as typed (empty: the default), so a k out of bounds is an error the link shows, not a
// number changed without a word.
function linkTo(kind) {
  const body = searchBody();
  if (!body.query) return;
  const params = new URLSearchParams({ q: body.query });
  if (body.method) params.set("method", body.method);
  if (kind === "search" && body.type) params.set("type", body.type);
  params.set("k", $("k").value.trim() || String(limits.default_k));
  const hash = "#/" + kind + "?" + params.toString();
  if (location.hash === hash) route();        // the same link again: run it again
  else location.hash = hash;
}

// --- start ----------------------------------------------------------------------------------------------------------

async function loadMethods() {
  const methods = await api("/v1/methods");
  const select = $("method");
  select.replaceChildren();
  for (const method of methods.filter((m) => m.available && m.use === "search")) {
    const option = el("option", null, method.name);
    option.value = method.name;
    option.title = method.summary + " (" + method.cost_note + ")";
    option.selected = method.default;
    if (method.default) defaultMethod = method.name;
    select.append(option);
  }
  if (!defaultMethod && select.options.length) defaultMethod = select.options[0].value;
}

function applyHealth(health) {
  limits = Object.assign(limits, health.limits || {});
  $("k").max = limits.max_k;
  $("k").value = limits.default_k;
  $("query").maxLength = limits.max_query_chars;
  const types = $("type");
  for (const [type, count] of Object.entries(health.types || {})) {
    const option = el("option", null, type + " (" + count + ")");
    option.value = type;
    types.append(option);
  }
  const loading = Object.values(health.loading || {}).map((task) => task.what);
  $("status").textContent = (health.services ?? "…") + " services · tree " + (health.tree ?? "none") +
    (health.engine ? " · model " + (health.engine.model || health.engine.engine) : " · no model") +
    (loading.length ? " · loading: " + loading.join(", ") : "");
}

async function start() {
  $("search-form").addEventListener("submit", (event) => { event.preventDefault(); linkTo("search"); });
  $("plan-button").addEventListener("click", () => linkTo("plan"));
  $("more-results").addEventListener("click", moreResults);
  window.addEventListener("hashchange", route);
  try {
    applyHealth(await api("/healthz"));
    await loadMethods();
  } catch (error) {
    showError($("status"), error);
  }
  await loadTree();
  document.body.dataset.ready = "1";
  route();
}

start();
