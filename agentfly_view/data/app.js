// agentfly-view's page: three views (curves, episode list, one episode) over the JSON API, routed by
// the URL's hash so every view has an address. No framework: the DOM is built with el(), and every text
// from a run goes in as textContent, never as HTML.
"use strict";

const POLL_MS = 3000;
const POLL_INDEXING_MS = 700; // while a large run is still being indexed
const PAGE = 50;
// One colour per run; a run's per-env curves share it, told apart by their dashes.
const DASHES = [[6, 4], [2, 3], [10, 3, 2, 3], [1, 5], [12, 6]];
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"];
const CHARTS = [
  { title: "Reward", metrics: ["reward_mean", "reward"], env: "reward" },
  { title: "Success rate", metrics: ["success_rate"], env: "success" },
  { title: "Turns per episode", metrics: ["turns_per_episode"], env: "turns" },
  { title: "Tool calls per episode", metrics: ["tool_calls_per_episode"], env: "tool_calls" },
  { title: "KL", metrics: ["kl", "ppo_kl", "vllm_kl"] },
  { title: "Losses", metrics: ["policy_loss", "value_loss", "kl_loss"] },
];

// x ticks at whole increments only: the x axis counts training steps (or groups of episodes).
const WHOLE_INCRS = [1, 2, 5].flatMap((m) => [1, 10, 100, 1e3, 1e4, 1e5, 1e6].map((p) => m * p)).sort((a, b) => a - b);

// ticket: the latest render's number; a render whose answer comes after a newer one started drops it.
const state = { runs: [], overlay: null, signature: "", plots: [], ticket: 0 };

// The API's answer for the render holding `ticket`, or null when a newer render has started meanwhile.
async function answer(ticket, path, params) {
  const body = await api(path, params);
  return ticket === state.ticket ? body : null;
}

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key === "style") node.style.cssText = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  node.append(...nodes(children));
  return node;
}

// Children as DOM nodes: nested lists flattened, null/false skipped, anything else as text.
function nodes(children) {
  return children.flat(Infinity).filter((child) => child !== null && child !== undefined && child !== false)
    .map((child) => (child instanceof Node ? child : document.createTextNode(String(child))));
}

function fill(node, ...children) {
  node.replaceChildren(...nodes(children));
  return node;
}

