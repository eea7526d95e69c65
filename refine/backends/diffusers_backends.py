"""Diffusers backends: text-to-image generation, instruction editing and img2img.

* ``diffusers:<hub id or path>`` as a generator loads any text-to-image pipeline
  (``AutoPipelineForText2Image``); LoRA adapters (through peft) with a scale, CPU offload
  and VAE tiling are options.
* ``diffusers:<hub id or path>`` as an editor loads an instruction-editing pipeline:
  FLUX.2-klein, FLUX.1 Kontext, Qwen-Image-Edit (/Plus), InstructPix2Pix (SD, SDXL).
* ``img2img:<hub id or path>`` edits by strength-based img2img with the weights of the
  generator of the same name (``from_pipe``: one copy in memory).

Seeds drive CPU ``torch.Generator`` objects, so the same seed gives the same image on any
device. Output images of an editor have the size of the input.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from refine.backends.device import LazyDevice
from refine.backends.imports import require
from refine.backends.loading import (
    ModelUnavailable,
    OutOfMemory,
    load_or_explain,
    out_of_memory,
    pick_dtype,
    serialised_load,
)
from refine.backends.lora import join_adapters, lora_source, split_adapters
from refine.backends.registry import create, instances
from refine.usage import check_stop, spend, stop_event

if TYPE_CHECKING:
    from PIL import Image

log = logging.getLogger(__name__)

__all__ = [
    "DiffusersEditor",
    "DiffusersGenerator",
    "DiffusersImg2Img",
    "DiffusersInpainter",
    "ModelUnavailable",
    "OutOfMemory",
    "pick_dtype",
]

Progress = Callable[[int, int], None]  # (step done, total steps)


def load_pipeline(
    loader: Any, model: str, dtype: Any, revision: str | None = None, variant: str | None = None
) -> Any:
    """``loader.from_pretrained`` (at ``revision``, with the weight ``variant`` such as
    fp16 when given) with errors that name the model and what to do."""
    from importlib.metadata import version

    from packaging.version import Version

    # diffusers 0.42 renamed torch_dtype to dtype
    key = "dtype" if Version(version("diffusers")) >= Version("0.42") else "torch_dtype"
    kwargs: dict[str, Any] = {key: dtype}
    if revision:
        kwargs["revision"] = revision
    if variant:
        kwargs["variant"] = variant
    return load_or_explain(model, lambda: loader.from_pretrained(model, **kwargs))


def _generators(seeds: Sequence[int]) -> list[Any]:
    import torch

    if not seeds:
        raise ValueError("give at least one seed")
    return [torch.Generator("cpu").manual_seed(int(s)) for s in seeds]


def _step_callback(progress: Progress | None, total: int, before: int = 0, overall: int = 0):
    """A pipeline's ``callback_on_step_end`` reporting ``(steps done, all steps)``; for the
    k-th of several calls, ``before`` steps were done by the earlier ones, of ``overall``.
    Every step also checks for a stop (:func:`refine.usage.check_stop`): a stop asked for
    ends the pipeline call between two denoising steps."""

    if progress is None and stop_event() is None:
        return None

    def callback(pipe, step, timestep, kwargs):
        check_stop()
        if progress is not None:
            progress(before + min(step + 1, total), overall or total)
        return kwargs

    return callback


def _default_steps(pipe: Any) -> int:
    import inspect

    param = inspect.signature(pipe.__call__).parameters.get("num_inference_steps")
    return int(param.default) if param and isinstance(param.default, int) else 0


class _DiffusersBackend:
    device = LazyDevice()

    def __init__(
        self,
        model: str,
        device: str | None = None,
        dtype: str | None = None,
        steps: int | None = None,
        guidance: float | None = None,
        cpu_offload: bool = False,
        vae_tiling: bool = False,
        revision: str | None = None,
        variant: str | None = None,
    ) -> None:
        if not model:
            raise ValueError("a diffusers backend needs a model id or a local path")
        if steps is not None and steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        self.model = model
        self.device = device
        self.dtype_name = dtype
        self.steps = steps
        self.guidance = guidance
        self.cpu_offload = cpu_offload
        self.vae_tiling = vae_tiling
        self.revision = revision
        self.variant = variant
        self.pipe: Any = None
        self.notes: list[str] = []  # batches made smaller for lack of memory (see take_notes)

    @property
    def id(self) -> str:
        return f"diffusers:{self.model}" + (f"@{self.revision}" if self.revision else "")

    def take_notes(self) -> list[str]:
        """What happened to the last calls' batches (and forget it)."""
        notes, self.notes = self.notes, []
        return notes

    def info(self) -> dict[str, str]:
        self.load()
        return {
            "id": self.id,
            "pipeline": type(self.pipe).__name__,
            "dtype": str(self.pipe.dtype).replace("torch.", ""),
            "device": "cpu-offload" if self.cpu_offload else self.device,
            "diffusers": self.pipe.config.get("_diffusers_version", ""),
            "revision": self.revision or "",
        }

    def _place(self, pipe: Any) -> Any:
        if self.cpu_offload and self.device.startswith("cuda"):
            pipe.enable_model_cpu_offload()
        else:
            pipe.to(self.device)
        if self.vae_tiling and hasattr(pipe, "vae"):
            pipe.vae.enable_tiling()
        pipe.set_progress_bar_config(disable=True)
        return pipe


