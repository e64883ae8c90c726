"""The ``memoryd ui`` web app: server-rendered pages over the same functions the CLI and MCP use.

Every handler is ``async`` on purpose: the store's SQLite connection belongs to the event loop's
thread (the daemon shares it with its passes), so handlers must not hop to a worker thread.
State changes go through :mod:`memoryd.tools` (notes, forget, mode, search) and
:mod:`memoryd.write.review` (and :mod:`memoryd.write.edit_review` for agent edits); nothing here
re-implements them. Errors those functions raise
become a message on the page; memory content is always escaped (Jinja2 autoescape, and
:mod:`memoryd.web.markdown` for rendered files).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

from jinja2 import Environment, FileSystemLoader
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from memoryd import tools
from memoryd.clock import iso_ms
from memoryd.errors import MemorydError
from memoryd.store.home import App
from memoryd.store.outputs import MODES
from memoryd.tools import proposed
from memoryd.tools.hits import SearchQuery
from memoryd.tuning import UI_SEARCH_RESULTS
from memoryd.web import data
from memoryd.web.markdown import render as markdown
from memoryd.web.security import CSRF_FIELD, Guard, Secrets
from memoryd.write import agent_edits, edit_review, review

HERE = Path(__file__).resolve().parent


async def _form(request: Request) -> dict[str, str]:
    """URL-encoded form fields, last value wins (the guard already bounded the body's size)."""
    fields = parse_qs((await request.body()).decode("utf-8", errors="replace"))
    return {k: v[-1] for k, v in fields.items()}


class UI:
    """Routes and rendering for one :class:`memoryd.store.home.App` and one set of per-start secrets."""

    def __init__(self, app: App, keys: Secrets) -> None:
        self.app = app
        self.keys = keys
        self.env = Environment(
            loader=FileSystemLoader(HERE / "templates"), autoescape=True, auto_reload=False
        )
        self.env.filters["markdown"] = markdown
        self.env.filters["n"] = lambda v: f"{v:,}" if isinstance(v, int | float) else v

    # -- helpers ------------------------------------------------------------------------------

    def page(self, name: str, request: Request, status: int = 200, **ctx: Any) -> HTMLResponse:
        staged = review.pending(self.app.paths)
        edit = edit_review.pending(self.app.paths)
        html = self.env.get_template(name).render(
            csrf=self.keys.csrf,
            csrf_field=CSRF_FIELD,
            path=request.url.path,
            review_pending=(staged is not None)
            + (edit is not None)
            + proposed.count(self.app.paths),
            flash=request.query_params.get("done"),
            **ctx,
        )
        return HTMLResponse(html, status_code=status)

    def error(self, request: Request, message: str, status: int = 400) -> HTMLResponse:
        return self.page("error.html", request, status=status, message=message)

    @staticmethod
    def back(to: str, done: str) -> RedirectResponse:
        return RedirectResponse(f"{to}?{urlencode({'done': done})}", status_code=303)

    # -- pages --------------------------------------------------------------------------------

    async def dashboard(self, request: Request) -> Response:
        a = self.app
        return self.page(
            "dashboard.html",
            request,
            s=data.dashboard(a.store, a.settings, a.paths),
            chart=data.token_chart(a.store),
            review_mode=a.settings.review,
        )

    async def status_json(self, request: Request) -> Response:
        a = self.app
        snap = data.dashboard(a.store, a.settings, a.paths)
        return JSONResponse(json.loads(json.dumps(snap, default=str)))

    async def memory(self, request: Request) -> Response:
        return self.page("memory.html", request, view=data.memory_view(self.app.paths))

    async def memory_file(self, request: Request) -> Response:
        rel = request.query_params.get("path", "")
        file = data.read_memory_file(self.app.paths, rel)
        if file.text is None:
            return self.error(request, file.error or "cannot read that file", 404)
        return self.page("file.html", request, file=file)

    async def timeline(self, request: Request) -> Response:
        rows = [r for r in data.sessions(self.app.store) if r.raw_memory is not None]
        return self.page("timeline.html", request, rows=rows)

    async def sessions(self, request: Request) -> Response:
        return self.page("sessions.html", request, rows=data.sessions(self.app.store), modes=MODES)

    async def set_mode(self, request: Request) -> Response:
        form = await _form(request)
        try:
            result = tools.memory_mode(
                self.app.store, str(form.get("mode", "")), str(form.get("session_id", ""))
            )
        except tools.ToolError as exc:
            return self.error(request, str(exc))
        return self.back("/sessions", result.to_text())

    async def forget_confirm(self, request: Request) -> Response:
        sid = request.query_params.get("session", "")
        row = next((r for r in data.sessions(self.app.store) if r.session_id == sid), None)
        if row is None:
            return self.error(request, f"memoryd knows no session {sid!r}", 404)
        return self.page("forget.html", request, row=row)

    async def forget(self, request: Request) -> Response:
        form = await _form(request)
        if form.get("confirm") != "yes":
            return self.error(request, "forgetting needs the confirmation step")
        try:
            result = tools.memory_forget(
                self.app.store, self.app.paths.memories, session_id=str(form.get("session_id", ""))
            )
        except tools.ToolError as exc:
            return self.error(request, str(exc))
        return self.back("/sessions", result.to_text())

    async def search(self, request: Request) -> Response:
        query = request.query_params.get("q", "").strip()
        result = None
        problem = None
        if query:
            a = self.app
            index = tools.SearchIndex(
                tools.default_index_path(a.paths.data_dir), a.paths.memories, a.store
            )
            try:
                result = tools.memory_search(
                    a.paths.memories,
                    SearchQuery(
                        [query],
                        case_sensitive=False,
                        ranked=True,
                        max_results=UI_SEARCH_RESULTS,
                        context_lines=1,
                    ),
                    index=index,
                )
            except (tools.ToolError, MemorydError) as exc:
                problem = str(exc)
            finally:
                index.close()
        return self.page("search.html", request, q=query, result=result, problem=problem)

    async def notes(self, request: Request) -> Response:
        view = data.memory_view(self.app.paths)
        return self.page("notes.html", request, notes=view.notes, note_name=data.note_name)

    async def add_note(self, request: Request) -> Response:
        form = await _form(request)
        title = str(form.get("title") or "").strip() or None
        a = self.app
        try:
            result = tools.memory_add_note(
                a.paths.memories, str(form.get("text", "")), title, clock=a.clock, store=a.store
            )
        except tools.ToolError as exc:
            return self.error(request, str(exc))
        return self.back("/notes", result.to_text())

    async def delete_note(self, request: Request) -> Response:
        form = await _form(request)
        try:
            result = tools.memory_forget(
                self.app.store, self.app.paths.memories, note=str(form.get("note", ""))
            )
        except tools.ToolError as exc:
            return self.error(request, str(exc))
        return self.back("/notes", result.to_text())

    async def review_page(self, request: Request) -> Response:
        paths = self.app.paths
        staged = review.pending(paths)
        return self.page(
            "review.html",
            request,
            staged=staged,
            staged_at=iso_ms(staged.staged_at) if staged else None,
            diff=review.diff_text(paths).splitlines() if staged else [],
            history=[{**e, "at": iso_ms(e.get("at"))} for e in review.history(self.app.store)],
            review_mode=self.app.settings.review,
            proposals=[proposed.describe(p) for p in proposed.waiting(paths)],
            **self._edit_context(),
        )

    def _edit_context(self) -> dict[str, Any]:
        """The agent edit waiting for review (what memoryd saw, the diff) and a held change."""
        paths = self.app.paths
        edit = edit_review.pending(paths)
        writers = [{**w, "at": iso_ms(w.get("at"))} for w in (edit.writers if edit else [])]
        return {
            "edit": edit,
            "edit_staged_at": iso_ms(edit.staged_at) if edit else None,
            "edit_writers": writers,
            "edit_diff": edit_review.diff_text(paths, edit).splitlines() if edit else [],
            "edit_held": agent_edits.held(self.app.store, paths),
        }

    async def review_edit_accept(self, request: Request) -> Response:
        a = self.app
        try:
            edit_review.accept(a.store, a.settings, a.paths)
        except MemorydError as exc:
            return self.error(request, str(exc), 409)
        return self.back("/review", "accepted: the agent edit is live")

    async def review_edit_reject(self, request: Request) -> Response:
        form = await _form(request)
        try:
            edit_review.reject(self.app.store, self.app.paths, str(form.get("reason") or ""))
        except MemorydError as exc:
            return self.error(request, str(exc), 409)
        return self.back("/review", "rejected: the agent edit was discarded")

    async def review_accept(self, request: Request) -> Response:
        a = self.app
        try:
            review.accept(a.store, a.settings, a.paths)
        except MemorydError as exc:
            return self.error(request, str(exc), 409)
        return self.back("/review", "accepted: the staged memory is live")

    async def review_reject(self, request: Request) -> Response:
        form = await _form(request)
        try:
            review.reject(self.app.store, self.app.paths, str(form.get("reason") or ""))
        except MemorydError as exc:
            return self.error(request, str(exc), 409)
        return self.back("/review", "rejected: the live memory stays")

    async def note_accept(self, request: Request) -> Response:
        form = await _form(request)
        a = self.app
        try:
            note = proposed.accept(a.paths, a.store, str(form.get("id", "")), a.clock)
        except MemorydError as exc:
            return self.error(request, str(exc), 409)
        return self.back("/review", f"accepted: {note.path} is a note now")

    async def note_drop(self, request: Request) -> Response:
        form = await _form(request)
        try:
            gone = proposed.drop(self.app.paths, str(form.get("id", "")))
        except MemorydError as exc:
            return self.error(request, str(exc), 409)
        return self.back("/review", f"dropped proposed note {gone}")

    # -- app ----------------------------------------------------------------------------------

    def routes(self) -> list[Route | Mount]:
        return [
            Route("/", self.dashboard),
            Route("/api/status", self.status_json),
            Route("/memory", self.memory),
            Route("/memory/file", self.memory_file),
            Route("/timeline", self.timeline),
            Route("/sessions", self.sessions),
            Route("/sessions/mode", self.set_mode, methods=["POST"]),
            Route("/sessions/forget", self.forget_confirm),
            Route("/sessions/forget", self.forget, methods=["POST"]),
            Route("/search", self.search),
            Route("/notes", self.notes),
            Route("/notes/add", self.add_note, methods=["POST"]),
            Route("/notes/delete", self.delete_note, methods=["POST"]),
            Route("/review", self.review_page),
            Route("/review/accept", self.review_accept, methods=["POST"]),
            Route("/review/reject", self.review_reject, methods=["POST"]),
            Route("/review/notes/accept", self.note_accept, methods=["POST"]),
            Route("/review/notes/drop", self.note_drop, methods=["POST"]),
            Route("/review/edit/accept", self.review_edit_accept, methods=["POST"]),
            Route("/review/edit/reject", self.review_edit_reject, methods=["POST"]),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ]


def create_app(app: App, keys: Secrets) -> Guard:
    """The guarded ASGI app (every request passes :class:`memoryd.web.security.Guard` first)."""
    ui = UI(app, keys)
    return Guard(Starlette(routes=ui.routes()), keys)
