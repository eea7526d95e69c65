"""The refinement loop: ``refiner`` (Refiner: a round as a numbered recipe), ``policy`` (pure
decisions), ``candidates`` (a round's candidates made and assessed), ``instructions``
(feedback turned into words), ``steps`` (per-round extras: CAIRE, languages, expectations)."""
