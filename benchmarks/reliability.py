"""The standing reliability suite: what a careless (or hostile) user can do to realbench, tried
for real, with what was lost, done twice or leaked counted from the evidence (files on disk, the
index, the servers' session stores and memory), never from the guard's own report.

Cases (``--case NAME`` picks some; all run by default):

- concurrent_writers: two `realbench run` into one --out at once (clone target, Chromium);
- truncated_index: index.sqlite cut to 0 bytes, then `show`, `run`'s writer, `store repair`;
- damaged_episodes: one episode folder deleted, garbage in another's steps.jsonl;
- store_links: a symlinked writer.lock, run folder and dangling index.sqlite, and a pending row
  pointing outside the store (what outside the store changed is counted as leaked);
- store_repair_unindexable: a copied episode folder and an episode whose seed is not a number
  through `store repair` (which must exit non-zero and leave a store `show` opens);
- server_bodies / server_nesting / server_sessions / server_origins / server_routes: the clone
  server with 10 MB bodies, 100 000-deep JSON, a session flood, cross-origin and rebinding
  requests, and hostile `ui.route` values;
- server_half_open: 1 100 half-open requests to `serve` under `ulimit -n 1024` (its open files,
  another client served meanwhile, everything dropped after the header deadline);
- server_get_creates: 1 100 GETs of /new/<clone> (what <img> tags on any page send): no session;
- loader_bombs: a YAML alias bomb and a 50 MB pack through `check-pack`;
- secret_echo: a model that echoes the API key, a base URL with credentials.

    python benchmarks/reliability.py            # every case, a table
    python benchmarks/reliability.py --json --case server_sessions --case loader_bombs
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from machine_info import cpu_model

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PACK = ROOT / "taskpacks" / "train_ticketing"


@dataclass
class CaseResult:
    name: str
    tried: str
    lost: int = 0
    doubled: int = 0
    leaked: int = 0
    ok: bool = True
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)


def _cli(
    *args: str, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "realbench", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full,
    )


def _one_line(done: subprocess.CompletedProcess[str]) -> bool:
    return done.returncode != 0 and "Traceback" not in done.stderr


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _folder_hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted((root / "episodes").rglob("*"))
        if p.is_file()
    }


# --- the run store ------------------------------------------------------------------------------


def _fill_store(root: Path, n: int = 6) -> list[str]:
    from realbench.episode import EndReason, EpisodeResult, StepRecord
    from realbench.outcome import Outcome, Verdict
    from realbench.store import EpisodeKey, RunStore

    ids = []
    with RunStore(root, writer="reliability suite") as store:
        store.ensure_run("r", pack="toy", app="toy", agent="golden", target="clone", config={"pack": "toy"})
        for i in range(n):
            result = EpisodeResult(
                task_id=f"t{i % 3}", seed=i, instruction="x", params={}, agent="golden", target="clone",
                device={"kind": "clone"}, outcome=Outcome.SUCCESS, end_reason=EndReason.TERMINATE,
                verdicts=[Verdict.ok()], steps=[StepRecord(index=0, action={"type": "back"}, raw="back")],
                started=time.time(), finished=time.time(),
            )  # fmt: skip
            ids.append(store.write_episode("r", EpisodeKey(f"t{i % 3}", i, i), 0, "toy", result))
    return ids


def case_concurrent_writers(work: Path) -> CaseResult:
    import sqlite3

    out = work / "store"
    tasks = work / "tasks.json"
    from realbench.taskpack import load_pack

    ids = [t.id for t in load_pack(PACK).tasks[:2]]
    tasks.write_text(json.dumps(ids))
    cmd = [sys.executable, "-m", "realbench", "run", "--pack", str(PACK), "--out", str(out), "--target", "clone",
           "--repeats", "2", "--tasks", f"@{tasks}", "--no-progress"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ]
    time.sleep(0.5)
    procs.append(
        subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    )
    outputs = [p.communicate(timeout=600) for p in procs]
    codes = [p.returncode for p in procs]
    again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    with sqlite3.connect(out / "index.sqlite") as db:
        rows = db.execute("SELECT task, seed, repeat FROM episodes WHERE outcome != 'env_invalid'").fetchall()
    planned = {(t, r, r) for t in ids for r in range(2)}
    refused = [i for i, c in enumerate(codes) if c != 0]
    named = bool(refused) and "being written by" in outputs[refused[0]][1]
    return CaseResult(
        "concurrent_writers",
        "two `realbench run` into one --out at once, then a third run",
        lost=len(planned - set(rows)),
        doubled=len(rows) - len(set(rows)),
        ok=len(refused) == 1 and named and again.returncode == 0,
        details={
            "exit_codes": codes,
            "second_writer_named_the_holder": named,
            "third_run_exit": again.returncode,
            "episodes": len(rows),
            "planned": len(planned),
        },  # fmt: skip
    )


def case_truncated_index(work: Path) -> CaseResult:
    from realbench.errors import StoreError
    from realbench.store import RunStore

    root = work / "store"
    ids = _fill_store(root)
    before = _folder_hashes(root)
    (root / "index.sqlite").write_bytes(b"")
    for extra in root.glob("index.sqlite-*"):
        extra.unlink()
    show = _cli("show", str(root))
    try:
        RunStore(root, writer="realbench run").close()
        writer_refused = False
    except StoreError:
        writer_refused = True
    untouched = _folder_hashes(root) == before
    repair = _cli("store", "repair", str(root), "--json")
    with RunStore(root, create=False) as store:
        back = {r["episode_id"] for r in store._query("SELECT episode_id FROM episodes")}
    return CaseResult(
        "truncated_index",
        "index.sqlite truncated to 0 bytes; `show`, a writer, then `store repair`",
        lost=len(set(ids) - back),
        ok=_one_line(show)
        and "disagrees" in show.stderr
        and writer_refused
        and untouched
        and repair.returncode == 0,
        details={
            "show_refused": _one_line(show),
            "writer_refused": writer_refused,
            "folders_untouched": untouched,
            "restored": len(json.loads(repair.stdout or "{}").get("restored", [])),
        },  # fmt: skip
    )


def case_damaged_episodes(work: Path) -> CaseResult:
    from realbench.store import RunStore

    root = work / "store"
    ids = _fill_store(root)
    with RunStore(root, create=False) as store:
        shutil.rmtree(store.episode_dir(ids[0]))
        (store.episode_dir(ids[1]) / "steps.jsonl").write_text("{garbage\n")
    show = _cli("show", str(root), "--json")
    damaged = set(json.loads(show.stdout or "{}").get("damaged", {}))
    check = _cli("store", "check", str(root), "--json")
    repair = _cli("store", "repair", str(root), "--json")
    requeued = set(json.loads(repair.stdout or "{}").get("requeued", []))
    with RunStore(root, create=False) as store:
        left = {r["episode_id"] for r in store._query("SELECT episode_id FROM episodes")}
    intact = set(ids[2:])
    return CaseResult(
        "damaged_episodes",
        "one episode folder deleted, garbage in another's steps.jsonl; show, check, repair",
        lost=len(intact - left),
        ok=damaged == {ids[0], ids[1]} and check.returncode == 1 and requeued == {ids[0], ids[1]},
        details={
            "named_damaged": sorted(damaged),
            "requeued": sorted(requeued),
            "intact_kept": len(intact & left),
        },
    )


# --- the clone server ---------------------------------------------------------------------------


def _outside_state(root: Path) -> dict[str, str]:
    """Every file and folder under `root` with its content hash ("dir" for a folder)."""
    out = {}
    for p in sorted(root.rglob("*")):
        out[str(p.relative_to(root))] = "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def case_store_links(work: Path) -> CaseResult:
    import sqlite3

    from realbench.errors import StoreError
    from realbench.store import RunStore

    outside = work / "outside"
    (outside / "victim").mkdir(parents=True)
    (outside / "precious.txt").write_bytes(b"keep me\n" * 64)
    (outside / "victim" / "data.txt").write_text("mine")
    before = _outside_state(outside)
    refused: dict[str, bool] = {}

    def attempt(name: str, store_dir: Path, **kwargs: Any) -> None:
        try:
            store = RunStore(store_dir, **kwargs)
        except StoreError:
            refused[name] = True
            return
        refused[name] = False
        store.close()

    lock_store = work / "lock"
    _fill_store(lock_store, 2)
    (lock_store / "writer.lock").unlink()
    (lock_store / "writer.lock").symlink_to(outside / "precious.txt")
    attempt("symlinked writer.lock", lock_store, writer="realbench run")
    run_store = work / "runlink"
    (run_store / "episodes").mkdir(parents=True)
    (run_store / "episodes" / "r").symlink_to(outside / "victim", target_is_directory=True)
    attempt("symlinked run folder", run_store, writer="realbench run")
    index_store = work / "index"
    index_store.mkdir()
    (index_store / "index.sqlite").symlink_to(outside / "new.sqlite")
    attempt("dangling index link", index_store, writer="realbench run")
    pending_store = work / "pending"
    _fill_store(pending_store, 2)
    db = sqlite3.connect(pending_store / "index.sqlite")
    db.execute("INSERT INTO pending VALUES ('x', ?)", (str(outside / "victim"),))
    db.execute("INSERT INTO pending VALUES ('y', '../../outside/victim')")
    db.commit()
    db.close()
    attempt("pending rows pointing outside", pending_store, writer="realbench run")
    after = _outside_state(outside)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    expected_refusals = {k: k != "pending rows pointing outside" for k in refused}
    return CaseResult(
        "store_links",
        "symlinked writer.lock / run folder / dangling index.sqlite, pending rows pointing outside",
        leaked=len(changed),
        ok=not changed and refused == expected_refusals,
        details={"refused": refused, "changed_outside": changed},
    )


def case_store_repair_unindexable(work: Path) -> CaseResult:
    import sqlite3

    root = work / "store"
    ids = _fill_store(root, 4)
    run_dir = root / "episodes" / "r"
    folders = sorted(p for p in run_dir.iterdir() if p.is_dir())
    shutil.copytree(folders[0], run_dir / (folders[0].name + " copy"))
    meta_path = folders[1] / "episode.json"
    meta = json.loads(meta_path.read_text())
    meta["seed"] = "four"
    meta_path.write_text(json.dumps(meta))
    (root / "index.sqlite").unlink()
    for extra in root.glob("index.sqlite-*"):
        extra.unlink()
    repair = _cli("store", "repair", str(root), "--json")
    report = json.loads(repair.stdout) if repair.stdout.strip() else {}
    show = _cli("show", str(root), "--json")
    db = sqlite3.connect(f"file:{root / 'index.sqlite'}?mode=ro", uri=True)
    indexed = [r[0] for r in db.execute("SELECT episode_id FROM episodes")]
    db.close()
    # the ill-typed one is set aside (re-run next time), every other original is indexed once
    expected = [i for i in ids if i != meta["episode_id"]]
    lost = len(set(expected) - set(indexed))
    return CaseResult(
        "store_repair_unindexable",
        "`store repair` over a copied episode folder and an episode whose seed is not a number",
        lost=lost,
        doubled=len(indexed) - len(set(indexed)),
        ok=repair.returncode == 1
        and "Traceback" not in repair.stderr
        and len(report.get("refused", {})) == 2
        and show.returncode == 0,
        details={
            "repair_exit": repair.returncode,
            "refused": report.get("refused"),
            "show_exit": show.returncode,
            "indexed": len(indexed),
        },
    )


HALF_OPEN_SERVER = """
import resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
from clones.server import serve
from realbench.http_guard import ServerLimits
serve("127.0.0.1", 0, log_level="error", limits=ServerLimits(header_timeout_s=float(sys.argv[1])),
      announce=lambda url: print(url, flush=True))
