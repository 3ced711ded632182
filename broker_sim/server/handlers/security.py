"""SaslHandshake, SaslAuthenticate (KIP-43, KIP-152, KIP-368), the SCRAM user APIs (KIP-554), the ACL APIs and
the client quota APIs (KIP-546).

``SecurityApis`` holds what they touch: the connection's SASL authenticator (on ``ctx``), the SCRAM
credentials and quotas in ``entity_configs``, the ACL store and the authentication counters of ``metrics``.
"""
from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
from urllib.parse import unquote

import kafka.errors as Errors

from broker_sim.config import LONG_MAX
from broker_sim.protocol.apis import messages
from broker_sim.security import acl, scram
from broker_sim.security import quotas
from broker_sim.security.quotas import sanitize
from broker_sim.security.entity_configs import EntityConfigs
from broker_sim.security.sasl import AuthenticationFailed, IllegalSaslState
from broker_sim.server.handlers.access import ALTER, ALTER_CONFIGS, DESCRIBE, DESCRIBE_CONFIGS, Access
from broker_sim.server.network import CloseConnection

log = logging.getLogger(__name__)
SASL_AUTHENTICATION_FAILED = Errors.SaslAuthenticationFailedError.errno
ILLEGAL_SASL_STATE = Errors.IllegalSaslStateError.errno
UNSUPPORTED_SASL_MECHANISM = Errors.UnsupportedSaslMechanismError.errno
RESOURCE_NOT_FOUND = 91
DUPLICATE_RESOURCE = 92
UNACCEPTABLE_CREDENTIAL = 93


def _check_changes(name: str, items: list, current: dict) -> tuple[int, str] | None:
    """KIP-554's validation, in Kafka's order and words."""
    if not name:
        return UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    seen = set()
    for kind, item in items:
        mechanism = scram.MECHANISM_NAMES.get(item.mechanism)
        if mechanism is None:
            return UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {item.mechanism}"
        if mechanism in seen:
            return DUPLICATE_RESOURCE, f"A user credential cannot be altered twice in the same request: {name}"
        seen.add(mechanism)
        if kind == "delete" and mechanism not in current:
            return RESOURCE_NOT_FOUND, f"Attempt to delete a user credential that does not exist: {name} {mechanism}"
        if kind == "upsert":
            if not scram.MIN_ITERATIONS <= item.iterations <= scram.MAX_ITERATIONS:
                return (UNACCEPTABLE_CREDENTIAL, f"Iterations {item.iterations} not in the range "
                        f"[{scram.MIN_ITERATIONS}, {scram.MAX_ITERATIONS}] for {mechanism}")
            if not item.salt or not item.salted_password:
                return UNACCEPTABLE_CREDENTIAL, f"Salt and salted password are required: {name} {mechanism}"
    return None


SECURITY_DISABLED = Errors.SecurityDisabledError.errno
CLUSTER_AUTHORIZATION_FAILED = Errors.ClusterAuthorizationFailedError.errno
INVALID_REQUEST = Errors.InvalidRequestError.errno
_NO_AUTHORIZER = "No Authorizer is configured on the broker"  # Kafka's words (set authorizer.class.name)


def _enum(cls, value):
    try:
        return cls(value)
    except ValueError:
        return cls.UNKNOWN


def _filter(request_filter, version: int) -> acl.AclFilter:
    return acl.AclFilter(
        _enum(acl.ResourceType, request_filter.resource_type_filter), request_filter.resource_name_filter,
        _enum(acl.PatternType, request_filter.pattern_type_filter) if version >= 1 else acl.PatternType.LITERAL,
        request_filter.principal_filter, request_filter.host_filter, _enum(acl.Operation, request_filter.operation),
        _enum(acl.Permission, request_filter.permission_type))


def _described(bindings) -> list:
    DescribeAclsResponse = messages.DescribeAclsResponse
    Resource = DescribeAclsResponse.DescribeAclsResource
    by_resource: dict = {}
    for b in bindings:
        by_resource.setdefault((b.resource_type, b.name, b.pattern_type), []).append(b)
    return [Resource(resource_type=int(rtype), resource_name=name, pattern_type=int(pattern), acls=[
                Resource.AclDescription(principal=b.principal, host=b.host, operation=int(b.operation),
                                        permission_type=int(b.permission)) for b in group])
            for (rtype, name, pattern), group in sorted(by_resource.items())]


