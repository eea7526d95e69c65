"""The checkpoints of the baselines scored on local image-text models (PickScore, HPS v2,
CuRe, CAIRE's probe baseline, ImageReward), where each is downloaded from and how it is
loaded, and the readings they give.

Each baseline names its checkpoint (:data:`CHECKPOINTS`, and the catalog entry's
``checkpoint``): a transformers CLIP or SigLIP on the hub (``hfclip``, ``siglip``), or
one file of a hub repository that open_clip loads into an architecture (``clip``).
``--baseline-model NAME=WHERE`` puts a local folder or file, another hub checkpoint or
another embedder (``clip:ARCH/PATH``, ``hfclip:ID``, ``siglip:ID``) in its place (HPS v2.1:
``hpsv2=v2.1``). ``refine models download --baselines NAMES`` fetches them into the
Hugging Face cache with the progress of the profile's models; a run without internet then
finds them there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from PIL import Image

    from refine.backends.download import Fetched


@dataclass(frozen=True)
class Checkpoint:
    """Where a baseline's weights come from: ``kind`` ``hfclip`` (the hub repository
    ``repo`` in the transformers layout, its processor from ``processor`` where it was
    trained with another's) or ``clip`` (the file ``file`` of ``repo``, loaded by open_clip
    into the architecture ``arch``); ``path``: a local folder or file in its place."""

    metric: str
    kind: str
    repo: str
    file: str = ""
    arch: str = ""
    processor: str = ""
    path: str = ""

    def describe(self) -> str:
        if self.path:
            return f"{self.arch}/{self.path}" if self.arch and self.kind == "clip" else self.path
        where = f"{self.repo}/{self.file}" if self.file else self.repo
        return where + (f" (processor {self.processor})" if self.processor else "")


CHECKPOINTS: dict[str, Checkpoint] = {
    # PickScore v1: a CLIP-H fine-tuned on Pick-a-Pic, with CLIP-H's own processor
    "pickscore": Checkpoint(
        "pickscore",
        "hfclip",
        "yuvalkirstain/PickScore_v1",
        processor="laion/CLIP-ViT-H-14-laion2B-s32B-b79K",
    ),
    # HPS v2 (v2.1 with hpsv2=v2.1): open_clip's ViT-H-14 with the authors' weights
    "hpsv2": Checkpoint("hpsv2", "clip", "xswu/HPSv2", "HPS_v2_compressed.pt", "ViT-H-14"),
    # CuRe as AHEaD A.4 runs it: SigLIP 2 (AHEaD names no size; the largest fixed-size one)
    "cure": Checkpoint("cure", "siglip", "google/siglip2-so400m-patch14-384"),
    # CAIRE's Baseline 1 (Sec. 5.1): CLIP ViT-B/32 (the paper's mSigLIP, footnote 4, with
    # caire_probe=siglip:google/siglip-so400m-patch16-256-i18n)
    "caire_probe": Checkpoint("caire_probe", "hfclip", "openai/clip-vit-base-patch32"),
    # ImageReward v1.0: the authors' BLIP checkpoint, BERT's tokenizer with BLIP's tokens
    "imagereward": Checkpoint(
        "imagereward",
        "imagereward",
        "THUDM/ImageReward",
        "ImageReward.pt",
        processor="google-bert/bert-base-uncased",
    ),
}
# the file beside ImageReward.pt that sizes its text encoder
MED_CONFIG = "med_config.json"
_REWARDS: dict[tuple, Any] = {}
# the local path of each hub file found this process, by (repo, file)
_FILES: dict[tuple[str, str], str] = {}
# the baselines whose formula reads a CLIP's logit scale
NEEDS_SCALE = ("pickscore",)
# the baselines whose images are made square as their authors' code makes them: the
# longest side resized to the model's size, then padded with black (HPS v2's
# ResizeMaxSize), not cropped
LETTERBOXED = ("hpsv2",)
# the other checkpoints a baseline may be given by a short name
VERSIONS = {("hpsv2", "v2.1"): {"file": "HPS_v2.1_compressed.pt"}}
# the processor files a CLIP's tokenizer and image transform need (not its weights)
PROCESSOR_FILES = ["*.json", "*.txt"]


def parse_baseline_models(values: Iterable[str]) -> dict[str, Checkpoint]:
    """``NAME=WHERE`` items (``--baseline-model``) -> the checkpoints in place of the
    defaults: WHERE a local folder or file, a hub repository (``owner/name``, for a CLIP
    in the transformers layout), ``owner/name/FILE`` (an open_clip file) or a version's
    short name (``hpsv2=v2.1``), or an image embedder's name (``clip:ARCH/PATH``,
    ``hfclip:ID``: another architecture). A ValueError names an item that is none of these."""
    out: dict[str, Checkpoint] = {}
    for item in values:
        name, sep, where = item.partition("=")
        name, where = name.strip(), where.strip()
        if not sep or not where:
            raise ValueError(f"{item!r}: use NAME=WHERE (a local path or a hub checkpoint)")
        if name not in CHECKPOINTS:
            raise ValueError(
                f"{item!r}: {name!r} is no baseline with a checkpoint of its own (those: "
                f"{', '.join(CHECKPOINTS)})"
            )
        base = CHECKPOINTS[name]
        kind, colon, rest = where.partition(":")
        if colon and kind in ("clip", "hfclip", "siglip") and rest:  # an embedder's own name
            arch, _, file = rest.partition("/") if kind == "clip" else ("", "", rest)
            if kind == "clip" and not (arch and file):
                raise ValueError(f"{item!r}: use clip:ARCH/PATH for an open_clip checkpoint")
            if kind != "clip" and not Path(file).expanduser().exists():
                out[name] = replace(base, kind=kind, arch="", repo=file, file="", processor="")
            else:
                out[name] = replace(base, kind=kind, arch=arch, path=file, repo="", file="")
        elif (name, where) in VERSIONS:
            out[name] = replace(base, **VERSIONS[(name, where)])
        elif Path(where).expanduser().exists():
            out[name] = replace(base, path=str(Path(where).expanduser().resolve()))
        elif base.kind == "clip" and where.count("/") >= 2:
            repo, _, file = where.rpartition("/")
            out[name] = replace(base, repo=repo, file=file)
        elif base.kind in ("hfclip", "siglip", "imagereward") and where.count("/") == 1:
            out[name] = replace(base, repo=where)
        else:
            want = "owner/name/FILE" if base.kind == "clip" else "owner/name"
            raise ValueError(f"{item!r}: {where!r} is no local path and no hub checkpoint ({want})")
    for name, ck in out.items():
        if name in NEEDS_SCALE and ck.kind == "siglip":
            raise ValueError(
                f"{name}={ck.describe()}: {name} is a CLIP's logit scale times its cosine, and "
                "a SigLIP has no such scale; give a CLIP (clip:ARCH/PATH, hfclip:ID)"
            )
    return out


def checkpoint(name: str, given: Mapping[str, Checkpoint] | None = None) -> Checkpoint:
    """The checkpoint the baseline ``name`` is scored with: the one given, else its own."""
    return (given or {}).get(name) or CHECKPOINTS[name]


def embedder(ck: Checkpoint, device: str | None = None) -> Any:
    """The image embedder that loads ``ck`` (shared: one copy per process). An open_clip
    file not in the cache is fetched from the hub first (offline: the error says how to
    fetch it where there is internet)."""
    from refine.backends import create

    options: dict[str, Any] = {} if device is None else {"device": device}
    if ck.kind == "hfclip":
        own = ck.path and any(  # a folder with a processor of its own (either layout)
            (Path(ck.path) / f).is_file()
            for f in ("preprocessor_config.json", "processor_config.json")
        )
        if ck.processor and not own:  # a folder without a processor of its own: the one named
            options["processor"] = ck.processor
        return create("image_embedder", f"hfclip:{ck.path or ck.repo}", **options)
    if ck.kind == "siglip":
        return create("image_embedder", f"siglip:{ck.path or ck.repo}", **options)
    if ck.kind == "imagereward":
        return image_reward(ck, device)
    return create("image_embedder", f"clip:{ck.arch}/{ck.path or fetch_file(ck)}", **options)


def image_reward(ck: Checkpoint, device: str | None = None) -> Any:
    """The ImageReward model of ``ck`` (one copy per process and device): a local folder
    holding ImageReward.pt and med_config.json (and BERT's vocab.txt, else the tokenizer
    named), or the hub's files, fetched into the cache when missing."""
    from refine.backends.image_reward import ImageReward

    if ck.path:
        folder = Path(ck.path)
        weights, med = folder / ck.file, folder / MED_CONFIG
        for f in (weights, med):
            if not f.is_file():
                raise ValueError(f"{folder}: no {f.name} (an ImageReward folder holds both)")
        tokenizer = str(folder) if (folder / "vocab.txt").is_file() else ck.processor
    else:
        weights = Path(fetch_file(ck))
        med = Path(fetch_file(replace(ck, file=MED_CONFIG)))
        tokenizer = ck.processor
    key = (str(weights), str(med), tokenizer, device)
    if key not in _REWARDS:
        _REWARDS[key] = ImageReward(str(weights), str(med), tokenizer, device)
    return _REWARDS[key]