class DiffusersGenerator(_DiffusersBackend):
    """Any diffusers text-to-image pipeline."""

    role = "generator"

    def __init__(
        self,
        model: str,
        width: int | None = None,
        height: int | None = None,
        negative_prompt: str | None = None,
        loras: Sequence[tuple[str, float]] = (),
        lora: str | None = None,
        lora_scale: float = 1.0,
        scheduler: dict[str, Any] | None = None,
        true_cfg: float | None = None,
        **kw: Any,
    ) -> None:
        # "MODEL+lora=PATH[@SCALE]" (repeatable) names adapters with the model, as in
        # --backend generator=diffusers:MODEL+lora=ADAPTER@0.8; "lora" is a profile's option
        # scheduler: entries of the pipeline's scheduler config set anew (a distilled
        # model's own, as Qwen-Image-Lightning's shift)

        model, named = split_adapters(model)
        super().__init__(model, **kw)
        self.width, self.height = width, height
        self.negative_prompt = negative_prompt
        self.scheduler = dict(scheduler or {})
        self.true_cfg = true_cfg  # true_cfg_scale: CFG where guidance_scale is distilled
        given = [*loras, *named, *([(lora, lora_scale)] if lora else [])]
        self.loras = [(str(p), float(s)) for p, s in given]
        self._scales: dict[str, float] = {}

    @property
    def id(self) -> str:
        """The model's id with its LoRA adapters and scales (records say what drew)."""
        base = f"diffusers:{self.model}" + (f"@{self.revision}" if self.revision else "")

        return join_adapters(base, self.loras)

    @serialised_load(lambda self: self.pipe is not None)
    def load(self) -> DiffusersGenerator:
        if self.pipe is not None:
            return self
        diffusers = require("diffusers", "diffusers", "the diffusers: backends", "local")
        dtype = pick_dtype(self.device, self.dtype_name)
        log.info("loading %s (%s) on %s", self.model, dtype, self.device)
        try:
            pipe = load_pipeline(
                diffusers.AutoPipelineForText2Image, self.model, dtype, self.revision, self.variant
            )
        except ValueError as err:
            # a pipeline class AutoPipeline maps to no task (AltDiffusion, SoS's AD, is one:
            # diffusers keeps it among its deprecated pipelines): loaded as the class its
            # model_index.json names
            if "AutoPipeline can't find a pipeline linked to" not in str(err):
                raise
            log.info("%s: loading its own pipeline class (%s)", self.model, err)
            # its model_index.json names its text encoder's library "alt_diffusion", a name
            # diffusers now keeps under pipelines.deprecated: found there
            pipelines = diffusers.pipelines
            if not hasattr(pipelines, "alt_diffusion"):
                pipelines.alt_diffusion = pipelines.deprecated.alt_diffusion
            pipe = load_pipeline(
                diffusers.DiffusionPipeline, self.model, dtype, self.revision, self.variant
            )
        self.pipe = self._place(pipe)
        if self.scheduler:
            config = dict(pipe.scheduler.config)
            unknown = sorted(set(self.scheduler) - set(config))
            if unknown:
                raise ValueError(
                    f"{self.model}: its scheduler {type(pipe.scheduler).__name__} has no "
                    f"setting {unknown[0]!r}"
                )
            pipe.scheduler = type(pipe.scheduler).from_config({**config, **self.scheduler})
        for i, (path, scale) in enumerate(self.loras):
            self.add_lora(path, scale, name=f"lora{i}")
        return self

    def add_lora(self, path: str, scale: float = 1.0, name: str | None = None) -> None:
        """Load a LoRA adapter (peft) and activate it with ``scale`` next to the others."""
        require("peft", "peft", "LoRA adapters", "local")
        self.load()
        name = name or f"lora{len(self.pipe.get_list_adapters().get('unet', []))}"
        where, weight = lora_source(path)
        extra = {"weight_name": weight} if weight else {}
        self.pipe.load_lora_weights(where, adapter_name=name, **extra)
        names = [n for names in self.pipe.get_list_adapters().values() for n in names]
        names = list(dict.fromkeys(names))
        self._scales[name] = scale
        self.pipe.set_adapters(names, [self._scales.get(n, 1.0) for n in names])

    def unload_loras(self) -> None:
        if self.pipe is not None:
            self.pipe.unload_lora_weights()
        self._scales = {}

    def generate(
        self, prompt: str, seeds: Sequence[int], progress: Progress | None = None
    ) -> list[Image.Image]:
        self.load()
        kwargs: dict[str, Any] = {}
        if self.steps is not None:
            kwargs["num_inference_steps"] = self.steps
        if self.guidance is not None:
            kwargs["guidance_scale"] = self.guidance
        if self.width:
            kwargs["width"] = self.width
        if self.height:
            kwargs["height"] = self.height
        if self.true_cfg is not None:
            kwargs["true_cfg_scale"] = self.true_cfg

        def call(gens: list[Any], extra: dict[str, Any]) -> list[Image.Image]:
            n = len(gens)
            args = dict(kwargs)
            if self.negative_prompt:
                args["negative_prompt"] = [self.negative_prompt] * n
            return list(self.pipe(prompt=[prompt] * n, generator=gens, **args, **extra).images)

        steps = self.steps or _default_steps(self.pipe)
        return _in_batches(self.model, seeds, call, progress, steps, self.notes)


