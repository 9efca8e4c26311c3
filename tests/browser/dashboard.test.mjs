// dashboard.test.mjs: the stackmine dashboard (sm-web) driven in headless
// Chromium with playwright-core. Run by tests/integration/test_web_browser.sh,
// which makes the data, starts sm-web and turns each line printed here into a
// check: "ok NAME" or "FAIL NAME: WHY". Every check prints exactly one line,
// also when an earlier step it depends on failed, so the number of lines is
// fixed (the shell script asserts it).
//
// Environment: SM_WEB_URL (sm-web's base URL), SM_ANALYST_TOKEN, SM_APP (the app
// to mine with the run form), SM_THRESHOLD_NS (the run's threshold), SM_XSS_RUN
// (a done run of the app whose frames, host and labels hold markup), SM_XSS_RUN2 and
// SM_XSS_WAIT (done copies of it: the same kind, wait events only; for Compare), SM_SCREENS
// (where full-page screenshots go), SM_CHROMIUM (default /usr/bin/chromium),
// SM_ADMIN_TOKEN (an admin's, for the run deletion and its confirmation), SM_LIVE_RUN (a run
// "running" with a heartbeat's progress written by the script, never ending), SM_BI_CLUSTER (a
// cluster whose cost has two modes and steps with a numeric label, for "What the cost depends on").
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const env = process.env;
for (const k of ["SM_WEB_URL", "SM_ANALYST_TOKEN", "SM_ADMIN_TOKEN", "SM_APP", "SM_THRESHOLD_NS", "SM_XSS_RUN", "SM_XSS_RUN2",
  "SM_XSS_WAIT", "SM_SCREENS", "SM_LIVE_RUN", "SM_BI_CLUSTER"]) {
  if (!env[k]) {
    console.error(`dashboard.test.mjs: ${k} is not set (run it through tests/integration/test_web_browser.sh)`);
    process.exit(2);
  }
}
const BASE = env.SM_WEB_URL.replace(/\/$/, "");
const SCREENS = env.SM_SCREENS;
const XSS_SCRIPT = "<script>window.__xss=1</script>";
const XSS_FRAMES = [
  "xssapp!main",
  "xssapp!<script>window.__xss=1</script>",
  "xssapp!\"quoted\" & 'single'",
  "libstdc++.so.6!std::map<K, V>::find",
];
const XSS_HOST = "h<svg onload=window.__xss=3>";
const XSS_LABEL = "<img src=x onerror=window.__xss=2>";
const XSS_STREAM = "5ec0de00-0000-4000-8000-000000000001";
const BIDI_STREAM = "5ec0de00-0000-4000-8000-000000000004";   /* U+202E in its host, long labels */
const SIG_NAME = `browser-sig <i>"${process.pid}"</i> & 'co'`;
const SIG_NOTE = "seen by the <b>browser</b> test";

mkdirSync(SCREENS, { recursive: true });

let failed = 0;
function report(name, why) {
  if (why === undefined) {
    console.log(`ok ${name}`);
  } else {
    failed++;
    console.log(`FAIL ${name}: ${String(why).replace(/\s+/g, " ").slice(0, 600)}`);
  }
}
class Check extends Error {}
function expect(cond, why) {
  if (!cond) throw new Check(why);
}
// check(NAME, FN): runs FN; a throw (an expect or anything else) fails the check.
async function check(name, fn) {
  try {
    await fn();
    report(name);
    return true;
  } catch (e) {
    report(name, e instanceof Check ? e.message : `${e.name}: ${e.message}`);
    return false;
  }
}
// needs(VALUE, WHAT): throws when an earlier step did not give VALUE.
function needs(v, what) {
  if (!v) throw new Check(`skipped: ${what} (an earlier check failed)`);
  return v;
}

// shot(PAGE, NAME): a full-page screenshot; also notes a page wider than the window
let shots = 0;
const tooWide = [];
async function shot(page, name) {
  shots++;
  const file = join(SCREENS, `${String(shots).padStart(2, "0")}-${name}.png`);
  try {
    const w = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
    if (w[0] > w[1]) tooWide.push(`${new URL(page.url()).pathname} (${name}) is ${w[0]} px`);
    await page.screenshot({ path: file, fullPage: true });
  } catch (e) {
    console.error(`screenshot ${file}: ${e.message}`);
  }
}

// "1.5 s", "12.3 ms", "300 µs", "36,432 s" (common/fmt.c) or a count ("1,234"), as a number
function metricValue(text) {
  const t = text.replace(/\s+/g, " ").trim().replace(/,/g, "");
  let m;
  if ((m = /^([0-9.]+) s$/.exec(t))) return Number(m[1]) * 1e9;
  if ((m = /^([0-9.]+) ms$/.exec(t))) return Number(m[1]) * 1e6;
  if ((m = /^([0-9.]+) µs$/.exec(t))) return Number(m[1]) * 1e3;
  if ((m = /^([0-9]+) ns$/.exec(t))) return Number(m[1]);
  if (/^[0-9]+$/.test(t)) return Number(t);
  return NaN;
}

const path = (page) => new URL(page.url()).pathname;
const query = (page, k) => new URL(page.url()).searchParams.get(k);

const browser = await chromium.launch({
  executablePath: env.SM_CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox"],
});
const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
// CSP violations, as the page sees them (an init script is not subject to the page's CSP)
await context.addInitScript(() => {
  window.__csp = [];
  document.addEventListener("securitypolicyviolation", (e) =>
    window.__csp.push(`${e.violatedDirective} blocked ${e.blockedURI || "inline"} at ${e.sourceFile}:${e.lineNumber}`));
});
const page = await context.newPage();
page.setDefaultTimeout(15000);

let step = "start";
const consoleErrors = [];
const cspViolations = [];
page.on("console", (msg) => {
  const text = msg.text();
  if (/Content.Security.Policy/i.test(text)) cspViolations.push(`${step}: ${text}`);
  else if (msg.type() === "error") consoleErrors.push({ step, text, url: page.url(), src: msg.location().url });
});
page.on("pageerror", (err) => consoleErrors.push({ step, text: `uncaught ${err.message}`, url: page.url() }));
// gathers the violations the page itself saw before it goes away
async function collectCsp() {
  try {
    const v = await page.evaluate(() => window.__csp || []);
    for (const s of v) cspViolations.push(`${step}: ${s}`);
    await page.evaluate(() => { window.__csp = []; });
  } catch {
    /* page gone; its console lines are in cspViolations already */
  }
}
async function go(url) {
  await collectCsp();
  return page.goto(url.startsWith("http") ? url : BASE + url);
}
async function clickAndWait(locator) {
  await collectCsp();
  await Promise.all([page.waitForNavigation(), locator.click()]);
}

// ---- 1. login ----
step = "login";
await check("/ without a session redirects to /login", async () => {
  const r = await go("/");
  expect(path(page) === "/login", `landed on ${page.url()}`);
  expect(query(page, "next") === "/runs", `next=${query(page, "next")}, expected /runs`);
  expect(r.status() === 200, `status ${r.status()}`);
  expect((await page.locator("h1").textContent()) === "Log in", "no 'Log in' heading");
});
await shot(page, "login");

step = "wrong-login";
await check("a wrong token shows an error", async () => {
  await page.fill("input[name=token]", "sm_00000000000000000000000000000000not-a-token");
  const [resp] = await Promise.all([page.waitForNavigation(), page.click("form.login button[type=submit]")]);
  expect(resp.status() === 401, `status ${resp.status()}, expected 401`);
  const err = await page.locator("p.error[role=alert]").textContent();
  expect(/not valid/.test(err), `error text '${err}'`);
  const cookies = await context.cookies();
  expect(!cookies.some((c) => c.name === "sm_session"), "a session cookie was set for a wrong token");
});
await shot(page, "login-error");

step = "login-ok";
await check("the analyst token lands on /runs", async () => {
  await page.fill("input[name=token]", env.SM_ANALYST_TOKEN);
  await clickAndWait(page.locator("form.login button[type=submit]"));
  expect(path(page) === "/runs", `landed on ${page.url()}`);
  expect((await page.locator("h1").textContent()) === "Mining runs", "no 'Mining runs' heading");
  expect((await page.locator("header .role").textContent()) === "analyst", "the header does not say analyst");
});
await check("the session cookie is HttpOnly, SameSite=Strict and hidden from scripts", async () => {
  const c = (await context.cookies()).find((x) => x.name === "sm_session");
  expect(c, "no sm_session cookie");
  expect(c.httpOnly, "sm_session is not HttpOnly");
  expect(c.sameSite === "Strict", `SameSite=${c.sameSite}`);
  const dc = await page.evaluate(() => document.cookie);
  expect(!dc.includes("sm_session") && !dc.includes(env.SM_ANALYST_TOKEN), `document.cookie = '${dc}'`);
});
await shot(page, "runs");

