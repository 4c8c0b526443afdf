// ctxd's operator dashboard: read-only pages over the public API. Every page reads a page of
// data (sessions, items, records), never a whole history. With keys on, the operator key typed
// in the header is kept for this browser tab only (sessionStorage) and sent as a bearer token.
"use strict";

const main = document.getElementById("main");
const crumbs = document.getElementById("crumbs");
const KEY = "ctxd.key";

document.getElementById("key").value = sessionStorage.getItem(KEY) || "";
document.getElementById("key-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const key = document.getElementById("key").value.trim();
  if (key) sessionStorage.setItem(KEY, key); else sessionStorage.removeItem(KEY);
  route();
});

function headers() {
  const key = sessionStorage.getItem(KEY);
  return key ? { authorization: "Bearer " + key } : {};
}

class ApiError extends Error {
  constructor(status, problem) {
    super((problem && problem.detail) || ("HTTP " + status));
    this.status = status;
  }
}

async function api(path) {
  const reply = await fetch(path, { headers: headers() });
  const body = await reply.json().catch(() => null);
  if (!reply.ok) throw new ApiError(reply.status, body);
  return body;
}

// Builds an element: h("td", {class: "num"}, "12", child...).
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

const svgNs = "http://www.w3.org/2000/svg";
function s(tag, attrs, ...children) {
  const el = document.createElementNS(svgNs, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  for (const child of children) el.append(child instanceof Node ? child : String(child));
  return el;
}

function tier(name) {
  return h("span", { class: "tier tier-" + name, "data-tier": name }, name);
}

function bar(fraction) {
  const pct = Math.max(0, Math.min(1, fraction)) * 100;
  return h("span", { class: "bar" }, h("span", { style: "width:" + pct.toFixed(1) + "%" }));
}

function percent(fraction) {
  return (fraction * 100).toFixed(1) + " %";
}

function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "";
}

function show(...nodes) {
  main.replaceChildren(...nodes.filter((n) => n !== null && n !== undefined));
}

function failure(error) {
  if (error.status === 401) {
    return h("p", { class: "error", id: "needs-key" },
      "This server requires an API key: type an operator key above.");
  }
  return h("p", { class: "error" }, error.message);
}

function setCrumbs(...parts) {
  crumbs.replaceChildren(...parts.flatMap((p, i) => (i ? [" / ", p] : [p])));
}

const sessionLink = (id) => h("a", { href: "/ui/sessions/" + id }, id);

// ---------------------------------------------------------------- sessions

async function sessionsPage(params) {
  setCrumbs("sessions");
  const labels = params.getAll("label");
  const query = new URLSearchParams({ limit: "50", sort: "activity" });
  for (const l of labels) query.append("label", l);
  if (params.get("cursor")) query.set("cursor", params.get("cursor"));
  const filter = h("form", { class: "filters", id: "label-filter" },
    h("label", {}, "labels ",
      h("input", { name: "label", value: labels.join(" "), placeholder: "team=search agent=coder" })),
    h("button", { type: "submit" }, "Filter"));
  filter.addEventListener("submit", (e) => {
    e.preventDefault();
    const next = new URLSearchParams();
    for (const l of e.target.label.value.split(/\s+/).filter(Boolean)) next.append("label", l);
    history.pushState(null, "", "/ui" + (next.toString() ? "?" + next : ""));
    route();
  });
  const page = await api("/sessions?" + query);
  const rows = page.sessions.map((session) => {
    const utilization = h("td", { class: "utilization" }, "…");
    const tierCell = h("td", { class: "tier-cell" }, "…");
    const last = h("td", { class: "last-compaction" }, "…");
    // Each row's context and last record, read as the row appears.
    api("/sessions/" + session.id + "/context?limit=1").then((c) => {
      utilization.replaceChildren(bar(c.utilization), percent(c.utilization));
      tierCell.replaceChildren(tier(c.tier));
    }).catch((e) => utilization.replaceChildren(e.message));
    api("/sessions/" + session.id + "/compactions/outline?limit=1").then((r) => {
      const record = r.compactions[0];
      last.replaceChildren(record
        ? h("a", { href: "/ui/sessions/" + session.id + "/compactions/" + record.id },
          record.tier + " · " + when(record.created_at))
        : h("span", { class: "muted" }, "none"));
    }).catch((e) => last.replaceChildren(e.message));
    const labelText = Object.entries(session.metadata).map(([k, v]) => k + "=" + v).join(" ");
    return h("tr", { "data-session": session.id },
      h("td", {}, sessionLink(session.id)),
      h("td", {}, labelText),
      h("td", {}, session.config.policy),
      h("td", { class: "num events" }, session.head_seq),
      utilization, tierCell, last,
      h("td", {}, when(session.updated_at)));
  });
  const table = h("table", { id: "sessions" },
    h("thead", {}, h("tr", {},
      ["session", "labels", "policy", "events", "utilization", "tier", "last compaction",
        "last activity"].map((t) => h("th", {}, t)))),
    h("tbody", {}, rows));
  const more = page.next_cursor
    ? h("p", {}, h("a", { href: "/ui?" + new URLSearchParams([...labels.map((l) => ["label", l]), ["cursor", page.next_cursor]]) }, "Next page"))
    : null;
  show(h("h1", {}, "Sessions"), filter,
    rows.length ? table : h("p", { class: "muted", id: "no-sessions" }, "No sessions."), more);
}

