"""Reading a driver log of any size from its end: bytes by range (through a `read_at`
callable the edge builds over a file, or memory, plus synthetic lines from Ray's state after its end), the last step line, the tail
window, forward chunks, and pools of candidate lines found by literal anchors. Knows
nothing of failure classes.

Only the part after the last `Global step` (or `checkpoint_states`) line counts, found by
reading backwards at most MAX_BACK bytes; what came before it was survived. Its last TAIL
bytes are searched for every rule; the rest is read forwards from the last step in CHUNK
pieces for the rules that look deep. A rule reads only the lines its anchors found, so a
1 GB log takes ~0.01 s with the failure at its end (bench/run.py --only diagnose).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from rlhf_launch.util.text import plain

__all__ = ["CHECKPOINT_STATES", "GLOBAL_STEP", "Line", "Pool", "Source", "find_step", "forward_chunks", "pool", "tail_start"]

TAIL = 4 << 20  # searched for every rule
CHUNK = 8 << 20  # reads beyond the tail (backwards for the last step, forwards for causes)
MAX_BACK = 256 << 20  # how far back from the end root causes are looked for
CONTEXT_BEFORE = 16 << 10  # traceback frames read before a decisive line
CONTEXT_AFTER = 4 << 10
MARKER_BACK = 2 << 20  # how far back the last progress line is looked for

# The step lines (tests/data/diagnose/LOG_FORMATS.md §6; runs/progress.py reads them too):
# `✨ Global step N: {...}` (0.8.1+; the async trainer without the emoji), and a resumed
# trainer's `checkpoint_states: {... 'global_step': N ...}`.
GLOBAL_STEP = re.compile(r"Global step (\d+): (\{.*\})\s*$")
CHECKPOINT_STATES = re.compile(r"checkpoint_states: (\{.*\})\s*$")
STEP_NEEDLES = ((b"Global step ", GLOBAL_STEP), (b"checkpoint_states: ", CHECKPOINT_STATES))


class Source:
    """A log as bytes read by range: memory, or `read_at(offset, length)` over a log of `size`
    bytes (the edge's pread on a file), plus synthetic lines from Ray's state appended after
    its end."""

    def __init__(self, data: bytes | None = None, read_at: Callable[[int, int], bytes] | None = None, size: int = 0, extra: bytes = b""):
        self.data, self.read_at, self.log_size, self.extra = data, read_at, size if data is None else len(data), extra
        self.size = self.log_size + len(extra)

    def read(self, lo: int, hi: int) -> bytes:
        lo, hi = max(0, lo), min(self.size, hi)
        if lo >= hi:
            return b""
        out = b""
        if lo < self.log_size:
            end = min(hi, self.log_size)
            if self.data is not None:
                out = self.data[lo:end]
            else:
                assert self.read_at is not None
                out = self.read_at(lo, end - lo)
        if hi > self.log_size:
            out += self.extra[max(0, lo - self.log_size) : hi - self.log_size]
        return out

    def text(self, lo: int, hi: int) -> str:
        return plain(self.read(lo, hi).decode("utf-8", "replace"))


@dataclass
class Line:
    offset: int  # in the source
    text: str  # without terminal escapes
    size: int = -1  # bytes of the line in the source (escapes included); -1: len(text) in UTF-8


@dataclass
class Pool:
    """Candidate lines; a regex runs over the lines its anchors found, joined."""

    lines: list[Line] = field(default_factory=list)
    hits: dict[bytes, list[int]] | None = None  # anchor -> line indices; None: every line
    _joined: dict[tuple[bytes, ...], tuple[str, list[int], list[int]]] = field(default_factory=dict)

    def _text(self, anchors: tuple[bytes, ...]) -> tuple[str, list[int], list[int]]:
        if anchors not in self._joined:
            if self.hits is None:
                chosen = list(range(len(self.lines)))
            else:
                covering = {k for a in anchors for k in self.hits if k in a}
                chosen = sorted({n for k in covering for n in self.hits[k]})
            starts, pos = [], 0
            for n in chosen:
                starts.append(pos)
                pos += len(self.lines[n].text) + 1
            self._joined[anchors] = ("\n".join(self.lines[n].text for n in chosen), starts, chosen)
        return self._joined[anchors]

    def matches(self, pattern: re.Pattern[str], anchors: tuple[bytes, ...]) -> Iterator[tuple[Line, int]]:
        """The lines (and their indices) where `pattern` matches, among `anchors`' lines."""
        joined, starts, chosen = self._text(anchors)
        for match in pattern.finditer(joined):
            n = chosen[bisect.bisect_right(starts, match.start()) - 1]
            yield self.lines[n], n


def pool(data: bytes, base: int, anchors: Sequence[bytes], every_line: bool = False) -> Pool:
    """The lines of `data` containing any anchor (every line when asked), in order, with
    which anchor found which line (a rule only reads the lines of its own anchors)."""
    spans: dict[int, int] = {}
    hits: dict[bytes, list[int]] = {}
    if every_line:
        start = 0
        for piece in data.split(b"\n"):
            spans[start] = start + len(piece)
            start += len(piece) + 1
    else:
        for anchor in anchors:
            found = hits.setdefault(anchor, [])
            i = data.find(anchor)
            while i != -1:
                start = data.rfind(b"\n", 0, i) + 1
                end = data.find(b"\n", i)
                end = len(data) if end == -1 else end
                spans[start] = end
                found.append(start)
                i = data.find(anchor, end)
    order = sorted(spans)
    lines = [Line(base + s, plain(data[s : spans[s]].decode("utf-8", "replace")), spans[s] - s) for s in order]
    index = {s: n for n, s in enumerate(order)}
    return Pool(lines, None if every_line else {a: [index[s] for s in starts] for a, starts in hits.items()})


# ---------------------------------------------------------------- the failure region


def find_step(source: Source, end: int, back: int | None = None) -> tuple[int | None, int]:
    """The last global step before `end` (looking back at most `back` bytes, MAX_BACK by
    default), and where the failure region begins (the end of that step line; 0 when none)."""
    floor = max(0, end - (MAX_BACK if back is None else back))
    pos = end
    while pos > floor:
        lo = max(floor, pos - CHUNK)
        found = _last_step_in(source, lo, pos, end)
        if found is not None:
            return found
        pos = lo
    return None, 0


def _last_step_in(source: Source, lo: int, hi: int, end: int) -> tuple[int, int] | None:
    """The last `Global step N: {...}` (or `checkpoint_states: {...}`) line starting in
    [lo, hi): N and the offset just past the line."""
    chunk = source.read(lo, min(end, hi + 64))  # a little overlap: a needle may straddle `hi`
    best: tuple[int, int] | None = None
    for needle, pattern in STEP_NEEDLES:
        stop = hi - lo
        while True:
            i = chunk.rfind(needle, 0, stop + len(needle) - 1)
            if i == -1 or i >= stop or (best is not None and lo + i < best[1]):
                break
            line, line_end = _line_at(source, chunk, lo, i, end)
            match = pattern.search(line)
            step: int | None = None
            if match and pattern is GLOBAL_STEP:
                step = int(match.group(1))
            elif match:
                found = re.search(r"'global_step': (\d+)", line)
                step = int(found.group(1)) if found else None
            if step is not None:
                if best is None or line_end > best[1]:
                    best = (step, line_end)
                break
            stop = i
    return best


def _line_at(source: Source, chunk: bytes, base: int, i: int, end: int) -> tuple[str, int]:
    """The whole line around chunk[i] (read further from the source where it leaves the
    chunk), and the source offset just past it."""
    start = chunk.rfind(b"\n", 0, i) + 1
    if start == 0 and base > 0:
        before = source.read(max(0, base - (64 << 10)), base)
        head = before[before.rfind(b"\n") + 1 :]
    else:
        head = b""
    stop = chunk.find(b"\n", i)
    if stop == -1:
        rest = source.read(base + len(chunk), min(end, base + len(chunk) + (64 << 10)))
        cut = rest.find(b"\n")
        tail = rest if cut == -1 else rest[:cut]
        text = head + chunk[start:] + tail
        line_end = base + len(chunk) + len(tail)
    else:
        text = head + chunk[start:stop]
        line_end = base + stop
    return text.decode("utf-8", "replace"), line_end


def tail_start(source: Source, boundary: int) -> int:
    """Where the tail window begins: TAIL bytes before the log's end, not before `boundary`,
    moved back to the start of the line the window's edge cuts."""
    start = max(0, source.log_size - TAIL, boundary)
    if start > boundary:
        before = source.read(max(boundary, start - (64 << 10)), start)
        cut = before.rfind(b"\n")
        if cut != -1 or start - len(before) == boundary:
            start -= len(before) - cut - 1
    return start


def forward_chunks(source: Source, lo: int, hi: int) -> Iterator[tuple[int, bytes]]:
    """[lo, hi) in whole-line pieces of about CHUNK bytes, in order: (offset, bytes)."""
    pos = lo
    while pos < hi:
        end = min(hi, pos + CHUNK)
        data = source.read(pos, end)
        while end < hi and b"\n" not in data:  # a line longer than a chunk
            end = min(hi, end + CHUNK)
            data = source.read(pos, end)
        if end < hi:
            data = data[: data.rfind(b"\n") + 1]
        yield pos, data
        pos += len(data)


def marker_before(source: Source, offset: int, boundary: int, markers: Sequence[tuple[bytes, str]]) -> str | None:
    """The value of the last of `markers` (needle -> value) found before `offset`, looking
    back at most MARKER_BACK bytes and not before `boundary`."""
    data = source.read(max(boundary, offset - MARKER_BACK, 0), offset)
    best, value = -1, None
    for needle, name in markers:
        i = data.rfind(needle)
        if i > best:
            best, value = i, name
    return value
