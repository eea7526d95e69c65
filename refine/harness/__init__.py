"""Jobs that run many cells: ``tasks`` (batch, bench, concepts, the SoS bank) and their Ray
engines (``batch_ray``, ``bench_ray``, ``bank_ray``)."""
