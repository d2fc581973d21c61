"""``spillway report --html``: one self-contained HTML page about a checkpoint, for an incident.

The page is built only from the JSON documents the other commands print — ``spillway.analyze/1``
(``analyze_json``), ``spillway.validate/1`` (``validate_json``), ``spillway.files/1``
(``files_json``) and, when a new job's plan is given, ``spillway.preflight/2`` (``preflight.to_doc``) —
gathered into one ``spillway.report/1`` document by ``report_document``.
``render_html`` is a pure function of that document: no I/O, no clock. The document is embedded
verbatim in the page (``<script type="application/json" id="spillway-report">``), so every number
shown can be checked against it and against ``spillway analyze --json``.

Nothing is loaded at view time: inline CSS, inline SVG and HTML tables only; no script runs, no
font, image or style sheet is fetched. Every name is escaped (SQL vertex names carry brackets,
angle brackets and quotes).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spillway.inspect.restore_checks import Settings
    from spillway.inspect.topology import JobBinding, Topology
    from spillway.storage.load import LoadedCheckpoint

SCHEMA = "spillway.report/1"
DATA_ID = "spillway-report"


# --------------------------------------------------------------------------------------------------
# the document


def report_document(
    loaded: LoadedCheckpoint,
    topology: Topology | None,
    source: str,
    new_job: tuple[Topology, Settings, str] | None = None,
    job: JobBinding | None = None,
) -> dict[str, Any]:
    """Run analyze, the restore check, validate and files on one loaded checkpoint and gather their
    JSON documents (exactly what ``analyze --json``, ``validate --json`` and ``files --json`` print).

    ``new_job`` (the new job's plan, what the plan does not show, and where the plan came from) adds
    ``preflight``: what ``spillway preflight --json`` prints for that job, without the restore forecast.
    ``job``: ``topology`` bound to the checkpoint, when the caller holds it."""
    from spillway.inspect.analyze import analyze
    from spillway.inspect.files import collect_files, files_json
    from spillway.inspect.finished import check
    from spillway.inspect.reports import analyze_json, validate_json
    from spillway.inspect.topology import bind_job
    from spillway.inspect.validate import validate

    if topology is not None and job is None:
        job = bind_job(topology, loaded.checkpoint)  # once, shared by every section
    analysis = analyze(loaded, topology, job=job)
    verdict = check(topology, loaded.checkpoint, job) if topology else None
    binding = job.operators if job is not None else None
    report = validate(loaded, topology, job=job)
    metadata = loaded.location.shown
    doc = {
        "schema": SCHEMA,
        "source": source,
        "metadata_path": metadata,
        "analyze": analyze_json(analysis, verdict, 0, "auto", binding),
        "validate": validate_json(report, metadata, loaded.resolver.rebases(), binding),
        "files": files_json(collect_files([(source, loaded)], [job.names if job is not None else {}])),
        "preflight": None,
    }
    if new_job is not None:
        from spillway.inspect.preflight import check as preflight
        from spillway.inspect.preflight import to_doc

        new_plan, settings, plan_source = new_job
        doc["preflight"] = to_doc(preflight(new_plan, loaded.checkpoint, settings, loaded), {"plan": plan_source})
    return doc


# --------------------------------------------------------------------------------------------------
# helpers


def _e(value: object) -> str:
    """Escape for text and attribute values (quotes too)."""
    return escape("" if value is None else str(value), quote=True)


def human_bytes(n: int | None) -> str:
    if n is None:
        return "?"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def _num(n: int | None) -> str:
    return "not parsed" if n is None else f"{n:,}"


def _shade(frac: float) -> tuple[str, str]:
    """(background, text colour): pale for little in flight, deep red for the most on this edge."""
    frac = max(0.0, min(1.0, frac))
    r = round(255 - 55 * frac)
    g = round(245 - 215 * frac)
    b = round(235 - 205 * frac)
    return f"rgb({r},{g},{b})", "#fff" if frac > 0.55 else "#1b1b1b"


def _short(text: str, limit: int = 38) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json_block(doc: dict[str, Any]) -> str:
    # Inside <script> only "</" can end the element; escape <, > and & so no sequence can.
    text = json.dumps(doc, indent=1, sort_keys=False)
    text = text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    return f'<script type="application/json" id="{DATA_ID}">\n{text}\n</script>'


CSS = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
  color: #1b1b1b; background: #fafafa; margin: 0; padding: 24px 32px 48px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 32px 0 8px; padding-bottom: 4px; border-bottom: 2px solid #ddd; }
h3 { font-size: 14px; margin: 18px 0 6px; }
code, .mono, td.mono { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12.5px; }
.sub { color: #555; }
.banner { padding: 10px 14px; border-radius: 6px; margin: 10px 0; font-weight: 600; }
.ok { background: #e5f5e8; border: 1px solid #8fcf9b; color: #17572a; }
.warn { background: #fff6dc; border: 1px solid #e6c65c; color: #6b5200; }
.bad { background: #fde7e7; border: 1px solid #e59a9a; color: #8a1414; }
.kpis { display: flex; flex-wrap: wrap; gap: 10px; margin: 14px 0; }
.kpi { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 8px 14px; min-width: 150px; }
.kpi b { display: block; font-size: 18px; }
.kpi span { color: #555; font-size: 12px; }
table { border-collapse: collapse; background: #fff; margin: 6px 0 12px; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; font-weight: 600; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.name { max-width: 560px; overflow-wrap: anywhere; }
.heat td.cell { text-align: center; min-width: 84px; font-variant-numeric: tabular-nums; }
.heat td.none { color: #aaa; text-align: center; }
.heat .exact { display: block; font-size: 11px; opacity: .8; }
.bar { display: inline-block; height: 10px; background: #c0392b; vertical-align: middle; margin-right: 6px; }
.sev-error { color: #8a1414; font-weight: 600; }
.sev-warning { color: #8a6400; font-weight: 600; }
.sev-info { color: #555; }
td.rule { white-space: nowrap; }
.missing { color: #8a1414; font-weight: 600; }
svg { background: #fff; border: 1px solid #ddd; border-radius: 6px; }
svg text { font-family: system-ui, "DejaVu Sans", sans-serif; }
footer { margin-top: 36px; color: #777; font-size: 12px; }
nav a { margin-right: 14px; color: #245; }
"""


# --------------------------------------------------------------------------------------------------
# sections


def _edge_key(e: dict[str, Any]) -> tuple[Any, ...]:
    return (e["upstream"], e["downstream"], e["gate"], e["ship_strategy"])


def _edge_channels(analyze: dict[str, Any], e: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        c
        for c in analyze["channels"]
        if (c["upstream"]["operator"], c["downstream"]["operator"], c["gate"], c["ship_strategy"]) == _edge_key(e)
        and c["upstream"]["subtask"] >= 0
        and c["downstream"]["subtask"] >= 0
    ]


def _header(doc: dict[str, Any]) -> str:
    a, v, f = doc["analyze"], doc["validate"], doc["files"]
    channels = a["channels"]
    in_flight = sum(c["bytes"] for c in channels)
    records = sum(c["records"] or 0 for c in channels)
    counts = v["summary"]
    mine = f["checkpoints"][0] if f["checkpoints"] else {"files": 0, "bytes": 0, "missing": 0}
    verdict = a["restore_verdict"]
    if v["ok"] and v["complete"]:
        banner = '<div class="banner ok" id="validate-banner">validate: sound — no errors</div>'
    elif v["ok"]:
        banner = (
            f'<div class="banner warn" id="validate-banner">validate: no errors found, not all checked — '
            f"{len(v['unchecked'])} part(s) unchecked (see Validate findings)</div>"
        )
    else:
        banner = (
            f'<div class="banner bad" id="validate-banner">validate: {counts["error"]} error(s) — '
            "this checkpoint is damaged (see Validate findings)</div>"
        )
    if verdict is None:
        vb = '<div class="banner warn" id="verdict-banner">restore check: no plan given (--plan), no verdict</div>'
    elif not verdict["restorable"]:
        vb = '<div class="banner bad" id="verdict-banner">restore check: Flink would refuse this checkpoint</div>'
    elif not verdict["certain"]:
        vb = (
            '<div class="banner warn" id="verdict-banner">restore check: no refusal found, '
            "but the verdict is uncertain</div>"
        )
    else:
        vb = (
            '<div class="banner ok" id="verdict-banner">restore check: '
            "Flink's finished-state checks would accept this checkpoint</div>"
        )
    pb = _preflight_banner(doc.get("preflight"))
    kpis = [
        ("checkpoint", _num(a["checkpoint_id"]), f"format V{a['format_version']}"),
        ("in flight", human_bytes(in_flight), f"{_num(in_flight)} B", "total-bytes", in_flight),
        ("records in flight", _num(records), f"{len(channels)} logical channels", "total-records", records),
        ("operators", str(len(a["operators"])), f"{len(a['edges'])} edges with channel state"),
        (
            "files",
            str(mine["files"]),
            human_bytes(mine["bytes"]) + (f", {mine['missing']} missing" if mine["missing"] else ""),
        ),
        ("findings", f"{counts['error']} / {counts['warning']} / {counts['info']}", "errors / warnings / notes"),
    ]
    cards = []
    for k in kpis:
        attrs = f' id="{k[3]}" data-value="{k[4]}"' if len(k) > 3 else ""
        cards.append(f'<div class="kpi"{attrs}><b>{_e(k[1])}</b><span>{_e(k[0])} · {_e(k[2])}</span></div>')
    return (
        f"<h1>spillway report — checkpoint {_e(a['checkpoint_id'])}</h1>"
        f'<div class="sub mono" id="metadata-path">{_e(doc["metadata_path"])}</div>'
        f'<div class="kpis">{"".join(cards)}</div>{banner}{vb}{pb}'
        '<nav><a href="#topology">Topology</a><a href="#heatmaps">Heat maps</a><a href="#operators">Operators'
        '</a><a href="#verdict">Finished states &amp; verdict</a><a href="#preflight">Restore into a new job</a>'
        '<a href="#validate">Validate</a>'
        '<a href="#files">Files</a><a href="#channels">Channels</a></nav>'
    )


def _layers(nodes: list[str], links: list[tuple[str, str]]) -> dict[str, int]:
    """Longest-path layer of every node (sources at 0); cycles are cut by a bound on the depth."""
    depth = {n: 0 for n in nodes}
    for _ in range(len(nodes)):
        changed = False
        for u, d in links:
            if u != d and depth[d] < depth[u] + 1 <= len(nodes):
                depth[d] = depth[u] + 1
                changed = True
        if not changed:
            break
    return depth


def _topology(a: dict[str, Any]) -> str:
    edges = a["edges"]
    parts = ['<h2 id="topology">Topology: in-flight data per edge</h2>']
    if not edges:
        parts.append(
            '<p class="sub">No edge is known: either nothing is in flight, or no plan was given '
            "(<code>--plan</code>) so channels cannot be joined to their operators.</p>"
        )
        return "".join(parts)
    nodes: list[str] = []
    for e in edges:
        for n in (e["upstream"], e["downstream"]):
            if n not in nodes:
                nodes.append(n)
    depth = _layers(nodes, [(e["upstream"], e["downstream"]) for e in edges])
    columns: dict[int, list[str]] = {}
    for n in nodes:
        columns.setdefault(depth[n], []).append(n)
    box_w, box_h, gap_x, gap_y, pad = 230, 46, 170, 40, 20
    pos: dict[str, tuple[int, int]] = {}
    for col, names in sorted(columns.items()):
        for row, n in enumerate(names):
            pos[n] = (pad + col * (box_w + gap_x), pad + 10 + row * (box_h + gap_y))
    width = pad * 2 + (max(columns) + 1) * box_w + max(columns) * gap_x
    height = pad * 2 + 10 + max(len(v) for v in columns.values()) * (box_h + gap_y)
    top = max((e["bytes"] for e in edges), default=0) or 1
    svg = [
        f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="job topology">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="12" markerHeight="12" '
        'markerUnits="userSpaceOnUse" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#777"/></marker></defs>',
    ]
    for i, e in enumerate(edges):
        (x1, y1), (x2, y2) = pos[e["upstream"]], pos[e["downstream"]]
        sx: float = x1 + box_w
        sy: float = y1 + box_h / 2
        ex: float = x2
        ey: float = y2 + box_h / 2
        if x2 <= x1:  # a back edge (or a self edge): route below the boxes
            sx, sy, ex, ey = x1 + box_w / 2, y1 + box_h, x2 + box_w / 2, y2 + box_h
        frac = e["bytes"] / top
        stroke, _ = _shade(0.25 + 0.75 * frac)
        w = 2 + 10 * frac
        mx, my = (sx + ex) / 2, (sy + ey) / 2
        svg.append(
            f'<g class="edge" data-edge="{i}"><title>{_e(e["upstream"])} → {_e(e["downstream"])}: '
            f"{_num(e['bytes'])} bytes, {_num(e['records'])} records in flight</title>"
            f'<path d="M{sx:.0f},{sy:.0f} C{mx:.0f},{sy:.0f} {mx:.0f},{ey:.0f} {ex:.0f},{ey:.0f}" '
            f'fill="none" stroke="{stroke}" stroke-width="{w:.1f}" marker-end="url(#arrow)"/>'
            f'<text x="{mx:.0f}" y="{my - w / 2 - 18:.0f}" text-anchor="middle" font-size="12" font-weight="600">'
            f"{_e(human_bytes(e['bytes']))}</text>"
            f'<text x="{mx:.0f}" y="{my - w / 2 - 5:.0f}" text-anchor="middle" font-size="11" fill="#444">'
            f"{_e(_num(e['records']))} rec · {_e(e['ship_strategy'] or '?')}</text></g>"
        )
    ops = {o["name"] or o["operator_id"]: o for o in a["operators"]}
    for n in nodes:
        x, y = pos[n]
        o = ops.get(n)
        sub = "" if o is None else f"p={o['parallelism']} · {o['finished_state']}"
        svg.append(
            f'<g class="node"><title>{_e(n)}</title>'
            f'<rect x="{x}" y="{y}" width="{box_w}" height="{box_h}" rx="6" fill="#eef3fb" stroke="#6d8fbf"/>'
            f'<text x="{x + box_w / 2:.0f}" y="{y + 19}" text-anchor="middle" font-size="13" font-weight="600">'
            f"{_e(_short(n, 30))}</text>"
            f'<text x="{x + box_w / 2:.0f}" y="{y + 36}" text-anchor="middle" font-size="11" fill="#555">'
            f"{_e(sub)}</text></g>"
        )
    svg.append("</svg>")
    parts.append("".join(svg))
    rows = []
    for i, e in enumerate(edges):
        rows.append(
            f'<tr class="edge-row" data-edge="{i}" data-upstream="{_e(e["upstream"])}" '
            f'data-downstream="{_e(e["downstream"])}">'
            f'<td class="name" data-f="upstream">{_e(e["upstream"])}</td>'
            f'<td class="name" data-f="downstream">{_e(e["downstream"])}</td>'
            f'<td data-f="gate">{_e("-" if e["gate"] is None else e["gate"])}</td>'
            f'<td data-f="ship_strategy">{_e(e["ship_strategy"] or "?")}</td>'
            f'<td class="n">{e["upstream_parallelism"]} → {e["downstream_parallelism"]}</td>'
            f'<td class="n" data-f="channels">{e["channels"]}</td>'
            f'<td class="n" data-f="buffers">{_num(e["buffers"])}</td>'
            f'<td class="n" data-f="records">{_num(e["records"])}</td>'
            f'<td class="n" data-f="bytes">{_num(e["bytes"])}</td>'
            f'<td class="n">{_e(human_bytes(e["bytes"]))}</td>'
            f'<td class="n" data-f="watermarks">{_num(e["watermarks"])}</td>'
            f'<td class="n" data-f="other_elements">{_num(e["other_elements"])}</td></tr>'
        )
    parts.append(
        '<table id="edges"><tr><th>upstream</th><th>downstream</th><th>gate</th><th>ship strategy</th>'
        '<th class="n">parallelism</th><th class="n">channels</th><th class="n">buffers</th>'
        '<th class="n">records</th><th class="n">bytes</th><th class="n">in flight</th>'
        '<th class="n">watermarks</th><th class="n">other events</th></tr>'
        f"{''.join(rows)}</table>"
        '<p class="sub">Edges are shown where the checkpoint holds channel state on them.</p>'
    )
    return "".join(parts)


def _heatmaps(a: dict[str, Any]) -> str:
    parts = [
        '<h2 id="heatmaps">Heat maps: in-flight bytes per channel</h2>'
        '<p class="sub">Upstream subtasks down, downstream subtasks across; each cell is one logical channel, '
        "shaded by its in-flight bytes relative to the fullest channel of the edge. · = no channel.</p>"
    ]
    if not a["edges"]:
        parts.append('<p class="sub">No edges known (see Topology).</p>')
    for i, e in enumerate(a["edges"]):
        chans = _edge_channels(a, e)
        grid = {(c["upstream"]["subtask"], c["downstream"]["subtask"]): c for c in chans}
        top = max((c["bytes"] for c in chans), default=0) or 1
        gate = "" if e["gate"] is None else f", gate {e['gate']}"
        head = "".join(f'<th class="n">#{d}</th>' for d in range(e["downstream_parallelism"]))
        rows = []
        for u in range(e["upstream_parallelism"]):
            cells = []
            for d in range(e["downstream_parallelism"]):
                c = grid.get((u, d))
                if c is None:
                    cells.append('<td class="none">·</td>')
                    continue
                bg, fg = _shade(c["bytes"] / top)
                cells.append(
                    f'<td class="cell" style="background:{bg};color:{fg}" data-up="{u}" data-down="{d}" '
                    f'data-bytes="{c["bytes"]}" data-records="{c["records"] if c["records"] is not None else ""}" '
                    f'title="{_e(c["label"])}: {_num(c["bytes"])} bytes, {_num(c["records"])} records">'
                    f'{_e(human_bytes(c["bytes"]))}<span class="exact">{_num(c["records"])} rec</span></td>'
                )
            row_total = sum(c["bytes"] for (uu, _), c in grid.items() if uu == u)
            rows.append(f'<tr><th class="n">#{u}</th>{"".join(cells)}<td class="n">{human_bytes(row_total)}</td></tr>')
        col_totals = "".join(
            f'<td class="n">{human_bytes(sum(c["bytes"] for (_, dd), c in grid.items() if dd == d))}</td>'
            for d in range(e["downstream_parallelism"])
        )
        parts.append(
            f'<h3>{_e(e["upstream"])} → {_e(e["downstream"])} <span class="sub">({_e(e["ship_strategy"] or "?")}'
            f"{_e(gate)}) · {_num(e['records'])} records in {e['channels']} channels · "
            f"{_num(e['bytes'])} bytes</span></h3>"
            f'<table class="heat" data-edge="{i}"><tr><th>up \\ down</th>{head}<th class="n">Σ</th></tr>'
            f'{"".join(rows)}<tr><th class="n">Σ</th>{col_totals}<td class="n"><b>{human_bytes(e["bytes"])}</b>'
            "</td></tr></table>"
        )
    return "".join(parts)


def _operators(a: dict[str, Any]) -> str:
    top = max((v for o in a["operators"] for v in o["in_flight_bytes_per_subtask"].values()), default=0) or 1
    rows = []
    for o in a["operators"]:
        skew = "".join(
            f'<div><span class="mono">#{_e(k)}</span> <span class="bar" style="width:{round(120 * v / top)}px"></span>'
            f"{_e(human_bytes(v))}</div>"
            for k, v in o["in_flight_bytes_per_subtask"].items()
        )
        fin = o["finished_state"] + (f" {o['finished_subtasks']}" if o["finished_subtasks"] else "")
        rows.append(
            f'<tr class="op-row" data-operator-id="{_e(o["operator_id"])}">'
            f'<td class="name" data-f="name">{_e(o["name"] or "-")}</td>'
            f'<td class="mono" data-f="operator_id">{_e(o["operator_id"])}</td>'
            f'<td data-f="uid">{_e(o["uid"] or "-")}</td>'
            f'<td class="n" data-f="parallelism">{o["parallelism"]}</td>'
            f'<td data-f="finished_state">{_e(fin)}</td>'
            f'<td class="n" data-f="in_flight_bytes">{_num(o["in_flight_bytes"])}</td>'
            f'<td class="n" data-f="in_flight_records">{_num(o["in_flight_records"])}</td>'
            f"<td>{skew or '-'}</td></tr>"
        )
    return (
        '<h2 id="operators">Operators: in flight and finished state</h2>'
        '<table id="operators-table"><tr><th>operator</th><th>operator id</th><th>uid</th>'
        '<th class="n">parallelism</th><th>finished state (FLIP-147)</th><th class="n">in-flight bytes</th>'
        f'<th class="n">records</th><th>per subtask</th></tr>{"".join(rows)}</table>'
    )


def _verdict(a: dict[str, Any]) -> str:
    v = a["restore_verdict"]
    parts = ['<h2 id="verdict">Finished states and restore verdict</h2>']
    if v is None:
        parts.append(
            '<p class="sub">No plan given (<code>--plan</code>): Flink\'s restore-time checks need the '
            "job graph, so there is no verdict.</p>"
        )
    else:
        state = "accepted" if v["restorable"] and v["certain"] else "uncertain" if v["restorable"] else "refused"
        parts.append(
            f'<p id="verdict-state" data-restorable="{str(v["restorable"]).lower()}" '
            f'data-certain="{str(v["certain"]).lower()}">verdict: <b>{state}</b></p>'
        )
        rows = "".join(
            f'<tr><td class="name">{_e(name)}</td><td>{_e(cls)}</td>'
            f"<td>{'uncertain' if name in v['uncertain_vertices'] else 'certain'}</td></tr>"
            for name, cls in v["vertices"].items()
        )
        parts.append(
            '<table id="vertices"><tr><th>job vertex (operator chain)</th><th>finished state</th>'
            f"<th>classification</th></tr>"
            f"{rows}</table>"
        )
        for viol in v["violations"]:
            parts.append(f'<div class="banner bad">{_e(viol.get("rule"))}: {_e(viol.get("message"))}</div>')
        if v["notes"]:
            parts.append("<ul>" + "".join(f"<li>{_e(n)}</li>" for n in v["notes"]) + "</ul>")
    binding = a.get("binding")
    if binding:
        rows = "".join(
            f'<tr><td class="name">{_e(b["operator"])}</td><td class="mono">{_e(b["operator_id"] or "-")}</td>'
            f"<td>{_e(b['method'])}</td><td>{'yes' if b['exact'] else 'no'}</td><td>{_e(b['reason'])}</td></tr>"
            for b in binding
        )
        parts.append(
            "<h3>How plan operators were bound to the checkpoint</h3>"
            '<table id="binding"><tr><th>plan operator</th><th>operator id</th><th>method</th><th>exact</th>'
            f"<th>why</th></tr>{rows}</table>"
        )
    return "".join(parts)


VERDICT_CLASS = {
    "refused": "sev-error",
    "fails": "sev-error",
    "loss": "sev-error",
    "unknown": "sev-warning",
    "warning": "sev-warning",
    "note": "sev-info",
}


def _preflight_banner(p: dict[str, Any] | None) -> str:
    if p is None:
        return ""
    css, text = {
        "yes": ("ok", "Flink would restore this checkpoint into the new job"),
        "no": ("bad", "Flink would refuse to restore this checkpoint into the new job, or the job would fail"),
        "restores-with-loss": ("bad", "Flink would restore this checkpoint into the new job and drop data"),
        "unknown": ("warn", "whether Flink would restore this checkpoint into the new job is unknown"),
    }[p["verdict"]]
    return f'<div class="banner {css}" id="preflight-banner">preflight: {text} (see Restore into a new job)</div>'


def _preflight(p: dict[str, Any] | None) -> str:
    """The ``spillway.preflight/2`` answer for the new job of ``--new-plan``: yes/no/restores-with-loss/unknown,
    every reason, and what the restore drops."""
    parts = ['<h2 id="preflight">Will Flink restore this into that job?</h2>']
    if p is None:
        parts.append(
            '<p class="sub">No new job given (<code>--new-plan</code>): run <code>spillway report … --new-plan '
            "NEW_PLAN</code> or <code>spillway preflight</code> to ask.</p>"
        )
        return "".join(parts)
    answer = p["verdict"]
    parts.append(
        f'<p id="preflight-answer" data-restorable="{answer}">new job: <code>{_e(p.get("plan"))}</code> · '
        f"restorable: <b>{answer}</b></p>"
    )
    rows = []
    for r in p["reasons"]:
        flink = r.get("flink_message")
        issue = r.get("flink_issue")
        rows.append(
            f'<tr class="preflight-reason" data-verdict="{_e(r["verdict"])}" data-check="{_e(r["check"])}">'
            f'<td class="{VERDICT_CLASS.get(r["verdict"], "")}">{_e(r["verdict"])}</td>'
            f'<td class="mono rule">{_e(r["check"])}</td>'
            f'<td class="name">{_e(r["message"])}'
            + (f" [{_e(issue)}]" if issue else "")
            + (f" (Flink {_e(r['flink_does'])})" if r.get("flink_does") else "")
            + "</td>"
            f'<td class="name flink-message">{_e(flink) if flink else "-"}</td></tr>'
        )
    parts.append(
        '<table id="preflight-reasons"><tr><th>verdict</th><th>check</th><th>why</th>'
        f"<th>Flink's message</th></tr>{''.join(rows)}</table>"
    )
    loss = p["loss"]
    lost = [
        f'<tr><td class="name">{_e(x["label"])}</td><td class="name">state: {_e(", ".join(x["state_kinds"]))}</td>'
        f'<td class="n">{_e(human_bytes(x["bytes"]))}</td><td class="n">-</td></tr>'
        for x in loss["state"]
    ] + [
        f'<tr><td class="name">{_e(x["label"])}</td><td class="name">{_e(x["side"])} channel state in flight: '
        f'{_e(x["why"])}</td><td class="n">{_e(human_bytes(x["bytes"]))}</td>'
        f'<td class="n">{_e("?" if x["records"] is None else x["records"])}</td></tr>'
        for x in loss["in_flight"]
    ]
    if lost:
        parts.append(
            '<table id="preflight-loss"><tr><th>operator</th><th>what Flink drops without a word</th>'
            f'<th class="n">bytes</th><th class="n">records</th></tr>{"".join(lost)}</table>'
        )
    vertices = "".join(
        f'<tr><td class="name">{_e(v["vertex"])}</td><td class="n">{_e(v["parallelism"])}</td>'
        f'<td class="n">{_e("-" if v["checkpoint_parallelism"] is None else v["checkpoint_parallelism"])}</td>'
        f'<td class="n">{_e(human_bytes(v["input_channel_bytes"]))}</td>'
        f'<td class="n">{_e(human_bytes(v["output_channel_bytes"]))}</td></tr>'
        for v in p["vertices"]
    )
    parts.append(
        '<table id="preflight-vertices"><tr><th>new job vertex</th><th class="n">parallelism</th>'
        '<th class="n">in the checkpoint</th><th class="n">input channel state</th>'
        f'<th class="n">output channel state</th></tr>{vertices}</table>'
        '<p class="sub">Flink\'s restore-time checks answered offline (docs/preflight.md); '
        "<code>spillway preflight</code> adds the restore forecast.</p>"
    )
    return "".join(parts)


def _validate_verdict(v: dict[str, Any]) -> str:
    if not v["ok"]:
        return f"{v['summary']['error']} errors"
    return "sound" if v["complete"] else "no errors found, not all checked"


def _unchecked(v: dict[str, Any]) -> str:
    """What validate could not check, one row per reason (the full list is in the validate document)."""
    counts: dict[tuple[str, str], int] = {}
    for u in v["unchecked"]:
        counts[u["what"], u["why"]] = counts.get((u["what"], u["why"]), 0) + 1
    if not counts:
        return ""
    rows = "".join(
        f'<tr class="unchecked"><td class="n">{n}</td><td class="mono">{_e(what)}</td>'
        f'<td class="name">{_e(why)}</td></tr>'
        for (what, why), n in counts.items()
    )
    return f'<table id="unchecked"><tr><th class="n">unchecked</th><th>what</th><th>why</th></tr>{rows}</table>'


def _validate(v: dict[str, Any]) -> str:
    s = v["summary"]
    parts = [
        '<h2 id="validate">Validate findings</h2>',
        f'<p id="validate-summary" data-errors="{s["error"]}" data-warnings="{s["warning"]}">'
        f"<b>{_validate_verdict(v)}</b> · {s['warning']} warnings · "
        f"{s['info']} notes · {_num(s['files_checked'])} files · {_num(s['channel_state_blobs'])} channel-state "
        f"blobs, {_num(s['chunks'])} chunks · {_num(s['logical_channels_framed'])} logical channels framed · "
        f"{_num(s['records'])} records and {_num(s['elements'] - s['records'])} other stream elements, "
        f"{_num(s['payload_bytes_read'])} payload bytes</p>",
        _unchecked(v),
    ]
    if v["findings"]:
        rows = []
        for f in v["findings"]:
            sev = f.get("severity", "")
            rows.append(
                f'<tr class="finding"><td class="sev-{_e(sev)}">{_e(sev)}</td>'
                f'<td class="mono rule">{_e(f.get("rule"))}</td>'
                f'<td class="name">{_e(f.get("operator") or "-")}</td>'
                f'<td class="n">{_e("-" if f.get("subtask") is None else f.get("subtask"))}</td>'
                f'<td class="name">{_e(f.get("channel") or "-")}</td>'
                f'<td class="name mono">{_e(f.get("file") or "-")}</td>'
                f'<td class="n">{_e("-" if f.get("offset") is None else f.get("offset"))}</td>'
                f'<td class="name">{_e(f.get("message"))}</td></tr>'
            )
        parts.append(
            '<table id="findings"><tr><th>severity</th><th>rule</th><th>operator</th><th class="n">subtask</th>'
            '<th>channel</th><th>file</th><th class="n">offset</th><th>message</th></tr>'
            f"{''.join(rows)}</table>"
        )
    else:
        parts.append('<p class="sub">No findings.</p>')
    for r in v.get("rebased") or []:
        parts.append(
            f'<p class="sub">rebased {_e(r.get("paths"))} paths: <code>{_e(r.get("from"))}</code> → '
            f"<code>{_e(r.get('to'))}</code></p>"
        )
    return "".join(parts)


def _files(f: dict[str, Any], operators: Sequence[dict[str, Any]]) -> str:
    names = {o["operator_id"]: o["name"] or o["operator_id"] for o in operators}
    parts = ['<h2 id="files">Files the checkpoint depends on</h2>']
    for cp in f["checkpoints"]:
        groups = ", ".join(
            f"{g}: {n['files']} files, {human_bytes(n['bytes'])}" for g, n in cp["groups"].items() if n["files"]
        )
        parts.append(
            f'<p id="files-summary" data-files="{cp["files"]}" data-bytes="{cp["bytes"]}">'
            f"<b>{cp['files']} files, {human_bytes(cp['bytes'])}</b> ({_num(cp['bytes'])} bytes)"
            + (f" · <span class='missing'>{cp['missing']} missing</span>" if cp["missing"] else "")
            + (f" — {_e(groups)}" if groups else "")
            + "</p>"
        )
    if not f["files"]:
        parts.append('<p class="sub">No files: every handle is inline in _metadata.</p>')
        return "".join(parts)
    rows = []
    for e in f["files"]:
        ops = ", ".join(sorted(names.get(o, o) for o in e["operators"]))
        kinds = ", ".join(k.replace("_state", "").replace("_", " ") for k in e["state_kinds"])
        rows.append(
            f'<tr class="file-row"><td>{_e(e["area"])}</td><td class="name mono">{_e(e["shown"])}</td>'
            f'<td class="n" data-f="size">{_num(e["size"]) if e["size"] is not None else "-"}</td>'
            f'<td class="n">{_e(human_bytes(e["size"]) if e["size"] is not None else "-")}</td>'
            f"<td>{'yes' if e['exists'] else '<span class=missing>missing</span>'}</td>"
            f'<td class="n">{e["handles"]}</td><td class="name">{_e(ops)}</td><td>{_e(kinds)}</td></tr>'
        )
    parts.append(
        '<table id="files-table"><tr><th>area</th><th>file</th><th class="n">bytes</th><th class="n">size</th>'
        '<th>exists</th><th class="n">handles</th><th>operators</th><th>state</th></tr>'
        f"{''.join(rows)}</table>"
    )
    return "".join(parts)


def _channels(a: dict[str, Any]) -> str:
    parts = ['<h2 id="channels">Logical channels (replay order)</h2>']
    if not a["channels"]:
        parts.append('<p class="sub">No channel state in this checkpoint.</p>')
        return "".join(parts)
    rows = []
    for c in a["channels"]:
        wm = f"{c['watermarks']} (last {c['last_watermark']})" if c["watermarks"] else "-"
        rows.append(
            f'<tr class="channel-row"><td class="name">{_e(c["label"])}</td><td>{_e(c["ship_strategy"] or "-")}</td>'
            f'<td class="n">{_num(len(c["buffer_sequence"]))}</td><td class="n">{_num(c["records"])}</td>'
            f'<td class="n">{_num(c["bytes"])}</td>'
            f'<td class="n">{_num(c["input_bytes"])} / {_num(c["output_bytes"])}</td><td>{_e(wm)}</td>'
            f'<td class="n">{_num(c["other_elements"])}</td><td class="name">{_e(c["problem"] or "")}</td></tr>'
        )
    parts.append(
        '<table id="channels-table"><tr><th>channel</th><th>edge</th><th class="n">buffers</th>'
        '<th class="n">records</th><th class="n">bytes</th><th class="n">input / output bytes</th>'
        f'<th>watermarks</th><th class="n">other events</th><th>problem</th></tr>{"".join(rows)}</table>'
    )
    for s in a.get("skipped") or []:
        parts.append(f'<p class="sub">{_e(s)}</p>')
    return "".join(parts)


def render_html(doc: dict[str, Any], *, generator: str = "spillway") -> str:
    """The page for a ``spillway.report/1`` document (pure: the same document gives the same page)."""
    a = doc["analyze"]
    title = f"spillway report — checkpoint {a['checkpoint_id']}"
    body = "".join(
        [
            _header(doc),
            _topology(a),
            _heatmaps(a),
            _operators(a),
            _verdict(a),
            _preflight(doc.get("preflight")),
            _validate(doc["validate"]),
            _files(doc["files"], a["operators"]),
            _channels(a),
            f"<footer>Generated by {_e(generator)} from <code>{_e(doc['source'])}</code>. "
            f"The documents behind every number ({_e(a['schema'])}, {_e(doc['validate']['schema'])}, "
            f"{_e(doc['files']['schema'])}"
            + (f", {_e(doc['preflight']['schema'])}" if doc.get("preflight") else "")
            + f") are embedded below as JSON (<code>script#{DATA_ID}</code>).</footer>",
            _json_block(doc),
        ]
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{CSS}</style></head>\n<body>{body}</body></html>\n"
    )


__all__ = ["DATA_ID", "SCHEMA", "render_html", "report_document"]
