"""The terminal lines of what the data, photos, references, knowledge-base, backends,
app-usage, batch, SoS-report, compare and tune commands made or found."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from refine.numbers import MISSING, shown
from refine.present.terminal.scores import table_lines


def reference_lines(pack: Any) -> list[str]:
    """Descriptors by dimension (with their style tags), stereotype candidates, source."""
    lines = [f"{pack.activity} - {pack.country}"]
    styles = getattr(pack, "styles", None) or {}
    for dim, phrases in pack.descriptors.items():
        lines += ["", f"{dim}:"]
        lines += [f"  - {p}" + (f" ({styles[p]})" if p in styles else "") for p in phrases]
    lines += ["", "stereotype candidates:", *(f"  - {s}" for s in pack.stereotypes)]
    return lines + ["", f"source: {pack.source}"]


def catalog_lines(pack: Any, origin: dict[str, str], keys: list[str]) -> list[str]:
    """Each country's CULTIVate activities (``*``: with descriptors) and where its
    descriptors come from."""
    lines = []
    for key in keys:
        where = origin.get(key)
        said = (
            f"descriptors from {'the bundled pack' if where == 'bundled' else where}"
            if where
            else "no descriptors: `refine data fetch ahead` or `refine refs build`"
        )
        lines.append(f"{key} ({said}):")
        for phrase, entry in sorted(pack.countries[key]["activities"].items()):
            lines.append(f"  {'*' if entry.get('descriptors') else ' '} {phrase}")
    return lines


def kb_added_lines(out: Path, counts: dict[str, int], info: dict[str, Any]) -> list[str]:
    return [
        f"{out}: {counts['entities_added']} entities added, {counts['entities_extended']} "
        f"given new images, {counts['images_added']} images embedded, "
        f"{counts['skipped']} already there",
        f"now {info['entities']} entities, {info['images']} images ({info['embedder']})",
    ]


def kb_info_lines(info: dict[str, Any]) -> list[str]:
    per = info["images_per_entity"]
    return [
        f"knowledge base {info['path']}",
        f"  embedder    {info['embedder']} ({info['dimension']} dimensions)",
        f"  entities    {info['entities']} ({info['with_text']} with text)",
        f"  images      {info['images']} ({per['min']}-{per['max']} per entity, "
        f"mean {per['mean']:.1f})",
        f"  size        {info['bytes'] / 1e6:.2f} MB",
        f"  e.g.        {', '.join(info['examples'])}",
    ]


def photo_set_lines(doc: dict[str, Any], described: str) -> list[str]:
    """A photo set's photos, each with its CLIPScore, licence, author and page."""
    lines = [f"{doc['activity']} in {doc['country']}: {described}"]
    for p in doc["photos"]:
        score = f"CLIPScore {p['clipscore']:.3f} · " if "clipscore" in p else ""
        who = f"{p['licence']}, {p['author']} · " if "licence" in p else ""
        lines += [f"  {p['path']}", f"    {score}{who}{p.get('page') or p.get('url', '')}"]
    return lines


def fetch_ahead_lines(doc: dict[str, Any]) -> list[str]:
    """What ``refine data fetch ahead`` fetched, kept and could not fetch."""
    lines = [
        f"{len(doc['countries'])} countries, {doc['activities_with_descriptors']} activities "
        f"with reference descriptors: {doc['pack']}",
        f"{len(doc['downloaded'])} file(s) downloaded, {len(doc['already_there'])} already there",
        *(f"not fetched: {url} ({why})" for url, why in doc["failed"].items()),
        *(f"proposer-only pack ({k}): {v}" for k, v in doc["proposer_packs"].items()),
    ]
    if "photos" in doc:
        p = doc["photos"]
        lines.append(
            f"photos: {p['downloaded']} downloaded, {p['already_there']} already there, "
            f"{p['dead']} dead link(s), {p['rows_joining_no_activity']} manifest row(s) "
            f"joining no activity: {Path(p['folder']) / 'report.json'}"
        )
    return lines


