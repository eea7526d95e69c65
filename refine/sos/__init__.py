"""Surface-over-Semantics reference banks (``refine.sos.bank``) and their analysis
(``refine.sos.report``). Heavy packages load on use."""
