"""Fetching a profile's model weights ahead of time (``refine models download``), so that a
run, or a machine without internet later, finds them in the Hugging Face cache.

Hub models (``diffusers:``, ``img2img:``, ``inpaint:``, ``hf:``, ``siglip:``, ``hfclip:``) are
fetched whole with ``huggingface_hub.snapshot_download`` (at the ``revision`` the profile
names, if any);
open_clip weights (``clip:ARCH/TAG``) with open_clip's own download of that tag. API models
(``gemini:``), the bundled MiniLM and local paths need nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from refine.backends.imports import require
from refine.backends.lora import lora_source, split_adapters
from refine.backends.registry import is_remote, split_name

HUB_PREFIXES = ("diffusers", "img2img", "inpaint", "hf", "siglip", "hfclip")


@dataclass
class Fetched:
    role: str
    name: str
    status: str  # downloaded, cached, skipped, failed
    detail: str = ""


def plan(names: dict[str, str]) -> list[tuple[str, str, str]]:
    """(roles, name, what to do) per distinct model: ``hub``, ``clip`` or why it is skipped."""

    seen: dict[str, list[str]] = {}
    for role, name in names.items():
        seen.setdefault(name, []).append(role)
    out = []
    for name, roles in seen.items():
        prefix, rest = split_name(roles[0], name)
        if is_remote(roles[0], name):
            what = "skip: an API model"
        elif prefix == "st":
            what = "skip: bundled" if rest == "all-MiniLM-L6-v2" else "hub"
        elif Path(rest).exists():
            what = "skip: a local path"
        elif prefix == "clip":
            what = "clip"
        elif prefix == "clip-t5":
            what = "clip-t5"
        elif prefix in HUB_PREFIXES:
            what = "hub"
        else:
            what = f"skip: no download for {prefix}:"
        out.append((", ".join(roles), name, what))
    return out


def download(
    names: dict[str, str],
    options: dict[str, dict[str, Any]] | None = None,
    progress: Callable[[str], None] | None = None,
    on_bytes: Callable[[str, int, int], None] | None = None,
) -> list[Fetched]:
    """Fetch every model of ``names`` (role -> backend name); failures are reported per
    model, the others still fetched. ``on_bytes(name, done, total)`` follows a hub
    model's bytes as they arrive."""

    options = options or {}
    say = progress or (lambda text: None)
    results = []
    for roles, name, what in plan(names):
        role = roles.split(", ")[0]
        if what.startswith("skip"):
            results.append(Fetched(roles, name, "skipped", what.removeprefix("skip: ")))
            continue
        _, rest = split_name(role, name)
        say(f"fetching {name} ({roles}) ...")
        try:
            if what == "clip":
                detail = _clip(rest)
            elif what == "clip-t5":
                detail = _clip_t5(rest, options.get(role, {}))
            else:
                base, adapters = split_adapters(rest)
                repo = base.split("@", 1)[0]
                revision = options.get(role, {}).get("revision")
                follow = None if on_bytes is None else (lambda d, t, n=name: on_bytes(n, d, t))
                detail = hub_snapshot(repo, revision, follow)
                for adapter, _ in adapters:  # a LoRA on the hub: its file, or its repository
                    where, weight = lora_source(adapter)
                    if weight is not None:
                        hub_file(where, weight)
                    elif not Path(where).exists():
                        hub_snapshot(where, None)
            results.append(Fetched(roles, name, "downloaded", detail))
        except Exception as err:  # reported per model
            results.append(Fetched(roles, name, "failed", f"{type(err).__name__}: {err}"))
    return results


def cached(repo: str, revision: str | None = None) -> bool:
    """Whether the hub model is in the local cache already (nothing is asked online)."""
    from huggingface_hub import snapshot_download

    try:
        snapshot_download(repo_id=repo, revision=revision, local_files_only=True)
    except Exception:  # not there, or only part of it
        return False
    return True


def missing(
    names: dict[str, str], options: dict[str, dict[str, Any]] | None = None
) -> dict[str, str]:
    """The roles of ``names`` whose weights would be fetched first: hub and open_clip
    models not in the local cache (API models, the bundled MiniLM and local paths are
    never missing). Nothing is asked online."""
    options = options or {}
    out = {}
    for roles, name, what in plan(names):
        role = roles.split(", ")[0]
        rest = split_name(role, name)[1]
        if what == "hub":
            base = split_adapters(rest)[0]
            there = cached(base.split("@", 1)[0], options.get(role, {}).get("revision"))
        elif what == "clip":
            there = clip_cached(rest)
        else:
            continue
        if not there:
            out.update(dict.fromkeys(roles.split(", "), name))
    return out


