"""A rating study in Label Studio's formats (``refine rate export --to label-studio`` and
``refine rate import --from label-studio``).

Going out, ``OUT/`` holds:

* ``config.xml``, the labelling config: the prompt (``<Header>``), the image
  (``<Image name="image">``) and each question of the protocol in order: its text as a
  ``<Header>`` (filled for each image: ``$q_ID``), a single or multiple choice
  (``<Choices>``, each ``<Choice>`` showing the option's label and keeping its value as
  ``alias``), the item's own choices for questions whose choices come from the item or
  the prompt's words (dynamic choices, ``value="$ID_options"``), a ``<TextArea>`` for a
  text answer and one for a question's reason (``ID__reason``); a question shown only
  after some answers is in a ``<View visibleWhen="choice-selected">``;
* ``tasks.json``, one task per image: ``data`` (the image's address, the prompt, the
  filled texts, the dynamic choices, and the image's path and SHA-256 in the set, which
  bring its answers back), ``meta`` (what it shows) and ``predictions``: the judge's
  readings (:mod:`refine.human.exchange`), each with the judge's name as
  ``model_version``;
* ``README.md``: how to import them.

The image's address is ``/data/local-files/?d=PATH`` (Label Studio's local files, served
from the set's folder as its document root) unless ``image_url`` gives a prefix the
images are served under.

Coming back, Label Studio's JSON export (a list of tasks, each with its ``annotations``):
every annotation not cancelled is one answer, by its ``completed_by`` (a user object's
email, else ``label-studio-user-ID``) at its ``updated_at`` (else ``created_at``), with
its ``lead_time`` kept as ``lead_time_s``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any
from urllib.parse import quote
from xml.sax.saxutils import quoteattr

from refine.human.exchange import Outgoing, answer_row, outgoing, read_export
from refine.human.protocols import Question, prompt_words
from refine.human.study import Study
from refine.io.files import atomic_write_json, atomic_write_text, file_sha256

REASON = "__reason"  # a question's reason box: ID__reason
LOCAL_FILES = "/data/local-files/?d="


def _dynamic(q: Question) -> bool:
    return bool(q.options_from) or q.kind == "marks"


def config_xml(study: Study) -> str:
    """The labelling config of the study's protocol."""
    p = study.protocol
    lines = ["<View>", f"  <Header value={quoteattr(p.title)}/>"]
    if p.instructions:
        lines.append(f'  <Header value={quoteattr(p.instructions)} size="6"/>')
    lines += ['  <Header value="$prompt"/>', '  <Image name="image" value="$image"/>']
    for q in p.questions:
        inner = [f'<Header value="$q_{q.id}"/>']
        if q.rubric:
            inner.append(f'<Header value={quoteattr(q.rubric)} size="6"/>')
        required = q.required and q.required_if is None and q.show_if is None
        req = ' required="true"' if required and not _dynamic(q) else ""
        if q.kind == "text":
            inner.append(
                f'<TextArea name="{q.id}" toName="image" maxSubmissions="1" editable="true"'
                f' rows="3"{req}/>'
            )
        else:
            choice = "single-radio" if q.kind == "single" else "multiple"
            if _dynamic(q):
                inner.append(
                    f'<Choices name="{q.id}" toName="image" choice="{choice}"'
                    f' value="${q.id}_options"{req}/>'
                )
            else:
                inner.append(f'<Choices name="{q.id}" toName="image" choice="{choice}"{req}>')
                for o in q.options:
                    inner.append(
                        f"  <Choice value={quoteattr(o.shown())} alias={quoteattr(o.value)}/>"
                    )
                inner.append("</Choices>")
        if q.reason != "none" or q.reason_if or q.comment_if:
            inner.append(
                f'<TextArea name="{q.id}{REASON}" toName="image" maxSubmissions="1"'
                f' editable="true" placeholder={quoteattr(q.reason_label)}/>'
            )
        c = q.show_if
        if c is not None:
            when = quoteattr(",".join(c.one_of))
            lines.append(
                f'  <View visibleWhen="choice-selected" whenTagName="{c.question}"'
                f" whenChoiceValue={when}>"
            )
            lines += [f"    {x}" for x in inner]
            lines.append("  </View>")
        else:
            lines += [f"  {x}" for x in inner]
    lines.append("</View>")
    return "\n".join(lines) + "\n"


def task(study: Study, out: Outgoing, image_url: str | None) -> dict[str, Any]:
    """One image as a Label Studio task."""
    it = out.item
    address = (
        (image_url.rstrip("/") + "/" + quote(it.image))
        if image_url
        else (LOCAL_FILES + quote(it.image))
    )
    data: dict[str, Any] = {
        "image": address,
        "prompt": it.prompt,
        "image_file": it.image,
        "image_sha256": out.sha256,
    }
    for q in study.protocol.questions:
        data[f"q_{q.id}"] = out.texts[q.id]
        if q.options_from:
            data[f"{q.id}_options"] = [{"value": v} for v in out.options.get(q.id, [])]
        elif q.kind == "marks":
            data[f"{q.id}_options"] = [{"value": w} for w in prompt_words(it.prompt)]
    predictions = [
        {
            "model_version": r.model,
            **({"score": r.score} if r.score is not None else {}),
            "result": [
                {
                    "from_name": r.question,
                    "to_name": "image",
                    "type": "choices",
                    "value": {"choices": r.value if isinstance(r.value, list) else [r.value]},
                }
            ],
        }
        for r in out.readings
    ]
    return {"data": data, "meta": out.meta(), "predictions": predictions}


