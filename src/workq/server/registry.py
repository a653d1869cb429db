"""Where toolset modules put their tools, with compact schemas and honest annotations."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Hashable
from typing import Annotated, Any, TypeVar, get_args, get_origin

from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from mcp.types import ToolAnnotations
from pydantic import BaseModel, create_model

from workq.server.state import ServerState

F = TypeVar("F", bound=Callable[..., Any])

# Only what differs from the spec's defaults (read-only false, destructive true,
# idempotent false, open world true) is sent: every byte of tools/list is agent context.
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def writes(*, idempotent: bool, destructive: bool = False) -> ToolAnnotations:
    return ToolAnnotations(
        destructive_hint=destructive,
        idempotent_hint=True if idempotent else None,
        open_world_hint=False,
    )


# The issue tools' arguments and answer fields for agent workspaces (a repository, a
# worktree per claim, releasing one with unmerged commits). Every schema byte costs every
# agent context, so they are offered only with the workspaces toolset (or the agit profile).
WORKSPACE_FIELDS = frozenset({"repository", "worktree", "discard", "remove_worktree"})

# Tool definitions already built, by the tool function's code, its defaults and whether
# workspaces are offered: every server built in one process (an HTTP session's, a test's)
# defines the same functions again as closures over its own state, and pydantic's schema
# and model generation is most of what building a server costs. The schemas and argument
# models in a definition are shared and never changed after it is built.
_DEFINITIONS: dict[Hashable, Tool] = {}


class Registry:
    """The tools of one server, by name, and the toolset each came from."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.tools: dict[str, Tool] = {}
        self.toolset_of: dict[str, str] = {}
        self.toolset = ""
        # Whether workspaces are on (toolsets.WITH_WORKSPACES): the issue tools then take
        # and answer their workspace fields.
        self.workspaces = False

    def tool(self, annotations: ToolAnnotations) -> Callable[[F], F]:
        """Register ``fn`` under its own name; its docstring is the description."""

        def decorator(fn: F) -> F:
            self._add(fn, annotations)
            return fn

        return decorator

    def _add(self, fn: Callable[..., Any], annotations: ToolAnnotations) -> None:
        name = fn.__name__
        if name in self.toolset_of:
            raise ValueError(f"tool {name} is registered twice")
        self.toolset_of[name] = self.toolset
        key = (
            fn.__code__,
            repr(fn.__defaults__),
            repr(fn.__kwdefaults__),
            annotations.model_dump_json(),
            self.workspaces,
        )
        definition = _DEFINITIONS.get(key)
        if definition is None:
            definition = _DEFINITIONS[key] = self._define(fn, annotations)
        self.tools[name] = Tool(
            fn=fn, **{field: getattr(definition, field) for field in _DEFINITION_FIELDS}
        )

    def _define(self, fn: Callable[..., Any], annotations: ToolAnnotations) -> Tool:
        if not self.workspaces and fn.__name__.startswith("issue_"):
            fn = without_workspaces(fn)
        tool = Tool.from_function(
            fn, description=inspect.cleandoc(fn.__doc__ or ""), annotations=annotations
        )
        parameters = compact_input(tool.parameters)
        return tool.model_copy(
            update={
                "parameters": parameters,
                "fn_metadata": TextStaysText.of(tool.fn_metadata, parameters),
            }
        )


# Every field of a built tool but its function (the SDK's fields, so that one a later SDK
# adds is carried over).
_DEFINITION_FIELDS = tuple(name for name in Tool.model_fields if name != "fn")


