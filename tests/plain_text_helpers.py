"""What the app tests read off a page to check that outside text is shown as text: every string Streamlit renders
as Markdown (:func:`markdown_texts`) and what in one would be a link to another host or an image
(:data:`LINK_OR_IMAGE`)."""

from __future__ import annotations

import re

# Where Streamlit reads Markdown: element bodies (markdown, captions, alerts, titles), widget labels and help,
# expander and tab labels, progress texts, radio options; not code, text, widget values or a chart's JSON.
MARKDOWN_FIELDS = {"body", "label", "help", "text"}
NOT_MARKDOWN = {"code", "text", "json"}  # st.code, st.text, st.json: shown as they are
# a link to another host (a scheme or //), any image, raw HTML, or a bare URL a GFM autolinker would make a link
LINK_OR_IMAGE = re.compile(r"(?<!\\)\]\s*\(\s*<?\s*(?:[a-z][a-z0-9+.-]*:|//)|(?<!\\)!\[|(?<!\\)<(?:img|a)\b"
                           r"|https?://evil|www\.evil", re.IGNORECASE)
CODE_SPAN = re.compile(r"(?<![\\`])(`+)(?!`).*?(?<!`)\1(?!`)")  # shown letter for letter: nothing in it is a link


def markdown_texts(at) -> list[str]:
    """Every string of the page that Streamlit renders as Markdown, its code spans left out."""
    out = []

    def walk(msg, node_type: str) -> None:
        for field, value in msg.ListFields():
            repeated = not isinstance(value, (str, bytes)) and not hasattr(value, "ListFields") and hasattr(
                value, "__len__")
            for v in value if repeated else [value]:
                if hasattr(v, "ListFields"):
                    walk(v, node_type)
                elif (isinstance(v, str) and node_type not in NOT_MARKDOWN
                      and (field.name in MARKDOWN_FIELDS or (node_type, field.name) == ("radio", "options"))):
                    out.append(CODE_SPAN.sub("", v))

    for node in at._tree:
        proto = getattr(node, "proto", None)
        if proto is not None and hasattr(proto, "ListFields"):
            walk(proto, getattr(node, "type", ""))
    return out
