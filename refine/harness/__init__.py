"""Jobs that run many cells: typed cells and their store (``cells``), the engine interface
and its choice (``engine``; Ray in ``ray``), tasks on it (``task``; ``tasks``: bench,
concepts, batch, the SoS bank) and the batch's and bank's Ray drivers (``batch_ray``,
``bank_ray``)."""
