"""Profiles: one backend name per role, stored as TOML in ``assets/profiles/``."""

from __future__ import annotations

import tomllib
from pathlib import Path

from refine.assets import assets_dir
from refine.backends import device
from refine.backends.profile import Profile
from refine.backends.registry import ROLES, info, split_name

__all__ = [
    "Profile",
    "choose_profile",
    "list_profiles",
    "load_profile",
    "profiles_dir",
    "slow_notice",
    "write_profile",
]


def profiles_dir() -> Path:
    return assets_dir() / "profiles"


def list_profiles() -> list[str]:
    from refine.assets import bundled_names

    return bundled_names("profile")


def load_profile(name_or_path: str) -> Profile:
    """A bundled profile by name, or a profile file by path; every name is checked."""
    from refine.assets import bundled_or_file

    path, _ = bundled_or_file(name_or_path, "profile")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"{path}: invalid TOML ({err})") from err
    roles = data.get("roles")
    if not isinstance(roles, dict) or not roles:
        raise ValueError(f"{path}: needs a [roles] table naming one backend per role")
    for role, name in roles.items():
        if role not in ROLES:
            raise ValueError(f"{path}: unknown role {role!r}; roles are {', '.join(ROLES)}")
        if not isinstance(name, str):
            raise ValueError(f"{path}: roles.{role} must be a backend name string")
        try:
            split_name(role, name)
        except ValueError as err:
            raise ValueError(f"{path}: roles.{role}: {err}") from err
    options = data.get("options", {})
    if not isinstance(options, dict) or not all(isinstance(v, dict) for v in options.values()):
        raise ValueError(f"{path}: [options.<role>] tables must hold backend options")
    for role, given in options.items():
        if role not in roles:
            raise ValueError(f"{path}: options.{role} given but roles.{role} is not set")
        # an option the role's backend does not take, refused now rather than at its build
        info(role, roles[role]).check_options(given, f"{path}: options.{role}.")
    refs = data.get("refs", {})
    if not isinstance(refs, dict) or set(refs) - {"proposers", "refiner"}:
        raise ValueError(f"{path}: [refs] may hold 'proposers' (a list) and 'refiner'")
    proposers = refs.get("proposers", [])
    if not isinstance(proposers, list) or not all(isinstance(n, str) for n in proposers):
        raise ValueError(f"{path}: refs.proposers must be a list of llm backend names")
    for name in [*proposers, *([refs["refiner"]] if "refiner" in refs else [])]:
        try:
            split_name("llm", name)
        except (ValueError, TypeError) as err:
            raise ValueError(f"{path}: refs: {err}") from err
    tau = data.get("tau")
    if tau is not None:
        from metrics.ahead import check_tau

        try:
            tau = check_tau(tau)
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None
    round_seconds = data.get("round_seconds")
    if round_seconds is not None and (
        isinstance(round_seconds, bool)
        or not isinstance(round_seconds, int | float)
        or round_seconds <= 0
    ):
        raise ValueError(f"{path}: round_seconds must be a positive number of seconds")
    costs = data.get("costs", {})
    if not isinstance(costs, dict) or not all(
        r in ROLES and isinstance(v, int | float) and not isinstance(v, bool) and v >= 0
        for r, v in costs.items()
    ):
        raise ValueError(
            f"{path}: [costs] holds a price in USD per call (a number >= 0) for each role "
            f"of {', '.join(ROLES)}"
        )
    costs_batch = data.get("costs_batch")
    if costs_batch is not None and (
        isinstance(costs_batch, bool)
        or not isinstance(costs_batch, int | float)
        or not 0 < costs_batch <= 1
    ):
        raise ValueError(f"{path}: costs_batch is the share of [costs] a batch job pays (0-1]")
    return Profile(
        path.stem,
        str(data.get("description", "")),
        dict(roles),
        path,
        options,
        dict(refs),
        None if tau is None else float(tau),
        str(data.get("tau_source", "")),
        None if round_seconds is None else float(round_seconds),
        str(data.get("round_source", "")),
        {r: float(v) for r, v in costs.items()},
        str(data.get("costs_source", "")),
        None if costs_batch is None else float(costs_batch),
    )


def choose_profile() -> tuple[str, str]:
    """The profile a front end should use when none is named, and a line saying why:
    gemini with an API key, else local-gpu with a CUDA GPU, else the cpu profile with the
    time a round takes there."""
    import os

    from refine.backends.registry import info

    # the keys the gemini backend reads, as it registers them (GEMINI_API_KEY, GOOGLE_API_KEY)
    if any(os.environ.get(k) for k in info("observer", "gemini:x").key_env):
        return "gemini", "Gemini API key found: the gemini profile runs every model."

    gpu = device.gpu_name()
    if gpu:
        return "local-gpu", f"GPU {gpu}: the local-gpu profile."
    return "cpu", slow_notice(load_profile("cpu"), chosen_for_lack=True)


def slow_notice(
    profile: Profile, chosen_for_lack: bool = False, run_minutes: float | None = None
) -> str:
    """What a visitor is told about a profile that runs on the processor (one with a
    measured ``round_seconds``): the time a round takes, how many fit in a run's time
    budget of ``run_minutes``, and how to go faster; ``chosen_for_lack``: it was picked
    because there is neither a GPU nor a key. Other profiles are only named."""
    if profile.round_seconds is None:
        return f"profile: {profile.name}"
    why = "no GPU and no API key were found, so " if chosen_for_lack else ""
    expect = ""
    if profile.round_seconds:
        minutes = profile.round_seconds / 60
        expect = f" Expect about {minutes:.0f} min an editing round ({profile.round_source})."
        if run_minutes:
            rounds = int(run_minutes * 60 // profile.round_seconds)
            expect += (
                f" A run stops at its budget of {run_minutes:g} min: about {rounds} editing "
                "round(s)."
            )
    return (
        f"CPU profile ({profile.name}): {why}the smallest current models run on this "
        f"machine's processor.{expect} Set GEMINI_API_KEY (Google AI Studio) or "
        "start the app on a machine with a CUDA GPU for rounds in seconds."
    )


def write_profile(
    base: Path,
    out: Path,
    tau: float,
    source: str,
    roles: dict[str, str],
    options: dict[str, dict[str, object]],
) -> None:
    """A copy of the profile file ``base`` with ``tau`` and its source, and the roles and
    options in use (a --backend override is part of what the value was calibrated for)."""
    data = tomllib.loads(base.read_text(encoding="utf-8"))
    lines = [
        f"description = {_quoted(str(data.get('description', '')))}",
        "",
        "# calibrated with refine calibrate-tau",
        f"tau = {tau:.4f}",
        f"tau_source = {_quoted(source)}",
        "",
        "[roles]",
        *(f"{role} = {_quoted(name)}" for role, name in roles.items()),
    ]
    for role, opts in options.items():
        if role in roles and opts:
            lines += ["", f"[options.{role}]", *(f"{k} = {_toml(v)}" for k, v in opts.items())]
    refs = data.get("refs", {})
    if refs:
        lines += ["", "[refs]", *(f"{k} = {_toml(v)}" for k, v in refs.items())]
    out.parent.mkdir(parents=True, exist_ok=True)
    from refine.io.files import atomic_write_text

    atomic_write_text(out, "\n".join(lines) + "\n")


def _toml(value: object) -> str:
    """A TOML value for the plain kinds profiles hold (strings, numbers, booleans, lists)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, int | float):
        return repr(value)
    return _quoted(str(value))


def _quoted(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    import json

    return json.dumps(text)
