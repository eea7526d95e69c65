"""Jobs that run many cells: typed cells and their store (``cells``), the engine interface
and its choice (``engine``; Ray in ``ray``, the only module that imports it), the task
interface (``task``) and the tasks on it (``tasks``: bench, concepts, batch, the SoS bank)."""
