// app.js: the dashboard's few scripts. Pages are rendered on the server; this
// posts the run form to the API as JSON (without scripts it is a plain POST to /runs/new),
// follows running runs' progress, reads a signature file into the import form, asks before a
// destructive form acts, narrows Compare's run B to comparable runs, and zooms and searches
// flame graphs in place. It never builds HTML from data: text goes in with textContent only.
"use strict";

(function () {
  const csrf = document.body.dataset.csrf || "";

  function lines(text) {
    return text.split(/\r?\n/).map((s) => s.trim()).filter((s) => s.length > 0);
  }

  // The run form: its fields become the JSON body of POST /api/v1/runs.
  const form = document.getElementById("run-form");
  if (form) {
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const f = form.elements;
      const err = document.getElementById("run-form-error");
      err.textContent = "";
      const body = {
        app: f.app.value,
        kind: f.kind.value,
        aoi: f.aoi.value,
        linkage: f.linkage.value,
        include: lines(f.include.value),
        exclude: lines(f.exclude.value),
        filter: {},
      };
      const cut = Number(f.cut.value);
      const thr = Number(f.threshold.value);
      if (!Number.isFinite(cut) || !Number.isFinite(thr)) {
        err.textContent = "cut and threshold must be numbers";
        return;
      }
      body.cut = cut;
      if (f.threshold_mode.value === "ns") body.threshold_ns = Math.round(thr);
      else if (f.threshold_mode.value === "fraction") body.threshold_fraction = thr;
      else {
        const d = Number(f.delay_ms.value);
        if (!Number.isFinite(d) || d <= 0) {
          err.textContent = "delay: a positive number of milliseconds";
          return;
        }
        body.threshold_guideline = { share: thr, delay_ns: Math.round(d * 1e6) };
      }
      for (const k of ["version", "host", "since", "until"]) {
        if (f[k].value.trim()) body.filter[k] = f[k].value.trim();
      }
      const labels = {};
      for (const l of lines(f.labels.value)) {
        const eq = l.indexOf("=");
        if (eq <= 0) {
          err.textContent = "labels: write key=value, one per line";
          return;
        }
        labels[l.slice(0, eq).trim()] = l.slice(eq + 1).trim();
      }
      if (Object.keys(labels).length) body.filter.labels = labels;
      try {
        const r = await fetch("/api/v1/runs", {
          method: "POST",
          credentials: "same-origin",
          headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
          body: JSON.stringify(body),
        });
        const j = await r.json();
        if (r.status === 202) location.href = "/runs/" + j.run_id;
        else err.textContent = j.error || "the run was refused (" + r.status + ")";
      } catch (e) {
        err.textContent = "the server did not answer: " + e.message;
      }
    });
  }

  // Runs that are queued or running: their phase and progress, as the server words it on the run's
  // page (read from it with DOMParser, copied as text); the run's page reloads when it ends, the
  // list too unless the run form has been touched.
  const live = document.querySelectorAll("[data-run]");
  if (live.length) {
    const onRunPage = document.querySelector("h1 [data-run]") !== null;
    let touched = false;
    if (form) form.addEventListener("input", () => { touched = true; });
    const poll = async () => {
      let ended = false;
      for (const el of live) {
        const id = el.dataset.run;
        if (!id) continue;
        try {
          const r = await fetch("/runs/" + id, { credentials: "same-origin" });
          if (!r.ok) continue;
          const doc = new DOMParser().parseFromString(await r.text(), "text/html");
          const st = doc.querySelector("h1 .status");
          const pr = doc.querySelector('[data-progress="' + id + '"]');
          if (pr) {
            for (const mine of document.querySelectorAll('[data-progress="' + id + '"]')) mine.textContent = pr.textContent;
          }
          if (st) {
            el.textContent = st.textContent;
            el.className = st.className;
            if (!st.dataset.run) {
              ended = true;
              delete el.dataset.run;
            }
          }
        } catch (e) {
          /* try again at the next tick */
        }
      }
      if (ended && (onRunPage || !touched)) location.reload();
      else setTimeout(poll, 2000);
    };
    setTimeout(poll, 2000);
  }

  // Destructive forms (data-confirm): the browser's confirm() asks; yes adds confirm=1, which
  // the server wants before it acts (without it, it answers with a page that asks).
  for (const f of document.querySelectorAll("form[data-confirm]")) {
    f.addEventListener("submit", (ev) => {
      if (!window.confirm(f.dataset.confirm)) {
        ev.preventDefault();
        return;
      }
      if (!f.querySelector("input[name=confirm]")) {
        const c = document.createElement("input");
        c.type = "hidden";
        c.name = "confirm";
        c.value = "1";
        f.appendChild(c);
      }
    });
  }

  // Compare: run B's choices narrow to the runs of run A's app and kind as A changes (without JS,
  // the server lists them once A is submitted).
  const ca = document.getElementById("compare-a"), cb = document.getElementById("compare-b");
  if (ca && cb) {
    ca.addEventListener("change", () => {
      const a = ca.selectedOptions[0], keep = cb.value, first = document.createElement("option");
      first.value = "";
      first.textContent = a && a.value ? "— choose —" : "— choose run A first —";
      cb.replaceChildren(first);
      if (!a || !a.value) return;
      for (const o of ca.options) {
        if (!o.value || o.value === a.value || o.dataset.app !== a.dataset.app || o.dataset.kind !== a.dataset.kind)
          continue;
        const c = o.cloneNode(true);
        c.selected = o.value === keep;
        cb.appendChild(c);
      }
    });
  }

  // Flame graphs (section#flame): the server draws them (and zooms and searches through ?focus= and
  // ?search= without JS). Here a click on a frame fetches the zoomed graph and swaps it in (no
  // reload, the scroll position kept), and the search box highlights live.
  const flame = document.getElementById("flame");
  if (flame && flame.querySelector("svg.flame")) {
    const field = () => flame.querySelector("form.flame-search input[name=search]");
    // The same text as the server's fmt_share() (common/fmt.c); the total comes written by the server.
    const share = (frac) => {
      const p = 100 * frac;
      if (!Number.isFinite(p)) return "-";
      if (p === 0) return "0 %";
      if (p > 0 && p < 0.05) return "< 0.1 %";
      if (p >= 99.95 && p < 100) return "> 99.9 %";
      return p.toFixed(1).replace(/\.0$/, "") + " %";
    };
    const lower = (s) => s.replace(/[A-Z]+/g, (c) => c.toLowerCase()); // ASCII only, as the server
    const search = () => {
      const svg = flame.querySelector("svg.flame"), f = field();
      const out = flame.querySelector("form.flame-search output");
      if (!svg || !f) return;
      const q = lower(f.value);
      svg.classList.toggle("searching", q.length > 0);
      // Frames overlapping in x are one another's callers: the union of the matches' spans counts
      // each cost once. The full-width callers above a zoomed frame are not part of the share.
      const spans = [];
      for (const g of svg.querySelectorAll("g.fn")) {
        const hit = q.length > 0 && lower(g.querySelector("title").textContent.split("\n")[0]).includes(q);
        g.classList.toggle("hit", hit);
        const r = g.querySelector("rect");
        if (hit && !g.classList.contains("anc")) spans.push([Number(r.getAttribute("x")), Number(r.getAttribute("x")) + Number(r.getAttribute("width"))]);
      }
      if (!out) return;
      if (!q.length) {
        out.textContent = "";
        return;
      }
      spans.sort((a, b) => a[0] - b[0]);
      let sum = 0, end = -1;
      for (const [a, b] of spans) {
        if (b <= end) continue;
        sum += b - Math.max(a, end);
        end = b;
      }
      const width = Number(svg.getAttribute("width")) || 1;
      out.textContent = "matched: " + share(Math.min(sum, width) / width) + " of " +
        flame.querySelector("div.flame").dataset.shown;
    };
    const zoom = async (href) => {
      const url = new URL(href, location.href);
      const f = field();
      if (f && f.value) url.searchParams.set("search", f.value);
      else url.searchParams.delete("search");
      url.hash = "";
      try {
        const r = await fetch(url, { credentials: "same-origin" });
        if (!r.ok) throw new Error("status " + r.status);
        const doc = new DOMParser().parseFromString(await r.text(), "text/html");
        const fresh = doc.getElementById("flame");
        if (!fresh || !fresh.querySelector("svg.flame")) throw new Error("no graph");
        const y = window.scrollY, typed = f ? f.value : "";
        // a shorter graph must not pull the page up under the reader
        flame.style.minHeight = flame.offsetHeight + "px";
        flame.replaceChildren(...Array.from(fresh.childNodes, (n) => document.importNode(n, true)));
        if (field()) field().value = typed;
        window.scrollTo(window.scrollX, y);
      } catch (e) {
        location.href = href; // the server's zoom still works
      }
    };
    flame.addEventListener("click", (ev) => {
      const a = ev.target.closest("svg.flame a, a.flame-reset");
      if (!a || ev.button !== 0 || ev.ctrlKey || ev.metaKey || ev.shiftKey) return;
      ev.preventDefault();
      zoom(a.getAttribute("href") || a.getAttributeNS("http://www.w3.org/1999/xlink", "href"));
    });
    flame.addEventListener("input", (ev) => {
      if (ev.target.matches("form.flame-search input[name=search]")) search();
    });
    flame.addEventListener("submit", (ev) => {
      if (!ev.target.matches("form.flame-search")) return;
      ev.preventDefault();
      search();
    });
  }

  // Import: a chosen file fills the form's text area.
  const file = document.getElementById("import-file");
  if (file) {
    file.addEventListener("change", async () => {
      const f = file.files && file.files[0];
      if (f) document.querySelector("#import-form textarea[name=doc]").value = await f.text();
    });
  }
})();
