#!/usr/bin/env python3
"""What each command transfers from an object store, and how fast, on a checkpoint of production shape.

    python benchmarks/bench_remote.py                 # 5 GiB of keyed state + ~220 MiB of channel state, 2000 files
    python benchmarks/bench_remote.py --small         # 64 MiB keyed + ~8 MiB channel state in 40 files (a minute)
    python benchmarks/bench_remote.py --results /tmp/remote.json --no-rescale
    python benchmarks/bench_remote.py --only validate --baseline main   # main's validate, then this checkout's
    python benchmarks/bench_remote.py --only validate --repeat 3 --baseline main --no-rescale   # 3 rounds

The checkpoint (cached in ~/.cache/spillway/bench/remote-<shape>/, metadata V6 written by spillway's encoder as
in synth_channel_state.py) is ``--edges`` all-to-all REBALANCE edges ``up-i -> down-i`` of ``--parallelism`` subtasks
each, their unaligned channel state one file per subtask and side (``2 x edges x parallelism`` files in
``chk-1/``), and on every ``down-i`` subtask a RocksDB incremental handle (the meta data and inline private
files of the real 2.3.0 ``rocksdb-incremental`` fixture, key groups as Flink assigns them) over
``--sst-per-subtask`` SST-like blobs in the job's ``shared/`` directory: ``--keyed-gib`` in all.

It is served by an in-process moto S3 server that counts every request's body bytes per key where they leave
the server (tests/support/counting_s3.py). moto keeps an object above ``MOTO_S3_DEFAULT_KEY_BUFFER_SIZE``
(set to 1 MiB here) in a temporary file, so the keyed state lives on disk, not in this process's memory. The
SST blobs are put straight into moto's backend (no HTTP: 5 GiB through moto's WSGI stack would take most of the
run); everything a command may read is uploaded over HTTP.

Each command runs once as ``python -m spillway CMD s3://bench/job/chk-1 --json`` (stdout to a file) and is
reported with its wall time, peak RSS, the requests and bytes the server answered, the bytes it needs (dump,
files: ``_metadata``; validate, analyze: ``_metadata`` + channel state; rescale: the same, never a keyed byte)
and the keyed-state bytes it read. The baseline is an ``aws s3 cp --recursive``-style download of ``chk-1/``
(the same bytes validate needs): boto3, one GET per object, 10 in flight (the AWS CLI's default
``max_concurrent_requests``), into a temporary directory; it runs before each round (``--repeat``) and after the
last, and each remote validate's rate is given against the mean of the two downloads around its round.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("MOTO_S3_DEFAULT_KEY_BUFFER_SIZE", str(1 << 20))  # bigger objects go to a temp file

from side_by_side import baseline_checkout, process_cpu, spillway_cwd  # noqa: E402
from synth_channel_state import PROPS, record_block, write_edge  # noqa: E402

from spillway.formats.metadata_codec import decode_metadata, encode_metadata  # noqa: E402
from spillway.model.checkpoint import (  # noqa: E402
    ByteStreamHandle,
    CheckpointMetadata,
    FileHandle,
    IncrementalHandle,
    KeyGroupRange,
    LocalPathHandle,
    OperatorState,
    SubtaskState,
)

PY = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable
BUCKET = "bench"
JOB = f"{BUCKET}/job"
CHK = f"{JOB}/chk-1"
MAX_PARALLELISM = 128
TEMPLATE = ROOT / "tests" / "fixtures" / "2.3.0-rocksdb-incremental"


@dataclass(frozen=True)
class Shape:
    edges: int
    parallelism: int
    channel_mib: float
    keyed_gib: float
    sst_per_subtask: int

    @property
    def name(self) -> str:
        return f"{self.edges}x{self.parallelism}-c{self.channel_mib:g}m-k{self.keyed_gib:g}g-s{self.sst_per_subtask}"

    @property
    def sst_size(self) -> int:
        return int(self.keyed_gib * (1 << 30)) // (self.edges * self.parallelism * self.sst_per_subtask)


def key_groups(subtask: int, parallelism: int) -> KeyGroupRange:
    """Flink's KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex."""
    start = (subtask * MAX_PARALLELISM + parallelism - 1) // parallelism
    end = ((subtask + 1) * MAX_PARALLELISM - 1) // parallelism
    return KeyGroupRange(start, end - start + 1)


def template_handle() -> IncrementalHandle:
    """A real RocksDB incremental handle (Flink 2.3.0): its meta data and inline private files are reused."""
    md = next(TEMPLATE.rglob("_metadata"))
    for op in decode_metadata(md.read_bytes()).operators:
        for st in op.subtasks:
            if isinstance(st.managed_keyed_state, IncrementalHandle):
                return st.managed_keyed_state
    raise SystemExit(f"{md}: no incremental keyed state to use as template")


