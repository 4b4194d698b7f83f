// Dashboard benchmark driver for scripts/bench-ui (issue 19, item 5). Two modes:
//
//   node ui-bench.js tabs    Opens KM_TABS (comma-separated: overview, mirror, partitions,
//                            topic, operations) in Debian's headless Chromium, each in its own
//                            browser context (a separate tab and cookie jar), and keeps them
//                            open with the dashboard's own live htmx refresh (every 2 s) until
//                            SIGTERM/SIGINT. Writes KM_READY when every tab has refreshed at
//                            least twice, and on exit KM_OUT: per tab its URL, the number of live
//                            refreshes, their HTTP statuses and the browser-side timings.
//   node ui-bench.js sample  Sequential GETs of each endpoint in KM_ENDPOINTS (JSON list of
//                            {name, group, path}) from one keep-alive HTTP client: KM_WARMUP
//                            requests discarded, then KM_SAMPLES measured (request written ->
//                            last body byte read). Writes p50/p90/p99/max per endpoint to KM_OUT.
//
// Environment: KM_BASE (http://127.0.0.1:<port>), KM_MIRROR, KM_TOPIC (for the topic tab),
// CHROMIUM (default /usr/bin/chromium). playwright-core comes from NODE_PATH (the tree that
// scripts/test-browser installs from tests/browser/package-lock.json; no browser download).
"use strict";

const fs = require("fs");
const http = require("http");

const env = (k, d) => {
  const v = process.env[k] !== undefined && process.env[k] !== "" ? process.env[k] : d;
  if (v === undefined) throw new Error(`missing environment variable ${k}`);
  return v;
};

function pct(sorted, p) {
  if (!sorted.length) return null;
  // Nearest rank: the smallest value with at least p % of the samples at or below it.
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}
const round2 = (x) => (x === null ? null : Math.round(x * 100) / 100);

function summary(ms) {
  const s = [...ms].sort((a, b) => a - b);
  const mean = s.reduce((a, b) => a + b, 0) / (s.length || 1);
  return {
    n: s.length,
    p50_ms: round2(pct(s, 50)),
    p90_ms: round2(pct(s, 90)),
    p99_ms: round2(pct(s, 99)),
    max_ms: round2(s.length ? s[s.length - 1] : null),
    mean_ms: round2(mean),
  };
}

// ----- tabs ----------------------------------------------------------------------------------

