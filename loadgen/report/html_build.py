"""Building blocks of the HTML report: escaped elements, tables, and the page's one inline style sheet.
No script anywhere: the page reads the same with JavaScript off; nothing is fetched (images are data URIs)."""

from __future__ import annotations

import base64
from html import escape


def attrs(**kw: object) -> str:
    """' a="x" b="y"' for the given attributes (None and False left out; `class_` for class; `data_x` for
    data-x)."""
    out = []
    for key, value in kw.items():
        if value is None or value is False:
            continue
        name = key.rstrip("_").replace("_", "-")
        out.append(f' {name}="{escape(str(value), quote=True)}"')
    return "".join(out)


def el(tag: str, body: str = "", **kw: object) -> str:
    """An element whose body is already HTML (escape text with `text()` first)."""
    return f"<{tag}{attrs(**kw)}>{body}</{tag}>"


def text(value: object) -> str:
    return escape("" if value is None else str(value))


def image(png: bytes, alt: str, **kw: object) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{escape(alt, quote=True)}"{attrs(**kw)}>'


def key_values(pairs: list[tuple[str, str]], **kw: object) -> str:
    """A two-column table of (label, HTML value) pairs."""
    rows = "".join(el("tr", el("th", text(k), scope="row") + el("td", v)) for k, v in pairs)
    return el("table", el("tbody", rows), class_="kv", **kw)


CSS = """
:root { --ink:#1d2430; --muted:#5b6675; --line:#d9dee5; --band:#f4f6f9; --best:#e3f4e1; --bestink:#145a1e;
        --bad:#fdecea; --badink:#8a1c12; --warn:#fff4d6; --warnink:#6b4e00; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       color: var(--ink); background: #fff; }
header.top { padding: 18px 28px 10px; border-bottom: 1px solid var(--line); }
header.top h1 { margin: 0 0 4px; font-size: 22px; }
.sub { color: var(--muted); margin: 0; }
main { padding: 6px 28px 40px; max-width: 1500px; }
section { margin-top: 22px; }
h2 { font-size: 18px; margin: 0 0 8px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
h3 { font-size: 15px; margin: 16px 0 6px; }
nav.toc { display: flex; flex-wrap: wrap; gap: 6px 16px; padding: 8px 28px; background: var(--band);
          border-bottom: 1px solid var(--line); font-size: 13px; }
nav.toc a { color: #1f4f99; text-decoration: none; }
.banner { margin: 14px 28px 0; padding: 10px 14px; border-radius: 6px; font-weight: 600; }
.banner.sim { background: var(--warn); color: var(--warnink); border: 1px solid #e8c96a; }
.banner.bad { background: var(--bad); color: var(--badink); border: 1px solid #f0b3ab; }
table { border-collapse: collapse; margin: 6px 0 10px; font-size: 13px; }
th, td { padding: 4px 9px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
thead th { background: var(--band); position: sticky; top: 0; font-weight: 600; white-space: nowrap; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.group-start td { border-top: 2px solid #b9c1cc; }
td.best { background: var(--best); color: var(--bestink); font-weight: 700; }
td.best::after { content: " \\2605"; font-size: 11px; }
td.noise::after { content: " \\2248"; color: var(--muted); font-size: 11px; }
tr.unusable td { background: var(--bad); color: var(--badink); }
td.config { white-space: nowrap; }
tr.baseline td.config::after { content: " (baseline)"; color: var(--muted); font-weight: 400; }
td.note { color: var(--muted); min-width: 260px; max-width: 560px; }
tr.unusable td.note { color: var(--badink); }
tr.checked td { background: var(--warn); color: var(--warnink); }
td.checked::after { content: " !"; font-weight: 700; }
table.matrix { min-width: 100%; }
table.matrix thead th { white-space: normal; max-width: 90px; vertical-align: bottom; }
tr.note-row td.note { max-width: none; padding-top: 0; font-size: 12px; }
tr:has(+ tr.note-row) td { border-bottom: none; }
table.kv th { color: var(--muted); font-weight: 500; white-space: nowrap; }
table.kv td { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; }
table.kv.narrow td { word-break: break-all; }
table.data.kv td { white-space: nowrap; }
.scroll { overflow-x: auto; }
figure { margin: 12px 0 22px; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--line); border-radius: 4px; }
figcaption { color: var(--muted); font-size: 13px; margin-top: 4px; }
.legend-note { color: var(--muted); font-size: 12px; }
details { margin: 4px 0 10px; }
summary { cursor: pointer; color: #1f4f99; }
pre { background: var(--band); padding: 8px 10px; overflow-x: auto; font-size: 12px; max-height: 360px; }
table.winners td .who, table.winners td .margin { white-space: nowrap; }
table.winners td .margin { display: block; color: var(--muted); font-size: 12px; }
table.answer td { max-width: 300px; }
table.answer td .margin { white-space: normal; }
table.answer td.why { min-width: 380px; max-width: 560px; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 6px; }
.status-ok { color: var(--bestink); font-weight: 600; }
.status-bad { color: var(--badink); font-weight: 600; }
"""
