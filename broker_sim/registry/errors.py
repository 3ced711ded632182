"""The registry's errors: ``RegistryError(http_status, error_code, message)`` and Confluent's error codes.

The codes and message texts are Confluent Schema Registry's (``rest/exceptions/Errors.java`` and the
``Rest*Exception`` classes), because clients match on them: confluent-kafka raises
``SchemaRegistryError(http_status, error_code, message)`` straight from the JSON body
``{"error_code": ..., "message": ...}`` that ``RegistryError.body`` builds.
"""
from __future__ import annotations

# HTTP 401/403 (Confluent's security plugin)
UNAUTHORIZED = 401
FORBIDDEN = 40301
# HTTP 404
SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403
SUBJECT_SOFT_DELETED = 40404
SUBJECT_NOT_SOFT_DELETED = 40405
SCHEMAVERSION_SOFT_DELETED = 40406
SCHEMAVERSION_NOT_SOFT_DELETED = 40407
SUBJECT_COMPATIBILITY_NOT_CONFIGURED = 40408
SUBJECT_MODE_NOT_CONFIGURED = 40409
# HTTP 409
INCOMPATIBLE_SCHEMA = 40901
# HTTP 422
INVALID_SCHEMA = 42201
INVALID_VERSION = 42202
INVALID_COMPATIBILITY_LEVEL = 42203
INVALID_MODE = 42204
OPERATION_NOT_PERMITTED = 42205
REFERENCE_EXISTS = 42206
ID_DOES_NOT_MATCH = 42207
INVALID_SUBJECT = 42208
SCHEMA_TOO_LARGE = 42209
# HTTP 500
STORE_ERROR = 50001
OPERATION_TIMEOUT = 50002
REQUEST_FORWARDING_FAILED = 50003
UNKNOWN_LEADER = 50004


class RegistryError(Exception):
    """An answer other than success: the HTTP status, Confluent's ``error_code`` and its message."""

    def __init__(self, http_status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.error_code = error_code
        self.message = message

    def body(self) -> dict:
        return {"error_code": self.error_code, "message": self.message}

    def __repr__(self) -> str:
        return f"RegistryError({self.http_status}, {self.error_code}, {self.message!r})"


class NotWriterError(Exception):
    """Raised by ``SchemaLog.append`` when this broker no longer leads ``_schemas`` partition 0."""


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")


def version_not_found(version: int | str) -> RegistryError:
    return RegistryError(404, VERSION_NOT_FOUND, f"Version {version} not found.")


def schema_not_found(schema_id: int | None = None) -> RegistryError:
    if schema_id is None:
        return RegistryError(404, SCHEMA_NOT_FOUND, "Schema not found")
    return RegistryError(404, SCHEMA_NOT_FOUND, f"Schema {schema_id} not found")


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, SUBJECT_SOFT_DELETED,
                         f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently")


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, SUBJECT_NOT_SOFT_DELETED,
                         f"Subject '{subject}' was not deleted first before being permanently deleted")


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, SCHEMAVERSION_SOFT_DELETED, f"Subject '{subject}' Version {version} was soft "
                         "deleted.Set permanent=true to delete permanently")


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, SCHEMAVERSION_NOT_SOFT_DELETED, f"Subject '{subject}' Version {version} was not "
                         "deleted first before being permanently deleted")


def compatibility_not_configured(subject: str) -> RegistryError:
    return RegistryError(404, SUBJECT_COMPATIBILITY_NOT_CONFIGURED,
                         f"Subject '{subject}' does not have subject-level compatibility configured")


def mode_not_configured(subject: str) -> RegistryError:
    return RegistryError(404, SUBJECT_MODE_NOT_CONFIGURED,
                         f"Subject '{subject}' does not have subject-level mode configured")


def incompatible(subject: str, messages: list[str]) -> RegistryError:
    details = "[" + ", ".join(messages) + "]"
    return RegistryError(409, INCOMPATIBLE_SCHEMA, "Schema being registered is incompatible with an earlier "
                         f"schema for subject \"{subject}\", details: {details}")


def invalid_schema(reason: str) -> RegistryError:
    return RegistryError(422, INVALID_SCHEMA, f"Invalid schema: {reason}" if reason else "Invalid schema")


def invalid_version(version: str) -> RegistryError:
    return RegistryError(422, INVALID_VERSION, f"The specified version '{version}' is not a valid version id. "
                         "Allowed values are between [1, 2^31-1] and the string \"latest\"")


def invalid_compatibility_level() -> RegistryError:
    return RegistryError(422, INVALID_COMPATIBILITY_LEVEL, "Invalid compatibility level. Valid values are none, "
                         "backward, forward, full, backward_transitive, forward_transitive, and full_transitive")


def invalid_mode() -> RegistryError:
    return RegistryError(422, INVALID_MODE, "Invalid mode. Valid values are READWRITE, READONLY, and IMPORT.")


def not_permitted(message: str) -> RegistryError:
    return RegistryError(422, OPERATION_NOT_PERMITTED, message)


def reference_exists(subject: str, version: int) -> RegistryError:
    return RegistryError(422, REFERENCE_EXISTS, "One or more references exist to the schema "
                         f"{{magic=1,keytype=SCHEMA,subject={subject},version={version}}}.")


def invalid_subject(subject: str) -> RegistryError:
    return RegistryError(422, INVALID_SUBJECT, f"The specified subject '{subject}' is not a valid.")


def unprocessable(message: str) -> RegistryError:
    """A body that parsed as JSON but does not fit the request (Jackson's mapping errors): 422."""
    return RegistryError(422, 422, message)


def bad_request(message: str) -> RegistryError:
    """A body that is not JSON at all (Jackson's parse errors): 400."""
    return RegistryError(400, 400, message)


def forbidden(principal: str | None, operation: str, resource: tuple[str, str]) -> RegistryError:
    kind, name = resource
    what = f"Subject: {name}" if kind == "subject" else "Registry"
    return RegistryError(403, FORBIDDEN, f"User {principal} is denied operation {operation} on {what}")


def unknown_leader(message: str = "Request failed since leader is unknown") -> RegistryError:
    return RegistryError(500, UNKNOWN_LEADER, message)


def forwarding_failed(message: str) -> RegistryError:
    return RegistryError(500, REQUEST_FORWARDING_FAILED, message)
