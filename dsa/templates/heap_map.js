(function () {
  "use strict";
  var body = document.body, failed = false;

  function fail(msg) {
    failed = true;
    body.setAttribute("data-status", "error");
    body.setAttribute("data-error", String(msg));
    var box = document.getElementById("error");
    box.style.display = "block";
    box.textContent = "The heap map failed: " + msg;
  }
  window.addEventListener("error", function (ev) { fail(ev.message || "unknown error"); });

  var UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
  var COLORS = { peak: "#c62828", load: "#2e7d32", bound: "#7b1fa2", capacity: "#111111", live: "#5f6b76", conflict: "#d6336c" };

  function num(v) { return typeof v === "string" ? Number(v) : v; }
  function column(list) {
    var out = new Float64Array(list.length);
    for (var k = 0; k < list.length; k++) out[k] = num(list[k]);
    return out;
  }
  function commas(v) {  // an integer (number or decimal string) with thousands separators
    var s = typeof v === "string" ? v : (Math.abs(v) < 1e21 ? v.toFixed(0) : String(v));
    return s.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  }
  function human(v) {  // bytes, human-readable
    var k = 0, x = Math.abs(v);
    while (x >= 1024 && k < UNITS.length - 1) { x /= 1024; k++; }
    if (k === 0) return commas(v) + " B";
    return (v < 0 ? "-" : "") + x.toFixed(x >= 100 ? 1 : 2) + " " + UNITS[k];
  }
  function exact(op, a, b) {  // a + b or a - b of two exact integers (numbers or decimal strings)
    if (typeof a === "number" && typeof b === "number") {
      var r = op === "+" ? a + b : a - b;
      if (Math.abs(r) <= Number.MAX_SAFE_INTEGER) return r;
    }
    if (typeof BigInt === "function") {
      var x = BigInt(String(a)), y = BigInt(String(b));
      return String(op === "+" ? x + y : x - y);
    }
    return op === "+" ? num(a) + num(b) : num(a) - num(b);
  }

  function main() {
    var D = JSON.parse(document.getElementById("dsa-heap-data").textContent);
    var n = D.ids.length, i;
    var S = column(D.start), E = column(D.end), Z = column(D.size), O = column(D.offset);
    var TOP = new Float64Array(n);
    for (i = 0; i < n; i++) TOP[i] = O[i] + Z[i];
    var LT = column(D.live_t), LB = column(D.live_b);
    var peak = num(D.peak), load = num(D.load);
    var bound = D.lower_bound == null ? null : num(D.lower_bound);
    var cap = D.capacity == null ? null : num(D.capacity);
    var showBound = bound != null && bound > load;
    // the rows of an irreducible infeasible subset (status infeasible): outlined, named in the tooltip
    var CONF = [], inConflict = new Uint8Array(n);
    (D.conflict || []).forEach(function (r) {
      if (typeof r === "number" && r >= 0 && r < n && !inConflict[r]) { inConflict[r] = 1; CONF.push(r); }
    });

    // ---------------------------------------------------------------- header
    document.getElementById("title").textContent = D.title;
    var stats = document.getElementById("stats");
    function stat(label, strong, rest, tip) {
      var el = document.createElement("span");
      el.appendChild(document.createTextNode(label + " "));
      var b = document.createElement("b");
      b.textContent = strong;
      el.appendChild(b);
      if (rest) el.appendChild(document.createTextNode(" " + rest));
      if (tip) el.title = tip;
      stats.appendChild(el);
    }
    stat("buffers", commas(n));
    stat("peak", human(peak), "(" + commas(D.peak) + " B)");
    stat("LOAD", human(load), "(" + commas(D.load) + " B)", "the most bytes alive at one time: no plan can do better");
    if (load > 0) stat("peak/LOAD", (peak / load).toFixed(4));
    if (showBound) stat("lower bound", human(bound), "(" + commas(D.lower_bound) + " B)", "a proven lower bound on the optimal peak");
    if (cap != null) stat("capacity", human(cap), "(" + commas(D.capacity) + " B)");
    if (D.strategy) stat("strategy", D.strategy);
    if (D.status) stat("status", D.status, "", D.message || "");
    if (CONF.length) {
      stat("conflict", commas(CONF.length) + " buffers", "",
           "these buffers cannot fit in the capacity together; removing any one of them makes the rest fit: " +
           CONF.slice(0, 50).map(function (r) { return String(D.ids[r]); }).join(", ") + (CONF.length > 50 ? ", ..." : ""));
    }
    if (D.time_s != null) stat("time", D.time_s < 1 ? (D.time_s * 1e3).toFixed(2) + " ms" : D.time_s.toFixed(2) + " s");

    var legend = document.getElementById("legend");
    function swatch(label, color, style) {
      var el = document.createElement("span"), sw = document.createElement("span");
      el.className = "legend";
      sw.className = "swatch";
      sw.style.borderTopStyle = style;
      sw.style.borderTopColor = color;
      el.appendChild(sw);
      el.appendChild(document.createTextNode(label));
      legend.appendChild(el);
    }
    swatch("peak", COLORS.peak, "solid");
    swatch("LOAD", COLORS.load, "dashed");
    if (showBound) swatch("lower bound", COLORS.bound, "dashed");
    if (cap != null) swatch("capacity", COLORS.capacity, "dotted");
    swatch("live bytes", COLORS.live, "solid");
    if (CONF.length) swatch("conflict (outlined)", COLORS.conflict, "solid");

    // ---------------------------------------------------------------- extents and colours
    var tmin = Infinity, tmax = -Infinity;
    for (i = 0; i < n; i++) {
      if (S[i] < tmin) tmin = S[i];
      if (E[i] > tmax) tmax = E[i];
    }
    if (!(tmin < tmax)) { tmin = 0; tmax = 1; }
    var amax = Math.max(peak, load, showBound ? bound : 0);
    if (cap != null && cap <= 1.5 * amax) amax = Math.max(amax, cap);
    if (!(amax > 0)) amax = 1;
    var HOME = { x0: tmin, x1: tmax, y0: 0, y1: amax * 1.05 };
    var view = { x0: HOME.x0, x1: HOME.x1, y0: HOME.y0, y1: HOME.y1 };
    var MIN_SPAN = { x: 1e-3, y: 1e-3 }, MAX_SPAN = { x: (tmax - tmin) * 1e3, y: HOME.y1 * 1e3 };

    var NC = 18, PALETTE = [];
    for (i = 0; i < NC; i++) PALETTE.push("hsl(" + (i * 20) + ", " + (i % 2 ? 58 : 66) + "%, " + (i % 3 === 1 ? 70 : 60) + "%)");
    var groups = [], counts = new Int32Array(NC), colour = new Uint8Array(n);
    for (i = 0; i < n; i++) { colour[i] = (Math.imul(i + 1, 0x9E3779B1) >>> 0) % NC; counts[colour[i]]++; }
    for (i = 0; i < NC; i++) groups.push(new Int32Array(counts[i]));
    counts.fill(0);
    for (i = 0; i < n; i++) groups[colour[i]][counts[colour[i]]++] = i;

    // ---------------------------------------------------------------- hover index: time buckets
    // Each row is listed in every bucket its lifetime touches; the bucket count halves until the
    // lists hold at most 8 entries per row, so long-lived buffers cannot blow the index up.
    var NB = 1, BW = 1, BSTART = null, BITEMS = null;
    function bucket(t) { return Math.min(NB - 1, Math.max(0, Math.floor((t - tmin) / BW))); }
    (function buildIndex() {
      if (n === 0) return;
      NB = 1;
      while (NB < n / 4 && NB < 65536) NB *= 2;
      var total;
      for (;;) {
        BW = (tmax - tmin) / NB;
        total = 0;
        for (var k = 0; k < n; k++) total += bucket(E[k]) - bucket(S[k]) + 1;
        if (total <= 8 * n + NB || NB === 1) break;
        NB /= 2;
      }
      BSTART = new Int32Array(NB + 1);
      for (k = 0; k < n; k++) for (var b = bucket(S[k]), hi = bucket(E[k]); b <= hi; b++) BSTART[b + 1]++;
      for (b = 0; b < NB; b++) BSTART[b + 1] += BSTART[b];
      var fill = BSTART.slice(0, NB);
      BITEMS = new Int32Array(total);
      for (k = 0; k < n; k++) for (b = bucket(S[k]), hi = bucket(E[k]); b <= hi; b++) BITEMS[fill[b]++] = k;
    })();

    // ---------------------------------------------------------------- canvases and transforms
    var plot = document.getElementById("plot"), base = document.getElementById("base");
    var over = document.getElementById("overlay"), tip = document.getElementById("tooltip");
    var bctx = base.getContext("2d"), octx = over.getContext("2d");
    var W = 0, H = 0, dpr = 1, L = 80, R = 0, T = 10, B = 0;
    function layout() {
      dpr = window.devicePixelRatio || 1;
      W = Math.max(240, plot.clientWidth);
      H = Math.max(200, plot.clientHeight);
      [base, over].forEach(function (c) {
        c.width = Math.round(W * dpr); c.height = Math.round(H * dpr);
        c.style.width = W + "px"; c.style.height = H + "px";
      });
      L = 84; R = W - 16; T = 10; B = H - 38;
    }
    function kx() { return (R - L) / (view.x1 - view.x0); }
    function ky() { return (B - T) / (view.y1 - view.y0); }
    function sx(t) { return L + (t - view.x0) * kx(); }
    function sy(a) { return B - (a - view.y0) * ky(); }
    function tx(px) { return view.x0 + (px - L) / kx(); }
    function ay(py) { return view.y0 + (B - py) / ky(); }
    function clampX(x) { return Math.max(L - 4, Math.min(R + 4, x)); }
    function clampY(y) { return Math.max(T - 4, Math.min(B + 4, y)); }

    // ---------------------------------------------------------------- ticks
    function decimalStep(span, target) {
      var raw = span / Math.max(1, target), p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
      return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
    }
    function binaryStep(span, target) { return Math.pow(2, Math.ceil(Math.log2(span / Math.max(1, target)))); }
    function trim(x) { return x.toFixed(4).replace(/\.?0+$/, ""); }
    function timeLabel(t, step) { return step >= 1 ? commas(Math.round(t)) : trim(t); }
    function byteUnit(step, top) {
      var k = 0;
      while (k < UNITS.length - 1 && Math.pow(1024, k + 1) <= top && Math.pow(1024, k + 1) <= step * 16) k++;
      return k;
    }
    function byteLabel(a, k) { return k === 0 ? (Number.isInteger(a) ? commas(a) : trim(a)) + " B" : trim(a / Math.pow(1024, k)) + " " + UNITS[k]; }

    // ---------------------------------------------------------------- drawing
    function hline(ctx, value, color, dash, width) {
      if (value < view.y0 || value > view.y1) return;
      var y = sy(value);
      ctx.beginPath();
      ctx.setLineDash(dash);
      ctx.strokeStyle = color;
      ctx.lineWidth = width;
      ctx.moveTo(L, y); ctx.lineTo(R, y);
      ctx.stroke();
      ctx.setLineDash([]);
    }
    function drawLive(ctx) {  // live bytes: a step function, or its maximum per pixel column when denser
      var lo = 0, hi = LT.length - 1, k, x, c;
      while (lo < hi && LT[lo + 1] <= view.x0) lo++;
      while (hi > lo && LT[hi - 1] >= view.x1) hi--;
      ctx.beginPath();
      ctx.strokeStyle = COLORS.live;
      ctx.lineWidth = 1;
      var cols = Math.max(1, Math.ceil(R - L));
      if (hi - lo <= cols) {
        ctx.moveTo(clampX(sx(LT[lo])), clampY(sy(LB[lo])));
        for (k = lo + 1; k <= hi; k++) {
          x = clampX(sx(LT[k]));
          ctx.lineTo(x, clampY(sy(LB[k - 1])));
          ctx.lineTo(x, clampY(sy(LB[k])));
        }
      } else {
        var top = new Float64Array(cols).fill(-Infinity), fx = kx();
        for (k = lo; k < hi; k++) {
          var c0 = Math.max(0, Math.floor((LT[k] - view.x0) * fx)), c1 = Math.min(cols - 1, Math.floor((LT[k + 1] - view.x0) * fx));
          for (c = c0; c <= c1; c++) if (LB[k] > top[c]) top[c] = LB[k];
        }
        var pen = false;
        for (c = 0; c < cols; c++) {
          if (top[c] === -Infinity) { pen = false; continue; }
          var y = clampY(sy(top[c]));
          if (pen) ctx.lineTo(L + c, y); else ctx.moveTo(L + c, y);
          ctx.lineTo(L + c + 1, y);
          pen = true;
        }
      }
      ctx.stroke();
    }
    function draw() {
      var ctx = bctx, k, j, a, t, x, y;
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, W, H);
      ctx.font = "11px system-ui, -apple-system, 'Segoe UI', Roboto, Arial, sans-serif";
      var ys = binaryStep(view.y1 - view.y0, (B - T) / 46);
      var unit = byteUnit(ys, Math.max(Math.abs(view.y0), Math.abs(view.y1)));
      var xt = [], yt = [], ylab = [], widest = 0;
      for (j = Math.ceil(view.y0 / ys); (a = j * ys) <= view.y1 && yt.length < 200; j++) {
        yt.push(a);
        ylab.push(byteLabel(a, unit));
        widest = Math.max(widest, ctx.measureText(ylab[ylab.length - 1]).width);
      }
      L = Math.min(Math.max(64, Math.ceil(widest) + 30), Math.floor(W / 3));  // room for the labels
      var xs = decimalStep(view.x1 - view.x0, (R - L) / 100);
      if (tmax - tmin >= 4 && xs < 1) xs = 1;
      for (j = Math.ceil(view.x0 / xs); (t = j * xs) <= view.x1 && xt.length < 200; j++) xt.push(t);

      ctx.fillStyle = "#fbfcfd";
      ctx.fillRect(L, T, R - L, B - T);
      ctx.strokeStyle = "#e6e9ed";
      ctx.lineWidth = 1;
      ctx.beginPath();
      for (k = 0; k < xt.length; k++) { x = Math.round(sx(xt[k])) + 0.5; ctx.moveTo(x, T); ctx.lineTo(x, B); }
      for (k = 0; k < yt.length; k++) { y = Math.round(sy(yt[k])) + 0.5; ctx.moveTo(L, y); ctx.lineTo(R, y); }
      ctx.stroke();

      ctx.save();
      ctx.beginPath();
      ctx.rect(L, T, R - L, B - T);
      ctx.clip();
      var fx = kx(), fy = ky(), px = 1 / dpr, edges = [];
      for (var c = 0; c < NC; c++) {
        var rows = groups[c];
        ctx.beginPath();
        for (k = 0; k < rows.length; k++) {
          i = rows[k];
          if (E[i] <= view.x0 || S[i] >= view.x1 || TOP[i] <= view.y0 || O[i] >= view.y1 || Z[i] === 0) continue;
          var x0 = clampX(L + (S[i] - view.x0) * fx), x1 = clampX(L + (E[i] - view.x0) * fx);
          var y0 = clampY(B - (TOP[i] - view.y0) * fy), y1 = clampY(B - (O[i] - view.y0) * fy);
          var w = Math.max(x1 - x0, px), h = Math.max(y1 - y0, px);
          ctx.rect(x0, y0, w, h);
          if (w >= 5 && h >= 5) edges.push(x0, y0, w, h);
        }
        ctx.fillStyle = PALETTE[c];
        ctx.fill();
      }
      if (edges.length) {
        ctx.beginPath();
        for (k = 0; k < edges.length; k += 4) ctx.rect(edges[k], edges[k + 1], edges[k + 2], edges[k + 3]);
        ctx.strokeStyle = "rgba(20, 24, 28, 0.55)";
        ctx.lineWidth = 0.7;
        ctx.stroke();
      }
      if (CONF.length) {  // the conflict's rows: a thick outline over the fill
        ctx.beginPath();
        for (k = 0; k < CONF.length; k++) {
          i = CONF[k];
          if (E[i] <= view.x0 || S[i] >= view.x1 || TOP[i] < view.y0 || O[i] > view.y1) continue;
          var cx0 = clampX(L + (S[i] - view.x0) * fx), cx1 = clampX(L + (E[i] - view.x0) * fx);
          var cy0 = clampY(B - (TOP[i] - view.y0) * fy), cy1 = clampY(B - (O[i] - view.y0) * fy);
          ctx.rect(cx0 + 1, cy0 + 1, Math.max(cx1 - cx0 - 2, px), Math.max(cy1 - cy0 - 2, px));
        }
        ctx.strokeStyle = COLORS.conflict;
        ctx.lineWidth = 2.5;
        ctx.stroke();
      }
      if (LT.length) drawLive(ctx);
      hline(ctx, load, COLORS.load, [6, 4], 1.5);
      if (showBound) hline(ctx, bound, COLORS.bound, [2, 3, 8, 3], 1.5);
      if (cap != null) hline(ctx, cap, COLORS.capacity, [1.5, 3], 1.5);
      hline(ctx, peak, COLORS.peak, [], 1.5);
      ctx.restore();

      // axes
      ctx.strokeStyle = "#57606a";
      ctx.lineWidth = 1;
      ctx.strokeRect(L - 0.5, T - 0.5, R - L + 1, B - T + 1);
      ctx.fillStyle = "#24292f";
      ctx.beginPath();
      ctx.textAlign = "center"; ctx.textBaseline = "top";
      for (k = 0; k < xt.length; k++) {
        x = Math.round(sx(xt[k])) + 0.5;
        ctx.moveTo(x, B); ctx.lineTo(x, B + 4);
        ctx.fillText(timeLabel(xt[k], xs), x, B + 6);
      }
      ctx.textAlign = "right"; ctx.textBaseline = "middle";
      for (k = 0; k < yt.length; k++) {
        y = Math.round(sy(yt[k])) + 0.5;
        ctx.moveTo(L - 4, y); ctx.lineTo(L, y);
        ctx.fillText(ylab[k], L - 6, y);
      }
      ctx.stroke();
      ctx.font = "12px system-ui, -apple-system, 'Segoe UI', Roboto, Arial, sans-serif";
      ctx.fillStyle = "#57606a";
      ctx.textAlign = "center"; ctx.textBaseline = "bottom";
      ctx.fillText("time", (L + R) / 2, H - 2);
      ctx.save();
      ctx.translate(12, (T + B) / 2);
      ctx.rotate(-Math.PI / 2);
      ctx.textBaseline = "middle";
      ctx.fillText("address", 0, 0);
      ctx.restore();
      plot.setAttribute("data-view", [view.x0, view.x1, view.y0, view.y1].join(","));  // for tests
      drawOverlay();
    }

    var hovered = -1, drag = null, pending = false;
    function drawOverlay() {
      var ctx = octx;
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, W, H);
      if (hovered >= 0) {
        var x0 = clampX(sx(S[hovered])), x1 = clampX(sx(E[hovered]));
        var y0 = clampY(sy(TOP[hovered])), y1 = clampY(sy(O[hovered]));
        ctx.save();
        ctx.beginPath();
        ctx.rect(L, T, R - L, B - T);
        ctx.clip();
        ctx.fillStyle = "rgba(255, 255, 255, 0.35)";
        ctx.fillRect(x0, y0, Math.max(x1 - x0, 1), Math.max(y1 - y0, 1));
        ctx.strokeStyle = "#111";
        ctx.lineWidth = 2;
        ctx.strokeRect(x0, y0, Math.max(x1 - x0, 1), Math.max(y1 - y0, 1));
        ctx.restore();
      }
      if (drag && drag.box) {
        ctx.fillStyle = "rgba(37, 99, 235, 0.12)";
        ctx.strokeStyle = "rgba(37, 99, 235, 0.9)";
        ctx.lineWidth = 1;
        var bx = Math.min(drag.px, drag.x), by = Math.min(drag.py, drag.y);
        ctx.fillRect(bx, by, Math.abs(drag.x - drag.px), Math.abs(drag.y - drag.py));
        ctx.strokeRect(bx + 0.5, by + 0.5, Math.abs(drag.x - drag.px), Math.abs(drag.y - drag.py));
      }
    }
    function schedule() {
      plot.setAttribute("data-view", [view.x0, view.x1, view.y0, view.y1].join(","));
      if (pending) return;
      pending = true;
      window.requestAnimationFrame(function () { pending = false; draw(); });
    }

    // ---------------------------------------------------------------- hit test and tooltip
    function hit(px, py) {
      if (n === 0 || px < L || px > R || py < T || py > B) return -1;
      var t = tx(px), a = ay(py);
      if (t < tmin || t >= tmax) return -1;
      var b = bucket(t), k, j, best = -1, bestD = Infinity;
      var tolT = 3 / kx(), tolA = 3 / ky();
      for (k = BSTART[b]; k < BSTART[b + 1]; k++) {
        j = BITEMS[k];
        if (S[j] <= t && t < E[j] && O[j] <= a && a < TOP[j]) return j;
      }
      // nothing under the cursor: the nearest buffer within 3 pixels (tiny ones when zoomed out)
      for (k = BSTART[b]; k < BSTART[b + 1]; k++) {
        j = BITEMS[k];
        if (Z[j] === 0 || S[j] > t + tolT || E[j] <= t - tolT || O[j] > a + tolA || TOP[j] <= a - tolA) continue;
        var dx = t < S[j] ? (S[j] - t) * kx() : t >= E[j] ? (t - E[j]) * kx() : 0;
        var dy = a < O[j] ? (O[j] - a) * ky() : a >= TOP[j] ? (a - TOP[j]) * ky() : 0;
        if (dx + dy < bestD) { bestD = dx + dy; best = j; }
      }
      return best;
    }
    function line(parent, key, value, cls) {
      var el = document.createElement("div"), k = document.createElement("span"), v = document.createElement("span");
      k.className = "k"; k.textContent = key;
      v.textContent = value;
      if (cls) v.className = cls;
      el.appendChild(k); el.appendChild(v);
      parent.appendChild(el);
    }
    function fillTip(r) {
      tip.textContent = "";
      line(tip, "id", String(D.ids[r]), "id");
      line(tip, "row", commas(r));
      function bytes(raw, v) { return commas(raw) + " B" + (Math.abs(v) >= 1024 ? " (" + human(v) + ")" : ""); }
      var ticks = exact("-", D.end[r], D.start[r]);
      line(tip, "size", bytes(D.size[r], Z[r]));
      line(tip, "lifetime", "[" + commas(D.start[r]) + ", " + commas(D.end[r]) + "), " + commas(ticks) + (String(ticks) === "1" ? " tick" : " ticks"));
      line(tip, "offset", bytes(D.offset[r], O[r]) + " to " + commas(exact("+", D.offset[r], D.size[r])));
      if (inConflict[r]) line(tip, "conflict", "one of the " + commas(CONF.length) + " buffers that cannot fit together");
      var s = D.stack ? D.stack[r] : -1;
      if (s != null && s >= 0) {
        var ops = D.stacks[s], box = document.createElement("div"), head = document.createElement("div");
        box.className = "ops";
        head.className = "k";
        head.textContent = "op stack (outermost first)";
        box.appendChild(head);
        var shown = ops.length > 24 ? [0, 1, 2, 3, -1].concat(ops.slice(ops.length - 19).map(function (_, q) { return ops.length - 19 + q; })) : ops.map(function (_, q) { return q; });
        shown.forEach(function (q) {
          var el = document.createElement("div");
          el.className = "op";
          el.textContent = q < 0 ? "    \u22ee " + (ops.length - 23) + " more" : new Array(Math.min(q, 16) + 1).join("  ") + ops[q];
          box.appendChild(el);
        });
        tip.appendChild(box);
      }
      body.setAttribute("data-hover-row", String(r));
    }
    function placeTip(px, py) {
      tip.style.display = "block";
      var w = tip.offsetWidth, h = tip.offsetHeight, x = px + 16, y = py + 16;
      if (x + w > W) x = px - w - 16;
      if (y + h > H) y = py - h - 16;
      tip.style.left = Math.max(0, x) + "px";
      tip.style.top = Math.max(0, y) + "px";
    }
    function hideTip() {
      tip.style.display = "none";
      body.removeAttribute("data-hover-row");
      if (hovered >= 0) { hovered = -1; drawOverlay(); }
    }
    function pos(ev) {
      var r = over.getBoundingClientRect();
      return { x: ev.clientX - r.left, y: ev.clientY - r.top };
    }
    var shownRow = -1;
    over.addEventListener("mousemove", function (ev) {
      if (drag) return;
      var p = pos(ev), r = hit(p.x, p.y);
      if (r < 0) { shownRow = -1; hideTip(); return; }
      if (r !== hovered) { hovered = r; drawOverlay(); }
      if (r !== shownRow || tip.style.display !== "block") { fillTip(r); shownRow = r; }
      placeTip(p.x, p.y);
    });
    over.addEventListener("mouseleave", function () { if (!drag) { shownRow = -1; hideTip(); } });

    // ---------------------------------------------------------------- zoom and pan
    var zoomAxis = "both";
    function setView(x0, x1, y0, y1) {
      var sxp = Math.min(Math.max(x1 - x0, MIN_SPAN.x), MAX_SPAN.x), syp = Math.min(Math.max(y1 - y0, MIN_SPAN.y), MAX_SPAN.y);
      var cx = (x0 + x1) / 2, cy = (y0 + y1) / 2;
      view.x0 = cx - sxp / 2; view.x1 = cx + sxp / 2;
      view.y0 = cy - syp / 2; view.y1 = cy + syp / 2;
      schedule();
    }
    function zoomAt(px, py, f, axis) {
      var t = tx(px), a = ay(py), v = view;
      var x0 = v.x0, x1 = v.x1, y0 = v.y0, y1 = v.y1;
      if (axis !== "y") {
        f = Math.min(Math.max(f, MIN_SPAN.x / (x1 - x0)), MAX_SPAN.x / (x1 - x0));
        x0 = t - (t - v.x0) * f; x1 = t + (v.x1 - t) * f;
      }
      if (axis !== "x") {
        var g = Math.min(Math.max(f, MIN_SPAN.y / (y1 - y0)), MAX_SPAN.y / (y1 - y0));
        y0 = a - (a - v.y0) * g; y1 = a + (v.y1 - a) * g;
      }
      view.x0 = x0; view.x1 = x1; view.y0 = y0; view.y1 = y1;
      schedule();
    }
    function reset() { view.x0 = HOME.x0; view.x1 = HOME.x1; view.y0 = HOME.y0; view.y1 = HOME.y1; schedule(); }
    over.addEventListener("wheel", function (ev) {
      ev.preventDefault();
      var d = ev.deltaY || ev.deltaX;  // Shift+wheel scrolls sideways in some browsers
      if (!d) return;
      if (ev.deltaMode === 1) d *= 16; else if (ev.deltaMode === 2) d *= 400;
      var p = pos(ev);
      zoomAt(p.x, p.y, Math.exp(Math.max(-300, Math.min(300, d)) * 0.0015), ev.shiftKey ? "x" : ev.altKey ? "y" : zoomAxis);
    }, { passive: false });
    over.addEventListener("mousedown", function (ev) {
      if (ev.button !== 0) return;
      ev.preventDefault();
      over.focus();
      var p = pos(ev);
      drag = { box: ev.shiftKey, px: p.x, py: p.y, x: p.x, y: p.y, v: { x0: view.x0, x1: view.x1, y0: view.y0, y1: view.y1 } };
      shownRow = -1;
      hideTip();
      if (!drag.box) over.classList.add("dragging");
    });
    window.addEventListener("mousemove", function (ev) {
      if (!drag) return;
      var p = pos(ev);
      drag.x = p.x; drag.y = p.y;
      if (drag.box) { drawOverlay(); return; }
      var v = drag.v, dt = (p.x - drag.px) * (v.x1 - v.x0) / (R - L), da = (p.y - drag.py) * (v.y1 - v.y0) / (B - T);
      view.x0 = v.x0 - dt; view.x1 = v.x1 - dt; view.y0 = v.y0 + da; view.y1 = v.y1 + da;
      schedule();
    });
    window.addEventListener("mouseup", function () {
      if (!drag) return;
      var d = drag;
      drag = null;
      over.classList.remove("dragging");
      if (d.box && Math.abs(d.x - d.px) >= 4 && Math.abs(d.y - d.py) >= 4) {
        var x0 = tx(Math.min(d.x, d.px)), x1 = tx(Math.max(d.x, d.px)), y0 = ay(Math.max(d.y, d.py)), y1 = ay(Math.min(d.y, d.py));
        setView(x0, x1, y0, y1);
      } else {
        drawOverlay();
      }
    });
    over.addEventListener("dblclick", function (ev) { ev.preventDefault(); reset(); });
    document.getElementById("reset").addEventListener("click", reset);
    var axisButtons = document.querySelectorAll("button[data-axis]");
    Array.prototype.forEach.call(axisButtons, function (btn) {
      btn.addEventListener("click", function () {
        zoomAxis = btn.getAttribute("data-axis");
        Array.prototype.forEach.call(axisButtons, function (o) { o.setAttribute("aria-pressed", String(o === btn)); });
      });
    });
    document.addEventListener("keydown", function (ev) {
      if (ev.ctrlKey || ev.metaKey || (ev.target && ev.target.tagName === "BUTTON" && (ev.key === "Enter" || ev.key === " "))) return;
      var cx = (L + R) / 2, cy = (T + B) / 2, pt = (view.x1 - view.x0) / 10, pa = (view.y1 - view.y0) / 10;
      switch (ev.key) {
        case "+": case "=": zoomAt(cx, cy, 1 / 1.5, zoomAxis); break;
        case "-": case "_": zoomAt(cx, cy, 1.5, zoomAxis); break;
        case "0": case "r": reset(); break;
        case "ArrowLeft": view.x0 -= pt; view.x1 -= pt; schedule(); break;
        case "ArrowRight": view.x0 += pt; view.x1 += pt; schedule(); break;
        case "ArrowUp": view.y0 += pa; view.y1 += pa; schedule(); break;
        case "ArrowDown": view.y0 -= pa; view.y1 -= pa; schedule(); break;
        default: return;
      }
      ev.preventDefault();
    });
    window.addEventListener("resize", function () { layout(); draw(); });

    // ---------------------------------------------------------------- self-test hook: #hover=<row>
    // Frames the row if it is too small to point at, then sends a real mousemove event to the centre
    // of its rectangle, so that the tooltip is filled by the same code as for a person's mouse.
    function hoverRow(r) {
      if (!(r >= 0 && r < n) || Z[r] === 0) { body.setAttribute("data-hover", "none"); return; }
      var v = view, w = (E[r] - S[r]) * kx(), h = Z[r] * ky();
      if (w < 16 || S[r] < v.x0 || E[r] > v.x1) { var dt = E[r] - S[r]; v.x0 = S[r] - dt; v.x1 = E[r] + dt; }
      if (h < 16 || O[r] < v.y0 || TOP[r] > v.y1) { v.y0 = O[r] - Z[r]; v.y1 = TOP[r] + Z[r]; }
      draw();
      var box = over.getBoundingClientRect();
      var cx = (clampX(sx(S[r])) + clampX(sx(E[r]))) / 2, cy = (clampY(sy(O[r])) + clampY(sy(TOP[r]))) / 2;
      over.dispatchEvent(new MouseEvent("mousemove", {
        bubbles: true, cancelable: true, view: window,
        clientX: Math.round(box.left + cx), clientY: Math.round(box.top + cy)
      }));
      body.setAttribute("data-hover", hovered === r ? "ok" : "missed");
    }
    function fromHash() {
      var m = /(?:^#|&)hover=(\d+)/.exec(window.location.hash);
      if (m) hoverRow(parseInt(m[1], 10));
    }
    window.addEventListener("hashchange", fromHash);

    layout();
    draw();
    fromHash();
  }

  try {
    main();
    if (!failed) body.setAttribute("data-status", "ok");
  } catch (err) {
    fail(err && err.message ? err.message : String(err));
  }
})();
