"""Built-ins are registered once, in-process (src/selfrefine/core/builtins.py), through the
path a third party may take; entry points are for third parties only. So a built-in is found
with no entry point installed for it (no reinstall for a new one), and a third party's entry
point is still found beside the built-ins."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from selfrefine.core import builtins
from selfrefine.core.entrypoints import entry_points, register
from selfrefine.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
GROUPS = (builtins.TASKS_GROUP, builtins.STRATEGIES_GROUP, builtins.TASK_FILES_GROUP)

# run in a process whose path holds the source and the dependencies but no selfrefine
# distribution's metadata (so no entry point of the package), and one third-party plugin
PROBE = """
import importlib.metadata, json, sys
assert not [d for d in importlib.metadata.distributions() if d.metadata["Name"] == "selfrefine"], "metadata seen"
from click.testing import CliRunner
from selfrefine.cli import cli
from selfrefine import FakeBackend, SelfRefine
listed = CliRunner().invoke(cli, ["tasks", "--json"])
found = SelfRefine("sentiment", FakeBackend(), strategy="auto", max_total_tokens=900).settings.config.strategy
from selfrefine.engine.drafting.registry import strategy_names
from selfrefine.task.plugins import find_task
print(json.dumps({"tasks": [t["name"] for t in json.loads(listed.output)], "strategy": found,
                  "strategies": list(strategy_names()), "file": find_task(sys.argv[1]).name,
                  "plugin": find_task("sr_probe_task").name}))
"""
PLUGIN_TASK = "from selfrefine import Task\nsr_probe = Task('probe', generate='{{ input }}', feedback='{{ draft }}', refine='{{ draft }}')\n"
TASK_FILE = "name: tiny\ngenerate: 'Say {{ input }}.'\nfeedback: 'Critique {{ draft }}.'\nrefine: 'Fix {{ draft }}.'\n"


def test_the_package_metadata_lists_no_built_in():
    groups = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"].get("entry-points", {})
    for group in GROUPS:
        assert not set(groups.get(group, {})) & set(builtins.BUILTINS[group]), group


def test_a_built_in_is_found_with_no_entry_point_installed(tmp_path: Path):
    deps = tmp_path / "deps"
    deps.mkdir()
    for folder in map(Path, site.getsitepackages()):
        for entry in folder.iterdir():
            if entry.name.startswith(("selfrefine", "__editable__", "_selfrefine")) or entry.suffix == ".pth":
                continue
            if not (deps / entry.name).exists():
                (deps / entry.name).symlink_to(entry)
    plugin = tmp_path / "plugin"
    (plugin / "sr_probe_task-0.1.dist-info").mkdir(parents=True)
    (plugin / "sr_probe_task.py").write_text(PLUGIN_TASK)
    (plugin / "sr_probe_task-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: sr-probe-task\nVersion: 0.1\n"
    )
    (plugin / "sr_probe_task-0.1.dist-info" / "entry_points.txt").write_text(
        "[selfrefine.tasks]\nsr_probe_task = sr_probe_task:sr_probe\n"
    )
    (tmp_path / "tiny.yaml").write_text(TASK_FILE)
    # the package alone: an editable install leaves src/selfrefine.egg-info (metadata) beside it
    source = tmp_path / "source"
    source.mkdir()
    (source / "selfrefine").symlink_to(ROOT / "src" / "selfrefine")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(source), str(deps), str(plugin)])}
    done = subprocess.run(
        [sys.executable, "-S", "-c", PROBE, str(tmp_path / "tiny.yaml")],
        env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["tasks"] == [*builtins.TASKS, "probe"]  # the CLI lists a third party's task after them
    assert (seen["strategy"], seen["strategies"], seen["file"], seen["plugin"]) == (
        "auto",
        ["fixed", "auto", "sequential"],
        "tiny",
        "probe",
    )


def test_a_built_in_name_is_registered_once():
    assert list(entry_points(builtins.TASKS_GROUP))[: len(builtins.TASKS)] == list(builtins.TASKS)
    register(builtins.TASKS_GROUP, "chat", builtins.TASKS["chat"])  # the same registration again: no change
    with pytest.raises(ConfigError, match="already registered"):
        register(builtins.TASKS_GROUP, "chat", "mypackage.chat:Chat")
