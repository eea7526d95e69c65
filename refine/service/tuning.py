"""Tuning the profile's generator from the saved runs, for the app's Tune view: what the
runs hold for training, a small LoRA tune into ``out/tunes``, and base against tuned
images for one prompt and seed. One job at a time: a tune holds the service's run slot."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from refine.service.folders import RunFolders, phrase
from refine.service.slot import Slot
from refine.train.export import export
from refine.train.tune import TuneConfig, Tuner


class Tuning:
    """The service's tuning desk (``service.tuning``)."""

    def __init__(self, folders: RunFolders, refiner: Callable[[], Any], slot: Slot) -> None:
        """``folders``: the service's runs and tunes; ``refiner()``: its loop (loaded on
        first use); ``slot``: the one job at a time a tune shares with runs."""
        self.folders, self.refiner, self.slot = folders, refiner, slot
        # why tuning cannot run in this deployment at all (a ZeroGPU Space), or None
        self.disabled: str | None = None

    def training_data(self, max_drift: float = 0.5, visitor: str | None = None) -> dict[str, Any]:
        """What the saved runs ``visitor`` may learn from hold for tuning: runs, preference
        pairs (at most ``max_drift`` apart), accepted images (counted, nothing written)."""

        runs = self.folders.runs_of(visitor)
        if not runs:
            return {"runs": 0, "pairs": 0, "images": 0}
        counts = {"runs": len(runs)}
        for fmt, key in (("pairs", "pairs"), ("imagefolder", "images")):
            try:
                counts[key] = export(
                    runs, self.folders.out / ".dry", fmt, max_drift=max_drift, dry_run=True
                ).taken
            except ValueError:
                counts[key] = 0
        return counts

    def tunable_base(self) -> str:
        """The profile's generator when it can be tuned here (a diffusers: pipeline)."""
        if self.disabled:
            raise ValueError(self.disabled)
        name = self.refiner().backends.names.get("generator", "")
        if not name.startswith("diffusers:"):
            raise ValueError(
                f"the generator {name or '(none)'} cannot be tuned here: tuning needs a "
                "diffusers: Stable Diffusion, SDXL or FLUX.2 [klein] generator (the small-gpu or "
                "local-gpu profile, say)"
            )
        return name

    def tune(
        self,
        method: str,
        steps: int,
        lr: float,
        resolution: int,
        on_progress: Any = None,
        max_drift: float = 0.5,
        visitor: str | None = None,
    ) -> dict[str, Any]:
        """Export the saved runs ``visitor`` may learn from (see :meth:`runs_of`; pairs for
        dpo, accepted images for sft) into a new folder under ``out/tunes`` and train a
        LoRA for the profile's generator there; one job at a time, like runs. Returns the
        tune summary with the adapter folder."""

        if method not in ("dpo", "sft"):
            raise ValueError("the method is dpo or sft")
        if not 1 <= int(steps) <= 5000 or int(steps) != steps:
            raise ValueError("steps must be a whole number from 1 to 5000")
        if not 0 < float(lr) <= 0.1:
            raise ValueError("the learning rate must be above 0 and at most 0.1")
        if not 32 <= int(resolution) <= 1024 or int(resolution) % 8:
            raise ValueError("the resolution must be a multiple of 8 from 32 to 1024")
        if not 0 <= float(max_drift) <= 2:
            raise ValueError("the drift between a pair's images is from 0 to 2")
        base = self.tunable_base()
        self.slot.take()
        try:
            folder = self.folders.tunes_dir / time.strftime("%Y%m%d-%H%M%S")
            n = 1
            while folder.exists():
                n += 1
                folder = self.folders.tunes_dir / f"{time.strftime('%Y%m%d-%H%M%S')}-{n}"
            runs = self.folders.runs_of(visitor)
            if not runs:
                raise ValueError(
                    "no saved runs to learn from yet: refine some images first (a visitor "
                    "tunes from their own runs)"
                )
            fmt = "pairs" if method == "dpo" else "imagefolder"
            exported = export(runs, folder / "data", fmt, max_drift=float(max_drift))
            options = self.refiner().backends.options.get("generator", {})
            config = TuneConfig(
                data=str(folder / "data"),
                base=base,
                out=str(folder / "adapter"),
                method=method,
                steps=int(steps),
                lr=float(lr),
                resolution=int(resolution),
                checkpoint_every=0,
                device=options.get("device"),
            )
            tuner = Tuner(config, on_progress)
            summary = tuner.run()
            summary["adapter"] = str(folder / "adapter")
            summary["exported"] = exported.to_dict()
            return summary
        finally:
            self.slot.free()

    def tunes(self) -> list[str]:
        """The adapters tuned here, newest first (names under ``out/tunes``)."""
        if not self.folders.tunes_dir.is_dir():
            return []
        done = [
            p.name
            for p in self.folders.tunes_dir.iterdir()
            if (p / "adapter" / "pytorch_lora_weights.safetensors").is_file()
        ]
        return sorted(done, reverse=True)

    def compare(self, tune: str, prompt: str, seed: int) -> tuple[Any, Any]:
        """(the base generator's image, the tuned one's) for ``prompt`` and ``seed``; the
        tune is one of :meth:`tunes` (a client's value: anything else is refused)."""
        if not tune:
            raise ValueError("pick a tuned adapter first (tune one above if there is none)")
        if tune not in self.tunes():
            raise ValueError(f"{tune!r} is not a tune of this app")
        prompt = phrase(prompt, "prompt", 300)
        self.tunable_base()
        self.slot.take()
        try:
            generator = self.refiner().backends.get("generator")
            base = generator.generate(prompt, [int(seed)])[0]
            generator.add_lora(str(self.folders.tunes_dir / tune / "adapter"), 1.0, name="compare")
            try:
                tuned = generator.generate(prompt, [int(seed)])[0]
            finally:
                generator.unload_loras()
                for i, (path, scale) in enumerate(generator.loras):
                    generator.add_lora(path, scale, name=f"lora{i}")
            return base, tuned
        finally:
            self.slot.free()
