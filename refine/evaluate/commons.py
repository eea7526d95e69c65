"""Real photos of any activity in any country, searched on Wikimedia Commons.

The AHEaD paper collected its real photos with Google: 10 English and 10 translated
results per prompt, of which it kept the top 5 by CLIPScore against the English prompt
(its manifest, ``gt_images/top_5_gt_metadata.csv``). ``refine photos search`` does the
same on Wikimedia Commons' public API, which needs no key and gives each file's licence
and author:

* it queries in English and in the country's language (:func:`language_of`): with the
  paper's own translated query where the fetched AHEaD manifest has one
  (:func:`manifest_query`), else translated by the profile's language model;
* it downloads the results (:data:`PER_QUERY` per query, images only, each streamed under
  a size cap and a time limit, its declared size checked before it is decoded, and decoded
  with its longest side at most 1024 px: the width of the thumbnails it asks Commons for,
  so a thumbnail is scored as it came, and the embedder's own resizing to 224 px follows
  either way) and scores each by CLIPScore against the paper's English prompt, "A
  photorealistic photo of {activity} in {country}." (Hessel et al.: 2.5 x max(cos, 0), on
  the profile's image embedder);
* it keeps the top :data:`KEEP` and records each one's licence, author, page and address
  for attribution in ``set.json`` beside them (:mod:`refine.evaluate.photo_sets`).

Differences from the paper: Commons rather than Google (an open, attributed source), and
the profile's image embedder rather than the paper's CLIP for the ranking.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

API = "https://commons.wikimedia.org/w/api.php"
KEEP = 5  # the paper keeps the top 5 by CLIPScore
PER_QUERY = 10  # the paper: 10 English and 10 translated results per prompt
TRIES = 3
MAX_ANSWER_MB = 20.0  # a search answer larger than this is not read
IMAGE_MIMES = ("image/jpeg", "image/png", "image/webp")
# The language a country's query is translated into where the AHEaD manifest is not
# there to say which the paper used (its prompt_language column): the country's most
# widely spoken language. --language overrides it.
LANGUAGES = {
    "Brazil": "Portuguese",
    "China": "Chinese (Simplified)",
    "France": "French",
    "Germany": "German",
    "India": "Hindi",
    "Indonesia": "Indonesian",
    "Iran": "Persian",
    "Italy": "Italian",
    "Mexico": "Spanish",
    "Nepal": "Nepali",
    "Nigeria": "Hausa",
    "Philippines": "Filipino",
    "South Africa": "Zulu",
    "Spain": "Spanish",
    "Turkey": "Turkish",
    "USA": "English",
}
CODES = {  # the manifest's prompt_language codes
    "pt": "Portuguese", "zh": "Chinese (Simplified)", "zh-cn": "Chinese (Simplified)",
    "fr": "French", "de": "German", "hi": "Hindi", "id": "Indonesian", "fa": "Persian",
    "it": "Italian", "es": "Spanish", "ne": "Nepali", "ha": "Hausa", "yo": "Yoruba",
    "ig": "Igbo", "tl": "Filipino", "fil": "Filipino", "zu": "Zulu", "af": "Afrikaans",
    "xh": "Xhosa", "tr": "Turkish", "en": "English",
}  # fmt: skip


class SearchError(ValueError):
    """A search that cannot be done; the message says what and what to do."""


class Translation(BaseModel):
    translation: str


@dataclass(frozen=True)
class Candidate:
    """One search result: the file's page title, the address to download (a 1024-pixel
    rendition where Commons gives one), its page, licence and author, and which query found
    it at which rank."""

    title: str
    url: str
    page: str
    licence: str
    licence_url: str
    author: str
    query_language: str
    rank: int


def english_prompt(activity: str, country: str) -> str:
    """The paper's generation prompt, which its photos were ranked against."""
    return f"A photorealistic photo of {activity} in {country}."


def _manifest(data: Path | None) -> Path:
    from refine.evaluate.data_dir import data_dir
    from refine.evaluate.paper_data import COMMIT, PHOTO_MANIFEST

    return (data if data is not None else data_dir()) / "ahead" / COMMIT / PHOTO_MANIFEST


