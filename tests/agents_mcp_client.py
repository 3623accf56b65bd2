"""MCP client run as a command agent inside an episode's workspace: starts `envctl mcp`
through the official `mcp` Python SDK (stdio transport) and uses its tools like an
agent would. Exits non-zero (with the failed assertion) on any deviation."""
import asyncio
import os

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

try:  # the SDK renamed its error type in version 2
    from mcp.shared.exceptions import MCPError as McpError
except ImportError:
    from mcp.shared.exceptions import McpError


def g(obj, snake, camel):
    """A field of an SDK result: snake_case in SDK 2, camelCase in SDK 1."""
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel)


async def main():
    params = StdioServerParameters(command="envctl", args=["mcp"], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            init = await s.initialize()
            assert g(init, "server_info", "serverInfo").name == "kernelarena", init
            assert init.capabilities.tools is not None, init
            tools = await s.list_tools()
            names = sorted(t.name for t in tools.tools)
            assert names == ["evaluate", "last_result"], names
            for t in tools.tools:
                assert g(t, "input_schema", "inputSchema")["type"] == "object" and t.description, t
            ev = next(t for t in tools.tools if t.name == "evaluate")
            out = g(ev, "output_schema", "outputSchema")
            assert out and out["type"] == "object" and {"step", "status", "reward", "cases"} <= set(out["required"]), out
            assert "files" in g(ev, "input_schema", "inputSchema")["properties"], ev
            r = await s.call_tool("last_result", {})
            assert not g(r, "is_error", "isError") and "no step" in r.content[0].text, r
            original = open("gelu.c").read()
            with open("gelu.c", "a") as f:
                f.write("\nnot C at all\n")
            r = await s.call_tool("evaluate", {})
            assert not g(r, "is_error", "isError"), r
            assert g(r, "structured_content", "structuredContent")["status"] == "COMPILE_ERROR", g(r, "structured_content", "structuredContent")
            assert g(r, "structured_content", "structuredContent")["step"] == 1 and g(r, "structured_content", "structuredContent")["reward"] == 0
            assert "COMPILE_ERROR" in r.content[0].text
            # bad files arguments: a tool error with the reason, nothing written, no step
            broken = open("gelu.c").read()
            r = await s.call_tool("evaluate", {"files": {"../evil.c": "int x;"}})
            assert g(r, "is_error", "isError") and "not an editable file" in r.content[0].text, r
            r = await s.call_tool("evaluate", {"files": {"gelu.c": "int y;", "other.c": "int z;"}})
            assert g(r, "is_error", "isError") and "other.c is not an editable file" in r.content[0].text, r
            assert open("gelu.c").read() == broken and not os.path.exists("../evil.c")
            # the files argument: written into the workspace, then submitted as step 2
            fixed = original.replace("erf(", "erff(")
            r = await s.call_tool("evaluate", {"files": {"gelu.c": fixed}})
            assert open("gelu.c").read() == fixed
            assert not g(r, "is_error", "isError") and g(r, "structured_content", "structuredContent")["status"] == "OK", r
            assert g(r, "structured_content", "structuredContent")["step"] == 2 and g(r, "structured_content", "structuredContent")["reward"] > 120
            assert g(r, "structured_content", "structuredContent")["cases"] and g(r, "structured_content", "structuredContent")["correct"] is True
            r = await s.call_tool("last_result", {})
            assert g(r, "structured_content", "structuredContent")["step"] == 2 and g(r, "structured_content", "structuredContent")["status"] == "OK"
            try:
                await s.call_tool("no_such_tool", {})
                raise AssertionError("an unknown tool must be an error")
            except McpError as e:
                assert "unknown tool" in str(e), e
            await s.send_ping()
    print("MCP-CLIENT-OK")


asyncio.run(main())
