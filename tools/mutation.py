"""Mutation testing of spillway's core with mutmut 3, one module at a time (see docs/mutation-testing.md).

    .venv/bin/python tools/mutation.py safe_writer [--max-children 2]
    .venv/bin/python tools/mutation.py topology --only _bound_vertices --only parse_plan
    .venv/bin/python tools/mutation.py --list

Each run works in a scratch copy of the working tree (``$TMPDIR/spillway-mutation/<module>``), so
mutmut's ``mutants/`` directory and caches never land in the repository and the repository's
pyproject.toml needs no ``[tool.mutmut]`` section: the copy gets one naming the module and its fast,
targeted tests (``-m "not integration"``). Prints mutmut's per-mutant results and the totals.
"""

from __future__ import annotations

import argparse
import fnmatch
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

# validate's rules, run in-process (click's runner or validate() itself): a console-script test runs in a
# subprocess, which mutmut's stats run never sees
RULES_TESTS = [
    "tests/cli/test_validate.py",
    "tests/cli/test_validate_rules.py",
    "tests/cli/test_validate_boundaries.py",
    "tests/cli/test_validate_damaged.py",
    "tests/unit/test_chunk_map.py",
    "tests/unit/test_validate_changelog_files.py",
    "tests/unit/test_validate_rule_edges.py",
    "tests/unit/test_chunk_claims.py",
    "tests/unit/test_key_group_rules.py",
    "tests/unit/test_record_rules.py",
    "tests/unit/test_plan_rules.py",
]
RULES = ("against_plan", "chunks", "common", "files", "key_groups", "records", "structure")