// ---------------------------------------------------------------- one session

// The view's tokens against the window: each compaction drops the line from its tokens
// before to its tokens after; between them the view grows with what is appended.
function chart(session, context, records) {
  const width = 1000, height = 260, left = 56, right = 12, top = 12, bottom = 28;
  const budget = context.budget;
  const maxSeq = Math.max(1, session.head_seq);
  const x = (seq) => left + (seq / maxSeq) * (width - left - right);
  const y = (tokens) => top + (1 - Math.min(tokens, budget * 1.05) / (budget * 1.05)) * (height - top - bottom);
  const svg = s("svg", { class: "chart", id: "chart", viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none", role: "img" });
  svg.append(s("title", {}, "view tokens per seq against the window"));
  svg.append(s("line", { class: "window", x1: left, x2: width - right, y1: y(budget), y2: y(budget) }));
  svg.append(s("text", { x: 4, y: y(budget) + 4 }, "window"));
  const thresholds = session.config.policy === "episodic"
    ? { trigger: session.config.episodic.trigger, target: session.config.episodic.target }
    : session.config.thresholds;
  const colors = { warn: "#d9a400", soft: "#e07b00", full: "#d8452f", emergency: "#8e1b8e", low_water: "#2e9d5b", trigger: "#d8452f", target: "#2e9d5b" };
  for (const [name, share] of Object.entries(thresholds)) {
    if (typeof share !== "number") continue;
    svg.append(s("line", { class: "threshold", "data-threshold": name, stroke: colors[name] || "#999", x1: left, x2: width - right, y1: y(share * budget), y2: y(share * budget) }));
    svg.append(s("text", { x: 4, y: y(share * budget) + 4 }, name));
  }
  const ordered = [...records].sort((a, b) => a.head_seq - b.head_seq || a.created_at.localeCompare(b.created_at));
  const points = [[0, 0]];
  for (const r of ordered) {
    points.push([r.head_seq, r.tokens_before], [r.head_seq, r.tokens_after]);
  }
  const now = Math.round(context.utilization * budget);
  points.push([session.head_seq, now]);
  svg.append(s("polyline", { class: "tokens", points: points.map(([a, b]) => x(a) + "," + y(b)).join(" ") }));
  for (const r of ordered) {
    const mark = s("a", { href: "/ui/sessions/" + session.id + "/compactions/" + r.id },
      s("circle", { class: "compaction", "data-tier": r.tier, cx: x(r.head_seq), cy: y(r.tokens_after), r: 5, fill: colors[r.tier] || "#2f6fde" },
        s("title", {}, `${r.tier} compaction at seq ${r.head_seq}: ${r.tokens_before} → ${r.tokens_after} tokens (${r.trigger}, ${when(r.created_at)})`)));
    svg.append(mark);
  }
  svg.append(s("text", { x: left, y: height - 8 }, "seq 0"));
  svg.append(s("text", { x: width - right - 60, y: height - 8 }, "seq " + session.head_seq));
  return svg;
}

function itemsTable(id, context) {
  const rows = context.items.map((item) => h("tr", { "data-seq": item.seq, "data-state": item.state, "data-reason": item.reason },
    h("td", { class: "num" }, h("a", { href: `/ui/sessions/${id}/observations/${item.seq}` }, item.seq)),
    h("td", {}, item.type + (item.role ? " · " + item.role : "")),
    h("td", {}, item.state),
    h("td", {}, item.projection),
    h("td", { class: "num" }, item.tokens),
    h("td", { class: "num" }, item.tokens_in_view),
    h("td", {}, item.reason),
    h("td", {}, item.compaction_id ? h("a", { href: `/ui/sessions/${id}/compactions/${item.compaction_id}` }, item.compaction_id.slice(0, 8) + "…") : "")));
  return h("table", { id: "items" },
    h("thead", {}, h("tr", {}, ["seq", "type", "state", "projection", "tokens", "in view", "reason", "compaction"].map((t) => h("th", {}, t)))),
    h("tbody", {}, rows));
}

const STATES = ["", "pinned", "active", "retained", "archived"];
const REASONS = ["", "system_prompt", "pinned", "pinned_user_message", "recent_tail",
  "within_budget", "offloaded_large_tool_result", "offloaded_image", "masked_completed_tool_exchange",
  "offloaded_long_arguments", "summarized", "emergency_truncation", "orphan_tool_result", "archived_tool_exchange",
  "overflow_retry", "episode_archived", "pinned_collapsed", "offloaded_large_request",
  "offloaded_large_system_prompt"];

async function sessionPage(id, params) {
  setCrumbs(h("a", { href: "/ui" }, "sessions"), id);
  const itemQuery = new URLSearchParams({ limit: "100" });
  for (const k of ["state", "reason", "after_seq"]) if (params.get(k)) itemQuery.set(k, params.get(k));
  const [session, context, records] = await Promise.all([
    api("/sessions/" + id),
    api(`/sessions/${id}/context?` + itemQuery),
    api(`/sessions/${id}/compactions/outline?limit=200`),
  ]);
  const format = params.get("format") || "openai";
  const stats = h("div", { class: "grid card" },
    h("div", { class: "stat" }, "events", h("b", { id: "head-seq" }, session.head_seq)),
    h("div", { class: "stat" }, "utilization", h("b", { id: "utilization" }, percent(context.utilization))),
    h("div", { class: "stat" }, "tier", h("b", {}, tier(context.tier))),
    h("div", { class: "stat" }, "window", h("b", {}, context.budget)),
    h("div", { class: "stat" }, "compactions", h("b", { id: "compaction-count" }, records.compactions.length)),
    h("div", { class: "stat" }, "policy", h("b", {}, session.config.policy)));
  const select = (name, values, current) => h("select", { name },
    values.map((v) => h("option", v === current ? { value: v, selected: "" } : { value: v }, v || "any " + name)));
  const filters = h("form", { class: "filters", id: "item-filters" },
    select("state", STATES, params.get("state") || ""),
    select("reason", REASONS, params.get("reason") || ""),
    h("button", { type: "submit" }, "Filter"));
  filters.addEventListener("submit", (e) => {
    e.preventDefault();
    const next = new URLSearchParams();
    for (const k of ["state", "reason"]) if (e.target[k].value) next.set(k, e.target[k].value);
    history.pushState(null, "", `/ui/sessions/${id}` + (next.toString() ? "?" + next : ""));
    route();
  });
  const nextItems = context.next_after_seq
    ? h("a", { id: "next-items", href: `/ui/sessions/${id}?` + new URLSearchParams([...itemQuery.entries()].filter(([k]) => k !== "limit" && k !== "after_seq").concat([["after_seq", context.next_after_seq]])) }, "Next items")
    : null;
  const viewBox = h("pre", { id: "view" }, "…");
  const formats = h("form", { class: "filters", id: "view-format" },
    select("format", ["openai", "openai_responses", "anthropic", "raw"], format));
  formats.addEventListener("change", (e) => loadView(id, e.target.value, viewBox));
  loadView(id, format, viewBox);
  const episodes = context.episodes.length
    ? [h("h2", {}, "Episodes"), h("table", { id: "episodes" },
      h("thead", {}, h("tr", {}, ["name", "kind", "seqs", "state", "conclusion"].map((t) => h("th", {}, t)))),
      h("tbody", {}, context.episodes.map((e) => h("tr", {},
        h("td", {}, e.name), h("td", {}, e.kind),
        h("td", {}, e.start_seq + "–" + (e.end_seq || "")),
        h("td", {}, e.end_seq ? "completed" : "active"), h("td", {}, e.conclusion || "")))))]
    : [];
  const live = h("span", { class: "live", id: "live-status" }, "connecting…");
  show(
    h("h1", {}, "Session ", h("code", {}, id), " ", live),
    stats,
    h("h2", {}, "View tokens per seq"), h("div", { class: "card" }, chart(session, context, records.compactions)),
    h("h2", {}, "Items"), filters, itemsTable(id, context), nextItems,
    h("h2", {}, "What the model receives"), formats, viewBox,
    h("h2", {}, "Summary"), h("pre", { id: "summary" }, context.summary || "(none yet)"),
    h("h2", {}, "Anchors"), h("pre", { id: "anchors" }, JSON.stringify(context.anchors, null, 2)),
    ...episodes);
  follow(id, `${session.head_seq}/${context.last_compaction_id || "-"}`, live);
}

async function loadView(id, format, box) {
  try {
    const answer = await api(`/sessions/${id}/view?format=${format}`);
    box.textContent = JSON.stringify(answer.view, null, 2);
  } catch (e) {
    box.textContent = e.message;
  }
}

// ---------------------------------------------------------------- live

let following = null;

// Reads the session's event stream (server-sent events, over fetch so that the key goes in a
// header) and redraws the page when something happens, at most once a second.
async function follow(id, after, status) {
  if (following) following.abort();
  const controller = new AbortController();
  following = controller;
  let cursor = after;
  let updates = 0;
  let redraw = null;
  while (!controller.signal.aborted) {
    try {
      const reply = await fetch(`/sessions/${id}/events/stream`, {
        headers: { ...headers(), "last-event-id": cursor, accept: "text/event-stream" },
        signal: controller.signal,
      });
      if (!reply.ok) throw new ApiError(reply.status, await reply.json().catch(() => null));
      status.textContent = "live";
      const reader = reply.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const idLine = frame.split("\n").find((l) => l.startsWith("id:"));
          if (idLine) cursor = idLine.slice(3).trim();
          if (!frame.split("\n").some((l) => l.startsWith("event:"))) continue;
          updates += 1;
          status.textContent = `live · ${updates} update${updates === 1 ? "" : "s"}`;
          if (!redraw) {
            redraw = setTimeout(() => {
              redraw = null;
              if (following === controller) refresh(id);
            }, 1000);
          }
        }
      }
    } catch (e) {
      if (controller.signal.aborted) return;
      status.textContent = "reconnecting…";
    }
    await new Promise((r) => setTimeout(r, 2000));
  }
}

