"""Loaders that must not switch safety off: duplicate keys in every YAML file realbench reads (task
packs, real.yaml recipes, rigs, phone profiles, task lists), a money-moving pack without
always-forbidden controls, and phone profile names that try to leave devices/profiles/."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from devices.profile import PROFILE_DIR, load_profile
from devices.rig import load_rig
from realbench.errors import ConfigError, PackError
from realbench.safe_yaml import YamlRefused, load_yaml_text
from realbench.taskpack import load_pack

ROOT = Path(__file__).resolve().parent.parent
TOY = ROOT / "taskpacks" / "toy"
BANK = ROOT / "taskpacks" / "bank"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "realbench", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _copy_pack(src: Path, tmp: Path) -> Path:
    dest = tmp / src.name
    shutil.copytree(src, dest)
    return dest


def _money_pack(tmp: Path, policy_block: str) -> Path:
    """The toy pack (no recipes file), made money-moving with `policy_block` as its policy."""
    pack = _copy_pack(TOY, tmp)
    text = (pack / "pack.yaml").read_text(encoding="utf-8")
    assert "\npolicy:" not in text
    head, tasks = text.split("\ntasks:", 1)
    (pack / "pack.yaml").write_text(f"{head}\n{policy_block}tasks:{tasks}", encoding="utf-8")
    return pack


def test_a_duplicate_key_is_an_error_with_its_line() -> None:
    with pytest.raises(YamlRefused, match=r"line 3: key 'money_moving' is given twice.*first on line 2"):
        load_yaml_text("policy:\n  money_moving: true\n  money_moving: false\n")
    with pytest.raises(YamlRefused, match="given twice"):
        load_yaml_text("{a: 1, a: 2}")
    with pytest.raises(YamlRefused, match="given twice"):
        load_yaml_text("true: 1\nTrue: 2\n")  # one key to YAML, two spellings
    # a merge may override what it brings in; nested keys of the same name are not duplicates
    assert load_yaml_text("x: &b {a: 1}\ny:\n  <<: *b\n  a: 2\nz: {a: 3}\n") == {
        "x": {"a": 1},
        "y": {"a": 2},
        "z": {"a": 3},
    }


def test_a_duplicate_money_moving_false_does_not_switch_safety_off(tmp_path: Path) -> None:
    pack = _money_pack(
        tmp_path,
        "policy:\n  money_moving: true\n  require_boundary_tags: [money]\n  money_moving: false\n",
    )
    with pytest.raises(PackError, match="given twice") as err:
        load_pack(pack)
    assert "money_moving" in str(err.value)
    done = _cli("check-pack", str(pack))
    assert done.returncode != 0 and "given twice" in done.stdout + done.stderr


def test_a_duplicate_forbidden_list_in_a_real_pack_is_an_error(tmp_path: Path) -> None:
    pack = _copy_pack(BANK, tmp_path)
    text = (pack / "pack.yaml").read_text(encoding="utf-8")
    # a second, empty `forbidden:` after the real list, as a careless merge leaves it
    marker = "  logged_in_probe:"
    assert text.count(marker) == 1
    (pack / "pack.yaml").write_text(text.replace(marker, "  forbidden: []\n" + marker), encoding="utf-8")
    with pytest.raises(PackError, match="'forbidden' is given twice"):
        load_pack(pack)


def test_a_duplicate_task_in_real_yaml_is_an_error(tmp_path: Path) -> None:
    pack = _copy_pack(BANK, tmp_path)
    recipes = pack / "real.yaml"
    text = recipes.read_text(encoding="utf-8")
    # the same task's recipe twice: the second (an empty setup) would silently replace the first
    recipes.write_text(text + "  balance_main_card:\n    setup: []\n", encoding="utf-8")
    with pytest.raises(PackError, match="'balance_main_card' is given twice"):
        load_pack(pack)


def test_a_money_moving_pack_must_list_forbidden_controls(tmp_path: Path) -> None:
    pack = _money_pack(tmp_path, "policy:\n  money_moving: true\n")
    with pytest.raises(PackError, match="real_app.forbidden") as err:
        load_pack(pack)
    assert "money-moving" in str(err.value)
    done = _cli("check-pack", str(pack))
    assert done.returncode != 0 and "forbidden" in done.stdout + done.stderr
    # an explicit empty list is the same as none
    text = (pack / "pack.yaml").read_text(encoding="utf-8")
    (pack / "pack.yaml").write_text(
        text.replace(
            "real_app: {package: com.example.toyshop, name: 玩具店}",
            "real_app: {package: com.example.toyshop, name: 玩具店, forbidden: []}",
        ),
        encoding="utf-8",
    )
    with pytest.raises(PackError, match="real_app.forbidden"):
        load_pack(pack)
    # with its stop controls listed, it loads
    (pack / "pack.yaml").write_text(
        text.replace(
            "real_app: {package: com.example.toyshop, name: 玩具店}",
            "real_app: {package: com.example.toyshop, name: 玩具店, forbidden: [{text: 立即支付}]}",
        ),
        encoding="utf-8",
    )
    assert load_pack(pack).policy.money_moving


def test_a_rig_with_a_duplicate_key_is_an_error(tmp_path: Path) -> None:
    rig = tmp_path / "rig.yaml"
    rig.write_text(
        "name: lab\nphones:\n  - {serial: A1, profile: generic-1080x2400}\napps: []\nname: other\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match="'name' is given twice"):
        load_rig(rig)


def test_profile_names_stay_inside_the_profiles_folder(tmp_path: Path) -> None:
    assert load_profile("generic-1080x2400").name == "generic-1080x2400"
    outside = tmp_path / "evil.yaml"
    outside.write_text((PROFILE_DIR / "generic-1080x2400.yaml").read_text(encoding="utf-8"))
    for name in (f"../../../../{outside.with_suffix('')}", str(outside.with_suffix("")), "a/b", "..", ""):
        with pytest.raises(ConfigError, match="not a phone profile name"):
            load_profile(name)
    # a rig naming such a profile is refused when it loads, before any phone is touched
    rig = tmp_path / "rig.yaml"
    rig.write_text(
        f"name: lab\nphones:\n  - {{serial: A1, profile: '../../../..{outside.with_suffix('')}'}}\napps: []\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match="not a phone profile name"):
        load_rig(rig)


def test_a_profile_is_read_under_the_pack_budget(tmp_path: Path) -> None:
    folder = tmp_path / "profiles"
    folder.mkdir()
    base = (PROFILE_DIR / "generic-1080x2400.yaml").read_text(encoding="utf-8")
    (folder / "twice.yaml").write_text(base.replace("name: generic-1080x2400", "name: twice") + "ime: x\n")
    with pytest.raises(ConfigError, match="given twice"):
        load_profile("twice", folder)
    bomb = "name: bomb\n" + "".join(
        f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9) if i else ', '.join(['x'] * 9)}]\n" for i in range(9)
    )
    (folder / "bomb.yaml").write_text(bomb)
    with pytest.raises(ConfigError, match="alias"):
        load_profile("bomb", folder)
    # a profile file that is a link to a file elsewhere is not a profile of the folder
    (folder / "linked.yaml").symlink_to(tmp_path / "elsewhere.yaml")
    (tmp_path / "elsewhere.yaml").write_text(base.replace("name: generic-1080x2400", "name: linked"))
    with pytest.raises(ConfigError, match="unknown phone profile"):
        load_profile("linked", folder)


def test_every_yaml_read_in_the_code_goes_through_the_safe_loader() -> None:
    """No module of realbench/, devices/, clones/ or analysis/ parses YAML with PyYAML directly."""
    offenders = []
    for folder in ("realbench", "devices", "clones", "analysis"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name == "safe_yaml.py":
                continue
            text = path.read_text(encoding="utf-8")
            for needle in ("yaml.safe_load(", "yaml.load(", "yaml.full_load(", "yaml.unsafe_load("):
                if needle in text:
                    offenders.append(f"{path.relative_to(ROOT)}: {needle}")
    assert not offenders, offenders
