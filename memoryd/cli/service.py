"""``memoryd service {install,uninstall,status}``: run the daemon under systemd (user) or launchd.

Writing the file is the part memoryd owns; enabling it needs the service manager. When that does
not answer (a container without a user bus, an ssh session without a GUI domain) the command
still succeeds and prints the exact commands to run by hand.
"""

from __future__ import annotations

import argparse
import shlex
from typing import TYPE_CHECKING

from memoryd.exitcodes import EXIT_OK
from memoryd.store.home import App

if TYPE_CHECKING:  # loaded by these commands only, never in the daemon (plistlib pulls in xml)
    from memoryd.runtime.manager import Report, Service, Status

ACTION_TEXT = {
    "create": "created",
    "update": "updated",
    "unchanged": "unchanged",
    "replace": "replaced (it was changed by you; --force)",
    "keep-modified": "kept",
    "remove": "removed",
    "absent": "not installed",
}
DRY_TEXT = {
    "create": "would create",
    "update": "would update",
    "replace": "would replace",
    "remove": "would remove",
}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "service", help="run the memoryd daemon as a user service (systemd or launchd)"
    )
    actions = p.add_subparsers(dest="service_action", metavar="ACTION", required=True)
    for name, help_text, handler in (
        ("install", "write the service file, then enable and start it", cmd_install),
        (
            "uninstall",
            "stop and disable the service and remove the file memoryd wrote",
            cmd_uninstall,
        ),
        ("status", "is the service installed, enabled and running", cmd_status),
    ):
        a = actions.add_parser(name, help=help_text)
        a.add_argument(
            "--platform",
            choices=["systemd", "launchd"],
            help="default: systemd on Linux, launchd on macOS",
        )
        if name != "status":
            a.add_argument(
                "--dry-run", action="store_true", help="print the plan and the file, change nothing"
            )
            a.add_argument(
                "--force",
                action="store_true",
                help="also replace/remove a service file you changed",
            )
        a.set_defaults(handler=handler)


def _service(app: App, args: argparse.Namespace) -> Service:
    from memoryd.runtime.manager import Service

    return Service(args.platform, paths=app.paths)


def cmd_install(app: App, args: argparse.Namespace) -> int:
    report = _service(app, args).install(force=args.force, dry_run=args.dry_run)
    _print_report(report)
    return 1 if report.manager == "failed" else 0


def cmd_uninstall(app: App, args: argparse.Namespace) -> int:
    report = _service(app, args).uninstall(force=args.force, dry_run=args.dry_run)
    _print_report(report)
    return 1 if report.manager == "failed" else 0


def cmd_status(app: App, args: argparse.Namespace) -> int:
    for line in status_lines(_service(app, args).status()):
        print(line)
    return EXIT_OK


def report_lines(report: Report) -> list[str]:
    """Human-readable lines for an install/uninstall report (also used by tests)."""
    lines = [f"platform: {report.platform}"]
    if report.dry_run:
        verb = DRY_TEXT.get(report.action, ACTION_TEXT[report.action])
        lines.append(f"{verb}: {report.path}")
        if report.operation == "install" and report.action in ("create", "update", "replace"):
            lines += [
                f"--- {report.path}",
                report.content.decode("utf-8", "replace").rstrip("\n"),
                "---",
            ]
        if report.planned:
            lines.append("would run:")
            lines += [f"  {shlex.join(c.argv)}" for c in report.planned]
        return lines + [f"note: {n}" for n in report.notes]
    if report.action == "keep-modified":
        verb = "replaces" if report.operation == "install" else "removes"
        lines.append(f"{report.path}: kept, it changed since memoryd wrote it (--force {verb} it)")
    else:
        lines.append(f"{ACTION_TEXT[report.action]}: {report.path}")
    for ran in report.ran:
        mark = "ok" if ran.result.returncode == 0 else f"exit {ran.result.returncode}"
        lines.append(f"ran: {shlex.join(ran.command.argv)} ({mark})")
    if report.manager == "ok" and report.operation == "install":
        lines.append(
            f"{_name(report)} is enabled and starting; check with `memoryd service status`"
        )
    elif report.manager == "ok" and report.action != "absent":
        lines.append(f"{_name(report)} is stopped and disabled")
    elif report.manager == "failed":
        lines.append(f"error: {report.detail}")
    elif report.manager == "unavailable":
        lines.append(f"the service manager did not answer: {report.detail}")
    if report.manual:
        lines.append(
            "then run by hand:"
            if report.manager == "failed"
            else "run these once a user service manager answers:"
        )
        lines += [f"  {cmd}" for cmd in report.manual]
        if report.operation == "install" and report.manager == "unavailable":
            lines.append("or run the daemon in the foreground: memoryd run")
    return lines + [f"note: {n}" for n in report.notes]


def status_lines(st: Status) -> list[str]:
    file_text = {
        "ours": "installed by memoryd",
        "modified": "present, changed since memoryd wrote it",
        "absent": "not installed",
    }[st.file]
    lines = [f"platform: {st.platform}", f"file:     {st.path} ({file_text})"]
    if st.manager == "unavailable":
        lines.append(f"manager:  unavailable: {st.detail}")
        return lines
    s = st.state
    if st.platform == "systemd":
        if s.get("LoadState") == "not-found":
            from memoryd.runtime.servicefile import UNIT

            lines.append(
                f"manager:  {UNIT} is not known to systemd (run `memoryd service install`)"
            )
            return lines
        state = f"{s.get('ActiveState', '?')} ({s.get('SubState', '?')}), {s.get('UnitFileState') or 'not enabled'}"
        if s.get("MainPID", "0") != "0":
            state += f", pid {s['MainPID']}"
        if s.get("NRestarts", "0") not in ("0", ""):
            state += f", restarted {s['NRestarts']} times"
        if s.get("Result", "success") not in ("success", ""):
            state += f", last result: {s['Result']}"
        lines.append(f"state:    {state}")
        if s.get("StatusText"):
            lines.append(f"daemon:   {s['StatusText']}")
        return lines
    if s.get("loaded") != "yes":
        lines.append("state:    not loaded in launchd")
        return lines
    state = s.get("state", "loaded")
    if "pid" in s:
        state += f", pid {s['pid']}"
    if "last exit code" in s:
        state += f", last exit: {s['last exit code']}"
    lines.append(f"state:    {state}")
    return lines


def _name(report: Report) -> str:
    from memoryd.runtime.servicefile import UNIT

    return UNIT if report.platform == "systemd" else "the launchd agent"


def _print_report(report: Report) -> None:
    for line in report_lines(report):
        print(line)