def export(study: Study, folder: str | Path, image_url: str | None = None) -> int:
    """The study's images as Label Studio tasks and its protocol as their labelling config,
    written to ``folder``; how many tasks."""
    folder = Path(folder)
    tasks = [task(study, o, image_url) for o in outgoing(study)]
    atomic_write_text(folder / "config.xml", config_xml(study))
    atomic_write_json(folder / "tasks.json", tasks)
    root = study.folder.resolve()
    how = (
        f"images under {image_url}"
        if image_url
        else f"images served by Label Studio's local files from {root}: start it with "
        "LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED=true and "
        f"LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT={root}, and add a Local Files storage "
        f"for {root} to the project"
    )
    atomic_write_text(
        folder / "README.md",
        f"# {study.protocol.title}: {len(tasks)} images for Label Studio\n\n"
        "1. Create a project; under Settings > Labeling Interface > Code, paste "
        "`config.xml`.\n"
        f"2. Import `tasks.json` ({how}).\n"
        "3. When the images are rated, export the project as JSON and bring the answers "
        "back with `refine rate import EXPORT.json --from label-studio --into "
        f"{root}`.\n",
    )
    return len(tasks)


def _rater(annotation: dict[str, Any]) -> str | None:
    """Who gave an annotation: the user's email (or name), else ``label-studio-user-ID``;
    None when the annotation names no user."""
    who = annotation.get("completed_by")
    if isinstance(who, dict):
        name = who.get("email") or who.get("username")
        if name:
            return str(name)
        who = who.get("id")
    if isinstance(who, int | str) and not isinstance(who, bool) and str(who).strip():
        return f"label-studio-user-{who}"
    return None


def _time(annotation: dict[str, Any]) -> str | None:
    """The annotation's time (``updated_at``, else ``created_at``) when it is an ISO 8601
    time; None otherwise."""
    from datetime import datetime

    when = annotation.get("updated_at") or annotation.get("created_at")
    try:
        datetime.fromisoformat(str(when))
    except ValueError:
        return None
    return str(when)


def answers_of(result: list[Any], study: Study) -> tuple[dict[str, Any], dict[str, str]]:
    """The answers and reasons in an annotation's ``result``, by question id (the values
    as given: the protocol's check keeps or refuses them)."""
    questions = {q.id: q for q in study.protocol.questions}
    answers: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    for r in result if isinstance(result, list) else []:
        if not isinstance(r, dict) or not isinstance(r.get("value"), dict):
            continue
        name, value = str(r.get("from_name", "")), r["value"]
        if name.endswith(REASON) and name.removesuffix(REASON) in questions:
            reasons[name.removesuffix(REASON)] = " ".join(map(str, value.get("text") or []))
            continue
        q = questions.get(name)
        if q is None:
            continue
        if q.kind == "text":
            answers[q.id] = " ".join(map(str, value.get("text") or []))
        else:
            chosen = [str(v) for v in value.get("choices") or []]
            if q.kind == "single" and len(chosen) > 1:
                raise ValueError(f"{q.id}: one choice asked, {len(chosen)} given")
            answers[q.id] = (chosen[0] if chosen else None) if q.kind == "single" else chosen
    return answers, reasons


def import_rows(study: Study, path: str | Path, joining: Any) -> None:
    """The answers in Label Studio's JSON export ``path``, taken into ``joining``."""
    doc = read_export(path)
    if not isinstance(doc, list):
        raise ValueError(f"{path}: not Label Studio's JSON export (a list of tasks)")
    by_sha = {file_sha256(study.folder / it.image): it.image for it in study.set.items}
    for t in doc:
        if not isinstance(t, dict) or not isinstance(t.get("data"), dict):
            joining.problems.append(f"{path}: an entry that is not a task")
            continue
        data = t["data"]
        mapped = by_sha.get(str(data.get("image_sha256") or ""))
        for a in t.get("annotations") or []:
            if not isinstance(a, dict) or a.get("was_cancelled"):
                continue
            where = f"{path}: task {t.get('id', '?')}, annotation {a.get('id', '?')}"
            if mapped is None:
                joining.take(where, {"image": data.get("image_file", "")}, None)
                continue
            rater, when = _rater(a), _time(a)
            if rater is None:
                joining.problems.append(f"{where}: names no user (completed_by)")
                continue
            if when is None:
                joining.problems.append(f"{where}: no ISO 8601 time (updated_at, created_at)")
                continue
            item = study.set.item(mapped)
            options = study.item_options(item)
            try:
                answers, reasons = answers_of(a.get("result"), study)
                kept, why = study.protocol.check(answers, reasons, options, item.prompt)
            except ValueError as err:
                joining.problems.append(f"{where}: {err}")
                continue
            row = answer_row(study, mapped, rater, kept, why, when, options, "label-studio")
            lead = a.get("lead_time")
            if isinstance(lead, int | float) and not isinstance(lead, bool):
                if lead >= 0 or not math.isfinite(lead):  # not finite: the join refuses it
                    row["lead_time_s"] = float(lead)
            joining.take(where, row, mapped)
