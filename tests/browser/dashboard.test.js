// Browser tests for the kmirror dashboard, in Debian's headless Chromium driven by
// playwright-core (no browser download). Run by scripts/test-browser, which starts
// `kmirror serve` against the Kafka rig and creates the source topics; this file only talks
// to the dashboard (and produces extra source records with the rig's Kafka tools).
//
// Environment (set by scripts/test-browser):
//   KM_BASE            http://127.0.0.1:<port>
//   KM_ADMIN_TOKEN, KM_OPERATOR_TOKEN, KM_VIEWER_TOKEN
//   KM_MIRROR          the mirror name to create
//   KM_TOPIC_A, KM_TOPIC_B   source topics that exist with records
//   KM_SOURCE_BOOTSTRAP      the rig's source cluster
//   KM_DEST_BOOTSTRAP        the rig's destination cluster (a foreign write into a mirror topic)
//   KM_PRODUCE         a command that reads lines on stdin and produces them: `<cmd> <topic>`
//   KM_SHOTS           directory for screenshots
//   CHROMIUM           the browser binary (default /usr/bin/chromium)
"use strict";

const { chromium } = require("playwright-core");
const { spawn, spawnSync } = require("child_process");
const fs = require("fs");
const path = require("path");

const env = (k, d) => {
  const v = process.env[k] || d;
  if (v === undefined) throw new Error(`missing environment variable ${k}`);
  return v;
};
const BASE = env("KM_BASE");
const ADMIN = env("KM_ADMIN_TOKEN");
const OPERATOR = env("KM_OPERATOR_TOKEN");
const VIEWER = env("KM_VIEWER_TOKEN");
const MIRROR = env("KM_MIRROR");
const A = env("KM_TOPIC_A");
const B = env("KM_TOPIC_B");
const C = env("KM_TOPIC_C");
const SOURCE = env("KM_SOURCE_BOOTSTRAP");
const DEST = env("KM_DEST_BOOTSTRAP");
const PRODUCE = env("KM_PRODUCE");
const SHOTS = env("KM_SHOTS");
const CHROMIUM = env("CHROMIUM", "/usr/bin/chromium");
const STATE_TIMEOUT = 90_000;

fs.mkdirSync(SHOTS, { recursive: true });

const results = [];
let browser;
const problems = []; // console errors and page errors (CSP violations show up here)

