/* iofleet report charts: draws each spec of the JSON block #iofleet-chart-data
   into its <div data-chart="N"> with uPlot (inlined before this script).
   Hover shows every series' value at the cursor in the legend; clicking a
   legend entry hides or shows that series. */
(function () {
  "use strict";
  var block = document.getElementById("iofleet-chart-data");
  if (!block || typeof uPlot === "undefined") return;
  var specs = JSON.parse(block.textContent);
  var PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
    "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"];

  function sig(x) {
    var a = Math.abs(x);
    return a >= 100 ? x.toFixed(0) : a >= 10 ? x.toFixed(1) : x.toFixed(2);
  }
  function scaled(v, steps, base) {
    for (var i = 0; i < steps.length; i++) {
      if (Math.abs(v) >= steps[i][0]) return sig(v / steps[i][0]) + " " + steps[i][1];
    }
    return v.toFixed(0) + " " + base;
  }
  // the same units as the tables (iofleet/report/units.py)
  function fmt(v, unit) {
    if (v == null || isNaN(v)) return "-";
    if (unit === "ns") return scaled(v, [[1e9, "s"], [1e6, "ms"], [1e3, "us"]], "ns");
    if (unit === "B/s") {
      return scaled(v, [[1073741824, "GiB/s"], [1048576, "MiB/s"], [1024, "KiB/s"]], "B/s");
    }
    if (unit === "iops") {
      return Math.abs(v) >= 100 ? Math.round(v).toLocaleString("en-US") : v.toFixed(1);
    }
    if (unit === "s") {
      if (Math.abs(v) < 60) return Math.abs(v) >= 1 ? v.toFixed(1) + "s" : v.toFixed(3) + "s";
      var t = Math.floor(v + 0.5);
      var s = t % 60;
      return Math.floor(t / 60) + "m " + (s < 10 ? "0" : "") + s + "s";
    }
    return sig(v);
  }

  // binary steps for a byte-rate axis (64 MiB/s, 128 MiB/s, ... not 191 MiB/s)
  var BINARY_INCRS = [];
  [1, 1024, 1048576, 1073741824, 1099511627776].forEach(function (scale) {
    [1, 2, 4, 8, 16, 32, 64, 128, 256, 512].forEach(function (m) { BINARY_INCRS.push(m * scale); });
  });
  function axisValue(v, unit) {
    if (v == null) return "";  // a log axis' unlabelled minor tick
    return v === 0 ? "0" : fmt(v, unit);
  }

  function draw(spec, el) {
    var xs = spec.x;
    function tick(v) {
      var i = xs.indexOf(v);
      if (i < 0) {
        for (var k = 0; k < xs.length; k++) if (Math.abs(xs[k] - v) < 1e-6) i = k;
      }
      return i < 0 ? "" : spec.xticks[i];
    }
    var series = [{ label: spec.xlabel, value: function (u, v) { return v == null ? "-" : tick(v); } }];
    spec.series.forEach(function (s, j) {
      var color = PALETTE[j % PALETTE.length];
      var one = {
        label: s.label,
        stroke: color,
        width: spec.points_only ? 0 : 2,
        value: function (u, v) { return fmt(v, spec.unit); },
        points: { show: true, size: spec.points_only ? 10 : 6, space: 0, fill: color, stroke: color },
      };
      if (spec.points_only) one.paths = function () { return null; };
      series.push(one);
    });
    var pad = xs.length > 1 ? (xs[xs.length - 1] - xs[0]) * 0.04 : 0.5;
    var yScale = spec.log ? { distr: 3, log: 10 } : {
      range: function (u, min, max) {
        var hi = max > 0 ? max * 1.08 : 1;
        return [Math.min(0, min == null ? 0 : min), hi];
      },
    };
    var yAxis = {
      label: spec.ylabel,
      size: 80,
      values: function (u, splits) {
        return splits.map(function (v) { return axisValue(v, spec.unit); });
      },
      grid: { stroke: "#eee" },
      ticks: { show: true },
    };
    if (spec.unit === "B/s" && !spec.log) yAxis.incrs = BINARY_INCRS;
    var opts = {
      title: spec.title,
      width: Math.max(480, Math.min(el.clientWidth || 1000, 1060)),
      height: 320,
      series: series,
      scales: {
        x: { time: false, range: function () { return [xs[0] - pad, xs[xs.length - 1] + pad]; } },
        y: yScale,
      },
      axes: [
        {
          label: spec.xlabel,
          splits: function () { return xs; },
          values: function (u, splits) { return splits.map(tick); },
          grid: { stroke: "#eee" },
          ticks: { show: true },
        },
        yAxis,
      ],
      legend: { live: true },
      cursor: { drag: { x: false, y: false } },
    };
    var data = [xs].concat(spec.series.map(function (s) { return s.values; }));
    return new uPlot(opts, data, el);
  }

  specs.forEach(function (spec, i) {
    var el = document.querySelector('[data-chart="' + i + '"]');
    if (el) draw(spec, el);
  });
})();
