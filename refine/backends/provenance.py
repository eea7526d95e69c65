"""Which weights a model name meant: the hub commit a name and revision resolve to, and the
licence its card gives, for the records and cards that name a model.

A revision asked for ("main", a tag, nothing) moves; the commit does not. It is read the
way ``huggingface_hub`` itself resolves it: the ``snapshots/<commit>`` folder the local cache
holds for that revision (nothing asked online), else ``model_info(repo, revision).sha``
when the hub can be reached. A model that is a local folder has no hub commit unless the
folder is a cached snapshot; then its repository and commit are read from the path.
Unknown is said as :data:`NO_REVISION` (mteb's word for it), never left blank."""

from __future__ import annotations

import os
import re
from pathlib import Path

NO_REVISION = "no_revision_available"
_SHA = re.compile(r"^[0-9a-f]{40}$")
_SNAPSHOT = re.compile(r"models--([^/]+?)--([^/]+)/snapshots/([0-9a-f]{40})")


def hub_api():
    """``huggingface_hub``'s client for the hub ``HF_ENDPOINT`` names when it is called
    (``huggingface_hub`` reads the variable once, as it is imported), else huggingface.co."""
    from huggingface_hub import HfApi, constants

    return HfApi(endpoint=(os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/"))


def weights_of(info: dict[str, str]) -> str:
    """The weights a backend's recorded info names: a local model's commit, an API
    model's ``model_version``, else :data:`NO_REVISION`."""
    return info.get("commit") or info.get("model_version") or NO_REVISION


def from_snapshot_path(path: str | Path) -> tuple[str, str] | None:
    """(repo id, commit) of a folder inside the hub cache's ``snapshots/``; else None."""
    found = _SNAPSHOT.search(Path(path).as_posix())
    return (f"{found[1]}/{found[2]}", found[3]) if found else None


def hub_commit(repo: str, revision: str | None = None, online: bool = True) -> str:
    """The commit ``repo`` at ``revision`` resolves to, or :data:`NO_REVISION`."""
    if revision and _SHA.match(revision):
        return revision
    if Path(repo).exists():
        snap = from_snapshot_path(Path(repo).resolve())
        return snap[1] if snap else NO_REVISION
    from huggingface_hub import snapshot_download

    try:  # the cache's own answer: refs/<revision> names the snapshot folder
        folder = snapshot_download(repo_id=repo, revision=revision, local_files_only=True)
        return Path(folder).name
    except Exception:  # not cached, or only part of it: ask the hub, if it can be reached
        pass
    if not online:
        return NO_REVISION
    from huggingface_hub.constants import is_offline_mode

    if is_offline_mode():
        return NO_REVISION
    try:
        return hub_api().model_info(repo, revision=revision).sha or NO_REVISION
    except Exception:  # unreachable, unknown, gated: said as unknown, not guessed
        return NO_REVISION


def hub_license(repo: str, commit: str = NO_REVISION) -> str | None:
    """The licence the model card of ``repo`` gives (its YAML ``license``), read from the
    cached card when there is one, else asked of the hub; None when unknown."""
    from huggingface_hub import ModelCard, hf_hub_download

    revision = None if commit == NO_REVISION else commit
    try:
        path = hf_hub_download(repo, "README.md", revision=revision, local_files_only=True)
    except Exception:
        from huggingface_hub.constants import is_offline_mode

        if is_offline_mode():
            return None
        try:
            path = hf_hub_download(repo, "README.md", revision=revision)
        except Exception:
            return None
    try:
        found = ModelCard.load(path).data.license
    except Exception:  # a card whose YAML does not parse names no licence
        return None
    return str(found) if found else None