# pipeline class -> default call arguments of an instruction editor
EDIT_PIPELINES: dict[str, dict[str, Any]] = {
    "StableDiffusionInstructPix2PixPipeline": {
        "num_inference_steps": 20,
        "guidance_scale": 7.5,
        "image_guidance_scale": 1.5,
    },
    "StableDiffusionXLInstructPix2PixPipeline": {
        "num_inference_steps": 25,
        "guidance_scale": 7.5,
        "image_guidance_scale": 1.5,
    },
    "FluxKontextPipeline": {"num_inference_steps": 28, "guidance_scale": 2.5},
    "Flux2KleinPipeline": {"num_inference_steps": 4},
    # true classifier-free guidance needs a negative prompt as well: given only the scale,
    # diffusers turns guidance off with a logged warning (``do_true_cfg`` wants both), and
    # every edit ran at guidance 1. " " is the negative prompt of the models' own examples
    "QwenImageEditPipeline": {
        "num_inference_steps": 40,
        "true_cfg_scale": 4.0,
        "negative_prompt": " ",
    },
    "QwenImageEditPlusPipeline": {
        "num_inference_steps": 40,
        "true_cfg_scale": 4.0,
        "negative_prompt": " ",
    },
}
# pipelines that accept a working size and round it to this multiple
SIZED_EDITS = {"FluxKontextPipeline": 16, "Flux2KleinPipeline": 16}
# pipelines that read a list of images as reference images shared by every prompt (not one
# image per prompt): a batch of n edits is given the source once, or each edit would
# attend to n copies of it (at 1024 px and 4 candidates, 20,480 image tokens a sample, not 8,192)
REFERENCE_EDITS = {"Flux2KleinPipeline", "QwenImageEditPlusPipeline"}


def _fit_size(image: Image.Image, result: Image.Image) -> Image.Image:
    from PIL import Image as PILImage

    if result.size == image.size:
        return result
    return result.resize(image.size, PILImage.Resampling.LANCZOS)


