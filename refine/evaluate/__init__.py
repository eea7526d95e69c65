"""Observe and score images: ``assess`` (AHEaD, EXAG, FAITH, drift, quality), ``references``
(the bundled pack) and ``refs_build`` (references built by language models),
``expectations`` (a prompt's cultural expectations, checked by the judge), ``caire`` (CAIRE
knowledge bases and the 1-5 scorer), ``sos`` (the SoS analysis of a bank)."""
