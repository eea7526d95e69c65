"""A rating study in Argilla 2.x's dataset files (``refine rate export --to argilla`` and
``refine rate import --from argilla``): the folder ``rg.Dataset.to_disk`` writes and
``rg.Dataset.from_disk`` reads, written without a server (Argilla's client needs one to
build even a field).

Going out, ``OUT/`` holds ``.argilla/settings.json`` (the fields, questions, metadata and
task distribution, each as Argilla serialises it), ``.argilla/dataset.json`` (the
dataset's name and guidelines), ``records.json`` (one record per image, its ``id`` the
image's SHA-256, with the judge's readings as suggestions whose ``agent`` is the judge's
name) and ``README.md``. The questions:

* a single choice whose values are the whole numbers of a scale within 0 to 10 is a
  ``RatingQuestion``; another single choice a ``LabelQuestion``; a multiple choice a
  ``MultiLabelQuestion`` (labels: value -> the label shown);
* a question whose choices come from the image (the expectations, SoS's cultures) or
  from the prompt's words is a label question over every image's choices (Argilla's
  labels are the dataset's), each image's own listed in its field ``ID_choices``; an
  answer outside them is refused on import;
* a text answer, and a question's reason (``ID__reason``), a ``TextQuestion``;
* a question asked only after some answers is not required (Argilla has no conditions;
  the protocol's check on import asks what it needs).

Coming back, the folder ``rg.Dataset.to_disk`` wrote after the rating (or its
``records.json``): each user's submitted responses to a record are one answer. Argilla's
records.json names a response's user by id only and keeps neither its status nor its
time: ``responses.json`` beside it (the README's snippet writes it with Argilla's client:
user id -> name, record -> user -> status) names the raters and tells submitted answers
from drafts and discarded ones (left out, and counted); a response without its status is
refused. The client gives no response's time either, so the time is left empty rather
than made up."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

from refine.human.exchange import Outgoing, answer_row, outgoing, read_export
from refine.human.protocols import Question, prompt_words, words
from refine.human.study import Study
from refine.io.files import atomic_write_json, atomic_write_text, file_sha256

REASON = "__reason"
RESPONSES = "responses.json"  # beside records.json: users' names, each response's status
MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp"}


def _scale(q: Question) -> list[int] | None:
    """The whole numbers of a single choice that is a scale within 0 to 10, else None."""
    values = [o.value for o in q.options]
    if q.kind != "single" or not values or not all(re.fullmatch(r"\d{1,2}", v) for v in values):
        return None
    ints = [int(v) for v in values]
    return ints if max(ints) <= 10 and len(set(ints)) == len(ints) else None


def _own_choices(q: Question, o: Outgoing) -> list[str]:
    return prompt_words(o.item.prompt) if q.kind == "marks" else list(o.options.get(q.id, []))


def _question(q: Question, items: list[Outgoing]) -> dict[str, Any] | None:
    """One protocol question as Argilla's settings.json holds a question."""
    dynamic = bool(q.options_from) or q.kind == "marks"
    required = q.required and q.required_if is None and q.show_if is None and not dynamic
    if q.kind == "text":
        settings: dict[str, Any] = {"type": "text", "use_markdown": False}
    elif (ints := _scale(q)) is not None:
        settings = {"type": "rating", "options": [{"value": v} for v in ints]}
    else:
        if dynamic:
            every = [v for o in items for v in _own_choices(q, o)]
            options = [{"value": v, "text": v} for v in dict.fromkeys(every)]
            if not options:
                return None  # no image gives choices: nothing to ask
        else:
            options = [{"value": o.value, "text": o.shown()} for o in q.options]
        kind = "label_selection" if q.kind == "single" else "multi_label_selection"
        settings = {"type": kind, "options": options}
        settings["visible_options"] = len(options) if len(options) >= 3 else None
        if kind == "multi_label_selection":
            settings["options_order"] = "natural"
    description = q.rubric or None
    if dynamic:
        own = "the prompt's words" if q.kind == "marks" else f"those listed in {q.id}_choices"
        description = ((description + " ") if description else "") + f"Choose among {own}."
    return _resource(
        name=q.id, settings=settings, title=words(q.text), description=description,
        required=required, type=settings["type"],
    )  # fmt: skip


def _resource(**given: Any) -> dict[str, Any]:
    return {"id": None, "inserted_at": None, "updated_at": None, "dataset_id": None, **given}


