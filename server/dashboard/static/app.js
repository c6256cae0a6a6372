// The edgeaip dashboard: pages over the operator API, routed by the URL's
// hash. It authenticates with the login cookie that POST /api/login sets,
// and builds every element with textContent, never HTML from data.
"use strict";

const view = document.getElementById("view");

// Each page render gets a number; timers and event streams of an older
// page stop, and its late answers are dropped.
let pageSeq = 0;
let stops = [];

// me is the identity the login acts for (GET /api/whoami): the pages
// offer only what its role may do. The server holds it to its role and
// scope whatever the page offers.
let me = null;

async function loadMe() {
  if (!me) me = await api("GET", "/api/whoami");
  const scope = me.scope ? ` · ${[me.scope.devices, ...(me.scope.tools || [])].filter(Boolean).join(", ")}` : "";
  document.getElementById("whoami").textContent = `${me.name} (${me.role}${scope})`;
  document.getElementById("nav-dispatch").hidden = !runs();
}

// runs reports whether the identity may run things: a viewer only reads.
function runs() { return me && me.role !== "viewer"; }

// steersRollouts reports whether the identity may pause, resume and roll
// back rollouts: a deployer or an admin, of the whole fleet, since a
// rollout reaches devices that gain its labels later.
function steersRollouts() { return me && ["deployer", "admin"].includes(me.role) && !me.scope; }

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

class Unauthorized extends Error {}

async function api(method, path, body) {
  const opts = { method, headers: {}, credentials: "same-origin" };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const resp = await fetch(path, opts);
  if (resp.status === 401) throw new Unauthorized("not logged in");
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = { error: text }; }
  if (!resp.ok) throw new Error(errorText(data) || `${resp.status} ${resp.statusText}`);
  return data;
}

// errorText is an API error's message; a refusal's problems go one to a
// line.
function errorText(data) {
  if (!data) return "";
  if (data.problems) return ["Refused:", ...data.problems.map((p) => `${p.path}: ${p.problem}`)].join("\n");
  return data.error;
}

// ---- formatting

function ago(t) {
  if (!t) return "never";
  const s = Math.max(0, (Date.now() - Date.parse(t)) / 1000);
  if (s < 60) return `${Math.round(s)}s ago`;
  if (s < 3600) return `${Math.round(s / 60)}m ago`;
  if (s < 86400) return `${Math.round(s / 3600)}h ago`;
  return new Date(t).toLocaleString();
}

function duration(from, to) {
  if (!from) return "–";
  const ms = (to ? Date.parse(to) : Date.now()) - Date.parse(from);
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

function labelText(labels) {
  const kv = Object.entries(labels || {}).map(([k, v]) => `${k}=${v}`).sort();
  return kv.length ? kv.join(", ") : "–";
}

function json(v) { return JSON.stringify(v, null, 2); }
// short is the end of an id: ids are UUIDv7, whose first digits are the
// time they were made, the same for every task of a minute. A task's link
// holds its whole id in its title, and its page in its heading, for
// aipctl task ID.
function short(id) { return id ? id.slice(-8) : "–"; }
function state(s) { return el("span", { class: `badge ${s}` }, s); }
function deviceLink(id) { return id ? el("a", { href: `#/devices/${encodeURIComponent(id)}` }, id) : "–"; }
function taskLink(id, text) { return el("a", { href: `#/tasks/${encodeURIComponent(id)}`, class: "mono", title: id }, text || short(id)); }

function table(id, headers, rows) {
  return el("table", { id },
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows));
}