# the one API (spillway.open -> Checkpoint, its options and results), called in-process
API_TESTS = [
    "tests/unit/test_api_session.py",
    "tests/unit/test_api.py",
    "tests/unit/test_api_dump.py",
    "tests/unit/test_library_words.py",
]
API = ("session", "results", "options", "reading", "about")
# what the API's calls run, defined in the layer that owns it (same tests)
API_BELOW = {
    "job_plans": "spillway/inspect/job_plans.py",
    "keygroup": "spillway/formats/keygroup.py",
    "dump": "spillway/inspect/dump.py",
    "job_jar": "spillway/storage/job_jar.py",
}

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
    # the binding: uid and generated-id hashing, the job-graph alignment, the passes, the hypotheses, the job's own ids
    "operator_ids": (
        "spillway/flink/operator_ids.py",
        [
            "tests/unit/test_binding_reasons.py",
            "tests/unit/test_binding_flink_ids.py",
            "tests/unit/test_binding_stored_names.py",
            "tests/unit/test_binding_guesses.py",
            "tests/unit/test_binding_output_orders.py",
            "tests/unit/test_binding_hypotheses.py",
            "tests/unit/test_job_ids.py",
            "tests/unit/test_shapes_binding.py",
            "tests/unit/test_binding_value.py",
            "tests/unit/test_operator_ids.py",
            "tests/unit/test_binding_done.py",
        ],
    ),
    # the independent key checks (the extractor against the source, the output's key groups)
    "source_keys": (
        "spillway/rescale/source_keys.py",
        [
            "tests/unit/test_source_keys.py",
            "tests/unit/test_key_extractor_check.py",
            "tests/unit/test_rescale_verify.py",
        ],
    ),
    # finding the checkpoint and its files; the path-escape guard
    "locate": (
        "spillway/storage/locate.py",
        [
            "tests/unit/test_locate.py",
            "tests/unit/test_locate_fast_paths.py",
            "tests/unit/test_locate_edges.py",
            "tests/cli/test_validate_rules.py",
        ],
    ),
    # the writers' validate step, and opening only regular files
    "output_check": (
        "spillway/inspect/output_check.py",
        [
            "tests/unit/test_output_check.py",
            "tests/unit/test_safe_writer.py",
            "tests/unit/test_safe_writer_failures.py",
        ],
    ),
    "safe_io": ("spillway/safe_io.py", ["tests/unit/test_safe_io.py", "tests/cli/test_hostile_files.py"]),
    "router": (
        "spillway/rescale/router.py",
        [
            "tests/unit/test_rescale_framing.py",
            "tests/unit/test_rescale_vectorized.py",
            "tests/unit/test_key_extract.py",
            "tests/unit/test_rescale_router.py",
        ],
    ),
    "validate": (
        "spillway/inspect/validate.py",
        [
            "tests/cli/test_validate.py",
            "tests/cli/test_validate_rules.py",
            "tests/cli/test_validate_boundaries.py",
            "tests/cli/test_validate_unchecked.py",
            "tests/unit/test_binding.py",
        ],
    ),
    # rescale planning: edge rules, byte-balanced segments, refusals (pure Python, no Spark)
    "rescale_plan": (
        "spillway/rescale/plan.py",
        ["tests/unit/test_rescale_plan.py", "tests/unit/test_rescale_edge_rules.py", "tests/cli/test_rescale_force.py"],
    ),
    "repair_transforms": (
        "spillway/repair/transforms.py",
        ["tests/unit/test_repair_transforms.py", "tests/cli/test_repair.py", "tests/cli/test_repair_releases.py"],
    ),
    # test_stream_elements.py also frames (against the reference walk) but its generated streams made each
    # mutant that loops in Framer.feed run to mutmut's timeout: minutes per mutant on a shared machine.
    "record_framing": ("spillway/formats/record_framing.py", ["tests/unit/test_record_framing.py"]),
    "metadata_codec": (
        "spillway/formats/metadata_codec.py",
        [
            "tests/unit/test_oracle.py",
            "tests/unit/test_roundtrip.py",
            "tests/unit/test_features.py",
            "tests/cli/test_bad_input.py",
            "tests/unit/test_metadata_codec.py",
        ],
    ),
    "handles": (
        "spillway/formats/handles.py",
        [
            "tests/unit/test_oracle.py",
            "tests/unit/test_roundtrip.py",
            "tests/unit/test_features.py",
            "tests/cli/test_bad_input.py",
            "tests/unit/test_metadata_codec.py",
        ],
    ),
    **{f"rules_{name}": (f"spillway/inspect/rules/{name}.py", RULES_TESTS) for name in RULES},
    **{f"api_{name}": (f"spillway/api/{name}.py", API_TESTS) for name in API},
    **{f"api_{name}": (path, API_TESTS) for name, path in API_BELOW.items()},
    "verify": (
        "spillway/rescale/verify.py",
        [
            "tests/unit/test_rescale_verify.py",
            "tests/unit/test_channel_scanner.py",
            "tests/unit/test_rescale_vectorized.py",
            "tests/unit/test_rescale_framing.py",
        ],
    ),
    # the binding (issue 20): the consistent-assignment deduction, the FLIP-147 verdict, the plan checks and
    # the vertex membership. In-process tests only: a console-script test (tests/support/console.py) runs in a
    # subprocess, which mutmut's stats run never sees, so it would be selected for no mutant.
    "deduction": (
        "spillway/flink/deduction.py",
        [
            "tests/unit/test_deduction.py",
            "tests/unit/test_deduction_facts.py",
            "tests/unit/test_binding.py",
            "tests/unit/test_binding_production.py",
            "tests/unit/test_operator_ids.py",
            "tests/unit/test_binding_hypotheses.py",
            "tests/unit/test_deduction_search.py",
        ],
    ),
    # names taken where a plan node is meant (--uid, -p, --operator): NAME, NAME#NODE, Kind[N]
    "plan_names": (
        "spillway/inspect/plan_names.py",
        [
            "tests/unit/test_plan_name_forms.py",
            "tests/unit/test_binding.py",
            "tests/unit/test_topology_plans.py",
            "tests/unit/test_shapes_names.py",
        ],
    ),
    # the job's own ids (the helper's JSON from the job's main()): parsing and the two plan views
    "job_ids": ("spillway/flink/job_ids.py", ["tests/unit/test_job_ids.py", "tests/unit/test_job_ids_views.py"]),
    "finished": (
        "spillway/inspect/finished.py",
        [
            "tests/unit/test_finished_rules.py",
            "tests/unit/test_finished_binding.py",
            "tests/unit/test_finished_variants.py",
            "tests/unit/test_binding_production.py",
            "tests/unit/test_finished_chain_doubts.py",
            "tests/unit/test_finished_assignments.py",
            "tests/unit/test_finished_symmetric.py",
        ],
    ),
    "plan_check": (
        "spillway/inspect/plan_check.py",
        [
            "tests/unit/test_plan_check_rules.py",
            "tests/cli/test_plan_check.py",
            "tests/cli/test_validate_rules.py",
            "tests/unit/test_binding_production.py",
        ],
    ),
    # one plan model: the partitioners' meaning, and the parser of both plan flavours
    "partitioners": ("spillway/flink/partitioners.py", ["tests/unit/test_plan_model.py"]),
    "stream_graph": (
        "spillway/flink/stream_graph.py",
        ["tests/unit/test_plan_model.py", "tests/unit/test_topology_plans.py", "tests/unit/test_operator_ids.py"],
    ),
    # which output of a job vertex is which result partition: Flink's order, and the orders a plan leaves open
    "outputs": ("spillway/flink/outputs.py", ["tests/unit/test_output_order.py"]),
    "output_order": ("spillway/inspect/output_order.py", ["tests/unit/test_output_order.py"]),
    "topology": (
        "spillway/inspect/topology.py",
        [
            "tests/unit/test_topology_binding.py",
            "tests/unit/test_topology_plans.py",
            "tests/unit/test_binding_views.py",
            "tests/unit/test_binding_done.py",
            "tests/unit/test_binding.py",
            "tests/unit/test_binding_production.py",
            "tests/unit/test_finished_binding.py",
            "tests/cli/test_plan_check.py",
            "tests/cli/test_validate_rules.py",
        ],
    ),
    # never destructive: the one door for writing, the output's claim, the reference check, unsafe handle paths
    "guard": (
        "spillway/storage/guard.py",
        [
            "tests/unit/test_guard.py",
            "tests/unit/test_guard_door.py",
            "tests/unit/test_safe_writer.py",
            "tests/unit/test_safe_writer_failures.py",
            "tests/unit/test_staged_copies.py",
        ],
    ),
    "claim": (
        "spillway/storage/claim.py",
        [
            "tests/unit/test_guard.py",
            "tests/unit/test_claim_rules.py",
            "tests/unit/test_safe_writer.py",
            "tests/unit/test_safe_writer_failures.py",
            "tests/unit/test_staged_copies.py",
        ],
    ),
    "staged_copies": ("spillway/storage/staged_copies.py", ["tests/unit/test_staged_copies.py"]),
    "new_files": ("spillway/storage/new_files.py", ["tests/cli/test_user_files_guarded.py"]),
    "references": (
        "spillway/inspect/references.py",
        ["tests/unit/test_output_references.py", "tests/unit/test_output_references_rules.py"],
    ),
    "paths": ("spillway/model/paths.py", ["tests/unit/test_path_problems.py"]),
    # preflight: Flink's restore-time checks and the answer, against the recorded real restores
    "preflight": (
        "spillway/inspect/preflight.py",
        [
            "tests/unit/test_preflight_matrix.py",
            "tests/unit/test_preflight_truth.py",
            "tests/unit/test_restore_check_reasons.py",
            "tests/unit/test_restore_check_placements.py",
            "tests/unit/test_preflight_plan_changes.py",
            "tests/unit/test_preflight_placement.py",
        ],
    ),
    "restore_checks": (
        "spillway/inspect/restore_checks.py",
        [
            "tests/unit/test_preflight_matrix.py",
            "tests/unit/test_preflight_truth.py",
            "tests/unit/test_restore_check_reasons.py",
            "tests/unit/test_restore_check_placements.py",
            "tests/unit/test_restore_check_loss.py",
            "tests/unit/test_preflight_placement.py",
            "tests/unit/test_restore_check_max_parallelism.py",
        ],
    ),
    # the release lines' chaining rules and the chains (job vertices) they give
    "chaining": (
        "spillway/flink/chaining.py",
        [
            "tests/unit/test_operator_ids.py",
            "tests/unit/test_features.py",
            "tests/unit/test_topology_plans.py",
            "tests/unit/test_chaining_rules.py",
        ],
    ),
    # the restore instructions printed after every write
    "restore_instructions": (
        "spillway/inspect/restore_instructions.py",
        ["tests/unit/test_restore_instruction_rules.py"],
    ),
    # opening a checkpoint: the newest readable chk-N, unmatched rebase rules, the files referenced and missing
    "load": (
        "spillway/storage/load.py",
        ["tests/unit/test_load.py", "tests/unit/test_load_remote.py", "tests/unit/test_locate_fast_paths.py"],
    ),
    "blobs": ("spillway/storage/blobs.py", ["tests/unit/test_blobs.py", "tests/unit/test_validate_rule_edges.py"]),
    "job_graph": ("spillway/storage/job_graph.py", ["tests/unit/test_job_graph.py", "tests/unit/test_job_ids.py"]),
    "flink_release": ("spillway/storage/flink_release.py", ["tests/unit/test_flink_release.py"]),
    "storage_names": ("spillway/storage/names.py", ["tests/unit/test_storage_names.py"]),
    # test_transfer_deadline.py also sets timeouts, but its timing fails a clean run on a loaded machine
    "timeouts": ("spillway/storage/timeouts.py", ["tests/unit/test_storage_timeouts.py"]),
    "relative": ("spillway/storage/relative.py", ["tests/unit/test_relative_copies.py"]),
    "pinning": (
        "spillway/storage/pinning.py",
        ["tests/unit/test_pinning.py", "tests/cli/test_moved_source_references.py"],
    ),
}


