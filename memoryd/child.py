"""A helper child process that answers one request at a time, for work the daemon must not hold.

Some work needs a large library or table for a moment and then leaves the daemon's heap bigger
for good (glibc keeps freed pages, and Python never unloads a module): the tokenizer's table
(~45 MB, :mod:`memoryd.tokenizer`) and dulwich with the baseline repository (~4 MB,
:mod:`memoryd.folder.baseline_proc`). They run in a child started on first use and ended by
:meth:`Child.close` after each pass, so the daemon idles at its own size.

Wire format, on the child's stdin and stdout: frames of a 4-byte big-endian length and a JSON
body (ASCII: ``\\u`` escapes carry any string, lone surrogates too). A request is a JSON list
whose first item names the operation; the answer is ``{"ok": value}`` or ``{"error": message}``,
with ``"logs"``: what the child logged meanwhile (at the parent's level), which the parent logs
as its own. The child ends at end of input, so it also ends when its parent dies, even by SIGKILL.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from memoryd.errors import MemorydError

_FRAME = struct.Struct(">I")
PACKAGE_ROOT = str(Path(__file__).resolve().parents[1])
LOG_LEVEL_ENV = "MEMORYD_CHILD_LOG_LEVEL"
CHILD_SRC = (
    "import sys\n"
    "if {root!r} not in sys.path: sys.path.insert(0, {root!r})\n"
    "from {module} import main\n"
    "sys.exit(main())\n"
)


class Child:
    """One helper process running ``<module>.main``; calls are serialised by a lock.

    ``name`` is how errors call it ("memoryd tokenizer helper"); ``error`` is the exception
    raised for every failure; ``timeout_s`` bounds each call, after which the child is killed.
    A refusal reads "<name> could not <action>: <why>", or the child's own message when
    ``action`` is None (a memoryd error raised in the child, re-raised here as ``error``).
    """

    def __init__(
        self,
        module: str,
        name: str,
        error: type[MemorydError],
        timeout_s: Callable[[], float],
        *,
        action: str | None = None,
        source: Callable[[], str] | None = None,
    ) -> None:
        self.module = module
        self.action = action
        self.name = name
        self.error = error
        self.timeout_s = timeout_s
        self.source = source or (lambda: CHILD_SRC.format(root=PACKAGE_ROOT, module=module))
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None

    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def call(self, request: list[Any]) -> Any:
        body = json.dumps(request).encode("ascii")
        with self._lock:
            proc = self._proc
            if proc is not None and proc.poll() is not None:
                self._drop()  # it died between calls (killed, OOM): start another
                proc = None
            if proc is None:
                proc = self._start()
            deadline = time.monotonic() + self.timeout_s()
            try:
                assert proc.stdin is not None and proc.stdout is not None
                _write_all(proc.stdin.fileno(), _FRAME.pack(len(body)) + body, deadline)
                (size,) = _FRAME.unpack(_read_exact(proc.stdout.fileno(), _FRAME.size, deadline))
                answer = json.loads(_read_exact(proc.stdout.fileno(), size, deadline))
            except (OSError, EOFError, ValueError, TimeoutError) as exc:
                raise self._failed(exc) from exc
        for name, level, message in answer.get("logs", ()):
            logging.getLogger(name).log(level, "%s", message)
        if "error" in answer:
            why = str(answer["error"])
            raise self.error(f"{self.name} could not {self.action}: {why}" if self.action else why)
        return answer["ok"]

    def _start(self) -> subprocess.Popen[bytes]:
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the child
        argv = [sys.executable, "-P", "-c", self.source()]
        env = dict(
            os.environ, **{LOG_LEVEL_ENV: str(logging.getLogger("memoryd").getEffectiveLevel())}
        )
        try:
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env
            )
        except OSError as exc:
            raise self.error(f"{self.name} could not start {sys.executable}: {exc}") from exc
        for pipe in (self._proc.stdin, self._proc.stdout):
            assert pipe is not None
            os.set_blocking(pipe.fileno(), False)
        return self._proc

    def _failed(self, exc: BaseException) -> MemorydError:
        """Kill and reap the child; the error says what it said on its way out."""
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
        return self.error(f"{self.name} ({sys.executable}) failed: {why}{status}{tail}")

    def close(self, *, wait: bool = True) -> bool:
        """End the child (end of input, then a kill if it lingers); whether one was running.

        ``wait=False`` never blocks on a call in flight (another thread's): the child is then
        left running for the next close."""
        if not self._lock.acquire(blocking=wait):
            return False
        try:
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
        finally:
            self._lock.release()

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


def serve(answer: Callable[[list[Any]], Any]) -> int:
    """The child's loop: answer frames until end of input; every failure goes back as text."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is for the daemon; it ends us by EOF
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    logs = _Collect()
    root = logging.getLogger("memoryd")
    root.setLevel(int(os.environ.get(LOG_LEVEL_ENV, logging.WARNING)))
    root.addHandler(logs)
    root.propagate = False
    while True:
        head = stdin.read(_FRAME.size)
        if len(head) < _FRAME.size:
            return 0
        body = stdin.read(_FRAME.unpack(head)[0])
        try:
            reply: dict[str, Any] = {"ok": answer(json.loads(body))}
        except Exception as exc:
            reply = {"error": f"{type(exc).__name__}: {exc}" if not _plain(exc) else str(exc)}
        if logs.records:
            reply["logs"], logs.records = logs.records, []
        data = json.dumps(reply).encode("ascii")
        stdout.write(_FRAME.pack(len(data)) + data)
        stdout.flush()


def _plain(exc: Exception) -> bool:
    """memoryd's own errors already read as a sentence; others get their type named."""
    return isinstance(exc, MemorydError)


class _Collect(logging.Handler):
    """Keeps the child's log records for the next answer: the parent owns the log file."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[tuple[str, int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record.name, record.levelno, record.getMessage()))
