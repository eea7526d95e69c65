"""What each many-cell job makes and how it sums up: ``batch`` (runs from a spec file),
``bench`` (generators on the CULTIVate catalog), ``concepts`` (CUBE diversity), ``sos_bank``
(multilingual image banks)."""
