"""``memoryd status [--json]``."""

from __future__ import annotations

import argparse
import json
from typing import Any

from memoryd.clock import iso_ms
from memoryd.exitcodes import EXIT_OK
from memoryd.store.home import App
from memoryd.write import agent_edits, edit_review, review
from memoryd.write.snapshot import snapshot


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("status", help="show what memoryd holds and what it spent")
    p.add_argument("--json", action="store_true", dest="as_json", help="machine-readable output")
    p.set_defaults(handler=cmd_status)


def cmd_status(app: App, args: argparse.Namespace) -> int:
    snap = snapshot(app.store, app.settings, app.paths)
    staged = review.pending(app.paths)
    from memoryd.tools.proposed import count  # the memory tools load only for this command

    snap["review"] = {
        "mode": app.settings.review,
        "pending": staged is not None,
        "staged_at": iso_ms(staged.staged_at) if staged else None,
        "proposed_notes": count(app.paths),
    }
    snap["agent_edit"] = agent_edit_snapshot(app)
    if args.as_json:
        print(json.dumps(snap, indent=2, sort_keys=True))
    else:
        print(render(snap))
    return EXIT_OK


def agent_edit_snapshot(app: App) -> dict[str, Any]:
    """A host session's change waiting for the user, and a change held while opencode is away."""
    edit = edit_review.pending(app.paths)
    held = agent_edits.held(app.store, app.paths)
    return {
        "pending": edit is not None,
        "staged_at": iso_ms(edit.staged_at) if edit else None,
        "files": edit.files if edit else {},
        "sessions": [
            {k: w.get(k) for k in ("session_id", "title", "tool", "directory")}
            for w in (edit.writers if edit else [])
        ],
        "held": None
        if held is None
        else {
            "files": held.get("files") or [],
            "since": iso_ms(held.get("since")),
            "error": held.get("error"),
        },
    }


def agent_edit_rows(ae: dict[str, Any]) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    if ae.get("pending"):
        who = "; ".join(
            f"session {s['session_id']} {s['title']!r} ({s['tool']})" for s in ae["sessions"]
        )
        rows.append(
            (
                "agent edit",
                f"{', '.join(sorted(ae['files']))} changed by {who or 'a host session'}; "
                f"staged at {ae['staged_at']}, not live (`memoryd review`)",
            )
        )
    held = ae.get("held")
    if held:
        rows.append(
            (
                "edit held",
                f"{', '.join(held['files'])} changed since {held['since']}; opencode could not be "
                f"asked whether a session made it ({held['error']}): neither adopted nor "
                "discarded, asked again at the next tick",
            )
        )
    return rows


def _n(v: int | float) -> str:
    return f"{v:,}"


def sync_rows(sync: dict[str, Any]) -> list[tuple[str, str]]:
    if not sync.get("configured"):
        return [("sync", "off (set sync_remote to share memory across machines)")]
    others = len(sync["machines"])
    text = f"{sync['remote']} as {sync['machine'] or '(machine id not chosen yet)'}"
    text += f"; last success {sync['last_success'] or 'never'}"
    text += f"; {others} other machine{'s' if others != 1 else ''}"
    rows = [("sync", text)]
    sent, got = sync.get("sent") or {}, sync.get("received") or {}
    if sync.get("last_success"):
        rows.append(
            (
                "sync last",
                f"up {sent.get('added', 0)} new, {sent.get('changed', 0)} changed, "
                f"{sent.get('removed', 0)} removed; down {got.get('sessions', 0)} session(s), "
                f"{got.get('notes', 0)} note(s) from {got.get('machines', 0)} machine(s)"
                + (f"; history re-rooted {sync['rerooted_at']}" if sync.get("rerooted_at") else ""),
            )
        )
    p = sync["pending"]
    waiting = sum(p.get(k, 0) for k in ("added", "changed", "removed"))
    if waiting:
        rows.append(
            (
                "sync waits",
                f"{waiting} file(s) to push ({p.get('added', 0)} new, {p.get('changed', 0)} changed, "
                f"{p.get('removed', 0)} removed)",
            )
        )
    if sync["state"] == "retrying":
        rows.append(
            (
                "sync retry",
                f"{sync['failures']} failed attempt(s); next try {sync['retry_at']}",
            )
        )
    if sync["last_error"]:
        rows.append(("sync error", sync["last_error"]))
    for mid, why in sorted((sync.get("skipped_machines") or {}).items()):
        rows.append(("sync skipped", f"machine {mid}: {why}"))
    return rows


def runner_row(runner: dict[str, Any], per_runner: dict[str, Any]) -> tuple[str, str]:
    """Who ran the model calls (setting, last choice and why) and what each runner spent."""
    text = f"{runner.get('name') or 'not chosen yet'} (setting {runner.get('setting', 'auto')}"
    text += f"; {runner['why']})" if runner.get("why") else ")"
    spent = []
    for name, v in per_runner.items():
        est = f", {_n(v['estimated_tokens'])} estimated" if v.get("estimated_tokens") else ""
        spent.append(f"{name}: {_n(v['tokens'])} tokens in {_n(v['calls'])} calls{est}")
    return "runner", text + (f"; {'; '.join(spent)}" if spent else "")


