"""``validate``: prove a checkpoint sound, or say exactly where it is not.

Four passes, each a family of named rules (``findings.RULES``, one module each under ``rules/``):
metadata-level consistency, every referenced file, the chunk structure of every channel-state blob, and
record framing along every logical channel (with a plan) or every input-side handle (without one). The
byte work — opening and walking blobs, framing in C on a thread pool — is ``validate_engine``'s. Files are
streamed: memory stays bounded by the number of chunks, not their bytes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the plan's machinery loads only when there is a plan (see _bind)
    from spillway.inspect.topology import Edge, JobBinding, Topology

from collections.abc import Callable, Hashable, Mapping
from pathlib import Path

from spillway.formats.damaged_length import FLINK_SEGMENT_SIZE, locate
from spillway.formats.record_framing import FramingFault
from spillway.formats.stream_elements import tags_for_format_version
from spillway.inspect.channels import ChannelKey, ChannelMap, channel_key, logical_channels
from spillway.inspect.findings import Finding, sort_findings
from spillway.inspect.rules.against_plan import placement_findings, plan_findings, topology_notes
from spillway.inspect.rules.chunks import handle_chunk_findings, unclaimed_finding
from spillway.inspect.rules.common import Claims, Located
from spillway.inspect.rules.files import missing_file, referenced_files, size_finding, unreadable_file
from spillway.inspect.rules.records import FramedChannel, Piece, ReadBack, damaged_findings, record_findings
from spillway.inspect.rules.structure import structure_findings
from spillway.inspect.validate_engine import Counted, Engine, Job, Parts, usable_cores
from spillway.inspect.validate_report import Recorder, Report, Unchecked
from spillway.model.checkpoint import CheckpointMetadata, channel_handles
from spillway.model.paths import named_path_problems, shown_path
from spillway.safe_io import NotARegularFile, check_regular, open_regular
from spillway.storage import remote_copies
from spillway.storage.blobs import start_delegates
from spillway.storage.load import LoadedCheckpoint

# The most bytes of one broken channel read back into memory to locate its damaged length field.
MAX_READ_BACK = 64 << 20
Progress = Callable[[str, int], None]  # (what, units done) — total announced first with units=-total


def validate(
    loaded: LoadedCheckpoint,
    topology: Topology | None = None,
    progress: Progress | None = None,
    workers: int | None = None,
    job: JobBinding | None = None,
    plan_names: Mapping[str, str] | None = None,
    buffer_size: int = FLINK_SEGMENT_SIZE,
) -> Report:
    """``workers``: threads for the byte work (None: one per usable core; 1: all on the calling thread).
    ``buffer_size``: Flink's network buffer size, for what Flink would do with a damaged record.
    ``job``: ``topology`` bound to the checkpoint, if the caller holds it (else bound here, once).
    ``plan_names``: without ``topology``, the names another plan bound to the checkpoint gives its operators."""
    if topology is not None and job is None:
        job = _bind(topology, loaded.checkpoint)  # first, so every finding names a bound operator as the plan does
    names = job.names if job is not None else plan_names or {}
    threads = usable_cores() if workers is None else workers
    run = _Validation(loaded, topology, job, names, progress or (lambda what, n: None), threads, buffer_size)
    try:
        run.run()
    except BaseException:
        remote_copies.abandon()  # a failure or Ctrl-C: the channel-state files still arriving are not waited for
        raise
    finally:
        run.engine.close()
    run.report.findings = sort_findings(run.report.findings)
    return run.report


def _channel_state(cp: CheckpointMetadata, plan_names: Mapping[str, str]) -> list[Located]:
    """Every channel handle, input side first in each subtask."""
    out = []
    for op in cp.operators:
        for sub in op.subtasks:
            for h in channel_handles(sub.input_channel_state) + channel_handles(sub.result_subpartition_state):
                out.append(Located(op, h, plan_names))
    return out


class _Validation:
    """One run: the passes in order, each feeding the rules what the engine read."""

    def __init__(
        self,
        loaded: LoadedCheckpoint,
        topology: Topology | None,
        job: JobBinding | None,
        names: Mapping[str, str],
        progress: Progress,
        workers: int,
        buffer_size: int = FLINK_SEGMENT_SIZE,
    ):
        self.buffer_size = buffer_size
        self.cp = loaded.checkpoint
        self.resolver = loaded.resolver
        self.topology = topology
        self.job = job
        # how findings name the operators a plan binds and the checkpoint stores by id only (Flink before 2.0)
        self.names = names
        self.progress = progress
        self.report = Report()
        self.recorder = Recorder(self.report)
        self.engine = Engine(
            self.resolver, tags_for_format_version(self.cp.format_version), self.recorder, workers, self.names
        )
        self.path_faults: dict[str, Finding] = {}  # local path or original name -> file-level error
        self.cmap: ChannelMap | None = None  # the plan's logical channels (see ``channel_map``)
        self.cmap_orders: dict[str, tuple[Edge, ...]] = {}  # the output orders ``cmap`` was assembled with
        # vertex key -> the order of its outputs the framing chose, where the plan does not give it
        self.orders: dict[str, tuple[Edge, ...]] = {}
        self.order_notes: list[str] = []

    def run(self) -> None:
        self.recorder.all(structure_findings(self.cp, self.names))
        self.check_files()
        located = _channel_state(self.cp, self.names)
        self.progress("channel-state files", -len({self.engine.blob_key(x.handle.delegate) for x in located}))
        self.check_blobs(located)
        self.check_framing(located)

    # ------------------------------------------------------------------ every referenced file
    def check_files(self) -> None:
        referenced = referenced_files(self.cp, self.resolver, self.names)
        for named in named_path_problems(self.cp, self.names):
            self.recorder.add(
                Finding(
                    named.rule,
                    named.message(),
                    operator=named.operator,
                    subtask=named.subtask,
                    file=shown_path(named.path),
                )
            )
        for original, finding in referenced.unresolved:
            first = original not in self.path_faults
            self.path_faults[original] = self.recorder.add(finding)
            if finding.rule == "file-not-local" and first:
                self.report.unchecked.append(Unchecked("file", "not local and not rebased: not read", file=original))
        for path, need in sorted(referenced.needed.items()):
            self.report.files_checked += 1
            shown = remote_copies.shown(path)  # a remote checkpoint's file by its URI, not its local place
            listed = remote_copies.pending(path)
            try:
                if listed is not None and not need.changelog_file:
                    size = listed.size  # a remote checkpoint's file, not fetched: its size from the store's listing
                    head = b""
                else:
                    if listed is not None:  # a DSTL file's flag byte decides its size check: fetch it
                        remote_copies.ensure_local(path)
                    size = check_regular(Path(path)).st_size
                    with open_regular(Path(path)) as f:
                        head = f.read(1) if need.changelog_file else b""
            except FileNotFoundError:
                self.path_faults[path] = self.recorder.add(missing_file(shown, need))
                continue
            except OSError as exc:
                self.path_faults[path] = self.recorder.add(unreadable_file(shown, f"cannot read: {exc.strerror}"))
                continue
            except NotARegularFile as exc:
                self.path_faults[path] = self.recorder.add(unreadable_file(shown, str(exc)))
                continue
            sized = size_finding(shown, size, need, head[0] if head else None)
            if sized is not None:
                self.recorder.add(sized)
                if sized.rule == "file-size":
                    self.path_faults[path] = sized

    # ------------------------------------------------------------------ channel-state blobs
    def check_blobs(self, located: list[Located]) -> None:
        engine = self.engine
        guesses = self.guesses(located)
        # A remote checkpoint's files, fetched in parallel in the order the walks read them; each is walked (and
        # its guessed channels framed) as soon as it is whole, while the next ones arrive.
        start_delegates(self.resolver, engine.walk_order(located, guesses))
        engine.prefetch_walks(located, guesses)
        claimed: dict[Hashable, Claims] = {}  # blob key -> which handle claims each chunk
        blob_keys: dict[Hashable, None] = {}  # in order of first use
        done = 0
        for x in located:
            key = engine.blob_key(x.handle.delegate)
            if key not in engine.blobs:
                done += 1
                self.progress("channel-state files", done)
            info = engine.open_blob(x.handle.delegate, x, self.path_faults)
            blob_keys.setdefault(key)
            for fault in (*info.also, info.fault):
                if fault is not None:
                    self.recorder.damaged(fault, x.key)
            if info.blob is not None:
                claims = claimed.get(key)
                if claims is None:
                    claims = claimed[key] = Claims(info.chunks)
                self.recorder.all(handle_chunk_findings(x, info, claims, engine.positions(x.handle)))
        for key in blob_keys:
            finding = unclaimed_finding(engine.blobs[key], claimed.get(key))
            if finding is not None:
                self.recorder.add(finding)

    def guesses(self, located: list[Located]) -> list[tuple[Parts, bool]]:
        """The channels ``plan_jobs`` gives when every file reads cleanly, framed while the files are walked
        (the engine keeps that framing only for the jobs it matches): each logical channel, whole; each input
        part in none, alone."""
        cmap = self.channel_map()
        out: list[tuple[Parts, bool]] = [([(p.operator, p.handle) for p in lc.parts], True) for lc in cmap.channels]
        alone = [x for x in located if x.key not in cmap.used and x.handle.side == "input"]
        out += [([(x.operator, x.handle)], False) for x in alone]
        return out

    def channel_map(self) -> ChannelMap:
        """The plan's logical channels (none without a plan), assembled once."""
        if self.cmap is None:
            if self.topology is None:
                self.cmap = ChannelMap([], [], set())
            else:
                assert self.job is not None
                self.cmap = logical_channels(
                    self.topology, self.job.vertices, self.cp, self.orders, plan_names=self.names
                )
                self.cmap_orders = dict(self.orders)
        return self.cmap

    def choose_output_orders(self) -> None:
        """The order of each vertex's outputs where the plan does not give it, decided by the framing
        (:func:`spillway.inspect.output_order.choose_orders`)."""
        from spillway.inspect.output_order import choose_orders

        assert self.topology is not None and self.job is not None
        self.orders, self.order_notes = choose_orders(self.topology, self.job.vertices, self.cp, self.frames_clean)
        if self.orders != self.cmap_orders:
            self.cmap = None  # assembled again with the orders chosen

    def frames_clean(self, cmap: ChannelMap) -> bool:
        """Every logical channel of ``cmap`` frames without a fault (a trial: the report's counts are kept)."""
        engine = self.engine
        bytes_read = self.report.bytes_read
        try:
            for lc in cmap.channels:
                parts = [(p.operator, p.handle) for p in lc.parts]
                if any(engine.info(h) is None or engine.unreadable(h) is not None for _, h in parts):
                    continue  # reported by the file and chunk rules, whichever order is Flink's
                total = sum(engine.payload(h) for _, h in parts)
                framed = engine.reframe(parts, total, True)
                if framed is None or framed[0].faults:
                    return False
            return True
        finally:
            self.report.bytes_read = bytes_read

    # ------------------------------------------------------------------ record framing
    def check_framing(self, located: list[Located]) -> None:
        if self.topology is not None:
            self.choose_output_orders()
        cmap = self.check_plan(located) if self.topology is not None else None
        if cmap is None:
            outputs = sum(1 for x in located if x.handle.side == "output")
            for note in topology_notes(None, outputs):
                self.recorder.add(note)
            cmap = self.channel_map()
        self.progress("logical channels", -(len(cmap.channels) + len(located)))
        jobs, framed, orphans = self.plan_jobs(cmap, located)
        for x in located:
            if x.key not in framed:
                self.not_framed(x, orphans.get(x.key))
        for n, ((label, parts, bound_alone), fast) in enumerate(zip(jobs, self.engine.run_ahead(jobs), strict=True), 1):
            self.frame(label, parts, bound_alone, fast)
            if bound_alone is None:
                self.report.channels_framed += 1
            else:
                self.report.handles_framed_alone += 1
            self.progress("logical channels", n)

    def check_plan(self, located: list[Located]) -> ChannelMap:
        """The plan's rules, and the logical channels it assembles."""
        assert self.topology is not None and self.job is not None
        bound = self.job.vertices
        for finding in plan_findings(self.topology, self.job, self.cp):
            self.recorder.add(finding)
        cmap = self.channel_map()
        for note in topology_notes(cmap, 0):
            self.recorder.add(note)
        for text in self.order_notes:
            self.recorder.add(Finding("topology", text))
        self.recorder.all(placement_findings(self.topology, bound, self.cp, located, self.job.operators, self.orders))
        return cmap

    def plan_jobs(
        self, cmap: ChannelMap, located: list[Located]
    ) -> tuple[list[Job], set[ChannelKey], dict[ChannelKey, str]]:
        """What to frame: every logical channel whose parts are all readable, and every readable input part
        not in one (alone); the keys of the handles framed, and why the readable parts left out were."""
        engine = self.engine
        # A record that starts in an input-side part framed alone may continue only in output-side state (the
        # rest of its logical channel): its length cannot exceed that part plus all output-side payload.
        output_payload = sum(engine.payload(x.handle) for x in located if x.handle.side == "output")
        jobs: list[Job] = []
        framed: set[ChannelKey] = set()
        orphans: dict[ChannelKey, str] = {}  # readable parts whose logical channel cannot be framed whole
        for lc in cmap.channels:
            parts = [(p.operator, p.handle) for p in lc.parts]
            readable = [(o, h) for o, h in parts if engine.unreadable(h) is None]
            if len(readable) == len(parts):
                jobs.append((lc.label(), parts, None))
                framed.update(channel_key(o, h) for o, h in parts)
                continue
            if readable and readable[0][1].side == "input":
                # The output part's file is broken: its input part still starts on a record boundary.
                o, h = readable[0]
                jobs.append((h.label(), [(o, h)], engine.payload(h) + output_payload))
                framed.add(channel_key(o, h))
            for o, h in readable:
                orphans[channel_key(o, h)] = (
                    f"output side of {lc.label()}: its input side cannot be framed, and it may start mid-record"
                )
        for x in located:
            if x.key in cmap.used or x.handle.side != "input" or engine.unreadable(x.handle) is not None:
                continue
            # Input state starts on a record boundary; alone it may end mid-record (the rest is upstream).
            jobs.append((x.label(), [(x.operator, x.handle)], engine.payload(x.handle) + output_payload))
            framed.add(x.key)
        return jobs, framed, orphans

    def not_framed(self, x: Located, orphaned: str | None) -> None:
        why = self.engine.unreadable(x.handle) or orphaned
        if why is None:
            if self.topology is None:
                why = "output side: not framed without --plan (it may start mid-record)"
            else:
                why = "output side: in no logical channel of the plan (see the topology notes)"
        info = self.engine.info(x.handle)
        self.report.unchecked.append(
            Unchecked(
                "channel-handle",
                why,
                operator=x.operator_label(),
                subtask=x.handle.subtask_index,
                channel=x.label(),
                file=info.display if info is not None else None,
            )
        )

    def frame(self, label: str, parts: Parts, bound_alone: int | None, fast: Counted | None) -> None:
        """Count the channel's elements and records; ``fast``: the native result (elements, records, payload
        bytes), if it framed the channel cleanly. Else frame it again piece by piece, to say where each fault
        is. ``bound_alone``: None for a whole logical channel (it must end on a record boundary); for an input
        part framed alone, the most payload its logical channel can have (a record may run past the part, not
        past that)."""
        engine = self.engine
        if any(engine.info(h) is None for _, h in parts):
            return
        keys = tuple(channel_key(o, h) for o, h in parts)
        complete = bound_alone is None
        if fast is not None:
            self.report.elements += fast[0]
            self.report.records += fast[1]
            self.report.bytes_read += fast[2]
            if complete:
                self.report.counted[keys] = fast[1]
            return
        total = 0
        for _, h in parts:
            chunks = engine.blobs[engine.blob_key(h.delegate)].chunks
            total += sum(chunks[o] for o in h.offsets if o in chunks)
        if bound_alone is not None:
            total = bound_alone  # the stream continues upstream: a record may run past this part, not past that
        framed = engine.reframe(parts, total, complete)
        if framed is None:
            return  # already reported by the chunk checks
        framer, pieces = framed
        self.report.elements += framer.records
        self.report.records += framer.stream_records
        if complete and not framer.faults and all(engine.payload(h) == engine.measured(h) for _, h in parts):
            self.report.counted[keys] = framer.stream_records  # every chunk read: the count is the channel's
        op, first = parts[0]
        channel = FramedChannel(label, op.label(self.names), first.subtask_index, keys, complete)
        back = self.read_back(parts, framer.faults, pieces) if complete else None
        if back is None:
            self.recorder.all(record_findings(channel, framer.faults, pieces))
        else:
            self.recorder.all(damaged_findings(channel, framer.faults, pieces, back))

    def read_back(self, parts: Parts, faults: list[FramingFault], pieces: list[Piece]) -> ReadBack | None:
        """A whole channel whose framing broke, read again to locate the damaged length field (a channel that
        fits in ``MAX_READ_BACK`` bytes); None if it framed cleanly or was not read back."""
        if not faults or faults[0].kind == "truncated":
            return None  # a channel that only ends early is cut short, not mislengthed
        read = self.engine.read_back(parts, MAX_READ_BACK)
        if read is None:
            return None
        data, lengths = read
        if len(lengths) != len(pieces):
            return None  # a piece changed between the two reads
        location = locate(data, self.engine.tags)
        if location is None:
            return None
        starts, at = [], 0
        for n in lengths:
            starts.append(at)
            at += n
        return ReadBack(location, starts, lengths, self.buffer_size)


__all__ = ["Progress", "Report", "Unchecked", "validate"]


def _bind(topology: Topology, checkpoint: CheckpointMetadata) -> JobBinding:
    from spillway.inspect.topology import bind_job

    return bind_job(topology, checkpoint)
