"""``pylog schemas``: subjects, schemas, compatibility, config and mode of a Schema Registry.

Examples::

    $ pylog schemas register events-value --schema-file event.avsc
    {"id": 1}
    $ pylog schemas list
    SUBJECT       VERSIONS  LATEST  ID  TYPE
    events-value  1,2       2       3   AVRO
    $ pylog schemas list --deleted --prefix events --format json
    $ pylog schemas get events-value                      # the latest version; --version 1; --id 3
    $ pylog schemas compat events-value --schema-file event-v3.avsc --verbose
    {"is_compatible": false, "messages": ["..."]}       (exit status 1)
    $ pylog schemas register orders-value --schema-file order.avsc \\
          --reference com.acme.Customer=customer-value:1
    $ pylog schemas register payments-value --schema-file payment.proto --normalize
    $ pylog schemas delete events-value --version 1       # soft; then --permanent
    $ pylog schemas config                                 # {"compatibilityLevel": "BACKWARD"}
    $ pylog schemas config events-value --set FULL_TRANSITIVE
    $ pylog schemas config events-value --delete
    $ pylog schemas mode --set READONLY
    $ pylog --command-config registry.properties schemas list --url https://127.0.0.1:8081

The tool speaks only Confluent's Schema Registry REST API v1 (``urllib``, no broker internals), so it works
against pylog's registry and Confluent's alike. ``--url`` defaults to ``$PYLOG_SCHEMA_REGISTRY_URL``, else
``http://127.0.0.1:8081``; a comma-separated list is tried in turn while the registries cannot be reached, as
confluent-kafka's client does. Credentials in the URL (``https://user:pass@host:8081``) are sent as HTTP
Basic authentication.

``--command-config FILE`` is a properties file with confluent-kafka's SchemaRegistryClient names, optionally
prefixed ``schema.registry.`` (as Java clients and Kafka tools write them), so one file can serve both::

    basic.auth.user.info=alice:alice-secret
    ssl.ca.location=/etc/pylog/ca.crt
    ssl.certificate.location=/etc/pylog/client.crt     # mutual TLS, optional
    ssl.key.location=/etc/pylog/client.key
    ssl.key.password=...

Kafka client settings in the same file (``security.protocol``, ``sasl.*``, ``ssl.truststore.location``,
``basic.auth.credentials.source``) are ignored; any other key is an error naming the known ones.

Output: the registry's JSON answer (``list`` prints a table unless ``--format json``). ``get SUBJECT``
shows the latest version; ``config SUBJECT`` shows the level in effect for the subject (its own, else the
global one: ``defaultToGlobal=true``).

Exit status: 0 on success; 1 when ``compat`` finds the schema incompatible; 2 on any error: the registry's
refusal prints its ``error_code`` and message (e.g. ``pylog: error: 40401 Subject 'x' not found.``), and an
unreachable registry, an unreadable file or bad usage print one line naming the problem.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from broker_sim.tools.errors import ToolError
from broker_sim.tools.groups import _print_table
from broker_sim.tools.security import _IGNORED as KAFKA_IGNORED
from broker_sim.tools.security import _PROPERTIES as KAFKA_PROPERTIES
from broker_sim.tools.security import read_properties

DEFAULT_URL = "http://127.0.0.1:8081"
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
ACCEPT = "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json"
SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")
COMPATIBILITY_LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE",
                        "FULL", "FULL_TRANSITIVE")
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
SUBJECT_NOT_FOUND = 40401
EXIT_INCOMPATIBLE = 1
EXIT_ERROR = 2
_TYPE_BY_SUFFIX = {".avsc": "AVRO", ".json": "JSON", ".proto": "PROTOBUF"}
_REGISTRY_PROPERTIES = ("basic.auth.user.info", "ssl.ca.location", "ssl.certificate.location",
                        "ssl.key.location", "ssl.key.password")
_MAX_RESPONSE_BYTES = 64 * 1024 * 1024


def default_url() -> str:
    """``$PYLOG_SCHEMA_REGISTRY_URL`` if set, else ``http://127.0.0.1:8081``."""
    return os.environ.get("PYLOG_SCHEMA_REGISTRY_URL") or DEFAULT_URL