def fetch_file(ck: Checkpoint, on_bytes: Callable[[int, int], None] | None = None) -> str:
    """The local path of an open_clip checkpoint file, downloaded into the Hugging Face
    cache if it is not there (its bytes told to ``on_bytes``)."""
    from huggingface_hub import hf_hub_download

    from refine.backends.loading import load_or_explain

    key = (ck.repo, ck.file)
    if on_bytes is None and key in _FILES:  # found once: no hub request per batch scored
        return _FILES[key]
    kwargs: dict[str, Any] = {"repo_id": ck.repo, "filename": ck.file}
    if on_bytes is not None:
        kwargs["tqdm_class"] = _follow(on_bytes)
    _FILES[key] = load_or_explain(f"{ck.repo}/{ck.file}", lambda: hf_hub_download(**kwargs))
    return _FILES[key]


def download(
    names: Sequence[str],
    given: Mapping[str, Checkpoint] | None = None,
    on_bytes: Callable[[str, int, int], None] | None = None,
) -> list[tuple[str, str]]:
    """Fetch the checkpoints of the baselines ``names`` into the Hugging Face cache:
    (baseline, where it is) each, in order. A transformers CLIP is fetched whole, with
    only the processor files of another repository it names."""
    from refine.backends.download import hub_snapshot

    out = []
    for name in names:
        ck = checkpoint(name, given)
        follow = None if on_bytes is None else (lambda d, t, n=name: on_bytes(n, d, t))
        if ck.path:
            out.append((name, ck.path))
        elif ck.kind == "clip":
            out.append((name, fetch_file(ck, follow)))
        elif ck.kind == "imagereward":
            where = fetch_file(ck, follow)
            fetch_file(replace(ck, file=MED_CONFIG))
            hub_snapshot(ck.processor, None, None, PROCESSOR_FILES)
            out.append((name, where))
        else:
            where = hub_snapshot(ck.repo, None, follow)
            if ck.processor:
                hub_snapshot(ck.processor, None, None, PROCESSOR_FILES)
            out.append((name, where))
    return out


