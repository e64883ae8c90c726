"""A small Markdown renderer for memory files, safe for hostile input.

Memory content comes from transcripts and model answers, so it is untrusted. The rule here is
*escape first, then decorate*: every piece of source text goes through :func:`html.escape`
(quotes included) before any tag is added, and the only tags ever emitted are the fixed set
below, built by this module. Raw HTML in the source therefore always shows as text. Links are
kept only for ``http(s)`` URLs and open with ``rel="noopener noreferrer nofollow"``; anything
else (``javascript:``, ``data:``) stays plain text.

Supported: ATX headings, paragraphs, ``-``/``*``/``+`` and numbered lists (one level), fenced
code blocks, blockquotes, horizontal rules, and inline code, bold, italic and links.
"""

from __future__ import annotations

import html
import re

from markupsafe import Markup

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^\s{0,3}[-*+]\s+(.*)$")
_NUMBERED = re.compile(r"^\s{0,3}\d{1,9}[.)]\s+(.*)$")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_QUOTE = re.compile(r"^\s{0,3}&gt;\s?(.*)$")
# Applied to already-escaped text: none of these can produce a quote or an angle bracket.
_CODE_SPAN = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_ITALIC = re.compile(r"(?<![\w*])\*(?=\S)([^*]+?)(?<=\S)\*(?![\w*])")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^\s()]+)\)")
_PLACEHOLDER = "\x00{}\x00"


def _inline(escaped: str) -> str:
    """Decorate one escaped line; code spans are cut out first so nothing inside them changes."""
    codes: list[str] = []

    def keep(m: re.Match[str]) -> str:
        codes.append(f"<code>{m.group(1)}</code>")
        return _PLACEHOLDER.format(len(codes) - 1)

    text = _CODE_SPAN.sub(keep, escaped)
    text = _LINK.sub(
        lambda m: f'<a href="{m.group(2)}" rel="noopener noreferrer nofollow">{m.group(1)}</a>',
        text,
    )
    text = _BOLD.sub(r"<strong>\1</strong>", text)
    text = _ITALIC.sub(r"<em>\1</em>", text)
    return re.sub("\x00(\\d+)\x00", lambda m: codes[int(m.group(1))], text)


def render(source: str) -> Markup:
    """HTML for ``source``; safe to put in a page as is (it is a :class:`Markup`)."""
    text = source.replace("\x00", "\ufffd")
    lines = html.escape(text, quote=True).splitlines()
    out: list[str] = []
    para: list[str] = []
    items: list[str] = []
    list_tag = ""

    def flush_para() -> None:
        if para:
            out.append("<p>" + "<br>\n".join(_inline(p) for p in para) + "</p>")
            para.clear()

    def flush_list() -> None:
        nonlocal list_tag
        if items:
            out.append(f"<{list_tag}>" + "".join(f"<li>{i}</li>" for i in items) + f"</{list_tag}>")
            items.clear()
        list_tag = ""

    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            flush_para()
            flush_list()
            marker = fence.group(1)
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].lstrip().startswith(marker):
                body.append(lines[i])
                i += 1
            out.append("<pre><code>" + "\n".join(body) + "</code></pre>")
            i += 1
            continue
        if not line.strip():
            flush_para()
            flush_list()
        elif m := _HEADING.match(line):
            flush_para()
            flush_list()
            level = len(m.group(1))
            out.append(f"<h{level}>{_inline(m.group(2))}</h{level}>")
        elif _RULE.match(line):
            flush_para()
            flush_list()
            out.append("<hr>")
        elif (m := _BULLET.match(line)) or (n := _NUMBERED.match(line)):
            flush_para()
            tag = "ul" if m else "ol"
            if list_tag and list_tag != tag:
                flush_list()
            list_tag = tag
            items.append(_inline((m or n).group(1)))  # type: ignore[union-attr]
        elif m := _QUOTE.match(line):
            flush_para()
            flush_list()
            quoted = [m.group(1)]
            while i + 1 < len(lines) and (q := _QUOTE.match(lines[i + 1])):
                quoted.append(q.group(1))
                i += 1
            out.append("<blockquote>" + "<br>\n".join(_inline(q) for q in quoted) + "</blockquote>")
        elif items and line.startswith("  "):
            items[-1] += " " + _inline(line.strip())
        else:
            flush_list()
            para.append(line)
        i += 1
    flush_para()
    flush_list()
    return Markup("\n".join(out))
