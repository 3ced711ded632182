"""The differences Confluent's JsonSchemaDiff reports: their kinds, which are compatible, and their words
(json-schema-provider ``json/diff/Difference.java`` and ``SchemaDiff.COMPATIBLE_CHANGES``)."""

from __future__ import annotations

from dataclasses import dataclass

COMPATIBLE_CHANGES = frozenset({
    "ID_CHANGED", "DESCRIPTION_CHANGED", "TITLE_CHANGED", "DEFAULT_CHANGED", "SCHEMA_REMOVED", "TYPE_EXTENDED",
    "MAX_LENGTH_INCREASED", "MAX_LENGTH_REMOVED", "MIN_LENGTH_DECREASED", "MIN_LENGTH_REMOVED",
    "PATTERN_REMOVED",
    "MAXIMUM_INCREASED", "MAXIMUM_REMOVED", "MINIMUM_DECREASED", "MINIMUM_REMOVED",
    "EXCLUSIVE_MAXIMUM_INCREASED", "EXCLUSIVE_MAXIMUM_REMOVED", "EXCLUSIVE_MINIMUM_DECREASED",
    "EXCLUSIVE_MINIMUM_REMOVED", "MULTIPLE_OF_REDUCED", "MULTIPLE_OF_REMOVED",
    "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED", "REQUIRED_ATTRIBUTE_REMOVED", "DEPENDENCY_ARRAY_NARROWED",
    "DEPENDENCY_ARRAY_REMOVED", "DEPENDENCY_SCHEMA_REMOVED", "MAX_PROPERTIES_INCREASED",
    "MAX_PROPERTIES_REMOVED", "MIN_PROPERTIES_DECREASED", "MIN_PROPERTIES_REMOVED",
    "ADDITIONAL_PROPERTIES_ADDED", "ADDITIONAL_PROPERTIES_EXTENDED",
    "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL", "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL",
    "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "MAX_ITEMS_INCREASED", "MAX_ITEMS_REMOVED", "MIN_ITEMS_DECREASED", "MIN_ITEMS_REMOVED", "UNIQUE_ITEMS_REMOVED",
    "ADDITIONAL_ITEMS_ADDED", "ADDITIONAL_ITEMS_EXTENDED", "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
    "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL", "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL", "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "ENUM_ARRAY_EXTENDED",
    "COMBINED_TYPE_EXTENDED", "PRODUCT_TYPE_NARROWED", "SUM_TYPE_EXTENDED", "NOT_TYPE_NARROWED",
})

# Confluent's Difference.error(): the description of each kind of difference, by group.
_KEYWORD_ADDED_OR_REMOVED = {
    "MAXIMUM_ADDED", "MINIMUM_ADDED", "EXCLUSIVE_MAXIMUM_ADDED", "EXCLUSIVE_MINIMUM_ADDED", "MULTIPLE_OF_ADDED",
    "MAX_LENGTH_ADDED", "MIN_LENGTH_ADDED", "PATTERN_ADDED", "REQUIRED_ATTRIBUTE_ADDED", "MAX_PROPERTIES_ADDED",
    "MIN_PROPERTIES_ADDED", "DEPENDENCY_ARRAY_ADDED", "DEPENDENCY_SCHEMA_ADDED", "MAX_ITEMS_ADDED",
    "MIN_ITEMS_ADDED", "UNIQUE_ITEMS_ADDED", "ADDITIONAL_ITEMS_REMOVED", "ADDITIONAL_PROPERTIES_REMOVED"}
_VALUE_INCREASED = {"MIN_LENGTH_INCREASED", "MINIMUM_INCREASED", "EXCLUSIVE_MINIMUM_INCREASED",
                    "MIN_PROPERTIES_INCREASED", "MULTIPLE_OF_EXPANDED", "MIN_ITEMS_INCREASED"}