async function api(path, params) {
  const query = params ? "?" + new URLSearchParams(params).toString() : "";
  const response = await fetch(path + query);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function route() {
  const hash = location.hash.replace(/^#\/?/, "") || "curves";
  const [name, query] = hash.split("?");
  return { name, params: Object.fromEntries(new URLSearchParams(query || "")) };
}

function go(name, params) {
  const clean = Object.fromEntries(Object.entries(params).filter(([, v]) => v !== "" && v !== undefined && v !== null));
  location.hash = `#/${name}?${new URLSearchParams(clean)}`;
}

function fmt(value, digits = 3) {
  return typeof value === "number" ? (Number.isInteger(value) ? String(value) : value.toFixed(digits)) : String(value ?? "-");
}

// ----------------------------------------------------------------------------- runs, notices, live refresh

function renderRuns() {
  const box = document.getElementById("runs");
  if (state.overlay === null) state.overlay = new Set(state.runs.slice(0, 2).map((r) => r.id));
  box.replaceChildren(
    ...state.runs.map((run) =>
      el("label", { title: run.path },
        el("input", {
          type: "checkbox", "data-run": run.id, ...(state.overlay.has(run.id) ? { checked: "" } : {}),
          onchange: (event) => {
            event.target.checked ? state.overlay.add(run.id) : state.overlay.delete(run.id);
            if (route().name === "curves") render();
          },
        }),
        ` ${run.name} `,
        el("span", { class: "meta", text: [run.algo, run.env, run.model].filter(Boolean).join(" · ") })))
  );
}

function renderNotices() {
  const notices = [];
  for (const run of state.runs) {
    const files = [["metrics.jsonl", run.metrics.corrupt, run.metrics.partial_tail]];
    for (const [name, source] of Object.entries(run.sources)) {
      files.push([name === "." ? "trajectories.jsonl" : `${name}/trajectories.jsonl`, source.corrupt, source.partial_tail]);
    }
    for (const [file, corrupt, partial] of files) {
      if (corrupt) notices.push(`${run.name}: ${corrupt} corrupt line${corrupt > 1 ? "s" : ""} skipped in ${file}`);
      if (partial) notices.push(`${run.name}: ${file} ends in an incomplete line (being written, or cut by a crash); not shown yet`);
    }
  }
  document.getElementById("notices").replaceChildren(...notices.map((text) => el("div", { class: "notice", text })));
}

async function loadRuns() {
  state.runs = await api("/api/runs");
  const signature = JSON.stringify(state.runs.map((r) => [r.metrics.bytes, Object.values(r.sources).map((s) => [s.bytes, s.indexed_bytes])]));
  const changed = signature !== state.signature;
  state.signature = signature;
  renderRuns();
  renderNotices();
  document.getElementById("updated").textContent = new Date().toLocaleTimeString();
  return changed;
}

async function poll() {
  if (document.getElementById("live").checked) {
    try {
      if ((await loadRuns()) && route().name !== "episode") await render();
    } catch (error) {
      document.getElementById("updated").textContent = `offline (${error.message})`;
    }
  }
  setTimeout(poll, indexing() ? POLL_INDEXING_MS : POLL_MS);
}

function indexing() {
  return state.runs.some((run) => Object.values(run.sources).some((source) => source.indexing));
}

// ----------------------------------------------------------------------------- curves

function lineSeries(runs, chart) {
  const series = [];
  runs.forEach((run) => {
    const color = COLORS[run.id % COLORS.length];
    const metrics = chart.metrics.filter((key) => run.metrics[key]);
    metrics.forEach((key, k) => {
      const s = run.metrics[key];
      series.push({ label: `${run.name} ${key}`, x: s.x, y: s.y, stroke: color, dash: k ? DASHES[(k - 1) % DASHES.length] : undefined });
    });
    const envs = Object.entries(run.episodes.envs);
    const fromEpisodes = chart.env && (envs.length > 1 || !metrics.length);
    if (fromEpisodes) {
      envs.forEach(([env, s], e) => {
        series.push({ label: `${run.name} ${env}`, x: s.x, y: s[chart.env], stroke: color, dash: DASHES[e % DASHES.length], width: 1 });
      });
    }
  });
  return series;
}

// The y range: uPlot's default (its rangeNum, padded 10%), but for a series flat at 0 (a KL of 0), which
// uPlot puts on a fixed 0 to 100 scale: there, a small range around 0.
function yRange(u, min, max) {
  if (min === null) return [null, null];
  return min === 0 && max === 0 ? [-1, 1] : uPlot.rangeNum(min, max, 0.1, true);
}

function plot(container, title, series, xLabel) {
  const box = el("div", { class: "chart", "data-chart": title }, el("h3", { text: title }));
  container.append(box);
  if (!series.length) {
    box.append(el("div", { class: "empty", text: "no data in these runs" }));
    return;
  }
  const data = uPlot.join(series.map((s) => [s.x, s.y]));
  const width = Math.max(300, box.clientWidth - 14);
  state.plots.push(new uPlot({
    width, height: 230,
    scales: { x: { time: false }, y: { range: yRange } },
    axes: [{ label: xLabel, incrs: WHOLE_INCRS }, {}],
    series: [{ label: xLabel }, ...series.map((s) => ({ label: s.label, stroke: s.stroke, dash: s.dash, width: s.width || 2, spanGaps: true, points: { size: 4 } }))],
  }, data, box));
}

async function showCurves(ticket) {
  const ids = [...state.overlay];
  const runs = ids.length ? await answer(ticket, "/api/curves", { runs: ids.join(",") }) : [];
  if (!runs) return;
  const charts = document.getElementById("charts");
  state.plots.forEach((p) => p.destroy());
  state.plots = [];
  charts.replaceChildren();
  document.getElementById("extra-chart").replaceChildren();
  if (!ids.length) {
    charts.append(el("p", { class: "hint", text: "Tick a run above." }));
    return;
  }
  const xLabel = runs.every((run) => Object.keys(run.metrics).length) ? "step" : runs[0].episodes.x_label;
  for (const chart of CHARTS) plot(charts, chart.title, lineSeries(runs, chart), xLabel);
  const select = document.getElementById("extra-metric");
  const keys = [...new Set(runs.flatMap((run) => Object.keys(run.metrics)))].sort();
  const current = select.value;
  select.replaceChildren(el("option", { value: "", text: "-" }), ...keys.map((key) => el("option", { value: key, text: key })));
  select.value = keys.includes(current) ? current : "";
  select.onchange = () => render();
  if (select.value) {
    plot(document.getElementById("extra-chart"), select.value, lineSeries(runs, { metrics: [select.value] }), "step");
  }
}

// ----------------------------------------------------------------------------- episode list

function options(select, values, current, labels = {}) {
  select.replaceChildren(el("option", { value: "", text: "any" }), ...values.map((v) => el("option", { value: v, text: labels[v] || v })));
  select.value = values.includes(current) ? current : "";
}

async function showEpisodes(params, ticket) {
  const run = state.runs.find((r) => String(r.id) === (params.run || "0")) || state.runs[0];
  const sources = Object.keys(run.sources);
  const source = sources.includes(params.source) ? params.source : sources.includes(".") ? "." : sources[0];
  const runSelect = document.getElementById("f-run");
  runSelect.replaceChildren(...state.runs.map((r) => el("option", { value: r.id, text: r.name })));
  runSelect.value = run.id;
  runSelect.onchange = () => go("episodes", { run: runSelect.value });
  const sourceSelect = document.getElementById("f-source");
  sourceSelect.replaceChildren(...sources.map((s) => el("option", { value: s, text: s === "." ? "trajectories.jsonl" : `${s}/trajectories.jsonl` })));
  sourceSelect.value = source;
  const info = document.getElementById("list-info");
  const body = document.querySelector("#episode-table tbody");
  if (source === undefined) {
    body.replaceChildren();
    info.textContent = "This run has no trajectories.jsonl.";
    return;
  }
  const offset = Number(params.offset || 0);
  const query = { ...params, run: run.id, source, offset, limit: PAGE };
  const page = await answer(ticket, "/api/episodes", query);
  if (!page) return;
  options(document.getElementById("f-env"), page.facets.envs, params.env || "");
  options(document.getElementById("f-outcome"), page.facets.outcomes, params.outcome || "", { ended: "ended (not truncated)" });
  document.getElementById("f-success").value = params.success || "";
  for (const [id, name] of [["f-min", "min_reward"], ["f-max", "max_reward"], ["f-step", "step"], ["f-q", "q"]]) {
    document.getElementById(id).value = params[name] || "";
  }
  const tools = await answer(ticket, "/api/tools", { run: run.id, source });
  if (!tools) return;
  renderTools(tools);
  const status = page.status;
  const skipped = status.corrupt ? `; ${status.corrupt} corrupt line${status.corrupt > 1 ? "s" : ""} skipped` : "";
  const progress = status.indexing ? ` Indexing the file: ${Math.floor((100 * status.indexed_bytes) / status.bytes)}% read, the list grows.` : "";
  info.textContent = `${page.total} of ${status.episodes} episodes match${skipped}.${progress}`;
  body.replaceChildren(...page.rows.map((row) =>
    el("tr", { "data-index": row.index, onclick: () => go("episode", { ...params, run: run.id, source, index: row.index }) },
      el("td", { text: row.index }),
      el("td", { text: row.episode_id ?? "-" }),
      el("td", { text: row.env }),
      el("td", { text: row.step ?? "-" }),
      el("td", { text: fmt(row.reward) }),
      el("td", { class: row.success ? "solved" : "failed", text: row.success ? "solved" : "failed" }),
      el("td", { text: row.outcome }),
      el("td", { text: row.turns }),
      el("td", { text: row.tool_calls }),
      el("td", { text: row.parse_errors }))));
  const last = Math.min(offset + PAGE, page.total);
  document.getElementById("page-info").textContent = page.total ? `${offset + 1}-${last} of ${page.total}` : "no episodes";
  const prev = document.getElementById("prev");
  const next = document.getElementById("next");
  prev.disabled = offset === 0;
  next.disabled = last >= page.total;
  prev.onclick = () => go("episodes", { ...query, limit: "", offset: Math.max(0, offset - PAGE) });
  next.onclick = () => go("episodes", { ...query, limit: "", offset: offset + PAGE });
}

// The file's tools, a row each: how often the model calls it, how often it fails or times out, how slow it is.
function renderTools(tools) {
  const panel = document.getElementById("tool-panel");
  const names = Object.keys(tools.tools);
  if (!names.length) {
    fill(panel);
    return;
  }
  const pct = (rate) => `${(100 * rate).toFixed(1)}%`;
  fill(panel,
    el("h3", { text: `Tools (${tools.episodes} episodes)` }),
    el("table", { id: "tool-table", class: "episodes" },
      el("thead", {}, el("tr", {}, ["tool", "calls", "calls per episode", "errors", "timeouts", "latency p50", "latency p95"].map((text) => el("th", { text })))),
      el("tbody", {}, names.map((name) => {
        const t = tools.tools[name];
        return el("tr", { "data-tool": name },
          el("td", { text: name }),
          el("td", { text: t.calls }),
          el("td", { text: t.calls_per_episode.toFixed(2) }),
          el("td", { class: t.error_rate ? "failed" : null, text: pct(t.error_rate) }),
          el("td", { class: t.timeout_rate ? "failed" : null, text: pct(t.timeout_rate) }),
          el("td", { text: `${t.latency_ms_p50.toFixed(2)} ms` }),
          el("td", { text: `${t.latency_ms_p95.toFixed(2)} ms` }));
      }))));
}

function submitFilters(event) {
  event.preventDefault();
  const form = new FormData(event.target);
  go("episodes", { ...Object.fromEntries(form.entries()), offset: 0 });
}

// ----------------------------------------------------------------------------- one episode

function section(label, text, cls) {
  if (text === undefined || text === null || text === "") return null;
  return el("div", { class: cls }, el("div", { class: "role", text: label }), el("pre", { text }));
}

function renderTurn(step, number, latency) {
  const flags = [step.terminated && "terminated", step.truncated && `truncated (${step.truncation_reason || "?"})`, step.success && "success"].filter(Boolean);
  const components = Object.entries(step.reward_components || {});
  const errors = Object.entries(step.errors || {});
  return el("div", { class: "turn", "data-turn": number },
    el("h3", { text: `Turn ${number + 1}` },
      el("span", { class: "kv", text: `  reward ${fmt(step.reward)}${flags.length ? " · " + flags.join(" · ") : ""}${latency !== undefined ? ` · env ${fmt(latency * 1000, 1)} ms` : ""}` })),
    section("model", step.action),
    (step.tool_calls || []).map((call) =>
      section(`tool call: ${call.name}`, typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments, null, 2), "call")),
    (step.tool_results || []).map((result) =>
      section(`result: ${result.name}${result.error ? ` (${result.error})` : ""}${result.cached ? " (cached)" : ""}${result.duration_s !== undefined ? ` · ${fmt(result.duration_s * 1000, 2)} ms` : ""}`, result.output, result.error ? "result error" : "result")),
    (step.parse_errors || []).map((error) =>
      section("parse error", error.message + (error.snippet ? `\n\n${error.snippet}` : ""), "parse-error")),
    errors.length ? el("div", { class: "kv", text: "errors: " + errors.map(([k, v]) => `${k} ${v}`).join(", ") }) : null,
    components.length ? el("table", { class: "components" },
      el("tr", {}, el("td", { class: "role", text: "reward components" })),
      components.map(([name, value]) => el("tr", {}, el("td", { text: name }), el("td", { text: fmt(value, 4) })))) : null,
    section("env", step.observation));
}

// Why an agent program's row started over (the gateway marks it; see agentfly_train/tokens_log.py).
const MISMATCH = "prefix mismatch: the conversation did not continue as the model wrote it";

// One token sequence as trained: generated tokens (mask 1) shaded by their probability, log-probs on hover.
function tokenBox(sequence, props) {
  const box = el("div", { class: "tokens", ...props });
  const fragment = document.createDocumentFragment();
  sequence.pieces.forEach((piece, i) => {
    const bit = sequence.mask[i];
    const logprob = sequence.logprobs[i];
    const span = document.createElement("span");
    span.className = `tok m${bit}${piece.includes("\n") ? " nl" : ""}`;
    span.dataset.mask = bit;
    span.textContent = piece;
    if (bit) {
      const p = Math.exp(logprob ?? 0);
      span.style.setProperty("--alpha", (0.2 + 0.65 * p).toFixed(2));
      span.dataset.logprob = logprob;
      span.title = `trained · log-prob ${fmt(logprob, 4)} (p ${fmt(p, 3)}) · id ${sequence.token_ids[i]}`;
    } else {
      span.title = `not trained (prompt, template or env) · id ${sequence.token_ids[i]}`;
    }
    fragment.append(span);
  });
  box.append(fragment);
  return box;
}

// An agent program's episode: each row (one conversation that continued exactly) in order, under #tokens.
function tokenRows(rows) {
  return el("div", { class: "token-rows", id: "tokens" }, rows.map((row, i) =>
    el("div", { class: `token-row${row.mismatch ? " mismatch" : ""}`, "data-row": i, "data-mismatch": row.mismatch ? 1 : 0 },
      el("h4", { text: `row ${i + 1} of ${rows.length}` },
        row.mismatch ? [" ", el("span", { class: "mismatch-mark", text: MISMATCH })] : null),
      tokenBox(row))));
}

function renderTokens(tokens) {
  if (!tokens) {
    return el("p", { class: "hint", id: "no-tokens", text: "No token record for this episode (the trainer writes tokens.jsonl beside its trajectories; eval and play runs have none)." });
  }
  if (tokens.damaged) {
    return el("p", { class: "notice", id: "no-tokens", text: `The token record of this episode is damaged: ${tokens.damaged}` });
  }
  const mask = tokens.rows ? tokens.rows.flatMap((row) => row.mask) : tokens.mask;
  const trained = mask.reduce((a, b) => a + b, 0);
  return el("div", {},
    el("h3", { text: "Tokens" }),
    el("div", { class: "legend" },
      el("span", {}, el("i", { style: "background: var(--trained)" }), `trained: generated by the model (${trained}); shade: its probability`),
      el("span", {}, el("i", { style: "background: var(--prompt)" }), `not trained: prompt, template, env (${mask.length - trained})`),
      el("span", { text: "hover a token for its log-prob" })),
    tokens.rows ? tokenRows(tokens.rows) : tokenBox(tokens, { id: "tokens" }));
}

// An agent program's rows in the episode's header: how many, and how many started on a prefix mismatch.
function rowsSummary(tokens) {
  if (!tokens || !tokens.rows) return null;
  const mismatched = tokens.rows.filter((row) => row.mismatch).length;
  return el("span", { class: "kv", id: "episode-rows" }, "rows ", el("b", { text: tokens.rows.length }),
    mismatched ? [" ", el("span", { class: "mismatch-mark", text: `${mismatched} prefix mismatch${mismatched > 1 ? "es" : ""}` })] : null);
}

// The task's fields, open when short (a long metadata block would push the turns off the screen).
function taskBlock(task) {
  if (!Object.keys(task || {}).length) return null;
  const text = JSON.stringify(task, null, 2);
  const lines = text.split("\n").length;
  return el("details", lines <= 12 ? { open: "" } : {}, el("summary", { text: `task (${Object.keys(task).join(", ")})` }), el("pre", { text }));
}

async function showEpisode(params, ticket) {
  const container = document.getElementById("episode");
  const episode = await answer(ticket, "/api/episode", { run: params.run, source: params.source, index: params.index });
  if (!episode) return;
  const { row, trajectory: t, tokens } = episode;
  const back = { ...params };
  delete back.index;
  document.getElementById("back").href = `#/episodes?${new URLSearchParams(back)}`;
  fill(container,
    el("div", { class: "episode-head" },
      el("h2", {}, "Episode ", el("span", { id: "episode-id", text: t.episode_id ?? `#${row.index}` })),
      el("span", { class: "kv" }, "env ", el("b", { text: t.env_id })),
      el("span", { class: "kv" }, "step ", el("b", { text: row.step ?? "-" })),
      el("span", { class: "kv" }, "reward ", el("b", { text: fmt(row.reward) })),
      el("span", { class: row.success ? "solved" : "failed", id: "episode-result", text: row.success ? "solved" : "failed" }),
      el("span", { class: "kv" }, "ending ", el("b", { text: row.outcome })),
      t.failure ? el("span", { class: "failed", id: "episode-failure", text: `failed: ${t.failure}` }) : null,
      el("span", { class: "kv" }, "seed ", el("b", { text: t.seed ?? "-" })),
      rowsSummary(tokens)),
    taskBlock(t.task),
    t.system_prompt ? el("details", {}, el("summary", { text: "system prompt" }), el("pre", { text: t.system_prompt })) : null,
    section("first observation", t.observation),
    (t.steps || []).map((step, i) => renderTurn(step, i, (t.latency_s || [])[i])),
    renderTokens(tokens));
}

// ----------------------------------------------------------------------------- routing

async function render() {
  const ticket = ++state.ticket;
  const { name, params } = route();
  for (const view of ["curves", "episodes", "episode"]) {
    document.getElementById(`view-${view}`).hidden = view !== name;
  }
  document.getElementById("nav-curves").classList.toggle("active", name === "curves");
  document.getElementById("nav-episodes").classList.toggle("active", name !== "curves");
  const error = document.getElementById("error");
  error.replaceChildren();
  try {
    if (name === "episodes") await showEpisodes(params, ticket);
    else if (name === "episode") await showEpisode(params, ticket);
    else await showCurves(ticket);
  } catch (failure) {
    error.append(el("div", { class: "notice", text: `error: ${failure.message}` }));
  }
}

async function start() {
  document.getElementById("filters").addEventListener("submit", submitFilters);
  window.addEventListener("hashchange", render);
  await loadRuns();
  await render();
  setTimeout(poll, indexing() ? POLL_INDEXING_MS : POLL_MS);
}

start();
