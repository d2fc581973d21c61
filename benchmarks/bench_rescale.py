#!/usr/bin/env python3
"""`spillway rescale` throughput on a synthetic >= 1 GiB channel-state checkpoint (run on demand).

    python benchmarks/bench_rescale.py                          # 1 GiB rebalance + 0.25 GiB hash edge
    python benchmarks/bench_rescale.py --gib 2 --masters 'local[1]' 'local[2]'
    python benchmarks/bench_rescale.py --cases parse            # only parse 2->3
    python benchmarks/bench_rescale.py --masters standalone:1 standalone:2   # a cluster of N 1-core workers

The input (benchmarks/synth_rescale.py: the real "counted" fixture with its in-flight data blown up) is
cached in ~/.cache/spillway/bench/rescale-<gib>g-h<hash gib>/. Cases:

* ``parse``: parse 2->3 — moves src->parse (REBALANCE, balanced by bytes) and parse->count (HASH edge
  whose upstream is rescaled: records keep their key-group subtask);
* ``count``: parse 2->3 and count 2->3 with ``--key count=tuple:0:long`` — additionally routes every
  record of parse->count by its key group (and redistributes count's keyed state).

Each case runs with every ``--masters`` entry (``inprocess`` = no Spark; ``standalone:N`` = a standalone
Spark cluster on loopback that the script starts from the pyspark distribution: one master and N workers
of 1 core and 1 GiB each, stopped after that entry's runs) through the CLI in a fresh process; the
outputs of one case must be byte-identical across masters (checked). Reported: wall time
(JVM start included), MiB/s of channel-state payload moved, speed-up against the first Spark master,
and peak RSS of the whole process tree (driver python + JVM + python workers; /proc sampled every
0.2 s), also split into the driver, the JVM(s) and the Spark python workers.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from side_by_side import ratios, spread  # noqa: E402
from spark_cluster import standalone  # noqa: E402

PY = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable
PAGE = os.sysconf("SC_PAGE_SIZE")


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(d))
    return kids


def _tree(root: int) -> list[int]:
    kids, out, todo = _children(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += kids.get(pid, [])
    return out


TICK = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process (a JVM is no child the driver reaps, so rusage misses it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def _rss_and_kind(pid: int) -> tuple[int, str]:
    try:
        with open(f"/proc/{pid}/statm") as f:
            rss = int(f.read().split()[1]) * PAGE
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return 0, "gone"
    if "java" in cmd.split(" ")[0]:
        return rss, "jvm"
    if "pyspark.daemon" in cmd or "pyspark.worker" in cmd or "pyspark/daemon" in cmd:
        return rss, "workers"
    return rss, "other"


class TreeSampler(threading.Thread):
    """Peak RSS of a process tree (total and per kind), sampled every ``interval`` seconds."""

    def __init__(self, root: int, interval: float = 0.2, extra: tuple[int, ...] = ()):
        """``extra``: more process trees to count (a standalone cluster's workers: executor JVMs and
        their python workers)."""
        super().__init__(daemon=True)
        self.root, self.interval, self.extra = root, interval, extra
        self.peak: dict[str, int] = {"total": 0, "driver": 0, "jvm": 0, "workers": 0}
        self.stop = threading.Event()
        self.cpu: dict[int, float] = {}  # pid -> user + system seconds, last seen

    def run(self) -> None:
        while not self.stop.is_set():
            now = {"total": 0, "driver": 0, "jvm": 0, "workers": 0}
            for pid in [p for r in (self.root, *self.extra) for p in _tree(r)]:
                self.cpu[pid] = max(self.cpu.get(pid, 0.0), _cpu_seconds(pid))
                rss, kind = _rss_and_kind(pid)
                now["total"] += rss
                if pid == self.root:
                    now["driver"] += rss
                elif kind in ("jvm", "workers"):
                    now[kind] += rss
            for k, v in now.items():
                self.peak[k] = max(self.peak[k], v)
            self.stop.wait(self.interval)


def baseline_checkout(rev: str) -> Path:
    """A detached git worktree of ``rev`` (cached), whose ``spillway`` package a run imports instead of
    this checkout's: same interpreter and dependencies, only the code differs."""
    sha = subprocess.run(["git", "rev-parse", rev], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    tree = Path.home() / ".cache" / "spillway" / "bench" / f"worktree-{sha.strip()[:12]}"
    if not (tree / "spillway").is_dir():
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), rev], cwd=ROOT, check=True)
    return tree


