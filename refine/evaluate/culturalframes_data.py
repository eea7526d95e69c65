"""CulturalFrames' own data, fetched from the Hugging Face Hub at the user's request.

``refine data fetch culturalframes`` downloads the dataset ``mair-lab/CulturalFrames`` at
the revision :data:`REVISION` (``--from URL``: another Hub endpoint, a mirror or the
tests' stand-in) with ``huggingface_hub.snapshot_download``, which resumes a cut download
and skips what is already there: the parquet shards under ``data/`` (3,637 rows: ``id``,
``prompt``, ``image``, ``country``, ``model``) and ``culturalframes_human_annotations.json``
(a list of images, each with ``model_name``, ``category`` and its ``human_annotations``:
``prompt_alignment.score`` 0/0.5/1 with ``missing_explicit``, ``missing_implicit`` and
``comments``, ``stereotype.is_stereotypical``, ``image_quality.score`` 0/0.5/1,
``overall_score`` 1-5, ``feedback`` and ``demographic_data``). Each shard's sha256 is
checked against the Hub's LFS record and the annotations against :data:`ANNOTATIONS_SHA256`.

From them, in the data directory's ``culturalframes/`` folder:

* ``images/<model>/<id>.<ext>``: each image as its bytes were published;
* ``prompts.jsonl``: one row an image (id, prompt, country, category, model, image path
  and sha256);
* ``ratings.jsonl``: one row an annotation under the bundled ``culturalframes`` protocol,
  which ``refine agree`` and the ``culturalframes-fig6`` recipe's ``--ratings`` read; with
  ``.profiles.json`` beside it (each rater's country, as the protocol counts them);
* ``source.json``: the endpoint, the revision, every file's sha256, the counts and the
  licence note.

The published annotations name no rater, so each annotation is its own rater
(``<id>#<k>``): Krippendorff's alpha needs no names, and the human-human correlation is
then each annotation against the others' mean on its image, pooled over all annotations
(:func:`refine.human.groups.ceiling`). The raters' country is the image's: CulturalFrames
recruited only raters born in, nationals of, raised in and living in the country (Sec. 3.3,
footnote 3), and their ``demographic_data`` is kept beside it.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = "mair-lab/CulturalFrames"
REVISION = "7a44117634da41d438411b21cecf3467ac782da7"  # the card's revision of Jan 2026
ANNOTATIONS = "culturalframes_human_annotations.json"
ANNOTATIONS_SHA256 = "39eda8981a279178f58aa8d135290a7567e284bbd9fa46d27619fbeda594d4db"
SHARDS = "data/*.parquet"
FOLDER = "culturalframes"
NOTICE = (
    "CulturalFrames (Hugging Face mair-lab/CulturalFrames, revision 7a44117), downloaded at "
    "your request: its card declares no licence, so it is not shipped with the toolkit; "
    "cite the paper (Nayak et al., 2025) where you use it"
)
# the annotations' model_name -> the parquet's model (the paper's generators)
MODELS = {"SD35": "SD-3.5-Large", "flux": "Flux.1-Dev", "gpt-image": "GPT-Image",
          "imagegen3": "Imagen3"}  # fmt: skip
COUNTRIES = ("Brazil", "Canada", "Chile", "China", "Germany", "India", "Iran", "Japan",
             "Poland", "South Africa")  # fmt: skip


class FetchError(ValueError):
    """A fetch that cannot be done; the message names what and what to do."""


@dataclass
class Fetched:
    """What a fetch wrote: the folder, the images (written now, already there), the
    annotations turned into ratings, what was left out and why."""

    folder: Path
    images: int = 0
    written: int = 0
    ratings: int = 0
    images_without_ratings: int = 0
    annotations_without_image: int = 0
    skipped: list[str] = field(default_factory=list)  # annotations not read, and why
    countries: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # hub file -> sha256

    def document(self) -> dict[str, Any]:
        """What ``refine data fetch culturalframes --json`` prints."""
        return {
            "folder": str(self.folder),
            "countries": self.countries,
            "images": self.images,
            "images_written": self.written,
            "ratings": self.ratings,
            "images_without_ratings": self.images_without_ratings,
            "annotations_without_image": self.annotations_without_image,
            "skipped": self.skipped,
        }


def country_name(value: str) -> str:
    """The dataset's country (``South_Africa``) as the toolkit names it."""
    return value.replace("_", " ").strip()