def manifest_query(activity: str, country: str, data: Path | None = None) -> str | None:
    """The translated query the AHEaD paper searched with for ``activity`` in ``country``:
    the ``prompt_text`` of the fetched manifest's rows whose ``prompt_language`` is
    ``translated`` (the paper's own words, so no translation is asked for); None where the
    manifest is not fetched or has no such row."""
    from collections import Counter

    manifest = _manifest(data)
    if not manifest.is_file():
        return None
    from refine.evaluate.paper_photos import join, manifest_rows
    from refine.evaluate.references import load_pack

    pack = load_pack()
    joined, _ = join(manifest_rows(manifest), pack)
    wanted = (pack.country_key(country) or country).strip().casefold()
    said = Counter(
        " ".join(str(row.get("prompt_text") or "").split())
        for row, key, phrase in joined
        if key.casefold() == wanted
        and phrase.casefold() == activity.strip().casefold()
        and str(row.get("prompt_language", "")).strip().lower() == "translated"
    )
    said.pop("", None)
    return said.most_common(1)[0][0] if said else None


def language_of(country: str, data: Path | None = None) -> str:
    """The language the country's query is translated into: the one the AHEaD manifest
    names most for the country where its ``prompt_language`` holds language codes, else
    :data:`LANGUAGES`'s. The paper's manifest says only ``english`` or ``translated``
    there, which name no language: they are never read as one."""
    manifest = _manifest(data)
    if manifest.is_file():
        from collections import Counter

        from refine.evaluate.paper_photos import manifest_rows

        key = country.upper().replace(" ", "_")
        used = Counter(
            str(r.get("prompt_language", "")).strip().lower()
            for r in manifest_rows(manifest)
            if str(r.get("country", "")).upper() == key
        )
        codes = {c: n for c, n in used.items() if c in CODES and c != "en"}
        if codes:
            return CODES[max(codes, key=lambda c: codes[c])]
    for name, language in LANGUAGES.items():
        if name.casefold() == country.strip().casefold():
            return language
    from refine.evaluate.references import suggest

    near = suggest(country.strip(), list(LANGUAGES))
    if near:  # most likely a misspelling of a country known here
        raise SearchError(
            f"no country {country!r} known here{near} (for a country not listed, give the "
            "language to search in with --language)"
        )
    raise SearchError(
        f"no language known for {country!r}: give the language to search in with --language "
        "(English alone: --language English)"
    )


def translate(llm: Any, text: str, language: str) -> str:
    """``text`` in ``language``, by the profile's language model (the toolkit's translation
    prompt, ``assets/prompts/translate.txt``)."""
    from refine.assets import prompt_template

    prompt = prompt_template("translate").format(language=language, text=text)
    answer = llm.complete_json(prompt, Translation)
    out = answer.translation.strip()
    if not out:
        raise SearchError(f"the language model gave an empty translation of {text!r}")
    return out


