"""What a remote tool call raises; the engine turns each into a failed receipt."""

from __future__ import annotations

# A remote server's text is untrusted: at most this much of it reaches a receipt.
MAX_REMOTE_TEXT = 500


class RemoteToolError(Exception):
    """The call did not produce a result (see the subclasses)."""


class RemoteToolUnavailable(RemoteToolError):
    """Refused before anything was sent: the tool is missing, changed or unreachable."""


class RemoteToolFailed(RemoteToolError):
    """The server answered with an error (`isError`, or a protocol error)."""


def untrusted_text(text: str) -> str:
    """A server's text, made safe to show: printable, one line, truncated."""
    cleaned = "".join(ch if ch.isprintable() else " " for ch in text).strip()
    if len(cleaned) > MAX_REMOTE_TEXT:
        return cleaned[: MAX_REMOTE_TEXT - 1] + "…"
    return cleaned