def synthesize(shape: Shape, base: Path) -> list[tuple[str, int]]:
    """The checkpoint's ``chk-1/`` and ``plan.json`` in ``base`` (once); returns the SST blobs (key, size) it
    references, which are not written locally."""
    chk = base / "job" / "chk-1"
    ssts_file = base / "ssts.json"
    if (chk / "_metadata").exists() and ssts_file.exists():
        return [(k, s) for k, s in json.loads(ssts_file.read_text())]
    chk.mkdir(parents=True, exist_ok=True)
    rng = random.Random(31)
    p = shape.parallelism
    target = shape.channel_mib * (1 << 20) / (shape.edges * p * p)  # bytes per logical channel
    block = record_block(rng, max(20, min(20_000, round(target / 121))))
    per_channel = max(1, round(target / len(block))) * len(block)
    template = template_handle()
    private = [h for h in template.private_state if isinstance(h.handle, ByteStreamHandle)]
    ssts: list[tuple[str, int]] = []
    ops: list[OperatorState] = []
    nodes: list[dict[str, object]] = []
    for e in range(shape.edges):
        down_subs, up_subs = write_edge(chk, rng, p, block, per_channel)
        agg_subs = {s: SubtaskState(s) for s in range(p)}
        for s, sub in agg_subs.items():
            shared = []
            for n in range(shape.sst_per_subtask):
                key = f"{JOB}/shared/{uuid.UUID(int=rng.getrandbits(128))}"
                ssts.append((key, shape.sst_size))
                shared.append(LocalPathHandle(f"{n + 10:06d}.sst", FileHandle(f"s3://{key}", shape.sst_size)))
            sub.managed_keyed_state = IncrementalHandle(
                checkpoint_id=1,
                backend_identifier=str(uuid.UUID(int=rng.getrandbits(128))),
                key_groups=key_groups(s, p),
                checkpointed_size=shape.sst_size * shape.sst_per_subtask,
                meta_state_handle=template.meta_state_handle,
                shared_state=shared,
                private_state=private,
                state_handle_id=str(uuid.UUID(int=rng.getrandbits(128))),
            )
        agg, down, up = (f"{e:08x}" + c * 24 for c in "cda")
        for vertex, name, subs in ((agg, "agg", agg_subs), (down, "down", down_subs), (up, "up", up_subs)):
            uid = f"{name}-{e}"
            ops.append(OperatorState(vertex, p, MAX_PARALLELISM, name=uid, uid=uid, subtasks=[*subs.values()]))
        nodes.append(
            {
                "id": agg,
                "parallelism": p,
                "description": f"agg-{e}<br/>",
                "inputs": [{"id": down, "num": 0, "ship_strategy": "HASH"}],
            }
        )
        nodes.append(
            {
                "id": down,
                "parallelism": p,
                "description": f"down-{e}<br/>",
                "inputs": [{"id": up, "num": 0, "ship_strategy": "REBALANCE"}],
            }
        )
        nodes.append({"id": up, "parallelism": p, "description": f"up-{e}<br/>"})
    (base / "plan.json").write_text(json.dumps({"nodes": nodes}))
    ssts_file.write_text(json.dumps(ssts))
    (chk / "_metadata").write_bytes(encode_metadata(CheckpointMetadata(6, 1, ops, properties_raw=PROPS)))
    return ssts


