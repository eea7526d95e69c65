"""refine rate export --to label-studio|argilla and refine rate import --from ...: a run's
images (with the judge's expectation checks) go out in each tool's documented formats, and
fixed answers in the tool's export come back to the same values in ratings.jsonl, with
their raters and times; the whole join is all or nothing, as rate merge."""

from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET

import pytest

from refine.human.ratings import load_ratings
from refine.io.files import file_sha256
from refine.io.store import RunStore
from tests.e2e.test_cli_run import cli, run_args
from tests.e2e.test_expectations import built  # noqa: F401 (a fixture)

ANA = {
    "born": "Iran",
    "raised": "Iran",
    "residence": "Iran",
    "nationality": "Iran",
    "languages": ["Persian"],
    "age_band": "25-34",
    "consent": True,
}


@pytest.fixture
def rated_run(built, world, siglip_path, tmp_path):  # noqa: F811
    """A run of two rounds whose rounds' images the judge checked against 5 expectations."""
    out, _ = built
    runs = tmp_path / "runs"
    args = [*run_args(runs, 1, siglip_path), "--expectations", str(out)]
    done = cli(*args, "--candidates", "1", "--writer", "template")
    assert done.returncode == 0, done.stderr
    (run_dir,) = list(runs.iterdir())
    return run_dir, RunStore(run_dir).load()


def unmet_of(run, image):
    r = next(r for r in run.rounds if r.best.image == image)
    return [c.statement for c in r.expectations.checks if not c.met]