def _event_log(work: Path) -> tuple[list[str], Path]:
    """``--conf`` arguments for an uncompressed event log into a directory of its own, and that directory. They go
    to ``spark-submit`` through ``PYSPARK_SUBMIT_ARGS``, not through a ``SPARK_CONF_DIR`` of the bench's: the
    launcher puts that directory first on the driver's class path, and with a non-empty directory there the JVM
    neither dumps nor maps the class-data-sharing archive (spillway.rescale.spark_cds), so every run would start
    ~3 s slower than a user's (as all runs before 2026-11-26 did)."""
    events = Path(tempfile.mkdtemp(prefix="events-", dir=work))
    confs = {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": f"file:{events}",
        "spark.eventLog.compress": "false",
    }
    return [a for k, v in confs.items() for a in ("--conf", shlex.quote(f"{k}={v}"))], events


def spark_phases(events: Path, launched: float, ended: float, cores: int) -> dict | None:
    """Where a Spark run's wall time went, from its event log (epoch seconds ``launched`` / ``ended`` of the
    CLI process). Jobs in order: a warm-up (if the revision has one), the route job, the write job. ``task``:
    seconds of task work (deserialize + run, summed over tasks: the part more cores can share);
    ``serial``: the wall time not covered by that work spread over ``cores``."""
    logs = sorted(events.rglob("events_*")) or sorted(p for p in events.rglob("*") if p.is_file())
    if not logs:
        return None
    app = None
    jobs: dict[int, dict] = {}
    stage_job: dict[int, int] = {}
    with open(logs[-1]) as f:
        for line in f:
            e = json.loads(line)
            kind = e["Event"]
            if kind == "SparkListenerApplicationStart":
                app = e["Timestamp"] / 1e3
            elif kind == "SparkListenerJobStart":
                jobs[e["Job ID"]] = {"submit": e["Submission Time"] / 1e3, "task": 0.0, "tasks": 0}
                for sid in e.get("Stage IDs", []):
                    stage_job[sid] = e["Job ID"]
            elif kind == "SparkListenerJobEnd":
                jobs[e["Job ID"]]["end"] = e["Completion Time"] / 1e3
            elif kind == "SparkListenerTaskEnd":
                m = e.get("Task Metrics") or {}
                job = jobs[stage_job[e["Stage ID"]]]
                job["task"] += (m.get("Executor Deserialize Time", 0) + m.get("Executor Run Time", 0)) / 1e3
                job["tasks"] += 1
    done = [jobs[k] for k in sorted(jobs) if "end" in jobs[k]]
    if app is None or not done:
        return None
    task = sum(j["task"] for j in done)
    wall = ended - launched
    return {
        "to_context": app - launched,  # interpreter, imports, source validation, JVM and context start
        "to_first_job": done[0]["submit"] - app,
        "in_jobs_not_tasks": sum(j["end"] - j["submit"] for j in done) - task / cores,
        "between_jobs": sum(b["submit"] - a["end"] for a, b in itertools.pairwise(done)),
        "after_jobs": ended - done[-1]["end"],
        "task": task,
        "serial": wall - task / cores,
        "jobs": [{k: round(v, 3) if isinstance(v, float) else v for k, v in j.items()} for j in done],
    }


def master_cores(master: str) -> int:
    m = re.fullmatch(r"local\[(\d+)\]|standalone:(\d+)", master)
    return int(m.group(1) or m.group(2)) if m else os.cpu_count() or 1


