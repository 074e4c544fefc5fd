"""Rigs (rigs/*.yaml): which hosts, which phones, which apps, which accounts, how much at once.

Secrets never live in a rig: an account names the environment variables that hold its username
and password (``password_env: RB_BANK_PASSWORD``), and a rig with a literal password, token or
PIN is refused when it is loaded.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from devices.profile import PROFILE_DIR, PhoneProfile, load_profile
from realbench.errors import ConfigError
from realbench.hierarchy import Selector
from realbench.recipes import AccountFixture

ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
# Field names whose value would be a secret if written literally (matched as whole words of the key).
SECRET_WORDS = frozenset(
    {"password", "passwd", "pwd", "secret", "token", "pin", "passcode", "otp", "apikey", "credential"}
)
PACKAGE = r"^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


DEFAULT_ADB_PORT = 5037


def default_adb_port() -> int:
    """The adb server's port as adb itself picks it: $ANDROID_ADB_SERVER_PORT, else 5037."""
    value = os.environ.get("ANDROID_ADB_SERVER_PORT", "").strip()
    if not value:
        return DEFAULT_ADB_PORT
    if not value.isdigit() or not 0 < int(value) < 65536:
        raise ConfigError(
            f"ANDROID_ADB_SERVER_PORT={value!r} is not a port",
            hint="unset it (adb then uses 5037) or give a number from 1 to 65535",
        )
    return int(value)


class Host(_Strict):
    name: str = Field(min_length=1)
    address: str = "127.0.0.1"
    # a host without one uses the adb server the adb command would (so `adb devices` and the rig agree)
    adb_port: int = Field(
        default_factory=default_adb_port, gt=0, lt=65536, description="the adb server phones are plugged into"
    )


class PhoneSpec(_Strict):
    serial: str = Field(min_length=1)
    profile: str = Field(min_length=1)
    host: str = "local"
    accounts: list[str] = Field(default_factory=list)
    label: str = ""
    virtual: bool = Field(
        default=False, description="a virtual phone already running (results say virtual-phone)"
    )
    control_url: str | None = Field(
        default=None, description="a virtual phone's control channel (set by the farm when it starts one)"
    )


class VirtualPhones(_Strict):
    """Virtual phones the runner starts itself when they are not up (CI, demos)."""

    count: int = Field(default=2, ge=1, le=32)
    profile: str = "generic-1080x2400"
    host: str = "local"
    accounts: list[str] = Field(default_factory=list)
    drift: str = Field(default="mild", description="drift profile of the stand-in apps (none, mild, …)")
    screens: str = Field(default="auto", description="clone (Chromium), static (no browser) or auto")


class AppPin(_Strict):
    package: str = Field(pattern=PACKAGE)
    version: str | None = Field(default=None, description="versionName the phones must have; None = any")
    name: str = ""
    login_screen: Selector | None = Field(
        default=None,
        description="a control only the app's login screen shows; seen during an episode, the episode is env_invalid",
    )


class LoginStep(_Strict):
    """One step of an optional login recipe; `text` may use {username} and {password}."""

    tap: Selector | None = None
    into: Selector | None = None
    text: str | None = None
    wait: float | None = Field(default=None, gt=0, le=30)

    @model_validator(mode="after")
    def _one_kind(self) -> LoginStep:
        kinds = [self.tap is not None, self.text is not None, self.wait is not None]
        if sum(kinds) != 1:
            raise ValueError("a login step is exactly one of: tap, text (with optional into), wait")
        if self.into is not None and self.text is None:
            raise ValueError("'into' needs 'text'")
        return self