@pytest.mark.slow  # its run of two rounds, rated against five expectations (4 s)
def test_label_studio_round_trip(rated_run, tmp_path):
    run_dir, run = rated_run
    done = cli(
        "rate", "export", str(run_dir), "--to", "label-studio", "--out", str(tmp_path / "ls")
    )
    assert done.returncode == 0, done.stderr
    config = ET.fromstring((tmp_path / "ls" / "config.xml").read_text())
    choices = {c.get("name"): c for c in config.iter("Choices")}
    assert [c.get("alias") for c in choices["alignment"]] == ["1", "2", "3", "4", "5"]
    assert choices["unmet"].get("value") == "$unmet_options"  # the image's own statements
    assert choices["unmet"].get("choice") == "multiple"
    assert {t.get("name") for t in config.iter("TextArea")} == {"faithfulness__reason"}
    tasks = json.loads((tmp_path / "ls" / "tasks.json").read_text())
    shown = [r.best.image for r in run.rounds]
    assert [t["data"]["image_file"] for t in tasks] == sorted(shown)
    for t in tasks:
        image = t["data"]["image_file"]
        assert t["data"]["image"] == f"/data/local-files/?d={image}"
        statements = [o["value"] for o in t["data"]["unmet_options"]]
        assert statements == [e.statement for e in run.spec.expectations]
        # the judge's reading as a prediction named by its model
        (p,) = t["predictions"]
        assert p["model_version"] == "gemini:gemini-3.8-flash"
        assert p["result"][0]["value"]["choices"] == unmet_of(run, image)
    # Label Studio's JSON export of two raters' annotations
    export = []
    picks = {}
    for k, t in enumerate(tasks):
        first = t["data"]["unmet_options"][0]["value"]
        picks[t["data"]["image_file"]] = first
        result = [
            {"from_name": "alignment", "to_name": "image", "type": "choices",
             "value": {"choices": [str(3 + k)]}},
            {"from_name": "unmet", "to_name": "image", "type": "choices",
             "value": {"choices": [first]}},
            {"from_name": "faithfulness", "to_name": "image", "type": "choices",
             "value": {"choices": ["4"]}},
            {"from_name": "faithfulness__reason", "to_name": "image", "type": "textarea",
             "value": {"text": ["the  tea glasses"]}},
        ]  # fmt: skip
        annotations = [
            {"id": 10 + k, "completed_by": {"id": 1, "email": "ana@example.org"},
             "result": result, "lead_time": 12.5, "was_cancelled": False,
             "created_at": "2026-11-20T10:00:00Z", "updated_at": "2026-11-20T10:01:00Z"},
            {"id": 20 + k, "completed_by": 2, "result": copy.deepcopy(result[:1] + result[2:3]),
             "lead_time": 3.0, "was_cancelled": False, "created_at": "2026-11-21T09:00:00Z"},
            {"id": 30 + k, "completed_by": 3, "result": [], "was_cancelled": True},
        ]  # fmt: skip
        export.append({"id": 100 + k, "data": t["data"], "annotations": annotations})
    (tmp_path / "export.json").write_text(json.dumps(export))
    (tmp_path / "profiles.json").write_text(json.dumps({"ana@example.org": ANA}))
    args = ["rate", "import", str(tmp_path / "export.json"), "--from", "label-studio"]
    args += ["--into", str(run_dir)]
    done = cli(*args, "--profiles", str(tmp_path / "profiles.json"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("4 answers added, 0 already in the set, 1 profiles added")
    rows = [json.loads(x) for x in (run_dir / "ratings.jsonl").read_text().splitlines()]
    by = {(r["rater"], r["image"]): r for r in rows}
    for k, t in enumerate(tasks):
        image = t["data"]["image_file"]
        ana = by[("ana@example.org", image)]
        assert ana["answers"] == {"alignment": str(3 + k), "unmet": [picks[image]],
                                  "faithfulness": "4"}  # fmt: skip
        assert ana["reasons"] == {"faithfulness": "the tea glasses"}
        assert ana["time"] == "2026-11-20T10:01:00Z" and ana["lead_time_s"] == 12.5
        assert ana["kind"] == "rate" and ana["protocol"] == "quick"
        other = by[("label-studio-user-2", image)]
        assert other["answers"] == {"alignment": str(3 + k), "faithfulness": "4"}
        assert other["time"] == "2026-11-21T09:00:00Z"
    profiles = json.loads((run_dir / ".profiles.json").read_text())
    assert profiles["ana@example.org"]["born"] == "Iran"
    # refine agree reads them as any study's answers
    ratings = load_ratings(run_dir / "ratings.jsonl")
    assert {r.rater for r in ratings} == {"ana@example.org", "label-studio-user-2"}
    # the same file again: nothing new; a changed answer: a conflict, never written over
    again = cli(*args)
    assert again.returncode == 0 and again.stdout.startswith("0 answers added, 4 already")
    export[0]["annotations"][0]["result"][0]["value"]["choices"] = ["1"]
    (tmp_path / "changed.json").write_text(json.dumps(export))
    changed = cli("rate", "import", str(tmp_path / "changed.json"), *args[3:])
    assert changed.returncode == 1 and "1 conflicts" in changed.stdout
    # an answer the protocol does not allow: one line, nothing written
    export[1]["annotations"][1]["result"][0]["value"]["choices"] = ["7"]
    (tmp_path / "bad.json").write_text(json.dumps(export))
    before = (run_dir / "ratings.jsonl").read_text()
    bad = cli("rate", "import", str(tmp_path / "bad.json"), *args[3:])
    assert bad.returncode == 2
    assert "nothing merged" in bad.stderr and "'7' is not one of 1, 2, 3, 4, 5" in bad.stderr
    assert (run_dir / "ratings.jsonl").read_text() == before


def test_label_studio_conditions_marks_and_reasons(tmp_path):
    """CulturalFrames' questions in Label Studio: the questions shown after a low
    alignment sit in a conditional view, the prompt's words are the marks' choices, a
    reason box follows a question that asks for one; an annotation using all of them comes
    back as the Rate view keeps it, and one missing a required reason is refused."""
    from PIL import Image

    folder = tmp_path / "set"
    folder.mkdir()
    Image.new("RGB", (16, 16), (200, 40, 40)).save(folder / "a.png")
    prompt = "A Nowruz table with sabzeh in Tehran"
    (folder / "prompts.json").write_text(json.dumps({"a.png": prompt}))
    out = tmp_path / "ls"
    args = ["rate", "export", str(folder), "--to", "label-studio", "--out", str(out)]
    done = cli(*args, "--protocol", "culturalframes", "--image-url", "https://example.org/set")
    assert done.returncode == 0, done.stderr
    config = ET.fromstring((out / "config.xml").read_text())
    views = [v for v in config.iter("View") if v.get("visibleWhen")]
    assert {(v.get("whenTagName"), v.get("whenChoiceValue")) for v in views} == {
        ("alignment", "0,0.5")
    }
    inside = {t.get("name") for v in views for t in v if t.get("name")}
    assert inside == {"missing", "missing_words", "missing_reason"}
    (task,) = json.loads((out / "tasks.json").read_text())
    assert task["data"]["image"] == "https://example.org/set/a.png"
    words = [o["value"] for o in task["data"]["missing_words_options"]]
    assert words == ["A", "Nowruz", "table", "with", "sabzeh", "in", "Tehran"]
    assert task["predictions"] == []  # no judge read this folder's images

    def result(name, kind, value):
        key = "choices" if kind == "choices" else "text"
        return {"from_name": name, "to_name": "image", "type": kind, "value": {key: value}}

    answers = [
        result("alignment", "choices", ["0.5"]),
        result("missing", "choices", ["explicit"]),
        result("missing_words", "choices", ["sabzeh"]),
        result("missing_reason", "textarea", ["no sabzeh on the table"]),
        result("stereotype", "choices", ["yes"]),
        result("stereotype__reason", "textarea", ["everyone in costume"]),
        result("quality", "choices", ["1"]),
        result("overall", "choices", ["3"]),
    ]
    annotation = {"id": 1, "completed_by": {"id": 4, "email": "bo@example.org"},
                  "result": answers, "created_at": "2026-11-22T08:00:00Z"}  # fmt: skip
    (tmp_path / "e.json").write_text(json.dumps([{**task, "annotations": [annotation]}]))
    args = ["rate", "import", str(tmp_path / "e.json"), "--from", "label-studio"]
    done = cli(*args, "--into", str(folder))
    assert done.returncode == 0, done.stderr
    (row,) = [json.loads(x) for x in (folder / "ratings.jsonl").read_text().splitlines()]
    assert row["answers"] == {
        "alignment": "0.5", "missing": ["explicit"], "missing_words": ["sabzeh"],
        "missing_reason": "no sabzeh on the table", "stereotype": "yes", "quality": "1",
        "overall": "3",
    }  # fmt: skip
    assert (
        row["reasons"] == {"stereotype": "everyone in costume"} and row["rater"] == "bo@example.org"
    )
    annotation["result"] = [r for r in answers if r["from_name"] != "stereotype__reason"]
    annotation["completed_by"] = 5
    (tmp_path / "e2.json").write_text(json.dumps([{**task, "annotations": [annotation]}]))
    refused = cli("rate", "import", str(tmp_path / "e2.json"), "--from", "label-studio",
                  "--into", str(folder))  # fmt: skip
    assert refused.returncode == 2 and "Describe what aspect of the image is stereotypical" in (
        refused.stderr
    )
    # what the join would refuse is refused at the import, and nothing is written: a lead
    # time of Infinity (json.loads takes it; a second import then added a duplicate row),
    # a rater named with markup, a time in the future; a --profiles file nested past
    # reading is one line (it was a RecursionError)
    annotation["result"] = answers
    bad = [
        ({"lead_time": float("inf")}, "lead_time_s inf is not a finite number"),
        ({"completed_by": {"email": "<script>x</script>@x.org"}}, "holds markup characters"),
        ({"created_at": "9999-12-31T00:00:00Z"}, "9999-12-31T00:00:00Z is in the future"),
    ]
    before = (folder / "ratings.jsonl").read_bytes()
    for k, (change, said) in enumerate(bad):
        (tmp_path / f"bad{k}.json").write_text(
            json.dumps([{**task, "annotations": [{**annotation, **change}]}])
        )
        refused = cli("rate", "import", str(tmp_path / f"bad{k}.json"), "--from", "label-studio",
                      "--into", str(folder))  # fmt: skip
        assert refused.returncode == 2 and said in refused.stderr, refused.stderr
        assert (folder / "ratings.jsonl").read_bytes() == before
    deep = tmp_path / "profiles.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    refused = cli("rate", "import", str(tmp_path / "e.json"), "--from", "label-studio",
                  "--into", str(folder), "--profiles", str(deep))  # fmt: skip
    assert refused.returncode == 2 and f"--profiles: {deep}: not JSON" in refused.stderr


@pytest.mark.slow
def test_argilla_round_trip(rated_run, tmp_path):
    """The folder Argilla's from_disk reads: its settings, dataset and records pass
    Argilla's own models; responses written by Argilla's own Record come back as the same
    answers, each user named by the users.json beside them."""
    import base64
    import uuid

    from argilla import Record, Response
    from argilla._models import DatasetModel
    from argilla._models._settings._fields import FieldModel
    from argilla._models._settings._metadata import MetadataFieldModel
    from argilla._models._settings._questions import QuestionModel
    from argilla._models._settings._task_distribution import OverlapTaskDistributionModel

    run_dir, run = rated_run
    out = tmp_path / "ag"
    done = cli("rate", "export", str(run_dir), "--to", "argilla", "--out", str(out))
    assert done.returncode == 0, done.stderr
    config = json.loads((out / ".argilla" / "settings.json").read_text())
    questions = {q["name"]: QuestionModel(**q) for q in config["questions"]}
    assert questions["alignment"].settings.type == "rating"  # the 1-5 scale
    assert [o["value"] for o in questions["alignment"].settings.options] == [1, 2, 3, 4, 5]
    assert questions["unmet"].settings.type == "multi_label_selection"
    statements = [e.statement for e in run.spec.expectations]
    assert [o["value"] for o in questions["unmet"].settings.options] == statements
    assert questions["faithfulness__reason"].settings.type == "text"
    assert not questions["unmet"].required and questions["alignment"].required
    fields = {f["name"]: FieldModel(**f) for f in config["fields"]}
    assert fields["image"].settings.type == "image" and "unmet_choices" in fields
    for m in config["metadata"]:
        MetadataFieldModel(**m)
    OverlapTaskDistributionModel(**config["distribution"])
    DatasetModel(**json.loads((out / ".argilla" / "dataset.json").read_text()))
    records = [Record.from_dict(r) for r in json.loads((out / "records.json").read_text())]
    assert len(records) == len(run.rounds)
    by_sha = {file_sha256(run_dir / r.best.image): r.best.image for r in run.rounds}
    for rec in records:
        image = by_sha[rec.id]  # a record's id is its image's SHA-256
        head, data = rec.fields["image"].split(",", 1)
        assert head == "data:image/png;base64"
        assert base64.b64decode(data) == (run_dir / image).read_bytes()
        (suggestion,) = list(rec.suggestions)
        assert suggestion.question_name == "unmet" and suggestion.agent == "gemini:gemini-3.8-flash"
        assert suggestion.value == unmet_of(run, image)
    # two users rate: Argilla's own Record writes their responses as to_disk does
    ana, bo, cy = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    rated = tmp_path / "rated"
    rated.mkdir()
    back = []
    for k, rec in enumerate(records):
        first = statements[k]
        rec.responses.add(Response("alignment", 2 + k, user_id=ana))
        rec.responses.add(Response("unmet", [first], user_id=ana))
        rec.responses.add(Response("faithfulness", 5, user_id=ana))
        rec.responses.add(Response("faithfulness__reason", "the tea", user_id=ana))
        rec.responses.add(Response("alignment", 4, user_id=bo))
        rec.responses.add(Response("faithfulness", 1, user_id=bo))
        rec.responses.add(Response("alignment", 9, user_id=cy))  # a draft, never submitted
        back.append(rec.to_dict())
    (rated / "records.json").write_text(json.dumps(back))
    args = ["rate", "import", str(rated), "--from", "argilla", "--into", str(run_dir)]
    # without the responses' status, a draft could not be told from an answer: refused
    unknown = cli(*args)
    assert unknown.returncode == 2 and "no status in responses.json" in unknown.stderr
    status = {
        rec.id: {str(ana): "submitted", str(bo): "submitted", str(cy): "draft"} for rec in records
    }
    (rated / "responses.json").write_text(
        json.dumps({"users": {str(ana): "ana"}, "status": status})
    )
    (tmp_path / "profiles.json").write_text(json.dumps({"ana": ANA}))
    done = cli(*args, "--profiles", str(tmp_path / "profiles.json"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("4 answers added, 0 already in the set, 1 profiles added")
    assert f"{len(records)} drafts and discarded answers left out" in done.stdout
    rows = [json.loads(x) for x in (run_dir / "ratings.jsonl").read_text().splitlines()]
    got = {(r["rater"], r["answers"]["alignment"]): r for r in rows}
    for k in range(len(records)):
        row = got[("ana", str(2 + k))]
        assert row["answers"] == {"alignment": str(2 + k), "unmet": [statements[k]],
                                  "faithfulness": "5"}  # fmt: skip
        assert row["reasons"] == {"faithfulness": "the tea"} and row["source"] == "argilla"
        assert row["time"] == ""  # Argilla's files keep no time: none is made up
    other = [r for r in rows if r["rater"] == f"argilla-user-{bo}"]
    assert [r["answers"] for r in other] == [{"alignment": "4", "faithfulness": "1"}] * 2
    assert cli(*args).stdout.startswith("0 answers added, 4 already in the set")
