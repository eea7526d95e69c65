"""What ``refine app`` serves: the operator's choices as a plan whose fields carry their
flag, help and bounds (the command's options are made from them, as a task's are from its
Plan), checked by its own validators; :func:`serve_plan` starts the app with them."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, field_validator

from refine.records import option
from refine.settings import upper


class ServePlan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    profile: str | None = option(
        None, "Default: gemini with a key, else local-gpu on a CUDA GPU, else cpu."
    )
    out: str = option("runs", "Folder for run directories.")
    host: str | None = option(
        None,
        "Address to serve on. Default: GRADIO_SERVER_NAME, else REFINE_HOST, else 127.0.0.1.",
    )
    port: int | None = option(
        None, "Default: GRADIO_SERVER_PORT, else PORT, else 7860.", ge=1, le=65535
    )
    share: bool = option(False, "A public gradio.live link.")
    auth: str | None = option(None, "USER:PASS required to open the app.")
    backends: list[str] = option(
        help="Override a role: ROLE=NAME.", flag="--backend", given="repeat", default_factory=list
    )
    admin: list[str] = option(
        help="A user (of --auth or a Hugging Face login) who changes the shared references "
        "and tunes from every run. Repeatable.",
        given="repeat",
        default_factory=list,
    )
    max_rounds: int = option(
        10, "Editing rounds a visitor's run may ask for.", ge=0, le=upper("rounds")
    )
    max_candidates: int = option(
        8, "Edit candidates per round a run may ask for.", ge=1, le=upper("candidates")
    )
    max_run_minutes: float = option(30.0, "Wall time of one visitor's run.", ge=0.1, le=1440.0)
    max_run_calls: int = option(400, "Model calls of one visitor's run.", ge=1)
    runs_per_visitor_per_hour: int | None = option(
        None,
        "Runs one visitor (and one client address) may start in an hour; 0: no limit. "
        "Default: 6 when the app listens beyond this machine (--host, --share), else none.",
        ge=0,
    )
    daily_calls: int | None = option(None, "Model calls a day for all visitors together.", ge=1)
    trust_proxy: bool = option(
        False,
        "Read the client address from X-Forwarded-For (only behind a proxy that sets it).",
    )

    @field_validator("profile")
    @classmethod
    def _profile(cls, name: str | None) -> str | None:
        if name:
            from refine.profiles import load_profile

            load_profile(name)  # a ValueError names the profiles there are
        return name

    @field_validator("auth")
    @classmethod
    def _auth(cls, value: str | None) -> str | None:
        if value:
            user, sep, password = value.partition(":")
            if not sep or not user or not password:
                raise ValueError("use USER:PASS")
        return value

    @field_validator("backends")
    @classmethod
    def _backends(cls, values: list[str]) -> list[str]:
        from refine.settings import parse_backends

        parse_backends(values)  # a SettingsError (a ValueError) names the bad item
        return values

    @field_validator("admin")
    @classmethod
    def _admin(cls, names: list[str]) -> list[str]:
        names = [a.strip() for a in names]
        if any(not n or not n.isprintable() for n in names):
            raise ValueError("give a user name")
        return names


def serve_plan(plan: ServePlan) -> None:
    """Serve the app as ``plan`` says; where it listens and the runs a visitor may start an
    hour follow from the address (a DeployError names a bad variable)."""
    import ui.app  # looked up at the call: a test replaces ui.app.serve
    from refine.settings import parse_backends
    from ui.deploy import listen_address
    from ui.limits import Limits
    from ui.quotas import PUBLIC_RUNS_PER_HOUR, Quotas

    limits = Limits(
        plan.max_rounds, plan.max_candidates, plan.max_run_minutes, plan.max_run_calls
    ).check()
    host, port = listen_address(host=plan.host, port=plan.port, default_host="127.0.0.1")
    per_hour = plan.runs_per_visitor_per_hour
    if per_hour is None:
        local = host in ("127.0.0.1", "localhost", "::1") and not plan.share
        per_hour = 0 if local else PUBLIC_RUNS_PER_HOUR
    credentials = tuple(plan.auth.split(":", 1)) if plan.auth else None
    ui.app.serve(
        plan.profile,
        plan.out,
        host,
        port,
        plan.share,
        credentials,
        parse_backends(plan.backends),
        admins=plan.admin,
        limits=limits,
        quotas=Quotas(Path(plan.out), per_hour or None, plan.daily_calls),
        trust_proxy=plan.trust_proxy,
    )
