"""One table of run settings: ``refine run --help``, a batch line and the app's form show
every setting with the same default and bounds (the app's maxima for rounds and candidates
are the operator's limits, below the table's)."""

from __future__ import annotations

import json
import math
import re

import pytest

from refine.settings import SETTINGS, shown_on
from tests.e2e.test_cli_run import cli


def number(value, kind) -> str:
    return str(kind(value))


def expected_brackets(setting) -> str:
    """What click prints after the help: ``[default: D; LO<=x<=HI]``."""
    parts = []
    # click shows no empty default (None, [], False), and shows 0 (0 == False: by identity)
    if setting.default is not None and setting.default != [] and setting.default is not False:
        parts.append(f"default: {setting.default}")
    lo, hi, kind = setting.lower, setting.upper, setting.kind
    if lo is not None and hi is not None:
        parts.append(f"{number(lo, kind)}<=x<={number(hi, kind)}")
    elif lo is not None:
        parts.append(f"x>={number(lo, kind)}")
    elif hi is not None:
        parts.append(f"x<={number(hi, kind)}")
    return "; ".join(parts)


def test_the_table_is_every_setting_a_front_shows():
    # the app shows a part of refine run's, in RunSpec's order (what the form and its API
    # take: a new one changes no test)
    app = [s.name for s in shown_on("app")]
    assert app == [n for n in SETTINGS if n in app] and {"rounds", "memory"} <= set(app)
    assert {s.name for s in shown_on("run")} == set(SETTINGS)
    assert SETTINGS["initial_candidates"].flag == "--initial"
    assert SETTINGS["writer"].choices == ("llm", "template", "ahead")
    assert SETTINGS["strategy"].choices == ("edit", "regenerate", "auto")
    assert all(s.help for s in SETTINGS.values())


def test_refine_run_help_shows_the_table(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    done = cli("run", "--help")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    for setting in shown_on("run"):
        found = re.search(re.escape(setting.flag) + r"(?: <[^>]+>)?(.*?)(?= --[a-z]|\Z)", text)
        assert found, f"{setting.flag} is not in refine run --help"
        shown = found.group(1)
        # click wraps after a hyphen ("kb-" / "free"): joined again to compare
        said = " ".join(setting.help.split()).replace("- ", "-")
        assert said in shown.replace("- ", "-"), setting.flag
        brackets = re.findall(r"\[([^\]]*)\]", shown)
        want = expected_brackets(setting)
        assert (brackets[-1] if brackets else "") == want, (setting.flag, shown)


def test_a_batch_line_takes_the_table_bounds(tmp_path):
    from refine.harness.tasks.batch.specs import BatchSpecError, read_specs

    base = {"activity": "people eating food at home", "country": "Iran"}
    bounded = [s for s in shown_on("batch") if s.lower is not None or s.upper is not None]
    at_bounds = tmp_path / "ok.jsonl"
    rows = []
    for s in bounded:
        for bound in (s.lower, s.upper):
            if bound is not None:
                rows.append({**base, s.name: s.kind(bound)})
    at_bounds.write_text("".join(json.dumps(r) + "\n" for r in rows))
    entries = read_specs(at_bounds)
    assert len(entries) == len(rows)
    outside, names = tmp_path / "bad.jsonl", []
    rows = []
    for s in bounded:
        step = 1 if s.kind is int else 0.01
        if s.upper is not None:
            rows.append({**base, s.name: s.kind(s.upper + step)})
            names.append(s.name)
        if s.lower is not None:
            rows.append({**base, s.name: s.kind(s.lower - step)})
            names.append(s.name)
    outside.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(BatchSpecError) as err:
        read_specs(outside)
    lines = str(err.value).splitlines()
    assert len(lines) == len(rows)
    for n, (name, line) in enumerate(zip(names, lines, strict=True), start=1):
        assert line.startswith(f"bad.jsonl line {n}: {name}: "), line
    # NaN and infinity (which JSON Lines may hold) are no setting's value, bounded or not
    odd = tmp_path / "odd.jsonl"
    odd.write_text(
        json.dumps({**base, "max_drift": math.nan}) + "\n"
        + json.dumps({**base, "budget_seconds": math.inf}) + "\n"
    )  # fmt: skip
    with pytest.raises(BatchSpecError) as err:
        read_specs(odd)
    lines = str(err.value).splitlines()
    assert lines == [
        "odd.jsonl line 1: not JSON (NaN is not a JSON number)",
        "odd.jsonl line 2: not JSON (Infinity is not a JSON number)",
    ]
    # nor through the Python API, where NaN failed every bound's comparison
    from refine import settings

    for name, value in (("max_drift", math.nan), ("budget_seconds", math.inf)):
        with pytest.raises(settings.SettingsError, match="should be a finite number") as err:
            settings.run_spec({**base, name: value})
        assert err.value.field == name


def test_every_bad_batch_line_is_listed_json_or_not(tmp_path):
    """A line that is not JSON (or not an object) is listed with every other bad line, in
    the file's order, instead of hiding them."""
    from refine.harness.tasks.batch.specs import BatchSpecError, read_specs

    good = {"activity": "people eating food at home", "country": "Iran"}
    specs = tmp_path / "mixed.jsonl"
    specs.write_text(
        "\n".join(
            [
                json.dumps({**good, "rounds": -3}),
                '{"activity": "people eating food at home", "country": ',
                json.dumps(good),
                "[1, 2]",
                json.dumps({**good, "target": "high"}),
            ]
        )
        + "\n"
    )
    with pytest.raises(BatchSpecError) as err:
        read_specs(specs)
    lines = str(err.value).splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "mixed.jsonl line 1",
        "mixed.jsonl line 2",
        "mixed.jsonl line 4",
        "mixed.jsonl line 5",
    ], lines
    assert lines[0].startswith("mixed.jsonl line 1: rounds: ")
    assert lines[1].startswith("mixed.jsonl line 2: not JSON (")
    assert lines[2] == "mixed.jsonl line 4: each line must be a JSON object"
    assert lines[3].startswith("mixed.jsonl line 5: target: ")