# Modules whose own functions run at import time (stream_elements.KINDS is built by
# ElementKind.__post_init__), with those functions as mutmut names them. mutmut's default forks each mutant
# from a process that has imported the module already, so their mutants never run; and mutmut runs for a
# mutant only the tests that called its function during the stats run, which for an import-time function is
# at most the one test that happened to import the module first, not the tests that check what it built.
# So the whole module runs first as usual (fast), then the mutants of these functions run again with every
# selected test, each forked from a server that has imported nothing of spillway (slow: every mutant
# imports and collects afresh, hence only for these). mutmut does not fingerprint ``process_isolation``,
# so switching it keeps the first run's results and stats.
IMPORT_TIME = {"stream_elements": ["spillway.formats.stream_elements.x\u01c1ElementKind\u01c1__post_init__"]}
FORKSERVER = ['process_isolation = "forkserver"', 'forkserver_warmup = "none"']
# Whole modules run once with forkserver isolation (each mutant with the tests the stats run gave it).
# handles: register(), family_layout() and the channel layouts build the registry and the layouts at import
# (and metadata.py caches the layouts built from them). metadata_codec's functions run only when called.
FORKSERVER_MODULES = {"handles"}


def workspace(module: str) -> Path:
    work = Path(tempfile.gettempdir()) / "spillway-mutation" / module
    if work.exists():
        shutil.rmtree(work)
    ignore = shutil.ignore_patterns(
        ".git", ".venv", "mutants", ".hypothesis", ".mypy_cache", "__pycache__", "*.egg-info"
    )
    shutil.copytree(ROOT, work, ignore=ignore, symlinks=True)
    return work