_VALUE_DECREASED = {"MAX_LENGTH_DECREASED", "MAXIMUM_DECREASED", "MAX_ITEMS_DECREASED",
                    "EXCLUSIVE_MAXIMUM_DECREASED", "MAX_PROPERTIES_DECREASED"}
_TYPE_NARROWED = {"ADDITIONAL_ITEMS_NARROWED", "ENUM_ARRAY_NARROWED", "SUM_TYPE_NARROWED",
                  "ADDITIONAL_PROPERTIES_NARROWED"}
_VALUE_CHANGED = {"PATTERN_CHANGED", "MULTIPLE_OF_CHANGED", "DEPENDENCY_ARRAY_CHANGED"}
_TYPE_CHANGED = {"TYPE_CHANGED", "TYPE_NARROWED", "COMBINED_TYPE_CHANGED", "COMBINED_TYPE_SUBSCHEMAS_CHANGED",
                 "ENUM_ARRAY_CHANGED", "SCHEMA_ADDED"}
_TYPE_EXTENDED = {"DEPENDENCY_ARRAY_EXTENDED", "PRODUCT_TYPE_EXTENDED", "SUM_TYPE_EXTENDED", "NOT_TYPE_EXTENDED"}
_ADDED_TO_OPEN = {"REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
                  "ITEM_ADDED_TO_OPEN_CONTENT_MODEL"}


@dataclass(frozen=True)
class Difference:
    kind: str
    path: str

    def describe(self, new: str, old: str) -> str:
        """Confluent's ``Difference.toString()`` with its two ``%s`` filled (``new``/``old`` roles)."""
        return f'{{errorType:"{self.kind}", description:"{self._error(new, old)}"}}'

    def _error(self, a: str, b: str) -> str:  # noqa: PLR0911 - one sentence per group, as Confluent's
        p, k = self.path, self.kind
        if k in _KEYWORD_ADDED_OR_REMOVED:
            return f"The keyword at path '{p}' in the {a} schema is not present in the {b} schema"
        if k in _VALUE_INCREASED:
            return f"The value at path '{p}' in the {a} schema is more than its value in the {b} schema"
        if k in _VALUE_DECREASED:
            return f"The value at path '{p}' in the {a} schema is less than its value in the {b} schema"
        if k in _VALUE_CHANGED:
            return f"The value at path '{p}' is different between the {a} and {b} schema"
        if k in _TYPE_NARROWED:
            return f"An array or combined type at path '{p}' has fewer elements in the {a} schema than the {b} schema"
        if k in _TYPE_EXTENDED:
            return f"An array or combined type at path '{p}' has more elements in the {a} schema than the {b} schema"
        if k in _TYPE_CHANGED:
            return f"A type at path '{p}' is different between the {a} schema and the {b} schema"
        if k in _ADDED_TO_OPEN:
            return (f"The {a} schema has an open content model and has a property or item at path '{p}' which is "
                    f"missing in the {b} schema")
        if k == "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL":
            return (f"The {a} schema has an unopen content model and has a required property at path '{p}' which "
                    f"is missing in the {b} schema")
        if k in ("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"):
            return (f"The {a} schema has a closed content model and is missing a property or item present at path "
                    f"'{p}' in the {b} schema")
        if k in ("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                 "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"):
            return (f"A property or item is missing in the {a} schema but present at path '{p}' in the {b} schema "
                    "and is not covered by its partially open content model")
        if k in ("PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
                 "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"):
            return (f"The {a} schema has a property or item at path '{p}' which is missing in the {b} schema and is "
                    "not covered by its partially open content model")
        if k == "SCHEMA_TOO_DEEP_TO_COMPARE":
            return f"The schemas at path '{p}' nest too deeply to compare"
        if k == "SCHEMA_TOO_LARGE_TO_COMPARE":
            return f"The schemas at path '{p}' have too many subschemas to compare"
        if k == "COMBINED_TYPE_TOO_LARGE_TO_COMPARE":
            return f"The combined types at path '{p}' have too many subschemas to compare"
        return ""