def query(text: str, api: str, limit: int, language: str) -> list[Candidate]:
    """The first ``limit`` image files Commons finds for ``text``, in its order."""
    params = {
        "action": "query",
        "format": "json",
        "formatversion": "2",
        "generator": "search",
        "gsrsearch": text,
        "gsrnamespace": "6",  # files
        "gsrlimit": str(limit * 2),  # some results are not photos
        "prop": "imageinfo",
        "iiprop": "url|mime|extmetadata",
        "iiurlwidth": "1024",
        "iiextmetadatafilter": "LicenseShortName|LicenseUrl|Artist",
    }
    body = _get(f"{api}?{urllib.parse.urlencode(params)}")
    try:
        doc = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise SearchError(
            f"the search answer from {api} is not JSON: {body[:80]!r}; is --from the "
            "address of a MediaWiki API (…/w/api.php)?"
        ) from None
    if not isinstance(doc, dict):
        raise SearchError(f"the search answer from {api} is a {type(doc).__name__}, not an object")
    if "error" in doc:
        error = doc["error"] if isinstance(doc["error"], dict) else {"info": doc["error"]}
        raise SearchError(f"Wikimedia Commons refused the search: {error.get('info')}")
    query_part = doc.get("query") if isinstance(doc.get("query"), dict) else {}
    pages = query_part.get("pages") or []
    if isinstance(pages, dict):  # formatversion 1
        pages = list(pages.values())
    if not isinstance(pages, list):
        raise SearchError(f"the search answer from {api} lists no pages")
    pages = [p for p in pages if isinstance(p, dict)]  # anything else is not a result

    def index(page: dict) -> float:
        value = page.get("index", 0)
        return value if isinstance(value, int | float) else 0

    out = []
    for page in sorted(pages, key=index):
        infos = page.get("imageinfo")
        info = infos[0] if isinstance(infos, list) and infos else {}
        if not isinstance(info, dict) or info.get("mime") not in IMAGE_MIMES:
            continue
        meta = info.get("extmetadata") if isinstance(info.get("extmetadata"), dict) else {}
        out.append(
            Candidate(
                title=str(page.get("title", "")),
                url=str(info.get("thumburl") or info.get("url") or ""),
                page=str(info.get("descriptionurl", "")),
                licence=_text(meta, "LicenseShortName") or "unknown",
                licence_url=_text(meta, "LicenseUrl"),
                author=_text(meta, "Artist") or "unknown",
                query_language=language,
                rank=len(out) + 1,
            )
        )
        if len(out) == limit:
            break
    return out


def search_photos(
    activity: str,
    country: str,
    llm: Any,
    embedder: Any,
    api: str = API,
    data: Path | None = None,
    language: str | None = None,
    english_query: str | None = None,
    keep: int = KEEP,
    per_query: int = PER_QUERY,
    emit: Callable[[str], None] | None = None,
    limits: Any = None,
) -> Any:
    """Search, score and keep the photo set of ``activity`` in ``country`` (see the module
    docstring), each photo downloaded under ``limits``
    (:class:`refine.io.download.DownloadLimits`); returns it
    (:class:`refine.evaluate.photo_sets.PhotoSet`). A search made again replaces the set."""
    from refine.evaluate.paper_photos import fetch_image
    from refine.evaluate.photo_sets import SET_FILE, searched, set_folder
    from refine.io.download import DownloadLimits
    from refine.io.files import atomic_write_json
    from refine.io.images import ImageError, small_rgb

    emit = emit or (lambda line: None)
    limits = limits or DownloadLimits()
    asked_language = language
    language = language or language_of(country, data)
    english = english_query or f"{activity} {country}"
    queries = [("English", english)]
    # the paper's own translated query where the manifest has it (unless another language
    # or English words were asked for); else the profile's language model translates
    theirs = None if asked_language or english_query else manifest_query(activity, country, data)
    if theirs is not None:
        emit(f"the AHEaD manifest's translated query for {activity} in {country}: {theirs!r}")
        queries.append((language, theirs))
    elif language.casefold() != "english":
        queries.append((language, translate(llm, english, language)))
    found: dict[str, Candidate] = {}
    for lang, text in queries:
        emit(f"searching Wikimedia Commons in {lang}: {text!r}")
        for c in query(text, api, per_query, lang):
            found.setdefault(c.url, c)
    if not found:
        raise SearchError(
            f"Wikimedia Commons has no photos for {english!r}"
            + (f" or {queries[1][1]!r}" if len(queries) > 1 else "")
            + ": try other words with --query"
        )
    folder = set_folder(activity, country, data)
    scratch = folder / ".candidates"
    scratch.mkdir(parents=True, exist_ok=True)
    images, kept, dead = [], [], []
    for i, c in enumerate(found.values(), 1):
        target = scratch / _file_name(c.url)
        why = None if target.is_file() else fetch_image(c.url, target, limits)
        if not why:
            try:  # decoded small: the declared size is checked before any decoding
                images.append(small_rgb(target))
            except (ImageError, OSError) as err:
                why = str(err)
                target.unlink(missing_ok=True)
        if why:
            dead.append({"url": c.url, "reason": why})
        else:
            kept.append((c, target))
        emit(f"[{i}/{len(found)}] downloaded {len(kept)}, {len(dead)} dead")
    if not kept:
        raise SearchError(f"none of the {len(found)} photos found could be downloaded: {dead[0]}")
    prompt = english_prompt(activity, country)
    cos = (embedder.encode_images(images) @ embedder.encode_texts([prompt]).T)[:, 0]
    scores = [clipscore(float(c)) for c in cos.tolist()]
    order = sorted(range(len(kept)), key=lambda k: (-scores[k], k))[:keep]
    photos = []
    for k in order:
        c, target = kept[k]
        final = folder / target.name
        target.replace(final)
        photos.append(
            {
                "file": final.name,
                "sha256": hashlib.sha256(final.read_bytes()).hexdigest(),
                "title": c.title,
                "url": c.url,
                "page": c.page,
                "licence": c.licence,
                "licence_url": c.licence_url,
                "author": c.author,
                "query_language": c.query_language,
                "clipscore": scores[k],
            }
        )
    atomic_write_json(
        folder / SET_FILE,
        {
            "schema": 1,
            "activity": activity,
            "country": country,
            "source": api,
            "made": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "queries": [{"language": lang, "text": text} for lang, text in queries],
            "prompt": prompt,
            "scored_by": getattr(embedder, "id", type(embedder).__name__),
            "score": "CLIPScore (Hessel et al.): 2.5 x max(cos, 0)",
            "considered": len(kept),
            "dead": dead,
            "photos": photos,
        },
    )
    keep_names = {p["file"] for p in photos} | {SET_FILE}
    for old in folder.iterdir():  # the photos of an earlier search, and the rest
        if old.is_file() and old.name not in keep_names:
            old.unlink()
    for left in scratch.iterdir():
        left.unlink()
    scratch.rmdir()
    got = searched(activity, country, data)
    assert got is not None
    return got