def put_keyed_state(ssts: list[tuple[str, int]]) -> None:
    """The SST blobs, straight into moto's backend (same process as the server). Each is a fixed random pool
    behind its own index, so no two are equal; the ETag is given, not hashed over 5 GiB."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    pool = random.Random(5).randbytes(max((s for _, s in ssts), default=0))
    for i, (key, size) in enumerate(ssts):
        bucket, _, name = key.partition("/")
        body = i.to_bytes(8, "big") + pool[: max(0, size - 8)]
        backend.put_object(bucket, name, body[:size], etag=uuid.UUID(int=i).hex)


def high_water_kib(pid: int) -> int:
    """VmHWM of a running process (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


@dataclass
class Row:
    name: str
    code: int
    wall: float
    cpu: float  # the command's user + system seconds (0: not measured, the bulk download runs in this process)
    rss_mib: float
    gets: int
    heads: int
    lists: int
    read: int  # body bytes of every GET
    keyed_read: int
    needed: int


def run_command(  # type: ignore[no-untyped-def]
    name: str,
    args: list[str],
    env: dict[str, str],
    counter,
    keyed: set[str],
    needed: int,
    outputs: Path,
    code: Path | None = None,
) -> Row:
    """One run (of the checkout ``code``, this one when None); its stdout and stderr are kept as
    ``outputs/<command>[@rev].out`` / ``.err``."""
    counter.reset()
    outputs.mkdir(exist_ok=True)
    stem = args[0] if code is None else f"{args[0]}@{code.name}"
    env = {**env, "PYTHONPATH": str(spillway_cwd(code))}
    with open(outputs / f"{stem}.out", "wb") as out, open(outputs / f"{stem}.err", "wb") as errs:
        t0 = time.perf_counter()
        cwd = spillway_cwd(code)
        proc = subprocess.Popen([PY, "-m", "spillway", *args], cwd=cwd, env=env, stdout=out, stderr=errs)
        peak = 0
        while True:  # the child's own high-water mark (rusage's would start at this process's), and its CPU time
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            peak = max(peak, high_water_kib(proc.pid))
            time.sleep(0.05)
        wall = time.perf_counter() - t0
    code = proc.returncode = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        err = (outputs / f"{stem}.err").read_text(errors="replace")
        print(f"{name}: exit {code}: {err.strip()[-2000:]}", file=sys.stderr)
    read = counter.bytes_read()
    return Row(
        name,
        code,
        wall,
        process_cpu(usage),
        peak / 1024,
        len(counter.of("GET")),
        len(counter.of("HEAD")),
        len(counter.of("LIST")),
        sum(read.values()),
        sum(v for k, v in read.items() if k in keyed),
        needed,
    )


def bulk_download(s3, counter, keys: list[str], needed: int, workers: int) -> Row:  # type: ignore[no-untyped-def]
    """``aws s3 cp --recursive``: one GET per object, ``workers`` in flight, each written to a local file."""
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "s3",
        endpoint_url=s3.url,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
        config=Config(max_pool_connections=workers),
    )
    counter.reset()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()

        def one(key: str) -> None:
            bucket, _, name = key.partition("/")
            client.download_file(bucket, name, os.path.join(tmp, name.replace("/", "_")))

        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, keys))
        wall = time.perf_counter() - t0
    read = counter.bytes_read()
    gets = len(counter.of("GET"))
    heads, lists = len(counter.of("HEAD")), len(counter.of("LIST"))
    name = f"bulk download ({workers} in flight)"
    return Row(name, 0, wall, 0.0, 0.0, gets, heads, lists, sum(read.values()), 0, needed)