// ---- 2. a run from the form ----
step = "run-form";
let runId;
await check("the run form starts a run and shows /runs/ID", async () => {
  // /runs leads with the runs; the form is behind "New run", each field explained with its default
  expect((await page.locator("#run-form").count()) === 0, "the run form is on /runs");
  await clickAndWait(page.locator("#new-run"));
  expect(path(page) === "/runs/new", `New run opened ${page.url()}`);
  const f = page.locator("#run-form");
  const hints = await f.locator("label small").allTextContents();
  expect(hints.length >= 14 && hints.filter((h) => /default/.test(h)).length >= 6,
    `${hints.length} field explanations: ${hints.join(" | ")}`);
  await shot(page, "run-new");
  const apps = await f.locator("select[name=app] option").allTextContents();
  expect(apps.includes(env.SM_APP) && apps.includes("xssapp"), `apps offered: ${apps.join(", ")}`);
  await f.locator("select[name=app]").selectOption(env.SM_APP);
  await f.locator("select[name=kind]").selectOption("both");
  await f.locator("select[name=aoi]").selectOption("waitgraph");
  await f.locator("select[name=threshold_mode]").selectOption("ns");
  await f.locator("input[name=threshold]").fill(env.SM_THRESHOLD_NS);
  await f.locator("select[name=linkage]").selectOption("average");
  await f.locator("input[name=cut]").fill("0.5");
  await Promise.all([page.waitForURL(/\/runs\/[0-9]+$/), f.locator("button[type=submit]").click()]);
  runId = /\/runs\/([0-9]+)$/.exec(page.url())[1];
  const params = await page.locator("p.params").textContent();
  expect(params.includes("both") && params.includes("waitgraph"), `parameters shown: '${params}'`);
});
step = "run-wait";
await check("the run page follows the run until it is done (within 60 s)", async () => {
  needs(runId, "no run");
  const t0 = Date.now();
  let seen = "";
  // the page's script polls and reloads itself when the run ends
  while (Date.now() - t0 < 60000) {
    const st = page.locator("h1 .status");
    const text = ((await st.count()) && (await st.textContent().catch(() => ""))) || "";
    if (text !== seen) {
      console.log(`# run ${runId}: status '${text}' after ${Date.now() - t0} ms`);
      seen = text;
    }
    if (text === "failed") throw new Check(`the run failed: ${await page.locator("p.error").textContent()}`);
    if (text === "done" && (await page.locator("h1 .status.done").count())) return;
    await page.waitForTimeout(500);
  }
  await page.reload(); // for the checks after this one
  throw new Check(`status still '${seen}' after 60 s (after a reload: '${await page.locator("h1 .status").textContent()}')`);
});
let clusterRows = 0;
await check("the clusters table has rows", async () => {
  needs(runId, "no run");
  clusterRows = await page.locator("#clusters tbody tr td:first-child a[href^='/clusters/']").count();
  expect(clusterRows > 1, `${clusterRows} clusters (want more than 1 to sort)`);
  const counted = await page.locator("dl.counts dt:text-is('Clusters') + dd").textContent();
  expect(Number(counted) === clusterRows || (Number(counted) > 50 && clusterRows === 50),
    `the counts say ${counted} clusters, the table has ${clusterRows}`);
});
await shot(page, "run");
step = "csrf";
await check("a write with the session cookie but no CSRF token is refused", async () => {
  const r = await page.evaluate(async (app) => {
    const post = async (headers) => {
      const x = await fetch("/api/v1/runs", { method: "POST", credentials: "same-origin",
        headers: { "Content-Type": "application/json", ...headers }, body: JSON.stringify({ app }) });
      return x.status;
    };
    return { none: await post({}), wrong: await post({ "X-CSRF-Token": "0".repeat(32) }) };
  }, env.SM_APP);
  expect(r.none === 403 && r.wrong === 403, `without the token: ${r.none}, with a wrong one: ${r.wrong}`);
  // no run was queued by them: the xssapp run and its two copies, the live one (SM_LIVE_RUN), bi's and
  // the form's
  const body = await page.evaluate(() => fetch("/api/v1/runs", { credentials: "same-origin" }).then((x) => x.json()));
  expect(body.total === 6, `${body.total} runs, expected 6`);
});

// ---- 3. sorting ----
step = "sort";
const metrics = ["total_cost", "streams", "events", "avg_cost"];
for (const m of metrics) {
  await check(`sort by ${m}: descending, aria-sort on its header`, async () => {
    needs(clusterRows, "no clusters");
    await clickAndWait(page.locator(`#clusters thead a[data-sort=${m}]`));
    expect(query(page, "sort") === m, `URL ${page.url()}`);
    const ths = page.locator("#clusters thead th");
    const n = await ths.count();
    let col = -1;
    for (let i = 0; i < n; i++) {
      const a = ths.nth(i).locator("a[data-sort]");
      const sorted = await ths.nth(i).getAttribute("aria-sort");
      if ((await a.count()) && (await a.getAttribute("data-sort")) === m) {
        col = i;
        expect(sorted === "descending", `its header has aria-sort=${sorted}`);
      } else {
        expect(sorted === null, `header ${i} also has aria-sort=${sorted}`);
      }
    }
    expect(col >= 0, "no header for it");
    const cells = await page.locator(`#clusters tbody tr td:nth-child(${col + 1})`).allTextContents();
    const vals = cells.map(metricValue);
    expect(vals.length === clusterRows, `${vals.length} rows after sorting, ${clusterRows} before`);
    expect(vals.every((v) => !Number.isNaN(v)), `unreadable values: ${cells.join(" | ")}`);
    for (let i = 1; i < vals.length; i++)
      expect(vals[i - 1] >= vals[i], `row ${i + 1} (${cells[i]}) is above row ${i} (${cells[i - 1]})`);
  });
  if (m === "streams") await shot(page, "sorted-by-streams");
}

// ---- 3b. one rank everywhere; the runs' list with each run's worst problem ----
step = "ranks";
await check("ranks agree: each run-page row's number is the cluster page's 'rank N by total cost' (sorted by " +
  "streams, so rows and ranks differ)", async () => {
  needs(clusterRows, "no clusters");
  await go(`/runs/${runId}?sort=streams`);
  const rows = await page.locator("#clusters tbody tr td:first-child a").evaluateAll(
    (as) => as.slice(0, 5).map((a) => [a.getAttribute("href"), a.textContent]));
  expect(rows.length >= 2, `${rows.length} rows`);
  expect(rows.some(([, n], i) => Number(n) !== i + 1), `the rows by streams are ranked ${rows.map((r) => r[1])}: ` +
    "in the order of total cost too, the check could not fail");
  for (const [href, n] of rows) {
    await go(href);
    const h1 = await page.locator("h1").textContent();
    const m = / rank ([0-9]+) by total cost$/.exec(h1);
    expect(m && m[1] === n, `the row says ${n}, ${href}'s heading '${h1}'`);
  }
});
step = "runs-list";
await check("/runs shows a done run's worst problem, linked, with its cost", async () => {
  needs(runId, "no run");
  await go("/runs");
  const cell = page.locator(`#runs tbody tr:has(td:first-child a[href="/runs/${runId}"]) td.worst`);
  const a = cell.locator("a.worst-link");
  expect((await a.count()) === 1, `no worst-problem link in run ${runId}'s row: '${await cell.textContent()}'`);
  const cost = metricValue(await cell.locator(".cost").textContent());
  expect(cost > 0, `its cost reads '${await cell.locator(".cost").textContent()}'`);
  const href = await a.getAttribute("href");
  await clickAndWait(a);
  expect(path(page) === href && /^\/problems\/[0-9]+$/.test(href), `landed on ${page.url()}`);
  const h1 = await page.locator("h1").textContent();
  expect(h1.startsWith(`Problem #${href.split("/")[2]}, rank 1 of run #${runId}`), `heading '${h1}'`);
});
await check("the runs table sorts by the worst problem (aria-sort on its header), and back to newest", async () => {
  await go("/runs");
  await clickAndWait(page.locator("#runs thead a[data-sort=worst]"));
  expect(query(page, "sort") === "worst", `URL ${page.url()}`);
  const sorted = await page.locator("#runs thead th[aria-sort]").evaluateAll(
    (ths) => ths.map((th) => [th.querySelector("a").dataset.sort, th.getAttribute("aria-sort")]));
  expect(JSON.stringify(sorted) === '[["worst","descending"]]', `aria-sort on ${JSON.stringify(sorted)}`);
  const cells = await page.locator("#runs tbody td.worst").allTextContents();
  const vals = cells.map((c) => (c.trim() === "–" ? -1 : metricValue(/[0-9.]+ (s|ms|µs)$/.exec(c.trim())?.[0] || "")));
  expect(vals.length >= 3 && vals.every((v) => !Number.isNaN(v)), `unreadable: ${cells.join(" | ")}`);
  for (let i = 1; i < vals.length; i++)
    expect(vals[i - 1] >= vals[i], `row ${i + 1} (${cells[i]}) is above row ${i} (${cells[i - 1]})`);
  await shot(page, "runs-by-worst");
  await clickAndWait(page.locator("#runs thead a[data-sort=newest]"));
  const ids = await page.locator("#runs tbody tr td:first-child a").allTextContents();
  const nums = ids.map((t) => Number(t.slice(1)));
  expect(nums.every((v, i) => i === 0 || nums[i - 1] > v), `newest first: ${ids.join(" ")}`);
});