_ENTITY_TYPES = {"user": "users", "client-id": "clients", "ip": "ips"}
_COMPONENT_OF = {kind: component for component, kind in _ENTITY_TYPES.items()}
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2
UNSUPPORTED_VERSION = Errors.UnsupportedVersionError.errno


def _entity_of(components) -> tuple[dict[str, str | None], str]:
    """{type: name, None for <default>} of an entity given as [(type, name)]; error text when the entity is not
    one Kafka knows (an IP stands alone, and must be an IP address)."""
    parts: dict[str, str | None] = {}
    for kind, name in components:
        if kind not in _ENTITY_TYPES:
            return parts, f"Unsupported quota entity type {kind!r} (user, client-id, ip)"
        if kind in parts:
            return parts, f"Duplicate quota entity type {kind!r}"
        parts[kind] = name
    if not parts:
        return parts, "Empty quota entity"
    if "ip" in parts and len(parts) > 1:
        return parts, "Invalid quota entity combination, IP entity should not be used with user/client ID entity."
    if parts.get("ip") is not None:
        try:
            parts["ip"] = str(ipaddress.ip_address(parts["ip"]))
        except ValueError:
            return parts, f"{parts['ip']} is not a valid IP address."
    return parts, ""


def _op_problem(entity: dict, key: str, value: float | None) -> str | None:
    """Why Kafka refuses setting quota ``key`` to ``value`` (None: removing it) on ``entity``, or None: an IP
    has only connection_creation_rate (an integer), users and client ids the other quotas."""
    keys = (quotas.CONNECTION_RATE,) if "ip" in entity else quotas.QUOTA_TYPES
    if key not in keys:
        return f"Invalid configuration key {key} for this entity (its keys: {', '.join(keys)})"
    integer = key != quotas.REQUEST
    if value is not None and (not (math.isfinite(value) and value > 0) or (
            integer and (value > LONG_MAX or value != int(value)))):
        return f"Invalid value {value} for {key}: a finite positive " \
            f"{'integer up to ' + str(LONG_MAX) if integer else 'number'} is needed"
    return None