def clipscore(cos: float) -> float:
    """CLIPScore as Hessel et al. define it: 2.5 x max(cos, 0)."""
    return 2.5 * max(cos, 0.0)


def _file_name(url: str) -> str:
    ext = Path(urllib.parse.urlparse(url).path).suffix.lower()
    ext = ext if ext in (".jpg", ".jpeg", ".png", ".webp") else ".jpg"
    return hashlib.sha1(url.encode()).hexdigest()[:16] + ext


def _text(meta: dict, key: str) -> str:
    """An extmetadata value as plain text (Commons gives the author as HTML): tags
    removed, entities read, and no ``<`` or ``>`` left, so an escaped tag
    (``&lt;script&gt;``) is not stored as one."""
    entry = meta.get(key)
    value = str(entry.get("value", "") if isinstance(entry, dict) else "")
    for _ in range(3):  # an entity that spells a tag, or one escaped twice
        value = html.unescape(re.sub(r"<[^>]*>", "", value))
    return " ".join(value.replace("<", " ").replace(">", " ").split())[:300]


def _get(url: str) -> bytes:
    """``url``'s body (an API answer: at most :data:`MAX_ANSWER_MB`), tried :data:`TRIES`
    times (waiting 1 s, then 2 s) when the server is busy or the network fails."""
    from refine.evaluate.paper_photos import USER_AGENT
    from refine.io.download import DownloadError, download

    try:
        return download(
            url,
            max_mb=MAX_ANSWER_MB,
            timeout_s=60.0,
            headers={"User-Agent": USER_AGENT},
            tries=TRIES,
            sleep=lambda s: time.sleep(s),
        )
    except DownloadError as err:
        if str(err).startswith("cannot connect"):
            raise SearchError(
                f"cannot reach {url.split('?')[0]}: {err}; check the network, or name a "
                "mirror with --from"
            ) from None
        raise SearchError(f"{url.split('?')[0]}: {err}") from None