def culturalframes_lines(doc: dict[str, Any]) -> list[str]:
    """What ``refine data fetch culturalframes`` wrote, and what it left out."""
    folder = Path(doc["folder"])
    lines = [
        f"{doc['images']} images of {len(doc['countries'])} countries "
        f"({doc['images_written']} written now), {doc['ratings']} ratings: "
        f"{folder / 'ratings.jsonl'}"
    ]
    if doc["images_without_ratings"] or doc["annotations_without_image"]:
        lines.append(
            f"{doc['images_without_ratings']} image(s) have no annotation and "
            f"{doc['annotations_without_image']} annotated image(s) are not in the shards"
        )
    skipped = doc["skipped"]
    lines += [f"left out: {line}" for line in skipped[:5]]
    if len(skipped) > 5:
        lines.append(f"... and {len(skipped) - 5} more (source.json lists them)")
    return lines + [
        f"the raters' agreement: refine agree --ratings {folder / 'ratings.jsonl'} --metrics none"
    ]


def backends_lines(doc: dict[str, Any]) -> list[str]:
    """The registered backends per role, then each bundled profile's roles."""
    rows = [[b["role"], b["example"], b["description"]] for b in doc["backends"]]
    lines = ["backends", *table_lines(["role", "name", "what it is"], rows)]
    for p in doc["profiles"]:
        lines.append(f"profile {p['name']}: {p['description']}")
        for role, name in p["roles"].items():
            opts = ", ".join(f"{k}={v}" for k, v in p["options"].get(role, {}).items())
            lines.append(f"  {role:14} {name}" + (f"  ({opts})" if opts else ""))
    return lines


def download_lines(doc: list[dict[str, Any]]) -> list[str]:
    """One line a model or checkpoint ``refine models download`` fetched (or could not)."""
    return [
        f"{r['status']:10} {r['name']}  ({r['role']}){'  ' + r['detail'] if r['detail'] else ''}"
        for r in doc
    ]


def usage_lines(table: dict[str, dict[str, int]]) -> list[str]:
    """The app's visitors (hashed) by model calls today."""
    lines = [f"{'visitor (hashed)':18} {'runs 1 h':>8} {'runs 24 h':>9} {'calls today':>11}"]
    for who, row in sorted(table.items(), key=lambda kv: -kv[1]["calls_today"]):
        lines.append(
            f"{who:18} {row['runs_hour']:>8} {row['runs_day']:>9} {row['calls_today']:>11}"
        )
    total = sum(r["calls_today"] for r in table.values())
    return lines + [f"{len(table)} visitor(s), {total} model calls today"]


def batch_lines(batch: Any, directory: Path) -> list[str]:
    """A batch's runs, a line each, then its success rate, FAITH gain and regressions."""

    def fmt(x: float | None) -> str:
        return shown(x, "6.3f", 6)

    def pct(x: float | None) -> str:
        return MISSING if x is None else f"{100 * x:.0f}%"

    lines = [
        "",
        f"batch {batch.id} ({directory})",
        f"{'line':>4} {'status':8} {'FAITH0':>6} {'best':>6} {'edits':>5}  run / error",
    ]
    for e in batch.entries:
        where = e.run_dir or ""
        if e.status == "failed":
            where = f"{where}  {e.error}".strip()
        lines.append(
            f"{e.line:>4} {e.status:8} {fmt(e.initial_faith)} {fmt(e.best_faith)} "
            f"{e.edit_rounds:>5}  {where}"
        )
    s = batch.summary
    gain = shown(s["mean_faith_gain"], "+.3f")
    mean_edits = shown(s["mean_editing_rounds"], ".1f")
    lines.append(
        f"success rate {pct(s['success_rate'])} ({s['finished']}/{s['runs']}, "
        f"{s['failed']} failed); mean FAITH gain {gain} ({s['improved_runs']} run(s) improved); "
        f"regression rate {pct(s['regression_rate'])} of {s['editing_rounds']} editing "
        f"round(s); {mean_edits} editing round(s) per run"
        + (f"; {s['retries']} run(s) resumed after a worker died" if s.get("retries") else "")
    )
    return lines


def sos_report_lines(result: dict[str, Any]) -> list[str]:
    """``refine sos report``: the share of strongly surface-led model-language pairs, each
    language's mean SoS, the caption classifiers' agreement and where the page is."""
    lines = [
        f"{result['images']} images, {len(result['pairs'])} pairs, centroids "
        f"{result['centroids']}; strongly surface-led model-language pairs: "
        f"{result['share_strongly_surface_led']:.1%} (median at or below the 25th percentile "
        f"of their medians, {result['percentile_25']:+.4f})"
    ]
    for m in result["model_languages"]:
        if m["strongly_surface_led"]:
            lines.append(f"  strongly surface-led: {m['generator']} in {m['language']}")
    for lang, s in result["by_language"].items():
        lines.append(f"  {lang:>3}: mean SoS {s['mean']:+.4f} over {s['pairs']} cultures")
    for name, c in result.get("caption_classifiers", {}).get("classifiers", {}).items():
        agree = "-" if c["accuracy"] is None else f"{c['accuracy']:.1%}"
        lines.append(f"{name} ({c['model']}) agrees with SoS on {agree} of {c['n']} images")
    return lines + [f"report: {result['report']}"]


