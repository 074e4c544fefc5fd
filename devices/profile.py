"""Per-phone-model facts (devices/profiles/*.yaml): screen, density, ROM pop-ups, input method.

The shipped profiles are starting points written from typical values for each family of phones;
check them against the phones on your bench (``realbench devices --rig R`` shows what a phone
reports) before trusting them.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from realbench.errors import ConfigError, UnknownNameError
from realbench.taskpack import Popup

PROFILE_DIR = Path(__file__).parent / "profiles"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Screen(_Strict):
    width: int = Field(gt=0)
    height: int = Field(gt=0)
    density_dpi: int = Field(gt=0)


class PhoneProfile(_Strict):
    name: str = Field(min_length=1)
    description: str = ""
    rom: str = "stock"
    screen: Screen
    ime: str = Field(min_length=1, description="the input method the phone should use between episodes")
    popups: list[Popup] = Field(default_factory=list)
    settle_s: float = Field(default=0.3, ge=0, le=5, description="wait after launching an app")
    min_free_storage_mb: int = Field(default=500, ge=0)


def profile_names(directory: Path = PROFILE_DIR) -> list[str]:
    return sorted(p.stem for p in directory.glob("*.yaml"))


PROFILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def load_profile(name: str, directory: Path = PROFILE_DIR) -> PhoneProfile:
    """The profile `directory/<name>.yaml`. A name is a plain name (no folder, no `..`), resolved
    inside `directory` only, and read under the same size and alias budget as a task pack."""
    from realbench.safe_yaml import YamlRefused, load_yaml_text, read_yaml_file

    if not PROFILE_NAME.match(name) or ".." in name:
        raise ConfigError(
            f"{name!r} is not a phone profile name",
            hint=f"a profile is named by its file under devices/profiles/ without .yaml: {profile_names(directory)}",
        )
    root = directory.resolve()
    path = root / f"{name}.yaml"
    if not path.is_file() or path.resolve().parent != root:
        raise UnknownNameError("phone profile", name, profile_names(directory))
    try:
        raw = load_yaml_text(read_yaml_file(path, what="phone profile"))
        profile = PhoneProfile.model_validate(raw)
    except YamlRefused as exc:
        raise ConfigError(f"{path}: {exc.message}", hint=exc.hint) from None
    except (yaml.YAMLError, ValidationError) as exc:
        raise ConfigError(f"{path}: invalid phone profile: {exc}", hint="fix the field named above") from None
    if profile.name != name:
        raise ConfigError(
            f"{path}: profile name {profile.name!r} differs from its file name", hint=f"set name: {name}"
        )
    return profile
