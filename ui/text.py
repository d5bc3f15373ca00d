"""Text from outside the app shown as text, never as Markdown or HTML: a link's query values, a bundle's labels,
errors and spec values, a file's name, an error message.

Streamlit renders Markdown in almost everything it draws (``st.markdown``, captions, alerts, titles, widget
labels and ``help=``, expander and tab labels, page links), so ``[Lesson moved](http://host/phish)`` from a link
would be a link and ``![x](http://host/b.png)`` an image fetched from another host.  Every page passes such text
through :func:`plain` (or :func:`code_span`, for a value shown as code) where it meets Markdown; plotly figures, whose
titles, tick labels and hovers read a few HTML tags, pass through :func:`ui.figures.shown_figure`.  Text the app writes
itself (and a lesson's own body, Markdown on purpose) is not passed here.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["LINK_CHARS", "code_span", "one_line", "plain", "quote", "quoted", "strip_tags"]

LINK_CHARS = 80  # a note quotes this much of a value a link gave (a 10 KB ?run= is said by its start and length)

# The characters that make Markdown out of one line of text (links and images, emphasis, code, headings, HTML,
# tables, strike-through, Streamlit's :red[...] and $math$): a backslash before each shows the character itself
# (an underscore only where it could start or end emphasis: inside a word it is a letter).
# Parentheses mean nothing without the brackets before them and stay as they are ("(run 2 Dec)"); a line's start
# could also make a list ("- x", "1. x", "1) x"): its marker is escaped there.
_MARKDOWN = frozenset("\\`*[]!#<>|~$")
_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")  # "_x_" is emphasis; "num_classes" is not
_LIST_START = re.compile(r"^(\s*)([-+]|\d+[.)])(?=\s|$)")
_WORD_JOINER = "\u2060"  # invisible, breaks what a bare-URL autolinker looks for (an escape does not: remark-gfm)
_AUTOLINK = re.compile(r"(?i)(?<=[a-z0-9])(?=://)|(?<=w)(?=ww\.)|(?=@)")


def one_line(text: object, most: int | None = None) -> str:
    """``text`` on one line: control characters and line breaks as spaces; past ``most`` characters cut, saying
    how long it was.

    >>> one_line("a\\nb\\x00c")
    'a b c'
    >>> one_line("x" * 500, most=8)
    'xxxxxxxx… (500 characters)'
    """
    s = "".join(" " if unicodedata.category(ch) in ("Cc", "Zl", "Zp") else ch for ch in str(text))
    if most is not None and len(s) > most:
        return f"{s[:most]}… ({len(s):,} characters)"
    return s


def plain(text: object, most: int | None = None) -> str:
    """``text`` as Markdown that Streamlit shows letter for letter: one line (:func:`one_line`), each Markdown
    character escaped, bare URLs and e-mail addresses not made links.

    >>> print(plain("[Lesson moved](http://evil/phish) ![i](x.png)").replace("\\u2060", "|"))
    \\[Lesson moved\\](http|://evil/phish) \\!\\[i\\](x.png)
    >>> print(plain("zoo:a[block1] *x* _y_ num_classes"), plain("1. first"), plain("2) second"), plain("- <b>"))
    zoo:a\\[block1\\] \\*x\\* \\_y\\_ num_classes 1\\. first 2\\) second \\- \\<b\\>
    """
    s = _AUTOLINK.sub(_WORD_JOINER, one_line(text, most))
    s = _UNDERSCORE.sub(r"\\_", "".join("\\" + ch if ch in _MARKDOWN else ch for ch in s))
    return _LIST_START.sub(lambda m: m.group(1) + "".join(ch if ch.isdigit() else "\\" + ch for ch in m.group(2)), s)


def quoted(value: object, most: int = LINK_CHARS) -> str:
    """A value from a link as a note quotes it, before escaping: in quotes on one line, cut past ``most``
    characters (a note built from it goes through :func:`plain` where it is shown).

    >>> quoted("deadbeef"), quoted("1" * 5000, most=4), quoted("a\\nb")
    ("'deadbeef'", "'1111'… (5,000 characters)", "'a\\\\nb'")
    """
    s = str(value)
    cut = f"… ({len(s):,} characters)" if len(s) > most else ""
    return one_line(repr(s[:most]) + cut)


def quote(value: object, most: int = LINK_CHARS) -> str:
    """:func:`quoted`, Markdown escaped: a link's value in a note that is shown as it is written.

    >>> print(quote("[x](http://evil)"))
    '\\[x\\](http\u2060://evil)'
    """
    return plain(quoted(value, most))


def code_span(text: object, most: int | None = None) -> str:
    """``text`` as an inline code span (no Markdown inside it is read): fenced with more backticks than it holds.

    >>> code_span("zoo:cnn-digits-s0")
    '`zoo:cnn-digits-s0`'
    >>> code_span("a`](http://x)")
    '``a`](http://x)``'
    """
    s = one_line(text, most)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", s)), default=0) + 1)
    pad = " " if not s.strip() or s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def strip_tags(text: str) -> str:
    """``text`` without plotly's tags, for a plain label (a figure's title on its CSV button).

    >>> strip_tags("CKA<br><span style='font-size:11px'>(0 .. 1)</span>")
    'CKA (0 .. 1)'
    """
    return " ".join(re.sub(r"<[^<>]*>", " ", text).split())