def settings(study: Study, items: list[Outgoing]) -> dict[str, Any]:
    """Argilla's settings.json for the study."""
    p = study.protocol
    fields = [
        _resource(name="image", settings={"type": "image"}, title="Image", required=True,
                  description=None, type="image"),
        _resource(name="prompt", settings={"type": "text", "use_markdown": False},
                  title="Prompt", required=False, description=None, type="text"),
        _resource(name="context", settings={"type": "text", "use_markdown": False},
                  title="What it should show", required=False, description=None, type="text"),
    ]  # fmt: skip
    questions = []
    for q in p.questions:
        asked = _question(q, items)
        if asked is None:
            continue
        questions.append(asked)
        if q.options_from or q.kind == "marks":
            fields.append(
                _resource(name=f"{q.id}_choices", settings={"type": "text", "use_markdown": True},
                          title=f"Choices: {words(q.text)}", required=False, description=None,
                          type="text")
            )  # fmt: skip
        if q.reason != "none" or q.reason_if or q.comment_if:
            questions.append(
                _resource(name=f"{q.id}{REASON}", settings={"type": "text", "use_markdown": False},
                          title=q.reason_label, description=None, required=False, type="text")
            )  # fmt: skip
    metadata = [
        _resource(name=name, settings={"type": "terms", "values": None,
                                       "visible_for_annotators": True},
                  title=name, visible_for_annotators=True, type="terms")
        for name in ("activity", "country", "language")
    ]  # fmt: skip
    guidelines = p.title + (f" ({p.source})" if p.source else "")
    guidelines += f"\n\n{p.instructions}" if p.instructions else ""
    return {
        "guidelines": guidelines,
        "questions": questions,
        "fields": fields,
        "vectors": [],
        "metadata": metadata,
        "allow_extra_metadata": False,
        "distribution": {"strategy": "overlap", "min_submitted": p.raters_per_image or 1},
        "mapping": None,
    }


def _image(study: Study, o: Outgoing, image_url: str | None) -> str:
    if image_url:
        return image_url.rstrip("/") + "/" + quote(o.item.image)
    path = study.folder / o.item.image
    mime = MIME.get(path.suffix.lower(), "image/png")
    return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def record(study: Study, o: Outgoing, image_url: str | None, asked: set[str]) -> dict[str, Any]:
    """One image as an Argilla record (``Record.to_dict``'s layout)."""
    it = o.item
    context = ", ".join(
        f"{k}: {v}" for k, v in (("activity", it.activity), ("country", it.country)) if v
    )
    fields: dict[str, Any] = {
        "image": _image(study, o, image_url),
        "prompt": it.prompt or None,
        "context": context or None,
    }
    for q in study.protocol.questions:
        if (q.options_from or q.kind == "marks") and q.id in asked:
            fields[f"{q.id}_choices"] = "\n".join(f"- {c}" for c in _own_choices(q, o)) or None
    metadata = {
        k: v
        for k, v in (("activity", it.activity), ("country", it.country), ("language", it.language))
        if v  # fmt: skip
    }
    suggestions = {
        r.question: {"value": r.value, "score": r.score, "agent": r.model}
        for r in o.readings
        if r.question in asked
    }
    return {
        "id": o.sha256,
        "fields": {k: v for k, v in fields.items() if v is not None},
        "metadata": metadata,
        "suggestions": suggestions,
        "responses": {},
        "vectors": {},
        "status": "pending",
        "_server_id": None,
    }


def export(study: Study, folder: str | Path, image_url: str | None = None) -> int:
    """The study as the folder ``rg.Dataset.from_disk`` reads; how many records."""
    folder = Path(folder)
    items = outgoing(study)
    config = settings(study, items)
    asked = {q["name"] for q in config["questions"]}
    name = re.sub(r"[^a-z0-9_-]+", "-", f"{study.folder.name}-{study.protocol.name}".lower())
    dataset = _resource(name=name.strip("-") or "study", status="draft",
                        guidelines=config["guidelines"], allow_extra_metadata=False,
                        distribution=config["distribution"], workspace_id=None,
                        last_activity_at=None)  # fmt: skip
    dataset.pop("dataset_id")
    (folder / ".argilla").mkdir(parents=True, exist_ok=True)
    atomic_write_json(folder / ".argilla" / "settings.json", config)
    atomic_write_json(folder / ".argilla" / "dataset.json", dataset)
    atomic_write_json(folder / "records.json", [record(study, o, image_url, asked) for o in items])
    atomic_write_text(
        folder / "README.md",
        f"# {study.protocol.title}: {len(items)} images for Argilla\n\n"
        "Load them into an Argilla server:\n\n```python\nimport argilla as rg\n\n"
        'client = rg.Argilla(api_url="...", api_key="...")\n'
        f'dataset = rg.Dataset.from_disk("{folder}", workspace="...", client=client)\n```\n\n'
        "When they are rated, write them back with the raters' names and each response's "
        "status (Argilla's records.json keeps neither) and join them to the set:\n\n"
        "```python\nimport json\n\n"
        "dataset.to_disk('rated')\n"
        "users = {str(u.id): u.username for u in client.users}\n"
        "status = {str(r.id): {str(a.user_id): getattr(a.status, 'value', a.status)\n"
        "                      for a in r.responses}\n"
        "          for r in dataset.records(with_responses=True)}\n"
        "json.dump({'users': users, 'status': status}, open('rated/responses.json', 'w'))\n"
        "```\n\n"
        f"```\nrefine rate import rated --from argilla --into {study.folder.resolve()}\n```\n",
    )
    return len(items)


