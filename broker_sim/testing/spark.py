"""SparkSessions for tests: ``spark_session``, ``stop_session``, a local Spark Connect server, and the
``pylog_spark*`` fixtures.

Theory of operation:

1. ``spark_session`` starts a local[2] session tuned for short test queries: the running interpreter for the
   Python workers, UI off, 2 shuffle partitions and 2 default parallelism, the driver on 127.0.0.1, a 30 s
   ``spark.sql.streaming.stopTimeout``, log level ERROR (WARN prints a line per micro-batch and offset
   warning; a failing test's exception carries what matters).
2. Its driver JVM compiles with C1 only (``-XX:TieredStopAtLevel=1``: test queries are short, and on two cores
   C2's compiler threads cost more than they win back) and maps the class-data-sharing archive of
   ``broker_sim.testing.spark_cds`` when there is one. The options go into ``spark.driver.defaultJavaOptions``,
   which pyspark hands to spark-submit when it launches the JVM and which ``--driver-java-options`` in
   PYSPARK_SUBMIT_ARGS does not replace: options of yours (that variable, ``spark.driver.extraJavaOptions``)
   come after pylog's and win. If yours name an archive (``SharedArchiveFile``, ``ArchiveClassesAtExit``,
   ``Xshare``), pylog adds none.
   A daemon thread initializes the few classes whose static initializers take seconds (``WARM_UP_CLASSES``)
   while the test sets up, so its first ``upper()`` does not wait 1.4 s for one.
   Its Python workers import pyspark from site-packages, compiled, instead of from the source-only zip Spark
   puts first on their path (``broker_sim.testing.spark_home``): a second or more saved per worker process.
3. When there is no archive yet, the first session's JVM dumps one at its exit: ``stop_session`` stops the
   session, ends the gateway JVM (closing its stdin makes pyspark's gateway server exit) and waits for it,
   then publishes the JVM's partial file as the archive only if it exited 0 (see ``spark_cds``).
4. A process holds one SparkContext. When one already runs, ``spark_session`` returns its session; a
   requested conf that is not already its value is set when Spark allows it at runtime, else refused with
   ``StaticConfError`` naming it.
"""
from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from broker_sim.testing import spark_cds, spark_home

C1_ONLY = "-XX:TieredStopAtLevel=1"
DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.streaming.stopTimeout": "30s",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
}
CONNECT_CONF = {
    "spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
    "spark.connect.grpc.binding.address": "127.0.0.1",
    "spark.connect.grpc.binding.port": "0",   # a free port: two servers on a host (xdist workers) never collide
}
# Classes whose static initializers take seconds and which the first query touching them would wait for:
# CollationAwareUTF8String (any upper/lower/initcap, Spark 4's case mapping) builds a table by ICU's title-casing
# of all 1.1M code points, 1.4 s in a C1-only driver. Initialized on a daemon thread as the session starts.
WARM_UP_CLASSES = ("org.apache.spark.sql.catalyst.util.CollationAwareUTF8String",)
WARM_UP_JOIN_S = 10.0   # stop_session waits this long for a warm-up still running (a dumping JVM's exit)
_ARCHIVE_FLAGS = ("SharedArchiveFile", "ArchiveClassesAtExit", "Xshare")
# a dumping JVM writes ~100 MiB after the session stops; a bound, not an expectation
STOP_TIMEOUT = 180.0
GATEWAY_CLOSE_S = 5.0  # py4j's close of a gateway whose JVM has exited
_PORT_LINE = "pylog-connect-port "
# gateway JVM pid -> (partial, archive) for the JVMs this process started dumping
_dumps: dict[int, tuple[Path, Path]] = {}
# id of a gateway -> its warm-up thread and the classes it initialized so far (_warm_up)
_warming: dict[int, tuple[threading.Thread, list[str]]] = {}
# remote session id -> the Connect server context spark_session(connect=True) started for it
_connect_servers: dict[int, contextlib.ExitStack] = {}


class StaticConfError(ValueError):
    """A Spark conf that cannot take the requested value: it is fixed when the driver JVM starts."""


def driver_java_options() -> str:
    """C1 only plus the archive's options (when there is one): for PYSPARK_SUBMIT_ARGS of subprocess drivers.
    Points SPARK_HOME at the fast home first (``spark_home.use()``), which the drivers then inherit."""
    spark_home.use()
    return f"{C1_ONLY} {spark_cds.java_options()}".strip()


