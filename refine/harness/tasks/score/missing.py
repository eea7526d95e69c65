"""The metrics of rated images that have none stored (``refine agree --compute``): each
activity and country's images scored by the score task into a folder of their own (so the
same command keeps what it scored before, and a kill loses nothing), then read back as
stored metrics; and the CLIPScore of every rated image without one, from its prompt."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from metrics.catalog import BENCH_IMAGE, image_extras
from refine.human.ratings import Rating
from refine.human.stored import StoredMetrics
from refine.records import DEFAULT_PROFILE


def score_missing(
    ratings: Sequence[Rating],
    found: StoredMetrics,
    metrics: Sequence[str],
    out: str | Path,
    profile: str = DEFAULT_PROFILE,
    backends: dict[str, str] | None = None,
    backend_options: dict[str, dict[str, Any]] | None = None,
    activity: str | None = None,
    country: str | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> int:
    """Score the rated images that have no stored FAITH (the row's activity and country,
    else the ones given) into ``out``/ACTIVITY-COUNTRY (a score task's folder each), and
    the CLIPScore of every image that has none stored, from its prompt (else the generation
    prompt of its activity and country, with the profile's image embedder and
    ``backend_options``); returns how many images were scored. A ValueError names an
    image that cannot be scored and why."""
    emit = on_progress or (lambda line: None)
    # what every scored image has: AHEaD's, the quality readings, the catalog's own
    scored_metrics = (*BENCH_IMAGE, *image_extras())
    need_scores = [m for m in metrics if m in scored_metrics]
    groups: dict[tuple[str, str], dict[str, Rating]] = {}
    for r in ratings:
        if not need_scores or r.sha256 in found.by_sha:
            continue
        act, ctry = r.activity or activity, r.country or country
        if not act or not ctry:
            raise ValueError(
                f"{r.image.name}: no stored metrics; give --activity and --country (or "
                "the activity and country columns) to score it, or --source the folder "
                "it came from"
            )
        groups.setdefault((act, ctry), {}).setdefault(r.sha256, r)
    scored = sum(map(len, groups.values()))
    if groups:
        from pydantic import ValidationError

        from metrics.baselines import BASELINES
        from refine.harness.plan import refusal
        from refine.harness.tasks.score.plan import ScorePlan
        from refine.harness.tasks.score.task import run_score
        from refine.io.files import slug

        # the baselines asked for are scored with them (CLIPScore below, from each prompt)
        compare = [m for m in metrics if m in BASELINES and m != "clipscore"]
        for (act, ctry), todo in groups.items():
            try:
                plan = ScorePlan(
                    images=[str(r.image) for r in todo.values()],
                    activity=act,
                    country=ctry,
                    profile=profile,
                    backends=backends or {},
                    baselines=compare,
                )
            except ValidationError as err:
                raise ValueError(refusal(err, ScorePlan)) from err
            folder = Path(out) / slug(f"{act}-{ctry}", 80)
            run_score(plan, folder, on_event=emit)
            found.collect(folder)
    if "clipscore" in metrics:
        _clipscores(ratings, found, profile, backends, backend_options, activity, country)
    return scored


def _clipscores(
    ratings: Sequence[Rating],
    found: StoredMetrics,
    profile: str,
    backends: dict[str, str] | None,
    backend_options: dict[str, dict[str, Any]] | None,
    activity: str | None,
    country: str | None,
) -> None:
    """Hessel's CLIPScore of each rated image without one stored, for its prompt."""
    from PIL import Image

    from metrics.baselines import clipscore
    from refine.assets import prompt_template
    from refine.backends.selection import Backends
    from refine.profiles import load_profile

    models = Backends(load_profile(profile), backends or {}, backend_options)
    with models.using("image_embedder") as embedder:
        if not callable(getattr(embedder, "logit_scale", None)):
            raise ValueError(
                f"CLIPScore needs a CLIP image embedder (clip:ARCH/TAG or hfclip:ID); "
                f"{models.names.get('image_embedder')} is not one (--backend "
                "image_embedder=clip:ViT-B-32/openai, or leave clipscore out of --metrics)"
            )
        generate = prompt_template("generate").strip()
        for sha, r in {r.sha256: r for r in ratings}.items():
            entries = found.by_sha.get(sha, [])
            if entries and all("clipscore" in e.values for e in entries):
                continue  # stored with the image (a bench's, for its generation prompt)
            act, ctry = r.activity or activity, r.country or country
            prompt = r.prompt or (
                generate.format(activity=act, country=ctry) if act and ctry else None
            )
            if prompt is None:
                continue
            with Image.open(r.image) as im:
                image = embedder.encode_images([im.convert("RGB")])
            cos = float((image * embedder.encode_texts([prompt])).sum())
            found.put(sha, {"clipscore": clipscore(cos)}, r.image)