class Account(_Strict):
    name: str = Field(min_length=1)
    app: str = Field(pattern=PACKAGE)
    username_env: str | None = None
    password_env: str | None = None
    login: list[LoginStep] = Field(default_factory=list)
    fixture: AccountFixture | None = Field(
        default=None, description="what the test account really holds; real-side parameters are drawn from it"
    )

    @model_validator(mode="after")
    def _env_names(self) -> Account:
        for field in ("username_env", "password_env"):
            value = getattr(self, field)
            if value is not None and not ENV_NAME.fullmatch(value):
                raise ValueError(
                    f"{field} must name an environment variable (like RB_BANK_PASSWORD), not hold a value"
                )
        return self

    def env_names(self) -> list[str]:
        return [n for n in (self.username_env, self.password_env) if n]

    def login_env_names(self) -> list[str]:
        """The environment variables the login recipe will read: only those its steps type."""
        typed = " ".join(step.text for step in self.login if step.text)
        fields = (("username", self.username_env), ("password", self.password_env))
        return [env for key, env in fields if env and "{" + key + "}" in typed]

    def credentials(self) -> dict[str, str]:
        """{username, password} read from the environment now; raises ConfigError naming what is missing."""
        out: dict[str, str] = {}
        for key, env in (("username", self.username_env), ("password", self.password_env)):
            if env is None:
                continue
            value = os.environ.get(env)
            if not value:
                raise ConfigError(
                    f"account {self.name!r} needs the environment variable {env}",
                    hint=f"export {env}=... before running (the value is never written anywhere)",
                )
            out[key] = value
        return out


class Concurrency(_Strict):
    episodes_per_phone: int = Field(default=1, ge=1, le=1, description="one phone runs one episode at a time")
    lease_timeout_s: float = Field(
        default=600, gt=0, description="how long an episode may wait for a free phone"
    )
    quarantine_after: int = Field(
        default=3, ge=1, description="consecutive environment failures before a phone is set aside"
    )
    max_attempts: int = Field(
        default=3, ge=1, description="tries of one episode across phones before it is given up"
    )


class Rig(_Strict):
    name: str = Field(min_length=1)
    description: str = ""
    hosts: list[Host] = Field(default_factory=lambda: [Host(name="local")])
    phones: list[PhoneSpec] = Field(default_factory=list)
    virtual: VirtualPhones | None = None
    apps: list[AppPin] = Field(default_factory=list)
    accounts: list[Account] = Field(default_factory=list)
    concurrency: Concurrency = Field(default_factory=Concurrency)
    path: str | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _consistent(self) -> Rig:
        hosts = {h.name for h in self.hosts}
        if len(hosts) != len(self.hosts):
            raise ValueError("host names must be unique")
        serials = [p.serial for p in self.phones]
        if len(set(serials)) != len(serials):
            raise ValueError(f"phone serials must be unique (got {serials})")
        accounts = {a.name for a in self.accounts}
        for i, phone in enumerate(self.phones):
            if phone.host not in hosts:
                raise ValueError(f"phones.{i}: host {phone.host!r} is not among hosts {sorted(hosts)}")
            for acc in phone.accounts:
                if acc not in accounts:
                    raise ValueError(f"phones.{i}: account {acc!r} is not among accounts {sorted(accounts)}")
        if self.virtual is not None and self.virtual.host not in hosts:
            raise ValueError(f"virtual.host {self.virtual.host!r} is not among hosts {sorted(hosts)}")
        if not self.phones and self.virtual is None:
            raise ValueError("a rig needs phones (USB/Wi-Fi serials) or a virtual section")
        return self

    @property
    def is_virtual(self) -> bool:
        return self.virtual is not None

    def app_pin(self, package: str) -> AppPin | None:
        return next((a for a in self.apps if a.package == package), None)

    def account(self, name: str) -> Account:
        for a in self.accounts:
            if a.name == name:
                return a
        raise ConfigError(f"rig {self.name!r} has no account {name!r}", hint="add it under accounts:")

    def account_for(self, phone_accounts: list[str], package: str) -> Account | None:
        for name in phone_accounts:
            acc = self.account(name)
            if acc.app == package:
                return acc
        return None

    def host(self, name: str) -> Host:
        return next(h for h in self.hosts if h.name == name)

    def profile(self, name: str) -> PhoneProfile:
        return load_profile(name, self._profile_dir)

    @property
    def _profile_dir(self) -> Path:
        return PROFILE_DIR

    def env_names(self) -> list[str]:
        return sorted({n for a in self.accounts for n in a.env_names()})

    def missing_env(self) -> list[str]:
        return [n for n in self.env_names() if not os.environ.get(n)]

    def missing_login_env(self, package: str, phones: list[PhoneSpec] | None = None) -> list[str]:
        """Unset variables that a login recipe will read on a run of `package` (a ticketing run
        does not need the bank account's password, nor an account without a recipe its own)."""
        used = {a for p in (self.phones if phones is None else phones) for a in p.accounts}
        if self.virtual is not None:
            used |= set(self.virtual.accounts)
        names = {n for a in self.accounts if a.name in used and a.app == package for n in a.login_env_names()}
        return sorted(n for n in names if not os.environ.get(n))

    def secret_values(self) -> list[str]:
        """The current values of every secret the rig names (for redaction; never to be written)."""
        return [v for n in self.env_names() if (v := os.environ.get(n))]