def submit_args() -> str:
    """A PYSPARK_SUBMIT_ARGS value that gives a driver started from it ``driver_java_options()``."""
    return f'--driver-java-options "{driver_java_options()}" pyspark-shell'


def spark_session(app_name: str = "pylog-tests", *, conf: dict | None = None, jars=(), connect: bool = False):
    """A local[2] SparkSession for tests (see the module docstring), with ``conf`` (name -> value) over the
    defaults and ``jars`` (paths) in ``spark.jars``. ``connect=True``: a Spark Connect session to a local
    server of its own (``connect_server``), ended by ``stop_session``.

    Raises ``StaticConfError`` when a session already runs here and a conf cannot take its value at runtime.
    """
    settings = {**DEFAULT_CONF, **{k: _conf_value(v) for k, v in (conf or {}).items()}}
    requested = {k: _conf_value(v) for k, v in (conf or {}).items()}
    if jars:
        joined = ",".join(filter(None, [settings.get("spark.jars", ""), *map(str, jars)]))
        settings["spark.jars"] = requested["spark.jars"] = joined
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if connect:
        return _remote_session(app_name, settings)
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is not None:
        session = SparkSession.builder.getOrCreate()
        _apply_to_running(session, requested)
        return session
    partial = None
    if SparkContext._gateway is None:   # the JVM starts now: its options and environment still count
        spark_home.use()
        settings["spark.driver.defaultJavaOptions"], partial = _launch_java_options(settings)
    builder = SparkSession.builder.master("local[2]").appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    proc = getattr(SparkContext._gateway, "proc", None)
    if partial is not None and proc is not None:
        _dumps[proc.pid] = (partial, spark_cds.archive_path())
    _warm_up(session)
    return session


def stop_session(session, *, timeout: float = STOP_TIMEOUT) -> None:
    """Stop ``session``. For a classic one, also end this process's driver JVM (the next ``spark_session``
    starts a new one) and, if that JVM was dumping the class archive, publish it once it exited 0.
    Raises ``TimeoutError`` when the JVM has not exited within ``timeout`` seconds (it is then killed)."""
    server = _connect_servers.pop(id(session), None)
    if server is not None or type(session).__module__.startswith("pyspark.sql.connect"):
        session.stop()
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
        if server is not None:
            server.close()
        return
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    warming = _warming.pop(id(gateway), None)
    if warming is not None:
        warming[0].join(WARM_UP_JOIN_S)
    session.stop()
    proc = getattr(gateway, "proc", None)
    if proc is None:
        return
    SparkContext._gateway = None
    SparkContext._jvm = None
    partial, archive = _dumps.pop(proc.pid, (None, None))
    with contextlib.suppress(OSError):
        proc.stdin.close()   # PythonGatewayServer exits when its stdin closes
    try:
        returncode = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        returncode = None
    # py4j's close only after the JVM is gone: with the JVM alive, closing a connection of a gateway that
    # ran a callback server (foreachBatch) can block for good; once the JVM exited its sockets are reset.
    # Still bounded: a daemon thread, waited for a few seconds.
    closer = threading.Thread(target=_close_quietly, args=(gateway,), name="pylog-py4j-close", daemon=True)
    closer.start()
    closer.join(GATEWAY_CLOSE_S)
    if partial is not None:
        spark_cds.publish(partial, archive, returncode)
    if returncode is None:
        raise TimeoutError(f"stop_session: the Spark driver JVM (pid {proc.pid}) had not exited {timeout:g} s "
                           f"after its stdin closed; it was killed")


def _warm_up(session) -> None:
    """Initialize ``WARM_UP_CLASSES`` in the new driver JVM on a daemon thread, while the test sets up."""
    gateway = session.sparkContext._gateway
    done: list[str] = []
    thread = threading.Thread(target=_initialize, args=(gateway, done), name="pylog-spark-warm-up", daemon=True)
    _warming[id(gateway)] = (thread, done)
    thread.start()


def _initialize(gateway, done: list) -> None:
    """Initialize each of ``WARM_UP_CLASSES``, appending its name to ``done`` once its initializer ran."""
    with contextlib.suppress(Exception):   # a warm-up only: a JVM stopping under it is no error
        jvm = gateway.jvm
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        for name in WARM_UP_CLASSES:
            jvm.java.lang.Class.forName(name, True, loader)
            done.append(name)


