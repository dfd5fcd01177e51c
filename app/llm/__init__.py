"""Model profiles and httpx adapters for the router (OpenAI-compatible chat
completions and the Anthropic messages API)."""

from app.llm.client import LLMClient
from app.llm.errors import (
    LLMConfigurationError,
    LLMError,
    LLMMalformedResponse,
    LLMRequestError,
    LLMTransportError,
    UnknownProfileError,
)
from app.llm.messages import Message, ModelReply, ToolCall, ToolDefinition, Usage
from app.llm.profiles import ModelProfile, Profiles, ProfilesError, load_profiles

__all__ = [
    "LLMClient",
    "LLMConfigurationError",
    "LLMError",
    "LLMMalformedResponse",
    "LLMRequestError",
    "LLMTransportError",
    "Message",
    "ModelProfile",
    "ModelReply",
    "Profiles",
    "ProfilesError",
    "ToolCall",
    "ToolDefinition",
    "UnknownProfileError",
    "Usage",
    "load_profiles",
]