def clip_cached(rest: str) -> bool:
    """Whether open_clip's weights ``ARCH/TAG`` are in the local cache: the hub file
    open_clip would fetch (its own choice: the hub copy where the tag has one), else the
    file downloaded from the tag's address. An unknown pair counts as cached: the load
    check names it."""
    arch, _, tag = rest.partition("/")
    try:
        open_clip = require("open_clip", "open_clip_torch", "the clip: embedders")
        cfg = open_clip.pretrained.get_pretrained_cfg(arch, tag) or {}
    except ImportError:
        return True
    hub, url = cfg.get("hf_hub") or "", cfg.get("url") or ""
    if hub:
        from huggingface_hub import try_to_load_from_cache

        parts = hub.strip("/").split("/")
        repo, given = "/".join(parts[:2]), "/".join(parts[2:])
        files = [given] if given else ["open_clip_model.safetensors", "open_clip_pytorch_model.bin"]
        return any(isinstance(try_to_load_from_cache(repo, f), str) for f in files)
    if url:
        return (Path.home() / ".cache" / "clip" / Path(url).name).is_file()
    return True


def hub_unreachable(timeout_s: float = 3.0, endpoint: str | None = None) -> str | None:
    """Why the model hub (``endpoint``, else ``HF_ENDPOINT``, else huggingface.co) cannot
    be reached, asked once with a short time limit; None when it answers (any HTTP
    status). A fetch would otherwise retry each file for about 23 s before giving up
    (huggingface_hub's backoff of 1, 2, 4, 8 and 8 s), measured as 46 to 50 s for one
    open_clip model."""
    import httpx
    from huggingface_hub import constants

    endpoint = (endpoint or constants.ENDPOINT).rstrip("/")
    if constants.HF_HUB_OFFLINE:
        return f"the model hub {endpoint} is not asked: HF_HUB_OFFLINE is set"
    try:
        httpx.head(endpoint + "/api/models", timeout=timeout_s, follow_redirects=False)
    except (httpx.HTTPError, httpx.InvalidURL) as err:
        return f"the model hub {endpoint} cannot be reached ({type(err).__name__}: {err})"
    return None


def hub_file(repo: str, filename: str) -> str:
    """One file of a hub repository (a LoRA among several, as Qwen-Image-Lightning's)."""
    from huggingface_hub import hf_hub_download

    return str(hf_hub_download(repo_id=repo, filename=filename))


def hub_snapshot(
    repo: str,
    revision: str | None,
    on_bytes: Callable[[int, int], None] | None = None,
    allow_patterns: list[str] | None = None,
) -> str:
    from huggingface_hub import snapshot_download

    if on_bytes is None:
        return str(
            snapshot_download(repo_id=repo, revision=revision, allow_patterns=allow_patterns)
        )
    from tqdm.auto import tqdm

    class Follow(tqdm):  # huggingface_hub's bar of the bytes received, told as it moves
        def update(self, n: float | None = 1) -> bool | None:
            done = super().update(n)
            if str(self.desc or "").startswith("Downloading"):
                on_bytes(int(self.n), int(self.total or 0))
            return done

    return str(
        snapshot_download(
            repo_id=repo, revision=revision, tqdm_class=Follow, allow_patterns=allow_patterns
        )
    )


def _clip_t5(repo: str, options: dict[str, Any]) -> str:
    """A CLIP-FlanT5 checkpoint, the CLIP vision tower its config names and FlanT5's
    tokenizer (what :class:`refine.backends.clip_t5.ClipT5Judge` loads besides it)."""
    import json

    from refine.backends.clip_t5 import ClipT5Judge

    folder = hub_snapshot(repo, options.get("revision"))
    config = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    tower = options.get("vision_tower") or config.get("mm_vision_tower")
    if tower and not Path(tower).exists():  # its transformers files (no TF or Flax weights)
        hub_snapshot(tower, None, allow_patterns=["*.json", "*.txt", "*.safetensors"])
    source = options.get("tokenizer") or ClipT5Judge(repo, "cpu")._own_tokenizer(folder, config)
    if source != folder and not Path(source).exists():
        hub_snapshot(source, None, allow_patterns=["*.json", "*.model", "*.txt"])
    return folder


def _clip(rest: str) -> str:

    arch, _, tag = rest.partition("/")
    open_clip = require("open_clip", "open_clip_torch", "the clip: embedders")
    cfg = open_clip.pretrained.get_pretrained_cfg(arch, tag)
    if not cfg:
        raise ValueError(f"open_clip knows no weights {tag!r} for {arch!r}")
    return str(open_clip.pretrained.download_pretrained(cfg))