def _close_quietly(gateway) -> None:
    with contextlib.suppress(Exception):
        gateway.close()


def _conf_value(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _submit_java_options() -> str:
    """The --driver-java-options of PYSPARK_SUBMIT_ARGS ("" without)."""
    args = shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    return args[args.index("--driver-java-options") + 1] if "--driver-java-options" in args[:-1] else ""


def _launch_java_options(settings: dict) -> tuple[str, Path | None]:
    """pylog's driver JVM options ahead of any defaultJavaOptions given, and the partial archive file the JVM
    dumps into (None when it maps an archive, or when options of the caller name one)."""
    theirs = " ".join([_submit_java_options(), settings.get("spark.driver.extraJavaOptions", ""),
                       settings.get("spark.driver.defaultJavaOptions", "")])
    ours = [C1_ONLY]
    partial = None
    path = spark_cds.archive_path()
    if spark_cds.usable(path) and not any(flag in theirs for flag in _ARCHIVE_FLAGS):
        if path.is_file():
            ours.append(spark_cds.java_options())
        else:
            with contextlib.suppress(OSError):
                path.parent.mkdir(parents=True, exist_ok=True)
                spark_cds.remove_stale_partials(path)
                partial = spark_cds.partial_path(path)
                ours.append(spark_cds.dump_options(partial))
    ours.append(settings.get("spark.driver.defaultJavaOptions", ""))
    return " ".join(filter(None, ours)), partial


def _apply_to_running(session, requested: dict) -> None:
    running = dict(session.sparkContext.getConf().getAll())
    for key, value in requested.items():
        current = session.conf.get(key, running.get(key))
        if current == value:
            continue
        try:
            session.conf.set(key, value)
        except Exception as error:   # Spark refuses static SQL confs and its core confs at runtime
            raise StaticConfError(
                f"spark_session: conf {key}={value!r} cannot apply: a SparkSession already runs in this process "
                f"with {key}={current!r}, and {key} is fixed when the driver JVM starts. Give it to the first "
                f"session (pylog_spark_config), or stop the running one first. Spark said: "
                f"{str(error).splitlines()[0]}") from None


def _require_connect() -> None:
    """Skip (fail under CI) unless Spark Connect's client packages are installed."""
    from broker_sim.testing.requirements import missing

    try:
        from pyspark.sql.connect.utils import check_dependencies

        check_dependencies()
    except ImportError as error:
        missing("spark_connect", f'Spark Connect needs its client packages: pip install "pylog[connect]" '
                                 f'({str(error).splitlines()[0]})')


_CONNECT_SERVER = "import json, sys; from broker_sim.testing.spark import _serve_connect; " \
                  "_serve_connect(sys.argv[1], json.loads(sys.argv[2]))"


def _serve_connect(app_name: str, conf: dict) -> None:
    """The server process of ``connect_server``: prints its port, serves until its stdin closes."""
    session = spark_session(app_name, conf={**conf, **CONNECT_CONF})
    service = getattr(session._jvm, "org.apache.spark.sql.connect.service.SparkConnectService$")
    print(f"{_PORT_LINE}{getattr(service, 'MODULE$').localPort()}", flush=True)
    sys.stdin.read()
    stop_session(session)


@contextlib.contextmanager
def connect_server(app_name: str = "pylog-connect", *, conf: dict | None = None, log: Path | None = None,
                   env: dict | None = None, timeout: float = 180.0):
    """A local[2] Spark Connect server (``spark_session`` settings plus ``conf``) in a subprocess on a free
    port of 127.0.0.1; yields its ``sc://127.0.0.1:<port>``. Its Python workers import this pylog. Its stderr
    goes to ``log`` (a temporary file by default), whose tail the error names when it does not start within
    ``timeout`` seconds. Ends the server (bounded by ``timeout``) on exit."""
    env = dict(os.environ if env is None else env)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [*spark_cds.package_roots(), env.get("PYTHONPATH")]))
    with contextlib.ExitStack() as stack:
        if log is None:
            log = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pylog-connect-"))) / "server.log"
        with open(log, "w") as stderr:
            server = subprocess.Popen(
                [sys.executable, "-c", _CONNECT_SERVER, app_name, json.dumps({k: _conf_value(v) for k, v in
                                                                              (conf or {}).items()})],
                env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True)
        watchdog = threading.Timer(timeout, server.kill)
        watchdog.start()
        try:
            port = ""
            for line in server.stdout:   # a server that fails to start closes stdout
                if line.startswith(_PORT_LINE):
                    port = line[len(_PORT_LINE):].strip()
                    break
            watchdog.cancel()
            if not port.isdigit():
                raise RuntimeError(f"connect_server: the Spark Connect server did not start within {timeout:g} s "
                                   f"(exit {server.poll()}); its log {log}:\n{log.read_text()[-6000:]}")
            yield f"sc://127.0.0.1:{port}"
        finally:
            watchdog.cancel()
            with contextlib.suppress(OSError):
                server.stdin.close()
            try:
                server.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def _connect_to(url: str):
    """A Connect session to ``url``, beside a classic one if this process has one (pyspark's own builder
    refuses that), and the process marked as Connect (SPARK_CONNECT_MODE_ENABLED) as that builder does, so
    ``pyspark.sql.functions`` build Connect's columns."""
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    session = RemoteSparkSession.builder.remote(url).getOrCreate()
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    return session