def _literal_secrets(value: Any, path: str = "") -> list[str]:
    found: list[str] = []
    if isinstance(value, dict):
        for key, sub in value.items():
            where = f"{path}.{key}" if path else str(key)
            words = set(re.split(r"[^a-z0-9]+", str(key).lower()))
            if words & SECRET_WORDS and not str(key).lower().endswith("_env") and sub not in (None, ""):
                found.append(where)
            found += _literal_secrets(sub, where)
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            found += _literal_secrets(sub, f"{path}.{i}")
    return found


def parse_rig(raw: Any, path: str = "<memory>") -> Rig:
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: a rig must be a YAML mapping", hint="see rigs/example-lab.yaml")
    literal = _literal_secrets(raw)
    if literal:
        raise ConfigError(
            f"{path}: refused: {', '.join(literal)} holds a secret written into the rig",
            hint="put the secret in an environment variable and name it, e.g. password_env: RB_BANK_PASSWORD",
        )
    try:
        rig = Rig.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(rig)'}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(f"{path}: invalid rig: {problems}", hint="fix the fields named above") from None
    for phone in rig.phones:
        rig.profile(phone.profile)  # unknown profiles fail now, not mid-run
    if rig.virtual is not None:
        rig.profile(rig.virtual.profile)
    rig.path = path
    return rig


def load_rig(path: str | Path) -> Rig:
    p = Path(path)
    if not p.exists():
        alt = Path("rigs") / f"{p.name}.yaml"
        if p.suffix == "" and alt.exists():
            p = alt
        else:
            raise ConfigError(f"no rig at {p}", hint="pass a file under rigs/, e.g. rigs/virtual.yaml")
    from realbench.safe_yaml import load_yaml_text, read_yaml_file

    text = read_yaml_file(p, what="rig")
    try:
        raw = load_yaml_text(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not valid YAML: {exc}", hint="fix the YAML syntax") from None
    return parse_rig(raw, str(p))


def rig_on_phones(template: Rig, phones: Sequence[Any], *, name: str) -> dict[str, Any]:
    """`template`'s apps and accounts (with their fixtures) on virtual phones already started
    (anything with a `serial` and a `control_url`), every account on every phone: the raw rig, for
    `parse_rig` or a rig file."""
    accounts = [a.model_dump(mode="json", exclude_none=True) for a in template.accounts]
    return {
        "name": name,
        "phones": [
            {
                "serial": p.serial,
                "profile": "generic-1080x2400",
                "virtual": True,
                "control_url": p.control_url,
                "accounts": [a["name"] for a in accounts],
            }
            for p in phones
        ],
        "apps": [a.model_dump(mode="json", exclude_none=True) for a in template.apps],
        "accounts": accounts,
    }
