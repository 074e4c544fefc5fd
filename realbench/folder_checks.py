"""Set-up checks of the folders a command is given, each a one-line `ConfigError` (exit 2).

A path that is a file where a folder belongs, or a folder that is not a run store, is a mistake in
the command line, not a damaged store: it is named before anything is created or opened.
"""

from __future__ import annotations

from pathlib import Path

from realbench.errors import ConfigError


def require_output_folder(path: Path, option: str = "--out") -> None:
    """`path` is a folder or can be created as one: neither it nor any folder above it is a file."""
    for part in (path, *path.parents):
        if part.exists() or part.is_symlink():
            if not part.is_dir():
                where = "is a file" if part == path else f"sits under {part}, which is a file"
                raise ConfigError(
                    f"{option} {path} {where}, not a folder",
                    hint=f"pass a folder for {option} (it is created when missing)",
                )
            return


def require_run_store(path: Path) -> None:
    """`path` is an existing run-store folder (its index, or episode folders `store repair` can index)."""
    if not path.exists():
        raise ConfigError(f"{path} does not exist", hint="pass the --out folder of a `realbench run`")
    if not path.is_dir():
        raise ConfigError(
            f"{path} is a file, not a run-store folder", hint="pass the --out folder of a `realbench run`"
        )
    if not (path / "index.sqlite").exists() and not (path / "episodes").is_dir():
        raise ConfigError(
            f"{path} is not a run store (no index.sqlite, no episodes/)",
            hint="pass the --out folder of a `realbench run`",
        )
