"""CAIRE cultural relevance: user-built knowledge bases (``refine.evaluate.caire.kb``) and the
retrieval-augmented 1-5 judge (``refine.evaluate.caire.scorer``). Heavy packages load on use."""
