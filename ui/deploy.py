"""The app as a hosted demo: everything read from the environment (a Hugging Face Space's
variables and secrets, or a container's ``-e`` options), never from files in the image.

=========================  ==========================================================
variable                   meaning (default)
=========================  ==========================================================
``GEMINI_API_KEY``         the API key (a Space secret); required by the gemini profile
``REFINE_PROFILE``         gemini, local-gpu, small-gpu, cpu, vllm or a .toml path (gemini)
``REFINE_OUT``             where runs are kept (``/data/runs`` when ``/data`` is
                           mounted and writable, else ``runs``: lost on restart)
``REFINE_MAX_ROUNDS``      editing rounds a visitor's run may ask for (10)
``REFINE_MAX_CANDIDATES``  candidates per round (8)
``REFINE_MAX_RUN_MINUTES`` wall time of one run (30)
``REFINE_MAX_RUN_CALLS``   model calls of one run (400)
``REFINE_BACKENDS``        role overrides, ``ROLE=NAME`` separated by spaces (none)
``REFINE_RUNS_PER_HOUR``   runs one visitor (and one address) may start per hour (6; 0: no
                           limit)
``REFINE_DAILY_CALLS``     model calls a day for all visitors together (no limit)
``REFINE_TRUST_PROXY``     1: read the client address from X-Forwarded-For (on in a Space,
                           whose proxy sets it; off elsewhere, where a client could forge it)
``REFINE_AUTH``            ``USER:PASS`` required to open the app (none)
``REFINE_ADMINS``          comma-separated user names that change the shared references
``GRADIO_SERVER_NAME``     address to listen on (Gradio's own variable; before
                           ``REFINE_HOST``)
``GRADIO_SERVER_PORT``     port (Gradio's own variable; before ``PORT``)
``REFINE_HOST``            address to listen on (``0.0.0.0``)
``PORT``                   port (7860, as a Space expects)
``OAUTH_CLIENT_ID``        set by a Space with ``hf_oauth: true``: a Hugging Face login
                           button is shown and the login names the visitor
=========================  ==========================================================

A bad or missing value stops the start with one line naming the variable
(:class:`DeployError`); ``python -m ui.deploy`` is the Space's and the container's entry.
Where the app listens is decided the same way for ``refine app`` and a deployment
(:func:`listen_address`): explicit options, then Gradio's variables, then ``REFINE_HOST`` and
``PORT``, then the defaults.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refine.records import DEFAULT_PROFILE

PERSISTENT = Path("/data")  # where a Space mounts its storage bucket (a container, its volume)


class DeployError(ValueError):
    """A setting in the environment that the demo cannot start with."""


@dataclass(frozen=True)
class Deployment:
    profile: str
    out: Path
    persistent: bool  # whether runs survive a restart
    limits: Any
    host: str = "0.0.0.0"
    port: int = 7860
    auth: tuple[str, str] | None = None
    admins: tuple[str, ...] = ()
    login: bool = False  # a Hugging Face login button (a Space with hf_oauth)
    runs_per_hour: int | None = None  # per visitor and address; None: no limit
    daily_calls: int | None = None
    trust_proxy: bool = False
    backends: dict[str, str] = field(default_factory=dict)  # role overrides
    notes: list[str] = field(default_factory=list)

    def status(self) -> str:
        """The line the page shows under its title: the profile and where runs are kept."""
        if self.persistent:
            kept = "saved runs are kept on the storage mounted at /data"
        else:  # the page never shows a server path: the folder is the operator's to know
            kept = (
                "saved runs are **lost when the demo restarts** "
                "(no storage bucket is mounted at /data)"
            )
        from refine.profiles import load_profile, slow_notice

        notice = slow_notice(load_profile(self.profile), run_minutes=self.limits.run_minutes)
        text = f"{notice} · {kept} · limits: "
        text += self.limits.describe()
        quotas = self.quotas().describe()
        return text + (f" · quotas: {quotas}" if quotas else "")

    def quotas(self) -> Any:
        from ui.quotas import Quotas

        return Quotas(self.out, self.runs_per_hour, self.daily_calls)


def _number(env: Mapping[str, str], name: str, kind: type, default: Any) -> Any:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return kind(raw)
    except ValueError:
        what = "whole number" if kind is int else "number"
        raise DeployError(f"{name}={raw!r}: not a {what}") from None


def listen_address(
    env: Mapping[str, str] | None = None,
    host: str | None = None,
    port: int | None = None,
    default_host: str = "0.0.0.0",
) -> tuple[str, int]:
    """Where the app listens: ``host`` and ``port`` when given (command-line options), else
    Gradio's ``GRADIO_SERVER_NAME`` / ``GRADIO_SERVER_PORT``, else the deployment's
    ``REFINE_HOST`` / ``PORT``, else ``default_host`` and 7860. A bad value is a
    :class:`DeployError` naming its variable."""
    env = os.environ if env is None else env
    if host is None:
        for name in ("GRADIO_SERVER_NAME", "REFINE_HOST"):
            if env.get(name, "").strip():
                host = env[name].strip()
                if any(c.isspace() for c in host) or not host.isprintable():
                    raise DeployError(f"{name}={host!r}: an address such as 0.0.0.0")
                break
        else:
            host = default_host
    if port is None:
        for name in ("GRADIO_SERVER_PORT", "PORT"):
            if env.get(name, "").strip():
                port = _number(env, name, int, None)
                if not 1 <= port <= 65535:
                    raise DeployError(f"{name}={port}: a port from 1 to 65535")
                break
        else:
            port = 7860
    return host, port


def _writable(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


def from_env(env: Mapping[str, str] | None = None) -> Deployment:
    """The deployment the environment describes; :class:`DeployError` names what is wrong."""
    from refine.profiles import load_profile
    from ui.limits import Limits

    env = os.environ if env is None else env
    profile = env.get("REFINE_PROFILE", "").strip() or DEFAULT_PROFILE
    try:
        loaded = load_profile(profile)
    except ValueError as err:
        raise DeployError(f"REFINE_PROFILE: {err}") from None
    from refine.settings import SettingsError, parse_backends

    try:
        backends = parse_backends(env.get("REFINE_BACKENDS", "").split())
    except SettingsError as err:
        raise DeployError(f"REFINE_BACKENDS: {err.message}") from None
    roles = {**loaded.roles, **backends}
    from refine.backends.registry import missing_keys

    for role, name, keys in missing_keys(roles, env):  # an API model's key, said at once
        raise DeployError(
            f"{keys[0]} is not set: the {profile} profile's {role} {name} calls an API. Add it "
            f"as a secret (Space settings > Variables and secrets) or pass -e {keys[0]}=... to "
            "the container"
        )
    given = env.get("REFINE_OUT", "").strip()
    if given:
        out = Path(given)
        persistent = out.resolve().is_relative_to(PERSISTENT) and _writable(PERSISTENT)
    elif _writable(PERSISTENT):
        out, persistent = PERSISTENT / "runs", True
    else:
        out, persistent = Path("runs"), False
    asked = Limits(
        _number(env, "REFINE_MAX_ROUNDS", int, Limits.rounds),
        _number(env, "REFINE_MAX_CANDIDATES", int, Limits.candidates),
        _number(env, "REFINE_MAX_RUN_MINUTES", float, Limits.run_minutes),
        _number(env, "REFINE_MAX_RUN_CALLS", int, Limits.run_calls),
    )
    try:
        limits = asked.check()
    except ValueError as err:
        variable = str(err).split(":", 1)[0].lstrip("-").upper().replace("-", "_")
        raise DeployError(f"REFINE_{variable}: {str(err).split(':', 1)[1].strip()}") from None
    auth = None
    if env.get("REFINE_AUTH"):
        user, sep, password = env["REFINE_AUTH"].partition(":")
        if not sep or not user or not password:
            raise DeployError("REFINE_AUTH: use USER:PASS")
        auth = (user, password)
    admins = tuple(a.strip() for a in env.get("REFINE_ADMINS", "").split(",") if a.strip())
    from ui.quotas import PUBLIC_RUNS_PER_HOUR

    runs_per_hour = _number(env, "REFINE_RUNS_PER_HOUR", int, PUBLIC_RUNS_PER_HOUR)
    daily_calls = _number(env, "REFINE_DAILY_CALLS", int, None)
    if runs_per_hour < 0:
        raise DeployError(f"REFINE_RUNS_PER_HOUR={runs_per_hour}: 0 (no limit) or more")
    if daily_calls is not None and daily_calls < 1:
        raise DeployError(f"REFINE_DAILY_CALLS={daily_calls}: 1 or more")
    host, port = listen_address(env)
    return Deployment(
        profile=profile,
        out=out,
        persistent=persistent,
        limits=limits,
        host=host,
        port=port,
        auth=auth,
        admins=admins,
        login=bool(env.get("OAUTH_CLIENT_ID")),
        backends=backends,
        runs_per_hour=runs_per_hour or None,
        daily_calls=daily_calls,
        # a Space (SPACE_ID set) is behind Hugging Face's proxy
        trust_proxy=env.get("REFINE_TRUST_PROXY", "1" if env.get("SPACE_ID") else "").strip()
        in ("1", "true", "yes"),
    )


def build(
    deployment: Deployment,
    on_service: Callable[[Any], Any] | None = None,
    **service_options: Any,
) -> Any:
    """The app of a deployment (not launched); ``service_options`` go to the run service
    (backend options); ``on_service`` is called with the service before the app is built
    (a ZeroGPU Space loads its models there)."""
    from refine.service import RunService
    from ui.app import build_app

    deployment.out.mkdir(parents=True, exist_ok=True)
    service = RunService(
        deployment.profile,
        out=deployment.out,
        backends=deployment.backends or None,
        admins=[f"user:{a}" for a in deployment.admins],
        **service_options,
    )
    if on_service is not None:
        on_service(service)
    return build_app(
        service,
        deployment.status(),
        deployment.limits,
        login=deployment.login,
        quotas=deployment.quotas(),
        trust_proxy=deployment.trust_proxy,
    )


def main(env: Mapping[str, str] | None = None) -> None:
    """Start the demo from the environment, or stop with one line saying what is missing."""
    from refine.backends.imports import steady_collector

    if env is None:  # this process is the demo's own
        steady_collector()
    try:
        deployment = from_env(env)
    except DeployError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    serve(build(deployment), deployment)


def serve(demo: Any, deployment: Deployment) -> None:
    """Serve a deployment's app where it listens, until stopped."""
    from ui.app import launch, launch_options

    launch(
        demo,
        server_name=deployment.host,
        server_port=deployment.port,
        auth=deployment.auth,
        **launch_options(deployment.out),
    )


if __name__ == "__main__":
    main()
