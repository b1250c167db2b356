/* neuron-explorer timeline: a canvas renderer fed by the server's level-of-detail views.
 *
 * The server (explorer/api.py, GET /api/timeline/view) answers a window [t0, t1) (ns from the trace start)
 * with at most a few thousand shapes per view: single events keep their identity (table row id), busy
 * pixel columns arrive merged with a member count. This file draws them, hit-tests whole slices (hover and
 * click anywhere on a slice), draws labels inside slices, the track tree, counters with scales, an adaptive
 * time axis, flows of the selected event, search/pick highlights, notes, and the area selection.
 *
 * Dash integration: page callbacks hand data in through window.neuronTimeline.* (clientside callbacks);
 * the component reports back with dash_clientside.set_props on the stores tl-sel (selected event) and
 * tl-area (area selection). Nothing here evaluates trace content: names are drawn as text.
 */
(function () {
  "use strict";
  const ROW_H = 18, COUNTER_H = 40, AXIS_H = 28, LABEL_W = 240, INDENT = 12, MIN_SPAN = 20;
  const NT = window.neuronTimeline = window.neuronTimeline || {};
  let active = null;

  // ------------------------------------------------------------------ formatting
  function fmtDur(ns) {
    const a = Math.abs(ns);
    if (a < 1e3) return ns.toFixed(0) + " ns";
    if (a < 1e6) return (ns / 1e3).toPrecision(4) + " µs";
    if (a < 1e9) return (ns / 1e6).toPrecision(4) + " ms";
    return (ns / 1e9).toPrecision(4) + " s";
  }
  NT.fmtDur = fmtDur;
  function fmtValue(v, unit) {
    if (v === null || v === undefined || !isFinite(v)) return "n/a";
    const a = Math.abs(v);
    if (unit === "bytes/s") return a >= 1e9 ? (v / 1e9).toPrecision(4) + " GB/s" : (v / 1e6).toPrecision(4) + " MB/s";
    if (unit === "bytes") return a >= 2 ** 30 ? (v / 2 ** 30).toPrecision(4) + " GiB" : a >= 2 ** 20 ? (v / 2 ** 20).toPrecision(4) + " MiB" : v.toLocaleString() + " B";
    if (unit === "FLOP/s") return (v / 1e12).toPrecision(4) + " TFLOP/s";
    if (unit === "percent" || unit === "%") return v.toPrecision(3) + " %";
    if (unit === "count" || unit === "") return Number.isInteger(v) ? v.toLocaleString() : v.toPrecision(4);
    return v.toPrecision(4) + " " + unit;
  }
  NT.fmtValue = fmtValue;
  // Axis ticks: a 1/2/5 step giving ~one label per 110 px; labels in the unit of the step, from trace start.
  function ticks(t0, t1, px) {
    const span = Math.max(t1 - t0, 1), want = Math.max(2, px / 110);
    const raw = span / want, p = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map(m => m * p).find(s => s >= raw) || 10 * p;
    const unit = step >= 1e9 ? [1e9, "s"] : step >= 1e6 ? [1e6, "ms"] : step >= 1e3 ? [1e3, "µs"] : [1, "ns"];
    const digits = Math.max(0, Math.ceil(-Math.log10(step / unit[0]) + 1e-9));
    const out = [];
    for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) {
      out.push([t, (t / unit[0]).toFixed(Math.min(digits, 6)) + " " + unit[1]]);
    }
    return out;
  }
  NT.ticks = ticks;
  // "GPT.blocks.0.attn" -> "attn", "GPT.blocks.0" -> "blocks.0" (a list item keeps its list's name)
  function shortModule(path) {
    const p = String(path).split(".");
    return p.length > 1 && /^\d+$/.test(p[p.length - 1]) ? p.slice(-2).join(".") : p[p.length - 1];
  }
  NT.shortModule = shortModule;
  function textColor(hex) {
    const n = parseInt(hex.slice(1), 16), r = n >> 16, g = (n >> 8) & 255, b = n & 255;
    return (0.299 * r + 0.587 * g + 0.114 * b) > 150 ? "#111" : "#fff";
  }

  // ------------------------------------------------------------------ the component
  class Timeline {
    constructor(box, meta) {
      this.box = box;
      this.meta = meta;
      this.canvas = document.createElement("canvas");
      this.canvas.id = "tl-canvas";
      this.canvas.tabIndex = 0;
      this.tip = document.createElement("div");
      this.tip.className = "tl-tooltip";
      box.innerHTML = "";
      box.appendChild(this.canvas);
      box.appendChild(this.tip);
      this.ctx = this.canvas.getContext("2d");
      this.v0 = meta.t0; this.v1 = meta.t1;
      this.scroll = 0;
      this.data = null; this.fetched = null;
      this.sel = meta.sel || null;           // [table, rid]
      this.selpos = null;                    // {row, s, e}
      this.flows = [];
      this.results = {items: [], k: -1};
      this.notes = meta.notes || [];
      this.area = meta.area || null;          // {t0, t1, rows}
      this.hover = null; this.mouse = null; this.drag = null;
      this.seq = 0; this.painted = 0; this.pending = null;
      this.collapsed = new Set();
      const shown = meta.shown ? new Set(meta.shown) : null;
      if (shown) meta.groups.forEach((g, i) => { if (!shown.has(i)) this.collapsed.add(g); });
      else (meta.folded || []).forEach(g => this.collapsed.add(g));  // hierarchy levels below the first
      this.folds = new Set(meta.rows.filter(r => r.folds).map(r => r.folds));
      this.textW = new Map();
      this.layout();
      this.bind();
      this.resize();
      this.request(true);
    }

    // tree lines: headers for every path prefix, then the rows (hidden under a collapsed node)
    layout() {
      const lines = [], seen = new Set();
      let y = 0;
      for (let i = 0; i < this.meta.rows.length; i++) {
        const r = this.meta.rows[i], path = r.path;
        let hidden = false;
        for (let d = 0; d < path.length; d++) {
          const key = path.slice(0, d + 1).join(" / ");
          if (!seen.has(key)) {
            seen.add(key);
            // no header for a hierarchy level: its row's label is the toggle
            if (!hidden && !this.folds.has(key)) {
              lines.push({kind: "head", key: key, name: path[d], depth: d, y: y, h: ROW_H}); y += ROW_H;
            }
          }
          if (this.collapsed.has(key)) hidden = true;
        }
        if (hidden) continue;
        const h = r.table === "counters" ? COUNTER_H : ROW_H;
        lines.push({kind: "row", row: i, depth: path.length, y: y, h: h});
        y += h;
      }
      this.lines = lines;
      this.total = y;
      this.rowLine = new Map(lines.filter(l => l.kind === "row").map(l => [l.row, l]));
    }

    shownGroups() {
      const out = [];
      this.meta.groups.forEach((g, i) => {
        const parts = g.split(" / ");
        let ok = true;
        for (let d = 0; d < parts.length; d++) if (this.collapsed.has(parts.slice(0, d + 1).join(" / "))) ok = false;
        if (ok) out.push(i);
      });
      return out;
    }

    resize() {
      const r = this.box.getBoundingClientRect(), dpr = window.devicePixelRatio || 1;
      this.W = Math.max(300, Math.floor(r.width));
      this.H = Math.max(200, Math.floor(r.height));
      this.canvas.width = this.W * dpr; this.canvas.height = this.H * dpr;
      this.canvas.style.width = this.W + "px"; this.canvas.style.height = this.H + "px";
      this.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      this.draw();
    }

    plotW() { return this.W - LABEL_W; }
    x(t) { return LABEL_W + (t - this.v0) / (this.v1 - this.v0) * this.plotW(); }
    t(x) { return this.v0 + (x - LABEL_W) / this.plotW() * (this.v1 - this.v0); }

    // ------------------------------------------------------------------ data
    request(now) {
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.fetchView(), now ? 0 : 60);
      this.draw();
    }

    fetchView() {
      const m = this.meta, a = Math.floor(this.v0), b = Math.ceil(this.v1);
      const q = new URLSearchParams({trace: m.trace, t0: a, t1: b, w: this.plotW(), color: m.color});
      if (m.rank !== null && m.rank !== undefined) q.set("rank", m.rank);
      if (m.q) q.set("q", m.q);
      if (m.pick !== null && m.pick !== undefined) q.set("pick", m.pick);
      q.set("g", this.shownGroups().join("."));
      if (this.pending) this.pending.abort();
      const ctl = new AbortController();
      this.pending = ctl;
      const seq = ++this.seq, started = performance.now();
      fetch(m.api + "?" + q.toString(), {signal: ctl.signal}).then(r => {
        if (!r.ok) return r.json().then(e => { throw new Error(e.error || r.statusText); });
        return r.json();
      }).then(d => {
        if (seq !== this.seq) return;
        this.data = d;
        this.byRow = new Map(d.rows.map(x => [x[0], x]));
        this.hlByRow = new Map(d.hl.map(x => [x[0], x]));
        this.ctrByRow = new Map(d.counters.map(x => [x[0], x]));
        this.lastFetchMs = performance.now() - started;
        clearTimeout(this.pendingTimer);
        if (d.pending && d.pending.length) this.pendingTimer = setTimeout(() => this.fetchView(), 700);
        this.draw();
        this.painted = seq;
        this.box.setAttribute("data-painted", String(seq));
        this.box.setAttribute("data-shapes", String(d.n));
        this.syncUrl();
        const st = document.getElementById("tl-stats-live");
        if (st) st.textContent = d.n.toLocaleString() + " shapes · 1 shape ≥ " + fmtDur(d.thr) + " · " +
          fmtDur(b - a) + " shown";
      }).catch(e => {
        if (e.name === "AbortError") return;
        const st = document.getElementById("tl-stats-live");
        if (st) st.textContent = "error: " + e.message;
      });
    }

    syncUrl() {
      const u = new URL(window.location.href);
      const full = this.v0 <= 0 && this.v1 >= this.meta.span;
      if (full) { u.searchParams.delete("t0"); u.searchParams.delete("t1"); }
      else { u.searchParams.set("t0", Math.floor(this.v0)); u.searchParams.set("t1", Math.ceil(this.v1)); }
      if (this.sel) u.searchParams.set("sel", this.sel[0] + ":" + this.sel[1]); else u.searchParams.delete("sel");
      if (this.meta.q) u.searchParams.set("q", this.meta.q); else u.searchParams.delete("q");
      if (this.meta.color && this.meta.color !== "op") u.searchParams.set("color", this.meta.color); else u.searchParams.delete("color");
      const g = this.shownGroups();
      if (g.length === this.meta.groups.length) u.searchParams.delete("rows"); else u.searchParams.set("rows", g.join("."));
      window.history.replaceState(window.history.state, "", u.toString());
    }

    // ------------------------------------------------------------------ view changes
    setView(a, b, now) {
      const span = this.meta.span, w = Math.max(b - a, MIN_SPAN);
      let c = (a + b) / 2;
      a = c - w / 2; b = c + w / 2;
      const lo = -0.05 * span, hi = 1.05 * span;
      if (w >= hi - lo) { a = lo; b = hi; }
      else if (a < lo) { b += lo - a; a = lo; }
      else if (b > hi) { a -= b - hi; b = hi; }
      this.v0 = a; this.v1 = b;
      this.request(now);
    }
    zoom(f, atX) {
      const t = atX === undefined ? (this.v0 + this.v1) / 2 : this.t(atX);
      this.setView(t - (t - this.v0) * f, t + (this.v1 - t) * f);
    }
    pan(frac) { const d = (this.v1 - this.v0) * frac; this.setView(this.v0 + d, this.v1 + d); }
    whole() { this.setView(0, this.meta.span, true); }
    focus(s, e) { const d = Math.max(e - s, 1000); this.setView(s - 0.5 * d, e + 0.5 * d, true); }

    // ------------------------------------------------------------------ hit testing
    lineAt(y) {
      const yy = y - AXIS_H + this.scroll;
      if (y < AXIS_H) return null;
      for (const l of this.lines) if (yy >= l.y && yy < l.y + l.h) return l;
      return null;
    }
    shapeAt(x, y) {
      const l = this.lineAt(y);
      if (!l || l.kind !== "row" || x < LABEL_W || !this.data) return null;
      const d = this.byRow.get(l.row);
      if (!d) return null;
      const [, s, du, n, , , ids] = d;
      const t = this.t(x), tol = 2 * (this.v1 - this.v0) / this.plotW();
      // shapes of a row are sorted and disjoint: the last one starting before t + tol, then its neighbour
      let lo = 0, hi = s.length - 1, k = -1;
      while (lo <= hi) { const mid = (lo + hi) >> 1; if (s[mid] <= t + tol) { k = mid; lo = mid + 1; } else hi = mid - 1; }
      for (const j of [k, k - 1]) {
        if (j >= 0 && s[j] - tol <= t && s[j] + Math.max(du[j], 0) + tol >= t) {
          return {line: l, row: l.row, j: j, s: s[j], e: s[j] + du[j], n: n[j], id: ids[j], data: d};
        }
      }
      return null;
    }
    areaRows(y0, y1) {
      const a = Math.min(y0, y1) - AXIS_H + this.scroll, b = Math.max(y0, y1) - AXIS_H + this.scroll;
      return this.lines.filter(l => l.kind === "row" && l.y + l.h > a && l.y < b).map(l => l.row);
    }

    // ------------------------------------------------------------------ events
    bind() {
      const c = this.canvas;
      const pos = e => { const r = c.getBoundingClientRect(); return [e.clientX - r.left, e.clientY - r.top]; };
      c.addEventListener("mousemove", e => {
        const [x, y] = pos(e);
        this.mouse = [x, y];
        if (this.drag) {
          this.drag.x1 = x; this.drag.y1 = y;
          if (this.drag.mode === "pan") {
            const dt = (this.drag.x0 - x) / this.plotW() * (this.drag.v1 - this.drag.v0);
            this.v0 = this.drag.v0 + dt; this.v1 = this.drag.v1 + dt;
            this.request(false);
          }
          this.draw();
          return;
        }
        this.hover = this.shapeAt(x, y);
        this.showTip(x, y);
        this.draw();
      });
      c.addEventListener("mouseleave", () => { this.mouse = null; this.hover = null; this.tip.style.display = "none"; this.draw(); });
      c.addEventListener("mousedown", e => {
        const [x, y] = pos(e);
        c.focus({preventScroll: true});  // focusing must not scroll the page to the (tall) canvas
        if (x < LABEL_W) { e.preventDefault(); return; }
        const mode = (e.button === 1 || e.altKey) ? "pan" : "area";
        this.drag = {mode: mode, x0: x, y0: y, x1: x, y1: y, v0: this.v0, v1: this.v1};
        e.preventDefault();
      });
      window.addEventListener("mouseup", e => {
        if (!this.drag || !this.canvas.isConnected) { this.drag = null; return; }
        const d = this.drag;
        this.drag = null;
        if (d.mode === "area" && Math.abs(d.x1 - d.x0) > 4) {
          const a = this.t(Math.min(d.x0, d.x1)), b = this.t(Math.max(d.x0, d.x1));
          let rows = this.areaRows(d.y0, d.y1);
          this.area = {t0: Math.floor(a), t1: Math.ceil(b), rows: rows};
          this.setProps("tl-area", {data: this.area});
        } else if (d.mode === "area") {
          this.clickAt(d.x0, d.y0);
        }
        this.draw();
      });
      c.addEventListener("dblclick", e => {  // zoom to the event under the pointer
        const [x, y] = pos(e);
        if (x < LABEL_W) return;
        this.eventAt(x, y).then(ev => { if (ev) this.focus(ev.s, ev.e); });
      });
      c.addEventListener("click", e => {
        const [x, y] = pos(e);
        if (x >= LABEL_W) return;
        const l = this.lineAt(y);
        const fold = l && l.kind === "row" ? this.meta.rows[l.row].folds : null;
        if (l && (l.kind === "head" || fold)) {
          const key = l.kind === "head" ? l.key : fold;
          if (this.collapsed.has(key)) this.collapsed.delete(key); else this.collapsed.add(key);
          this.layout();
          this.scroll = Math.max(0, Math.min(this.scroll, this.total - (this.H - AXIS_H)));
          this.request(true);
        }
      });
      c.addEventListener("wheel", e => {
        const [x] = pos(e);
        if (e.ctrlKey || e.metaKey) { this.zoom(Math.exp(e.deltaY * 0.002), x); }
        else if (Math.abs(e.deltaX) > Math.abs(e.deltaY) || e.shiftKey) { this.pan((e.deltaX || e.deltaY) * 0.001); }
        else {
          const max = Math.max(0, this.total - (this.H - AXIS_H));
          if (max === 0) { this.zoom(Math.exp(e.deltaY * 0.002), x); }
          else { this.scroll = Math.max(0, Math.min(max, this.scroll + e.deltaY)); this.draw(); }
        }
        e.preventDefault();
      }, {passive: false});
    }

    // one click selects the event under the pointer, also inside a merged shape (the server finds it)
    clickAt(x, y) {
      this.eventAt(x, y).then(ev => { if (ev) this.select([ev.table, ev.id], {row: ev.row, s: ev.s, e: ev.e}); });
    }

    // the event under the pointer: a drawn single event, else asked from the server (GET /api/timeline/at)
    eventAt(x, y) {
      const h = this.shapeAt(x, y);
      if (h && h.id >= 0) {
        return Promise.resolve({table: this.meta.rows[h.row].table, id: h.id, row: h.row, s: h.s, e: h.e});
      }
      const l = this.lineAt(y);
      if (!l || l.kind !== "row" || x < LABEL_W || this.meta.rows[l.row].table === "counters") {
        return Promise.resolve(null);
      }
      const m = this.meta, tol = 3 * (this.v1 - this.v0) / this.plotW();
      const q = new URLSearchParams({trace: m.trace, row: l.row, t: Math.round(this.t(x)), tol: Math.ceil(tol)});
      if (m.rank !== null && m.rank !== undefined) q.set("rank", m.rank);
      return fetch(m.api.replace(/view$/, "at") + "?" + q.toString())
        .then(r => r.ok ? r.json() : null).then(d => (d && d.table) ? d : null).catch(() => null);
    }

    select(sel, selpos) {
      this.sel = sel; this.selpos = selpos || null; this.flows = [];
      this.setProps("tl-sel", {data: sel});
      this.syncUrl();
      this.draw();
    }

    setProps(id, props) {
      if (window.dash_clientside && window.dash_clientside.set_props) window.dash_clientside.set_props(id, props);
    }

    key(e) {
      const k = e.key;
      const atX = this.mouse && this.mouse[0] > LABEL_W ? this.mouse[0] : undefined;
      if (k === "w" || k === "W" || k === "ArrowUp") this.zoom(0.7, atX);
      else if (k === "s" || k === "S" || k === "ArrowDown") this.zoom(1 / 0.7, atX);
      else if (k === "a" || k === "A" || k === "ArrowLeft") this.pan(-0.15);
      else if (k === "d" || k === "D" || k === "ArrowRight") this.pan(0.15);
      else if (k === "f" || k === "F") {
        if (this.area) this.focus(this.area.t0, this.area.t1);
        else if (this.selpos) this.focus(this.selpos.s, this.selpos.e);
      } else if (k === "Escape") { this.area = null; this.setProps("tl-area", {data: null}); this.draw(); }
      else if (k === "n" || k === "N") this.step(e.shiftKey ? -1 : 1);
      else return false;
      return true;
    }

    showTip(x, y) {
      const tip = this.tip, h = this.hover;
      let html = null;
      const l = this.lineAt(y);
      if (h) {
        const r = this.meta.rows[h.row], d = this.data, name = d.names[h.data[5][h.j]];
        const txt = h.n > 1 ? `${h.n.toLocaleString()} events (longest: ${name})` : name;
        html = `<b></b><div>${r.label} · ${fmtDur(h.e - h.s)}${h.n > 1 ? " span · click selects the event under the pointer" : ""}</div>` +
          `<div class="tl-tip-dim">start ${fmtDur(h.s)} from trace start</div>`;
        tip.innerHTML = html;
        tip.querySelector("b").textContent = txt;
      } else if (l && l.kind === "row" && this.meta.rows[l.row].table === "counters" && x >= LABEL_W) {
        const c = this.ctrByRow && this.ctrByRow.get(l.row), r = this.meta.rows[l.row];
        if (c) {
          const t = this.t(x), ts = c[1];
          let lo = 0, hi = ts.length - 1, k = -1;
          while (lo <= hi) { const mid = (lo + hi) >> 1; if (ts[mid] <= t) { k = mid; lo = mid + 1; } else hi = mid - 1; }
          if (k >= 0) {
            tip.innerHTML = "<b></b><div></div>";
            tip.querySelector("b").textContent = r.label;
            tip.querySelector("div").textContent = fmtValue(c[2][k], r.unit) + " at " + fmtDur(ts[k]);
            html = true;
          }
        }
      }
      if (!html) { tip.style.display = "none"; return; }
      tip.style.display = "block";
      const left = Math.min(x + 14, this.W - 320);
      tip.style.left = left + "px"; tip.style.top = (y + 16) + "px";
    }

    // ------------------------------------------------------------------ drawing
    draw() {
      if (this.raf) return;
      this.raf = requestAnimationFrame(() => { this.raf = null; this.paint(); });
    }

    fitText(text, w) {
      const ctx = this.ctx;
      let tw = this.textW.get(text);
      if (tw === undefined) { tw = ctx.measureText(text).width; if (this.textW.size < 20000) this.textW.set(text, tw); }
      if (tw <= w) return text;
      const n = Math.floor(text.length * w / tw) - 1;
      return n >= 2 ? text.slice(0, n) + "…" : null;
    }

    paint() {
      const ctx = this.ctx, W = this.W, H = this.H, d = this.data;
      ctx.clearRect(0, 0, W, H);
      ctx.font = "11px system-ui, sans-serif";
      ctx.textBaseline = "middle";
      const top = AXIS_H - this.scroll;
      // rows
      for (const l of this.lines) {
        const y = top + l.y;
        if (y + l.h < AXIS_H || y > H) continue;
        if (l.kind === "head") {
          ctx.fillStyle = l.depth === 0 ? "#e9ecef" : "#f3f4f6";
          ctx.fillRect(0, y, W, l.h);
          ctx.fillStyle = "#222";
          ctx.font = "600 11px system-ui, sans-serif";
          const open = !this.collapsed.has(l.key);
          ctx.fillText((open ? "▾ " : "▸ ") + l.name, 4 + l.depth * INDENT, y + l.h / 2);
          ctx.font = "11px system-ui, sans-serif";
          continue;
        }
        const r = this.meta.rows[l.row];
        ctx.fillStyle = (l.row % 2) ? "#fcfcfd" : "#ffffff";
        ctx.fillRect(0, y, W, l.h);
        ctx.fillStyle = "#333";
        const lab = this.fitText(r.folds ? (this.collapsed.has(r.folds) ? "▸ " : "▾ ") + r.label : r.label,
          LABEL_W - 8 - l.depth * INDENT) || "";
        ctx.fillText(lab, 4 + l.depth * INDENT, y + Math.min(l.h, ROW_H) / 2);
        if (!d) continue;
        ctx.save();
        ctx.beginPath(); ctx.rect(LABEL_W, y, W - LABEL_W, l.h); ctx.clip();
        if (r.table === "counters" && d.pending && d.pending.indexOf(l.row) >= 0) {
          ctx.fillStyle = "#868e96"; ctx.fillText("computing…", LABEL_W + 6, y + l.h / 2);
        } else if (r.table === "counters") this.paintCounter(l, r, y);
        else this.paintRow(l, r, y);
        ctx.restore();
      }
      this.paintOverlay(top);
      this.paintAxis();
      ctx.fillStyle = "#dee2e6";
      ctx.fillRect(LABEL_W - 1, AXIS_H, 1, H - AXIS_H);
    }

    paintRow(l, r, y) {
      const ctx = this.ctx, d = this.data, row = this.byRow.get(l.row);
      if (!row) return;
      const [, s, du, n, c, lab] = row, scale = this.plotW() / (this.v1 - this.v0);
      const short = r.table === "hierarchy";  // module spans: the last name of the path inside the slice
      const h = l.h - 3, y0 = y + 1.5;
      for (let j = 0; j < s.length; j++) {
        const x0 = LABEL_W + (s[j] - this.v0) * scale;
        let w = du[j] * scale;
        if (x0 > this.W || x0 + w < LABEL_W) continue;
        if (w < 1) w = 1;
        const col = d.colors[c[j]];
        ctx.globalAlpha = n[j] > 1 ? 0.55 : 1;
        ctx.fillStyle = col;
        ctx.fillRect(x0, y0, w, h);
        ctx.globalAlpha = 1;
        if (w > 30) {
          const vx = Math.max(x0, LABEL_W), vw = Math.min(x0 + w, this.W) - vx;
          const base = short ? shortModule(d.names[lab[j]]) : d.names[lab[j]];
          const nm = n[j] === 1 ? base : base + " +" + (n[j] - 1).toLocaleString();
          const txt = this.fitText(nm, vw - 6);
          if (txt) { ctx.fillStyle = textColor(col); ctx.fillText(txt, vx + 3, y + l.h / 2); }
        }
      }
      const hl = this.hlByRow.get(l.row);
      if (hl) {  // search matches and picks: gold, at least 3 px wide so they show at any zoom
        ctx.fillStyle = "rgba(255,193,7,0.95)";
        for (let j = 0; j < hl[1].length; j++) {
          const x0 = LABEL_W + (hl[1][j] - this.v0) * scale, w = Math.max(hl[2][j] * scale, 3);
          ctx.fillRect(x0, y + l.h - 6, w, 5);
        }
      }
    }

    paintCounter(l, r, y) {
      const ctx = this.ctx, c = this.ctrByRow.get(l.row);
      if (!c) return;
      const [, ts, vs, vmin, vmax, end] = c, scale = this.plotW() / (this.v1 - this.v0);
      const lo = Math.min(0, vmin), span = (vmax - lo) || 1, h = l.h - 6, base = y + l.h - 3;
      // a cumulative counter is scaled to its settled part: its early swing is clipped to the row
      const Y = v => base - (Math.min(Math.max(v, lo), vmax) - lo) / span * h;
      ctx.beginPath();
      ctx.moveTo(LABEL_W, base);
      for (let j = 0; j < ts.length; j++) {
        const x = LABEL_W + (ts[j] - this.v0) * scale, xn = j + 1 < ts.length ? LABEL_W + (ts[j + 1] - this.v0) * scale : this.W;
        ctx.lineTo(x, Y(vs[j])); ctx.lineTo(xn, Y(vs[j]));
      }
      ctx.lineTo(this.W, base);
      ctx.closePath();
      ctx.fillStyle = "rgba(76,120,168,0.25)"; ctx.fill();
      ctx.strokeStyle = "#4C78A8"; ctx.lineWidth = 1; ctx.stroke();
      // the label sits on a backdrop: the curve often reaches the row's top under it
      const cumulative = end !== null && end !== undefined;
      const label = cumulative ? "end of trace: " + fmtValue(end, r.unit) + " · scale 0–" + fmtValue(vmax, r.unit) +
        (vs.some(v => v > vmax) ? " (early values above it clipped)" : "") : "max " + fmtValue(vmax, r.unit);
      const lw = ctx.measureText(label).width;
      ctx.fillStyle = "rgba(255,255,255,0.85)"; ctx.fillRect(LABEL_W + 2, y + 2, lw + 4, 12);
      ctx.fillStyle = "#555";
      ctx.fillText(label, LABEL_W + 4, y + 8);
    }

    paintOverlay(top) {
      const ctx = this.ctx, H = this.H;
      ctx.save();
      ctx.beginPath(); ctx.rect(LABEL_W, AXIS_H, this.W - LABEL_W, H - AXIS_H); ctx.clip();
      for (const nte of this.notes) {  // notes: shaded ranges with their text
        const x0 = this.x(nte.t0), x1 = Math.max(this.x(nte.t1), x0 + 2);
        ctx.fillStyle = "rgba(155,89,182,0.10)"; ctx.fillRect(x0, AXIS_H, x1 - x0, H - AXIS_H);
        ctx.fillStyle = "rgba(155,89,182,0.9)"; ctx.fillRect(x0, AXIS_H, 2, H - AXIS_H);
        ctx.fillText("✎ " + (this.fitText(nte.note, Math.max(x1 - x0, 160)) || ""), x0 + 4, AXIS_H + 8);
      }
      if (this.area) {
        const x0 = this.x(this.area.t0), x1 = this.x(this.area.t1);
        ctx.fillStyle = "rgba(13,110,253,0.10)"; ctx.fillRect(x0, AXIS_H, x1 - x0, H - AXIS_H);
        ctx.strokeStyle = "rgba(13,110,253,0.8)"; ctx.lineWidth = 1;
        for (const ri of this.area.rows) {
          const l = this.rowLine.get(ri);
          if (l) ctx.strokeRect(x0, top + l.y + 0.5, x1 - x0, l.h - 1);
        }
      }
      if (this.drag && this.drag.mode === "area") {
        const a = this.drag;
        ctx.fillStyle = "rgba(13,110,253,0.15)";
        ctx.fillRect(Math.min(a.x0, a.x1), Math.min(a.y0, a.y1), Math.abs(a.x1 - a.x0), Math.abs(a.y1 - a.y0));
      }
      const mark = (p, color, lw) => {
        const l = this.rowLine.get(p.row);
        if (!l) return null;
        const x0 = this.x(p.s), x1 = Math.max(this.x(p.e), x0 + 2), y = top + l.y;
        ctx.strokeStyle = color; ctx.lineWidth = lw; ctx.strokeRect(x0 - 1, y + 0.5, x1 - x0 + 2, l.h - 1);
        return [x0, x1, y + l.h / 2];
      };
      for (const f of this.flows) {  // arrows from the end of the source to the start of the destination
        const la = this.rowLine.get(f[0]), lb = this.rowLine.get(f[3]);
        if (!la || !lb) continue;
        const xa = this.x(f[2]), ya = top + la.y + la.h / 2, xb = this.x(f[4]), yb = top + lb.y + lb.h / 2;
        ctx.strokeStyle = f[6] === "dependency" ? "rgba(214,39,40,0.8)" : "rgba(33,37,41,0.75)";
        ctx.lineWidth = 1.2;
        ctx.beginPath(); ctx.moveTo(xa, ya);
        const mx = (xa + xb) / 2;
        ctx.bezierCurveTo(mx, ya, mx, yb, xb, yb); ctx.stroke();
        const ang = Math.atan2(yb - ya, Math.max(xb - mx, 1));
        ctx.beginPath(); ctx.moveTo(xb, yb);
        ctx.lineTo(xb - 7 * Math.cos(ang - 0.4), yb - 7 * Math.sin(ang - 0.4));
        ctx.lineTo(xb - 7 * Math.cos(ang + 0.4), yb - 7 * Math.sin(ang + 0.4));
        ctx.closePath(); ctx.fillStyle = ctx.strokeStyle; ctx.fill();
      }
      if (this.selpos) mark(this.selpos, "#000", 2);
      if (this.hover) mark({row: this.hover.row, s: this.hover.s, e: this.hover.e}, "rgba(0,0,0,0.45)", 1);
      if (this.mouse && this.mouse[0] > LABEL_W && !this.drag) {
        ctx.fillStyle = "rgba(0,0,0,0.25)"; ctx.fillRect(this.mouse[0], AXIS_H, 1, H - AXIS_H);
      }
      ctx.restore();
    }

    paintAxis() {
      const ctx = this.ctx, W = this.W;
      ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, W, AXIS_H);
      ctx.fillStyle = "#dee2e6"; ctx.fillRect(0, AXIS_H - 1, W, 1);
      ctx.fillStyle = "#333"; ctx.font = "11px system-ui, sans-serif";
      for (const [t, lab] of ticks(this.v0, this.v1, this.plotW())) {
        const x = this.x(t);
        if (x < LABEL_W) continue;
        ctx.fillRect(x, AXIS_H - 7, 1, 6);
        ctx.fillText(lab, x + 3, 10);
      }
      ctx.fillStyle = "#666";
      ctx.fillText("from trace start · " + fmtDur(this.v1 - this.v0) + " shown", 4, 10);
      if (this.mouse && this.mouse[0] > LABEL_W) {
        const t = this.t(this.mouse[0]), s = fmtDur(t), w = ctx.measureText(s).width + 8;
        ctx.fillStyle = "#212529"; ctx.fillRect(this.mouse[0] - w / 2, 14, w, 13);
        ctx.fillStyle = "#fff"; ctx.fillText(s, this.mouse[0] - w / 2 + 4, 20.5);
      }
    }

    // ------------------------------------------------------------------ results (search matches, picks)
    setResults(r) {
      this.results = {items: (r && r.items) || [], k: -1};
      if (r && r.k >= 0) this.goto(r.k);
    }
    goto(k) {
      const it = this.results.items;
      if (!it.length) return;
      k = ((k % it.length) + it.length) % it.length;
      this.results.k = k;
      const [table, rid, row, s, e] = it[k];
      this.focus(s, e);
      this.select([table, rid], {row: row, s: s, e: e});
      const lab = document.getElementById("tl-res-pos");
      if (lab) lab.textContent = (k + 1).toLocaleString() + " of " + it.length.toLocaleString();
      const line = this.rowLine.get(row);
      if (line && (line.y < this.scroll || line.y > this.scroll + this.H - AXIS_H - 20)) {
        this.scroll = Math.max(0, line.y - 40);
      }
    }
    step(dk) { this.goto(this.results.k < 0 ? (dk > 0 ? 0 : -1) : this.results.k + dk); }
  }

  document.addEventListener("keydown", e => {
    if (!active || !active.canvas.isConnected) return;
    const t = e.target, tag = t && t.tagName;
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (t && t.isContentEditable)) return;
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (active.key(e)) e.preventDefault();
  });
  window.addEventListener("resize", () => { if (active && active.canvas.isConnected) active.resize(); });

  // ------------------------------------------------------------------ entry points for Dash callbacks
  NT.mount = function (meta) {
    const box = document.getElementById("tl-canvas-box");
    if (!box || !meta) return window.dash_clientside.no_update;
    active = new Timeline(box, meta);
    NT.active = active;
    return "";
  };
  NT.setFlows = function (f) {
    if (!active || !f) return "";
    active.flows = f.flows || [];
    // the row clicked keeps the mark (a hierarchy Op row shows the op at its device span); a selection from the
    // URL is marked on the event's own row
    if (f.sel && !active.selpos) active.selpos = {row: f.sel[0], s: f.sel[1], e: f.sel[2]};
    active.draw();
    return "";
  };
  NT.setResults = function (r) { if (active) active.setResults(r); return ""; };
  NT.setNotes = function (n) { if (active) { active.notes = n || []; active.draw(); } return ""; };
  NT.step = function (dk) { if (active) active.step(dk); return ""; };
  NT.goto = function (k) { if (active) active.goto(k); return ""; };
  NT.whole = function () { if (active) active.whole(); return ""; };
  NT.focusArea = function () { if (active && active.area) active.focus(active.area.t0, active.area.t1); return ""; };
  // for tests and the benchmark: screen position of the middle of a drawn single event
  NT.findSlice = function (minPx) {
    const a = active;
    if (!a || !a.data) return null;
    let best = null;
    for (const l of a.lines) {
      if (l.kind !== "row") continue;
      const y = AXIS_H - a.scroll + l.y + l.h / 2;
      if (y < AXIS_H + 4 || y > a.H - 4) continue;
      const d = a.byRow.get(l.row);
      if (!d) continue;
      for (let j = 0; j < d[1].length; j++) {
        if (d[6][j] < 0) continue;
        const x0 = Math.max(a.x(d[1][j]), LABEL_W), x1 = Math.min(a.x(d[1][j] + d[2][j]), a.W);
        if (x1 - x0 >= (minPx || 20) && (!best || x1 - x0 > best.w)) {
          best = {x: (x0 + x1) / 2, y: y, w: x1 - x0, table: a.meta.rows[l.row].table, id: d[6][j], row: l.row};
        }
      }
    }
    if (!best) return null;
    const r = a.canvas.getBoundingClientRect();
    best.x += r.left; best.y += r.top;
    return best;
  };
  // for tests: screen position of the middle of a drawn shape of a row of `table` (merged: count > 1)
  NT.findShape = function (table, merged) {
    const a = active;
    if (!a || !a.data) return null;
    for (const l of a.lines) {
      const y = AXIS_H - a.scroll + l.y + l.h / 2;
      if (l.kind !== "row" || a.meta.rows[l.row].table !== table || y < AXIS_H + 4 || y > a.H - 4) continue;
      const d = a.byRow.get(l.row);
      if (!d) continue;
      for (let j = 0; j < d[1].length; j++) {
        const x0 = Math.max(a.x(d[1][j]), LABEL_W), x1 = Math.min(a.x(d[1][j] + d[2][j]), a.W);
        if ((d[3][j] > 1) === !!merged && x1 - x0 >= 3) {
          const r = a.canvas.getBoundingClientRect();
          return {x: r.left + (x0 + x1) / 2, y: r.top + y, row: l.row, n: d[3][j]};
        }
      }
    }
    return null;
  };
  NT.view = function () { return active ? {t0: active.v0, t1: active.v1, painted: active.painted, seq: active.seq,
    n: active.data ? active.data.n : 0, thr: active.data ? active.data.thr : null, area: active.area,
    pending: active.data && active.data.pending ? active.data.pending.length : 0,
    shownRows: active.lines.filter(l => l.kind === "row").map(l => l.row)} : null; };
  // scroll the track list so that row `row` is near the top (tests, links); its screen y
  NT.reveal = function (row) {
    const a = active, l = a && a.rowLine.get(row);
    if (!l) return null;
    a.scroll = Math.max(0, Math.min(l.y - 2 * ROW_H, a.total - (a.H - AXIS_H)));
    a.draw();
    return NT.rowY(row);
  };
  NT.rowY = function (row) {
    const a = active, l = a && a.rowLine.get(row);
    if (!l) return null;
    const r = a.canvas.getBoundingClientRect();
    return r.top + AXIS_H - a.scroll + l.y + l.h / 2;
  };
  NT.plotX = function (frac) {
    const a = active, r = a.canvas.getBoundingClientRect();
    return r.left + LABEL_W + frac * a.plotW();
  };
})();
