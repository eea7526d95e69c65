"""``--push-to-hub REPO`` on ``refine export`` (a dataset repository) and ``refine tune`` (a
model repository): the folder as written, in one commit, with ``huggingface_hub``.

The token is read from its usual places (``HF_TOKEN``, ``hf auth login``'s store); the
repository is created private unless ``public`` is asked, and an existing one is pushed to
as it is (its visibility unchanged). Everything a push needs is checked by
:func:`check_push` before the command's work starts, so a tune of hours does not end in
"no token"."""

from __future__ import annotations

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
    try:  # the token asked about now, not after hours of work
        me = hub_api().whoami()
    except Exception as err:  # refused, or the hub out of reach: said in one line
        said = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise InputError(f"--push-to-hub: the hub did not accept the token ({said})") from err
    role = ((me.get("auth") or {}).get("accessToken") or {}).get("role")
    if role == "read":
        raise InputError("--push-to-hub: the token can only read; give one that can write")


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
        api.create_repo(repo, repo_type=repo_type, private=not public, exist_ok=True)
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