async function test(name, fn) {
  const started = Date.now();
  try {
    await fn();
    results.push({ name, ok: true });
    console.log(`  ok   ${name} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
  } catch (e) {
    results.push({ name, ok: false, error: e });
    console.log(`  FAIL ${name} (${((Date.now() - started) / 1000).toFixed(1)} s)\n       ${String(e && e.stack || e).split("\n").slice(0, 6).join("\n       ")}`);
  }
}

function assert(cond, msg) {
  if (!cond) throw new Error(`assertion failed: ${msg}`);
}

async function newPage(opts = {}) {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 }, ...opts });
  const page = await ctx.newPage();
  page.setDefaultTimeout(30_000);
  page.on("console", (m) => {
    // Expected refusals (401 sign-in, 403 viewer, 422 unconfirmed) are logged by Chromium as
    // failed loads; server errors, CSP violations and script errors are not expected at all.
    if (m.type() !== "error") return;
    const t = m.text();
    if (/Failed to load resource: the server responded with a status of 4\d\d/.test(t)) return;
    problems.push(`console error on ${page.url()}: ${t}`);
  });
  page.on("pageerror", (e) => problems.push(`page error on ${page.url()}: ${e.message}`));
  return page;
}

async function signIn(page, token) {
  await page.goto(`${BASE}/signin`);
  await page.fill('input[name="token"]', token);
  await Promise.all([page.waitForURL((u) => !u.pathname.startsWith("/signin")), page.click('button[type="submit"]')]);
}

async function shot(page, name) {
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

const row = (topic) => `tr[data-topic="${topic}"]`;

async function rowState(page, topic) {
  return (await page.textContent(`${row(topic)} .badge`)).trim();
}

async function waitRowState(page, topic, state) {
  await page.waitForFunction(
    ([sel, state]) => {
      const b = document.querySelector(sel + " .badge");
      return b && b.textContent.trim() === state;
    },
    [row(topic), state],
    { timeout: STATE_TIMEOUT },
  );
}

// A marker that survives only as long as the page is not reloaded.
async function mark(page) {
  await page.evaluate(() => { window.__kmirrorNoReload = 42; });
}
async function assertNotReloaded(page) {
  assert((await page.evaluate(() => window.__kmirrorNoReload)) === 42, "the page was reloaded");
}

// Opens the confirmation dialog for an action on a topic row and returns the dialog locator.
async function openDialog(page, topic, op) {
  await page.click(`${row(topic)} a[data-op="${op}"]`);
  const dialog = page.locator("dialog[open]");
  await dialog.waitFor({ state: "visible" });
  return dialog;
}

async function confirmAndExpectAccepted(page, dialog) {
  await page.evaluate(() => { document.getElementById("results").innerHTML = ""; });
  await Promise.all([
    page.waitForResponse((r) => r.url().endsWith("/actions") && r.request().method() === "POST", { timeout: 60_000 }),
    dialog.locator('button[type="submit"]').click(),
  ]);
  await page.waitForSelector("#results .results", { timeout: 30_000 });
  const text = await page.textContent("#results");
  assert(/accepted/.test(text) && !/refused/.test(text), `action results: ${text.replace(/\s+/g, " ")}`);
  assert((await page.locator("dialog[open]").count()) === 0, "the dialog closes after the action");
}

// Produces `perSecond` records a second to each of `topics` until the returned function is
// called (a steady trickle, so the charts have something to draw).
function trickle(topics, perSecond, prefix) {
  const procs = topics.map((topic) => {
    const p = spawn("bash", ["-c", `${PRODUCE} "$1"`, "produce", topic], { stdio: ["pipe", "ignore", "ignore"] });
    p.stdin.on("error", () => {});
    return p;
  });
  let n = 0;
  const timer = setInterval(() => {
    for (const p of procs) {
      const lines = Array.from({ length: Math.max(1, Math.round(perSecond / 4)) }, () => `${prefix}-${n++}`).join("\n");
      p.stdin.write(lines + "\n");
    }
  }, 250);
  return () => {
    clearInterval(timer);
    for (const p of procs) p.stdin.end();
  };
}

function produce(topic, n, prefix, bootstrap = SOURCE) {
  const lines = Array.from({ length: n }, (_, i) => `${prefix}-${i}`).join("\n") + "\n";
  const cmd = PRODUCE.replace(`--bootstrap-server ${SOURCE}`, `--bootstrap-server ${bootstrap}`);
  const r = spawnSync("bash", ["-c", `${cmd} "$1"`, "produce", topic], { input: lines, encoding: "utf8", timeout: 120_000 });
  if (r.status !== 0) throw new Error(`producing to ${topic} failed: ${r.stderr || r.error}`);
}

(async () => {
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
  console.log(`browser: ${CHROMIUM} ${browser.version()}`);
  const admin = await newPage();

  await test("unauthenticated visitors are sent to sign-in", async () => {
    await admin.goto(`${BASE}/mirrors/${MIRROR}`);
    assert(new URL(admin.url()).pathname === "/signin", `landed on ${admin.url()}`);
    await shot(admin, "01-signin");
  });

  await test("a wrong token is refused with a readable message", async () => {
    await admin.fill('input[name="token"]', "not-a-valid-token");
    await admin.click('button[type="submit"]');
    await admin.waitForSelector(".callout.bad");
    assert(/not valid/.test(await admin.textContent(".callout.bad")), "error message");
  });

  await test("admin signs in and creates a mirror with the overview's New mirror button", async () => {
    await signIn(admin, ADMIN);
    await admin.goto(`${BASE}/`);
    await Promise.all([admin.waitForURL("**/new-mirror"), admin.click('a.btn:has-text("Create the first mirror")')]);
    assert((await admin.locator('input[name="name"]').count()) === 1, "the New mirror form");
    await admin.goto(`${BASE}/`);
    await Promise.all([admin.waitForURL("**/new-mirror"), admin.click('a.btn:has-text("New mirror")')]);
    await admin.fill('input[name="name"]', MIRROR);
    await admin.fill('input[name="bootstrap"]', SOURCE);
    await Promise.all([admin.waitForURL(`**/mirrors/${MIRROR}`), admin.click('button:has-text("Create mirror")')]);
    assert((await admin.textContent("h1")).includes(MIRROR), "mirror page title");
  });

  await test("start two topics from the dashboard and see them reach MIRRORING without a reload", async () => {
    await admin.click('summary:has-text("Start mirroring topics")');
    await admin.fill('textarea[name="names"]', `${A} ${B}`);
    await mark(admin);
    await admin.click('button:has-text("Start mirroring")');
    await admin.waitForSelector("#results .results");
    const text = await admin.textContent("#results");
    assert(/accepted for 2 topics/.test(text), `results: ${text.replace(/\s+/g, " ")}`);
    await waitRowState(admin, A, "MIRRORING");
    await waitRowState(admin, B, "MIRRORING");
    await assertNotReloaded(admin);
  });

  await test("pause a topic: confirmation dialog, then PAUSED appears without a reload", async () => {
    const dialog = await openDialog(admin, A, "pause");
    assert((await dialog.textContent("h2")).includes(A), "dialog names the topic");
    await confirmAndExpectAccepted(admin, dialog);
    await waitRowState(admin, A, "PAUSED");
    await assertNotReloaded(admin);
  });

  await test("resume the topic: MIRRORING again", async () => {
    const dialog = await openDialog(admin, A, "resume");
    await confirmAndExpectAccepted(admin, dialog);
    await waitRowState(admin, A, "MIRRORING");
    await assertNotReloaded(admin);
  });

  await test("failover needs the typed topic name, shows the lag per partition, then STOPPED", async () => {
    const dialog = await openDialog(admin, A, "failover");
    assert((await dialog.locator("table tbody tr").count()) > 0, "per-partition impact rows");
    assert(/not be mirrored|loses nothing/.test(await dialog.textContent(".impact-total")), "impact summary");
    const submit = dialog.locator('button[type="submit"]');
    assert(await submit.isDisabled(), "button disabled before typing");
    await dialog.locator('input[name="confirm"]').fill(A.slice(0, -1));
    assert(await submit.isDisabled(), "button disabled with a wrong name");
    await dialog.locator('input[name="confirm"]').fill(A);
    assert(!(await submit.isDisabled()), "button enabled with the exact name");
    await confirmAndExpectAccepted(admin, dialog);
    await waitRowState(admin, A, "STOPPED");
    await assertNotReloaded(admin);
  });

  await test("a forged failover without the typed name is refused by the server", async () => {
    const status = await admin.evaluate(async ([mirror, topic]) => {
      const csrf = JSON.parse(document.body.getAttribute("hx-headers"))["X-CSRF-Token"];
      const body = new URLSearchParams({ _csrf: csrf, op: "failover", topic });
      const r = await fetch(`/mirrors/${mirror}/actions`, { method: "POST", body });
      return r.status;
    }, [MIRROR, B]);
    assert(status === 422, `status ${status}`);
    assert((await rowState(admin, B)) === "MIRRORING", "topic B untouched");
  });

  await test("restart the STOPPED topic (no truncation): MIRRORING again", async () => {
    const dialog = await openDialog(admin, A, "restart");
    assert((await dialog.locator('input[name="truncation"]').count()) === 3, "truncation choices");
    await confirmAndExpectAccepted(admin, dialog);
    await waitRowState(admin, A, "MIRRORING");
  });

  await test("the topic policy: preview what it starts, save it, and the matching topic is mirrored", async () => {
    await admin.goto(`${BASE}/mirrors/${MIRROR}`);
    const card = admin.locator("#topic-policy");
    assert(/no pattern/.test(await card.textContent()), "no include pattern yet");
    await admin.click('#topic-policy summary:has-text("Edit topic policy")');
    await admin.fill('#topic-policy textarea[name="topic_include"]', `${C}|${A}`);
    await mark(admin);
    await admin.click('#topic-policy button:has-text("Preview")');
    await admin.waitForSelector("#policy-preview [data-policy-preview]");
    const starts = await admin.textContent("#policy-preview [data-would-start]");
    assert(starts.includes(C) && !starts.includes(A), `the preview starts only the new topic: ${starts}`);
    assert(/stops no topic/.test(await admin.textContent("#policy-preview [data-would-stop]")), "nothing stopped");
    await assertNotReloaded(admin);
    assert((await admin.locator(row(C)).count()) === 0, "a preview changes nothing");
    await shot(admin, "22-topic-policy-preview");
    await Promise.all([admin.waitForURL(`**/mirrors/${MIRROR}*`), admin.click('#topic-policy button:has-text("Save policy")')]);
    assert((await admin.textContent("#topic-policy")).includes(`${C}|${A}`), "the saved pattern is shown");
    await waitRowState(admin, C, "MIRRORING");
    await shot(admin, "23-topic-policy");
  });

  const nojs = await newPage({ javaScriptEnabled: false });
  await test("without JavaScript: sign in, read, and pause through the confirmation page", async () => {
    await signIn(nojs, OPERATOR);
    await nojs.goto(`${BASE}/mirrors/${MIRROR}`);
    assert((await rowState(nojs, B)) === "MIRRORING", "table rendered server-side");
    await nojs.click(`${row(B)} a[data-op="pause"]`);
    await nojs.waitForURL(/\/confirm\?/);
    await shot(nojs, "12-no-js-confirm");
    await nojs.click('.confirm-form button[type="submit"]');
    await nojs.waitForURL(/done=/);
    assert(/accepted/.test(await nojs.textContent("#results")), "results shown after redirect");
    await nojs.waitForTimeout(1500);
    for (let i = 0; i < 60 && (await rowState(nojs, B)) !== "PAUSED"; i++) {
      await nojs.waitForTimeout(1000);
      await nojs.reload();
    }
    assert((await rowState(nojs, B)) === "PAUSED", "paused");
  });

  await test("lag of a paused topic shows up and the failover dialog says what would be lost", async () => {
    produce(B, 240, "late");
    await admin.waitForFunction(
      (sel) => { const c = document.querySelector(sel + " td.lag-rec"); return c && c.textContent.trim() === "240"; },
      row(B), { timeout: STATE_TIMEOUT },
    );
    await shot(admin, "03-mirror");
    const dialog = await openDialog(admin, B, "failover");
    const total = await dialog.textContent(".impact-total");
    assert(/240 records/.test(total), `impact: ${total}`);
    await dialog.locator('input[name="confirm"]').fill(B);
    await admin.screenshot({ path: path.join(SHOTS, "04-failover-dialog.png") });
    await dialog.locator("[data-close]").first().click();
    assert((await admin.locator("dialog[open]").count()) === 0, "cancel closes the dialog");
    assert((await rowState(admin, B)) === "PAUSED", "nothing changed");
  });

  await test("topic, worst-lag and failed partition views", async () => {
    await admin.goto(`${BASE}/mirrors/${MIRROR}/topics/${B}`);
    assert((await admin.locator("table.partitions tbody tr").count()) === 3, "three partitions");
    await shot(admin, "05-topic");
    await admin.goto(`${BASE}/mirrors/${MIRROR}`);
    await Promise.all([admin.waitForURL(/sort=lag/), admin.click('a:has-text("Worst-lag partitions")')]);
    const firstLag = await admin.textContent("table.partitions tbody tr:first-child td.lag-rec");
    assert(firstLag && firstLag.trim() !== "0", "worst lag first");
    await shot(admin, "06-partitions-worst-lag");
    await admin.click('nav.quick a:has-text("Failed")');
    assert(/No partition matches/.test(await admin.textContent("table.partitions")), "no failed partitions");
  });

  await test("overview, operations and audit pages", async () => {
    await admin.goto(`${BASE}/`);
    await admin.waitForSelector(".mirror-card");
    await admin.waitForTimeout(2500);
    await shot(admin, "02-overview");
    await admin.goto(`${BASE}/operations`);
    assert((await admin.locator("table.ops tbody tr").count()) >= 5, "operations listed");
    await shot(admin, "07-operations");
    await admin.goto(`${BASE}/audit`);
    const audit = await admin.textContent("table.ops");
    assert(/Create mirror/.test(audit) && /Fail over/.test(audit), "audit trail has the calls");
    await shot(admin, "08-audit");
  });

  await test("instances page: this instance is marked and owns slots; partitions name their owner", async () => {
    await admin.goto(`${BASE}/instances`);
    assert((await admin.textContent('nav.nav a[aria-current="page"]')).trim() === "Instances", "nav entry is current");
    const rows = admin.locator("table.instances tbody tr[data-instance]");
    assert((await rows.count()) >= 1, "at least this instance");
    const me = admin.locator("table.instances tbody tr.this-row");
    assert((await me.count()) === 1, "exactly one row is this instance");
    assert(/this instance/.test(await me.textContent()), "the marker is shown");
    const id = await me.getAttribute("data-instance");
    const slots = (await me.locator("td.num").first().textContent()).trim();
    assert(Number(slots) > 0, `this instance owns slots (${slots})`);
    assert(/group|standalone/.test(await admin.textContent("section.stats")), "the mode is shown");
    await admin.waitForTimeout(2500); // one live refresh: the table is still there
    assert((await admin.locator("table.instances tbody tr.this-row").count()) === 1, "still there after a refresh");
    await shot(admin, "13-instances");
    await admin.goto(`${BASE}/mirrors/${MIRROR}/topics/${B}`);
    const owners = (await admin.locator("table.partitions td.owner").allTextContents()).map((o) => o.trim());
    assert(owners.length === 3 && owners.every((o) => o === `this ${id}`), `owners: ${owners.join(" | ")}`);
  });

  await test("a viewer reads everything, sees no action buttons, and is refused on POST", async () => {
    const viewer = await newPage();
    await signIn(viewer, VIEWER);
    await viewer.goto(`${BASE}/mirrors/${MIRROR}`);
    await viewer.waitForSelector(row(A));
    assert((await viewer.locator("a[data-op], #sel, input[name=topic], summary:has-text('Start mirroring')").count()) === 0, "no buttons");
    await viewer.waitForTimeout(2500); // one live refresh: still no buttons
    assert((await viewer.locator("a[data-op]").count()) === 0, "no buttons after refresh");
    await shot(viewer, "09-viewer-mirror");
    const status = await viewer.evaluate(async ([mirror, topic]) => {
      const csrf = JSON.parse(document.body.getAttribute("hx-headers"))["X-CSRF-Token"];
      const r = await fetch(`/mirrors/${mirror}/actions`, { method: "POST", body: new URLSearchParams({ _csrf: csrf, op: "pause", topic }) });
      return r.status;
    }, [MIRROR, A]);
    assert(status === 403, `status ${status}`);
    await viewer.context().close();
  });

  await test("dark mode and half-width layouts render", async () => {
    const dark = await newPage({ colorScheme: "dark" });
    await signIn(dark, VIEWER);
    await dark.goto(`${BASE}/`);
    await dark.waitForSelector(".mirror-card");
    const bg = await dark.evaluate(() => getComputedStyle(document.body).backgroundColor);
    assert(bg !== "rgb(245, 246, 248)", `dark background, got ${bg}`);
    await shot(dark, "10-overview-dark");
    await dark.goto(`${BASE}/mirrors/${MIRROR}`);
    await shot(dark, "10b-mirror-dark");
    await dark.goto(`${BASE}/instances`);
    await dark.waitForSelector("table.instances tr.this-row");
    await shot(dark, "10c-instances-dark");
    await dark.context().close();
    const narrow = await newPage({ viewport: { width: 700, height: 900 } });
    await signIn(narrow, OPERATOR);
    await narrow.goto(`${BASE}/mirrors/${MIRROR}`);
    const overflow = await narrow.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert(overflow <= 0, `page wider than the window by ${overflow}px (tables scroll inside their box)`);
    await shot(narrow, "11-mirror-half-width");
    await narrow.context().close();
  });

  await test("lag and throughput charts render on the overview, mirror and topic pages, light and dark", async () => {
    // Traffic into both topics (B is paused: its lag grows; A is mirrored), and the screenshots
    // wait until the mirror page's charts show both: a chart of flat zeros documents nothing.
    const stop = trickle([A, B], 40, "chart");
    try {
      const page = await newPage();
      await signIn(page, VIEWER);
      await page.goto(`${BASE}/mirrors/${MIRROR}`);
      await page.waitForFunction(() => {
        const titles = Array.from(document.querySelectorAll("svg.chart-svg title")).map((t) => t.textContent);
        const samples = (t) => Number((/\((\d+) samples\)/.exec(t) || [])[1] || 0);
        const lag = titles.find((t) => t.startsWith("Lag over"));
        const thru = titles.find((t) => t.startsWith("Throughput over"));
        return lag && thru && samples(lag) >= 6 && /lag now [1-9]/.test(lag) && /mirrored now [1-9]/.test(thru);
      }, null, { timeout: 150_000, polling: 2_000 });
      await page.context().close();
    } catch (e) {
      stop();
      throw e;
    }
    const strokes = {};
    for (const scheme of ["light", "dark"]) {
      const page = await newPage({ colorScheme: scheme });
      await signIn(page, VIEWER);
      for (const [url, name] of [
        [`${BASE}/`, "overview"],
        [`${BASE}/mirrors/${MIRROR}`, "mirror"],
        [`${BASE}/mirrors/${MIRROR}/topics/${A}`, "topic"],
      ]) {
        await page.goto(url);
        // The history samples every 10 s; the live refresh (2 s) brings the lines in.
        await page.waitForSelector("svg.chart-svg polyline.l-lag", { state: "attached", timeout: 30_000 });
        const charts = await page.$$eval("svg.chart-svg", (svgs) =>
          svgs.map((s) => ({
            role: s.getAttribute("role"),
            title: (s.querySelector("title") || {}).textContent || "",
            labelled: document.getElementById(s.getAttribute("aria-labelledby")) !== null,
            width: s.getBoundingClientRect().width,
          })),
        );
        assert(charts.length >= 2, `${name} (${scheme}): ${charts.length} charts`);
        for (const c of charts) {
          assert(c.role === "img" && c.labelled, `${name} (${scheme}): accessible chart ${JSON.stringify(c)}`);
          assert(/over the last hour/.test(c.title), `${name} (${scheme}): text summary ${c.title}`);
          assert(c.width > 100, `${name} (${scheme}): chart width ${c.width}`);
        }
        assert((await page.$$("[data-eta]")).length >= 1, `${name} (${scheme}): catch-up estimate shown`);
        strokes[`${scheme}-${name}`] = await page.$eval("svg.chart-svg polyline.l-lag", (l) => getComputedStyle(l).stroke);
        if (name === "mirror") await shot(page, scheme === "light" ? "14-mirror-charts" : "14b-mirror-charts-dark");
      }
      // Still there after a live refresh.
      await page.waitForTimeout(2_500);
      assert((await page.$$("svg.chart-svg polyline")).length >= 1, `${scheme}: lines survive the live refresh`);
      await page.context().close();
    }
    stop();
    assert(strokes["light-mirror"] !== strokes["dark-mirror"], `themed line colours: ${JSON.stringify(strokes)}`);
  });

  await test("the footer's API reference opens /api/docs and lists the API's operations", async () => {
    const page = await newPage();
    await signIn(page, VIEWER);
    await page.goto(`${BASE}/`);
    await Promise.all([page.waitForURL("**/api/docs"), page.click('footer a:has-text("API reference")')]);
    await page.waitForSelector("#api-reference .opblock", { timeout: 30_000 });
    const paths = (await page.locator("#api-reference .opblock-summary-path").allTextContents()).map((p) => p.trim());
    for (const want of ["/api/v1/mirrors", "/api/v1/mirrors/{mirror}/topics:stop", "/api/v1/mirrors/{mirror}/partitions"]) {
      assert(paths.includes(want), `${want} listed among ${paths.length} operations`);
    }
    assert(paths.length >= 20, `${paths.length} operations`);
    // The spec's own link works without a token; the page needs a signed-in user.
    await shot(page, "17-api-reference");
    await page.context().close();
    const anonymous = await newPage();
    await anonymous.goto(`${BASE}/api/docs`);
    assert(new URL(anonymous.url()).pathname === "/signin", `unauthenticated: landed on ${anonymous.url()}`);
    await anonymous.context().close();
  });

  await test("a FAILED partition offers Recover; a foreign write is refused and says what to do", async () => {
    await admin.goto(`${BASE}/mirrors/${MIRROR}`);
    assert((await admin.locator(`${row(A)} a[data-op="recover"]`).count()) === 0, "no Recover without a FAILED partition");
    // A record written into the mirror topic by someone else: kmirror's next write to that
    // partition finds it there and fails the partition (FOREIGN_WRITE, for an operator).
    produce(A, 1, "foreign", DEST);
    produce(A, 12, "after-foreign");
    await admin.waitForSelector(`${row(A)} a[data-op="recover"]`, { timeout: STATE_TIMEOUT });
    const dialog = await openDialog(admin, A, "recover");
    assert((await dialog.textContent("h2")).includes(A), "dialog names the topic");
    assert(/retried now/.test(await dialog.textContent(".explain")), "the dialog says what a recover does");
    assert((await dialog.locator("table tbody tr.warn-row").count()) === 1, "the FAILED partition is listed, marked");
    assert(/FOREIGN_WRITE/.test(await dialog.textContent(".impact-total")), "the dialog warns of the refusal");
    await shot(admin, "15-recover-dialog");
    await admin.evaluate(() => { document.getElementById("results").innerHTML = ""; });
    await Promise.all([
      admin.waitForResponse((r) => r.url().endsWith("/actions") && r.request().method() === "POST", { timeout: 60_000 }),
      dialog.locator('button[type="submit"]').click(),
    ]);
    await admin.waitForSelector("#results .results", { timeout: 30_000 });
    const text = (await admin.textContent("#results")).replace(/\s+/g, " ");
    assert(/refused/.test(text) && /FOREIGN_WRITE/.test(text) && /stop the topic/.test(text), `results: ${text}`);
    // Left FAILED; its partition row says what to do.
    await admin.goto(`${BASE}/mirrors/${MIRROR}/topics/${A}`);
    const problem = (await admin.textContent("table.partitions td.problem .bad-text")) || "";
    assert(/needs an operator/.test(problem), `partition row: ${problem}`);
    await admin.goto(`${BASE}/operations?kind=recover`);
    const ops = await admin.textContent("table.ops");
    assert(/Recover/.test(ops) && ops.includes(A), `the recover is listed: ${ops.replace(/\s+/g, " ")}`);
  });

  await test("after a failover, writes to the old source are flagged live, topic and partition", async () => {
    // A is FAILED (the foreign write above) with records the failover leaves behind: those are
    // its loss, not writes after it.
    await admin.goto(`${BASE}/mirrors/${MIRROR}`);
    const dialog = await openDialog(admin, A, "failover");
    await dialog.locator('input[name="confirm"]').fill(A);
    await confirmAndExpectAccepted(admin, dialog);
    await waitRowState(admin, A, "STOPPED");
    await mark(admin);
    // A producer that was not moved writes to the old source.
    produce(A, 7, "split-brain");
    await admin.waitForSelector(".split-brain", { timeout: STATE_TIMEOUT });
    const note = (await admin.textContent(".split-brain")).replace(/\s+/g, " ");
    assert(/still receives records/.test(note) && /After the failover, 7 records were written to the old source/.test(note) && note.includes(A),
      `the mirror page names the topic and the count: ${note}`);
    await assertNotReloaded(admin);
    await shot(admin, "16-old-source-writes");
    await admin.click(`.split-brain a[href$="/topics/${A}"]`);
    await admin.waitForSelector("table.partitions");
    const tags = await admin.locator("table.partitions .tag.warn").allTextContents();
    const total = tags.map((t) => Number(t.replace(/[^0-9]/g, ""))).reduce((a, b) => a + b, 0);
    assert(tags.length > 0 && total === 7, `partition rows carry the counts: ${JSON.stringify(tags)}`);
  });

  await test("run a DR drill from the mirror page and read its result", async () => {
    await admin.goto(`${BASE}/mirrors/${MIRROR}`);
    await admin.evaluate(() => { document.getElementById("results").innerHTML = ""; });
    await Promise.all([
      admin.waitForResponse((r) => r.url().endsWith("/drills") && r.request().method() === "POST", { timeout: 60_000 }),
      admin.click("button[data-run-drill]"),
    ]);
    await admin.waitForSelector("#results .results", { timeout: 30_000 });
    const started = (await admin.textContent("#results")).replace(/\s+/g, " ");
    assert(/DR drill .* started/.test(started), `the drill starts: ${started}`);
    // Its steps show live while it runs, then the verdict and the figures.
    await admin.waitForSelector('tr[data-drill-status="passed"], tr[data-drill-status="failed"]', { timeout: 180_000 });
    const drill = admin.locator("tr[data-drill]").first();
    assert((await drill.getAttribute("data-drill-status")) === "passed",
      `the drill passed: ${(await drill.textContent()).replace(/\s+/g, " ")}`);
    const cells = (await drill.locator("td").allTextContents()).map((t) => t.trim());
    assert(/ms|s$/.test(cells[1]) && cells[2] === "0" && cells[3] === "0" && cells[4] === "exactly",
      `RTO, lost, duplicated, group: ${JSON.stringify(cells)}`);
    const href = await drill.locator("a[data-report-json]").getAttribute("href");
    const report = await admin.request.get(`${BASE}${href}`);
    assert(report.ok(), `the report downloads: ${report.status()}`);
    const json = await report.json();
    assert(json.result === "pass" && json.digest && json.digest.value.length === 64, `the report: ${JSON.stringify(json).slice(0, 300)}`);
    await shot(admin, "18-drills");
    // The drill's operation page shows its steps.
    await admin.click(`tr[data-drill] th a`);
    await admin.waitForSelector("[data-drill-detail]");
    const steps = await admin.locator("[data-drill-detail] .steps li").count();
    assert(steps === 7, `seven steps: ${steps}`);
  });

  await test("request a failover as one user and approve it as another", async () => {
    // Failovers of this mirror need a second person (set through the API, as an admin).
    const patched = await admin.request.patch(`${BASE}/api/v1/mirrors/${MIRROR}`, {
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
      data: { approval: { required_for: ["stop"], expires_after_seconds: 900 } },
    });
    assert(patched.ok(), `the policy is set: ${patched.status()} ${await patched.text()}`);
    const operator = await newPage();
    await signIn(operator, OPERATOR);
    await operator.goto(`${BASE}/mirrors/${MIRROR}`);
    const before = await rowState(operator, B);
    // The dialog says so before anything is sent, and asks for a reason.
    const dialog = await openDialog(operator, B, "failover");
    const note = (await dialog.textContent("[data-approval-required]")).replace(/\s+/g, " ");
    assert(/needs a second person's approval/.test(note), `the dialog says approval is needed: ${note}`);
    assert(/Request fail over/i.test(await dialog.locator('button[type="submit"]').textContent()), "the button says it requests");
    await dialog.locator('input[name="reason"]').fill("planned DR test");
    await dialog.locator('input[name="confirm"]').fill(B);
    await operator.screenshot({ path: path.join(SHOTS, "19-failover-needs-approval.png") });
    await Promise.all([
      operator.waitForResponse((r) => r.url().endsWith("/actions") && r.request().method() === "POST", { timeout: 60_000 }),
      dialog.locator('button[type="submit"]').click(),
    ]);
    await operator.waitForSelector("#results .results", { timeout: 30_000 });
    const waiting = (await operator.textContent("#results")).replace(/\s+/g, " ");
    assert(/waiting for a second person's approval/.test(waiting), `the request waits: ${waiting}`);
    // Awaiting approval, with who asked and why; the requester cannot approve it.
    await operator.waitForSelector("tr[data-request]", { timeout: 30_000 });
    const pending = (await operator.textContent("tr[data-request]")).replace(/\s+/g, " ");
    assert(/browser-operator/.test(pending) && /planned DR test/.test(pending), `who and why: ${pending}`);
    assert((await operator.locator("tr[data-request] button[data-approve]").count()) === 0, "no approve button for the requester");
    assert((await rowState(operator, B)) === before, "nothing stopped yet");
    // The admin (another identity) approves it: the failover runs.
    await admin.goto(`${BASE}/mirrors/${MIRROR}`);
    await admin.waitForSelector("tr[data-request] button[data-approve]", { timeout: 30_000 });
    await shot(admin, "20-approval-pending");
    await admin.evaluate(() => { document.getElementById("results").innerHTML = ""; });
    await Promise.all([
      admin.waitForResponse((r) => /\/approvals\/.*\/approve$/.test(r.url()), { timeout: 60_000 }),
      admin.click("tr[data-request] button[data-approve]"),
    ]);
    await admin.waitForSelector("#results .results", { timeout: 30_000 });
    const approved = (await admin.textContent("#results")).replace(/\s+/g, " ");
    assert(/Approved/.test(approved) && /accepted/.test(approved), `approved and run: ${approved}`);
    await waitRowState(admin, B, "STOPPED");
    await operator.waitForFunction(() => !document.querySelector("tr[data-request]"), null, { timeout: 30_000 });
    const audit = await admin.request.get(`${BASE}/api/v1/audit?mirror=${MIRROR}`, { headers: { authorization: `Bearer ${VIEWER}` } });
    const kinds = (await audit.json()).items.map((o) => o.kind);
    assert(["approval_request", "approve", "stop"].every((k) => kinds.includes(k)), `audit: ${kinds.join(", ")}`);
    await operator.context().close();
  });

  await test("sign out ends the session", async () => {
    await admin.click('button:has-text("Sign out")');
    await admin.waitForURL(/\/signin/);
    await admin.goto(`${BASE}/`);
    assert(new URL(admin.url()).pathname === "/signin", "signed out");
  });

  await test("no console errors or CSP violations on any page", async () => {
    assert(problems.length === 0, problems.join("\n"));
  });

  await browser.close();
  const passed = results.filter((r) => r.ok).length;
  const failed = results.length - passed;
  console.log(`browser: ${passed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
})().catch(async (e) => {
  console.error(e);
  if (browser) await browser.close().catch(() => {});
  const passed = results.filter((r) => r.ok).length;
  console.log(`browser: ${passed} passed, ${results.length - passed + 1} failed`);
  process.exit(1);
});