// Redraws the session page in place, keeping the stream.
async function refresh(id) {
  try {
    const params = new URLSearchParams(location.search);
    const [session, context, records] = await Promise.all([
      api("/sessions/" + id),
      api(`/sessions/${id}/context?limit=100` + (params.get("state") ? "&state=" + params.get("state") : "") + (params.get("reason") ? "&reason=" + params.get("reason") : "")),
      api(`/sessions/${id}/compactions/outline?limit=200`),
    ]);
    document.getElementById("head-seq").textContent = session.head_seq;
    document.getElementById("utilization").textContent = percent(context.utilization);
    document.getElementById("compaction-count").textContent = records.compactions.length;
    document.getElementById("chart").replaceWith(chart(session, context, records.compactions));
    document.getElementById("items").replaceWith(itemsTable(id, context));
    document.getElementById("summary").textContent = context.summary || "(none yet)";
    const format = document.querySelector("#view-format select").value;
    loadView(id, format, document.getElementById("view"));
  } catch (e) {
    document.getElementById("live-status").textContent = e.message;
  }
}

// ---------------------------------------------------------------- one compaction

function seqLinks(id, seqs, className) {
  return h("div", { class: "card seqs " + className },
    seqs.length ? seqs.map((seq) => h("a", { href: `/ui/sessions/${id}/observations/${seq}` }, seq)) : h("span", { class: "muted" }, "none"));
}

