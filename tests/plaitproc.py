"""Start ``plait`` commands for tests quickly: forked from a process that has already
imported plait, instead of a new interpreter importing everything again.

About a thousand ``plait`` processes start during the suite.  A new interpreter spends
about 0.35 s of CPU importing plait and its libraries before it does anything; a child
forked from a warm process starts at once.  The child is still a process of its own:
its own pid, working directory, environment, stdin, stdout and stderr, exit status and
signals (``kill -9`` kills it alone), and it runs the command exactly as
``python -m plait ARGS`` does (``runpy`` runs ``plait.__main__``).

What a forked child shares with the warm process: the modules already imported (so a
module-level value read from the environment at import is the warm process's) and the
hash seed.  ``sys.path`` is rebuilt as ``python -m`` would build it from the child's
working directory and ``PYTHONPATH``.

``PLAIT_TEST_FORKSERVER=0`` starts every command as a new interpreter instead, which is
also what happens where the warm process cannot start (no ``os.fork``, no ``pidfd``).
Tests of start-up itself (what ``plait --help`` imports) use ``subprocess`` directly.

The warm process (``python plaitproc.py SOCKET``) listens on a Unix socket.  A request
carries the arguments, working directory and environment as JSON and the three standard
file descriptors (SCM_RIGHTS); the answer is the child's pid, then, when it has ended,
its wait status.  The warm process stays single-threaded (it forks), watches its
children through pidfds and exits when the test session's connection closes.
"""

from __future__ import annotations

import io
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from typing import IO, Any

# What `plait run`, `plait worker` and the other commands import: loaded once in the warm
# process.  Anything else a command needs, its child imports itself.
_PRELOAD = (
    "plait.cli.main", "plait.cli.session", "plait.cli.commands", "plait.runtime.engine",
    "plait.store.sqlite", "plait.store.postgres", "plait.core.templates",
    "plait.observe.tracing", "jsonschema", "rich.console", "rich.live", "rich.table",
    "httpx",
)


# ---------------------------------------------------------------- the warm process


def _serve(path: str) -> None:
    import importlib
    for name in _PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    if threading.active_count() != 1:  # forking a process with threads is unsafe
        raise SystemExit("plaitproc: a preloaded module started a thread")
    base_path = _base_sys_path()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(sys.stdin, selectors.EVENT_READ, "parent")  # EOF: the session ended
    children: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, connection)
    while True:
        for key, _ in selector.select():
            if key.data == "parent":
                if not sys.stdin.buffer.read1(1):
                    return
            elif key.data == "accept":
                conn, _ = listener.accept()
                started = _fork(conn, listener, selector, base_path,
                                [c for _, c in children.values()])
                if started is None:
                    conn.close()
                    continue
                pid, pidfd = started
                children[pidfd] = (pid, conn)
                selector.register(pidfd, selectors.EVENT_READ, "child")
            else:
                pidfd = key.fd
                pid, conn = children.pop(pidfd)
                selector.unregister(pidfd)
                os.close(pidfd)
                _, status = os.waitpid(pid, 0)
                try:
                    conn.sendall(json.dumps({"status": status}).encode() + b"\n")
                except OSError:
                    pass
                conn.close()


def _base_sys_path() -> list[str]:
    """The warm process's sys.path without its script's directory and PYTHONPATH."""
    extra = {os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    return [p for p in sys.path[1:] if os.path.abspath(p) not in extra]


def _fork(conn: socket.socket, listener: socket.socket, selector: selectors.BaseSelector,
          base_path: list[str], others: list[socket.socket]) -> tuple[int, int] | None:
    message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        return None
    request = json.loads(message)
    pid = os.fork()
    if pid == 0:
        try:
            for fd in [key.fd for key in selector.get_map().values() if key.fd > 2]:
                os.close(fd)  # the listener and the other children's pidfds
            selector.close()
            for other in (conn, *others):
                other.close()
            _child(request, fds, base_path)
        except BaseException:
            import traceback
            traceback.print_exc()
            _flush()
            os._exit(1)
    for fd in fds:
        os.close(fd)
    conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    return pid, os.pidfd_open(pid)


def _child(request: Mapping[str, Any], fds: Sequence[int], base_path: list[str]) -> None:
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    cwd = request["cwd"]
    os.chdir(cwd)
    env = request["env"]
    os.environ.clear()
    os.environ.update(env)
    pythonpath = [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [os.path.abspath(cwd), *pythonpath, *base_path]
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))
    encoding = env.get("PYTHONIOENCODING") or "utf-8"
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)),
                                 encoding=encoding)
    sys.stdout = _writer(1, encoding, "strict", unbuffered)
    sys.stderr = _writer(2, encoding, "backslashreplace", True)
    sys.argv = ["plait", *request["args"]]
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import runpy
    try:
        runpy.run_module("plait", run_name="__main__", alter_sys=True)
        code: object = 0
    except SystemExit as stop:
        code = stop.code
    except KeyboardInterrupt:
        _flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        code = 130
    _exit(code)