def run_case(
    chk: Path,
    plan: Path,
    args: list[str],
    master: str,
    out: Path,
    code: Path | None = None,
    extra: tuple[int, ...] = (),
    cores: int = 1,
) -> dict:
    if out.exists():
        shutil.rmtree(out)
    cmd = [PY, "-m", "spillway", "rescale", str(chk), "--plan", str(plan), *args, "--out", str(out)]
    cmd += ["--master", master, "--json"]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    events = None
    submit: list[str] = []
    if master != "inprocess":
        submit, events = _event_log(out.parent)
    if code is not None:  # PYTHONPATH wins over the editable install; local python workers inherit it
        env["PYTHONPATH"] = os.pathsep.join([str(code), *filter(None, [env.get("PYTHONPATH")])])
        if master.startswith("spark://"):  # a cluster's executors do not: hand it to them explicitly
            submit += ["--conf", shlex.quote(f"spark.executorEnv.PYTHONPATH={env['PYTHONPATH']}")]
    if submit:  # before the caller's own arguments, which end in "pyspark-shell"
        env["PYSPARK_SUBMIT_ARGS"] = " ".join([*submit, env.get("PYSPARK_SUBMIT_ARGS", "pyspark-shell")])
    launched = time.time()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=out.parent)
    sampler = TreeSampler(proc.pid, extra=extra)
    sampler.start()
    stdout, stderr = proc.communicate()
    wall = time.perf_counter() - t0
    ended = time.time()
    sampler.stop.set()
    sampler.join()
    # CPU of the whole tree (driver, JVM, python workers; a cluster's workers and executors), each process's
    # own user + system time as last sampled from /proc: rusage would miss the JVM, which nobody reaps.
    # A process loses what it used after its last sample (up to 0.2 s).
    cpu = sum(sampler.cpu.values())
    if proc.returncode != 0:
        raise SystemExit(f"{master}: exit {proc.returncode}\n{stderr.decode()[-3000:]}")
    doc = json.loads(stdout)
    phases = spark_phases(events, launched, ended, cores) if events is not None else None
    if events is not None:
        shutil.rmtree(events, ignore_errors=True)
    return {
        "wall": wall,
        "timings": doc.get("timings", {}),
        "cpu": cpu,
        "peak": dict(sampler.peak),
        "records": doc["records_moved"],
        "digest": _digest(out),
        "spark": phases,
    }


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode())
            with open(p, "rb") as f:
                while block := f.read(1 << 22):
                    h.update(block)
    return h.hexdigest()


def payload_bytes(chk: Path, plan: Path, args: list[str]) -> int:
    """Channel-state payload the rescale moves (the planner's own count, summed over its sources)."""
    code = (
        "import sys, json\n"
        "from spillway.storage.load import load_checkpoint\n"
        "from spillway.inspect.topology import load_plan\n"
        "from spillway.rescale.plan import build_plan\n"
        "ld = load_checkpoint(sys.argv[1]); ld.resolve_files()\n"
        "p = dict(a.split('=') for a in sys.argv[3].split(','))\n"
        "k = dict(a.split('=') for a in sys.argv[4].split(',') if a)\n"
        "plan = build_plan(ld.checkpoint, load_plan(sys.argv[2]), ld.resolver, {x: int(n) for x, n in p.items()}, k)\n"
        "print(sum(s.payload_bytes for s in plan.sources))\n"
    )
    par = ",".join(args[i + 1] for i, a in enumerate(args) if a == "-p")
    keys = ",".join(args[i + 1] for i, a in enumerate(args) if a == "--key")
    res = subprocess.run([PY, "-c", code, str(chk), str(plan), par, keys], capture_output=True, text=True, cwd=chk)
    if res.returncode:
        raise SystemExit(res.stderr)
    return int(res.stdout)


