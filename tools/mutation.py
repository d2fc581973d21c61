"""Mutation testing of spillway's core with mutmut 3, one module at a time (see docs/mutation-testing.md).

    .venv/bin/python tools/mutation.py safe_writer [--max-children 2]
    .venv/bin/python tools/mutation.py --list

Each run works in a scratch copy of the working tree (``$TMPDIR/spillway-mutation/<module>``), so
mutmut's ``mutants/`` directory and caches never land in the repository and the repository's
pyproject.toml needs no ``[tool.mutmut]`` section: the copy gets one naming the module and its fast,
targeted tests (``-m "not integration"``). Prints mutmut's per-mutant results and the totals.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent

# module -> (file to mutate, the tests that exercise it; fast unit/CLI tests only)
MODULES: dict[str, tuple[str, list[str]]] = {
    "safe_writer": (
        "spillway/storage/safe_writer.py",
        ["tests/unit/test_safe_writer.py", "tests/cli/test_repair.py"],
    ),
    "stream_elements": (
        "spillway/formats/stream_elements.py",
        ["tests/unit/test_stream_elements.py", "tests/unit/test_rescale_framing.py"],
    ),
    "keygroups": (
        "spillway/flink/keygroups.py",
        [
            "tests/unit/test_keygroups.py",
            "tests/unit/test_analyze.py",
            "tests/unit/test_rescale_state.py",
            "tests/unit/test_key_extractor_check.py",
        ],
    ),
    "operator_ids": ("spillway/flink/operator_ids.py", ["tests/unit/test_operator_ids.py"]),
    "validate": (
        "spillway/inspect/validate.py",
        ["tests/cli/test_validate.py", "tests/cli/test_validate_rules.py", "tests/unit/test_binding.py"],
    ),
    "record_framing": (
        "spillway/formats/record_framing.py",
        ["tests/unit/test_record_framing.py", "tests/unit/test_stream_elements.py"],
    ),
    "metadata_codec": (
        "spillway/formats/metadata_codec.py",
        ["tests/unit/test_oracle.py", "tests/unit/test_roundtrip.py", "tests/unit/test_features.py"],
    ),
    "handles": (
        "spillway/formats/handles.py",
        ["tests/unit/test_oracle.py", "tests/unit/test_roundtrip.py", "tests/unit/test_features.py"],
    ),
    "verify": (
        "spillway/rescale/verify.py",
        [
            "tests/unit/test_rescale_verify.py",
            "tests/unit/test_rescale_vectorized.py",
            "tests/unit/test_rescale_framing.py",
        ],
    ),
}


# Modules whose own functions run at import time (stream_elements.KINDS is built by
# ElementKind.__post_init__): mutmut's default forks each mutant from a process that has imported them
# already, so those mutants would all survive unexercised. Fork them from a server that has imported
# nothing of spillway (slower: every mutant imports and collects afresh).
# handles: register(), family_layout() and the channel layouts build the registry and the layouts at import
# (and metadata.py caches the layouts built from them). metadata_codec's functions run only when called.
IMPORT_TIME = {"stream_elements", "handles"}
ISOLATION = {True: ['process_isolation = "forkserver"', 'forkserver_warmup = "none"'], False: []}


def workspace(module: str) -> Path:
    work = Path(tempfile.gettempdir()) / "spillway-mutation" / module
    if work.exists():
        shutil.rmtree(work)
    ignore = shutil.ignore_patterns(
        ".git", ".venv", "mutants", ".hypothesis", ".mypy_cache", "__pycache__", "*.egg-info"
    )
    shutil.copytree(ROOT, work, ignore=ignore, symlinks=True)
    return work


def configure(work: Path, module: str) -> None:
    path, tests = MODULES[module]
    tests = [t for t in tests if (work / t).exists()]
    toml = (work / "pyproject.toml").read_text()
    toml = re.sub(r"(?ms)^\[tool\.mutmut\].*?(?=^\[|\Z)", "", toml)
    toml += "\n[tool.mutmut]\n" + "\n".join(
        [
            'source_paths = ["spillway"]',
            f"only_mutate = {json.dumps([path])}",
            f"pytest_add_cli_args_test_selection = {json.dumps(tests)}",
            # pytest deletes a finished session's basetemp once three newer ones exist under the temp root.
            # mutmut runs many sessions from one long-lived process (clean run, stats run, one per mutant,
            # forked from it), so a module-level cache of a tmp path (test_validate's _FLIP_TREE) outlives
            # its session and points at a deleted directory. Keep every basetemp of the run; main() also
            # gives the run a temp root of its own, so nobody else's pytest sessions count either.
            'pytest_add_cli_args = ["-m", "not integration and not flink and not slow", "-q",'
            ' "-o", "tmp_path_retention_count=1000000"]',
            "use_git_change_detection = false",
            *ISOLATION[module in IMPORT_TIME],
        ]
    )
    (work / "pyproject.toml").write_text(toml + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("module", nargs="?", choices=sorted(MODULES))
    ap.add_argument("--max-children", type=int, default=2)
    ap.add_argument("--list", action="store_true", help="the modules and their tests")
    args = ap.parse_args()
    if args.list or not args.module:
        for name, (path, tests) in MODULES.items():
            print(f"{name:16} {path:40} {' '.join(tests)}")
        return 0
    work = workspace(args.module)
    configure(work, args.module)
    temproot = work / "pytest-tmp"  # inside the workspace: removed with it by the next run of the module
    temproot.mkdir()
    env = {
        **os.environ,
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}",
        "PYTEST_DEBUG_TEMPROOT": str(temproot),
    }
    mutmut = [str(VENV_BIN / "mutmut")]
    run = subprocess.run([*mutmut, "run", "--max-children", str(args.max_children)], cwd=work, env=env)
    subprocess.run([*mutmut, "results", "--all", "true"], cwd=work, env=env)
    subprocess.run([*mutmut, "export-cicd-stats"], cwd=work, env=env)
    stats = work / "mutants" / "mutmut-cicd-stats.json"
    if stats.exists():
        print(json.dumps(json.loads(stats.read_text()), indent=1))
    print(f"workspace: {work}")
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
