"""A reference-image editing pipeline is given the source, then the photos, once for the
batch; another pipeline gets one source per edit and no photo."""

from __future__ import annotations

from types import SimpleNamespace

from PIL import Image

from refine.backends.diffusers_backends import _edit_batch


class _Pipe:
    def __init__(self) -> None:
        self.images = []

    def __call__(self, prompt, image, generator, **kw):
        self.images.append(image)
        return SimpleNamespace(images=[Image.new("RGB", (8, 8))] * len(prompt))


class QwenImageEditPlusPipeline(_Pipe):  # named as the pipeline that reads image lists
    pass


class InstructPix2PixPipeline(_Pipe):
    pass


def test_reference_photos_follow_the_source_in_a_reference_pipeline():
    source = Image.new("RGB", (8, 8), (200, 30, 30))
    photos = [Image.new("RGB", (8, 8), (0, 0, k)) for k in (1, 2)]
    pipe = QwenImageEditPlusPipeline()
    made = _edit_batch("m", pipe, source, "edit", [1, 2], {}, None, 1, [], photos)
    assert len(made) == 2
    (given,) = pipe.images  # one call for both seeds, the list shared by both
    assert [im.getpixel((0, 0)) for im in given] == [(200, 30, 30), (0, 0, 1), (0, 0, 2)]
    alone = QwenImageEditPlusPipeline()
    _edit_batch("m", alone, source, "edit", [1], {}, None, 1, [])
    assert isinstance(alone.images[0], Image.Image)  # the source alone, as before
    other = InstructPix2PixPipeline()
    _edit_batch("m", other, source, "edit", [1, 2], {}, None, 1, [])
    assert [im.getpixel((0, 0)) for im in other.images[0]] == [(200, 30, 30)] * 2
