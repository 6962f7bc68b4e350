"""Drives `cairn mcp serve` with the official MCP Python SDK client.

Usage: client.py SERVER_COMMAND [ARGS...]   (CAIRN_HOME and the workspace come from the
command and the environment). Prints one JSON object with what it saw.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


def text_of(result):
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def main() -> None:
    # The SDK passes only a default environment to the server: hand CAIRN_HOME on.
    env = {k: os.environ[k] for k in ("CAIRN_HOME",) if k in os.environ}
    params = StdioServerParameters(command=sys.argv[1], args=sys.argv[2:], env=env)
    seen = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            seen["protocol_version"] = init.protocol_version
            seen["server"] = init.server_info.name
            tools = await session.list_tools()
            seen["tools"] = [t.name for t in tools.tools]
            seen["schemas_are_objects"] = all(t.input_schema.get("type") == "object" for t in tools.tools)
            calls = [
                ("read_file", {"path": "notes.txt"}),
                ("edit_file", {"path": "unread.txt", "old_string": "old", "new_string": "new"}),
                ("edit_file", {"path": "notes.txt", "old_string": "second", "new_string": "2nd"}),
                ("shell", {"command": "echo hello from the shell"}),
                ("no_such_tool", {}),
            ]
            seen["calls"] = []
            for name, args in calls:
                try:
                    r = await session.call_tool(name, args)
                    seen["calls"].append({"tool": name, "is_error": bool(r.is_error), "text": text_of(r)})
                except Exception as e:  # an MCP error response
                    seen["calls"].append({"tool": name, "error": str(e)})
    print(json.dumps(seen))


asyncio.run(main())