def table(rows: list[Row]) -> str:
    out = [
        "| command | exit | wall s | CPU s | MiB needed / s | GETs | HEADs | LISTs | MiB read | MiB needed "
        "| read/needed | keyed MiB read | peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    mib = 1 << 20
    for r in rows:
        ratio = r.read / r.needed if r.needed else float("nan")
        out.append(
            f"| {r.name} | {r.code} | {r.wall:.2f} | {f'{r.cpu:.2f}' if r.cpu else '-'} "
            f"| {r.needed / mib / r.wall:.1f} | {r.gets} | {r.heads} | {r.lists} "
            f"| {r.read / mib:.2f} | {r.needed / mib:.2f} | {ratio:.4f} | {r.keyed_read / mib:.2f} | {r.rss_mib:.0f} |"
        )
    return "\n".join(out)


def rates(rows: list[Row]) -> str:
    """Each remote validate's rate against the bulk download's, the bulk time taken as the mean of the downloads
    right before and after its round (> 1: validate faster than downloading the same bytes)."""
    out = ["| round | bulk s (before / after) | command | wall s | CPU s | its rate / bulk rate |"]
    out.append("|---|---|---|---|---|---|")
    bulks = [i for i, r in enumerate(rows) if r.name.startswith("bulk download")]
    for n, (start, end) in enumerate(itertools.pairwise(bulks), 1):
        bulk = (rows[start].wall + rows[end].wall) / 2
        for r in rows[start + 1 : end]:
            if r.name.startswith("validate") and "local disk" not in r.name:
                out.append(
                    f"| {n} | {rows[start].wall:.2f} / {rows[end].wall:.2f} | {r.name} | {r.wall:.2f} | {r.cpu:.2f} "
                    f"| {bulk / r.wall:.2f} |"
                )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", action="store_true", help="2 edges x 10 subtasks, 8 MiB channel, 64 MiB keyed")
    ap.add_argument("--edges", type=int, default=20)
    ap.add_argument("--parallelism", type=int, default=50)
    ap.add_argument("--channel-mib", type=float, default=220.0)
    ap.add_argument("--keyed-gib", type=float, default=5.0)
    ap.add_argument("--sst-per-subtask", type=int, default=2)
    ap.add_argument("--bulk-workers", type=int, default=10)
    ap.add_argument("--no-rescale", action="store_true")
    ap.add_argument("--only", nargs="+", metavar="COMMAND", help="run only these commands (and the bulk download)")
    ap.add_argument("--baseline", metavar="REV", help="also run each command at this revision, right before")
    ap.add_argument("--results", type=Path, help="write the rows as JSON here")
    ap.add_argument("--repeat", type=int, default=1, help="rounds (each after its own bulk download)")
    args = ap.parse_args()
    baseline = baseline_checkout(args.baseline) if args.baseline else None
    if args.small:
        shape = Shape(2, 10, 8.0, 1 / 16, 2)
    else:
        shape = Shape(args.edges, args.parallelism, args.channel_mib, args.keyed_gib, args.sst_per_subtask)
    base = Path.home() / ".cache" / "spillway" / "bench" / f"remote-{shape.name}"
    t0 = time.perf_counter()
    ssts = synthesize(shape, base)
    chk = base / "job" / "chk-1"
    own = {f"{CHK}/{f.name}": f.stat().st_size for f in chk.iterdir()}
    metadata = own[f"{CHK}/_metadata"]
    channel = sum(own.values()) - metadata
    print(
        f"checkpoint {base}: {len(own) - 1} channel-state files ({channel / (1 << 20):.1f} MiB), _metadata "
        f"{metadata / (1 << 20):.2f} MiB, {len(ssts)} SST blobs ({sum(s for _, s in ssts) / (1 << 30):.2f} GiB); "
        f"synthesized in {time.perf_counter() - t0:.1f} s",
        flush=True,
    )

    from support.counting_s3 import counting_s3
    from support.endpoints import upload

    with counting_s3(buckets=(BUCKET,)) as (s3, counter):
        assert s3.client is not None
        t0 = time.perf_counter()
        upload(s3.client, chk, CHK)
        put_keyed_state(ssts)
        print(f"uploaded in {time.perf_counter() - t0:.1f} s", flush=True)
        env = {**os.environ, **s3.env(), "PYTHONPATH": str(ROOT)}
        uri, plan = f"s3://{CHK}", str(base / "plan.json")
        keyed = {k for k, _ in ssts}
        both = sum(own.values())
        commands: list[tuple[str, list[str], int]] = [
            ("dump", ["dump", uri, "--json"], metadata),
            ("files", ["files", uri, "--json"], metadata),
            ("validate", ["validate", uri, "--plan", plan, "--json"], both),
            # the same files on local disk: what framing them costs without the transfer (the keyed files, named
            # by s3:// URIs, are not checked from a local checkpoint)
            ("validate, chk-1 on local disk", ["validate", str(chk), "--plan", plan, "--json"], both),
            ("analyze", ["analyze", uri, "--plan", plan, "--json"], both),
        ]
        # a bulk download before every round and after the last: the spread between them is the machine's noise
        rows: list[Row] = []
        loads: list[tuple[float, float, float]] = []
        with tempfile.TemporaryDirectory() as tmp:
            for n in range(args.repeat):
                rows.append(bulk_download(s3, counter, sorted(own), both, args.bulk_workers))
                print(table(rows[-1:]).splitlines()[-1], flush=True)
                loads.append(os.getloadavg())
                if not args.no_rescale:
                    rescale = ["rescale", uri, "--plan", plan, "-p", f"down-0={2 * shape.parallelism}"]
                    rescale += ["-p", f"agg-0={2 * shape.parallelism}"]
                    rescale += ["--master", "inprocess", "--out", f"{tmp}/out-{n}", "--json"]
                    commands = [c for c in commands if c[1][0] != "rescale"] + [
                        ("rescale down-0, agg-0 (inprocess)", rescale, both)
                    ]
                for name, cmd, needed in commands:
                    if args.only and cmd[0] not in args.only:
                        continue
                    if baseline is not None:  # its own --out: spillway never writes over one
                        rev = args.baseline
                        theirs = [f"{a}-{rev}" if i and cmd[i - 1] == "--out" else a for i, a in enumerate(cmd)]
                        row = run_command(name, theirs, env, counter, keyed, needed, base / "outputs", baseline)
                        row.name = f"{name} @{args.baseline}"
                        rows.append(row)
                        print(table(rows[-1:]).splitlines()[-1], flush=True)
                    rows.append(run_command(name, cmd, env, counter, keyed, needed, base / "outputs"))
                    print(table(rows[-1:]).splitlines()[-1], flush=True)
        rows.append(bulk_download(s3, counter, sorted(own), both, args.bulk_workers))
    loads.append(os.getloadavg())
    print(f"\nload average (1 min) at each round's start and at the end: {' / '.join(f'{x[0]:.1f}' for x in loads)}")
    print(f"on {os.cpu_count()} cores\n")
    print(table(rows))
    print("\n" + rates(rows))
    if args.results:
        args.results.write_text(json.dumps([r.__dict__ for r in rows], indent=2))
    if any(r.code not in (0, 1) for r in rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