def configure(
    work: Path,
    module: str,
    extra: list[str] | None = None,
    tests: list[str] | None = None,
    keyword: str | None = None,
) -> None:
    path, selected = MODULES[module]
    # mutmut needs a clean run with every selected test passing: -k leaves out tests known to fail on the
    # branch being measured (they would fail for every mutant too, and detect nothing)
    keep = f', "-k", {json.dumps(keyword)}' if keyword else ""
    tests = tests or selected
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
            f' "-o", "tmp_path_retention_count=1000000"{keep}]',
            "use_git_change_detection = false",
            # mutmut's default (15 x the tests' time, wall; twice that in CPU) lets a mutant that loops forever
            # burn a core for minutes on a loaded machine; 6 x still leaves room for a slow, sound run
            "timeout_multiplier = 6.0",
            *(extra or []),
        ]
    )
    (work / "pyproject.toml").write_text(toml + "\n")


def refresh(module: str) -> Path:
    """The module's workspace of an earlier run, with the tests (and tools) of the working tree copied over it,
    for re-running that run's survivors after new tests (mutmut picks up new tests by itself)."""
    work = Path(tempfile.gettempdir()) / "spillway-mutation" / module
    if not (work / "mutants").is_dir():
        raise SystemExit(f"--rerun: no earlier run of {module} in {work}")
    for sub in ("tests", "tools"):
        shutil.rmtree(work / sub)
        shutil.copytree(ROOT / sub, work / sub, ignore=shutil.ignore_patterns("__pycache__", ".hypothesis"))
    shutil.copy2(ROOT / "pyproject.toml", work / "pyproject.toml")
    return work


def not_killed(work: Path, env: dict[str, str], mutmut: list[str]) -> list[str]:
    """Names of the mutants the last run did not kill (survived, no tests, timeout, suspicious, ...).

    Not "not checked": a re-run of some mutants makes mutmut forget the others' results (they list as "not
    checked"), so counting those would turn a second --rerun into a full run. After an interrupted first run, run
    the module again instead."""
    out = subprocess.run([*mutmut, "results", "--all", "true"], cwd=work, env=env, capture_output=True, text=True)
    names = []
    for line in out.stdout.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if name and status not in ("killed", "not checked"):
            names.append(name)
    return names


