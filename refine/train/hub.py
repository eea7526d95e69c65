"""``--push-to-hub REPO`` on ``refine export`` (a dataset repository) and ``refine tune`` (a
model repository): the folder as written, in one commit, with ``huggingface_hub``.

The token is read from its usual places (``HF_TOKEN``, ``hf auth login``'s store); the
repository is created private unless ``public`` is asked, and an existing one is pushed to
as it is (its visibility unchanged). Everything a push needs is checked by
:func:`check_push` before the command's work starts, so a tune of hours does not end in
"no token"."""

from __future__ import annotations

import json
from pathlib import Path

from refine.backends.provenance import hub_api
from refine.io.inputs import InputError

# what a tune's folder holds that is not the adapter's: resumable state, tracker logs
TUNE_IGNORE = ["checkpoint.pt", "refine-tune/**", "*.lock"]


def check_push(repo: str) -> None:
    """InputError naming ``--push-to-hub`` when ``repo`` is not ``owner/name`` or when no
    token can be found; nothing is asked of the hub."""
    from huggingface_hub import get_token
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo)
    except HFValidationError as err:
        raise InputError(f"--push-to-hub: {repo!r} is not a repository id ({err})") from err
    if repo.count("/") != 1:
        raise InputError(f"--push-to-hub: give the repository as OWNER/NAME, not {repo!r}")
    from huggingface_hub.constants import is_offline_mode

    if is_offline_mode():
        raise InputError("--push-to-hub: HF_HUB_OFFLINE is set; unset it to reach the hub")
    if not get_token():
        raise InputError(
            "--push-to-hub: no Hugging Face token (set HF_TOKEN, or run `hf auth login`)"
        )
    me = _whoami()  # the token asked about now, not after hours of work
    role = ((me.get("auth") or {}).get("accessToken") or {}).get("role")
    if role == "read":
        raise InputError("--push-to-hub: the token can only read; give one that can write")


WHOAMI_S = 20.0  # the most the token's check may take, the whole answer


def _whoami() -> dict:
    """The hub's answer about the token, within :data:`WHOAMI_S` for the whole answer (a
    hub that dripped it a byte a second held a push for its 300 s, then the token was
    blamed); an InputError saying which: the hub refused the token, or did not answer."""
    import threading

    from huggingface_hub.errors import HfHubHTTPError

    got: dict = {}

    def ask() -> None:
        try:
            got["me"] = hub_api().whoami()
        except Exception as err:  # said below, in the caller's thread
            got["err"] = err

    asking = threading.Thread(target=ask, name="hub-whoami", daemon=True)
    asking.start()
    asking.join(WHOAMI_S)
    if asking.is_alive():
        raise InputError(
            f"--push-to-hub: the hub ({hub_api().endpoint}) did not answer within "
            f"{WHOAMI_S:g} s; try again later (nothing was done)"
        )
    err = got.get("err")
    if err is None:
        return got["me"]
    said = str(err).splitlines()[0] if str(err) else type(err).__name__
    if isinstance(err, HfHubHTTPError) and err.response is not None:
        if err.response.status_code in (401, 403):
            raise InputError(f"--push-to-hub: the hub did not accept the token ({said})") from err
    raise InputError(f"--push-to-hub: the hub could not be asked about the token ({said})") from err


def push(
    folder: Path,
    repo: str,
    repo_type: str,
    message: str,
    public: bool = False,
    ignore: list[str] | None = None,
) -> str:
    """``folder`` as one commit to ``repo``; the commit's address. A refusal of the hub
    (a token without write access, a name taken by someone else) is an InputError naming
    the repository and what the hub said."""
    from huggingface_hub.errors import HfHubHTTPError

    api = hub_api()
    try:
        try:
            api.create_repo(repo, repo_type=repo_type, private=not public, exist_ok=True)
        except (KeyError, json.JSONDecodeError):  # a 409 whose answer names no repository
            # (the client reads its url from the answer, which may be no JSON at all)
            raise InputError(
                f"--push-to-hub: the hub refused to create {repo} (HTTP 409, a conflict: the "
                f"name may be held by a repository of another kind or one being made); "
                f"nothing was pushed; {folder} is kept"
            ) from None
        if not public and not api.repo_info(repo, repo_type=repo_type).private:
            raise InputError(
                f"--push-to-hub: {repo} exists and is public; add --public to push to it "
                f"(nothing was pushed; {folder} is kept)"
            )
        info = api.upload_folder(
            folder_path=str(folder),
            repo_id=repo,
            repo_type=repo_type,
            commit_message=message,
            ignore_patterns=ignore,
        )
    except InputError:
        raise
    # ValueError: the card's metadata refused; RuntimeError: a file's upload failed;
    # OSError and httpx's errors: the hub out of reach
    except Exception as err:
        said = "; ".join(x.strip() for x in str(err).splitlines() if x.strip())
        if err.__cause__ is not None and not isinstance(err, HfHubHTTPError):
            said += f": {str(err.__cause__).splitlines()[0]}"
        again = f"hf upload {repo} {folder} --repo-type {repo_type}" + (
            "" if repo_type == "model" else ""
        )
        raise InputError(
            f"--push-to-hub: {repo} was not pushed ({said or type(err).__name__}); "
            f"{folder} is kept: push it again with `{again}`"
        ) from err
    return str(info.commit_url)
