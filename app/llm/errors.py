"""Errors raised when calling a model.

    LLMError
    ├── LLMConfigurationError    the call cannot be made as configured
    │   └── UnknownProfileError  a profile name that the profiles file does not define
    ├── LLMRequestError          the conversation cannot be expressed in the provider's format
    ├── LLMTransportError        no usable HTTP answer: retries exhausted, or a status
    │                            that is not retried (4xx other than 429, 3xx)
    └── LLMMalformedResponse     a 2xx answer whose body is not the provider's format

Loading the profiles file raises `app.llm.profiles.ProfilesError` instead: it
happens at startup, not per call. No message here ever contains an API key.
"""

from __future__ import annotations


class LLMError(Exception):
    @property
    def summary(self) -> str:
        """What a run's state and audit may say: no URL, no server or driver text
        (those go to the log). The message itself, unless a subclass says less."""
        return str(self)


class LLMConfigurationError(LLMError):
    pass


class UnknownProfileError(LLMConfigurationError):
    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        listed = ", ".join(known) or "none"
        super().__init__(f"unknown model profile {name!r} (defined: {listed})")


class LLMRequestError(LLMError):
    pass


class LLMTransportError(LLMError):
    def __init__(
        self,
        *,
        profile: str,
        url: str,
        attempts: int,
        status: int | None,
        cause: str,
    ) -> None:
        self.profile = profile
        self.url = url
        self.attempts = attempts
        self.status = status
        self.cause = cause
        super().__init__(
            f"model profile {profile!r}: POST {url} failed after {_attempts(attempts)}: {cause}"
        )

    @property
    def summary(self) -> str:
        answer = "no HTTP answer" if self.status is None else f"last answer HTTP {self.status}"
        return (
            f"model profile {self.profile!r}: the request to the model failed after "
            f"{_attempts(self.attempts)} ({answer}; the service log has the cause)"
        )


def _attempts(count: int) -> str:
    return f"{count} attempt" if count == 1 else f"{count} attempts"


class LLMMalformedResponse(LLMError):
    def __init__(self, reason: str, *, profile: str | None = None) -> None:
        self.reason = reason
        self.profile = profile
        where = f"model profile {profile!r}: " if profile else ""
        super().__init__(f"{where}malformed model response: {reason}")
