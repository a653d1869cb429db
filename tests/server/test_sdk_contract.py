"""What workq relies on in the MCP SDK beyond its documented decorators, each pinned here
so that an SDK upgrade that changes one fails by name rather than somewhere downstream.

- ``MCPServer.call_tool(name, arguments, context)``: WorkqServer overrides it (unknown
  tools and arguments, the opening turn, failures worded per contract).
- ``MCPServer._lowlevel_server.run(read, write, options)`` and
  ``create_initialization_options()``: stdio.serve runs the SDK's own loop on wrapped
  streams (``run_stdio_async`` takes no streams); the streams give ``receive``/``send``.
- ``FuncMetadata``: its fields, and ``pre_parse_json`` decoding JSON text for every
  parameter not typed plain ``str`` (registry.TextStaysText narrows that to lists and
  objects).
- ``Tool``: built by ``Tool.from_function``, its fields copied into each definition.
- ``Annotated[CallToolResult, Model]``: Model's schema is the output schema, and a
  returned CallToolResult passes through with its own text.
- ``streamable_http_app(host=, transport_security=, json_response=)``: http.py turns the
  SDK's Host check off (bind.py's own check is stricter) and answers each request as one
  JSON body.
"""

from __future__ import annotations

import inspect
from typing import Annotated, Any

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata, func_metadata
from mcp.server.stdio import stdio_server
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel

from workq.server.registry import TextStaysText, compact_input


def _parameters(function: object) -> list[str]:
    return list(inspect.signature(function).parameters)  # type: ignore[arg-type]


def test_the_methods_workq_overrides_or_calls_keep_their_shape() -> None:
    assert _parameters(MCPServer.call_tool)[:4] == ["self", "name", "arguments", "context"]
    assert _parameters(MCPServer.streamable_http_app)[:1] == ["self"]
    assert {"host", "transport_security", "json_response"} <= set(
        _parameters(MCPServer.streamable_http_app)
    )
    lowlevel = MCPServer("probe")._lowlevel_server
    assert _parameters(lowlevel.run)[:3] == [
        "read_stream",
        "write_stream",
        "initialization_options",
    ]
    assert callable(lowlevel.create_initialization_options)
    assert inspect.isasyncgenfunction(inspect.unwrap(stdio_server))


def _text_or_list(note: str | None = None, tags: list[str] | None = None) -> str:
    return f"{note!r} {tags!r}"


def test_the_sdk_still_decodes_text_arguments_and_workq_still_stops_it() -> None:
    plain = func_metadata(_text_or_list)
    assert plain.pre_parse_json({"note": "null", "tags": '["a"]'}) == {"note": None, "tags": ["a"]}
    ours = TextStaysText.of(plain, compact_input(plain.arg_model.model_json_schema()))
    assert ours.pre_parse_json({"note": "null", "tags": '["a"]'}) == {"note": "null", "tags": ["a"]}
    assert set(FuncMetadata.model_fields) <= set(type(ours).model_fields)


class _Answer(BaseModel):
    number: int


def _answer() -> Annotated[CallToolResult, _Answer]:
    return CallToolResult(
        content=[TextContent(type="text", text="Claimed issue #7")],
        structured_content={"number": 7},
    )


@pytest.mark.anyio
async def test_a_chosen_text_with_typed_structured_content_passes_through() -> None:
    tool = Tool.from_function(_answer)
    assert {"parameters", "fn_metadata", "annotations", "description", "name"} <= set(
        Tool.model_fields
    )
    assert tool.fn_metadata.output_schema is not None
    assert tool.fn_metadata.output_schema["properties"] == {
        "number": {"title": "Number", "type": "integer"}
    }
    server = MCPServer("probe", tools=[tool])
    async with Client(server) as client:
        result = await client.call_tool("_answer", {})
    assert result.content[0].type == "text" and result.content[0].text == "Claimed issue #7"
    assert result.structured_content == {"number": 7}


@pytest.mark.anyio
async def test_an_overridden_call_tool_answers_every_call() -> None:
    class Probe(MCPServer[None]):
        async def call_tool(
            self, name: str, arguments: dict[str, Any], context: Any = None
        ) -> CallToolResult:
            return CallToolResult(content=[TextContent(type="text", text=f"seen {name}")])

    async with Client(Probe("probe"), mode="legacy") as client:
        result = await client.call_tool("anything", {})
    assert result.content[0].type == "text" and result.content[0].text == "seen anything"