// ---- 4. filter, a cluster, its flame graph ----
step = "filter";
await check("filtering by frame text narrows the rows", async () => {
  needs(clusterRows, "no clusters");
  await go(`/runs/${runId}?sort=total_cost`);
  // innermost frames of each row; the first one found in fewer rows than all is the filter
  const names = await page.locator("#clusters tbody tr td:last-child .frame:last-child").evaluateAll(
    (els) => els.map((e) => e.getAttribute("title")));
  const fn = (n) => n.slice(n.indexOf("!") + 1);
  const tried = [];
  for (const n of [...new Set(names)].reverse().slice(0, 6)) {
    await page.fill("form.filter input[name=q]", fn(n));
    await clickAndWait(page.locator("form.filter button[type=submit]"));
    const rows = await page.locator("#clusters tbody tr td:first-child a").count();
    expect(query(page, "q") === fn(n), `URL ${page.url()}`);
    expect((await page.inputValue("form.filter input[name=q]")) === fn(n), "the field lost the text");
    expect(rows >= 1, `no row for '${fn(n)}', which a row showed`);
    const titles = await page.locator("#clusters tbody .frame").evaluateAll((els) => els.map((e) => e.title));
    expect(titles.some((t) => t.includes(fn(n))), `no row shows '${fn(n)}'`);
    if (rows < clusterRows) return;
    tried.push(fn(n));
  }
  throw new Check(`no filter narrowed the ${clusterRows} rows (tried ${tried.join(", ")})`);
});
await shot(page, "filtered");