def _writer(fd: int, encoding: str, errors: str, unbuffered: bool) -> io.TextIOWrapper:
    raw = io.FileIO(fd, "w", closefd=False)
    buffered = io.BufferedWriter(raw)
    return io.TextIOWrapper(buffered, encoding=encoding, errors=errors,
                            line_buffering=unbuffered, write_through=unbuffered)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


def _exit(code: object) -> None:
    """End the child as the interpreter would: print a non-int code, wait for non-daemon
    threads, run atexit handlers, flush, then leave without the warm process's cleanup."""
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code & 0xFF
    else:
        print(code, file=sys.stderr)
        status = 1
    threading._shutdown()  # type: ignore[attr-defined]  # joins non-daemon threads
    import atexit
    atexit._run_exitfuncs()
    _flush()
    os._exit(status)


# ---------------------------------------------------------------- the test side


class _Server:
    """The session's warm process, started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._path = ""
        self.failed = False

    def socket_path(self) -> str | None:
        with self._lock:
            if self._proc is None and not self.failed:
                self._start()
            return None if self.failed else self._path

    def _start(self) -> None:
        if not hasattr(os, "pidfd_open") or not hasattr(os, "fork"):
            self.failed = True
            return
        directory = tempfile.mkdtemp(prefix="plaitproc-")
        self._path = os.path.join(directory, "sock")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
        proc = subprocess.Popen([sys.executable, __file__, self._path], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, env=env)
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != b"ready":
            proc.kill()
            proc.wait()
            self.failed = True
            return
        self._proc = proc

    def close(self) -> None:
        with self._lock:
            if self._proc is not None:
                assert self._proc.stdin is not None and self._proc.stdout is not None
                self._proc.stdin.close()
                try:
                    self._proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
                self._proc.stdout.close()
                self._proc = None


_SERVER = _Server()


def close() -> None:
    """Stop the warm process (the session's end)."""
    _SERVER.close()


def enabled() -> bool:
    return os.environ.get("PLAIT_TEST_FORKSERVER", "1") != "0"


class ForkedProcess:
    """A ``plait`` child of the warm process, with the part of ``subprocess.Popen``'s
    interface the tests use: ``pid``, ``stdin``/``stdout``/``stderr``, ``poll``,
    ``wait``, ``communicate``, ``send_signal``, ``terminate``, ``kill``, ``returncode``."""

    def __init__(self, path: str, args: Sequence[str], *, cwd: str | os.PathLike[str],
                 env: Mapping[str, str], stdin: Any, stdout: Any, stderr: Any,
                 text: bool) -> None:
        self.args = ["plait", *args]
        self.returncode: int | None = None
        self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._conn.connect(path)
        self._buffer = b""
        self._readers: list[threading.Thread] | None = None
        self._output: dict[int, Any] = {}
        theirs: list[int] = []  # the child's, closed here once sent
        streams: list[IO[Any] | None] = []
        for index, spec in enumerate((stdin, stdout, stderr)):
            mine, child = _endpoint(spec, index, theirs)
            streams.append(None if mine is None else _open(mine, index, text))
            theirs.append(child)
        self.stdin, self.stdout, self.stderr = streams
        request = {"args": list(args), "cwd": os.fspath(cwd), "env": dict(env)}
        try:
            socket.send_fds(self._conn, [json.dumps(request).encode()], theirs[:3])
        finally:
            for fd in theirs:
                os.close(fd)
        self.pid = int(self._read()["pid"])

    def _read(self, timeout: float | None = None) -> dict[str, Any]:
        self._conn.settimeout(timeout)
        while b"\n" not in self._buffer:
            try:
                chunk = self._conn.recv(4096)
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
            if not chunk:
                raise RuntimeError("plaitproc: the warm process went away")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                self.wait(timeout=0.0)
            except subprocess.TimeoutExpired:
                return None
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            status = self._read(1e-6 if timeout == 0.0 else timeout)["status"]
            self.returncode = os.waitstatus_to_exitcode(status)
            self._conn.close()
        return self.returncode

    def communicate(self, input: str | bytes | None = None,  # noqa: A002 - Popen's name
                    timeout: float | None = None) -> tuple[Any, Any]:
        if self._readers is None:
            self._readers = [threading.Thread(target=self._drain, args=(index, stream),
                                              daemon=True)
                             for index, stream in ((1, self.stdout), (2, self.stderr))
                             if stream is not None and not stream.closed]
            for reader in self._readers:
                reader.start()
            if self.stdin is not None and not self.stdin.closed:
                try:
                    if input:
                        self.stdin.write(input)
                    self.stdin.close()
                except BrokenPipeError:
                    pass
        self.wait(timeout)
        for reader in self._readers:
            reader.join()
        return self._output.get(1), self._output.get(2)

    def _drain(self, index: int, stream: IO[Any]) -> None:
        self._output[index] = stream.read()
        stream.close()

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signum)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def __enter__(self) -> ForkedProcess:
        return self

    def __exit__(self, *_: object) -> None:
        for stream in (self.stdin, self.stdout, self.stderr):
            if stream is not None:
                stream.close()
        self.wait()