def without_workspaces(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The variant of an issue tool that agents outside workspaces see: the same function
    with a signature that has no workspace parameters and answers a model without the
    workspace fields. The SDK builds its schemas and argument model from that signature;
    the tool itself runs with their defaults."""
    signature = inspect.signature(fn, eval_str=True)
    kept = [p for p in signature.parameters.values() if p.name not in WORKSPACE_FIELDS]
    answer = signature.return_annotation
    if get_origin(answer) is Annotated:
        result, *metadata = get_args(answer)
        narrowed = [_without_fields(m) if _is_model(m) else m for m in metadata]
        answer = Annotated[(result, *narrowed)]

    async def awaited(**arguments: Any) -> Any:
        return await fn(**arguments)

    def called(**arguments: Any) -> Any:
        return fn(**arguments)

    variant: Callable[..., Any] = awaited if inspect.iscoroutinefunction(fn) else called
    variant.__name__ = variant.__qualname__ = fn.__name__
    variant.__doc__ = fn.__doc__
    # Read by inspect.signature, which the SDK builds the tool's schemas from.
    setattr(  # noqa: B010
        variant, "__signature__", signature.replace(parameters=kept, return_annotation=answer)
    )
    return variant


def _is_model(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)


@functools.cache
def _without_fields(model: type[BaseModel]) -> type[BaseModel]:
    """``model`` without its workspace fields (the same class when it has none)."""
    dropped = WORKSPACE_FIELDS & set(model.model_fields)
    if not dropped:
        return model
    kept: dict[str, Any] = {
        name: (field.annotation, field)
        for name, field in model.model_fields.items()
        if name not in dropped
    }
    narrowed: type[BaseModel] = create_model(model.__name__, __config__=model.model_config, **kept)
    return narrowed


class Catalog(Registry):
    """Only which toolset holds each tool name: no schemas are built, so it costs little."""

    def _add(self, fn: Callable[..., Any], annotations: ToolAnnotations) -> None:
        self.toolset_of.setdefault(fn.__name__, self.toolset)


if not callable(getattr(FuncMetadata, "pre_parse_json", None)):  # pragma: no cover
    # The override below would be dead code, and text arguments decoded as JSON again.
    raise ImportError("mcp's FuncMetadata has no pre_parse_json: review TextStaysText")


class TextStaysText(FuncMetadata):
    """The SDK json-decodes string arguments of every parameter not typed plain ``str``
    (for clients that send lists as JSON text). For a text parameter that turns the
    description "null" into nothing and a run id "[1]" into a list: here only the
    arguments of parameters that take a list or an object are decoded."""

    structured: frozenset[str] = frozenset()

    @classmethod
    def of(cls, metadata: FuncMetadata, parameters: dict[str, Any]) -> TextStaysText:
        # Every field the SDK's model has, so that one a later SDK adds is carried over.
        fields = {name: getattr(metadata, name) for name in type(metadata).model_fields}
        output_schema = metadata.output_schema
        return cls(
            **fields | {"output_schema": compact_output(output_schema) if output_schema else None},
            structured=frozenset(
                name
                for name, schema in parameters.get("properties", {}).items()
                if _takes_structure(schema)
            ),
        )

    def pre_parse_json(self, data: dict[str, Any]) -> dict[str, Any]:
        parsed = super().pre_parse_json({k: v for k, v in data.items() if k in self.structured})
        return {k: parsed.get(k, v) if k in self.structured else v for k, v in data.items()}


def _takes_structure(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    if schema.get("type") in ("array", "object"):
        return True
    return any(_takes_structure(option) for option in schema.get("anyOf", ()))


def strip_titles(schema: Any) -> Any:
    """Drop pydantic's generated titles: they repeat the property names and cost context.

    A schema's title is a string; a property *named* title maps to a schema (a dict), so it
    stays.
    """
    if isinstance(schema, dict):
        return {
            key: strip_titles(value)
            for key, value in schema.items()
            if not (key == "title" and isinstance(value, str))
        }
    if isinstance(schema, list):
        return [strip_titles(item) for item in schema]
    return schema


def compact_input(schema: dict[str, Any]) -> dict[str, Any]:
    """Flat input schemas: no titles, and optional means "may be omitted" (not "may be
    null"). Lengths, counts and ranges are checked by the server (its argument model keeps
    them) and documented, not published: they were a quarter of every input schema's bytes
    and tell a model little that the descriptions do not. Unknown arguments are refused by
    the server too."""
    result: dict[str, Any] = _without_keys(strip_titles(schema), _LIMITS)
    properties: dict[str, Any] = result.get("properties", {})
    for name, prop in properties.items():
        options = prop.get("anyOf")
        if prop.get("default", ...) is None and isinstance(options, list):
            kept = [o for o in options if o != {"type": "null"}]
            if len(kept) == 1:
                rest = {k: v for k, v in prop.items() if k not in ("anyOf", "default")}
                properties[name] = {**kept[0], **rest}
    return result


_LIMITS = frozenset(
    {
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
    }
)


def _without_keys(node: Any, keys: frozenset[str]) -> Any:
    """``node`` without the schema keywords ``keys`` and without ``additionalProperties:
    false``, at any depth (a property of such a name stays; a schema of additional
    properties, as a dict's values have, stays too)."""
    if isinstance(node, list):
        return [_without_keys(item, keys) for item in node]
    if not isinstance(node, dict):
        return node
    return {
        key: (
            {name: _without_keys(sub, keys) for name, sub in value.items()}
            if key == "properties" and isinstance(value, dict)
            else _without_keys(value, keys)
        )
        for key, value in node.items()
        if key not in keys and not (key == "additionalProperties" and value is False)
    }


def compact_output(schema: dict[str, Any]) -> dict[str, Any]:
    """Output schemas that keep the types and nullability in fewer bytes: no titles,
    defaults, descriptions, formats or limits (annotations that validate nothing the
    server does not produce anyway), no enums (the same tools' input schemas list the
    values), no ``required`` lists (a model reads the answer, it does not check it), and
    nested models written in place of their ``$ref``. A nullable
    field stays ``anyOf`` with one type per branch: a ``type`` array is shorter but
    clients that map schemas onto a single-type dialect reject it (the Inspector's
    ``--strict`` flags it)."""
    definitions: dict[str, Any] = schema.get("$defs", {})

    def inline(node: Any, depth: int = 0) -> Any:
        if isinstance(node, list):
            return [inline(item, depth) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and depth < 8:
            target = definitions[ref.removeprefix("#/$defs/")]
            rest = {k: v for k, v in node.items() if k != "$ref"}
            return {**inline(target, depth + 1), **inline(rest, depth)}
        result: dict[str, Any] = {}
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                result[key] = {name: inline(sub, depth) for name, sub in value.items()}
            elif key in ("default", "$defs", "enum", "required") or (
                key in _OUTPUT_ANNOTATIONS and isinstance(value, str)
            ):
                continue
            else:
                result[key] = inline(value, depth)
        return result

    compact: dict[str, Any] = _without_keys(inline(schema), _LIMITS)
    return compact


_OUTPUT_ANNOTATIONS = frozenset({"title", "description", "format"})