def host_rows(hosts: dict[str, Any]) -> list[tuple[str, str]]:
    """One row per host whose sessions memoryd reads: seen, extracted, the newest error."""
    rows = []
    for name, h in hosts.items():
        if not h.get("active") and not h.get("extracted"):
            continue  # a client that is not installed here
        text = f"{_n(h['seen'])} sessions seen, {_n(h['extracted'])} extracted"
        if h.get("home"):
            text += f" ({h['home']})"
        if h.get("last_error"):
            text += f"; last error: {h['last_error']}"
        rows.append((name, text))
    return rows


def render(s: dict[str, Any]) -> str:
    host = s["host"]
    where = host["url"] or "private opencode serve (started on demand)"
    ver = f"opencode {host['version']}" if host["version"] else "not contacted yet"
    seen = f", last seen {host['last_seen']}" if host["last_seen"] else ""
    jobs = s["stage1"]["jobs"]
    spent = s["tokens"]["spent"]
    rows = [
        ("host", f"{where} ({ver}{seen})"),
        ("memories", f"{_n(s['stage1']['outputs'])} session memories"),
        ("jobs", ", ".join(f"{_n(jobs[k])} {k}" for k in ("done", "pending", "running", "failed"))),
    ]
    rows += host_rows(s.get("hosts") or {})
    p2 = s["phase2"]
    p2_text = f"{p2['status']}, {_n(p2['consumed_outputs'])} memories consolidated"
    if p2.get("last_consolidation"):
        p2_text += f", last consolidation {p2['last_consolidation']}"
    p2_text += f", next eligible {p2['next_eligible']}"
    if p2["last_error"] and p2["status"] != "done":
        p2_text += f"; last error: {p2['last_error']}"
    rows.append(("phase 2", p2_text))
    mf = s.get("memory_folder") or {}
    if mf.get("removed"):
        shown = ", ".join(mf["removed"][:12]) + (" …" if len(mf["removed"]) > 12 else "")
        rows.append(
            (
                "swept",
                f"{len(mf['removed'])} entries removed from the memory folder {mf['when']} "
                f"({mf['at']}): {shown}",
            )
        )
    rv = s.get("review") or {}
    if rv.get("pending"):
        rows.append(
            ("review", f"a consolidation staged at {rv['staged_at']} waits (`memoryd review`)")
        )
    if rv.get("proposed_notes"):
        rows.append(
            (
                "notes",
                f"{rv['proposed_notes']} note(s) a model proposed wait for you (`memoryd review`)",
            )
        )
    rows += agent_edit_rows(s.get("agent_edit") or {})
    lp = s.get("last_pass")
    if lp:
        p1 = lp["phase1"]
        rows.append(
            (
                "last pass",
                f"{p1['discovered']} seen, {p1['eligible']} eligible, {p1['succeeded']} extracted, "
                f"{p1['failed']} failed",
            )
        )
    else:
        rows.append(("last pass", "never (run `memoryd run --once`)"))
    per = "; ".join(
        f"{phase}: {_n(v['calls'])} calls, {_n(v['input'])} in / {_n(v['output'])} out"
        for phase, v in s["tokens"]["per_phase"].items()
    )
    rows.append(("tokens", f"{_n(spent['total'])} spent" + (f" ({per})" if per else "")))
    rows.append(runner_row(s.get("runner") or {}, s["tokens"].get("per_runner") or {}))
    rows.append(
        (
            "today",
            f"{_n(s['tokens']['today']['total'])} tokens, {_n(s['tokens']['today']['calls'])} calls",
        )
    )
    b = s["budget"]
    left = "unlimited" if b["left_today"] is None else f"{_n(b['left_today'])} tokens left today"
    rows.append(
        (
            "budget",
            f"{left}; {b['calls_last_hour']} calls in the last hour"
            + (
                f" (limit {b['max_model_calls_per_hour']})" if b["max_model_calls_per_hour"] else ""
            ),
        )
    )
    if b["circuits"]:
        rows.append(
            ("circuit", "; ".join(f"{m} paused until {t}" for m, t in b["circuits"].items()))
        )
    if b["waiting"]:
        rows.append(("waiting", b["waiting"]))
    d = s.get("daemon")
    if d:
        ev = d["events"]
        state = "running" if d["running"] else "stopped"
        rows.append(("daemon", f"{state} (pid {d['pid']}), next pass {d['next_pass'] or '-'}"))
        rows.append(
            (
                "events",
                ev["state"]
                + (f" since {ev['since']}" if ev["since"] else "")
                + (
                    f" ({ev['last_error']})"
                    if ev["last_error"] and ev["state"] != "connected"
                    else ""
                ),
            )
        )
    else:
        rows.append(
            ("daemon", "not running (start it with `memoryd run` or `memoryd service install`)")
        )
    rows += sync_rows(s.get("sync") or {})
    if s.get("last_pass_error"):
        rows.append(("last error", s["last_pass_error"]["error"]))
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    errors = s["stage1"]["last_errors"]
    if errors:
        lines.append("recent errors:")
        for e in errors:
            retry = (
                f", retry after {e['retry_at']}"
                if e["retry_at"] and e["status"] != "failed"
                else ""
            )
            lines.append(f"  {e['session_id']} [{e['status']}{retry}]: {e['error']}")
    return "\n".join(lines)