async function tabs() {
  const { chromium } = require("playwright-core");
  const BASE = env("KM_BASE");
  const MIRROR = env("KM_MIRROR");
  const TOPIC = env("KM_TOPIC", "");
  const OUT = env("KM_OUT");
  const READY = env("KM_READY");
  const TOKEN = env("KM_TOKEN");
  const kinds = env("KM_TABS").split(",").map((s) => s.trim()).filter(Boolean);
  const m = encodeURIComponent(MIRROR);
  const urlOf = {
    overview: `${BASE}/`,
    mirror: `${BASE}/mirrors/${m}`,
    partitions: `${BASE}/mirrors/${m}/partitions?sort=lag`,
    topic: `${BASE}/mirrors/${m}/topics/${encodeURIComponent(TOPIC)}`,
    operations: `${BASE}/operations`,
  };
  const browser = await chromium.launch({
    executablePath: env("CHROMIUM", "/usr/bin/chromium"),
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
  const started = Date.now();
  const state = [];
  for (const [i, kind] of kinds.entries()) {
    const url = urlOf[kind];
    if (!url) throw new Error(`unknown tab kind ${kind}`);
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await ctx.newPage();
    const t = { tab: i + 1, kind, url, live: [], statuses: {}, errors: [], hidden: null, load_ms: null };
    page.on("pageerror", (e) => t.errors.push(`page error: ${e.message}`));
    page.on("console", (msg) => { if (msg.type() === "error") t.errors.push(`console: ${msg.text()}`); });
    page.on("requestfinished", async (req) => {
      if (!new URL(req.url()).pathname.startsWith("/ui/")) return;
      const resp = await req.response().catch(() => null);
      const status = resp ? resp.status() : 0;
      t.statuses[status] = (t.statuses[status] || 0) + 1;
      const tm = req.timing(); // ms relative to startTime; -1 when unknown
      t.live.push({ at: Date.now(), ttfb_ms: tm.responseStart, total_ms: tm.responseEnd });
    });
    page.on("requestfailed", (req) => {
      if (new URL(req.url()).pathname.startsWith("/ui/")) t.errors.push(`request failed: ${req.url()} ${req.failure() && req.failure().errorText}`);
    });
    // Sign in with the viewer token (the form of /signin), then open the page.
    await page.goto(`${BASE}/signin`, { timeout: 60_000 });
    await page.fill('input[name="token"]', TOKEN);
    await Promise.all([page.waitForURL((u) => !u.pathname.startsWith("/signin"), { timeout: 60_000 }), page.click('button[type="submit"]')]);
    const t0 = Date.now();
    const resp = await page.goto(url, { waitUntil: "load", timeout: 60_000 });
    t.load_ms = Date.now() - t0;
    if (!resp || resp.status() !== 200) throw new Error(`${url}: HTTP ${resp && resp.status()}`);
    const polled = await page.$("[data-poll]");
    if (!polled) throw new Error(`${url}: no live region ([data-poll]) on the page`);
    t.hidden = await page.evaluate(() => document.visibilityState);
    t.page = page;
    state.push(t);
  }
  // Ready once every tab has refreshed twice by itself (proves the live refresh runs in each).
  const deadline = Date.now() + 60_000;
  while (state.some((t) => t.live.length < 2)) {
    if (Date.now() > deadline) {
      throw new Error(`tabs without 2 live refreshes after 60 s: ${state.filter((t) => t.live.length < 2).map((t) => `${t.tab}:${t.kind}(${t.live.length}, ${t.hidden})`).join(" ")}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  const readyAt = Date.now();
  for (const t of state) t.mark = t.live.length;
  fs.writeFileSync(READY, `${readyAt}\n`);
  console.error(`[ui-bench tabs] ${state.length} tabs open and refreshing (${((readyAt - started) / 1000).toFixed(1)} s)`);

  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    const endAt = Date.now();
    const secs = (endAt - readyAt) / 1000;
    const out = {
      browser: browser.version(),
      ready_at_ms: readyAt,
      stopped_at_ms: endAt,
      open_secs: Math.round(secs * 10) / 10,
      tabs: state.map((t) => {
        const live = t.live.slice(t.mark).filter((x) => x.at <= endAt);
        const ok = live.filter((x) => x.total_ms >= 0).map((x) => x.total_ms);
        return {
          tab: t.tab,
          kind: t.kind,
          url: t.url,
          visibility: t.hidden,
          first_load_ms: t.load_ms,
          live_refreshes: live.length,
          refreshes_per_s: Math.round((live.length / secs) * 100) / 100,
          statuses: t.statuses,
          browser_timing: summary(ok),
          errors: t.errors.slice(0, 20),
        };
      }),
    };
    fs.writeFileSync(OUT, JSON.stringify(out, null, 2) + "\n");
    await browser.close().catch(() => {});
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  await new Promise(() => {}); // until a signal
}

// ----- sample --------------------------------------------------------------------------------

function get(agent, base, path, headers) {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const req = http.get(base + path, { agent, headers: { accept: "*/*", ...headers } }, (res) => {
      let bytes = 0;
      res.on("data", (c) => { bytes += c.length; });
      res.on("end", () => {
        const ms = Number(process.hrtime.bigint() - t0) / 1e6;
        resolve({ ms, status: res.statusCode, bytes });
      });
      res.on("error", reject);
    });
    req.on("error", reject);
    req.setTimeout(30_000, () => req.destroy(new Error(`timeout: ${path}`)));
  });
}

// Signs in like the form does (GET /signin sets the double-submit cookie, POST sends it back
// with the token) and returns the Cookie header of the session.
function request(method, url, headers, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers }, (res) => {
      let data = "";
      res.on("data", (c) => { data += c; });
      res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, body: data }));
    });
    req.on("error", reject);
    if (body) req.write(body);
    req.end();
  });
}
const cookiesOf = (res) => (res.headers["set-cookie"] || []).map((c) => c.split(";")[0]).filter((c) => !c.endsWith("="));

async function signIn(base, token) {
  const form = await request("GET", `${base}/signin`, {});
  const jar = cookiesOf(form);
  const csrf = (/name="_csrf" value="([^"]+)"/.exec(form.body) || [])[1];
  if (!csrf || !jar.length) throw new Error(`/signin: no CSRF token (HTTP ${form.status})`);
  const body = new URLSearchParams({ _csrf: csrf, token, next: "/" }).toString();
  const res = await request("POST", `${base}/signin`, {
    cookie: jar.join("; "),
    "content-type": "application/x-www-form-urlencoded",
    "content-length": Buffer.byteLength(body),
  }, body);
  const session = cookiesOf(res);
  if (res.status !== 303 && res.status !== 302 || !session.length) throw new Error(`sign-in failed: HTTP ${res.status}`);
  return session.join("; ");
}

// kmirror's own request histogram (/metrics: kmirror_http_request_duration_seconds by method,
// route and status): bucket counts per series.
function parseHistogram(text) {
  const out = {};
  const re = /^kmirror_http_request_duration_seconds_bucket\{(.*),le="([^"]+)"\} (\d+)/;
  for (const line of text.split("\n")) {
    const m = re.exec(line);
    if (!m) continue;
    (out[m[1]] = out[m[1]] || {})[m[2]] = Number(m[3]);
  }
  return out;
}
// The series that grew most between two scrapes (the sampled endpoint's: the tabs add a few
// requests to theirs), with its bucket counts over the interval and upper bounds of p50 / p99.
function serverSide(before, after) {
  let best = null;
  for (const [key, b] of Object.entries(after)) {
    const a = before[key] || {};
    const d = Object.fromEntries(Object.entries(b).map(([le, n]) => [le, n - (a[le] || 0)]));
    if (!best || d["+Inf"] > best.d["+Inf"]) best = { key, d };
  }
  if (!best || !best.d["+Inf"]) return null;
  const n = best.d["+Inf"];
  const les = Object.keys(best.d).filter((k) => k !== "+Inf").map(Number).sort((x, y) => x - y);
  const bound = (q) => { for (const le of les) if (best.d[String(le)] >= q * n) return le * 1000; return null; };
  return {
    series: best.key,
    requests: n,
    p50_ms_at_most: bound(0.5),
    p99_ms_at_most: bound(0.99),
    within_50ms_pct: Math.round(((best.d["0.05"] || 0) / n) * 10000) / 100,
  };
}

async function sample() {
  const BASE = env("KM_BASE");
  const TOKEN = env("KM_TOKEN");
  const cookie = await signIn(BASE, TOKEN);
  const OUT = env("KM_OUT");
  const N = Number(env("KM_SAMPLES", "200"));
  const W = Number(env("KM_WARMUP", "20"));
  const endpoints = JSON.parse(env("KM_ENDPOINTS"));
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const results = [];
  for (const e of endpoints) {
    const headers = e.path.startsWith("/api/") ? { authorization: `Bearer ${TOKEN}` } : { cookie };
    for (let i = 0; i < W; i++) await get(agent, BASE, e.path, headers);
    const scrape = async () => {
      const r = await request("GET", `${BASE}/metrics`, { authorization: `Bearer ${TOKEN}` });
      return r.status === 200 ? parseHistogram(r.body) : {};
    };
    const before = await scrape();
    const ms = [];
    const statuses = {};
    let bytes = 0;
    for (let i = 0; i < N; i++) {
      const r = await get(agent, BASE, e.path, headers);
      ms.push(r.ms);
      statuses[r.status] = (statuses[r.status] || 0) + 1;
      bytes = r.bytes;
    }
    const server = serverSide(before, await scrape());
    const s = { name: e.name, group: e.group, path: e.path, statuses, body_bytes: bytes, ...summary(ms), server };
    results.push(s);
    console.error(`[ui-bench sample] ${e.name.padEnd(34)} p50 ${String(s.p50_ms).padStart(7)} ms  p99 ${String(s.p99_ms).padStart(7)} ms  max ${String(s.max_ms).padStart(7)} ms  ${bytes} B  server p99 <= ${server && server.p99_ms_at_most} ms  ${JSON.stringify(statuses)}`);
  }
  agent.destroy();
  fs.writeFileSync(OUT, JSON.stringify({ samples: N, warmup: W, endpoints: results }, null, 2) + "\n");
}

const mode = process.argv[2];
(mode === "tabs" ? tabs() : mode === "sample" ? sample() : Promise.reject(new Error("usage: ui-bench.js tabs|sample")))
  .catch((e) => { console.error(`ui-bench: ${e && e.stack || e}`); process.exit(1); });
