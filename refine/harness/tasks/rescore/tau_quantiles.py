"""Tau at the quartiles of the real photos' best-match similarities (AHEaD A.3, Fig. 6 and
Tab. 5: Q1, median and Q3, the last the paper's choice), and a bench rescored at each
(``refine rescore BENCH --tau-quantiles --out NEW``: ``NEW/tau-q1``, ``NEW/tau-median``,
``NEW/tau-q3``, and ``NEW/tau-quantiles.json`` with how the values were found).

The photos are each bench prompt's photo set (``refine data fetch ahead --photos``,
``refine photos search``); the observer (the rescore's: the bench's own, or the one
given) lists what each photo shows, and every reference descriptor's best cosine
similarity to what was listed in its dimension is pooled over all photos of all prompts,
as ``refine calibrate-tau`` does for one activity."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from refine.harness.tasks.rescore.plan import RescoreError

QUANTILES = {"q1": 0.25, "median": 0.5, "q3": 0.75}


def photo_similarities(
    plan: Any,
    backend_options: dict[str, dict[str, Any]] | None = None,
    emit: Any = None,
    kept: str | Path | None = None,
) -> tuple[list[float], dict[str, Any]]:
    """The pooled best-match similarities on the photos of the bench's prompts, and what
    they came from (prompts, photos, observer, text embedder, observations asked and
    kept). ``kept``: a JSON file of the observations made before, by observer, prompts
    and photo bytes, read and added to, so that a run again (or cut short) asks again
    only for the photos it has not seen."""
    from PIL import Image

    from metrics.ahead import best_match_similarities
    from metrics.descriptors import DIMENSIONS
    from refine.backends.selection import Backends
    from refine.evaluate.reference_source import ReferenceSource
    from refine.harness.tasks.bench.cells import with_observer_prompts
    from refine.profiles import load_profile

    bench, _ = plan.bench_plan()
    # the photos are observed as the bench's images are (AHEaD's prompts where it uses them)
    options = with_observer_prompts(backend_options, bench.observer_prompts)
    scorer = Backends(load_profile(bench.profile), bench.backends, options)
    scorer.preflight(["observer", "text_embedder"])
    from refine.io.files import atomic_write_text, file_sha256

    store = Path(kept) if kept else None
    seen: dict[str, Any] = {}
    if store is not None and store.is_file():
        try:
            seen = json.loads(store.read_text(encoding="utf-8"))
        except ValueError:
            seen = {}  # a damaged file: observed again
    who = f"{scorer.names.get('observer')}|{bench.observer_prompts}"
    asked = hits = 0
    sims: list[float] = []
    used, photos = [], 0
    source = ReferenceSource.default()
    for act, country in dict.fromkeys(bench.prompts):
        refs = source.find(act, country).pack
        if not refs.reference_images:
            continue
        observed = []
        for path in refs.reference_images:
            key = f"{who}|{file_sha256(path)}"
            hits += key in seen
            if key not in seen:
                with Image.open(path) as im:
                    image = im.convert("RGB")
                with scorer.using("observer") as observer:
                    seen[key] = observer.describe(image, list(DIMENSIONS), 10)
                asked += 1
                if store is not None:  # kept as it goes: a run cut short loses nothing
                    atomic_write_text(store, json.dumps(seen, indent=1, ensure_ascii=False))
                if emit:
                    emit(f"observing {path}")
            observed.append(seen[key])
        with scorer.using("text_embedder") as embedder:
            try:
                sims += best_match_similarities(refs.descriptors, observed, embedder)
            except ValueError:
                continue  # nothing observed in a reference's dimension on these photos
        used.append([act, country])
        photos += len(observed)
    if not sims:
        raise RescoreError(
            "--tau-quantiles: none of the bench's prompts has real photos with descriptors "
            "observed on them; `refine data fetch ahead --photos` or `refine photos search` "
            "make the photo sets"
        )
    about = {
        "prompts": used,
        "photos": photos,
        "similarities": len(sims),
        "observer": scorer.names.get("observer"),
        "text_embedder": scorer.names.get("text_embedder"),
        "observer_prompts": bench.observer_prompts,
        "observed_now": asked,
        "observed_before": hits,
    }
    return sims, about


def rescore_at_quantiles(
    plan: Any,
    out: str | Path,
    backend_options: dict[str, dict[str, Any]] | None = None,
    on_event: Callable[[str], None] | None = None,
    engine: Any = None,
) -> list[tuple[str, float, Any]]:
    """The bench rescored at tau = each quartile of the photos' similarities, into
    ``out/tau-<name>``; returns (name, tau, results) in the order Q1, median, Q3."""
    import numpy as np

    from refine.harness.engine import LOCAL
    from refine.harness.tasks.rescore.task import run_rescore
    from refine.io.files import atomic_write_text

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    sims, about = photo_similarities(
        plan, backend_options, on_event, out / "photo-observations.json"
    )
    values = {k: float(np.quantile(np.asarray(sims), q)) for k, q in QUANTILES.items()}
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(
        out / "tau-quantiles.json",
        json.dumps({"tau": values, "quantiles": QUANTILES, **about}, indent=1),
    )
    made = []
    for name, tau in values.items():
        where = (
            f"{name} ({QUANTILES[name]:g}) of {about['similarities']} best-match similarities "
            f"on {about['photos']} real photos of {len(about['prompts'])} prompts, observer "
            f"{about['observer']}"
        )
        if on_event:
            on_event(f"tau {tau:.4f}: {where}")
        one = plan.model_copy(update={"tau": round(tau, 6), "tau_source": where})
        made.append(
            (
                name,
                tau,
                run_rescore(
                    one,
                    out / f"tau-{name}",
                    backend_options,
                    on_event=on_event,
                    engine=engine or LOCAL,
                ),
            )
        )
    return made