def recipe_table_lines(table: Any) -> list[str]:
    """The table as text: a line per row, each cell ``value (paper figure)``."""
    digits = table.recipe.table.digits
    heads = [h for _, h, _, _ in table.columns]
    width = max([len(r.label) for r in table.rows] + [8])
    lines = [f"{table.recipe.name}: {table.caption}"]
    lines.append(" " * width + " " + " ".join(f"{h:>16}" for h in heads))
    for row in table.rows:
        cells = []
        for key, _, _, _ in table.columns:
            c = table.cells.get((row.label, key))
            text = "-" if c is None or c.value is None else f"{c.value:.{digits}f}"
            if c is not None and c.paper is not None:
                text += f" ({c.paper:.{digits}f}{'†' if c.paper_differs else ''})"
            cells.append(f"{text:>16}")
        lines.append(f"{row.label:<{width}} " + " ".join(cells))
    if table.paper_figures():
        lines.append("(the paper's figure in parentheses)")
    if table.apart_figures():
        lines.append("(†: the paper's figure, made another way: no measure of a difference)")
    for n in table.notes:
        lines.append(f"differs: {n}")
    for m in table.missing:
        lines.append(f"missing: {m}")
    return lines


def _interval(iv: Any) -> str:
    return f"[{iv[0]:+.3f}, {iv[1]:+.3f}]" if iv else "-"


def compare_lines(doc: dict[str, Any]) -> list[str]:
    """Two benches side by side (``refine compare``'s document): each metric's means, B - A
    and its paired interval, and with ratings each bench's agreement with people."""
    lines = []
    for side in ("a", "b"):
        s = doc["settings"][side]
        observer = (s["scorer"] or {}).get("observer")
        lines.append(f"{side.upper()}: {doc[side]} (tau {s['tau']}, observer {observer})")
    lines.append(f"{doc['cells']} cells paired on the same images ({doc['images']} images)")
    if doc["not_the_same_images"]:
        lines.append(f"  left out, their images differ: {len(doc['not_the_same_images'])} cells")
    head = f"{'metric':14} {'A':>8} {'B':>8} {'B - A':>8}"
    lines.append(f"{head} {'95% interval':>20} {'changed':>8}")
    for m, r in doc["metrics"].items():
        lines.append(
            f"{m:14} {shown(r['a'], '.3f', 8)} {shown(r['b'], '.3f', 8)} "
            f"{shown(r['difference'], '+.3f', 8)} {_interval(r['interval']):>20} {r['changed']:>8}"
        )
    agreed = doc.get("agreement")
    if agreed:
        q, n = agreed["question"], agreed["images"]
        lines.append(f"agreement with people ({q}, Spearman, {n} rated images):")
        for m, r in agreed["metrics"].items():
            lines.append(
                f"  {m:12} A {shown(r['a'], '+.3f', 7)}  B {shown(r['b'], '+.3f', 7)}  "
                f"B - A {shown(r['difference'], '+.3f', 7)} {_interval(r.get('interval'))}"
            )
    return lines


def tune_lines(summary: dict[str, Any]) -> list[str]:
    """What ``refine tune`` made (its ``summary`` with ``out``, ``base``, ``page`` and,
    once pushed, ``pushed``) and how to use it."""
    lines = [
        f"adapter: {summary['out']} ({summary['steps']} steps, final loss "
        f"{summary['final_loss']:.4f})"
    ]
    if summary["held_out_accuracy"] is not None:
        lines.append(f"held-out implicit reward accuracy: {summary['held_out_accuracy']:.3f}")
    lines.append(f"loss curve: {summary['page']}")
    base = summary["base"].removeprefix("diffusers:")
    lines.append(f'use it: --generator "diffusers:{base}+lora={summary["out"]}"')
    if summary.get("pushed"):
        lines.append(f"pushed to the Hub: {summary['pushed']}")
    return lines