def _in_batches(
    model: str,
    seeds: Sequence[int],
    call: Callable[[list[Any], dict[str, Any]], list[Image.Image]],
    progress: Progress | None,
    steps: int,
    notes: list[str],
) -> list[Image.Image]:
    """``call(generators, extra_args)`` for all ``seeds`` in one batch (one pipeline call,
    one generator per seed, so each image is the one its seed gives alone). When the GPU
    runs out of memory the batch is halved and the rest goes on in smaller batches (said
    in ``notes``); out of memory with one image is the :class:`OutOfMemory` advice.
    ``progress`` hears the steps of all the calls together (``steps`` per call)."""
    import torch

    spend(model, len(seeds))  # one call an image, taken once (a halved batch is the same)
    gens = _generators(seeds)
    size, done, calls, out = len(gens), 0, 0, []
    while done < len(gens):
        part = gens[done : done + size]
        calls_left = -(-(len(gens) - done) // size)
        before = steps * calls
        extra: dict[str, Any] = {}
        callback = _step_callback(progress, steps, before, before + steps * calls_left)
        if callback:
            extra["callback_on_step_end"] = callback
        try:
            images = call(part, extra)
        except torch.cuda.OutOfMemoryError as err:
            torch.cuda.empty_cache()
            if size == 1:
                raise out_of_memory(model) from err
            smaller = max(1, size // 2)
            notes.append(
                f"{model}: out of GPU memory with {size} images at once; "
                f"went on {smaller} at a time"
            )
            size = smaller
            continue
        out.extend(images)
        done += len(part)
        calls += 1
    return out


def _edit_batch(
    model: str,
    pipe: Any,
    image: Image.Image,
    instruction: str,
    seeds: Sequence[int],
    args: dict[str, Any],
    progress: Progress | None,
    steps: int,
    notes: list[str],
    references: Sequence[Image.Image] = (),
) -> list[Image.Image]:
    """All seeds' edits of ``image`` in one pipeline call (see :func:`_in_batches`), each
    result resized to the input's size; a reference-image pipeline is given the
    ``references`` after the source, shared by every edit."""
    source = image.convert("RGB")
    shared = [source, *(r.convert("RGB") for r in references)]

    def call(gens: list[Any], extra: dict[str, Any]) -> list[Image.Image]:
        n = len(gens)
        given = dict(args)
        if isinstance(given.get("negative_prompt"), str):  # one per image, as the prompts
            given["negative_prompt"] = [given["negative_prompt"]] * n
        if type(pipe).__name__ in REFERENCE_EDITS:
            images = shared if len(shared) > 1 else source
        else:
            images = [source] * n
        result = pipe(prompt=[instruction] * n, image=images, generator=gens, **given, **extra)
        return list(result.images)

    made = _in_batches(model, seeds, call, progress, steps, notes)
    return [_fit_size(image, im) for im in made]


class DiffusersEditor(_DiffusersBackend):
    """An instruction-based editing pipeline (see ``EDIT_PIPELINES``)."""

    role = "editor"

    def __init__(self, model: str, image_guidance: float | None = None, **kw: Any) -> None:
        super().__init__(model, **kw)
        self.image_guidance = image_guidance

    @serialised_load(lambda self: self.pipe is not None)
    def load(self) -> DiffusersEditor:
        if self.pipe is not None:
            return self
        shared = self._generator_pipe()
        if shared is not None:
            log.info("%s: editing with the generator's pipeline (one set of weights)", self.model)
            self.pipe = shared
            return self
        diffusers = require("diffusers", "diffusers", "the diffusers: backends", "local")
        dtype = pick_dtype(self.device, self.dtype_name)
        pipe = load_pipeline(
            diffusers.DiffusionPipeline, self.model, dtype, self.revision, self.variant
        )
        kind = type(pipe).__name__
        if kind not in EDIT_PIPELINES:
            raise ValueError(
                f"{self.model} is a {kind}, not an instruction-editing pipeline "
                f"({', '.join(EDIT_PIPELINES)}); for strength-based editing use "
                f"'img2img:{self.model}'"
            )
        self.pipe = self._place(pipe)
        return self

    def _generator_pipe(self) -> Any:
        """The pipeline of a generator already created for the same model, device and dtype
        when it can also edit (FLUX.2-klein, Kontext): the weights are then loaded once."""

        for gen in instances("generator", f"diffusers:{self.model}"):
            same = (
                getattr(gen, "dtype_name", None) == self.dtype_name
                and gen.device == self.device
                and gen.cpu_offload == self.cpu_offload
            )
            if same:
                gen.load()
                if type(gen.pipe).__name__ in EDIT_PIPELINES:
                    return gen.pipe
        return None

    def _call_args(self, image: Image.Image) -> dict[str, Any]:
        kind = type(self.pipe).__name__
        args = dict(EDIT_PIPELINES[kind])
        if self.steps is not None:
            args["num_inference_steps"] = self.steps
        if self.guidance is not None:
            key = "true_cfg_scale" if "true_cfg_scale" in args else "guidance_scale"
            args[key] = self.guidance
        if self.image_guidance is not None and "image_guidance_scale" in args:
            args["image_guidance_scale"] = self.image_guidance
        if kind in SIZED_EDITS:
            m = SIZED_EDITS[kind]
            args["width"] = max(m, image.width // m * m)
            args["height"] = max(m, image.height // m * m)
        return args

    @property
    def reference_images(self) -> int:
        """Real photos an edit may carry beside the image: 2 for the pipelines that read a
        list of images (QwenImageEditPlus takes 3 images in all, FLUX.2-klein several),
        none for the others (known once the pipeline is loaded: a run's preflight loads
        it before asking)."""
        if self.pipe is None:
            self.load()
        return 2 if type(self.pipe).__name__ in REFERENCE_EDITS else 0

    def edit(
        self,
        image: Image.Image,
        instruction: str,
        seeds: Sequence[int],
        progress: Progress | None = None,
        references: Sequence[Image.Image] = (),
    ) -> list[Image.Image]:
        self.load()
        args = self._call_args(image)
        steps = int(args["num_inference_steps"])
        return _edit_batch(
            self.model, self.pipe, image, instruction, seeds, args, progress, steps,
            self.notes, list(references)[: self.reference_images],
        )  # fmt: skip


class DiffusersImg2Img:
    """Strength-based img2img that shares the weights of the generator ``diffusers:<model>``."""

    role = "editor"

    # where its other options go: the generator's whose weights it shares
    options_go_to = ("refine.backends.diffusers_backends:DiffusersGenerator",)

    def __init__(self, model: str, strength: float = 0.6, **generator_options: Any) -> None:
        if not 0.0 < strength <= 1.0:
            raise ValueError(f"strength must be in (0, 1], got {strength}")

        self.generator = create("generator", f"diffusers:{model}", **generator_options)
        self.strength = strength
        self.pipe: Any = None
        self.notes: list[str] = []  # batches made smaller for lack of memory (see take_notes)

    @property
    def id(self) -> str:
        return f"{self.prefix}:{self.generator.model}"

    def take_notes(self) -> list[str]:
        """What happened to the last calls' batches (and forget it)."""
        notes, self.notes = self.notes, []
        return notes

    def info(self) -> dict[str, str]:
        self.load()
        return {**self.generator.info(), "id": self.id, "pipeline": type(self.pipe).__name__}

    auto_pipeline = "AutoPipelineForImage2Image"  # what the generator's weights become

    @serialised_load(lambda self: self.pipe is not None)
    def load(self) -> DiffusersImg2Img:
        if self.pipe is None:
            diffusers = require("diffusers", "diffusers", f"the {self.prefix}: backend", "local")
            self.generator.load()
            self.pipe = getattr(diffusers, self.auto_pipeline).from_pipe(self.generator.pipe)
            self.pipe.set_progress_bar_config(disable=True)
        return self

    prefix = "img2img"

    def edit(
        self,
        image: Image.Image,
        instruction: str,
        seeds: Sequence[int],
        progress: Progress | None = None,
    ) -> list[Image.Image]:
        return self._edit(image, instruction, seeds, progress, {})

    def _edit(
        self,
        image: Image.Image,
        instruction: str,
        seeds: Sequence[int],
        progress: Progress | None,
        more: dict[str, Any],
    ) -> list[Image.Image]:
        self.load()
        args: dict[str, Any] = {"strength": self.strength, **more}
        if self.generator.steps is not None:
            args["num_inference_steps"] = self.generator.steps
        if self.generator.guidance is not None:
            args["guidance_scale"] = self.generator.guidance
        steps = args.get("num_inference_steps") or _default_steps(self.pipe)
        return _edit_batch(
            self.generator.model,
            self.pipe,
            image,
            instruction,
            seeds,
            args,
            progress,
            max(1, int(steps * self.strength)),
            self.notes,
        )


class DiffusersInpainter(DiffusersImg2Img):
    """Inpainting that shares the weights of the generator ``diffusers:<model>``: an edit
    restricted to regions (``--localize``) changes the pixels inside the mask the boxes
    make, and the original pixels outside it are pasted back exactly after decoding."""

    prefix = "inpaint"
    auto_pipeline = "AutoPipelineForInpainting"
    localizes = "mask"  # takes a region as a mask

    def __init__(self, model: str, strength: float = 0.9, **generator_options: Any) -> None:
        super().__init__(model, strength, **generator_options)

    def edit(
        self,
        image: Image.Image,
        instruction: str,
        seeds: Sequence[int],
        progress: Progress | None = None,
        regions: Sequence[Sequence[float]] = (),
        mask: Image.Image | None = None,
    ) -> list[Image.Image]:
        """Edits of ``image`` inside ``regions`` ([x0, y0, x1, y1] fractions) and a drawn
        ``mask`` (one channel, the image's size; neither: the whole image), every pixel
        outside them the original's."""
        from PIL import Image as PILImage

        from refine.backends.regions import paste_outside, region_array

        if not regions and mask is None:
            regions = [[0.0, 0.0, 1.0, 1.0]]
        drawn = region_array(list(regions), image.size, mask)
        inpaint = PILImage.fromarray(drawn.astype("uint8") * 255, mode="L")
        made = self._edit(image, instruction, seeds, progress, {"mask_image": inpaint})
        return [paste_outside(image, m, inpaint) for m in made]