@pytest.mark.slow
def test_the_app_form_shows_the_table(tmp_path, backends, options):
    from refine.service import RunService
    from ui.app import build_app
    from ui.limits import Limits
    from ui.views.common import label_of, numbers

    limits = Limits(rounds=7, candidates=3)
    service = RunService("gemini", out=tmp_path, backends=backends, backend_options=options)
    demo = build_app(service, "test profile", limits)
    boxes = {}
    for c in demo.config["components"]:
        props = c.get("props", {})
        boxes[props.get("elem_id") or props.get("label")] = (c.get("type"), props)
    for setting in shown_on("app"):
        kind, box = boxes[setting.flag.removeprefix("--")]
        # a text or a checkbox: its words, example and default from the table
        if setting.choices:  # a choice: its choices, the default chosen
            assert kind == "dropdown" and box["value"] == setting.default, setting.name
            assert [c[0] for c in box["choices"]] == list(setting.choices), setting.name
            # any other value from a client is refused naming the field; empty: the default
            with pytest.raises(ValueError, match=f"^{label_of(setting.name)}: 'sideways' is not"):
                numbers({setting.name: "sideways"})
            assert numbers({setting.name: ""}) == {setting.name: None}
            assert numbers({setting.name: setting.choices[-1]})[setting.name] == setting.choices[-1]
            continue
        if setting.kind not in (int, float):
            assert kind == ("checkbox" if setting.kind is bool else "textbox"), setting.name
            assert box["label"] == setting.box and box["value"] in ("", False), setting.name
            assert box.get("placeholder", "") == setting.placeholder, setting.name
            continue
        if setting.default is None:  # no number by default: an empty box (Gradio's number
            # box shows and sends 0), its text read as a number by the handler
            assert kind == "textbox" and box.get("value") in ("", None), setting.name
            assert numbers({setting.name: ""}) == {setting.name: None}
            assert numbers({setting.name: "3"}) == {setting.name: 3}
            with pytest.raises(ValueError, match=f"^{label_of(setting.name)}: "):
                numbers({setting.name: "three"})
            continue
        assert kind == "number", setting.name
        value, most = setting.default, setting.upper
        if setting.name in ("rounds", "candidates"):  # the operator's limits
            most = getattr(limits, setting.name)
            value = min(setting.default, most)
            assert most <= setting.upper
        assert box.get("value") == value, setting.name  # (a default of None: an empty box)
        # the box carries no bounds (Gradio's own check names no field): the handler
        # checks the table's, naming the field, and the label says the operator's limit
        assert box.get("minimum") is None and box.get("maximum") is None, setting.name
        if setting.name in ("rounds", "candidates"):
            assert f"at most {most}" in box["label"], setting.name
        given = dict.fromkeys(s.name for s in shown_on("app") if s.kind in (int, float))
        label = label_of(setting.name)
        if setting.lower is not None:
            given[setting.name] = setting.lower - 1
            with pytest.raises(ValueError, match=f"^{label}: .* below the least allowed"):
                numbers(given)
        if setting.upper is not None:
            given[setting.name] = setting.upper + 1
            with pytest.raises(ValueError, match=f"^{label}: .* above the most allowed"):
                numbers(given)
        assert (box.get("precision") == 0) == (setting.kind is int), setting.name


