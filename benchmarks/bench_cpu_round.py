"""What one refinement round costs on a laptop's processor with the cpu profile, the figure the
app shows when it falls back to that profile (docs/profiles.md).

Every model is built from its real size with random weights (no download; speed does not
depend on the weights' values) and runs through the toolkit's own backends on the CPU in
float32, with the cpu profile's options (steps, image size):

* generator: SD-Turbo size (the SD 2.1 UNet and OpenCLIP ViT-H text tower, 512 px);
* editor: InstructPix2Pix size (the SD 1.5 UNet with 8 input channels, CLIP ViT-L text);
* observer, judge and language model: Qwen3.5-0.8B size, set by hand (PUBLISHED below),
  behind the test suite's byte-level tokenizer (one token a character); each prompt is cut to
  the number of tokens a real subword tokenizer makes of it (all-MiniLM-L6-v2's WordPiece,
  which counts English text within about a tenth of byte-pair encodings such as Qwen's), so
  the prompts cost what they cost with the real model; the image's tokens come from the
  real image processor (16-pixel patches, merged 2 x 2: 256 for 512 px);
* the image embedder: open_clip's ViT-B-32 at its real size; the text embedder: the real
  all-MiniLM-L6-v2.

A round is what the loop does with the default settings (``refine run``: 1 image in round
0, 2 candidates in each editing round): round 0 generates, observes, rates exaggeration
(1 rating an image) and quality (2 ratings an image); an editing round writes the
instruction (language model), edits the candidates in one batch, observes them in one batch,
rates them and embeds them for drift. Decoded answers are timed as ``--answer-tokens``
tokens a description and ``--instruction-tokens`` an instruction (random weights never stop
on their own). Figures are printed, not asserted; ``--tiny`` checks the script on tiny
shapes (its figures mean nothing).

Usage: python benchmarks/bench_cpu_round.py [--threads N] [--candidates 2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def once(name: str, fn) -> float:
    t = time.perf_counter()
    fn()
    wall = time.perf_counter() - t
    print(f"  {name}: {wall:.1f} s")
    return wall


def round_prompts(embed_text) -> tuple[str, str, list[str], str]:
    """The prompts of a round as the loop fills them for people eating food at home in Iran
    (observe, exaggeration, the two quality ratings, the instruction with three planned
    changes), each cut to as many characters as a subword tokenizer makes tokens of it."""

    def real_length(text: str) -> str:
        """``text`` cut to as many characters (byte-level tokens) as a subword
        tokenizer makes tokens of it."""
        embed_text.load()
        n = len(embed_text._model.tokenizer(text, add_special_tokens=False)["input_ids"])
        return text[:n]

    # the prompts as the loop fills them for people eating food at home in Iran; the
    # instruction's planned changes as a round typically has them (three lines)
    from metrics.descriptors import DIMENSIONS
    from refine.assets import prompt_template
    from refine.backends.structured import observation_prompt
    from refine.evaluate.references import find_references

    refs = find_references("people eating food at home", "Iran")
    place = {"activity": refs.activity, "country": refs.country}
    observe = real_length(observation_prompt(list(DIMENSIONS), 10))
    generation = prompt_template("generate").format(**place).strip()
    exag = real_length(prompt_template("exag_mllm").format(prompt=generation, country=refs.country))
    quality = [
        real_length(prompt_template(q)) for q in ("quality_naturalness", "quality_artifacts")
    ]
    changes = [
        "- add; objects; Sofreh cloth spread on the floor; similarity 0.41",
        "- replace; setting; modern restaurant with neon lights; with Persian rug on floor",
        "- remove; stereotype; camel in the dining room",
    ]
    write = real_length(
        prompt_template("write_instruction").format(
            **place,
            changes="\n".join(changes),
            keep="Large rice platter, Tea glasses",
            past="",  # no past fixes (--memory) and no refusal, as a first run has
            refused="",
        )
    )
    lengths = [len(t) for t in (observe, exag, *quality, write)]
    print(
        "prompt tokens: observe {}, exaggeration {}, quality {} and {}, instruction {}".format(
            *lengths
        )
    )
    return observe, exag, quality, write


def main(argv: list[str] | None = None) -> None:
    sys.stdout.reconfigure(line_buffering=True)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=None, help="torch threads (all cores)")
    parser.add_argument("--candidates", type=int, default=2, help="edit candidates a round")
    parser.add_argument("--rounds", type=int, default=5, help="editing rounds after round 0")
    parser.add_argument("--answer-tokens", type=int, default=200, help="tokens a description")
    parser.add_argument("--instruction-tokens", type=int, default=60)
    parser.add_argument("--tiny", action="store_true", help="tiny shapes: a check of the script")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)

    import torch
    from PIL import Image

    from benchmarks.bench_gpu_round import build_sd
    from benchmarks.qwen35 import build_qwen35
    from refine.backends import create
    from refine.profiles import load_profile

    if args.threads:
        torch.set_num_threads(args.threads)
    profile = load_profile("cpu")
    opts = {role: dict(o) for role, o in profile.options.items()}
    side = 64 if args.tiny else opts["generator"].get("width", 512)
    n = args.candidates
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"{torch.get_num_threads()} torch threads, torch {torch.__version__}"
    )
    with tempfile.TemporaryDirectory(prefix="bench-cpu-round-") as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        turbo = build_sd(root, "turbo", args.tiny, "cpu")
        ip2p = build_sd(root, "ip2p", args.tiny, "cpu")
        qwen = build_qwen35(root, args.tiny)
        print(f"built the random-weight models in {time.perf_counter() - t:.0f} s")
        common = {"device": "cpu", "shared": False}
        gen_opts = {**opts["generator"], "width": side, "height": side}
        gen = create("generator", f"diffusers:{turbo}", **gen_opts, **common)
        editor = create("editor", f"diffusers:{ip2p}", **opts.get("editor", {}), **common)
        vlm = create("observer", f"hf:{qwen}", **opts.get("observer", {}), **common)
        import open_clip

        clip = open_clip.create_model("ViT-B-32", pretrained=None).eval()
        embed_text = create("text_embedder", "st:all-MiniLM-L6-v2", device="cpu")
        image = Image.new("RGB", (side, side), (150, 90, 40))

        observe, exag, quality, write = round_prompts(embed_text)
        gen_steps, edit_steps = gen.steps, editor.steps

        def describe(k: int) -> None:
            vlm.load()
            batch = vlm._encode([observe] * k, [image] * k)
            with torch.inference_mode():
                vlm.model.generate(
                    **batch,
                    max_new_tokens=args.answer_tokens,
                    min_new_tokens=args.answer_tokens,
                    do_sample=False,
                )

        def instruct() -> None:
            vlm.load()
            batch = vlm._encode([write], None)
            with torch.inference_mode():
                vlm.model.generate(
                    **batch,
                    max_new_tokens=args.instruction_tokens,
                    min_new_tokens=args.instruction_tokens,
                    do_sample=False,
                )

        def judge(k: int) -> None:
            vlm.rate([image] * k, [exag] * k)
            for q in quality:
                vlm.rate_scale([image] * k, [q] * k, 0, 10)

        def embed(k: int) -> None:
            pixels = torch.rand(k + 1, 3, 224, 224)  # the candidates and their parent
            with torch.inference_mode():
                clip.encode_image(pixels)
            embed_text.encode(["Persian rug", "rice platter", "tea glasses"] * k)

        # warm-ups: a step of each pipeline, a short answer, one rating
        gen.steps = editor.steps = 1
        gen.generate("a feast", [1])
        editor.edit(image, "add a teapot", [1])
        gen.steps, editor.steps = gen_steps, edit_steps
        vlm.rate([image], [exag])
        embed(1)
        print("warmed up; timing each stage once")
        stages = {
            "generate": once("generate", lambda: gen.generate("a feast", [1])),
            "observe 1": once("observe 1", lambda: describe(1)),
            "judge 1": once("judge 1", lambda: judge(1)),
            "instruction": once("instruction", instruct),
            f"edit {n}": once(
                f"edit {n}", lambda: editor.edit(image, "add a teapot", list(range(1, n + 1)))
            ),
            f"observe {n}": once(f"observe {n}", lambda: describe(n)),
            f"judge {n}": once(f"judge {n}", lambda: judge(n)),
            f"embed {n}": once(f"embed {n}", lambda: embed(n)),
        }
    round0 = stages["generate"] + stages["observe 1"] + stages["judge 1"]
    editing = sum(stages[k] for k in ("instruction", f"edit {n}", f"observe {n}", f"judge {n}"))
    editing += stages[f"embed {n}"]
    run = round0 + args.rounds * editing
    labels = {
        "generate": f"generate 1 ({side} px, {gen_steps} steps)",
        f"edit {n}": f"edit {n} ({edit_steps} steps, one batch)",
        "observe 1": f"observe 1 ({args.answer_tokens} tokens)",
        f"observe {n}": f"observe {n} ({args.answer_tokens} tokens each, one batch)",
        "judge 1": "judge 1 (exaggeration, 2 quality ratings)",
        f"judge {n}": f"judge {n} (exaggeration, 2 quality ratings each)",
        "instruction": f"write the instruction ({args.instruction_tokens} tokens)",
        f"embed {n}": f"embed {n} and their parent (CLIP ViT-B-32, MiniLM)",
    }
    print(f"\none round on the CPU with the cpu profile ({torch.get_num_threads()} threads)")
    for key, wall in stages.items():
        print(f"  {labels[key]:52} {wall:7.1f} s")
    print(f"  round 0 (generate, observe, judge)                   {round0:7.1f} s")
    print(f"  an editing round                                     {editing:7.1f} s")
    print(f"  a run of round 0 + {args.rounds} editing rounds                {run / 60:7.1f} min")
    if args.tiny:
        print("  (--tiny: tiny shapes, the figures mean nothing)")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "threads": torch.get_num_threads(),
                    "stages": {labels[k]: v for k, v in stages.items()},
                    "round0_s": round0,
                    "editing_round_s": editing,
                    "run_s": run,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