def _endpoint(spec: Any, index: int, opened: list[int]) -> tuple[int | None, int]:
    """(our end or None, the child's descriptor) for a Popen stdin/stdout/stderr value."""
    if spec == subprocess.PIPE:
        read, write = os.pipe()
        return (write, read) if index == 0 else (read, write)
    if spec == subprocess.STDOUT and index == 2:
        return None, os.dup(opened[1])
    if spec is None or spec == subprocess.DEVNULL:
        return None, os.open(os.devnull, os.O_RDWR)
    fd = spec if isinstance(spec, int) else spec.fileno()
    return None, os.dup(fd)


def _open(fd: int, index: int, text: bool) -> IO[Any]:
    mode = ("w" if index == 0 else "r") + ("" if text else "b")
    return open(fd, mode, encoding="utf-8" if text else None)  # noqa: SIM115


Process = ForkedProcess | subprocess.Popen[Any]  # what popen returns


def popen(args: Sequence[str], *, cwd: str | os.PathLike[str], env: Mapping[str, str],
          stdin: Any = None, stdout: Any = None, stderr: Any = None,
          text: bool = False) -> Process:
    """``subprocess.Popen([python, "-m", "plait", *args], ...)``, forked when it can be."""
    path = _SERVER.socket_path() if enabled() else None
    if path is None:
        return subprocess.Popen([sys.executable, "-m", "plait", *args], cwd=cwd, env=env,
                                stdin=stdin, stdout=stdout, stderr=stderr, text=text)
    return ForkedProcess(path, args, cwd=cwd, env=env, stdin=stdin, stdout=stdout,
                         stderr=stderr, text=text)


def run(args: Sequence[str], *, cwd: str | os.PathLike[str], env: Mapping[str, str],
        input: str | None = None, timeout: float | None = None,  # noqa: A002
        ) -> subprocess.CompletedProcess[str]:
    """``subprocess.run([python, "-m", "plait", *args], capture_output=True, text=True)``,
    forked when it can be; on a timeout the process is killed and TimeoutExpired raised."""
    proc = popen(args, cwd=cwd, env=env,
                 stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except BaseException:  # a timeout, or the test's own timeout: the process goes too
        proc.kill()
        proc.communicate()
        raise
    assert proc.returncode is not None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


if __name__ == "__main__":
    _serve(sys.argv[1])
