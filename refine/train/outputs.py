"""What a finished tune leaves beside its adapter: ``tune.json`` (the summary), ``loss.csv``
(step, loss, reward accuracy, gradient norm) and the model card ``README.md``; the loss
page (``loss.html``) is drawn from them by ``refine.present.report.tune``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from refine.io.files import atomic_write_text
from refine.train.objectives import WHAT


def write_outputs(out: Path, summary: dict[str, Any], history: list[tuple]) -> None:
    atomic_write_text(out / "tune.json", json.dumps(summary, indent=1))
    atomic_write_text(out / "loss.csv", loss_csv(history))
    write_card(out, summary)


def write_card(out: Path, summary: dict[str, Any], repo: str | None = None) -> None:
    """``out/README.md``, the adapter's card (again after its last validation images, or
    naming the repository it is pushed to)."""
    atomic_write_text(out / "README.md", model_card(summary, out, repo))


def loss_csv(history: list[tuple]) -> str:
    def cell(x: float | None, fmt: str) -> str:
        return "" if x is None else format(x, fmt)

    return "step,loss,accuracy,grad_norm\n" + "".join(
        f"{s},{loss:.6f},{cell(a, '.4f')},{cell(g, '.6g')}\n" for s, loss, a, g in history
    )


def base_facts(base: str) -> dict[str, Any]:
    """The base model a tune started from: its hub id (None for a local folder that is not
    a cached snapshot), the commit its weights came from, and the licence its card gives
    (None when it cannot be read), which the adapter inherits."""
    from refine.backends.provenance import (
        NO_REVISION,
        from_snapshot_path,
        hub_commit,
        hub_license,
    )

    name = base.removeprefix("diffusers:")
    folder = Path(name)
    if folder.is_dir():
        snap = from_snapshot_path(folder.resolve())
        if snap is None:
            licence = None
            if (folder / "README.md").is_file():
                from huggingface_hub import ModelCard

                try:
                    licence = ModelCard.load(folder / "README.md").data.license
                except Exception:  # a card whose YAML does not parse names no licence
                    licence = None
            return {"id": None, "path": name, "commit": NO_REVISION, "license": licence}
        repo, commit = snap
    else:
        repo, commit = name, hub_commit(name)
    return {"id": repo, "path": name, "commit": commit, "license": hub_license(repo, commit)}


def model_card(summary: dict[str, Any], out: Path | None = None, repo: str | None = None) -> str:
    """The adapter's card, made as diffusers' training scripts make theirs
    (``ModelCardData`` with the licence, ``library_name: diffusers``, ``base_model`` the hub
    id, the validation images as the widget; ``populate_model_card``'s tags), with the
    base's commit, the training data, the validation figures and a ``load_lora_weights``
    snippet. ``out``: the adapter's folder (for its validation images); ``repo``: where it
    is pushed (the snippet loads from there)."""
    from huggingface_hub import ModelCard, ModelCardData

    c = summary["config"]
    acc = summary["held_out_accuracy"]
    base = summary.get("base_model") or base_facts(summary["base"])
    images = sorted((out / "validation").glob("*.png")) if out is not None else []
    prompts = summary.get("validation_prompts") or []
    widget = [  # each validation image with the prompt it was drawn for
        {"text": prompts[int(p.stem.rsplit("-", 1)[1]) % len(prompts)],
         "output": {"url": f"validation/{p.name}"}}
        for p in images
        if prompts and p.stem.rsplit("-", 1)[-1].isdigit()
    ]  # fmt: skip
    data = ModelCardData(
        license=base["license"],  # the base's; none written when it cannot be read
        library_name="diffusers",
        inference=True,
        base_model=base["id"],
        widget=widget or None,
    )
    name = base["id"] or base["path"]
    at = base["commit"]
    where = repo or "THIS_FOLDER"
    licence = (
        f"`{base['license']}`, the base model's, which the adapter inherits"
        if base["license"]
        else "the base model's, which the adapter inherits; its card names none that could be "
        "read, so none is written here: check the base's terms before use"
    )
    rev = f', revision="{at}"' if base["id"] and at != "no_revision_available" else ""
    lines = [
        f"# Culture LoRA for {name}",
        "",
        f"Trained by `refine tune` with **{summary['method']}** ({WHAT[summary['method']]}) "
        "from refinement runs exported with `refine export`.",
        "",
        f"- base model: `{name}`" + (f" at commit `{at}`" if base["id"] else " (a local folder)"),
        f"- licence: {licence}",
        f"- training data: `{c['data']}`, {summary['rows']} training rows, "
        f"{summary['held_out_rows']} held out",
        f"- steps: {summary['steps']}, rank {c['rank']}, lr {c['lr']}, batch {c['batch_size']} x "
        f"{c['grad_accum']}"
        + (f" x {summary['processes']} processes" if summary.get("processes", 1) > 1 else "")
        + f", resolution {c['resolution']}"
        + (f", beta {c['beta']}" if summary["method"] == "dpo" else ""),
        f"- final loss: {summary['final_loss']}",
        *([f"- held-out implicit reward accuracy: {acc}"] if acc is not None else []),
        *(
            [f"- validation images: {', '.join(f'`validation/{p.name}`' for p in images)}"]
            if images
            else []
        ),  # fmt: skip
        "",
        "## Use",
        "",
        "```python",
        "import torch",
        "from diffusers import DiffusionPipeline",
        "",
        f'pipe = DiffusionPipeline.from_pretrained("{name}"{rev}, torch_dtype=torch.bfloat16)',
        'pipe.to("cuda")',
        f'pipe.load_lora_weights("{where}")',
        'image = pipe("people eating food at home in Iran").images[0]',
        "```",
        "",
        f'In this toolkit: `--generator "diffusers:{name}+lora={where}"` (bench) or '
        f'`--backend "generator=diffusers:{name}+lora={where}"`.',
        "",
    ]
    card = ModelCard("---\n" + data.to_yaml() + "\n---\n\n" + "\n".join(lines))
    from diffusers.utils.hub_utils import populate_model_card

    tags = ["text-to-image", "diffusers-training", "diffusers", "lora", "cultural-refine"]
    return str(populate_model_card(card, tags=tags))
