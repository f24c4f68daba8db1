#include "einsumdb/report/html.hpp"

namespace einsumdb::report {

const char* const kPageStyle = R"css(
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1100px; color: #222;
       padding: 0 12px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 36px; border-bottom: 1px solid #ccc; }
h3 { font-size: 15px; margin-top: 24px; }
table { border-collapse: collapse; margin: 8px 0; }
table.wide { width: 100%; }
td, th { border-bottom: 1px solid #eee; padding: 2px 8px; text-align: left; vertical-align: top;
         overflow-wrap: anywhere; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.k { white-space: nowrap; } td.e { min-width: 9em; }
code { font-size: 12px; background: #f4f4f4; padding: 0 3px; overflow-wrap: anywhere; }
.note { color: #555; font-size: 13px; }
.kv { display: inline-block; max-width: 100%; margin: 0 4px 1px 0; padding: 0 4px;
      background: #f1f1f1; border-radius: 3px; font: 12px ui-monospace, monospace;
      overflow-wrap: anywhere; }
.kv.diff, .name.diff { background: #fde3a7; }
.tag { font-size: 11px; background: #2ca02c; color: #fff; padding: 1px 6px; border-radius: 8px;
       vertical-align: middle; }
tr.differs td { background: #fff7e6; } tr.winner td { background: #eef8ee; }
svg { display: block; margin: 8px 0; background: #fff; max-width: 100%; height: auto; }
svg.bar, svg.box { display: inline-block; margin: 0; vertical-align: middle; }
.frame { fill: none; stroke: #888; } .grid { stroke: #eee; }
.tick { font-size: 11px; fill: #555; } .label { font-size: 12px; fill: #222; }
.roof { fill: none; stroke: #333; stroke-width: 2; }
.roof.dt-f32, .roof.dt-c64 { stroke-dasharray: 6 3; }
.roof-all { fill: none; stroke: #999; stroke-dasharray: 2 3; }
.pt { stroke: #fff; stroke-width: 0.5; }
.far { fill: #d62728; } .mid { fill: #ff7f0e; } .near { fill: #2ca02c; } .noroof { fill: #1f77b4; }
.ok { fill: #1f77b4; stroke: #1f77b4; } .invalid { fill: #d62728; stroke: #d62728; }
.timeout { fill: #999; stroke: #999; } .winner { fill: #2ca02c; stroke: #2ca02c; }
.failed { fill: #666; stroke: #666; }
.range { stroke-width: 1.5; } .diag { stroke: #999; stroke-dasharray: 4 3; }
.whisker { stroke: #555; } .quart { fill: #c6dbef; stroke: #3b6fa0; } .med { stroke: #08306b;
  stroke-width: 2; }
.part { fill: #9467bd; stroke: #fff; stroke-width: 0.5; }
.legend span { display: inline-block; margin-right: 14px; }
.sw { display: inline-block; width: 10px; height: 10px; margin-right: 4px; border-radius: 5px; }
.sw.far { background: #d62728; } .sw.mid { background: #ff7f0e; } .sw.near { background: #2ca02c; }
.sw.ok { background: #1f77b4; } .sw.invalid { background: #d62728; } .sw.timeout { background: #999; }
.sw.winner { background: #2ca02c; } .sw.diff { background: #fde3a7; border-radius: 2px; }
.controls { position: sticky; top: 0; background: #fff; padding: 8px 0; z-index: 1;
            border-bottom: 1px solid #ddd; display: flex; flex-wrap: wrap; gap: 8px 14px;
            align-items: center; }
.controls input[type=search] { width: 22em; max-width: 100%; }
.controls select { max-width: 22em; }
table.sortable th { cursor: pointer; }
th[aria-sort=ascending]::after { content: " \25B2"; } th[aria-sort=descending]::after { content: " \25BC"; }
.off { display: none !important; }
body.no-f64 .dt-f64, body.no-f32 .dt-f32, body.no-c64 .dt-c64, body.no-c128 .dt-c128,
body.no-f16 .dt-f16 { display: none; }
details > summary { cursor: pointer; }
)css";

// Inside CDATA, so that the page stays well-formed XML; the comment markers keep it valid
// script for an HTML parser.
const char* const kPageScript = R"js(//<![CDATA[
(function () {
  'use strict';
  var controls = document.getElementById('controls');
  if (!controls) return;
  controls.hidden = false;
  var each = function (list, f) { Array.prototype.forEach.call(list, f); };
  var q = document.getElementById('f-q'), fm = document.getElementById('f-m'),
      fs = document.getElementById('f-s'), shown = document.getElementById('f-shown');
  var dts = Array.prototype.slice.call(document.querySelectorAll('#f-dt input'));
  var items = Array.prototype.slice.call(document.querySelectorAll('[data-q],[data-m],[data-s]'));
  var rows = items.filter(function (e) { return e.tagName.toLowerCase() === 'tr'; });
  var has = function (list, v) { return (' ' + list + ' ').indexOf(' ' + v + ' ') >= 0; };
  function apply(save) {
    var text = q.value.trim().toLowerCase(), m = fm.value, s = fs.value, visible = 0, off = [];
    items.forEach(function (e) {
      var ok = (!text || !e.hasAttribute('data-q') || e.getAttribute('data-q').indexOf(text) >= 0) &&
               (!m || !e.hasAttribute('data-m') || has(e.getAttribute('data-m'), m)) &&
               (!s || !e.hasAttribute('data-s') || has(e.getAttribute('data-s'), s));
      e.classList.toggle('off', !ok);
    });
    rows.forEach(function (r) { if (!r.classList.contains('off') && !r.closest('.off')) visible++; });
    dts.forEach(function (c) {
      document.body.classList.toggle('no-' + c.value, !c.checked);
      if (!c.checked) off.push(c.value);
    });
    shown.textContent = visible + ' of ' + rows.length + ' rows shown';
    if (!save) return;
    var parts = [];
    if (text) parts.push('q=' + encodeURIComponent(text));
    if (m) parts.push('m=' + encodeURIComponent(m));
    if (s) parts.push('s=' + encodeURIComponent(s));
    if (off.length) parts.push('off=' + off.join(','));
    history.replaceState(null, '', parts.length ? '#' + parts.join('&') : location.pathname);
  }
  location.hash.replace(/^#/, '').split('&').forEach(function (kv) {
    var i = kv.indexOf('=');
    if (i < 0) return;
    var k = kv.slice(0, i), v = decodeURIComponent(kv.slice(i + 1));
    if (k === 'q') q.value = v;
    else if (k === 'm') fm.value = v;
    else if (k === 's') fs.value = v;
    else if (k === 'off') dts.forEach(function (c) { if (has(v.replace(/,/g, ' '), c.value)) c.checked = false; });
  });
  [q, fm, fs].concat(dts).forEach(function (e) {
    e.addEventListener('input', function () { apply(true); });
    e.addEventListener('change', function () { apply(true); });
  });
  function value(row, col) {
    var c = row.cells[col];
    if (!c) return '';
    if (c.hasAttribute('data-v')) {
      var v = parseFloat(c.getAttribute('data-v'));
      return isNaN(v) ? -Infinity : v;
    }
    return c.textContent.trim().toLowerCase();
  }
  function sort(th) {
    var body = th.closest('table').tBodies[0], col = th.cellIndex;
    var asc = th.getAttribute('aria-sort') !== 'ascending';
    each(th.parentNode.cells, function (c) { c.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', asc ? 'ascending' : 'descending');
    var keyed = Array.prototype.map.call(body.rows, function (r) { return [value(r, col), r]; });
    keyed.sort(function (a, b) {
      var d = typeof a[0] === 'number' && typeof b[0] === 'number'
        ? (a[0] === b[0] ? 0 : a[0] < b[0] ? -1 : 1) : String(a[0]).localeCompare(String(b[0]));
      return asc ? d : -d;
    });
    keyed.forEach(function (k) { body.appendChild(k[1]); });
  }
  each(document.querySelectorAll('table.sortable thead th'), function (th) {
    th.tabIndex = 0;
    th.title = 'sort by this column';
    th.addEventListener('click', function () { sort(th); });
    th.addEventListener('keydown', function (ev) { if (ev.key === 'Enter') sort(th); });
  });
  var first = location.hash.match(/(?:^#|&)sort=([^&]*)/);
  if (first) {
    var parts = decodeURIComponent(first[1]).split(':'), t = document.getElementById(parts[0]);
    if (t && t.tHead) each(t.tHead.rows[0].cells, function (th) {
      if (th.textContent.replace(/[\u25B2\u25BC ]+$/, '') === parts[1]) sort(th);
    });
  }
  apply(false);
})();
//]]>)js";

}  // namespace einsumdb::report
