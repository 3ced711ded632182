"""An in-memory ``SchemaLog`` and request helpers for the registry's unit tests (not a test module)."""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

from broker_sim.registry.errors import NotWriterError
from broker_sim.registry.rest import RegistryRest
from broker_sim.registry.service import RegistryService


class MemoryLog:
    """``_schemas`` partition 0 as a list of (offset, key, value); views share it (``follower``)."""

    def __init__(self, writer: bool = True, shared: "MemoryLog | None" = None) -> None:
        self.writer = writer
        self._shared = shared
        if shared is None:
            self.entries: list[tuple[int, bytes, bytes | None]] = []
            self.next_offset = 0
            self.start = 0
            self.appends = 0

    @property
    def _log(self) -> "MemoryLog":
        return self._shared if self._shared is not None else self

    def follower(self) -> "MemoryLog":
        return MemoryLog(writer=False, shared=self._log)

    def is_writer(self) -> bool:
        return self.writer

    async def append(self, records: list[tuple[bytes, bytes | None]]) -> int:
        if not self.writer:
            raise NotWriterError("not the writer")
        log = self._log
        for key, value in records:
            log.entries.append((log.next_offset, key, value))
            log.next_offset += 1
        log.appends += 1
        await asyncio.sleep(0)
        return log.next_offset

    def read_committed(self, from_offset: int):
        for entry in list(self._log.entries):
            if entry[0] >= from_offset:
                yield entry

    def start_offset(self) -> int:
        return self._log.start

    def compact(self, drop_tombstones: bool = True) -> None:
        """Kafka's log compaction: the last record of each key, tombstones dropped; offsets kept."""
        log = self._log
        last = {key: offset for offset, key, _ in log.entries}
        log.entries = [(o, k, v) for o, k, v in log.entries
                       if last[k] == o and not (drop_tombstones and v is None)]


@dataclass
class Request:
    method: str
    path: str
    query: dict
    headers: dict
    body: bytes
    raw_path: str = ""
    peer: str = ""
    principal: str | None = None


def request(method: str, target: str, body=None, headers: dict | None = None,
            principal: str | None = None) -> Request:
    split = urlsplit(target)
    data = body if isinstance(body, bytes) else (b"" if body is None else json.dumps(body).encode())
    hdrs = {"content-type": "application/vnd.schemaregistry.v1+json"} if data else {}
    hdrs.update({k.lower(): v for k, v in (headers or {}).items()})
    return Request(method, unquote(split.path), parse_qs(split.query, keep_blank_values=True), hdrs, data,
                   raw_path=target, principal=principal)


class Registry:
    """A service and its REST front over one MemoryLog, with a synchronous ``call``."""

    def __init__(self, log: MemoryLog | None = None, authorize=None, forward=None) -> None:
        self.log = log or MemoryLog()
        self.service = RegistryService(self.log, clock=lambda: 0.0, forward=forward)
        self.rest = RegistryRest(self.service, authorize)

    async def acall(self, method: str, target: str, body=None, **kwargs):
        response = await self.rest.handle(request(method, target, body, **kwargs))
        if response.stream is not None:
            response.body = b"".join([chunk async for chunk in response.stream])
        try:
            value = json.loads(response.body) if response.body else None
        except ValueError:
            value = response.body.decode()
        return response.status, value

    def run(self, coroutine):
        """Run one coroutine on this registry's own event loop (its lock lives there)."""
        if getattr(self, "_loop", None) is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(coroutine)

    def call(self, method: str, target: str, body=None, **kwargs):
        return self.run(self.acall(method, target, body, **kwargs))

    def close(self) -> None:
        if getattr(self, "_loop", None) is not None:
            self._loop.close()
            self._loop = None


AVRO_V1 = json.dumps({"type": "record", "name": "User", "namespace": "t",
                      "fields": [{"name": "name", "type": "string"}]})
AVRO_V2 = json.dumps({"type": "record", "name": "User", "namespace": "t",
                      "fields": [{"name": "name", "type": "string"},
                                 {"name": "age", "type": "int", "default": 0}]})
AVRO_BAD_V2 = json.dumps({"type": "record", "name": "User", "namespace": "t",
                          "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]})
