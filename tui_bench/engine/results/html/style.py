"""The page's CSS: light or dark by the reader's preference, printable, and fitted to its page
(a long text folds; a wide table scrolls inside its own box, never the page)."""

from __future__ import annotations

CSS = """
:root { color-scheme: light dark; --bg: #ffffff; --fg: #1b1f24; --muted: #57606a;
  --line: #d0d7de; --head: #f3f5f7; --stable: #1a7f37; --noisy: #9a6700; --unreliable: #cf222e;
  --unjudged: #57606a; --row-warn: #fff8c5; --row-bad: #ffebe9; }
@media (prefers-color-scheme: dark) {
  :root { --bg: #0d1117; --fg: #e6edf3; --muted: #9198a1; --line: #30363d; --head: #161b22;
    --stable: #3fb950; --noisy: #d29922; --unreliable: #f85149; --unjudged: #9198a1;
    --row-warn: #2d2410; --row-bad: #3a1618; }
}
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 80rem; padding: 1.5rem; background: var(--bg); color: var(--fg);
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
h1 { font-size: 1.6rem; margin: 0 0 .25rem; } h2 { font-size: 1.25rem; margin: 2rem 0 .5rem;
  padding-bottom: .25rem; border-bottom: 1px solid var(--line); } h3 { font-size: 1rem; margin: 1.25rem 0 .4rem; }
p.meta, p.note, figcaption { color: var(--muted); font-size: .85rem; }
p.verdict { font-size: 1.05rem; }
/* the page never grows wider than its window: a wide table scrolls inside its own box, a long
   text folds (a reason under its first line, words broken where a word is wider than its cell) */
.scroll { overflow-x: auto; max-width: 100%; }
main, header, section { max-width: 100%; overflow-wrap: break-word; }
td.long { min-width: 12rem; max-width: 28rem; }
td.reasons { min-width: 16rem; overflow-wrap: anywhere; }
td.verdict { min-width: 12rem; }
details.fold summary { cursor: pointer; }
details.fold ul { margin: .25rem 0 0; padding-left: 1rem; }
.more { color: var(--muted); font-size: .8rem; white-space: nowrap; }
header code { white-space: normal; overflow-wrap: anywhere; }
table { border-collapse: collapse; margin: .5rem 0; font-size: .85rem; }
p.caption { font-weight: 600; font-size: .85rem; margin: .75rem 0 0; }
th, td { border: 1px solid var(--line); padding: .25rem .5rem; vertical-align: top; text-align: left; }
thead th, table.kv th { background: var(--head); }
td.short { white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.noisy td, tr.unjudged td { background: var(--row-warn); } tr.unreliable td { background: var(--row-bad); }
.badge { display: inline-block; padding: 0 .4rem; border-radius: .6rem; border: 1px solid currentColor;
  font-size: .8rem; white-space: nowrap; }
.badge.stable { color: var(--stable); } .badge.noisy { color: var(--noisy); }
.badge.unreliable { color: var(--unreliable); } .badge.unjudged { color: var(--unjudged); }
code { font-size: .8rem; white-space: nowrap; }
.why { font-size: .8rem; color: var(--muted); }
figure { margin: 1rem 0; } figure svg { max-width: 100%; height: auto; color: var(--fg); }
figure svg text { fill: currentColor; } /* matplotlib leaves black text's fill unset */
ul.configs li { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: .9rem; }
@media print {
  :root { --bg: #fff; --fg: #000; --muted: #333; --head: #eee; }
  body { max-width: none; padding: 0; font-size: 10pt; }
  .scroll { overflow: visible; }
  details.fold::details-content { content-visibility: visible; display: block; }
  table, figure { page-break-inside: avoid; break-inside: avoid; }
  h2 { page-break-after: avoid; break-after: avoid; }
}
"""
