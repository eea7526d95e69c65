"""A small knowledge base (tea: red pictures with a text; rice: blue ones) on the tiny
SigLIP the loop fixtures use."""

from __future__ import annotations

import pytest


@pytest.fixture
def kb_dir(tmp_path, siglip_path):
    from refine.backends import create
    from refine.caire.kb import KnowledgeBase, read_source
    from tests.caire.test_kb import folder_source

    embedder = create("image_embedder", f"siglip:{siglip_path}", shared=False, device="cpu")
    kb = KnowledgeBase.open_or_create(tmp_path / "kb", embedder.id)
    kb.add(read_source(folder_source(tmp_path)), embedder)
    return tmp_path / "kb"
