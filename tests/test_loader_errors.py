"""Hostile or broken inputs to the loaders and the CLI: one clear line each, never a traceback or a hang."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from realbench.errors import ConfigError, PackError
from realbench.task_lists import read_task_list
from realbench.taskpack import load_pack

ROOT = Path(__file__).resolve().parent.parent
PACK = ROOT / "taskpacks" / "train_ticketing" / "pack.yaml"

BOMB = """
app: train_ticketing
clone: train_ticketing
real_app: {package: com.MobileTicket, name: x}
tasks:
  - id: t
    instruction: x
    difficulty: 1
    clone:
      verifier:
        name: noop
        args:
          a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
          b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
          c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
          d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
          e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
          f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
          g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
          h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
          i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
    golden: [{terminate: success}]
"""


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "realbench", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def _one_clear_error(done: subprocess.CompletedProcess[str], says: str) -> None:
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert says in done.stderr, done.stderr[-2000:]


def test_yaml_alias_bomb_is_refused_fast(tmp_path):
    path = tmp_path / "pack.yaml"
    path.write_text(BOMB, encoding="utf-8")
    t0 = time.monotonic()
    with pytest.raises(PackError, match="aliases"):
        load_pack(path)
    assert time.monotonic() - t0 < 5
    _one_clear_error(_cli("check-pack", str(path)), "aliases")


def test_oversized_pack_and_node_budget(tmp_path):
    big = tmp_path / "big" / "pack.yaml"
    big.parent.mkdir()
    with big.open("w", encoding="utf-8") as f:
        f.write(PACK.read_text(encoding="utf-8"))
        f.write("\n# " + "x" * (9 * 1024 * 1024) + "\n")
    t0 = time.monotonic()
    with pytest.raises(ConfigError, match="at most"):
        load_pack(big)
    assert time.monotonic() - t0 < 5
    from realbench.safe_yaml import YamlRefused, load_yaml_text

    with pytest.raises(YamlRefused, match="nodes"):
        load_yaml_text("[" + ",".join(["1"] * 2000) + "]", max_nodes=1000)


def test_problems_printed_are_capped(tmp_path):
    raw = yaml.safe_load(PACK.read_text(encoding="utf-8"))
    task = raw["tasks"][0]
    raw["tasks"] = [{**task, "id": f"t{i}", "difficulty": 99} for i in range(300)]
    path = tmp_path / "pack.yaml"
    path.write_text(json.dumps(raw, ensure_ascii=False), encoding="utf-8")  # JSON is YAML, without aliases
    with pytest.raises(PackError) as err:
        load_pack(path)
    assert len(err.value.problems) >= 300
    assert len(err.value.message.splitlines()) <= 52 and "more" in err.value.message.splitlines()[-1]
    done = _cli("check-pack", str(path))
    assert done.returncode != 0 and len(done.stderr) < 40_000


def test_non_utf8_pack_and_a_folder_named_pack_yaml(tmp_path):
    bad = tmp_path / "bad" / "pack.yaml"
    bad.parent.mkdir()
    bad.write_bytes(PACK.read_bytes().replace("铁路".encode(), "铁路".encode("gbk")))
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_pack(bad)
    folder = tmp_path / "odd" / "pack.yaml"
    folder.mkdir(parents=True)
    with pytest.raises(ConfigError, match="is a folder"):
        load_pack(folder.parent)  # the pack's folder, whose pack.yaml is a folder
    _one_clear_error(_cli("check-pack", str(bad)), "not UTF-8")
    _one_clear_error(
        _cli("run", "--pack", str(folder.parent), "--out", str(tmp_path / "o"), "--no-progress"),
        "is a folder",
    )


@pytest.mark.parametrize(
    "content, says",
    [
        ("{not json", "not valid JSON"),
        ("42", "no list of tasks"),
        (json.dumps({"tasks": [{"stratum": "gain"}]}), "has no 'task' id"),
        (json.dumps([1, 2]), "is not a task id"),
        (None, "is a folder"),
    ],
)
def test_task_list_files(tmp_path, content, says):
    path = tmp_path / "tasks.json"
    if content is None:
        path.mkdir()
    else:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match=says):
        read_task_list(path)


def test_task_list_cli_is_one_line(tmp_path):
    path = tmp_path / "tasks.json"
    path.write_text("{not json", encoding="utf-8")
    done = _cli(
        "run",
        "--pack",
        str(PACK.parent),
        "--out",
        str(tmp_path / "o"),
        "--tasks",
        f"@{path}",
        "--no-progress",
    )
    _one_clear_error(done, "not valid JSON")


def test_retention_given_a_clone_store_as_real(tmp_path):
    from tests.test_store_integrity import _fill

    _fill(tmp_path / "clone")
    done = _cli("retention", "--clone", str(tmp_path / "clone"), "--real", str(tmp_path / "clone"),
                "--base", "golden", "--trained", "golden")  # fmt: skip
    _one_clear_error(done, "no scored episodes of model 'golden' in env 'real'")


def test_ordinary_aliases_still_load(tmp_path):
    """PyYAML's dumper writes anchors and aliases for shared values: such packs are not bombs."""
    from devices.farm.synthetic import write_synthetic_pack

    pack_dir = write_synthetic_pack(tmp_path / "pack", tasks=3, steps=1, with_boundary=True)
    path = pack_dir if pack_dir.name == "pack.yaml" else pack_dir / "pack.yaml"
    assert "*id" in path.read_text(encoding="utf-8"), "the dumper shared a value"
    assert len(load_pack(path).tasks) == 3
