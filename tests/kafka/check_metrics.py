#!/usr/bin/python3
"""Checks a kmirrord metrics text (the file argv[1]) as Prometheus reads
it, with Prometheus's own Python client (python3-prometheus-client): every
family has HELP and TYPE, counters end in _total, no series twice, every
name starts with kmirror_. With --dashboard FILE: every kmirror_ metric a
Grafana panel's query (or a template variable's) names is one the text
has. Prints "ok: ..." and exits 0, or prints what is wrong and exits 1
(suite kafka-ops-metrics runs it on a real scrape)."""
import json
import re
import sys

from prometheus_client.parser import text_string_to_metric_families


def check_text(text):
    errors, names, seen = [], set(), set()
    helped = set(re.findall(r"^# HELP (\S+) \S", text, re.M))
    for fam in text_string_to_metric_families(text):
        if fam.type == "unknown":
            errors.append(f"{fam.name}: no TYPE")
        if not fam.name.startswith("kmirror_"):
            errors.append(f"{fam.name}: not kmirror_")
        names.add(fam.name)
        if fam.type == "counter":
            names.add(fam.name + "_total")
        for s in fam.samples:
            names.add(s.name)
            key = (s.name, tuple(sorted(s.labels.items())))
            if key in seen:
                errors.append(f"{s.name}{s.labels}: twice")
            seen.add(key)
            if fam.type == "counter" and not s.name.endswith("_total"):
                errors.append(f"{s.name}: a counter not ending in _total")
            if fam.type == "gauge" and s.name.endswith("_total"):
                errors.append(f"{s.name}: a gauge ending in _total")
        exposed = fam.name + ("_total" if fam.type == "counter" else "")
        if exposed not in helped:
            errors.append(f"{exposed}: no HELP")
    return errors, names, len(seen)


def panel_exprs(dash):
    out = []
    stack = list(dash.get("panels", []))
    while stack:
        p = stack.pop()
        stack.extend(p.get("panels", []))
        for t in p.get("targets", []):
            out.append((p.get("title", "?"), t.get("expr", "")))
    for v in dash.get("templating", {}).get("list", []):
        q = v.get("query", "")
        out.append(("$" + v.get("name", "?"), q if isinstance(q, str) else q.get("query", "")))
    return out


def main():
    args = sys.argv[1:]
    dash_path = None
    if "--dashboard" in args:
        i = args.index("--dashboard")
        dash_path = args[i + 1]
        del args[i:i + 2]
    text = open(args[0]).read()
    try:
        errors, names, n = check_text(text)
    except Exception as e:  # the parser refuses the text
        print(f"parse error: {e}")
        return 1
    used = set()
    if dash_path:
        dash = json.load(open(dash_path))
        for title, expr in panel_exprs(dash):
            if not expr:
                errors.append(f"panel {title}: no expr")
            for m in re.findall(r"\bkmirror_[A-Za-z0-9_]+", expr):
                used.add(m)
                if m not in names:
                    errors.append(f"panel {title}: {m} is not in the metrics")
    if errors:
        print("\n".join(errors))
        return 1
    print(f"ok: {n} series, {len(names)} names, dashboard uses {len(used)}: "
          + " ".join(sorted(used)))
    return 0


sys.exit(main())