def fetch_reported(
    names: list[str], given: dict[str, Any] | None = None, progress: Callable | None = None
) -> list[Fetched]:
    """:func:`download` of the baselines ``names``, each reported as ``refine models
    download`` reports a profile's model (:class:`refine.backends.download.Fetched`)."""
    from refine.backends.download import Fetched

    say = progress or (lambda text: None)
    out = []
    for name in names:
        ck = checkpoint(name, given)
        say(f"fetching {ck.describe()} (baseline {name}) ...")
        try:
            ((_, where),) = download([name], given)
            status = "skipped" if ck.path else "downloaded"
            out.append(Fetched(f"baseline {name}", ck.describe(), status, where))
        except Exception as err:  # reported per model
            out.append(Fetched(f"baseline {name}", ck.describe(), "failed", f"{err}"))
    return out


def _follow(on_bytes: Callable[[int, int], None]) -> Any:
    from tqdm.auto import tqdm

    class Follow(tqdm):  # the download's bar of bytes, told as it moves
        def update(self, n: float | None = 1) -> bool | None:
            done = super().update(n)
            on_bytes(int(self.n), int(self.total or 0))
            return done

    return Follow


@dataclass(frozen=True)
class ModelReading:
    """One image's reading of a baseline's model: the cosine of its embedding and each
    text's (:func:`texts`, in order), and the model's logit scale (its learned
    temperature; None for a SigLIP, whose baselines use none)."""

    cosines: tuple[float, ...]
    logit_scale: float | None
    model: str
    reward: float | None = None  # a reward model's own score (ImageReward)

    @property
    def cosine(self) -> float:
        """The cosine with the first (for PickScore and HPS v2, the only) text."""
        return self.cosines[0]