async function compactionPage(id, cid) {
  setCrumbs(h("a", { href: "/ui" }, "sessions"), h("a", { href: "/ui/sessions/" + id }, id), "compaction");
  const r = await api(`/sessions/${id}/compactions/${cid}`);
  const facts = [
    ["tier", tier(r.tier)], ["trigger", r.trigger], ["policy", r.policy], ["acted", String(r.acted)],
    ["head seq", r.head_seq], ["tokens", `${r.tokens_before} → ${r.tokens_after}`],
    ["items", `${r.items_before} → ${r.items_after}`], ["window", r.budget],
    ["prefix kept", r.prefix_kept], ["duration", r.duration_ms.toFixed(2) + " ms"],
    ["summariser", r.summarizer ? `${r.summarizer.kind} ${r.summarizer.model || ""} (${r.summarizer.outcome})` : "deterministic"],
    ["at", when(r.created_at)],
  ];
  const offloaded = r.offloaded.map((o) => h("tr", { "data-seq": o.seq },
    h("td", { class: "num" }, h("a", { href: `/ui/sessions/${id}?after_seq=${o.seq - 1}` }, o.seq)),
    h("td", { class: "num" }, o.tokens), h("td", { class: "num" }, o.chars),
    h("td", {}, h("a", { href: `/ui/sessions/${id}/observations/${o.seq}` }, o.uri))));
  show(
    h("h1", {}, "Compaction ", h("code", {}, r.id)),
    h("table", { id: "record" }, h("tbody", {}, facts.map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", {}, v))))),
    h("h2", {}, `Offloaded or masked (${r.offloaded.length})`),
    h("div", { class: "card diff-offloaded", id: "diff-offloaded" }, r.offloaded.length
      ? h("table", {}, h("thead", {}, h("tr", {}, ["seq", "tokens", "chars", "observation"].map((t) => h("th", {}, t)))), h("tbody", {}, offloaded))
      : h("span", { class: "muted" }, "none")),
    h("h2", {}, `Summarised (${r.summarized_seqs.length})`), h("div", { id: "diff-summarized" }, seqLinks(id, r.summarized_seqs, "diff-summarized")),
    h("h2", {}, `Evicted (${r.evicted_seqs.length})`), h("div", { id: "diff-evicted" }, seqLinks(id, r.evicted_seqs, "diff-evicted")),
    h("h2", {}, `Kept verbatim in the tail (${r.preserved_tail.length})`), h("div", { id: "diff-kept" }, seqLinks(id, r.preserved_tail, "diff-kept")),
    h("h2", {}, "Summary after"), h("pre", {}, r.summary_text || "(none)"),
    r.error ? h("p", { class: "error" }, r.error) : null);
}

async function observationPage(id, seq) {
  setCrumbs(h("a", { href: "/ui" }, "sessions"), h("a", { href: "/ui/sessions/" + id }, id), "seq " + seq);
  const o = await api(`/sessions/${id}/observations/${seq}?limit=20000`);
  show(h("h1", {}, `Observation ${seq}`),
    h("p", { class: "muted" }, `${o.total_chars} characters`),
    h("pre", { id: "observation" }, o.content));
}

// ---------------------------------------------------------------- routing

async function route() {
  const path = location.pathname.replace(/\/+$/, "");
  const params = new URLSearchParams(location.search);
  let m;
  try {
    if (path === "/ui" || path === "") await sessionsPage(params);
    else if ((m = path.match(/^\/ui\/sessions\/([^/]+)\/compactions\/([^/]+)$/))) await compactionPage(m[1], m[2]);
    else if ((m = path.match(/^\/ui\/sessions\/([^/]+)\/observations\/([^/]+)$/))) await observationPage(m[1], m[2]);
    else if ((m = path.match(/^\/ui\/sessions\/([^/]+)$/))) await sessionPage(m[1], params);
    else show(h("p", { class: "error" }, "No such page."));
  } catch (e) {
    show(failure(e));
  }
  document.body.setAttribute("data-ready", "true");
}

window.addEventListener("popstate", route);
route();
