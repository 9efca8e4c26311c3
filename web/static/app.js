// app.js: the dashboard's few scripts. Pages are rendered on the server; this
// posts the run form to the API as JSON, follows running runs' progress,
// reads a signature file into the import form and asks before a destructive
// form acts. It never builds HTML from data: text goes in with textContent only.
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

  // Runs that are queued or running: show their phase, reload when they end.
  const live = document.querySelectorAll("[data-run]");
  if (live.length) {
    const poll = async () => {
      let changed = false;
      for (const el of live) {
        try {
          const r = await fetch("/api/v1/runs/" + el.dataset.run, { credentials: "same-origin" });
          if (!r.ok) continue;
          const run = await r.json();
          if (run.status === "done" || run.status === "failed") changed = true;
          const p = run.progress || {};
          let text = run.status;
          if (run.status === "running" && p.phase) {
            text += " · " + p.phase;
            if (p.streams_read !== undefined) text += " · " + p.streams_read + " streams read";
            if (p.parts !== undefined) text += " · parts " + p.parts_done + " of " + p.parts + " done";
          }
          el.textContent = text;
        } catch (e) {
          /* try again at the next tick */
        }
      }
      if (changed) location.reload();
      else setTimeout(poll, 1000);
    };
    setTimeout(poll, 1000);
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

  // Import: a chosen file fills the form's text area.
  const file = document.getElementById("import-file");
  if (file) {
    file.addEventListener("change", async () => {
      const f = file.files && file.files[0];
      if (f) document.querySelector("#import-form textarea[name=doc]").value = await f.text();
    });
  }
})();
