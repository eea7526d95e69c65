"""The model backends of a run: a profile plus per-role overrides and options.

This is the one place that turns names into backend objects. Several threads may share one
``Backends`` (batch workers): creation is locked, and calls to a backend that does not
declare ``thread_safe = True`` (local models on one device) are serialised by one lock, so
only API backends run concurrently. Instances come from the registry's process-wide cache
(:func:`refine.backends.registry.create`), so a model loads once per process.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from metrics.ahead import DEFAULT_TAU, check_tau
from refine.backends.profile import Profile
from refine.backends.registry import create
from refine.usage import answers, check_stop

log = logging.getLogger(__name__)


class ModelsUnavailable(RuntimeError):
    """Models a run needs that cannot load or answer; one line each in ``problems``."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class Backends:
    def __init__(
        self,
        profile: Profile,
        overrides: dict[str, str] | None = None,
        options: dict[str, dict[str, Any]] | None = None,
        instances: dict[str, Any] | None = None,
    ) -> None:
        """``profile``: a loaded profile (:func:`refine.profiles.load_profile`);
        ``overrides`` replaces its backend name per role, ``options`` adds backend options
        per role; ``instances`` gives ready objects (any object following the role's
        protocol)."""

        if not isinstance(profile, Profile):
            raise TypeError(
                f"Backends takes a loaded profile (refine.profiles.load_profile), got "
                f"{type(profile).__name__} {profile!r}"
            )
        overrides = dict(overrides or {})
        self.profile = profile
        self.overrides = overrides
        self.extra_options = {role: dict(opts) for role, opts in (options or {}).items()}
        self.names = {**self.profile.roles, **overrides}
        # a profile's options belong to the profile's backend, not to an override
        self.options = {
            role: dict(opts)
            for role, opts in self.profile.options.items()
            if overrides.get(role, self.profile.roles.get(role)) == self.profile.roles.get(role)
        }
        for role, opts in self.extra_options.items():
            self.options.setdefault(role, {}).update(opts)
        self._made: dict[str, Any] = dict(instances or {})
        # the process's API answers before this set of models began its work: the versions
        # its records name are those of later answers (instances outlive one run)
        self.since = answers()
        for role, backend in self._made.items():
            self.names[role] = getattr(backend, "id", type(backend).__name__)
        self._create_lock = threading.Lock()
        self.model_lock = threading.RLock()

    def get(self, role: str) -> Any:
        """The backend of ``role`` (created on first use; weights load on first call)."""
        with self._create_lock:
            if role not in self._made:
                from refine.backends.registry import create

                if role not in self.names:
                    raise ValueError(f"profile {self.profile.name!r} names no {role} backend")
                self._made[role] = create(role, self.names[role], **self.options.get(role, {}))
            return self._made[role]

    @contextlib.contextmanager
    def using(self, role: str) -> Iterator[Any]:
        """The backend of ``role``, held under the model lock unless it is thread-safe. A
        stop asked for on the caller's work ends it here, before the model call."""

        check_stop()
        backend = self.get(role)
        if getattr(backend, "thread_safe", False):
            yield backend
        else:
            with self.model_lock:
                check_stop()
                yield backend

    def named(self, role: str, name: str, **extra: Any) -> Any:
        """The ``role`` backend called ``name``: this set's own when it has that name (with
        its options), else that model on this set's device for the role. ``extra`` options
        (a generator's LoRA adapters) make a backend of its own, with this set's options
        for the role when the name is its own."""
        if self.names.get(role) == name and not extra:
            return self.get(role)

        options = self.options.get(role, {})
        if self.names.get(role) == name:
            return create(role, name, **{**options, **extra})
        own = {"device": options["device"]} if "device" in options else {}
        return create(role, name, **{**own, **extra})

    def embedder_for(self, name: str) -> Any:
        """The image embedder called ``name`` (a CAIRE KB's or an SoS bank's)."""
        return self.named("image_embedder", name)

    def preflight(self, roles: list[str]) -> None:
        """Before anything is spent: load every local model of ``roles`` and ask the API
        about every API model (no paid call). All problems are raised together as
        :class:`ModelsUnavailable`, one line per problem (roles sharing one are joined)."""
        found: dict[str, list[str]] = {}
        checked: set[int] = set()
        for role in roles:
            try:
                backend = self.get(role)
                if id(backend) in checked:
                    continue
                checked.add(id(backend))
                check = getattr(backend, "verify", None) or getattr(backend, "load", None)
                if callable(check):
                    check()
            except Exception as err:  # every problem is reported, not only the first
                from refine.backends.loading import describe_error

                found.setdefault(describe_error(err), []).append(
                    f"{role} ({self.names.get(role, '?')})"
                )
        if found:
            raise ModelsUnavailable([f"{', '.join(who)}: {why}" for why, who in found.items()])

    def tau(self, given: float | None = None) -> tuple[float, str]:
        """(the match threshold, where it comes from): ``given`` when it is (checked
        against TAU_RANGE), else the profile's calibrated value while the profile's observer
        is used, else the AHEaD default. The one place tau is resolved."""

        if given is not None:
            return check_tau(given), "given"
        p = self.profile
        if p.tau is not None and self.names.get("observer") == p.roles.get("observer"):
            return p.tau, f"profile {p.name}: {p.tau_source or 'calibrated for its observer'}"
        return DEFAULT_TAU, (
            f"AHEaD default {DEFAULT_TAU} (no value calibrated for the observer "
            f"{self.names.get('observer', '?')}: see refine calibrate-tau)"
        )

    def ids(self) -> dict[str, str]:
        """The id of every backend created so far, per role."""
        return {role: getattr(self.get(role), "id", self.names[role]) for role in self._made}

    def info(self) -> dict[str, dict[str, str]]:
        """Each created backend's ``info()`` (id, device, dtype, revision), per role."""
        return {
            role: described(backend, self.names[role], role, self.since)
            for role, backend in list(self._made.items())
        }


def described(backend: Any, name: str, role: str = "", since: int = 0) -> dict[str, str]:
    """A backend's ``info()`` as records keep it: its id, what it reports (device, dtype,
    revision, an API model's ``model_version`` of the answers after answer ``since``: the
    work this record is of) and, for a model from the hub, the ``commit`` its weights
    resolved to; every value a string."""
    details: dict[str, Any] = {}
    describe = getattr(backend, "info", None)
    if callable(describe):
        try:
            details = (
                describe(since=since) if getattr(backend, "takes_since", False) else describe()
            )
        except Exception:  # a record of what ran must not stop the run
            log.warning("could not read the %s backend's info", role or name, exc_info=True)
    out = {"id": getattr(backend, "id", name), **details}
    if "revision" in details and "commit" not in details:  # a model from the hub
        out["commit"] = _commit(out["id"], details["revision"])
    return {k: str(v) for k, v in out.items()}


def _commit(backend_id: str, revision: str) -> str:
    """The commit a local model's weights came from (``PREFIX:REPO[+lora=...]`` at
    ``revision``), read from the hub cache, never asked online."""
    from refine.backends.lora import split_adapters
    from refine.backends.provenance import NO_REVISION, hub_commit

    name = split_adapters(backend_id.split(":", 1)[-1])[0]
    if "@" in name and not Path(name).exists():  # ORG/MODEL@REVISION, as ids name one
        name, _, pinned = name.partition("@")
        revision = revision or pinned
    try:
        return hub_commit(name, revision or None, online=False)
    except Exception:  # a record of what ran must not stop the run
        log.warning("could not resolve the commit of %s", backend_id, exc_info=True)
        return NO_REVISION
