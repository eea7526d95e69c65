"""What the app's /apply takes beside the instruction, made up by a client: the region
editor's value and the lists of a change of references are refused in one line each, before
any layer is converted or any descriptor reaches the run (ui/views/point.py)."""

from __future__ import annotations

import pytest
from PIL import Image

from ui.views.point import reference_edit, region_mask


def test_a_made_up_region_is_refused_before_it_is_read():
    bg = Image.new("RGB", (64, 48))
    layer = Image.new("RGBA", (64, 48))
    layer.paste((255, 0, 255, 255), (32, 24, 64, 48))
    for value, said in (
        ("a path", "the region is the editor's value"),
        ({"background": bg, "layers": ["x"]}, "the region's layers are images"),
        ({"background": bg, "layers": [layer] * 5}, "the region has 5 layers"),
        ({"background": bg, "layers": [layer.resize((32, 24))]}, "is 32x24, the image 64x48"),
    ):
        with pytest.raises(ValueError, match=said):
            region_mask(value)
    # a layer the size of the client's background but not of the image under review
    with pytest.raises(ValueError, match="is 64x48, the image 128x96"):
        region_mask({"background": bg, "layers": [layer]}, (128, 96))
    # nothing painted: no region; painted: the painted pixels, one channel
    assert region_mask({"background": bg, "layers": [Image.new("RGBA", (64, 48))]}) is None
    mask = region_mask({"background": bg, "layers": [layer]})
    assert mask.mode == "L" and mask.getbbox() == (32, 24, 64, 48)


def test_a_made_up_change_of_references_is_refused_naming_its_list():
    for args, said in (
        ((["objects"], None, None, None), "reference descriptors not wanted here: 'objects'"),
        (("objects: rug", None, None, None), "not wanted here: a list of the offered choices"),
        ((None, "rugs", None, None), "descriptors of your own: 'rugs' is dimension: phrase"),
        ((None, "objects: a\x1bb", None, None), "one line of printable text"),
        ((None, "\n".join(["objects: x"] * 65), None, None), "at most 64 lines"),
        ((None, None, [1], None), "stereotype candidates not to count: a list"),
        (
            (None, None, None, "y" * 121),
            "stereotype candidates of your own: a descriptor is at most",
        ),
    ):
        with pytest.raises(ValueError, match=said):
            reference_edit(*args)
    assert reference_edit(None, "", [], "") is None
    edit = reference_edit(["objects: Basket of flatbreads"], "attire: a chador", [], "")
    assert [(d.dimension, d.phrase) for d in edit.removed + edit.added] == [
        ("objects", "Basket of flatbreads"),
        ("attire", "a chador"),
    ]
