"""Surface-over-Semantics reference banks (``refine.sos.bank``) and their analysis
(``refine.sos.analysis``; the page: ``refine.present.report.sos``). Heavy packages load on use."""
