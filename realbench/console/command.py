"""`realbench console` and `realbench capture`: wiring the rig's pool, the packs' stop controls and
the run stores into the console app."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from realbench.console.security import CONSOLE_LIMITS, console_guard, require_token
from realbench.errors import ConfigError

log = logging.getLogger(__name__)

TASKPACKS = Path(__file__).resolve().parents[2] / "taskpacks"
IDLE_SWEEP_S = 30.0


def pack_paths(paths: list[Path] | None) -> list[Path]:
    """The packs the console arms and records for (default: every pack under taskpacks/)."""
    return list(paths or sorted(p.parent for p in TASKPACKS.glob("*/pack.yaml")))


def load_packs(paths: list[Path] | None) -> list[Any]:
    from realbench.taskpack import load_pack

    return [load_pack(p) for p in pack_paths(paths)]


@contextlib.contextmanager
def console_app(
    *,
    rig: str | Path | None,
    stores: list[Path],
    data_dir: Path,
    packs: list[Path] | None = None,
    plans: list[Path] | None = None,
    pool: Any = None,
    token: str | None = None,
    loopback: bool = True,
    host: str = "",
    scrcpy: bool = True,
) -> Iterator[Any]:
    """The guarded ASGI app, with the rig's pool open for its lifetime. Tests pass `pool` (phones
    they started); the command passes `rig`."""
    from devices.farm.rig_targets import farm_pool
    from devices.rig import load_rig
    from realbench.console.app import ConsoleConfig, build_app
    from realbench.console.episodes import Stores
    from realbench.console.phones import ConsolePhones
    from realbench.store import RunStore

    for s in stores:
        RunStore(s, create=False).close()  # refuse a folder that is not a store, now
    with contextlib.ExitStack() as stack:
        if pool is None and rig is not None:
            pool = stack.enter_context(farm_pool(load_rig(rig) if not hasattr(rig, "phones") else rig))
        phones = None
        if pool is not None:
            phones = ConsolePhones(
                pool,
                load_packs(packs),
                confirmations=data_dir / "confirmations.jsonl",
                secrets=pool.rig.secret_values(),
                scrcpy=scrcpy,
            )
            stack.callback(phones.close)
            stop = threading.Event()
            stack.callback(stop.set)

            def sweep() -> None:
                while not stop.wait(IDLE_SWEEP_S):
                    phones.release_idle()

            threading.Thread(target=sweep, name="console-lease-sweep", daemon=True).start()
        store_set = Stores(stores)
        stack.callback(store_set.close)
        cfg = ConsoleConfig(
            phones=phones, stores=store_set, captures=data_dir / "captures", plans=list(plans or [])
        )
        if phones is not None:
            from realbench.console.recorder import Recorder

            cfg.recorder = Recorder(phones, data_dir=data_dir, packs=pack_paths(packs))
        yield console_guard(build_app(cfg), token=token, loopback=loopback, host=host)


def console_command(
    *,
    rig: str | None,
    stores: list[Path],
    host: str,
    port: int,
    token_env: str | None,
    data_dir: Path,
    packs: list[Path] | None,
    plans: list[Path] | None,
    scrcpy: bool = True,
) -> None:
    import uvicorn

    from realbench.http_guard import is_loopback, server_config

    token = require_token(host, token_env, dict(os.environ))
    if rig is None and not stores:
        raise ConfigError("nothing to show", hint="pass --rig R (phones) and/or --store DIR (runs)")
    with console_app(
        rig=rig,
        stores=stores,
        data_dir=data_dir,
        packs=packs,
        plans=plans,
        token=token,
        loopback=is_loopback(host),
        host=host,
        scrcpy=scrcpy,
    ) as app:
        log.warning("realbench console on http://%s:%d%s", host, port, " (token required)" if token else "")
        # Header deadline, header size and connection caps shared with every realbench server.
        uvicorn.Server(server_config(app, CONSOLE_LIMITS, host=host, port=port, log_level="warning")).run()


def capture_command(*, rig: str, serial: str, label: str, out: Path) -> Path:
    """One capture through the rig's pool (leased, so it never interleaves with an episode)."""
    from devices.capture_routes import check_label_route
    from devices.farm.rig_targets import farm_pool
    from devices.rig import load_rig
    from devices.vphone_check import require_vphone_up
    from realbench.console.capture import capture_screen

    if label:
        from analysis.fidelity.captures import ScreenLabel

        parsed = ScreenLabel.parse(label)  # before the phone: a label fidelity cannot score is refused
        check_label_route(parsed.clone, parsed.route)
    loaded = load_rig(rig)
    # A virtual rig's throwaway phones would be gone before the capture could be repeated.
    require_vphone_up(loaded, command="realbench capture", serial=serial)
    with farm_pool(loaded) as pool:
        if serial not in pool.serials:
            raise ConfigError(
                f"phone {serial} is not in rig {pool.rig.name!r}", hint=f"phones: {pool.serials}"
            )
        rec = pool.record(serial)
        secrets = pool.rig.secret_values()

        def redact(text: str) -> str:
            for s in secrets:
                text = text.replace(s, "•" * 6)
            return text

        with pool.lease(serial, holder="capture", timeout=10):
            return capture_screen(
                pool.phone(serial),
                out,
                label=label,
                profile=rec.profile.model_dump(mode="json"),
                redact=redact,
            )