def letterbox(image: Image.Image, size: int) -> Image.Image:
    """``image`` made ``size`` x ``size`` as HPS v2's code makes it: its longest side
    resized to ``size`` (bicubic), then padded with black on both sides of the shorter
    one. A square of that size passes a CLIP's resize and centre crop unchanged."""
    from PIL import Image as PILImage

    image = image.convert("RGB")
    w, h = image.size
    scale = size / max(w, h)
    new = (max(1, round(w * scale)), max(1, round(h * scale)))
    resized = image.resize(new, PILImage.Resampling.BICUBIC) if new != (w, h) else image
    out = PILImage.new("RGB", (size, size), (0, 0, 0))
    out.paste(resized, ((size - new[0]) // 2, (size - new[1]) // 2))
    return out


def _reward_class() -> type:
    from refine.backends.image_reward import ImageReward

    return ImageReward


def texts(name: str, prompt: str, activity: str, country: str) -> list[str]:
    """The texts the baseline ``name`` sets each image against: the generation prompt
    (PickScore, HPS v2); CuRe's two as AHEaD A.4 runs it ("An image of {activity}", "An
    image from {country}"); CAIRE's five probes for the country (Sec. 5.1)."""
    from metrics.baselines import CAIRE_LEVELS, CURE_TEXTS

    if name == "cure":
        return [t.format(activity=activity, country=country) for t in CURE_TEXTS]
    if name == "caire_probe":
        return [f"This image is {level} to {country}" for level in CAIRE_LEVELS]
    return [prompt]


def model_readings(
    compare: Sequence[str],
    images: Sequence[Image.Image],
    prompt: str,
    given: Mapping[str, Checkpoint] | None = None,
    device: str | None = None,
    activity: str = "",
    country: str = "",
) -> list[dict[str, ModelReading] | None]:
    """Per image, the readings of the asked-for baselines that have a checkpoint (by
    name); None each when none is asked for."""
    asked = [n for n in CHECKPOINTS if n in compare]
    if not asked:
        return [None] * len(images)
    out: list[dict[str, ModelReading]] = [{} for _ in images]
    for name in asked:
        model = embedder(checkpoint(name, given), device)
        if isinstance(model, _reward_class()):
            for row, r in zip(out, model.score(images, prompt), strict=True):
                row[name] = ModelReading((), None, model.id, r)
            continue
        said = texts(name, prompt, activity, country)
        shown = list(images)
        if name in LETTERBOXED:
            size = model.image_size()
            shown = [letterbox(im, size) for im in images]
        cos = (model.encode_images(shown) @ model.encode_texts(said).T).tolist()
        scale = getattr(model, "logit_scale", None)
        scale = float(scale()) if callable(scale) else None
        for row, c in zip(out, cos, strict=True):
            row[name] = ModelReading(tuple(float(x) for x in c), scale, model.id)
    return list(out)