class SecurityApis:
    def __init__(self, access: Access, acls: acl.AclStore, entity_configs: EntityConfigs, metrics) -> None:
        self._access = access
        self._acls = acls
        self._entity_configs = entity_configs
        self._metrics = metrics  # counts SASL successes and failures

    async def sasl_handshake(self, ctx, request):
        SaslHandshakeResponse = messages.SaslHandshakeResponse
        authenticator = ctx.connection.authenticator
        if authenticator is None:  # a PLAINTEXT or SSL listener: Kafka's KafkaApis answers this
            return SaslHandshakeResponse(error_code=ILLEGAL_SASL_STATE, mechanisms=[])
        mechanisms = list(authenticator.listener.mechanisms)
        try:
            accepted = authenticator.handshake(request.mechanism, ctx.version)
        except IllegalSaslState as exc:
            raise CloseConnection(f"SASL: {exc}") from None
        if not accepted:
            ctx.connection.close_after_response = True  # Kafka closes after UNSUPPORTED_SASL_MECHANISM
            return SaslHandshakeResponse(error_code=UNSUPPORTED_SASL_MECHANISM, mechanisms=mechanisms)
        return SaslHandshakeResponse(error_code=0, mechanisms=mechanisms)

    async def sasl_authenticate(self, ctx, request):
        SaslAuthenticateResponse = messages.SaslAuthenticateResponse
        connection = ctx.connection
        authenticator = connection.authenticator
        if authenticator is None or authenticator.complete:
            return SaslAuthenticateResponse(error_code=ILLEGAL_SASL_STATE, error_message=(
                "SaslAuthenticate request received after successful authentication" if authenticator is not None
                else f"listener {connection.listener} does not use SASL"), auth_bytes=b"", session_lifetime_ms=0)
        if authenticator.raw_tokens:
            raise CloseConnection("SaslAuthenticate after a SaslHandshake v0 (tokens must be sent bare)")
        try:
            answer = authenticator.evaluate(bytes(request.auth_bytes or b""))
        except (AuthenticationFailed, IllegalSaslState) as exc:
            failed = isinstance(exc, AuthenticationFailed)
            log.info("SASL authentication of %s on listener %s failed: %s", connection.peer, connection.listener, exc)
            self._metrics.failed_authentications += 1
            await asyncio.sleep(authenticator.listener.failure_delay_ms / 1000.0)
            connection.close_after_response = True
            return SaslAuthenticateResponse(error_code=SASL_AUTHENTICATION_FAILED if failed else ILLEGAL_SASL_STATE,
                                            error_message=str(exc), auth_bytes=b"", session_lifetime_ms=0)
        if authenticator.complete:
            connection.authenticated(authenticator.principal)
            self._metrics.successful_authentications += 1
        return SaslAuthenticateResponse(error_code=0, error_message=None, auth_bytes=answer,
                                        session_lifetime_ms=authenticator.session_lifetime_ms())

    # --- KIP-554 -------------------------------------------------------------------------------------

    async def describe_user_scram_credentials(self, ctx, request):
        DescribeUserScramCredentialsResponse = messages.DescribeUserScramCredentialsResponse
        Result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
        Info = Result.CredentialInfo
        if not self._access.allowed_cluster(ctx, DESCRIBE):
            return DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=CLUSTER_AUTHORIZATION_FAILED,
                                                        error_message="DESCRIBE on the cluster is needed", results=[])
        store = self._entity_configs
        # stored under Kafka's sanitized names; (user, client-id) quota entities are not users
        users = {unquote(name): config for name, config in store.entities("users").items() if "/" not in name}

        def infos(config):
            out = []
            for mechanism, text in sorted(config.items()):
                if mechanism in scram.MECHANISM_IDS:
                    try:
                        iterations = scram.ScramCredential.from_text(text).iterations
                    except scram.CredentialError:
                        continue
                    out.append(Info(mechanism=scram.MECHANISM_IDS[mechanism], iterations=iterations))
            return out

        results = []
        if request.users is None or not request.users:
            for name in sorted(users):
                found = infos(users[name])
                if found:
                    results.append(Result(user=name, error_code=0, error_message=None, credential_infos=found))
        else:
            names = [u.name for u in request.users]
            for name in dict.fromkeys(names):
                if names.count(name) > 1:
                    results.append(Result(user=name, error_code=DUPLICATE_RESOURCE,
                                          error_message=f"Cannot describe SCRAM credentials for the same user twice "
                                                        f"in a single request: {name}", credential_infos=[]))
                    continue
                found = infos(users.get(name, {}))
                results.append(Result(user=name, error_code=0 if found else RESOURCE_NOT_FOUND,
                                      error_message=None if found else f"Attempt to describe a user credential that "
                                                                       f"does not exist: {name}",
                                      credential_infos=found))
        return DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=0, error_message=None,
                                                    results=results)

    async def alter_user_scram_credentials(self, ctx, request):
        AlterUserScramCredentialsResponse = messages.AlterUserScramCredentialsResponse
        Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
        changes: dict[str, list] = {}
        for deletion in request.deletions:
            changes.setdefault(deletion.name, []).append(("delete", deletion))
        for upsertion in request.upsertions:
            changes.setdefault(upsertion.name, []).append(("upsert", upsertion))
        if not self._access.allowed_cluster(ctx, ALTER):
            return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
                Result(user=name, error_code=CLUSTER_AUTHORIZATION_FAILED,
                       error_message="ALTER on the cluster is needed") for name in changes])
        store = self._entity_configs
        results = []
        for name, items in changes.items():
            error = _check_changes(name, items, store.get("users", sanitize(name)) if name else {})
            if error is not None:
                results.append(Result(user=name, error_code=error[0], error_message=error[1]))
                continue
            set_, delete = {}, []
            for kind, item in items:
                mechanism = scram.MECHANISM_NAMES[item.mechanism]
                if kind == "delete":
                    delete.append(mechanism)
                else:
                    set_[mechanism] = scram.ScramCredential.from_salted_password(
                        mechanism, bytes(item.salted_password), bytes(item.salt), item.iterations).to_text()
            try:
                await asyncio.get_running_loop().run_in_executor(None, store.alter, "users", sanitize(name), set_,
                                                                 delete)
            except Exception as exc:  # a failing disk or ZooKeeper: this user's change is not applied
                log.error("storing the SCRAM credentials of %r failed: %s", name, exc)
                results.append(Result(user=name, error_code=Errors.KafkaStorageError.errno, error_message=str(exc)))
                continue
            log.info("SCRAM credentials of user %r: %s%s", name, ", ".join(f"set {m}" for m in set_),
                     ", ".join(f"deleted {m}" for m in delete))
            results.append(Result(user=name, error_code=0, error_message=None))
        return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=results)

    # --- ACLs: CreateAcls, DescribeAcls, DeleteAcls ---------------------------------------------------

    async def create_acls(self, ctx, request):
        CreateAclsResponse = messages.CreateAclsResponse
        Result = CreateAclsResponse.AclCreationResult
        if not self._access.enabled:
            return CreateAclsResponse(throttle_time_ms=0, results=[
                Result(error_code=SECURITY_DISABLED, error_message=_NO_AUTHORIZER) for _ in request.creations])
        if not self._access.allowed_cluster(ctx, ALTER):
            return CreateAclsResponse(throttle_time_ms=0, results=[
                Result(error_code=CLUSTER_AUTHORIZATION_FAILED, error_message="ALTER on the cluster is needed")
                for _ in request.creations])
        results, valid = [], []
        for creation in request.creations:
            binding = acl.AclBinding(
                _enum(acl.ResourceType, creation.resource_type), creation.resource_name,
                _enum(acl.PatternType, creation.resource_pattern_type) if ctx.version >= 1 else acl.PatternType.LITERAL,
                creation.principal, creation.host, _enum(acl.Operation, creation.operation),
                _enum(acl.Permission, creation.permission_type))
            try:
                binding.check()
            except acl.AclError as exc:
                results.append(Result(error_code=INVALID_REQUEST, error_message=str(exc)))
                continue
            valid.append((len(results), binding))
            results.append(Result(error_code=0, error_message=None))
        if valid:
            try:
                await asyncio.get_running_loop().run_in_executor(None, self._acls.add, [b for _, b in valid])
                log.info("ACLs added by %s: %s", ctx.connection.principal, [b for _, b in valid])
            except Exception as exc:  # a failing disk or ZooKeeper: nothing of this request was stored
                log.error("storing ACLs failed: %s", exc)
                for position, _ in valid:
                    results[position] = Result(error_code=Errors.UnknownError.errno, error_message=f"not stored: {exc}")
        return CreateAclsResponse(throttle_time_ms=0, results=results)

    async def describe_acls(self, ctx, request):
        DescribeAclsResponse = messages.DescribeAclsResponse
        if not self._access.enabled:
            return DescribeAclsResponse(throttle_time_ms=0, error_code=SECURITY_DISABLED, error_message=_NO_AUTHORIZER,
                                        resources=[])
        if not self._access.allowed_cluster(ctx, DESCRIBE):
            return DescribeAclsResponse(throttle_time_ms=0, error_code=CLUSTER_AUTHORIZATION_FAILED,
                                        error_message="DESCRIBE on the cluster is needed", resources=[])
        found = _filter(request, ctx.version)
        return DescribeAclsResponse(throttle_time_ms=0, error_code=0, error_message=None,
                                    resources=_described(b for b in self._acls.bindings() if found.matches(b)))

    async def delete_acls(self, ctx, request):
        DeleteAclsResponse = messages.DeleteAclsResponse
        FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
        Matching = FilterResult.DeleteAclsMatchingAcl
        if not self._access.enabled or not self._access.allowed_cluster(ctx, ALTER):
            code = SECURITY_DISABLED if not self._access.enabled else CLUSTER_AUTHORIZATION_FAILED
            message = _NO_AUTHORIZER if not self._access.enabled else "ALTER on the cluster is needed"
            return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
                FilterResult(error_code=code, error_message=message, matching_acls=[]) for _ in request.filters])
        bindings = self._acls.bindings()
        matches = [[b for b in bindings if _filter(f, ctx.version).matches(b)] for f in request.filters]
        doomed = list({b for group in matches for b in group})
        error = None
        if doomed:
            try:
                await asyncio.get_running_loop().run_in_executor(None, self._acls.remove, doomed)
                log.info("ACLs removed by %s: %s", ctx.connection.principal, doomed)
            except Exception as exc:
                log.error("removing ACLs failed: %s", exc)
                error = str(exc)
        results = []
        for group in matches:
            if error is not None:
                results.append(FilterResult(error_code=Errors.UnknownError.errno, error_message=error,
                                            matching_acls=[]))
                continue
            results.append(FilterResult(error_code=0, error_message=None, matching_acls=[
                Matching(error_code=0, error_message=None, resource_type=int(b.resource_type), resource_name=b.name,
                         pattern_type=int(b.pattern_type), principal=b.principal, host=b.host,
                         operation=int(b.operation), permission_type=int(b.permission)) for b in group]))
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=results)

    # --- client quotas: DescribeClientQuotas, AlterClientQuotas (KIP-546) ---------------------------------

    def _entities(self) -> list[tuple[dict[str, str | None], dict]]:
        """Every stored quota entity as ({type: name}, quotas), names unsanitized (None for <default>)."""
        found = []

        def name_of(text):
            return None if text == quotas.DEFAULT else unquote(text)
        for kind in ("users", "clients", "ips"):
            keys = (quotas.CONNECTION_RATE,) if kind == "ips" else quotas.QUOTA_TYPES
            for name, config in self._entity_configs.entities(kind).items():
                values = {k: v for k, v in config.items() if k in keys}
                if not values:
                    continue
                if kind == "users" and "/clients/" in name:
                    user, _, client = name.partition("/clients/")
                    found.append(({"user": name_of(user), "client-id": name_of(client)}, values))
                else:
                    found.append(({_COMPONENT_OF[kind]: name_of(name)}, values))
        return found

    async def describe_client_quotas(self, ctx, request):
        Response = messages.DescribeClientQuotasResponse
        Entry = Response.EntryData
        if not self._access.allowed_cluster(ctx, DESCRIBE_CONFIGS):
            return Response(throttle_time_ms=0, error_code=CLUSTER_AUTHORIZATION_FAILED,
                            error_message="DESCRIBE_CONFIGS on the cluster is needed", entries=None)
        wanted = {}
        for component in request.components:
            if component.entity_type not in _ENTITY_TYPES:  # Kafka: an entity type it does not know
                return Response(throttle_time_ms=0, error_code=UNSUPPORTED_VERSION, entries=None,
                                error_message=f"Custom entity type {component.entity_type!r} not supported")
            if component.entity_type in wanted:
                return Response(throttle_time_ms=0, error_code=INVALID_REQUEST, entries=None,
                                error_message=f"Invalid or repeated entity type {component.entity_type!r}")
            wanted[component.entity_type] = component

        def matches(entity, kind):
            component = wanted.get(kind)
            if component is None:
                return not request.strict or kind not in entity
            if kind not in entity:
                return False
            if component.match_type == MATCH_EXACT:
                return entity[kind] == component.match
            if component.match_type == MATCH_DEFAULT:
                return entity[kind] is None
            return True

        entries = []
        for entity, values in self._entities():
            if all(matches(entity, kind) for kind in _ENTITY_TYPES):
                entries.append(Entry(entity=[Entry.EntityData(entity_type=k, entity_name=v) for k, v in entity.items()],
                                     values=[Entry.ValueData(key=k, value=float(v)) for k, v in sorted(values.items())]))
        return Response(throttle_time_ms=0, error_code=0, error_message=None, entries=entries)

    async def alter_client_quotas(self, ctx, request):
        Response = messages.AlterClientQuotasResponse
        Entry = Response.EntryData

        def answer(entry, code, message):
            return Entry(error_code=code, error_message=message, entity=[
                Entry.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])

        allowed = self._access.allowed_cluster(ctx, ALTER_CONFIGS)
        results = []
        for entry in request.entries:
            if not allowed:
                results.append(answer(entry, CLUSTER_AUTHORIZATION_FAILED, "ALTER_CONFIGS on the cluster is needed"))
                continue
            entity, problem = _entity_of([(e.entity_type, e.entity_name) for e in entry.entity])
            set_, delete = {}, []
            for op in entry.ops:
                problem = problem or _op_problem(entity, op.key, None if op.remove else op.value)
                if op.remove:
                    delete.append(op.key)
                elif not problem:
                    set_[op.key] = str(int(op.value)) if op.key != quotas.REQUEST else repr(float(op.value))
            if problem:
                results.append(answer(entry, INVALID_REQUEST, problem))
                continue
            if not request.validate_only:
                if "ip" in entity:
                    kind, name = "ips", quotas.DEFAULT if entity["ip"] is None else entity["ip"]
                else:
                    kind, name = quotas.entity_path(entity.get("user", ""), entity.get("client-id", ""))
                try:
                    await asyncio.get_running_loop().run_in_executor(None, self._entity_configs.alter, kind, name,
                                                                     set_, delete)
                except Exception as exc:
                    log.error("storing quotas of %s %s failed: %s", kind, name, exc)
                    results.append(answer(entry, Errors.UnknownError.errno, f"not stored: {exc}"))
                    continue
                log.info("quotas of %s/%s: set %s, removed %s", kind, name, set_, delete)
            results.append(answer(entry, 0, None))
        return Response(throttle_time_ms=0, entries=results)