def fetch_culturalframes(
    data_dir: str | Path,
    countries: Sequence[str] = (),
    endpoint: str | None = None,
    emit: Callable[[str], None] | None = None,
    progress: bool = True,
) -> Fetched:
    """Download the dataset into ``data_dir`` and write its images, prompts and ratings
    (for ``countries``, default all ten). Raises FetchError naming an unknown country, a
    Hub that cannot be reached or a file whose sha256 is not the published one."""
    emit = emit or (lambda line: None)
    wanted = []
    for name in countries:
        match = next((c for c in COUNTRIES if c.lower() == country_name(name).lower()), None)
        if match is None:
            raise FetchError(
                f"--countries: CulturalFrames has no country {name!r} "
                f"(its countries: {', '.join(COUNTRIES)})"
            )
        wanted.append(match)
    folder = Path(data_dir) / FOLDER
    hub = folder / "hub"
    emit(f"fetching {NOTICE}, into {folder}")
    shas = _download(hub, endpoint, progress)
    done = Fetched(folder, countries=wanted or list(COUNTRIES), files=shas)
    annotations = _annotations(hub / ANNOTATIONS, done)
    emit(f"{len(annotations)} annotated images in {ANNOTATIONS}")
    rows = _images(hub, folder, set(done.countries), annotations, done, emit)
    _ratings(folder, rows, annotations, done)
    _source(folder, endpoint, done)
    return done


def _download(hub: Path, endpoint: str | None, progress: bool) -> dict[str, str]:
    """The shards and the annotations under ``hub`` (resumed, what is there kept); each
    file's sha256, checked against the Hub's record."""
    from huggingface_hub import HfApi, constants, snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    from refine.backends.download import hub_unreachable
    from refine.io.files import file_sha256

    where = endpoint or constants.ENDPOINT
    why = hub_unreachable(endpoint=endpoint)
    if why is not None:
        raise FetchError(f"{why}; check the network, or name a Hub mirror with --from URL")
    if not progress:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    try:
        # the dataset is public: no token of the user's goes to the Hub or to a mirror
        tree = HfApi(endpoint=endpoint, token=False).list_repo_tree(
            REPO, revision=REVISION, repo_type="dataset", recursive=True
        )
        # what the Hub records of each file: the LFS sha256, else the git blob's sha1
        record = {
            f.path: ("sha256", f.lfs.sha256) if getattr(f, "lfs", None) else ("blob", f.blob_id)
            for f in tree
            if hasattr(f, "blob_id")
        }
        snapshot_download(
            REPO,
            repo_type="dataset",
            revision=REVISION,
            local_dir=hub,
            allow_patterns=[SHARDS, ANNOTATIONS],
            endpoint=endpoint,
            token=False,
        )
    except Exception as err:  # the Hub's answers, and the network's errors (httpx's)
        known = (HfHubHTTPError, LocalEntryNotFoundError, OSError)
        if not isinstance(err, known) and not type(err).__module__.startswith("httpx"):
            raise
        line = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise FetchError(
            f"cannot download {REPO} at {REVISION[:7]} from {where} ({line}); check the "
            "network, or name a Hub mirror with --from URL"
        ) from None
    shards = sorted(p for p in (hub / "data").glob("*.parquet"))
    lacking = [n for n, ok in ((SHARDS, shards), (ANNOTATIONS, (hub / ANNOTATIONS).is_file()))
               if not ok]  # fmt: skip
    if lacking:
        raise FetchError(
            f"{where} has no {' and no '.join(lacking)} for {REPO} at {REVISION[:7]}; is "
            "--from a Hub endpoint (the address HF_ENDPOINT would name)?"
        )
    shas: dict[str, str] = {}
    for path in [*shards, hub / ANNOTATIONS]:
        rel = path.relative_to(hub).as_posix()
        shas[rel] = file_sha256(path)
        kind, want = record.get(rel, ("", ""))
        got = shas[rel] if kind == "sha256" else _blob_sha1(path)
        if rel == ANNOTATIONS:  # the published file, whatever the mirror lists
            kind, want, got = "sha256", ANNOTATIONS_SHA256, shas[rel]
        if not kind or got != want:
            path.unlink()  # a later fetch downloads it again
            raise FetchError(
                f"{rel} from {where} is not the file the Hub records for revision "
                f"{REVISION[:7]} ({kind or 'no record'}: {got[:12]}..."
                + (f", not {want[:12]}..." if want else "")
                + "); removed: fetch again, or name another mirror with --from"
            )
    return shas


