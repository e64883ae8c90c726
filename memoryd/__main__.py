import sys

if sys.argv[1:2] == ["tool"]:  # the shim's per-call path: skip loading the full CLI
    from memoryd.toolcall import main as tool_main

    raise SystemExit(tool_main(sys.argv[2:]))

from memoryd.cli import main

raise SystemExit(main())