def every_test_for(work: Path, functions: list[str]) -> None:
    """Let mutmut run every selected test (all it timed in its stats run) for mutants of ``functions``."""
    path = work / "mutants" / "mutmut-stats.json"
    stats = json.loads(path.read_text())
    every = sorted(stats["duration_by_test"])
    for f in functions:
        stats["tests_by_mangled_function_name"][f] = every
    path.write_text(json.dumps(stats))


def only_globs(module: str, functions: list[str] | None) -> list[str]:
    """mutmut's names for the mutants of ``functions`` (``x_f__mutmut_3``, ``xǁClassǁmethod__mutmut_3``) as globs
    for ``mutmut run``; none: every mutant of the module."""
    dotted = MODULES[module][0].removesuffix(".py").replace("/", ".")
    globs = []
    for f in functions or []:
        cls, _, name = f.rpartition(".")
        mangled = f"x\u01c1{cls}\u01c1{name}" if cls else f"x_{name}"
        globs.append(f"{dotted}.{mangled}__mutmut_*")
    return globs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("module", nargs="?", choices=sorted(MODULES))
    ap.add_argument("--max-children", type=int, default=2)
    ap.add_argument("--list", action="store_true", help="the modules and their tests")
    ap.add_argument(
        "--only",
        action="append",
        metavar="FUNCTION",
        help="mutate only this function of the module (repeatable; a method as Class.method; fnmatch globs allowed)",
    )
    ap.add_argument(
        "--tests",
        action="append",
        metavar="FILE",
        help="run these test files instead of the module's selection (repeatable): a narrow, fast selection for a "
        "re-run can only kill fewer mutants, never more",
    )
    ap.add_argument(
        "-k",
        dest="keyword",
        metavar="EXPRESSION",
        help="pytest -k for every session of the run: leave out tests that fail without any mutant",
    )
    ap.add_argument(
        "--rerun",
        action="store_true",
        help="re-run the mutants the module's last run did not kill (with --only: every mutant of those functions), "
        "with the working tree's current tests",
    )
    args = ap.parse_args()
    if args.list or not args.module:
        for name, (path, tests) in MODULES.items():
            print(f"{name:16} {path:40} {' '.join(tests)}")
        return 0
    work = refresh(args.module) if args.rerun else workspace(args.module)
    configure(work, args.module, FORKSERVER if args.module in FORKSERVER_MODULES else None, args.tests, args.keyword)
    temproot = work / "pytest-tmp"  # inside the workspace: removed with it by the next run of the module
    temproot.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}",
        "PYTEST_DEBUG_TEMPROOT": str(temproot),
    }
    mutmut = [str(VENV_BIN / "mutmut")]
    run_cmd = [*mutmut, "run", "--max-children", str(args.max_children)]
    import_time = [f"{f}__mutmut_*" for f in IMPORT_TIME.get(args.module, [])]
    returncode = 0
    if args.rerun and args.only:
        returncode = subprocess.run([*run_cmd, *only_globs(args.module, args.only)], cwd=work, env=env).returncode
    elif args.rerun:
        names = not_killed(work, env, mutmut)
        later = {n for n in names if any(fnmatch.fnmatch(n, g) for g in import_time)}
        if names and len(later) < len(names):
            returncode = subprocess.run([*run_cmd, *(n for n in names if n not in later)], cwd=work, env=env).returncode
        if not later:
            import_time = []
    else:
        returncode = subprocess.run([*run_cmd, *only_globs(args.module, args.only)], cwd=work, env=env).returncode
    if import_time and returncode == 0:
        configure(work, args.module, FORKSERVER, args.tests, args.keyword)
        every_test_for(work, IMPORT_TIME[args.module])
        returncode = subprocess.run([*run_cmd, *import_time], cwd=work, env=env).returncode
    subprocess.run([*mutmut, "results", "--all", "true"], cwd=work, env=env)
    subprocess.run([*mutmut, "export-cicd-stats"], cwd=work, env=env)
    stats = work / "mutants" / "mutmut-cicd-stats.json"
    if stats.exists():
        print(json.dumps(json.loads(stats.read_text()), indent=1))
    print(f"workspace: {work}")
    return returncode


if __name__ == "__main__":
    sys.exit(main())
