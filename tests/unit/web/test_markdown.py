"""The UI's Markdown renderer: escape first, then a fixed set of tags; hostile text stays text."""

from __future__ import annotations

import re

import pytest

from memoryd.web.markdown import render

ALLOWED = {
    "h1",
    "h2",
    "h3",
    "p",
    "ul",
    "ol",
    "li",
    "pre",
    "code",
    "strong",
    "em",
    "a",
    "br",
    "hr",
    "blockquote",
}


def tags(html: str) -> set[str]:
    return {t.lower() for t in re.findall(r"</?([a-zA-Z0-9]+)", html)}


def test_structure() -> None:
    html = render(
        "# Title\n\nSome **bold** and *it* and `x < y`.\n\n- one\n- two\n\n1. first\n\n"
        "```\n<b>kept</b>\n```\n\n> quoted\n\n---\n"
    )
    assert "<h1>Title</h1>" in html
    assert "<strong>bold</strong>" in html and "<em>it</em>" in html
    assert "<code>x &lt; y</code>" in html
    assert "<ul><li>one</li><li>two</li></ul>" in html and "<ol><li>first</li></ol>" in html
    assert "<pre><code>&lt;b&gt;kept&lt;/b&gt;</code></pre>" in html
    assert "<blockquote>quoted</blockquote>" in html and "<hr>" in html


@pytest.mark.parametrize(
    "hostile",
    [
        '<img src=x onerror="alert(1)">',
        "<script>alert(2)</script>",
        "<svg/onload=alert(3)>",
        "[x](javascript:alert(4))",
        '[x](https://a.example/" onmouseover="alert(5))',
        "[x](data:text/html,<script>alert(6)</script>)",
        "**<iframe src=//evil>**",
        "`</code><script>alert(7)</script>`",
        '<a href="https://evil">click</a>',
        "# <style>body{}</style>",
    ],
)
def test_hostile_input_never_becomes_markup(hostile: str) -> None:
    html = str(render(f"- {hostile}\n\n{hostile}\n"))
    assert tags(html) <= ALLOWED
    for m in re.finditer(r"<a ([^>]*)>", html):
        attrs = m.group(1)
        assert re.fullmatch(r'href="https?://[^"\s]*" rel="noopener noreferrer nofollow"', attrs)
    assert not re.search(r"<[a-z]+[^>]*\son\w+=", html)


def test_links_only_for_http() -> None:
    html = str(render("[docs](https://example.com/x?a=1&b=2) [bad](javascript:alert(1))"))
    assert (
        '<a href="https://example.com/x?a=1&amp;b=2" rel="noopener noreferrer nofollow">docs</a>'
        in html
    )
    assert "[bad](javascript:alert(1))" in html


def test_nul_bytes_and_empty() -> None:
    assert str(render("")) == ""
    assert "\x00" not in str(render("a\x00b **c\x00**"))