def _line(label: str, run: dict, mib: float) -> str:
    pk = {k: v / (1 << 20) for k, v in run["peak"].items()}
    t = run["timings"]  # absent before the report had timings
    phases = (
        f"move {t['move']:5.1f} s {mib / t['move']:6.1f} MiB/s | spark start {t['spark_start']:4.1f} s, plan "
        f"{t['plan']:4.1f} s, state+metadata {t['state_and_metadata']:4.1f} s, final check {t['final_check']:4.1f} s"
        if t
        else "(no phase timings)"
    )
    return (
        f"  {label:10} {run['wall']:6.1f} s {mib / run['wall']:6.1f} MiB/s end to end, CPU {run['cpu']:5.1f} s | "
        f"{phases} | peak RSS "
        f"{pk['total']:5.0f} MiB (driver {pk['driver']:.0f}, JVM {pk['jvm']:.0f}, python workers "
        f"{pk['workers']:.0f}) | {run['records']} records"
    )


@contextmanager
def _master(master: str, work: Path) -> Iterator[tuple[str, tuple[int, ...]]]:
    """The --master value for an entry, and the extra process trees to sample (a cluster's workers)."""
    if not master.startswith("standalone:"):
        yield master, ()
        return
    with standalone(int(master.split(":", 1)[1]), work / f"cluster-{master.split(':', 1)[1]}") as cluster:
        yield cluster


CASES = {
    "parse": ["-p", "parse=3"],
    "count": ["-p", "parse=3", "-p", "count=3", "--key", "count=tuple:0:long"],
}


def _phases_line(label: str, runs: list[dict]) -> str | None:
    """Medians over the runs of where the Spark runs' wall time went (``spark_phases``)."""
    phases = [r["spark"] for r in runs if r.get("spark")]
    if not phases:
        return None

    def med(key: str) -> float:
        return statistics.median(p[key] for p in phases)

    return (
        f"  {label:10} serial {med('serial'):5.1f} s = to SparkContext {med('to_context'):4.1f} + to first job "
        f"{med('to_first_job'):4.1f} + in jobs outside tasks {med('in_jobs_not_tasks'):4.1f} + between jobs "
        f"{med('between_jobs'):4.1f} + after jobs {med('after_jobs'):4.1f} s | task work {med('task'):5.1f} s in "
        f"{len(phases[0]['jobs'])} jobs (medians of {len(phases)})"
    )


