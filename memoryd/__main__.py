import gc
import sys

if sys.argv[1:2] == ["tool"]:  # the shim's per-call path: skip loading the full CLI
    from memoryd.toolcall import main as tool_main

    raise SystemExit(tool_main(sys.argv[2:]))

if sys.argv[1:2] == ["runner-files"]:  # a client CLI's consolidation run starts this itself
    from memoryd.runner.files_mcp import main as files_main

    raise SystemExit(files_main(sys.argv[2:]))

if sys.argv[1:] == ["mcp"]:  # answer the MCP handshake before the SDK has finished importing
    from memoryd.mcp_handshake import main as mcp_main

    raise SystemExit(mcp_main(sys.argv[2:]))

if sys.argv[1:2] == ["hook"]:  # a client's hook: print the memory block, never fail the turn
    from memoryd.read.hook import main as hook_main

    raise SystemExit(hook_main(sys.argv[2:]))

# The CLI's imports build thousands of objects that live as long as the process and no garbage:
# no collection runs while they load, and once in they are frozen, so that no full collection of
# a pass walks them again. (Here, not in main(): a caller of main() keeps its own collector.)
gc.disable()
from memoryd.cli import main  # noqa: E402

gc.freeze()
gc.enable()
raise SystemExit(main())