function facts(pairs) {
  return el("dl", { class: "facts" }, pairs.filter(([, v]) => v !== undefined && v !== "").map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

// ---- routing

const routes = [
  [/^#\/devices$/, devicesPage],
  [/^#\/devices\/([^/]+)$/, devicePage],
  [/^#\/tasks$/, tasksPage],
  [/^#\/tasks\/([^/]+)$/, taskPage],
  [/^#\/rollouts$/, rolloutsPage],
  [/^#\/rollouts\/([^/]+)$/, rolloutPage],
  [/^#\/dispatch$/, dispatchPage],
];

function route() {
  for (const stop of stops) stop();
  stops = [];
  const seq = ++pageSeq;
  const hash = location.hash || "#/devices";
  for (const [re, page] of routes) {
    const m = hash.match(re);
    if (m) return render(seq, () => page(seq, ...m.slice(1).map(decodeURIComponent)));
  }
  location.hash = "#/devices";
}

function current(seq) { return seq === pageSeq; }

async function render(seq, page) {
  try {
    await loadMe();
    await page();
    if (current(seq)) document.getElementById("nav").hidden = false;
  } catch (e) {
    failed(seq, e);
  }
}

function failed(seq, e) {
  if (!current(seq)) return;
  if (e instanceof Unauthorized) loginPage();
  else view.replaceChildren(el("p", { class: "error" }, e.message));
}

// every runs fn every ms while the page is shown.
function every(seq, ms, fn) {
  const id = setInterval(async () => {
    try { await fn(); } catch (e) { failed(seq, e); }
  }, ms);
  stops.push(() => clearInterval(id));
}

// ---- login

function loginPage() {
  for (const stop of stops) stop();
  stops = [];
  pageSeq++;
  me = null;
  document.getElementById("nav").hidden = true;
  view.replaceChildren(document.getElementById("login-template").content.cloneNode(true));
  const form = document.getElementById("login-form");
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const token = document.getElementById("login-token").value.trim();
    try {
      await api("POST", "/api/login", { token });
      route();
    } catch (e) {
      document.getElementById("login-error").textContent = e instanceof Unauthorized ? "Wrong token." : e.message;
    }
  });
}

document.getElementById("logout").addEventListener("click", async () => {
  await api("POST", "/api/logout").catch(() => {});
  loginPage();
});

// ---- devices

function devicesTable(devices) {
  return table("devices", ["ID", "State", "Last seen", "Platform", "Agent", "Labels", "Tools"], devices.map((d) =>
    el("tr", { "data-device": d.id },
      el("td", {}, deviceLink(d.id)),
      el("td", { class: `state ${d.online ? "online" : "offline"}` }, d.online ? "online" : "offline"),
      el("td", { title: d.last_seen || "" }, ago(d.last_seen)),
      el("td", {}, d.info ? `${d.info.platform}/${d.info.arch}` : "–"),
      el("td", { class: "agent" }, (d.info && d.info.agent_version) || "–"),
      el("td", {}, labelText(d.labels)),
      el("td", {}, d.info && d.info.tools ? d.info.tools.length : 0))));
}

// devicesList is the table of devices or, while there is none, a note with
// the same id, so that a refresh finds either one to replace.
function devicesList(devices) {
  return devices.length ? devicesTable(devices)
    : el("p", { id: "devices", class: "muted" }, "No device is enrolled: aipctl device enroll ID");
}

async function devicesPage(seq) {
  const devices = await api("GET", "/api/devices");
  if (!current(seq)) return;
  view.replaceChildren(el("h1", {}, "Devices"), devicesList(devices));
  every(seq, 3000, async () => {
    const fresh = await api("GET", "/api/devices");
    const old = document.getElementById("devices");
    if (current(seq) && old) old.replaceWith(devicesList(fresh));
  });
}

async function devicePage(seq, id) {
  const [device, tools] = await Promise.all([
    api("GET", `/api/devices/${encodeURIComponent(id)}`),
    api("GET", `/api/devices/${encodeURIComponent(id)}/tools`),
  ]);
  if (!current(seq)) return;
  const info = device.info || {};
  const status = el("span", { id: "device-state" });
  const seen = el("span", { id: "device-last-seen" });
  const show = (d) => {
    status.textContent = d.online ? "online" : "offline";
    status.className = d.online ? "online" : "offline";
    seen.textContent = ago(d.last_seen);
    seen.title = d.last_seen || "";
  };
  show(device);
  view.replaceChildren(
    el("h1", {}, device.id),
    el("div", { class: "card" }, facts([
      ["State", status], ["Last seen", seen], ["Labels", labelText(device.labels)],
      ["Platform", info.platform ? `${info.platform}/${info.arch} ${info.os_version || ""}` : "–"],
      ["Hostname", info.hostname], ["Agent", info.agent_version], ["Enrolled", new Date(device.created_at).toLocaleString()],
    ])),
    ...(runs() ? [el("h2", {}, "Run a tool"), runForm(device.id, tools)] : []),
    el("h2", {}, `Tools (${tools.length})`),
    toolsTable(tools));
  every(seq, 3000, async () => show(await api("GET", `/api/devices/${encodeURIComponent(id)}`)));
}

function toolsTable(tools) {
  return table("tools", ["Tool", "Namespace", "Type", "Signed by", "Description", "Schema"], tools.map((t) =>
    el("tr", { "data-tool": t.tool_name },
      el("td", { class: "mono" }, t.tool_name),
      el("td", {}, t.namespace || "–"),
      el("td", {}, t.tool_type),
      el("td", { class: "signer" }, signerText(t.meta)),
      el("td", {}, t.description || ""),
      el("td", {}, el("details", {}, el("summary", {}, "input schema"), el("pre", {}, json(t.input_schema || {})),
        t.output_schema ? [el("div", { class: "muted" }, "output schema"), el("pre", {}, json(t.output_schema))] : null)))));
}

// signerText is who signed a wasm tool: the key id its signature names,
// and whether the device checked it against a key it trusts.
function signerText(meta) {
  if (!meta || !meta.signature) return "–";
  if (!meta.signer) return "unsigned";
  return [el("span", { class: "mono key-id" }, meta.signer), ` (${meta.signature})`];
}

// metaTools are the agent's own tools, which an operator does not run by
// hand: install_tool is what aipctl tool deploy calls, stage_module and
// apply_revision what rollouts call, list_tools what the tools table shows.
const metaTools = new Set(["list_tools", "install_tool", "stage_module", "apply_revision"]);

// skeleton is a parameters object with each property of a schema.
function skeleton(schema) {
  const out = {};
  for (const [k, p] of Object.entries((schema && schema.properties) || {})) {
    out[k] = p.type === "integer" || p.type === "number" ? 0 : p.type === "boolean" ? false : p.type === "object" ? {} : p.type === "array" ? [] : "";
  }
  return out;
}

// runForm runs one of the device's own tools; the meta tools are left
// out, so that the form opens on a real tool.
function runForm(deviceID, allTools) {
  const tools = allTools.filter((t) => !metaTools.has(t.tool_name));
  if (!tools.length) return el("p", { id: "run-none", class: "muted" }, "This device lists no tools to run but its meta tools.");
  const select = el("select", { id: "run-tool" }, tools.map((t, i) => el("option", { value: i }, `${t.tool_name} (${t.namespace || t.tool_type})`)));
  const params = el("textarea", { id: "run-params", spellcheck: "false" });
  const timeout = el("input", { id: "run-timeout", value: "30s" });
  const result = el("div", { id: "run-result" });
  const button = el("button", { id: "run-submit", type: "submit" }, "Run");
  const fill = () => { const t = tools[select.value]; params.value = json(skeleton(t && t.input_schema)); };
  select.addEventListener("change", fill);
  fill();
  return el("form", {
    class: "stack card", onsubmit: async (ev) => {
      ev.preventDefault();
      const t = tools[select.value];
      let parameters;
      try { parameters = JSON.parse(params.value || "{}"); } catch (e) {
        result.replaceChildren(el("p", { class: "error" }, `Parameters are not JSON: ${e.message}`));
        return;
      }
      button.disabled = true;
      result.replaceChildren(el("p", { class: "muted" }, `Running ${t.tool_name}…`));
      try {
        const resp = await api("POST", `/api/devices/${encodeURIComponent(deviceID)}/commands`, {
          actions: [{ tool_name: t.tool_name, tool_type: t.tool_type, parameters }], timeout: timeout.value,
        });
        result.replaceChildren(
          el("p", {}, "Status ", el("span", { id: "run-status", class: resp.status }, resp.status), " · task ", taskLink(resp.session_id)),
          el("pre", { id: "run-output" }, json(resp.results)));
      } catch (e) {
        if (e instanceof Unauthorized) return loginPage();
        result.replaceChildren(el("p", { class: "error" }, e.message));
      } finally {
        button.disabled = false;
      }
    },
  }, el("label", {}, "Tool", select), el("label", {}, "Parameters (JSON)", params), el("label", {}, "Timeout", timeout), button, result);
}

// ---- tasks

// tasksTable lists task summaries: a fleet's labels are on its own page.
function tasksTable(tasks) {
  return table("tasks", ["Task", "Name", "Kind", "Device", "State", "Created", "Took"], tasks.map((t) =>
    el("tr", { "data-task": t.session_id },
      el("td", {}, taskLink(t.session_id)),
      el("td", {}, t.task_name || "–"),
      el("td", {}, t.kind + (t.parent_id ? " (fleet)" : "")),
      el("td", {}, t.kind === "fleet" ? "(fleet)" : deviceLink(t.device_id)),
      el("td", {}, state(t.state)),
      el("td", { title: t.created_at }, ago(t.created_at)),
      el("td", {}, duration(t.started_at, t.finished_at)))));
}

// tasksPage shows the tasks a page at a time, newest first: Older follows
// the page's cursor, Newer goes back the way it came. The page shown is
// read again every 2 s.
async function tasksPage(seq) {
  const filter = el("select", { id: "tasks-state" }, ["", "created", "running", "completed", "failed", "cancelled"].map((s) => el("option", { value: s }, s || "any state")));
  const cursors = [""]; // the cursor of each page on the way to the one shown
  let next = "";
  const newer = el("button", { id: "tasks-newer", type: "button" }, "← Newer");
  const older = el("button", { id: "tasks-older", type: "button" }, "Older →");
  const load = async () => {
    const q = new URLSearchParams();
    if (filter.value) q.set("state", filter.value);
    if (cursors.at(-1)) q.set("cursor", cursors.at(-1));
    const page = await api("GET", "/api/tasks" + (q.size ? `?${q}` : ""));
    next = page.next || "";
    newer.disabled = cursors.length === 1;
    older.disabled = !next;
    return page.tasks;
  };
  const tasks = await load();
  if (!current(seq)) return;
  const refresh = async () => {
    const fresh = await load();
    const old = document.getElementById("tasks");
    if (current(seq) && old) old.replaceWith(tasksTable(fresh));
  };
  const go = (change) => () => { change(); refresh().catch((e) => failed(seq, e)); };
  filter.addEventListener("change", go(() => cursors.splice(1)));
  newer.addEventListener("click", go(() => cursors.length > 1 && cursors.pop()));
  older.addEventListener("click", go(() => next && cursors.push(next)));
  view.replaceChildren(el("div", { class: "row" }, el("h1", {}, "Tasks"), filter), tasksTable(tasks),
    el("div", { class: "row" }, newer, older));
  every(seq, 2000, refresh);
}

async function taskPage(seq, id) {
  const path = `/api/tasks/${encodeURIComponent(id)}`;
  const head = el("div", { class: "card" });
  const body = el("div");
  const log = el("ol", { id: "task-events", class: "events mono" });
  view.replaceChildren(el("h1", {}, "Task ", el("span", { id: "task-id", class: "mono" }, id)), head, body,
    el("h2", {}, "Live events"), log);
  const show = (t) => {
    head.replaceChildren(facts([
      ["State", el("span", { id: "task-state", class: `badge ${t.state}` }, t.state)],
      ["Name", t.task_name], ["Kind", t.kind], ["Device", t.device_id ? deviceLink(t.device_id) : undefined],
      ["Labels", t.kind === "fleet" && t.result ? labelText(t.result.labels) : undefined],
      ["Fleet", t.parent_id ? taskLink(t.parent_id) : undefined], ["Requester", t.requester.id ? `${t.requester.kind}:${t.requester.id}` : t.requester.kind],
      ["Created", new Date(t.created_at).toLocaleString()], ["Took", duration(t.started_at, t.finished_at)],
      ["Error", t.error ? el("span", { class: "error" }, t.error) : undefined],
    ]));
    body.replaceChildren(...taskBody(t));
  };
  let task = await api("GET", path);
  if (!current(seq)) return;
  show(task);
  // A task that had ended still gets its events: the server replays those
  // of a recently ended task, and the end alone of an older one.
  const ended = ["completed", "failed", "cancelled"].includes(task.state);
  // Live: each event is listed, and the task fetched again. Events that
  // come while a fetch is under way get one more fetch after it, so the
  // last one always shows the state after the last event.
  const es = new EventSource(`${path}/events`);
  stops.push(() => es.close());
  let fetching = false;
  let again = false;
  const reload = async () => {
    if (fetching) {
      again = true;
      return;
    }
    fetching = true;
    try {
      do {
        again = false;
        const t = await api("GET", path);
        if (current(seq)) show(t);
      } while (again);
    } catch (e) {
      failed(seq, e);
    } finally {
      fetching = false;
    }
  };
  for (const type of ["step_start", "preparing", "step_end", "device_start", "device_end", "end"]) {
    es.addEventListener(type, (msg) => {
      const e = JSON.parse(msg.data);
      log.append(el("li", {}, eventText(e)));
      if (type === "end") es.close();
      if (!ended) reload();
    });
  }
}

function eventText(e) {
  const t = new Date(e.time).toLocaleTimeString();
  const dev = e.device_id ? `${e.device_id}: ` : "";
  const step = e.step !== undefined ? `step ${e.step + 1}${e.steps ? "/" + e.steps : ""} ${e.tool || ""}` : "";
  switch (e.type) {
    case "step_start": return `${t} ${dev}${step} started`;
    case "preparing": return `${t} ${dev}${step}: ${preparingText(e.preparing || {})}`;
    case "step_end": return `${t} ${dev}${step} ${e.status}${e.error ? ": " + e.error : ""}`;
    case "device_start": return `${t} ${dev}started`;
    case "device_end": return `${t} ${dev}${e.state}${e.error ? ": " + e.error : ""}`;
    default: return `${t} ${dev}task ${e.state}${e.error ? ": " + e.error : ""}`;
  }
}

// preparingText says what the device said of its tool's preparation, as
// api.PreparingText does.
function preparingText(p) {
  if (p.stage === "ready") return `${p.tool_name} prepared`;
  return `preparing ${p.tool_name} (${p.stage}, step ${p.step}/${p.steps})`;
}

function taskBody(t) {
  const out = [];
  const r = t.result || {};
  if (t.kind === "fleet" && r.devices) {
    out.push(el("h2", {}, `Devices (${r.devices.length})${r.aborted ? " · aborted" : ""}`),
      table("fleet-devices", ["Device", "State", "Task", "Error"], r.devices.map((d) =>
        el("tr", { "data-device": d.device_id },
          el("td", {}, deviceLink(d.device_id)), el("td", {}, state(d.state)),
          el("td", {}, d.session_id ? taskLink(d.session_id) : "–"), el("td", { class: "error" }, d.error || "")))));
  }
  if (r.steps) {
    out.push(el("h2", {}, "Steps"), table("task-steps", ["#", "Tool", "Status", "Attempts", "Error"], r.steps.map((s) =>
      el("tr", {}, el("td", {}, s.step + 1), el("td", { class: "mono" }, s.tool), el("td", {}, state(s.status)),
        el("td", {}, s.attempts || "–"), el("td", { class: "error" }, s.error || "")))));
  }
  if (t.commands && t.commands.length) {
    out.push(el("h2", {}, "Commands and results"));
    for (const c of t.commands) {
      out.push(el("div", { class: "card command" },
        el("div", {}, `Step ${c.step + 1}, attempt ${c.attempt} · `, state(c.status), c.late ? " · late" : "",
          " · ", el("span", { class: "mono muted" }, c.response_id)),
        c.error ? el("p", { class: "error" }, c.error) : null,
        c.results ? el("pre", {}, json(c.results)) : el("p", { class: "muted" }, "waiting for results…")));
    }
  }
  if (t.plan) out.push(el("details", {}, el("summary", {}, "Plan"), el("pre", {}, json(t.plan))));
  return out;
}

// ---- rollouts

// The states in the order a rollout and its devices go through them, so
// that every row lists its counts in the same order.
const deviceStates = ["pending", "waiting", "changing", "done", "failed", "removing", "drift", "skipped"];

function rolloutLink(name) { return el("a", { href: `#/rollouts/${encodeURIComponent(name)}` }, name); }

// counts are devices by state, a badge for each state that has any.
function counts(byState) {
  const c = byState || {};
  const states = [...deviceStates, ...Object.keys(c).filter((s) => !deviceStates.includes(s)).sort()];
  const parts = states.filter((s) => c[s]).map((s) => el("span", { class: `badge ${s}`, "data-state": s }, `${c[s]} ${s}`));
  return parts.length ? el("span", { class: "counts" }, parts) : el("span", { class: "muted" }, "no device");
}

// revisionText is the revision devices are brought to, and the newest
// applied when that is another (after a rollback).
function revisionText(r) {
  const desired = r.revision ? `${r.revision}` : "none";
  return r.latest === r.revision ? desired : `${desired} (latest ${r.latest})`;
}

function rolloutsTable(rollouts) {
  return table("rollouts", ["Rollout", "State", "Revision", "Selector", "Devices"], rollouts.map((r) =>
    el("tr", { "data-rollout": r.name },
      el("td", {}, rolloutLink(r.name)),
      el("td", {}, state(r.state)),
      el("td", { class: "revision" }, revisionText(r)),
      el("td", { class: "mono" }, r.selector || "–"),
      el("td", { class: "devices" }, counts(r.counts)))));
}

// rolloutsList is the table of rollouts or, while there is none, a note
// with the same id, as devicesList is.
function rolloutsList(rollouts) {
  return rollouts.length ? rolloutsTable(rollouts)
    : el("p", { id: "rollouts", class: "muted" }, "No rollout yet: aipctl rollout apply FILE");
}

async function rolloutsPage(seq) {
  const rollouts = await api("GET", "/api/rollouts");
  if (!current(seq)) return;
  view.replaceChildren(el("h1", {}, "Rollouts"), rolloutsList(rollouts));
  every(seq, 2000, async () => {
    const fresh = await api("GET", "/api/rollouts");
    const old = document.getElementById("rollouts");
    if (current(seq) && old) old.replaceWith(rolloutsList(fresh));
  });
}

// rolloutPage shows a rollout's status, read again every 2 s, and its
// history, read again when its revision or state changes.
async function rolloutPage(seq, name) {
  const path = `/api/rollouts/${encodeURIComponent(name)}`;
  const head = el("div", { class: "card" });
  const body = el("div");
  const history = el("div");
  const controls = steersRollouts() ? rolloutControls(path) : null;
  let seen = "";
  const load = async () => {
    const r = await api("GET", path);
    const key = `${r.revision}/${r.latest}/${r.state}`;
    const revs = key === seen ? null : await api("GET", `${path}/history`);
    if (!current(seq)) return;
    seen = key;
    head.replaceChildren(rolloutFacts(r));
    body.replaceChildren(...rolloutBody(r));
    if (revs) history.replaceChildren(historyTable(revs));
    if (controls) controls.show(r);
  };
  await load();
  if (!current(seq)) return;
  view.replaceChildren(el("div", { class: "row" }, el("h1", {}, "Rollout ", el("span", { class: "mono" }, name)), controls && controls.bar),
    ...(controls ? [controls.error] : []), head, body, el("h2", {}, "History"), history);
  every(seq, 2000, load);
}

function rolloutFacts(r) {
  const open = r.waves.filter((w) => w.open).length;
  return facts([
    ["State", el("span", { id: "rollout-state", class: `badge ${r.state}` }, r.state)],
    ["Reason", r.reason ? el("span", { id: "rollout-reason", class: "reason" }, r.reason) : undefined],
    ["Revision", el("span", { id: "rollout-revision" }, revisionText(r))],
    ["Selector", el("span", { class: "mono" }, r.selector || "–")],
    ["Waves open", `${open} of ${r.waves.length}`],
    ["Devices", counts(r.counts)],
    ["Updated", el("span", { title: r.updated_at }, ago(r.updated_at))],
  ]);
}

function rolloutBody(r) {
  const tools = Object.entries(r.tools || {}).sort(([a], [b]) => a.localeCompare(b));
  const devices = r.devices || [];
  return [
    el("h2", {}, `Tools (${tools.length})`),
    tools.length ? table("rollout-tools", ["Tool", "SHA-256"], tools.map(([tool, digest]) =>
      el("tr", { "data-tool": tool }, el("td", { class: "mono" }, tool), el("td", { class: "mono digest" }, digest))))
      : el("p", { id: "rollout-tools", class: "muted" }, "None: the rollout is at no revision, and its devices have none of its tools."),
    el("h2", {}, "Waves"),
    table("rollout-waves", ["Wave", "Size", "Devices", "Open", "States"], r.waves.map((w, i) =>
      el("tr", { "data-wave": i + 1 },
        el("td", {}, i + 1), el("td", {}, w.size), el("td", {}, w.devices),
        el("td", { class: w.open ? "open" : "muted" }, w.open ? "open" : "not yet"),
        el("td", { class: "devices" }, counts(w.counts))))),
    el("h2", {}, `Devices (${devices.length})`),
    devices.length ? rolloutDevices(devices) : el("p", { id: "rollout-devices", class: "muted" }, "The selector picks no device in your view."),
  ];
}

function rolloutDevices(devices) {
  return table("rollout-devices", ["Device", "Wave", "State", "Online", "Applied", "Task", "Error", "Drift"], devices.map((d) =>
    el("tr", { "data-device": d.device_id },
      el("td", {}, deviceLink(d.device_id)),
      el("td", {}, d.wave + 1),
      el("td", { class: "state" }, state(d.state)),
      el("td", { class: `online ${d.online ? "online" : "offline"}` }, d.online ? "online" : "offline"),
      el("td", { class: "applied" }, appliedText(d)),
      el("td", { class: "task" }, d.task_id ? taskLink(d.task_id) : "–"),
      el("td", { class: "error" }, d.error || ""),
      el("td", { class: "drift mono" }, driftText(d.drift)))));
}

// appliedText is the revision a device runs and, while it is not the one
// its state is about, that one too.
function appliedText(d) {
  const runs = d.applied ? `${d.applied}` : "none";
  return d.revision === d.applied ? runs : [runs, el("span", { class: "muted" }, ` → ${d.revision || "none"}`)];
}

// driftText lists the tools deployed by hand in place of the rollout's,
// each with the start of its digest.
function driftText(drift) {
  const kv = Object.entries(drift || {}).sort(([a], [b]) => a.localeCompare(b));
  return kv.length ? kv.map(([tool, digest]) => `${tool} ${digest.slice(0, 12)}`).join(", ") : "";
}

function historyTable(revs) {
  return table("rollout-history", ["Revision", "Tools", "Outcome", "By", "Applied"], revs.map((h) =>
    el("tr", { "data-revision": h.revision },
      el("td", {}, h.revision),
      el("td", { class: "mono" }, Object.keys(h.tools || {}).sort().join(", ")),
      el("td", { class: h.outcome ? "muted" : "" }, h.outcome || "desired"),
      el("td", {}, h.created_by || "–"),
      el("td", { title: h.created_at }, ago(h.created_at)))));
}

// rolloutControls are the buttons that pause, resume and roll back a
// rollout: each is offered in the states where it does something, and a
// rollback asks for a second click. The buttons stay across refreshes,
// so a click is never lost to one.
function rolloutControls(path) {
  const error = el("p", { id: "rollout-action-error", class: "error" });
  let last = null;
  const act = (action) => async (ev) => {
    ev.currentTarget.disabled = true;
    error.textContent = "";
    disarm();
    try {
      show(await api("POST", `${path}/${action}`));
    } catch (e) {
      if (e instanceof Unauthorized) return loginPage();
      error.textContent = e.message;
      if (last) show(last);
    }
  };
  const pause = el("button", { id: "rollout-pause", type: "button", onclick: act("pause") }, "Pause");
  const resume = el("button", { id: "rollout-resume", type: "button", class: "primary", onclick: act("resume") }, "Resume");
  const rollback = el("button", { id: "rollout-rollback", type: "button", class: "danger" }, "Roll back");
  const confirm = act("rollback");
  const disarm = () => {
    delete rollback.dataset.armed;
    rollback.textContent = "Roll back";
  };
  rollback.addEventListener("click", (ev) => {
    if (rollback.dataset.armed) return confirm(ev);
    rollback.dataset.armed = "1";
    rollback.textContent = "Confirm roll back";
  });
  const show = (r) => {
    last = r;
    pause.disabled = !["rolling", "waiting", "approval", "done"].includes(r.state);
    resume.disabled = !["paused", "approval"].includes(r.state);
    resume.textContent = r.state === "approval" ? "Approve next wave" : "Resume";
    rollback.disabled = !r.revision || r.state === "rolling_back";
    if (rollback.disabled) disarm();
  };
  return { bar: el("div", { id: "rollout-actions", class: "actions" }, pause, resume, rollback), error, show };
}

// ---- dispatch

const examplePlan = `task_name: check-config
steps:
  - tool: hash_file
    parameters: {path: /data/kiosk/config.json}
`;

async function dispatchPage(seq) {
  if (!runs()) {
    view.replaceChildren(el("h1", {}, "Dispatch a plan"), el("p", { class: "muted" }, `As a ${me.role}, ${me.name} reads only: it dispatches nothing.`));
    return;
  }
  const devices = await api("GET", "/api/devices");
  if (!current(seq)) return;
  const online = devices.filter((d) => d.online);
  const toDevice = el("input", { type: "radio", name: "target", id: "dispatch-to-device", checked: true });
  const toLabels = el("input", { type: "radio", name: "target", id: "dispatch-to-labels" });
  const device = el("select", { id: "dispatch-device" }, online.map((d) => el("option", { value: d.id }, d.id)));
  const labels = el("input", { id: "dispatch-labels", placeholder: "site=lobby,role=kiosk" });
  const plan = el("textarea", { id: "dispatch-plan", spellcheck: "false", rows: 10 });
  plan.value = examplePlan;
  const name = el("input", { id: "dispatch-name", placeholder: "from the plan" });
  const concurrency = el("input", { id: "dispatch-concurrency", type: "number", min: 1, value: 10 });
  const abort = el("input", { id: "dispatch-abort", type: "number", min: 0, max: 100, value: 0 });
  const error = el("p", { class: "error", id: "dispatch-error" });
  const button = el("button", { type: "submit", id: "dispatch-submit" }, "Dispatch");
  view.replaceChildren(el("h1", {}, "Dispatch a plan"), el("form", {
    class: "stack card", onsubmit: async (ev) => {
      ev.preventDefault();
      button.disabled = true;
      error.textContent = "";
      try {
        let resp;
        if (toDevice.checked) {
          resp = await api("POST", "/api/dispatch", { client_id: device.value, request: plan.value, task_name: name.value || undefined });
        } else {
          resp = await api("POST", "/api/fleets", {
            labels: parseLabels(labels.value), plan: plan.value, task_name: name.value || undefined,
            concurrency: Number(concurrency.value) || 0, abort_percent: Number(abort.value) || 0,
          });
        }
        location.hash = `#/tasks/${encodeURIComponent(resp.session_id)}`;
      } catch (e) {
        if (e instanceof Unauthorized) return loginPage();
        error.textContent = e.message;
      } finally {
        button.disabled = false;
      }
    },
  },
  el("div", { class: "row" }, el("label", { class: "choice" }, toDevice, "to an online device"), device),
  el("div", { class: "row" }, el("label", { class: "choice" }, toLabels, "to every device with the labels"), labels),
  el("label", {}, "Plan (YAML or JSON)", plan),
  el("label", {}, "Task name", name),
  el("div", { class: "row" }, el("label", {}, "Fleet concurrency", concurrency), el("label", {}, "Abort at % failed (0: never)", abort)),
  button, error));
}

function parseLabels(text) {
  const out = {};
  for (const kv of text.split(",").map((s) => s.trim()).filter(Boolean)) {
    const i = kv.indexOf("=");
    if (i <= 0) throw new Error(`label "${kv}": want KEY=VALUE`);
    out[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return out;
}

window.addEventListener("hashchange", route);
route();
