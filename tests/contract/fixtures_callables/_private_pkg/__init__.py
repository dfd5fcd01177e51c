from __future__ import annotations


def hidden_tool(text: str) -> str:
    return text