def _blob_sha1(path: Path) -> str:
    """The git blob id of a file (what the Hub records of a file kept outside LFS)."""
    h = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _annotations(path: Path, done: Fetched) -> dict[str, dict[str, Any]]:
    """The annotation file's images by id; an object that is not of the published shape is
    left out, named in ``done.skipped``."""
    from refine.io.files import json_value

    try:
        doc = json_value(path.read_bytes())
    except ValueError as err:
        raise FetchError(f"{ANNOTATIONS} is not JSON ({err}); fetch again") from None
    if not isinstance(doc, list):
        raise FetchError(f"{ANNOTATIONS} is not a list of images; fetch again")
    out: dict[str, dict[str, Any]] = {}
    for k, item in enumerate(doc):
        ok = isinstance(item, dict) and isinstance(item.get("id"), str)
        ok = ok and isinstance(item.get("human_annotations"), list)
        if not ok:
            done.skipped.append(f"{ANNOTATIONS}[{k}]: no id or no human_annotations list")
            continue
        out[item["id"]] = item
    return out


def _images(
    hub: Path,
    folder: Path,
    countries: set[str],
    annotations: dict[str, dict[str, Any]],
    done: Fetched,
    emit: Callable[[str], None],
) -> list[dict[str, Any]]:
    """Each image of the countries asked written from the shards (one batch at a time: the
    shards hold 6 GB), with its row for ``prompts.jsonl``."""
    import pyarrow.parquet as pq

    from refine.io.files import atomic_write_bytes, atomic_write_text, file_sha256
    from refine.io.images import ImageError, checked_image_bytes

    rows: list[dict[str, Any]] = []
    shards = sorted((hub / "data").glob("*.parquet"))
    for n, shard in enumerate(shards, 1):
        table = pq.ParquetFile(shard)
        need = {"id", "prompt", "image", "country", "model"}
        have = set(table.schema_arrow.names)
        if not need <= have:
            raise FetchError(
                f"{shard.name} has no column {sorted(need - have)[0]!r}: not the published layout"
            )
        for batch in table.iter_batches(batch_size=16, columns=sorted(need)):
            for row in batch.to_pylist():
                country = country_name(str(row.get("country") or ""))
                if country not in countries:
                    continue
                image = row.get("image") or {}
                data = image.get("bytes") if isinstance(image, dict) else None
                rid = str(row.get("id") or "")
                if not data or not rid or "/" in rid or rid.startswith("."):
                    done.skipped.append(f"{shard.name}: a row with no image or no usable id")
                    continue
                try:
                    checked_image_bytes(data)
                except ImageError as err:
                    done.skipped.append(f"{shard.name}: {rid}: {err}")
                    continue
                ext = _suffix(data)
                model = str(row.get("model") or "unknown")
                target = folder / "images" / _safe(model) / f"{rid}{ext}"
                sha = hashlib.sha256(data).hexdigest()
                if not (target.is_file() and file_sha256(target) == sha):
                    target.parent.mkdir(parents=True, exist_ok=True)
                    atomic_write_bytes(target, data)
                    done.written += 1
                meta = annotations.get(rid) or {}
                rows.append(
                    {
                        "id": rid,
                        "prompt": str(row.get("prompt") or ""),
                        "country": country,
                        "category": meta.get("category"),
                        "model": model,
                        "image": target.relative_to(folder).as_posix(),
                        "image_sha256": sha,
                    }
                )
        emit(f"[{n}/{len(shards)}] {shard.name}: {len(rows)} images so far")
    done.images = len(rows)
    atomic_write_text(
        folder / "prompts.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    )
    return rows


def _suffix(data: bytes) -> str:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        kind = (im.format or "png").lower()
    return {"jpeg": ".jpg", "png": ".png", "webp": ".webp"}.get(kind, f".{kind}")


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-._" else "_" for c in name).strip(".") or "model"


def _ratings(
    folder: Path, rows: list[dict[str, Any]], annotations: dict[str, Any], done: Fetched
) -> None:
    """``ratings.jsonl`` (an annotation a row, under the culturalframes protocol) and
    ``.profiles.json`` (each rater's country)."""
    from refine.io.files import atomic_write_json, atomic_write_text

    lines: list[str] = []
    profiles: dict[str, dict[str, Any]] = {}
    by_id = {r["id"]: r for r in rows}
    for rid, item in annotations.items():
        row = by_id.get(rid)
        country = country_name(str(item.get("country") or ""))
        if row is None:
            done.annotations_without_image += country in done.countries
            continue
        model = MODELS.get(str(item.get("model_name")), str(item.get("model_name")))
        if country != row["country"] or model != row["model"]:
            done.skipped.append(
                f"{rid}: annotated as {country} / {model}, its image is "
                f"{row['country']} / {row['model']}"
            )
            continue
        for k, given in enumerate(item["human_annotations"], 1):
            rater = f"{rid}#{k}"
            try:
                answers = _answers(given)
            except (TypeError, ValueError, KeyError) as err:
                done.skipped.append(f"{rater}: {err}")
                continue
            lines.append(
                json.dumps(
                    {
                        "image": row["image"],
                        "image_sha256": row["image_sha256"],
                        "rater": rater,
                        "protocol": "culturalframes",
                        "kind": "rate",
                        "answers": answers,
                        "prompt": row["prompt"],
                        "country": row["country"],
                        **({"comment": given["feedback"]} if _text(given.get("feedback")) else {}),
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )
            demo = given.get("demographic_data") if isinstance(given, dict) else None
            profiles[rater] = {"raised": row["country"]} | (
                {f"reported_{k}": str(v) for k, v in demo.items() if isinstance(v, str | int)}
                if isinstance(demo, dict)
                else {}
            )
    done.ratings = len(lines)
    rated = {json.loads(x)["image"] for x in lines}
    done.images_without_ratings = sum(r["image"] not in rated for r in rows)
    atomic_write_text(folder / "ratings.jsonl", "".join(lines))
    atomic_write_json(folder / ".profiles.json", profiles)


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _score(value: Any, allowed: tuple[float, ...], what: str) -> str:
    """A published score as the protocol's option value (0.5 -> "0.5", 3.0 -> "3")."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} is {value!r}, not a number")
    if float(value) not in allowed:
        raise ValueError(f"{what} is {value!r}, not one of {', '.join(map(str, allowed))}")
    return f"{float(value):g}"


def _answers(given: Any) -> dict[str, Any]:
    """One annotation's answers to the culturalframes protocol's questions."""
    if not isinstance(given, dict):
        raise ValueError("not an object")
    align = given.get("prompt_alignment") or {}
    quality = given.get("image_quality") or {}
    stereo = given.get("stereotype") or {}
    answers: dict[str, Any] = {
        "alignment": _score(align.get("score"), (0.0, 0.5, 1.0), "prompt_alignment.score"),
        "quality": _score(quality.get("score"), (0.0, 0.5, 1.0), "image_quality.score"),
        "overall": _score(given.get("overall_score"), (1, 2, 3, 4, 5), "overall_score"),
    }
    flag = _flag(stereo.get("is_stereotypical"), "stereotype.is_stereotypical")
    if flag is not None:
        answers["stereotype"] = "yes" if flag else "no"
    if answers["alignment"] != "1":
        missing = [
            k for k in ("explicit", "implicit")
            if _flag(align.get(f"missing_{k}"), f"prompt_alignment.missing_{k}")
        ]  # fmt: skip
        if missing:
            answers["missing"] = missing
        words = align.get("selected_words")
        marked = words if isinstance(words, list) else str(words or "").replace(",", " ").split()
        if marked:
            answers["missing_words"] = [str(w).strip() for w in marked if str(w).strip()]
        if _text(align.get("comments")):
            answers["missing_reason"] = align["comments"]
    return answers


def _flag(value: Any, what: str) -> bool | None:
    """A published yes/no: true/false or 1/0 (None: not given); anything else is named."""
    if value is None:
        return None
    if isinstance(value, bool) or value in (0, 1):
        return bool(value)
    raise ValueError(f"{what} is {value!r}, not true or false")


def _source(folder: Path, endpoint: str | None, done: Fetched) -> None:
    from refine.io.files import atomic_write_json

    atomic_write_json(
        folder / "source.json",
        {
            "repo": REPO,
            "revision": REVISION,
            "endpoint": endpoint or "https://huggingface.co",
            "notice": NOTICE,
            "files": done.files,
            "countries": done.countries,
            "images": done.images,
            "ratings": done.ratings,
            "images_without_ratings": done.images_without_ratings,
            "annotations_without_image": done.annotations_without_image,
            "skipped": done.skipped,
        },
    )