def _value(q: Question, value: Any) -> Any:
    """A response's value as the protocol keeps answers: text, or a list of texts."""
    if q.kind in ("multiple", "marks"):
        return [str(v) for v in value] if isinstance(value, list) else [str(value)]
    if q.kind == "text":
        return str(value)
    return str(value) if value is not None else None


def import_rows(study: Study, path: str | Path, joining: Any) -> None:
    """The responses in the folder (or ``records.json``) Argilla's ``to_disk`` wrote,
    taken into ``joining``."""
    path = Path(path)
    records_path = path / "records.json" if path.is_dir() else path
    doc = read_export(records_path)
    if not isinstance(doc, list):
        raise ValueError(f"{records_path}: not Argilla's records (a list of records)")
    names, status = _responses_file(records_path.parent / RESPONSES)
    questions = {q.id: q for q in study.protocol.questions}
    by_sha = {file_sha256(study.folder / it.image): it.image for it in study.set.items}
    for k, rec in enumerate(doc):
        if not isinstance(rec, dict):
            joining.problems.append(f"{records_path}: entry {k} is not a record")
            continue
        mapped = by_sha.get(str(rec.get("id") or ""))
        per_user: dict[str, tuple[dict[str, Any], dict[str, str]]] = {}
        responses = rec.get("responses") if isinstance(rec.get("responses"), dict) else {}
        rid = str(rec.get("id"))
        for qname, given in responses.items():
            for response in given if isinstance(given, list) else []:
                if not isinstance(response, dict):
                    continue
                user = response.get("user_id")
                if not user:
                    joining.problems.append(
                        f"{records_path}: record {rid[:16]}: a response names no user (user_id)"
                    )
                    continue
                said = status.get(rid, {}).get(str(user))
                if said is None:
                    joining.problems.append(
                        f"{records_path}: record {rid[:16]}, user {user}: no status in "
                        f"{RESPONSES} (write it with the export's README snippet)"
                    )
                    continue
                if said != "submitted":  # a draft or a discarded answer is no rating
                    joining.done.left += 1
                    continue
                answers, reasons = per_user.setdefault(str(user), ({}, {}))
                if qname.endswith(REASON) and qname.removesuffix(REASON) in questions:
                    reasons[qname.removesuffix(REASON)] = str(response.get("value") or "")
                elif qname in questions:
                    answers[qname] = _value(questions[qname], response.get("value"))
        for user, (answers, reasons) in per_user.items():
            where = f"{records_path}: record {str(rec.get('id'))[:16]}, user {user}"
            if mapped is None:
                joining.take(where, {"image": rec.get("id")}, None)
                continue
            item = study.set.item(mapped)
            options = study.item_options(item)
            try:
                kept, why = study.protocol.check(answers, reasons, options, item.prompt)
            except ValueError as err:
                joining.problems.append(f"{where}: {err}")
                continue
            rater = names.get(user) or f"argilla-user-{user}"
            row = answer_row(study, mapped, rater, kept, why, "", options, "argilla")
            joining.take(where, row, mapped)


def _responses_file(path: Path) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """``responses.json`` (the README's snippet writes it): user id -> name, and record id
    -> user id -> the response's status; empty when absent (then every response is
    refused for want of its status). A file of another shape is a ValueError naming it."""
    if not path.is_file() or path.is_symlink():
        return {}, {}
    doc = read_export(path)
    users = doc.get("users") if isinstance(doc, dict) else None
    status = doc.get("status") if isinstance(doc, dict) else None
    if not isinstance(users, dict) or not isinstance(status, dict):
        raise ValueError(f"{path}: not an object with users and status (see the README)")
    per = {
        str(r): {str(u): str(v) for u, v in given.items()}
        for r, given in status.items()
        if isinstance(given, dict)
    }
    return {str(k): str(v) for k, v in users.items()}, per
