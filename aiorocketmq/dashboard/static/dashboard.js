// aiorocketmq dashboard: draws the progress table and the rebalance timeline from JSON.
// Plain JavaScript, no dependencies; every value goes in through textContent.
"use strict";
var aiorocketmq = (function () {
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function color(holder) {
    var h = 0;
    for (var i = 0; i < holder.length; i++) h = (h * 31 + holder.charCodeAt(i)) % 360;
    return "hsl(" + h + ", 60%, 55%)";
  }
  function clock(ms) {
    var d = new Date(ms);
    return d.toLocaleTimeString() + "." + String(ms % 1000).padStart(3, "0");
  }
  function fillTable(id, rows) {
    var body = document.querySelector("#" + id + " tbody");
    body.textContent = "";
    rows.forEach(function (cells) {
      var tr = el("tr");
      cells.forEach(function (c, i) {
        var td = el("td", null, c === null || c === undefined ? "" : String(c));
        if (id === "progress" && i === 6) td.className = "holder";
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
  }
  // The timeline up to `upTo` (ms; the whole of it when omitted).
  function drawTimeline(data, upTo) {
    var box = document.getElementById("timeline");
    box.textContent = "";
    var t0 = data.start, t1 = upTo || data.now;
    var span = Math.max(1, t1 - t0);
    function x(t) { return Math.max(0, Math.min(100, (t - t0) * 100 / span)) + "%"; }
    function w(a, b) { return Math.max(0.3, (Math.min(b, t1) - a) * 100 / span) + "%"; }
    data.rows.forEach(function (row) {
      var line = el("div", "row");
      line.dataset.queue = row.queue;
      line.appendChild(el("span", "label", row.label));
      var track = el("div", "track");
      row.bars.forEach(function (bar) {
        if (bar.start > t1) return;
        var end = bar.end === null || bar.end > t1 ? t1 : bar.end;
        var b = el("div", "bar" + (bar.end === null || bar.end > t1 ? " open" : ""));
        b.style.left = x(bar.start);
        b.style.width = w(bar.start, end);
        b.style.background = color(bar.holder);
        b.dataset.holder = bar.holder;
        b.title = bar.holder + "\n" + clock(bar.start) + " – " +
          (bar.end === null ? "now" : clock(bar.end)) +
          (bar.causes.length ? "\n\n" + bar.causes.join("\n") : "");
        b.appendChild(el("span", null, bar.holder.split("@").pop()));
        track.appendChild(b);
      });
      data.marks.forEach(function (m) {
        if (m.queue !== row.queue || m.start > t1) return;
        var k = el("div", "mark " + m.kind);
        k.style.left = x(m.start);
        k.style.width = w(m.start, m.end);
        k.title = (m.kind === "double" ? "two holders at once, " : "nobody held it, ") +
          (m.end - m.start) + " ms";
        track.appendChild(k);
      });
      line.appendChild(track);
      box.appendChild(line);
    });
    var list = document.getElementById("events");
    list.textContent = "";
    data.events.filter(function (e) { return e.ts <= t1; }).slice(-30).reverse()
      .forEach(function (e) { list.appendChild(el("li", e.kind, clock(e.ts) + "  " + e.text)); });
  }
  function live(url) {
    var status = document.getElementById("status");
    var source = new EventSource(url);
    source.onmessage = function (message) {
      var data = JSON.parse(message.data), view = data.view;
      status.textContent = view.error ? "error: " + view.error :
        "live · " + view.members.length + " member(s) · " + data.requests + " requests so far";
      status.className = view.error ? "error" : "muted";
      document.getElementById("tps").textContent = "consume TPS " + view.consumeTps;
      fillTable("members", view.members.map(function (m) {
        return [m.clientId, m.address, m.language, m.protocol, m.version];
      }));
      fillTable("progress", view.queues.map(function (q) {
        return [q.topic, q.broker, q.queueId, q.brokerOffset, q.consumerOffset, q.lag, q.holder || "N/A"];
      }));
      drawTimeline(data.timeline);
    };
    source.onerror = function () {
      status.textContent = "the dashboard is not answering; retrying…";
      status.className = "error";
    };
  }
  function replay() {
    var data = JSON.parse(document.getElementById("trace-data").textContent);
    var slider = document.getElementById("clock"), at = document.getElementById("at");
    var playing = null;
    function show() {
      var t = data.start + (data.now - data.start) * slider.value / 1000;
      at.textContent = clock(Math.round(t));
      drawTimeline(data, t);
    }
    slider.oninput = show;
    document.getElementById("play").onclick = function () {
      if (playing) { clearInterval(playing); playing = null; return; }
      if (Number(slider.value) >= 1000) slider.value = 0;
      playing = setInterval(function () {
        slider.value = Number(slider.value) + 5;
        show();
        if (Number(slider.value) >= 1000) { clearInterval(playing); playing = null; }
      }, 50);
    };
    show();
  }
  return { live: live, replay: replay, drawTimeline: drawTimeline };
})();