def run_masters(
    case: str, chk: Path, plan: Path, args: argparse.Namespace, urls: dict, base_code: Path | None, work: Path
) -> dict:
    """One case: every master in turn, ``args.repeat`` rounds (REV right before this checkout each time)."""
    cargs = CASES[case]
    mib = payload_bytes(chk, plan, cargs) / (1 << 20)
    print(f"\ncase {case} ({' '.join(cargs)}): {mib:.0f} MiB of channel-state payload moved", flush=True)
    runs: dict[str, list[dict]] = {m: [] for m in args.masters}
    old_runs: dict[str, list[dict]] = {m: [] for m in args.masters}
    for _ in range(args.repeat):
        for master in args.masters:
            url, extra = urls[master]
            cores = master_cores(master)
            if base_code is not None:  # interleaved, so both see the same machine state
                old_runs[master].append(run_case(chk, plan, cargs, url, work / case, base_code, extra, cores))
            runs[master].append(run_case(chk, plan, cargs, url, work / case, extra=extra, cores=cores))
    rows: dict[str, dict] = {}
    baseline: dict[str, dict] = {}
    for master in args.masters:
        best = min(runs[master], key=lambda r: r["wall"])
        best["walls"] = [r["wall"] for r in runs[master]]
        rows[master] = best
        olds = old_runs[master]
        if olds:
            old = baseline[master] = min(olds, key=lambda r: r["wall"])
            old["walls"] = [r["wall"] for r in olds]
            print(_line(f"{master} @{args.baseline}", old, mib), flush=True)
            print(f"  {'':10} wall min / median / max {spread(old['walls'], '{:.1f}')} s")
            line = _phases_line(f"@{args.baseline}", olds)
            if line:
                print(line)
        print(_line(master, best, mib), flush=True)
        print(f"  {'':10} wall min / median / max {spread(best['walls'], '{:.1f}')} s", flush=True)
        line = _phases_line("", runs[master])
        if line:
            print(line, flush=True)
        if olds:
            pairs = ratios(old["walls"], best["walls"])
            print(f"  {'':10} {args.baseline} / now, per pair, min / median / max: {spread(pairs)}x", flush=True)
    digests = {m: r["digest"] for m, rs in runs.items() for r in rs}
    digests.update({f"{m}@{args.baseline}": r["digest"] for m, rs in old_runs.items() for r in rs})
    same = len(set(digests.values())) == 1
    print(f"  outputs byte-identical across masters and runs: {same}")
    spark = [m for m in args.masters if m != "inprocess"]
    if len(spark) >= 2:
        a, b = spark[0], spark[-1]
        for label, by in (("now", runs), (f"@{args.baseline}", old_runs)):
            if not by[a]:
                continue
            walls_a = [r["wall"] for r in by[a]]
            walls_b = [r["wall"] for r in by[b]]
            move = statistics.median(r["timings"]["move"] for r in by[a]) / statistics.median(
                r["timings"]["move"] for r in by[b]
            )
            print(
                f"  speed-up {b} / {a} ({label}), per round min / median / max: {spread(ratios(walls_a, walls_b))}x "
                f"end to end, {move:.2f}x in the move phase (medians)"
            )
            phases = [r["spark"] for r in by[a] if r.get("spark")]
            n = master_cores(b)
            if phases and master_cores(a) == 1:
                serial = statistics.median(p["serial"] for p in phases)
                task = statistics.median(p["task"] for p in phases)
                bound = (serial + task) / (serial + task / n)
                print(
                    f"  Amdahl's bound on {n} cores ({label}) from {a}'s medians, serial {serial:.1f} s and task "
                    f"work {task:.1f} s: {bound:.2f}x"
                )
    if not same:
        raise SystemExit(f"outputs differ across masters: {digests}")
    return {"mib": mib, "runs": rows, "baseline": baseline, "identical": same, "all": runs, "all_baseline": old_runs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gib", type=float, default=1.0, help="channel state on the REBALANCE edge src -> parse")
    ap.add_argument("--hash-gib", type=float, default=0.25, help="channel state on the HASH edge parse -> count")
    ap.add_argument("--masters", nargs="+", default=["inprocess", "local[1]", "local[2]"])
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--work", type=Path, default=None, help="output directory (default: a temp dir next to the input)")
    ap.add_argument("--results", type=Path, help="write the figures as JSON")
    ap.add_argument(
        "--baseline",
        metavar="REV",
        help="also run git revision REV (a worktree of it) right before each run, report the ratio and "
        "check its output is byte-identical",
    )
    args = ap.parse_args()
    base_code = baseline_checkout(args.baseline) if args.baseline else None
    base = Path.home() / ".cache" / "spillway" / "bench" / f"rescale-{args.gib}g-h{args.hash_gib}"
    plan = base / "jobgraph.json"
    chks = list(base.glob("checkpoints/*/chk-*/_metadata"))
    if not chks:
        print(f"synthesizing {args.gib} + {args.hash_gib} GiB of channel state in {base} …", flush=True)
        synth = [PY, str(ROOT / "benchmarks" / "synth_rescale.py"), str(base)]
        subprocess.run(
            [*synth, "--gib", str(args.gib), "--hash-gib", str(args.hash_gib)],
            check=True,
            stdout=subprocess.DEVNULL,
            cwd=ROOT,
        )
        chks = list(base.glob("checkpoints/*/chk-*/_metadata"))
    chk = chks[0].parent
    work = args.work or base / "out"
    work.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cat", *map(str, chk.iterdir())], stdout=subprocess.DEVNULL, check=True)  # warm page cache
    results: dict = {"input": str(chk), "cases": {}}
    with ExitStack() as stack:  # every cluster stays up for the whole run, so the masters can take turns
        urls = {m: stack.enter_context(_master(m, work)) for m in args.masters}
        for case in args.cases:
            results["cases"][case] = run_masters(case, chk, plan, args, urls, base_code, work)
    shutil.rmtree(work / "parse", ignore_errors=True)
    shutil.rmtree(work / "count", ignore_errors=True)
    if args.results:
        args.results.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