def _remote_session(app_name: str, settings: dict):
    _require_connect()
    stack = contextlib.ExitStack()
    url = stack.enter_context(connect_server(app_name, conf=settings))
    try:
        session = _connect_to(url)
    except BaseException:
        stack.close()
        raise
    _connect_servers[id(session)] = stack
    return session


@pytest.fixture(scope="session")
def pylog_spark_config():
    """Static Spark confs (name -> value) for ``pylog_spark``, over ``spark_session``'s defaults: {} here.
    Override this fixture in your conftest.py to add some, e.g. ``{"spark.jars": "/path/to/a.jar"}``."""
    return {}


@pytest.fixture(scope="session")
def pylog_spark(pylog_spark_config):
    """One local[2] SparkSession for the test session (``spark_session(conf=pylog_spark_config)``), stopped
    at its end; under pytest-xdist, one per worker."""
    session = spark_session(conf=pylog_spark_config)
    yield session
    stop_session(session)


@pytest.fixture
def pylog_spark_factory(pylog_spark):
    """``make(confs=None, **more)``: a new session of ``pylog_spark`` (same SparkContext, its own SQL confs,
    temp views and streams) with those runtime SQL confs set. A static conf raises ``StaticConfError`` naming
    it and pointing at ``pylog_spark_config``. Streams the sessions still run are stopped after the test."""
    made = []

    def make(confs: dict | None = None, /, **more):
        session = pylog_spark.newSession()
        made.append(session)
        for key, value in {**(confs or {}), **more}.items():
            try:
                session.conf.set(key, _conf_value(value))
            except Exception as error:
                raise StaticConfError(
                    f"pylog_spark_factory: {key} cannot be set on a session: it is fixed when pylog_spark's "
                    f"driver JVM starts. Put it in pylog_spark_config (override that fixture in your "
                    f"conftest.py). Spark said: {str(error).splitlines()[0]}") from None
        return session

    yield make
    for session in made:
        for query in session.streams.active:
            query.stop()


@pytest.fixture(scope="session")
def pylog_spark_connect_url(pylog_spark_config, tmp_path_factory):
    """``sc://127.0.0.1:<port>`` of a local Spark Connect server (``connect_server``) for the test session;
    skipped (failed under CI=true) without the connect packages: ``pip install "pylog[connect]"``."""
    _require_connect()
    log = tmp_path_factory.mktemp("pylog-connect-server") / "server.log"
    with connect_server(conf=pylog_spark_config, log=log) as url:
        yield url


@pytest.fixture
def pylog_spark_connect(pylog_spark_connect_url):
    """A Spark Connect session to ``pylog_spark_connect_url``, for one test. Function-scoped because pyspark
    marks the whole process as Connect while a remote session is in use (SPARK_CONNECT_MODE_ENABLED, which
    turns ``pyspark.sql.functions`` into Connect's); the mark is lifted after the test, so classic
    ``pylog_spark`` tests can run in the same process."""
    before = os.environ.get("SPARK_CONNECT_MODE_ENABLED")
    session = _connect_to(pylog_spark_connect_url)
    try:
        yield session
    finally:
        for query in session.streams.active:
            query.stop()
        session.stop()
        if before is None:
            os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
