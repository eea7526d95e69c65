"""CAIRE cultural relevance: user-built knowledge bases (``refine.caire.kb``) and the
retrieval-augmented 1-5 judge (``refine.caire.scorer``). Heavy packages load on use."""