class RegistryError(ToolError):
    """The registry refused a request: its HTTP status, Confluent ``error_code`` and message."""

    def __init__(self, status: int, error_code: int, message: str):
        super().__init__(f"{error_code} {message}")
        self.status, self.error_code, self.message = status, error_code, message


@dataclass(frozen=True)
class RegistryClient:
    """Confluent REST v1 requests over urllib: JSON in, JSON out, errors as :class:`RegistryError`."""

    urls: tuple[str, ...]
    timeout_s: float = 10.0
    authorization: str | None = None
    ssl_context: ssl.SSLContext | None = None

    def request(self, method: str, path: str, query: dict | None = None, body=None):
        """Send *method* *path* (segments already quoted) to each URL in turn until one answers; its JSON."""
        params = {k: str(v).lower() if isinstance(v, bool) else v for k, v in (query or {}).items() if v is not None}
        suffix = path + ("?" + urllib.parse.urlencode(params) if params else "")
        headers = {"Accept": ACCEPT}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = CONTENT_TYPE
        if self.authorization:
            headers["Authorization"] = self.authorization
        unreachable = []
        for base in self.urls:
            request = urllib.request.Request(base + suffix, data=data, headers=headers, method=method)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s, context=self.ssl_context) as response:
                    return _json_body(response.read(_MAX_RESPONSE_BYTES))
            except urllib.error.HTTPError as exc:
                raise _registry_error(exc) from None
            except (urllib.error.URLError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                unreachable.append(f"{base}: {reason}")
        raise ToolError(f"cannot reach a schema registry ({'; '.join(unreachable)}; "
                        f"check --url or PYLOG_SCHEMA_REGISTRY_URL)")


def _json_body(raw: bytes):
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        raise ToolError(f"the registry's answer is not JSON: {raw[:200]!r}") from None


def _registry_error(exc: urllib.error.HTTPError) -> RegistryError:
    with exc:
        raw = exc.read(64 * 1024)
    try:
        document = json.loads(raw)
        return RegistryError(exc.code, int(document["error_code"]), str(document.get("message", "")))
    except (ValueError, KeyError, TypeError):
        # Not Confluent's error document (a proxy, a plain HTTP server): its status stands in for the code.
        text = raw[:200].decode("utf-8", "replace").strip() or exc.reason
        return RegistryError(exc.code, exc.code, f"HTTP {exc.code}: {text}")


def registry_settings(path: str | None) -> dict[str, str]:
    """The registry's client properties from a ``--command-config`` file, without the ``schema.registry.``
    prefix; Kafka client settings are skipped, unknown keys raise ToolError."""
    if not path:
        return {}
    settings: dict[str, str] = {}
    for key, value in read_properties(path).items():
        name = key.removeprefix("schema.registry.")
        if name in _REGISTRY_PROPERTIES:
            settings[name] = value
        elif key in KAFKA_PROPERTIES or key in KAFKA_IGNORED or key.startswith(("sasl.", "security.", "ssl.")) \
                or name == "basic.auth.credentials.source":
            continue
        else:
            raise ToolError(f"--command-config {path}: {key} is not a schema registry client setting "
                            f"(known: {', '.join(_REGISTRY_PROPERTIES)}, each optionally prefixed "
                            f"schema.registry.)")
    return settings


def build_client(url: str, command_config: str | None, timeout_ms: int) -> RegistryClient:
    """A :class:`RegistryClient` for ``--url`` and ``--command-config``."""
    settings = registry_settings(command_config)
    urls, userinfo = [], None
    for text in url.split(","):
        parsed = urllib.parse.urlsplit(text.strip())
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ToolError(f"--url {text.strip()!r}: expected http://HOST:PORT or https://HOST:PORT")
        if parsed.username is not None:
            userinfo = f"{urllib.parse.unquote(parsed.username)}:{urllib.parse.unquote(parsed.password or '')}"
        netloc = parsed.netloc.rpartition("@")[2]
        urls.append(urllib.parse.urlunsplit((parsed.scheme, netloc, parsed.path.rstrip("/"), "", "")))
    if "basic.auth.user.info" in settings:
        if userinfo is not None:
            raise ToolError("credentials are both in --url and in basic.auth.user.info: give them once")
        userinfo = settings["basic.auth.user.info"]
        if ":" not in userinfo:
            raise ToolError("basic.auth.user.info must be USER:PASSWORD")
    authorization = None
    if userinfo is not None:
        authorization = "Basic " + base64.b64encode(userinfo.encode()).decode()
    return RegistryClient(urls=tuple(urls), timeout_s=timeout_ms / 1000, authorization=authorization,
                          ssl_context=_ssl_context(settings) if any(u.startswith("https:") for u in urls) else None)


def _ssl_context(settings: dict[str, str]) -> ssl.SSLContext:
    try:
        ca = settings.get("ssl.ca.location")
        if ca and os.path.isdir(ca):
            context = ssl.create_default_context(capath=ca)
        else:
            context = ssl.create_default_context(cafile=ca)
        certificate = settings.get("ssl.certificate.location")
        if certificate:
            context.load_cert_chain(certificate, settings.get("ssl.key.location"), settings.get("ssl.key.password"))
        elif "ssl.key.location" in settings:
            raise ToolError("ssl.key.location needs ssl.certificate.location")
    except (OSError, ssl.SSLError) as exc:
        raise ToolError(f"--command-config: cannot load the TLS files: {exc}") from None
    return context


def _quote(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


def _subject_path(prefix: str, subject: str | None) -> str:
    return f"/{prefix}" + (f"/{_quote(subject)}" if subject is not None else "")


def _print_json(document, out: TextIO) -> None:
    print(json.dumps(document, indent=2), file=out)


# --- argparse ---------------------------------------------------------------------------------------------

def version_text(text: str) -> str:
    """argparse type for a version: a positive number or ``latest``."""
    if text == "latest" or (text.isdigit() and int(text) > 0):
        return text
    raise argparse.ArgumentTypeError(f"expected a version number >= 1 or 'latest', got {text!r}")


def reference_text(text: str) -> dict:
    """argparse type for ``NAME=SUBJECT:VERSION``: a Confluent schema reference."""
    name, found, rest = text.partition("=")
    subject, colon, version = rest.rpartition(":")
    if not found or not name or not colon or not subject or not version.isdigit():
        raise argparse.ArgumentTypeError(f"expected NAME=SUBJECT:VERSION, got {text!r}")
    return {"name": name, "subject": subject, "version": int(version)}


def add_arguments(parser) -> None:
    """The ``schemas`` actions and their options on *parser* (``pylog schemas``)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=argparse.SUPPRESS,
                        help=f"schema registry URL(s), comma-separated (default: $PYLOG_SCHEMA_REGISTRY_URL or "
                             f"{DEFAULT_URL})")
    common.add_argument("--command-config", metavar="FILE", default=argparse.SUPPRESS,
                        help="registry client properties: basic.auth.user.info, ssl.ca.location, "
                             "ssl.certificate.location, ssl.key.location (optionally prefixed schema.registry.)")
    actions = parser.add_subparsers(dest="schemas_command", required=True, metavar="ACTION")

    listing = actions.add_parser("list", parents=[common], help="subjects with their versions and latest id")
    listing.add_argument("--deleted", action="store_true", help="include soft-deleted subjects and versions")
    listing.add_argument("--prefix", metavar="PREFIX", help="only subjects starting with PREFIX")
    listing.add_argument("--format", choices=["text", "json"], default="text")

    get = actions.add_parser("get", parents=[common], help="a subject's version, or a schema by id")
    target = get.add_mutually_exclusive_group(required=True)
    target.add_argument("subject", nargs="?", metavar="SUBJECT")
    target.add_argument("--id", type=int, metavar="N", help="the schema with this id")
    get.add_argument("--version", type=version_text, default="latest", metavar="N|latest")
    get.add_argument("--deleted", action="store_true", help="also find a soft-deleted version")

    register = actions.add_parser("register", parents=[common], help="register a schema under a subject")
    register.add_argument("subject", metavar="SUBJECT")
    register.add_argument("--schema-file", required=True, metavar="FILE")
    register.add_argument("--type", type=str.upper, choices=SCHEMA_TYPES,
                          help="default: by the file's suffix (.avsc AVRO, .json JSON, .proto PROTOBUF), else AVRO")
    register.add_argument("--reference", type=reference_text, action="append", default=[],
                          metavar="NAME=SUBJECT:VERSION", help="a schema reference, repeatable")
    register.add_argument("--normalize", action="store_true", help="register the normalized form")

    delete = actions.add_parser("delete", parents=[common], help="delete a subject or one version")
    delete.add_argument("subject", metavar="SUBJECT")
    delete.add_argument("--version", type=version_text, metavar="N|latest", help="only this version")
    delete.add_argument("--permanent", action="store_true", help="hard delete (after a soft delete)")

    compat = actions.add_parser("compat", parents=[common],
                                help="test a schema against a subject's versions (exit 1 if incompatible)")
    compat.add_argument("subject", metavar="SUBJECT")
    compat.add_argument("--schema-file", required=True, metavar="FILE")
    compat.add_argument("--type", type=str.upper, choices=SCHEMA_TYPES, help="as for register")
    compat.add_argument("--reference", type=reference_text, action="append", default=[],
                        metavar="NAME=SUBJECT:VERSION")
    compat.add_argument("--version", type=version_text, default="latest", metavar="N|latest")
    compat.add_argument("--verbose", action="store_true", help="the registry's reasons")

    config = actions.add_parser("config", parents=[common], help="show, set or delete a compatibility level")
    config.add_argument("subject", nargs="?", metavar="SUBJECT", help="default: the global config")
    config_change = config.add_mutually_exclusive_group()
    config_change.add_argument("--set", type=str.upper, choices=COMPATIBILITY_LEVELS, metavar="LEVEL",
                               help=", ".join(COMPATIBILITY_LEVELS))
    config_change.add_argument("--delete", action="store_true", help="remove it (back to the global level)")

    mode = actions.add_parser("mode", parents=[common], help="show, set or delete a mode")
    mode.add_argument("subject", nargs="?", metavar="SUBJECT", help="default: the global mode")
    mode_change = mode.add_mutually_exclusive_group()
    mode_change.add_argument("--set", type=str.upper, choices=MODES, metavar="MODE", help=", ".join(MODES))
    mode_change.add_argument("--delete", action="store_true", help="remove a subject's mode")
    mode.add_argument("--force", action="store_true", help="with --set IMPORT: even if schemas exist")


# --- the actions ------------------------------------------------------------------------------------------

def list_subjects(client: RegistryClient, *, deleted: bool, prefix: str | None, output_format: str,
                  out: TextIO) -> list[dict]:
    """Print (and return) each subject's versions, latest version, its id and type, sorted by subject."""
    names = client.request("GET", "/subjects", {"deleted": deleted or None, "subjectPrefix": prefix})
    live = set(client.request("GET", "/subjects", {"subjectPrefix": prefix})) if deleted else set(names)
    rows = []
    for subject in sorted(names):
        try:
            versions = client.request("GET", f"{_subject_path('subjects', subject)}/versions",
                                      {"deleted": deleted or None})
            latest = client.request("GET", f"{_subject_path('subjects', subject)}/versions/{max(versions)}",
                                    {"deleted": deleted or None}) if versions else {}
        except RegistryError as exc:
            if exc.error_code == SUBJECT_NOT_FOUND:  # deleted while we listed
                continue
            raise
        rows.append({"subject": subject, "versions": versions, "latest_version": latest.get("version"),
                     "id": latest.get("id"), "schema_type": latest.get("schemaType", "AVRO"),
                     "deleted": subject not in live})
    if output_format == "json":
        _print_json(rows, out)
    else:
        header = ["SUBJECT", "VERSIONS", "LATEST", "ID", "TYPE"] + (["DELETED"] if deleted else [])
        _print_table(header, [[r["subject"], ",".join(map(str, r["versions"])), r["latest_version"], r["id"],
                               r["schema_type"]] + (["yes" if r["deleted"] else "no"] if deleted else [])
                              for r in rows], out)
    return rows


def _schema_request(path: str, schema_type: str | None, references: list[dict]) -> dict:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolError(f"--schema-file {path}: cannot read it: {getattr(exc, 'strerror', None) or exc}") from None
    body = {"schema": text, "schemaType": schema_type or _TYPE_BY_SUFFIX.get(Path(path).suffix.lower(), "AVRO")}
    if references:
        body["references"] = references
    return body


def run_action(client: RegistryClient, args, out: TextIO) -> int:
    """Run ``args.schemas_command``; its exit status (1 only for an incompatible ``compat``)."""
    action = args.schemas_command
    if action == "list":
        list_subjects(client, deleted=args.deleted, prefix=args.prefix, output_format=args.format, out=out)
        return 0
    if action == "get":
        if args.id is not None:
            document = client.request("GET", f"/schemas/ids/{args.id}")
        else:
            document = client.request("GET", f"{_subject_path('subjects', args.subject)}/versions/{args.version}",
                                      {"deleted": args.deleted or None})
        _print_json(document, out)
        return 0
    if action == "register":
        body = _schema_request(args.schema_file, args.type, args.reference)
        _print_json(client.request("POST", f"{_subject_path('subjects', args.subject)}/versions",
                                   {"normalize": args.normalize or None}, body), out)
        return 0
    if action == "delete":
        path = _subject_path("subjects", args.subject)
        if args.version is not None:
            path += f"/versions/{args.version}"
        _print_json(client.request("DELETE", path, {"permanent": args.permanent or None}), out)
        return 0
    if action == "compat":
        body = _schema_request(args.schema_file, args.type, args.reference)
        document = client.request(
            "POST", f"{_subject_path('compatibility/subjects', args.subject)}/versions/{args.version}",
            {"verbose": args.verbose or None}, body)
        _print_json(document, out)
        return 0 if document.get("is_compatible") else EXIT_INCOMPATIBLE
    if action == "config":
        path = _subject_path("config", args.subject)
        if args.set:
            document = client.request("PUT", path, body={"compatibility": args.set})
        elif args.delete:
            document = client.request("DELETE", path)
        else:
            document = client.request("GET", path, {"defaultToGlobal": True if args.subject else None})
        _print_json(document, out)
        return 0
    path = _subject_path("mode", args.subject)
    if args.set:
        document = client.request("PUT", path, {"force": args.force or None}, {"mode": args.set})
    elif args.delete:
        if args.subject is None:
            raise ToolError("mode --delete needs a SUBJECT (the global mode can only be --set)")
        document = client.request("DELETE", path)
    else:
        document = client.request("GET", path)
    _print_json(document, out)
    return 0


def run_from_args(args, *, out: TextIO, err: TextIO) -> int:
    """``pylog schemas ...``: run the action, print failures as one line; the exit status."""
    try:
        client = build_client(getattr(args, "url", None) or default_url(), args.command_config,
                              args.connect_timeout_ms)
        return run_action(client, args, out)
    except ToolError as exc:
        print(f"pylog: error: {exc}", file=err)
        return EXIT_ERROR