def wider(surfaces: list[str], **extra):
    """A copy of RunSpec with one more run setting, ``sharpness``, shown on ``surfaces``."""
    from pydantic import Field

    from refine.records import RunSpec

    class Wider(RunSpec):
        sharpness: float = Field(
            0.5,
            ge=0.0,
            le=1.0,
            description="How sharp an edit may be.",
            json_schema_extra={"surfaces": surfaces, **extra},
        )

    return Wider


def test_a_field_added_to_the_spec_is_an_option_and_a_batch_setting(tmp_path):
    """A field added to (a copy of) RunSpec, with the fronts that show it, is an option of
    refine run, with its help, default and bounds, and a setting of batch lines, checked
    against its bounds: nothing else changes."""
    import typer
    from typer.testing import CliRunner

    from refine.cli.run_cmd import make_run_cmd
    from refine.harness.tasks.batch.specs import BatchSpecError, read_specs

    Wider = wider(["run", "batch", "app"])

    app = typer.Typer(rich_markup_mode=None)
    app.command("run")(make_run_cmd(Wider))
    app.command("other")(lambda: None)
    runner = CliRunner()
    done = runner.invoke(app, ["run", "--help"])
    assert done.exit_code == 0, done.output
    text = " ".join(done.output.split())
    assert "--sharpness <float range> How sharp an edit may be. [default: 0.5; 0.0<=x<=1.0]" in (
        text
    )
    refused = runner.invoke(app, ["run", "eating", "--country", "Iran", "--sharpness", "2"])
    assert refused.exit_code == 2 and "--sharpness" in refused.output
    # the bundled command is not changed by it
    assert "--sharpness" not in cli("run", "--help").stdout

    lines = tmp_path / "wide.jsonl"
    base = {"activity": "people eating food at home", "country": "Iran"}
    lines.write_text(json.dumps({**base, "sharpness": 0.7}) + "\n")
    (entry,) = read_specs(lines, spec=Wider)
    assert entry.spec.sharpness == 0.7
    lines.write_text(json.dumps({**base, "sharpness": 3}) + "\n")
    with pytest.raises(BatchSpecError, match=r"^wide.jsonl line 1: sharpness: "):
        read_specs(lines, spec=Wider)
    with pytest.raises(BatchSpecError, match=r"sharpness"):  # RunSpec itself has no such field
        read_specs(lines)


@pytest.mark.slow
def test_a_field_added_to_the_spec_is_a_box_of_the_apps_form(tmp_path, backends, options):
    """The app built with a copy of RunSpec that has one more field for the app shows its
    box, with its label, help and default, and /start passes its value to the run's spec."""
    from refine.service import RunService
    from ui.app import build_app
    from ui.views.common import numbers

    Wider = wider(["app"], info="0 soft, 1 sharp")

    service = RunService("gemini", out=tmp_path, backends=backends, backend_options=options)
    demo = build_app(service, "test profile", spec=Wider)
    boxes = {
        c["props"].get("elem_id"): c["props"]
        for c in demo.config["components"]
        if c.get("type") == "number"
    }
    box = boxes["sharpness"]
    assert (box["value"], box["label"], box["info"]) == (0.5, "sharpness", "0 soft, 1 sharp")
    start = next(f for f in demo.fns.values() if getattr(f, "api_name", None) == "start")
    import inspect

    params = list(inspect.signature(start.fn).parameters)
    names = [s.name for s in shown_on("app", Wider)]
    assert params[:3] == ["tok", "act", "ctry"] and params[3 : 3 + len(names)] == names
    assert names[-1] == "sharpness" and params[-1] == "request"
    with pytest.raises(ValueError, match="^sharpness: 2 is above the most allowed, 1"):
        numbers({"sharpness": 2}, Wider)
    # the bundled app has no such box
    plain = build_app(service, "test profile")
    assert not any(
        c.get("props", {}).get("elem_id") == "sharpness" for c in plain.config["components"]
    )
