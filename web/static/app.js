// app.js: the dashboard's few scripts. Pages are rendered on the server; this
// posts the run form to the API as JSON (without scripts it is a plain POST to /runs/new),
// follows running runs' progress,
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

  // Import: a chosen file fills the form's text area.
  const file = document.getElementById("import-file");
  if (file) {
    file.addEventListener("change", async () => {
      const f = file.files && file.files[0];
      if (f) document.querySelector("#import-form textarea[name=doc]").value = await f.text();
    });
  }
})();