step = "cluster";
let clusterUrl;
await check("a rank link opens the cluster", async () => {
  needs(clusterRows, "no clusters");
  await go(`/runs/${runId}`);
  const a = page.locator("#clusters tbody tr:first-child td:first-child a");
  const href = await a.getAttribute("href");
  await clickAndWait(a);
  expect(path(page) === href, `clicked ${href}, landed on ${page.url()}`);
  expect(/^Cluster [0-9]+: .*rank 1 by total cost$/.test(await page.locator("h1").textContent()), "heading");
  clusterUrl = href;
});
await check("cluster page: common part and alignment blocks", async () => {
  needs(clusterUrl, "no cluster");
  const common = await page.locator("ol.common-part li").count();
  expect(common >= 1, "no common part");
  const blocks = await page.locator("details table.align").count();
  expect(blocks >= 1, "no alignment block");
  expect(await page.locator("details:has(table.align) summary:has-text('(medoid)')").count() === 1,
    "not exactly one block of the medoid");
  const marked = await page.locator("details[open] table.align tr.op.common").count();
  expect(marked >= 1, "no alignment row marked as common part");
});
await check("cluster page: breakdowns by host, version, label and the top streams", async () => {
  needs(clusterUrl, "no cluster");
  const titles = await page.locator("section.by h3").allTextContents();
  expect(titles.join("|") === "By host|By version|By label", `breakdowns: ${titles.join("|")}`);
  for (let i = 0; i < 3; i++) {
    const rows = await page.locator("section.by").nth(i).locator("tbody tr").count();
    expect(rows >= 1, `'${titles[i]}' is empty`);
  }
  expect(await page.locator("table.streams tbody a[href^='/streams/']").count() >= 1, "no top streams");
});
let flameBefore;
await check("cluster page: the flame graph", async () => {
  needs(clusterUrl, "no cluster");
  const svg = page.locator("svg.flame");
  expect((await svg.count()) === 1, `${await svg.count()} svg.flame`);
  const nodes = await svg.locator("a").count();
  expect(nodes >= 2, `${nodes} clickable nodes`);
  flameBefore = await svg.evaluate((e) => e.outerHTML);
});
await shot(page, "cluster");
step = "flame";
await check("flame graph: hovering a node shows its <title>", async () => {
  needs(flameBefore, "no flame graph");
  const g = page.locator("svg.flame g.fn:has(a)").nth(1);
  const label = await g.locator("title").textContent();
  await g.locator("rect").hover();
  const hovered = await page.evaluate(() => {
    const r = document.querySelectorAll("svg.flame a:hover");
    return r.length ? r[r.length - 1].closest("g").querySelector("title").textContent : null;
  });
  expect(hovered === label, `hovered node's title '${hovered}', expected '${label}'`);
  expect(/events/.test(label) && /[0-9]/.test(label), `title '${label}' has no cost and events`);
});
// the nodes of the flame graph: link, width, label (its title's first line), ancestor mark
const flameNodes = () => page.locator("svg.flame g.fn:has(a)").evaluateAll((gs) => gs.map((g) => ({
  href: g.querySelector("a").getAttribute("href"),
  w: Number(g.querySelector("rect").getAttribute("width")),
  name: g.querySelector("title").textContent.split("\n")[0],
  anc: g.classList.contains("anc"),
})));
// Clicks a frame link of the flame graph in section#flame and waits for the graph to change in
// place: no navigation (a marker set on window survives), the URL the same (but the hash), the
// scroll position kept. Returns a reason when one of these fails.
async function zoomInPlace(locator) {
  const svgBefore = await page.locator("svg.flame").evaluate((e) => e.outerHTML);
  await page.locator("#flame").scrollIntoViewIfNeeded();
  await page.evaluate(() => window.scrollBy(0, 40));
  const before = await page.evaluate(() => {
    window.__noReload = 1;
    return { url: location.href.split("#")[0], y: window.scrollY };
  });
  await locator.click();
  await page.waitForFunction((old) => {
    const s = document.querySelector("svg.flame");
    return s && s.outerHTML !== old;
  }, svgBefore, { timeout: 10000 });
  const after = await page.evaluate(() => ({ mark: window.__noReload, url: location.href.split("#")[0], y: window.scrollY }));
  if (after.mark !== 1) return "the page was reloaded";
  if (after.url !== before.url) return `the URL changed from ${before.url} to ${after.url}`;
  if (Math.abs(after.y - before.y) > 2) return `scrollY went from ${before.y} to ${after.y}`;
  return null;
}
let zoomed;
await check("flame graph: clicking a node zooms in place (no reload, same URL, scroll kept)", async () => {
  needs(flameBefore, "no flame graph");
  const nodes = await flameNodes();
  const full = nodes[0].w;
  // the widest node narrower than 60% of the root
  const pick = nodes.filter((n) => n.w < 0.6 * full).sort((a, b) => b.w - a.w)[0];
  expect(pick, "no node narrower than the root");
  expect(pick.href.endsWith("#flame"), `the link ${pick.href} does not land on #flame without JS`);
  const why = await zoomInPlace(page.locator(`svg.flame a[href='${pick.href}']`).first());
  expect(!why, why);
  const after = await flameNodes();
  const me = after.find((n) => n.href === pick.href && !n.anc);
  expect(me, `the focused node ${pick.name} is not drawn`);
  expect(Math.abs(me.w - full) < 1, `the focused node is ${me.w} px wide, the graph ${full} px`);
  expect(after.some((n) => n.anc) && after.filter((n) => n.anc).every((n) => Math.abs(n.w - full) < 1),
    "its ancestors are not drawn full width above it");
  expect(await page.locator("#flame a:text-is('Reset zoom')").count() === 1, "no 'Reset zoom' link");
  zoomed = pick;
});
await shot(page, "flame-zoom");
await check("flame graph: clicking a bar above zooms out, and Reset zoom too (in place)", async () => {
  needs(zoomed, "not zoomed in");
  let why = await zoomInPlace(page.locator("svg.flame g.fn.anc a").first());
  expect(!why, why);
  let after = await page.locator("svg.flame").evaluate((e) => e.outerHTML);
  expect(after === flameBefore, `after clicking the root the graph is not the whole one again`);
  why = await zoomInPlace(page.locator(`svg.flame a[href='${zoomed.href}']`).first());
  expect(!why, `zooming in again: ${why}`);
  why = await zoomInPlace(page.locator("#flame a.flame-reset"));
  expect(!why, `Reset zoom: ${why}`);
  after = await page.locator("svg.flame").evaluate((e) => e.outerHTML);
  expect(after === flameBefore, "after Reset zoom the graph is not the whole one again");
});
const SHARE = /^matched: ([0-9]+(\.[0-9])?|< 0\.1|> 99\.9) % of [0-9.,]+ (s|ms|µs|ns)$/;
let searchTerm;
await check("flame graph: the search box highlights matching frames live and shows their share", async () => {
  needs(flameBefore, "no flame graph");
  await go(clusterUrl);
  const nodes = await flameNodes();
  // a module (before '!') or a piece of a name, in other case: the match ignores case
  const n = nodes.find((x) => x.name.includes("!") && x.w < 0.9 * nodes[0].w) || nodes[1];
  needs(n, "no frame");
  searchTerm = (n.name.includes("!") ? n.name.slice(0, n.name.indexOf("!")) : n.name).toUpperCase();
  await page.locator("#flame input[name=search]").fill(searchTerm);
  await page.waitForFunction(() => document.querySelectorAll("svg.flame g.hit").length > 0, null, { timeout: 5000 });
  expect(path(page) === clusterUrl && !query(page, "search"), `the search navigated to ${page.url()}`);
  const hits = await page.locator("svg.flame g.hit title").allTextContents();
  const lc = searchTerm.toLowerCase();
  expect(hits.every((t) => t.split("\n")[0].toLowerCase().includes(lc)), `a hit does not hold '${searchTerm}'`);
  const misses = await page.locator("svg.flame g.fn:not(.hit) title").allTextContents();
  expect(misses.every((t) => !t.split("\n")[0].toLowerCase().includes(lc)), "a matching frame is not marked");
  expect(await page.locator("svg.flame.searching").count() === 1, "the graph is not marked as searching");
  const share = await page.locator("#flame output.matched").textContent();
  expect(SHARE.test(share), `share '${share}'`);
  // the server says the same without JS (?search=), within rounding and the frames too thin to draw
  await go(`${clusterUrl}?search=${encodeURIComponent(searchTerm)}`);
  const server = await page.locator("#flame output.matched").textContent();
  expect(SHARE.test(server), `the server's share '${server}'`);
  expect(Math.abs(parseFloat(server.slice(9)) - parseFloat(share.slice(9))) <= 1.5, `live '${share}', server '${server}'`);
  expect(await page.locator("svg.flame g.hit").count() === hits.length, "the server marks other frames");
  await page.locator("#flame input[name=search]").fill("");
  await page.waitForFunction(() => !document.querySelector("svg.flame g.hit"), null, { timeout: 5000 });
  expect((await page.locator("#flame output.matched").textContent()) === "", "the share stays after clearing");
});
await shot(page, "flame-search");
await check("flame graph: a module has the same fill on two pages", async () => {
  needs(clusterUrl, "no cluster");
  const fills = async (u) => {
    await go(u);
    return page.locator("svg.flame g.fn").evaluateAll((gs) => gs.map((g) => [
      g.querySelector("title").textContent.split("\n")[0], g.querySelector("rect").getAttribute("fill")]));
  };
  await go(`/runs/${runId}`);
  const urls = await page.locator("#clusters tbody tr td:first-child a").evaluateAll((as) => as.map((a) => a.getAttribute("href")));
  const mods = new Map(), seen = new Set();
  let common = 0;
  for (const u of urls.slice(0, 6)) {
    for (const [name, fill] of await fills(u)) {
      if (!name.includes("!")) continue;
      const m = name.slice(0, name.indexOf("!"));
      if (!mods.has(m)) mods.set(m, [fill, u]);
      const [f0, u0] = mods.get(m);
      expect(f0 === fill, `${m}: ${f0} on ${u0}, ${fill} on ${u} (${name})`);
      if (u0 !== u && !seen.has(m)) {
        seen.add(m);
        common++;
      }
    }
    if (common >= 1) break;
  }
  expect(common >= 1, `no module on two of ${urls.length} cluster pages`);
});
await check("compare page: the differential graph zooms in place; titles read e.g. '1.23 s (45.6 %)'", async () => {
  needs(runId, "no run");
  await go(`/compare?a=${env.SM_XSS_RUN}&b=${runId}&force=1`);
  const titles = await page.locator("svg.flame g.fn title").allTextContents();
  expect(titles.length >= 1, "no differential graph");
  expect(titles.every((t) => !/events/.test(t)), `a title counts events: '${titles.find((t) => /events/.test(t))}'`);
  expect(/^[0-9.]+ (s|ms|µs) \([0-9.]+ %\)$/.test(titles[0].split("\n")[1]), `title '${titles[0]}'`);
  const nodes = await flameNodes();
  const pick = nodes.filter((n) => n.w < 0.9 * nodes[0].w).sort((a, b) => b.w - a.w)[0] || nodes[0];
  expect(/[?&]a=.*&b=.*&force=1.*focus=[0-9]+#flame$/.test(pick.href), `link ${pick.href} (a forced comparison stays forced)`);
  const why = await zoomInPlace(page.locator(`svg.flame a[href='${pick.href}']`).first());
  expect(!why, why);
  const after = await flameNodes();
  expect(after.some((n) => n.href === pick.href && Math.abs(n.w - nodes[0].w) < 1), "the frame is not full width");
});

await check("a cluster's cost model: what its cost depends on and its two modes, in words, after 'Where it happens'", async () => {
  await go(`/clusters/${env.SM_BI_CLUSTER}`);
  const items = (await page.locator("section.costmodel ul.lead li").allTextContents()).map((t) => t.replace(/\s+/g, " ").trim());
  expect(items.length === 2, `sentences ${JSON.stringify(items)}`);
  expect(/^Cost jumps from 3 ms to 45 ms above body\.size 3,200, R\^2 1\.00\. \(50 streams, R\^2 [01]\.[0-9]{2} on held-out streams\)$/.test(items[0]),
    `'${items[0]}'`);
  expect(items[1] === "Two modes: 3 ms (80 %) and 45 ms (20 %).", `'${items[1]}'`);
  const heads = await page.locator("main h2").allTextContents();
  expect(heads.indexOf("What the cost depends on") === heads.indexOf("Where it happens") + 1, `sections ${heads.join(" | ")}`);
});
await shot(page, "cluster-costmodel");

// ---- 5. a signature from the common part ----
step = "signature";
let sigId;
await check("a signature from the common part lands on /signatures with its row", async () => {
  needs(clusterUrl, "no cluster");
  await go(clusterUrl);
  const common = await page.locator("ol.common-part li").allTextContents();
  const form = page.locator("details.sigform");
  expect((await form.getAttribute("open")) === null, "the form is open before a click");
  await form.locator("summary").click();
  expect((await form.getAttribute("open")) !== null, "the form did not open");
  const frames = await form.locator("textarea[name=frames]").inputValue();
  expect(frames === common.map((s) => s + "\n").join(""), `frames prefilled '${frames}', common part '${common}'`);
  await form.locator("input[name=name]").fill(SIG_NAME);
  await clickAndWait(form.locator("button[type=submit]"));
  expect(path(page) === "/signatures", `landed on ${page.url()}`);
  const m = /^#sig-([0-9]+)$/.exec(new URL(page.url()).hash);
  expect(m, `no #sig-ID in ${page.url()}`);
  sigId = m[1];
  const row = page.locator(`tr#sig-${sigId}`);
  expect((await row.locator("td").nth(1).textContent()) === SIG_NAME, "the row does not show the name");
  expect((await row.locator("select[name=status]").inputValue()) === "open", "status is not open");
  expect((await row.locator(`a[href='${clusterUrl}']`).count()) === 1, "no link to the cluster it came from");
});
await shot(page, "signature-created");
await check("a signature's status and note change inline and stay changed", async () => {
  needs(sigId, "no signature");
  const row = page.locator(`tr#sig-${sigId}`);
  await row.locator("select[name=status]").selectOption("known");
  await row.locator("input[name=note]").fill(SIG_NOTE);
  await clickAndWait(row.locator("button[type=submit]"));
  expect(path(page) === "/signatures", `landed on ${page.url()}`);
  await page.reload();
  const r2 = page.locator(`tr#sig-${sigId}`);
  const st = await r2.locator("select[name=status]").inputValue();
  const note = await r2.locator("input[name=note]").inputValue();
  expect(st === "known" && note === SIG_NOTE, `after a reload: status ${st}, note '${note}'`);
});
await check("the export link gives JSON with the signature", async () => {
  needs(sigId, "no signature");
  const href = await page.locator("a[download]").getAttribute("href");
  expect(href === "/api/v1/signatures/export", `export link ${href}`);
  const r = await page.evaluate(async (u) => {
    const x = await fetch(u, { credentials: "same-origin" });
    return { status: x.status, type: x.headers.get("content-type"), body: await x.text() };
  }, href);
  expect(r.status === 200, `status ${r.status}`);
  expect(/json/.test(r.type), `Content-Type ${r.type}`);
  const doc = JSON.parse(r.body);
  const sigs = Array.isArray(doc) ? doc : doc.signatures;
  expect(Array.isArray(sigs), `no signature list in ${r.body.slice(0, 200)}`);
  const s = sigs.find((x) => x.name === SIG_NAME);
  expect(s, `no signature named ${SIG_NAME} in ${r.body.slice(0, 300)}`);
  expect(s.status === "known" && s.note === SIG_NOTE, `exported status ${s.status}, note '${s.note}'`);
});

// ---- 6. coverage and triage ----
step = "coverage";
let coverageShown = false;
await check("coverage of the signatures over the run", async () => {
  needs(sigId, "no signature");
  await go("/signatures");
  await page.selectOption("select[name=run]", runId);
  await clickAndWait(page.locator("button[form=coverage-form]"));
  expect(query(page, "run") === runId, `URL ${page.url()}`);
  const cov = await page.locator("p.coverage").textContent();
  const m = /cover ([0-9.]+)%/.exec(cov);
  expect(m, `coverage text '${cov}'`);
  expect(Number(m[1]) > 0 && Number(m[1]) <= 100, `coverage ${m[1]}%: the signature comes from this run`);
  const names = await page.locator("table.coverage tbody td:first-child").allTextContents();
  expect(names.includes(SIG_NAME), `coverage rows: ${names.join(", ")}`);
  coverageShown = true;
});
await check("the triage plot and table", async () => {
  needs(coverageShown, "no coverage");
  const svg = await page.locator("div.plot svg").count();
  expect(svg === 1, `${svg} plot svg`);
  const rows = await page.locator("table.triage tbody tr").count();
  expect(rows >= 2, `${rows} triage rows`);
  const series = await page.locator("div.plot svg").textContent();
  expect(/greedy/i.test(series), "the plot names no Greedy series");
});
await shot(page, "coverage-triage");

// ---- 7. a stream ----
step = "stream";
await check("a top stream opens with its timeline", async () => {
  needs(clusterUrl, "no cluster");
  await go(clusterUrl);
  const a = page.locator("table.streams tbody a[href^='/streams/']").first();
  const href = await a.getAttribute("href");
  await clickAndWait(a);
  expect(path(page) === href, `clicked ${href}, landed on ${page.url()}`);
  const svg = page.locator("svg.timeline");
  expect((await svg.count()) === 1, "no svg.timeline");
  const rects = await svg.locator("rect.run, rect.wait").count();
  expect(rects >= 1, `${rects} events drawn`);
  expect((await svg.locator("rect.aoi").count()) >= 1, "no event marked as in the AOI");
});
await shot(page, "stream");
await check("timeline: the threads are named (genfleet names them all), the labels fit left of the events", async () => {
  const labels = await page.locator("svg.timeline text.tid").allTextContents();
  const bare = labels.filter((t) => !/^\S.* \(tid [0-9]+\)( \(symptom\))?$/.test(t));
  expect(labels.length >= 2 && bare.length === 0, `labels without a name: ${bare.join("; ") || "(none of " + labels.length + ")"}`);
  expect(/ \(tid [0-9]+\) \(symptom\)$/.test(labels[0]), `the first row is '${labels[0]}'`);
  const over = await page.locator("svg.timeline").evaluate((svg) => {
    const left = Math.min(...[...svg.querySelectorAll("rect.run, rect.wait")].map((r) => Number(r.getAttribute("x"))));
    return [...svg.querySelectorAll("text.tid")].map((t) => {
      const b = t.getBBox();
      return { text: t.textContent, right: Math.round(b.x + b.width), left };
    }).filter((x) => x.right > x.left);
  });
  expect(over.length === 0, over.map((x) => `'${x.text}' ends at x=${x.right}, the events start at x=${x.left}`)
    .join("; "));
});
let ticksBefore;
await check("the timeline's axis zooms in (?t=)", async () => {
  const a = page.locator("svg.timeline a").nth(3);
  expect((await a.count()) === 1, "no zoom links on the axis");
  const before = await page.locator("svg.timeline").evaluate((e) => e.outerHTML);
  ticksBefore = await page.locator("svg.timeline text.tick").allTextContents();
  await clickAndWait(a);
  expect(/^[0-9]+-[0-9]+$/.test(query(page, "t") || ""), `URL ${page.url()}`);
  const after = await page.locator("svg.timeline").evaluate((e) => e.outerHTML);
  expect(after !== before, "the timeline did not change");
});
await check("timeline: a zoomed axis counts from the stream's start, not 0", async () => {
  needs(ticksBefore, "no zoom");
  const ticks = await page.locator("svg.timeline text.tick").allTextContents();
  const ms = (t) => Number(/^(-?[0-9.]+) ms$/.exec(t)?.[1]);
  expect(ticks.length === 10, `${ticks.length} ticks`);
  expect(ms(ticks[0]) > 0, `the first tick is '${ticks[0]}'`);
  // the slice clicked began at the fourth tick of the whole view (shown there to its precision)
  const want = ms(ticksBefore[3]), step = ms(ticksBefore[1]) - ms(ticksBefore[0]);
  expect(Math.abs(ms(ticks[0]) - want) <= step / 100 + 1, `first tick '${ticks[0]}', the slice began at '${ticksBefore[3]}'`);
  expect(ticks.every((t, i) => i === 0 || ms(t) > ms(ticks[i - 1])), `ticks ${ticks.join(", ")}`);
});

// ---- 7b. the streams list: order, time range ----
step = "streams";
// the numbers of a column of the list (Events: 8)
const column = (n) => page.locator(`table.streams tbody td:nth-child(${n})`).allTextContents();
const listTotal = async () => Number(/of ([0-9]+)/.exec(await page.locator("nav.pager span").textContent())?.[1]);
await check("streams: a column's header sorts the list on the server, aria-sort follows", async () => {
  await go("/streams");
  expect((await page.locator("th[aria-sort] a").getAttribute("data-sort")) === "received" &&
    (await page.locator("th[aria-sort]").getAttribute("aria-sort")) === "descending", "not newest first at first");
  await clickAndWait(page.locator("th a[data-sort=events]"));
  expect(query(page, "sort") === "events" && query(page, "dir") === "desc", `URL ${page.url()}`);
  expect((await page.locator("th:has(a[data-sort=events])").getAttribute("aria-sort")) === "descending", "aria-sort");
  expect((await page.locator("th[aria-sort]").count()) === 1, "aria-sort on more than one header");
  const down = (await column(8)).map(metricValue);
  expect(down.length > 1 && down.every((v, i) => i === 0 || v <= down[i - 1]), `events ${down.join(" ")}`);
  await clickAndWait(page.locator("th a[data-sort=events]"));
  expect((await page.locator("th:has(a[data-sort=events])").getAttribute("aria-sort")) === "ascending", "aria-sort asc");
  const up = (await column(8)).map(metricValue);
  expect(up.every((v, i) => i === 0 || v >= up[i - 1]), `events ${up.join(" ")}`);
  expect(up[0] < down[0], `ascending starts at ${up[0]}, descending at ${down[0]}`);
  const next = await page.locator("nav.pager a[rel=next]").getAttribute("href");
  expect(/[?&]sort=events/.test(next) && /[?&]dir=asc/.test(next), `the next page's link ${next} drops the order`);
});
await shot(page, "streams-sorted");
let allStreams;
await check("streams: the range presets narrow the list (the xssapp streams are 2 days old)", async () => {
  await go("/streams?range=all");
  allStreams = await listTotal();
  expect(allStreams === 114, `${allStreams} streams in all`);
  await clickAndWait(page.locator("p.ranges a[data-range='24h']"));
  expect(query(page, "range") === "24h", `URL ${page.url()}`);
  expect((await listTotal()) === 110, `${await listTotal()} streams in the last 24 h`);
  expect((await page.locator("p.ranges [aria-current]").getAttribute("data-range")) === "24h", "the preset is not marked");
});
await check("streams: an absolute from/to (UTC) holds only the streams in it", async () => {
  const utc = (ms) => new Date(ms).toISOString().slice(0, 16);
  await go("/streams");
  await page.fill("form.filter input[name=from]", utc(Date.now() - 3 * 86400e3));
  await page.fill("form.filter input[name=to]", utc(Date.now() - 86400e3));
  await clickAndWait(page.locator("form.filter button[type=submit]"));
  expect(query(page, "from") && query(page, "to"), `URL ${page.url()}`);
  expect((await listTotal()) === 4, `${await listTotal()} streams`);
  const apps = await column(3);
  expect(apps.length === 4 && apps.every((a) => a === "xssapp"), `apps ${apps.join(" ")}`);
  step = "streams-bad-range";
  const r = await go(`/streams?from=${encodeURIComponent(utc(Date.now()))}&to=${encodeURIComponent(utc(Date.now() - 86400e3))}`);
  step = "streams";
  const err = await page.locator("p.error").textContent();
  expect(r.status() === 400 && err === "to: must be after from", `${r.status()}, error line '${err}'`);
  expect((await page.inputValue("form.filter input[name=to]")) !== "", "the form lost the field to correct");
});
await shot(page, "streams-range");

// ---- 8. markup in the data ----
// the checks each page with data from xssapp must pass
async function noScriptRan(where) {
  const r = await page.evaluate(() => ({
    xss: typeof window.__xss,
    scripts: [...document.querySelectorAll("script")].map((s) => s.getAttribute("src") || `inline:${s.textContent}`),
    handlers: [...document.querySelectorAll("*")].flatMap((e) =>
      [...e.attributes].filter((a) => /^on/i.test(a.name)).map((a) => `${e.tagName}[${a.name}]`)),
    imgs: document.querySelectorAll("img").length,
    text: document.documentElement.textContent,
  }));
  expect(r.xss === "undefined", `${where}: window.__xss is ${r.xss}`);
  expect(r.scripts.length === 1 && r.scripts[0] === "/static/app.js", `${where}: scripts ${r.scripts.join(", ")}`);
  expect(r.handlers.length === 0, `${where}: event handler attributes ${r.handlers.join(", ")}`);
  expect(r.imgs === 0, `${where}: ${r.imgs} img elements`);
  expect(r.text.includes(XSS_SCRIPT), `${where}: the text '${XSS_SCRIPT}' is not on the page`);
  return r.text;
}
step = "xss-run";
let xssCluster;
await check("markup: the run page shows frame names as text", async () => {
  await go(`/runs/${env.SM_XSS_RUN}`);
  expect((await page.locator("h1").textContent()).startsWith(`Run #${env.SM_XSS_RUN}: xssapp`), "heading");
  await noScriptRan("run page");
  const titles = await page.locator("#clusters tbody .frame").evaluateAll((els) => els.map((e) => e.title));
  expect(titles.includes(XSS_FRAMES[1]), `frame titles: ${titles.join(" | ")}`);
  const wait = page.locator("#clusters tbody tr:has(td:nth-child(2):text-is('wait')) td:first-child a");
  xssCluster = await wait.getAttribute("href");
});
await shot(page, "xss-run");
await check("markup: the frame filter takes markup as text", async () => {
  await go(`/runs/${env.SM_XSS_RUN}?q=${encodeURIComponent(XSS_SCRIPT)}`);
  expect((await page.inputValue("form.filter input[name=q]")) === XSS_SCRIPT, "the field does not hold the text");
  expect((await page.locator("#clusters tbody td:first-child a").count()) === 2, "not both clusters found");
  await noScriptRan("filtered run page");
  const tabs = await page.locator("nav.tabs a").evaluateAll((els) => els.map((e) => e.getAttribute("href")));
  expect(tabs.every((h) => new URLSearchParams(h.slice(1)).get("q") === XSS_SCRIPT), `tab links ${tabs.join(" ")}`);
});
step = "xss-cluster";
await check("markup: the cluster page shows frames, host and label as text", async () => {
  needs(xssCluster, "no xssapp wait cluster");
  await go(xssCluster);
  const text = await noScriptRan("cluster page");
  const common = await page.locator("ol.common-part li").allTextContents();
  expect(JSON.stringify(common) === JSON.stringify(XSS_FRAMES), `common part ${JSON.stringify(common)}`);
  expect(text.includes(XSS_HOST), `host '${XSS_HOST}' not shown`);
  expect(text.includes(XSS_LABEL), `label '${XSS_LABEL}' not shown`);
  const flame = await page.locator("svg.flame title").allTextContents();
  expect(flame.some((t) => t.includes(XSS_FRAMES[2])), "the flame graph's titles lack the quoted frame");
  const frames = await page.locator("details.sigform textarea[name=frames]").inputValue();
  expect(frames === XSS_FRAMES.map((s) => s + "\n").join(""), `signature form frames '${frames}'`);
});
await shot(page, "xss-cluster");
step = "xss-stream";
await check("markup: the stream page shows host, labels and frames as text", async () => {
  await go(`/streams/${XSS_STREAM}`);
  expect(path(page) === `/streams/${XSS_STREAM}`, `URL ${page.url()}`);
  await noScriptRan("stream page");
  const h1 = await page.locator("h1").textContent();
  expect(h1 === `xssapp 1.0 "v" <b>&amp;</b> on ${XSS_HOST}`, `heading '${h1}'`);
  const label = await page.locator("dl.labels dd").first().textContent();
  expect(label === XSS_LABEL, `label '${label}'`);
  expect((await page.locator("svg.timeline").count()) === 1, "no timeline");
});
await shot(page, "xss-stream");
await check("timeline: a hover holds the event's whole stack, outermost first", async () => {
  const titles = await page.locator("svg.timeline rect.wait title, svg.timeline rect.run title").allTextContents();
  const t = titles.find((x) => x.startsWith("wait tid 1\n"));
  expect(t, `no title of thread 1's wait in ${JSON.stringify(titles)}`);
  expect(t.endsWith("\n" + XSS_FRAMES.join("\n")), `its title ${JSON.stringify(t)}`);
});
step = "bidi";
await check("bidi controls show as text and long values wrap, at 1400 and 800 px", async () => {
  const wide = [];
  const fits = async (where) => {
    const w = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
    if (w[0] > w[1]) wide.push(`${where} is ${w[0]} px in ${w[1]}`);
  };
  await go(`/streams/${BIDI_STREAM}`);
  const h1 = await page.locator("h1").textContent();
  expect(h1 === "xssapp 2.0[U+2067] on evil[U+202E]exe.txt", `heading '${h1}'`);
  expect((await page.locator("h1 bdi").count()) === 3, "the heading's values are not each in a <bdi>");
  const text = await page.evaluate(() => document.documentElement.outerHTML);
  expect(!/[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/.test(text), "a bidi control is in the page");
  const dd = await page.locator("dl.labels dd").allTextContents();
  expect(dd.includes("x".repeat(255)), "the long label is not shown whole");
  await fits("stream page");
  await go("/streams?app=xssapp");
  await fits("streams page");
  await page.setViewportSize({ width: 800, height: 900 });
  try {
    await go(`/streams/${BIDI_STREAM}`);
    await fits("stream page");
    await shot(page, "bidi-stream-800");
    await go("/streams?app=xssapp");
    await fits("streams page");
  } finally {
    await page.setViewportSize({ width: 1400, height: 900 });
  }
  expect(wide.length === 0, wide.join("; "));
});
await shot(page, "bidi-streams");

// ---- 8b. narrow windows, dark mode, contrast ----
step = "layout";
// "rgb(1, 2, 3)" or "rgba(1, 2, 3, 1)" as its WCAG relative luminance
function luminance(css) {
  const m = /rgba?\(([0-9.]+),\s*([0-9.]+),\s*([0-9.]+)/.exec(css);
  if (!m) throw new Check(`cannot read the colour '${css}'`);
  const c = [m[1], m[2], m[3]].map((v) => {
    const x = Number(v) / 255;
    return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
}
function contrast(a, b) {
  const [l1, l2] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (l1 + 0.05) / (l2 + 0.05);
}
await check("at 800 px the runs page, a run page and the fleet page do not scroll sideways (nor the others), and labels stay beside their values", async () => {
  needs(runId, "no run");
  const wide = [], split = [];
  await page.setViewportSize({ width: 800, height: 900 });
  try {
    const more = [clusterUrl, xssCluster, `/signatures?run=${runId}`, "/alerts", `/compare?a=${env.SM_XSS_RUN}&b=${runId}&force=1`,
      "/streams"].filter((u) => u);
    for (const u of ["/runs", `/runs/${runId}`, `/runs/${env.SM_XSS_RUN}`, "/fleet", ...more]) {
      const r = await go(u);
      expect(r.status() === 200, `${u}: status ${r.status()}`);
      const w = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
      if (w[0] > w[1]) wide.push(`${u} is ${w[0]} px in ${w[1]}`);
      // a label (dt) and its value (dd) on one line: a wrap between them reads as another label's value
      split.push(...(await page.evaluate(() => [...document.querySelectorAll("dl.counts dt")]
        .filter((dt) => dt.nextElementSibling && dt.nextElementSibling.tagName === "DD" &&
          Math.abs(dt.getBoundingClientRect().bottom - dt.nextElementSibling.getBoundingClientRect().bottom) > 6)
        .map((dt) => dt.textContent))).map((t) => `${u}: '${t}'`));
      if (u === "/runs") await shot(page, "runs-800");
    }
  } finally {
    await page.setViewportSize({ width: 1400, height: 900 });
  }
  expect(wide.length === 0, wide.join("; "));
  expect(split.length === 0, `labels apart from their values: ${split.join("; ")}`);
});
let darkShown = false;
await check("dark mode: with prefers-color-scheme: dark the page is dark and its text light", async () => {
  needs(runId, "no run");
  await page.emulateMedia({ colorScheme: "dark" });
  try {
    await go(`/runs/${runId}`);
    const c = await page.evaluate(() => {
      const b = getComputedStyle(document.body);
      const td = document.querySelector("#clusters td");
      return { bg: b.backgroundColor, fg: b.color, td: td ? getComputedStyle(td).color : b.color,
        card: getComputedStyle(document.querySelector("table")).backgroundColor };
    });
    expect(luminance(c.bg) < 0.05, `the body's background is ${c.bg}`);
    expect(luminance(c.fg) > 0.5, `the body's text is ${c.fg}`);
    expect(contrast(c.td, c.card) >= 4.5, `table text ${c.td} on ${c.card}: ${contrast(c.td, c.card).toFixed(2)}:1`);
    await shot(page, "run-dark");
    darkShown = true;
  } finally {
    await page.emulateMedia({ colorScheme: "light" });
  }
});
await check("the done badge's contrast is at least 4.5:1 in the light and the dark scheme", async () => {
  needs(runId, "no run");
  const got = [];
  try {
    for (const scheme of ["light", "dark"]) {
      await page.emulateMedia({ colorScheme: scheme });
      await go(`/runs/${runId}`);
      const c = await page.locator("h1 .status.done").evaluate((e) => {
        const s = getComputedStyle(e);
        return [s.color, s.backgroundColor];
      });
      const r = contrast(c[0], c[1]);
      got.push(`${scheme}: ${c[0]} on ${c[1]} is ${r.toFixed(2)}:1`);
      expect(r >= 4.5, got.join("; "));
    }
  } finally {
    await page.emulateMedia({ colorScheme: "light" });
  }
  console.log(`# done badge ${got.join("; ")}`);
});

// ---- 8b. Compare: a picker of comparable runs, a warning for the others ----
step = "compare";
const bOptions = (p) => p.locator("#compare-b option").evaluateAll((os) => os.map((o) => o.value).filter((v) => v));
await check("Compare: B offers only the done runs of A's app and kind, narrowing as A changes; Compare compares", async () => {
  needs(runId, "no run");
  await go(`/runs/${env.SM_XSS_RUN}`);
  await clickAndWait(page.locator("a#compare-with"));
  expect(path(page) === "/compare" && query(page, "a") === env.SM_XSS_RUN, `Compare with… went to ${page.url()}`);
  let b = await bOptions(page);
  expect(b.join() === env.SM_XSS_RUN2, `B offers [${b}] for run ${env.SM_XSS_RUN}, want [${env.SM_XSS_RUN2}]`);
  const a = await page.locator("#compare-a option").evaluateAll((os) => os.map((o) => o.value).filter((v) => v));
  for (const id of [runId, env.SM_XSS_RUN, env.SM_XSS_RUN2, env.SM_XSS_WAIT])
    expect(a.includes(id), `A does not offer run ${id}: [${a}]`);
  await page.locator("#compare-a").selectOption(runId);
  b = await bOptions(page);
  expect(b.length === 0, `B offers [${b}] for run ${runId}, the only checkout run`);
  await page.locator("#compare-a").selectOption(env.SM_XSS_RUN2);
  b = await bOptions(page);
  expect(b.join() === env.SM_XSS_RUN, `B offers [${b}] for run ${env.SM_XSS_RUN2}`);
  await page.locator("#compare-b").selectOption(env.SM_XSS_RUN);
  await clickAndWait(page.locator("#compare-pick button[type=submit]"));
  expect(query(page, "a") === env.SM_XSS_RUN2 && query(page, "b") === env.SM_XSS_RUN, `submitted ${page.url()}`);
  expect((await page.locator("table#compare").count()) === 1, "no comparison table");
  expect((await page.locator("#compare-warning").count()) === 0, "a warning for runs of one app and kind");
});
await check("Compare: CPU and wait runs get a warning at the top and no comparison; another app a link that forces", async () => {
  await go(`/compare?a=${env.SM_XSS_RUN}&b=${env.SM_XSS_WAIT}`);
  const w = page.locator("main #compare-warning, #compare-warning").first();
  expect(await w.isVisible(), "no visible warning");
  const t = await w.textContent();
  expect(/Nothing in common to compare/.test(t) && t.includes("wait events") && t.includes("CPU samples and wait events"),
    `warning '${t}'`);
  const first = await page.evaluate(() => document.querySelector("h1").nextElementSibling.id);
  expect(first === "compare-warning", `after the heading comes #${first}`);
  expect((await page.locator("table#compare, #compare-force").count()) === 0, "compared anyway, or offered to force");
  await shot(page, "compare-warning");
  await go(`/compare?a=${env.SM_XSS_RUN}&b=${runId}`);
  await clickAndWait(page.locator("a#compare-force"));
  expect(query(page, "force") === "1" && (await page.locator("table#compare").count()) === 1, `forced: ${page.url()}`);
});
await check("Compare without JavaScript: choosing A and submitting lists B's choices", async () => {
  const ctx = await browser.newContext({ javaScriptEnabled: false });
  try {
    const p = await loginAs(ctx, env.SM_ANALYST_TOKEN);
    await p.goto(`${BASE}/compare`);
    expect((await bOptions(p)).length === 0, "B offers runs before A is chosen");
    await p.locator("#compare-a").selectOption(env.SM_XSS_RUN);
    expect((await bOptions(p)).length === 0, "B changed without JavaScript");
    await Promise.all([p.waitForNavigation(), p.locator("#compare-pick button[type=submit]").click()]);
    const b = await bOptions(p);
    expect(b.join() === env.SM_XSS_RUN2, `B offers [${b}] after submitting A`);
  } finally {
    await ctx.close();
  }
});

// ---- 8c. deleting a run: a danger button that asks first ----
step = "delete";
async function loginAs(ctx, token) {
  const p = await ctx.newPage();
  p.setDefaultTimeout(15000);
  await p.goto(`${BASE}/login`);
  await p.fill("input[name=token]", token);
  await Promise.all([p.waitForNavigation(), p.click("form.login button[type=submit]")]);
  expect(new URL(p.url()).pathname === "/runs", `the admin login landed on ${p.url()}`);
  return p;
}
const runStatus = (p, id) => p.evaluate((u) => fetch(u, { credentials: "same-origin" }).then((x) => x.status),
  `/api/v1/runs/${id}`);
// ---- 8d. starting a run and watching it without JavaScript ----
step = "nojs-run";
await check("without JavaScript, the run form starts a run (a plain POST) and lands on its page; a bad field " +
  "comes back named", async () => {
  const ctx = await browser.newContext({ viewport: { width: 800, height: 900 }, javaScriptEnabled: false });
  try {
    const p = await loginAs(ctx, env.SM_ANALYST_TOKEN);
    await Promise.all([p.waitForNavigation(), p.locator("#new-run").click()]);
    const f = p.locator("#run-form");
    await f.locator("select[name=app]").selectOption("xssapp");
    await f.locator("select[name=threshold_mode]").selectOption("ns");
    await f.locator("input[name=threshold]").fill("800000");
    await f.locator("input[name=cut]").fill("not a number");
    await Promise.all([p.waitForNavigation(), f.locator("button[type=submit]").click()]);
    const err = await p.locator("#run-form-error").textContent();
    expect(new URL(p.url()).pathname === "/runs/new" && err === "cut: must be a number",
      `a bad cut: ${p.url()}, error '${err}'`);
    expect((await f.locator("select[name=app]").inputValue()) === "xssapp", "the form lost the app chosen");
    await f.locator("input[name=cut]").fill("0.5");
    await Promise.all([p.waitForURL(/\/runs\/[0-9]+$/), f.locator("button[type=submit]").click()]);
    const id = /\/runs\/([0-9]+)$/.exec(p.url())[1];
    const h1 = await p.locator("h1").textContent();
    expect(h1.startsWith(`Run #${id}: xssapp`), `landed on ${p.url()} headed '${h1}'`);
  } finally {
    await ctx.close();
  }
});
await check("a running run shows its phase and progress on its page and in the list, with and without " +
  "JavaScript; without it the page reloads itself", async () => {
  const live = env.SM_LIVE_RUN;
  const want = "reading events and extracting the AOI: 412 of 689 streams";
  const ctx = await browser.newContext({ viewport: { width: 800, height: 900 }, javaScriptEnabled: false });
  try {
    const p = await loginAs(ctx, env.SM_ANALYST_TOKEN);
    const cell = await p.locator(`td.progress[data-progress="${live}"]`).textContent();
    expect(cell.startsWith(want), `the list shows '${cell}'`);
    await p.goto(`${BASE}/runs/${live}`);
    const text = await p.locator(`p.progress[data-progress="${live}"]`).textContent();
    expect(text.startsWith(want), `the run page shows '${text}'`);
    expect((await p.locator("dl.counts").count()) === 0, "counts shown for a running run");
    const refresh = await p.locator("meta[http-equiv=refresh]").getAttribute("content");
    expect(refresh === "2", `the page's refresh is '${refresh}'`);
  } finally {
    await ctx.close();
  }
  await go(`/runs/${live}`);
  await page.waitForTimeout(2500); // app.js has polled once: it kept the phase
  const text = await page.locator(`p.progress[data-progress="${live}"]`).textContent();
  expect(text.startsWith(want), `with JavaScript the run page shows '${text}'`);
  expect((await page.locator("h1 .status").textContent()) === "running", "not 'running' with JavaScript");
});

let askedOnPage = false;
await check("without JavaScript, Delete leads to a page that asks; Cancel keeps the run (and Revoke is red too)", async () => {
  needs(runId, "no run");
  const ctx = await browser.newContext({ viewport: { width: 800, height: 900 }, javaScriptEnabled: false });
  try {
    const p = await loginAs(ctx, env.SM_ADMIN_TOKEN);
    // the tokens page (an admin's): its revoke buttons are danger buttons that ask too; 800 px fit
    await p.goto(`${BASE}/tokens`);
    const w = await p.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
    expect(w[0] <= w[1], `at 800 px /tokens is ${w[0]} px in ${w[1]}`);
    const revoke = p.locator("form[action$='/revoke'][data-confirm] button.danger");
    expect((await revoke.count()) >= 1, "no revoke danger button with data-confirm on /tokens");
    await p.goto(`${BASE}/runs/${runId}`);
    const b = p.locator("form.delete button[type=submit]");
    expect((await b.getAttribute("class")) === "danger", `the delete button's class is '${await b.getAttribute("class")}'`);
    const bg = await b.evaluate((e) => getComputedStyle(e).backgroundColor);
    const m = /rgba?\(([0-9]+), ([0-9]+), ([0-9]+)/.exec(bg);
    expect(m && Number(m[1]) > 150 && Number(m[2]) < 80 && Number(m[3]) < 80, `the delete button is ${bg}, not red`);
    expect((await p.locator("form.delete").getAttribute("data-confirm")) !== null, "the form has no data-confirm");
    await Promise.all([p.waitForNavigation(), b.click()]);
    expect(new URL(p.url()).pathname === `/runs/${runId}/delete`, `landed on ${p.url()}`);
    expect((await p.locator("h1").textContent()) === `Delete run ${runId}?`, `heading '${await p.locator("h1").textContent()}'`);
    expect((await p.locator("form.confirm input[name=confirm]").inputValue()) === "1", "no confirm=1 in the form");
    expect((await p.locator("form.confirm button.danger").count()) === 1, "no danger button on the page");
    const r = await p.goto(`${BASE}/runs/${runId}`);
    expect(r.status() === 200, `after the first POST the run page answers ${r.status()}: it was deleted`);
    await p.goto(`${BASE}/runs/${runId}`);
    await Promise.all([p.waitForNavigation(), p.locator("form.delete button[type=submit]").click()]);
    await Promise.all([p.waitForNavigation(), p.locator("form.confirm a:text-is('Cancel')").click()]);
    expect(new URL(p.url()).pathname === `/runs/${runId}`, `Cancel went to ${p.url()}`);
    askedOnPage = true;
  } finally {
    await ctx.close();
  }
});
await check("with JavaScript, Delete asks with confirm(): no keeps the run, a POST without confirm=1 deletes " +
  "nothing, yes deletes it", async () => {
  needs(askedOnPage, "the page without JavaScript did not ask");
  const ctx = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  try {
    const p = await loginAs(ctx, env.SM_ADMIN_TOKEN);
    await p.goto(`${BASE}/runs/${runId}`);
    const asked = [];
    p.once("dialog", (d) => { asked.push(d.message()); d.dismiss(); });
    await p.locator("form.delete button[type=submit]").click();
    await p.waitForTimeout(500);
    expect(asked.length === 1 && asked[0].includes(`run ${runId}`), `dialogs: ${JSON.stringify(asked)}`);
    expect(new URL(p.url()).pathname === `/runs/${runId}`, `after 'no' the page is ${p.url()}`);
    expect((await runStatus(p, runId)) === 200, "after 'no' the run is gone");
    // a form's POST with the CSRF token but without confirm=1: the page that asks, nothing deleted
    const direct = await p.evaluate(async (u) => {
      const body = new URLSearchParams({ csrf: document.body.dataset.csrf });
      const x = await fetch(u, { method: "POST", credentials: "same-origin", body });
      return { status: x.status, text: await x.text() };
    }, `/runs/${runId}/delete`);
    expect(direct.status === 200 && direct.text.includes("name=\"confirm\""),
      `a POST without confirm=1 answered ${direct.status}`);
    expect((await runStatus(p, runId)) === 200, "a POST without confirm=1 deleted the run");
    p.once("dialog", (d) => d.accept());
    await Promise.all([p.waitForNavigation(), p.locator("form.delete button[type=submit]").click()]);
    expect(new URL(p.url()).pathname === "/runs", `after 'yes' landed on ${p.url()}`);
    expect((await runStatus(p, runId)) === 404, "after 'yes' the run is still there");
  } finally {
    await ctx.close();
  }
});
// ---- 8e. alert rules and schedules from the Alerts page (an admin's) ----
step = "alerts";
const apiJson = (p, u) => p.evaluate((x) => fetch(x, { credentials: "same-origin" }).then((r) => r.json()), u);
const ruleName = `browser rule <b>${process.pid}</b>`;
let alertsPage = null, alertsCtx = null;
await check("an alert rule made with the Alerts page's form is listed there and by the API; a bad one names its " +
  "field", async () => {
  alertsCtx = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const p = (alertsPage = await loginAs(alertsCtx, env.SM_ADMIN_TOKEN));
  await p.goto(`${BASE}/alerts`);
  const f = p.locator("#rule-form");
  await f.locator("input[name=name]").fill(ruleName);
  await f.locator("input[name=app]").fill(env.SM_APP);
  await f.locator("select[name=type]").selectOption("new_cluster");
  await f.locator("input[name=min_share]").fill("1.5");
  await f.locator("input[name=webhook]").fill("https://hooks.example.com/stackmine");
  await Promise.all([p.waitForNavigation(), f.locator("button[type=submit]").click()]);
  const err = await p.locator("#rule-form p.error[role=alert]").textContent();
  expect(err === "min_share: a number from 1e-09 to 1", `a share of 1.5: '${err}'`);
  expect((await f.locator("input[name=name]").inputValue()) === ruleName, "the form lost the name");
  await f.locator("input[name=min_share]").fill("0.2");
  await Promise.all([p.waitForNavigation(), f.locator("button[type=submit]").click()]);
  expect(new URL(p.url()).pathname === "/alerts", `landed on ${p.url()}`);
  const row = p.locator("#rules tbody tr", { hasText: ruleName });
  expect((await row.count()) === 1, `no row named '${ruleName}' in the rules`);
  const rules = (await apiJson(p, "/api/v1/alert-rules")).rules.filter((r) => r.name === ruleName);
  expect(rules.length === 1 && rules[0].min_share === 0.2 && rules[0].app === env.SM_APP &&
    rules[0].type === "new_cluster", `the API has ${JSON.stringify(rules)}`);
  expect((await row.getAttribute("data-id")) === String(rules[0].rule_id), "the row is not the API's rule");
  await shot(p, "alerts");
});
await check("a schedule made with the form is listed there and by the API", async () => {
  needs(alertsPage, "no admin page");
  const p = alertsPage;
  const f = p.locator("#schedule-form");
  await f.locator("input[name=app]").fill(env.SM_APP);
  await f.locator("select[name=kind]").selectOption("wait");
  await f.locator("input[name=every_s]").fill("1800");
  await f.locator("input[name=window_s]").fill("3600");
  await f.locator("textarea[name=params]").fill('{"cut": 0.6}');
  await Promise.all([p.waitForNavigation(), f.locator("button[type=submit]").click()]);
  expect(new URL(p.url()).pathname === "/alerts", `landed on ${p.url()}`);
  const s = (await apiJson(p, "/api/v1/schedules")).schedules.filter((x) => x.app === env.SM_APP && x.kind === "wait");
  expect(s.length === 1 && s[0].every_s === 1800 && s[0].window_s === 3600 && s[0].params.cut === 0.6,
    `the API has ${JSON.stringify(s)}`);
  expect((await p.locator(`#schedules tbody tr[data-id="${s[0].schedule_id}"]`).count()) === 1, "not in the list");
});
await check("deleting a rule or a schedule asks first (confirm(): no keeps it, yes deletes it)", async () => {
  needs(alertsPage, "no admin page");
  const p = alertsPage;
  const rule = (await apiJson(p, "/api/v1/alert-rules")).rules.find((r) => r.name === ruleName);
  needs(rule, "no rule");
  const b = p.locator(`#rules form[action="/alerts/rules/${rule.rule_id}/delete"] button.danger`);
  const asked = [];
  p.once("dialog", (d) => { asked.push(d.message()); d.dismiss(); });
  await b.click();
  await p.waitForTimeout(500);
  expect(asked.length === 1 && asked[0].includes(`alert rule ${rule.rule_id}`), `dialogs: ${JSON.stringify(asked)}`);
  expect((await apiJson(p, "/api/v1/alert-rules")).rules.some((r) => r.rule_id === rule.rule_id), "'no' deleted it");
  p.once("dialog", (d) => d.accept());
  await Promise.all([p.waitForNavigation(), b.click()]);
  expect(new URL(p.url()).pathname === "/alerts", `after 'yes' landed on ${p.url()}`);
  expect(!(await apiJson(p, "/api/v1/alert-rules")).rules.some((r) => r.rule_id === rule.rule_id), "'yes' kept it");
  const sch = (await apiJson(p, "/api/v1/schedules")).schedules.find((x) => x.app === env.SM_APP);
  p.once("dialog", (d) => d.accept());
  await Promise.all([p.waitForNavigation(),
    p.locator(`#schedules form[action="/alerts/schedules/${sch.schedule_id}/delete"] button.danger`).click()]);
  expect((await apiJson(p, "/api/v1/schedules")).schedules.length === 0, "the schedule is still there");
  await alertsCtx.close();
});

await collectCsp();
await check("no Content-Security-Policy violation on any page", async () => {
  expect(cspViolations.length === 0, cspViolations.join(" ; "));
});
// answers that Chromium logs as "Failed to load resource" and that are meant: the
// wrong login (401), the writes without a CSRF token (403), the streams list's reversed time range (400),
// the icon (its own check)
const expected = (e) => (e.step === "wrong-login" && /status of 401/.test(e.text)) ||
  (e.step === "streams-bad-range" && /status of 400/.test(e.text)) ||
  (e.step === "csrf" && /status of 403/.test(e.text)) || /\/favicon\.ico$/.test(e.src || "");
await check("no script errors in the console", async () => {
  const errs = consoleErrors.filter((e) => !expected(e));
  expect(errs.length === 0, errs.map((e) => `${e.step} ${e.url}: ${e.text} (${e.src})`).join(" ; "));
});
await check("the site has an icon (Chromium asks for /favicon.ico and logs a 404)", async () => {
  const st = await page.evaluate(() => fetch("/favicon.ico", { credentials: "same-origin" }).then((x) => x.status));
  const linked = await page.locator("head link[rel~=icon]").count();
  expect(st === 200 || linked === 1, `GET /favicon.ico answers ${st} and no page links an icon`);
});

// ---- 9. logout ----
step = "logout";
await check("logging out ends the session", async () => {
  await go("/runs");
  await clickAndWait(page.locator("form.logout button[type=submit]"));
  expect(path(page) === "/login", `landed on ${page.url()}`);
  const c = (await context.cookies()).find((x) => x.name === "sm_session");
  expect(!c || c.value === "", "the sm_session cookie is still set");
  await go("/runs");
  expect(path(page) === "/login" && query(page, "next") === "/runs", `/runs now shows ${page.url()}`);
  const api = await page.evaluate(async () => (await fetch("/api/v1/runs", { credentials: "same-origin" })).status);
  expect(api === 401, `the API answers ${api} without a session`);
});
await shot(page, "logged-out");
await check("logging in again returns to the page asked for", async () => {
  await go("/signatures");
  expect(path(page) === "/login" && query(page, "next") === "/signatures", `/signatures shows ${page.url()}`);
  await page.fill("input[name=token]", env.SM_ANALYST_TOKEN);
  await clickAndWait(page.locator("form.login button[type=submit]"));
  expect(path(page) === "/signatures", `landed on ${page.url()}`);
});
await check("no page is wider than the window", async () => {
  expect(tooWide.length === 0, `${tooWide.join("; ")} wide, the window ${page.viewportSize().width} px`);
});

await browser.close();
console.error(`${shots} screenshots in ${SCREENS}`);
process.exit(failed ? 1 : 0);