"""


def case_server_half_open(work: Path) -> CaseResult:
    import http.client
    import socket

    header_timeout_s = 10.0  # the default: the flood (a few seconds) is over well before it
    n = 1100
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, n + 512)), hard))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", HALF_OPEN_SERVER, str(header_timeout_s)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    socks: list[socket.socket] = []

    def fds() -> int:
        return len(os.listdir(f"/proc/{proc.pid}/fd"))

    def request(source: str) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=(source, 0))
        try:
            conn.request("GET", "/healthz")
            return conn.getresponse().status
        except OSError:
            return 0
        finally:
            conn.close()

    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().strip().rsplit(":", 1)[1])
        for _ in range(100):
            if request("127.0.0.1") == 200:
                break
            time.sleep(0.1)
        base = fds()
        t0 = time.monotonic()
        for _ in range(n):
            sock = socket.socket()
            sock.settimeout(2)
            try:
                sock.connect(("127.0.0.1", port))
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            except OSError:
                sock.close()
                continue
            socks.append(sock)
        flood_s = time.monotonic() - t0
        time.sleep(0.5)  # connections over the caps are closed within a turn of the event loop
        during = fds()
        other_client = request("127.0.0.2")
        time.sleep(header_timeout_s + 3)
        after = fds()
        same_client = request("127.0.0.1")
    finally:
        for sock in socks:
            sock.close()
        proc.kill()
        proc.wait(10)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    bound = 256 + 32  # the per-client cap and the server's own files
    return CaseResult(
        "server_half_open",
        f"{n} half-open requests (headers never finished) to `serve` under ulimit -n 1024",
        leaked=max(0, during - base - bound) + max(0, after - base - 8),
        ok=during - base <= bound and after - base <= 8 and other_client == 200 and same_client == 200,
        details={
            "server_fds_before": base,
            "server_fds_during": during,
            "server_fds_after_deadline": after,
            "other_client_status_during": other_client,
            "attacker_address_status_after": same_client,
            "flood_seconds": round(flood_s, 1),
        },
    )


def case_server_get_creates(work: Path) -> CaseResult:
    import http.client

    n = 1100
    with _server() as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        statuses: dict[int, int] = {}
        for _ in range(n):
            conn.request("GET", "/new/train_ticketing", headers={"referer": "http://evil.example/"})
            resp = conn.getresponse()
            resp.read()
            statuses[resp.status] = statuses.get(resp.status, 0) + 1
        conn.close()
        made = len(server.store)
    return CaseResult(
        "server_get_creates",
        f"{n} GETs of /new/train_ticketing (an <img src> on any page the operator opens)",
        leaked=made,
        ok=made == 0 and set(statuses) == {405},
        details={"statuses": statuses, "sessions_made": made},
    )


def _server(**limits: Any) -> Any:
    from clones.server import CloneServer
    from realbench.http_guard import ServerLimits

    return CloneServer(limits=ServerLimits(**limits))


def case_server_bodies(work: Path) -> CaseResult:
    import httpx

    with _server() as server, httpx.Client(base_url=server.url, timeout=60) as c:
        rss0 = _rss_mb()
        codes = [
            c.post(
                "/api/sessions", json={"clone": "train_ticketing", "params": {"x": "a" * 10_000_000}}
            ).status_code
            for _ in range(5)
        ]
        sessions = len(server.store)
        rss1 = _rss_mb()
    return CaseResult(
        "server_bodies",
        "five 10 MB create bodies to the clone server",
        leaked=sessions,
        ok=set(codes) == {413} and sessions == 0,
        details={
            "statuses": sorted(set(codes)),
            "sessions_made": sessions,
            "rss_growth_mb_client_and_server": round(rss1 - rss0, 1),
        },
    )


def case_server_nesting(work: Path) -> CaseResult:
    import httpx

    deep = b"[" * 100_000 + b"]" * 100_000
    with _server(max_body_bytes=1_000_000) as server, httpx.Client(base_url=server.url, timeout=60) as c:
        sid = c.post("/api/sessions", json={"clone": "train_ticketing"}).json()["session"]
        headers = {"content-type": "application/json"}
        statuses = [
            c.post("/api/sessions", content=deep, headers=headers).status_code,
            c.put(f"/api/sessions/{sid}/state", content=deep, headers=headers).status_code,
            c.post(
                f"/api/sessions/{sid}/event", content=b"{" + b'"a":{' * 5000 + b"}" * 5001, headers=headers
            ).status_code,
        ]
        alive = c.get(f"/s/{sid}/screen").status_code
    return CaseResult(
        "server_nesting",
        "JSON nested 100 000 deep to create, PUT state and event",
        ok=all(s == 400 for s in statuses) and alive == 200,
        details={"statuses": statuses, "session_still_renders": alive},
    )


def case_server_sessions(work: Path) -> CaseResult:
    import httpx

    creates = 1000
    with _server(max_sessions=200, idle_timeout_s=3600) as server, httpx.Client(base_url=server.url) as c:
        rss0 = _rss_mb()
        statuses: dict[int, int] = {}
        for _ in range(creates):
            s = c.post("/api/sessions", json={"clone": "train_ticketing"}).status_code
            statuses[s] = statuses.get(s, 0) + 1
        peak = len(server.store)
        rss1 = _rss_mb()
        server.store.idle_timeout_s = 1.0  # what --idle-timeout sets; shortened here to observe expiry
        time.sleep(1.5)
        after_idle = c.post("/api/sessions", json={"clone": "train_ticketing"}).status_code
        left = len(server.store)
    return CaseResult(
        "server_sessions",
        f"{creates} session creates against a cap of 200, then every session idle past the timeout",
        leaked=max(0, peak - 200),
        ok=statuses.get(429, 0) == creates - 200 and peak == 200 and after_idle == 200 and left == 1,
        details={
            "statuses": statuses,
            "live_at_peak": peak,
            "rss_growth_mb": round(rss1 - rss0, 1),
            "live_after_idle_expiry": left,
        },  # fmt: skip
    )


def case_server_origins(work: Path) -> CaseResult:
    import httpx

    with _server() as server, httpx.Client(base_url=server.url) as c:
        tries = {
            "text/plain POST": c.post("/api/sessions", content=b'{"clone": "train_ticketing"}',
                                      headers={"content-type": "text/plain"}).status_code,
            "cross-origin POST": c.post("/api/sessions", json={"clone": "train_ticketing"},
                                        headers={"origin": "http://evil.example"}).status_code,
            "rebinding Host": c.post("/api/sessions", json={"clone": "train_ticketing"},
                                     headers={"host": "evil.example"}).status_code,
        }  # fmt: skip
        made = len(server.store)
    from realbench.errors import ServerError
    from realbench.http_guard import security_for

    env = dict(os.environ)
    os.environ.pop("REALBENCH_SERVER_TOKEN", None)
    try:
        security_for("0.0.0.0")
        refused_wildcard = False
    except ServerError:
        refused_wildcard = True
    finally:
        os.environ.clear()
        os.environ.update(env)
    return CaseResult(
        "server_origins",
        "text/plain and cross-origin POSTs, a foreign Host header, 0.0.0.0 without a token",
        leaked=made,
        ok=made == 0 and all(s in (403, 415) for s in tries.values()) and refused_wildcard,
        details={**tries, "sessions_made": made, "wildcard_without_token_refused": refused_wildcard},
    )


def case_server_routes(work: Path) -> CaseResult:
    import httpx

    with _server() as server, httpx.Client(base_url=server.url) as c:
        sid = c.post("/api/sessions", json={"clone": "train_ticketing"}).json()["session"]
        state = c.get(f"/api/sessions/{sid}/state").json()
        puts, renders = [], []
        for route in ("../../../etc/passwd", "nope", "<script>"):
            bad = json.loads(json.dumps(state))
            bad["ui"]["route"] = route
            puts.append(c.put(f"/api/sessions/{sid}/state", json=bad).status_code)
            renders.append(c.get(f"/s/{sid}").status_code)
    return CaseResult(
        "server_routes",
        "PUT /state with hostile ui.route values, then render the session",
        ok=set(puts) == {400} and set(renders) == {200},
        details={"put_statuses": puts, "render_statuses": renders},
    )


# --- loaders and secrets -----------------------------------------------------------------------


def case_loader_bombs(work: Path) -> CaseResult:
    bomb = work / "bomb" / "pack.yaml"
    bomb.parent.mkdir()
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    text = (PACK / "pack.yaml").read_text(encoding="utf-8")
    bomb.write_text(
        text.replace("tasks:", "x_bomb:\n  " + "\n  ".join(lines) + "\ntasks:", 1), encoding="utf-8"
    )
    t0 = time.monotonic()
    first = _cli("check-pack", str(bomb), timeout=120)
    bomb_s = time.monotonic() - t0
    big = work / "big" / "pack.yaml"
    big.parent.mkdir()
    with big.open("w", encoding="utf-8") as f:
        f.write(text)
        for _ in range(50):
            f.write("# " + "x" * (1024 * 1024) + "\n")
    t0 = time.monotonic()
    second = _cli("check-pack", str(big), timeout=300)
    big_s = time.monotonic() - t0
    return CaseResult(
        "loader_bombs",
        "a YAML alias bomb and a 50 MB pack through `check-pack`",
        ok=_one_line(first)
        and "aliases" in first.stderr
        and _one_line(second)
        and bomb_s < 30
        and big_s < 30,
        details={
            "bomb_s": round(bomb_s, 1),
            "big_pack_s": round(big_s, 1),
            "printed_bytes": len(first.stderr) + len(second.stderr),
        },  # fmt: skip
    )


def case_secret_echo(work: Path) -> CaseResult:
    from realbench.agents.client import ChatClient, ChatEndpoint
    from realbench.agents.fake_server import FAKE_MODEL, FakeModelServer
    from realbench.errors import ModelError

    key = "sk-reliability-" + os.urandom(8).hex()
    os.environ["RB_SUITE_KEY"] = key
    try:
        with FakeModelServer([f"the key is {key}"], repeat_last=True) as server:
            client = ChatClient(
                ChatEndpoint(base_url=server.base_url, model=FAKE_MODEL, api_key_env="RB_SUITE_KEY")
            )
            reply = client.complete([{"role": "user", "content": "say the key"}]).text
            client.close()
    finally:
        os.environ.pop("RB_SUITE_KEY", None)
    password = "pw-" + os.urandom(6).hex()
    endpoint = ChatEndpoint(
        base_url=f"http://u:{password}@127.0.0.1:9/v1", model="m", max_retries=0, timeout_s=2
    )
    client = ChatClient(endpoint)
    try:
        client.complete([{"role": "user", "content": "hi"}])
        message = ""
    except ModelError as exc:
        message = str(exc)
    finally:
        client.close()
    leaks = int(key in reply) + int(password in message) + int(password in endpoint.model_dump_json())
    return CaseResult(
        "secret_echo",
        "a model reply echoing the API key; credentials in a base URL (error text, serialised endpoint)",
        leaked=leaks,
        ok=leaks == 0 and "***" in reply,
        details={"reply_masked": "***" in reply},
    )


CASES: dict[str, Callable[[Path], CaseResult]] = {
    "concurrent_writers": case_concurrent_writers,
    "truncated_index": case_truncated_index,
    "damaged_episodes": case_damaged_episodes,
    "store_links": case_store_links,
    "store_repair_unindexable": case_store_repair_unindexable,
    "server_bodies": case_server_bodies,
    "server_nesting": case_server_nesting,
    "server_sessions": case_server_sessions,
    "server_origins": case_server_origins,
    "server_routes": case_server_routes,
    "server_half_open": case_server_half_open,
    "server_get_creates": case_server_get_creates,
    "loader_bombs": case_loader_bombs,
    "secret_echo": case_secret_echo,
}
BROWSER_CASES = ("concurrent_writers",)


def run_suite(names: list[str] | None = None) -> list[CaseResult]:
    results = []
    for name in names or list(CASES):
        work = Path(tempfile.mkdtemp(prefix=f"reliability-{name}-"))
        t0 = time.monotonic()
        try:
            result = CASES[name](work)
        except Exception as exc:  # a case that crashes is a failed case, reported as such
            result = CaseResult(
                name, "(crashed)", ok=False, details={"error": f"{type(exc).__name__}: {exc}"}
            )
        result.seconds = round(time.monotonic() - t0, 1)
        results.append(result)
        shutil.rmtree(work, ignore_errors=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--case", action="append", choices=list(CASES), help="run only these (repeatable)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    cpu = cpu_model()
    results = run_suite(args.case)
    machine = {"cpu": cpu, "cores": os.cpu_count(), "loadavg": os.getloadavg(),
               "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}  # fmt: skip
    if args.json:
        print(json.dumps({"machine": machine, "cases": [asdict(r) for r in results]}, ensure_ascii=False))
    else:
        for r in results:
            verdict = "ok  " if r.ok else "FAIL"
            print(
                f"{verdict} {r.name:<20} lost {r.lost}  doubled {r.doubled}  leaked {r.leaked}  {r.seconds:>6.1f}s"
            )
            print(f"     tried: {r.tried}")
            print(f"     seen:  {json.dumps(r.details, ensure_ascii=False)}")
        print(f"machine: {machine}")
    if not all(r.ok and not (r.lost or r.doubled or r.leaked) for r in results):
        sys.exit(1)


if __name__ == "__main__":
    main()
