"""The service's expected failures: one tree, each class with its status, type and title."""

from __future__ import annotations

import importlib
import pkgutil
import re
from http import HTTPStatus

import pytest

import app.service
from app.engine.preflight import PlanProblem
from app.service import errors
from app.service.errors import (
    DATABASE_UNAVAILABLE,
    PROBLEM_TYPE,
    ROUTER_UNAVAILABLE,
    PlanRejected,
    RouterUnavailable,
    ServiceError,
    StorageUnavailable,
)


def every_subclass(root: type[ServiceError]) -> list[type[ServiceError]]:
    found: list[type[ServiceError]] = []
    waiting = list(root.__subclasses__())
    while waiting:
        cls = waiting.pop()
        if cls not in found:
            found.append(cls)
            waiting.extend(cls.__subclasses__())
    return found


def service_errors() -> list[type[ServiceError]]:
    """Every ServiceError class defined by a module of `app.service`, each module imported."""
    for module in pkgutil.walk_packages(app.service.__path__, "app.service."):
        importlib.import_module(module.name)
    return [cls for cls in every_subclass(ServiceError) if cls.__module__.startswith("app.service")]


def test_the_service_holds_its_errors_in_one_module() -> None:
    classes = service_errors()

    assert len(classes) >= 20
    assert {cls.__module__ for cls in classes} == {"app.service.errors"}


@pytest.mark.parametrize("cls", service_errors(), ids=lambda cls: cls.__name__)
def test_every_error_carries_its_status_type_and_title(cls: type[ServiceError]) -> None:
    assert isinstance(cls.status, int)
    assert 400 <= cls.status < 500 or cls.status == 503  # never a 500
    assert cls.type.startswith(PROBLEM_TYPE)
    assert cls.type[len(PROBLEM_TYPE) :].replace("-", "").isalpha()
    assert cls.title == HTTPStatus(cls.status).phrase


@pytest.mark.parametrize("cls", service_errors(), ids=lambda cls: cls.__name__)
def test_the_module_docstring_draws_every_error_in_the_tree(cls: type[ServiceError]) -> None:
    assert errors.__doc__ is not None
    (line,) = [line for line in errors.__doc__.splitlines() if f"── {cls.__name__} " in line]
    # A status drawn is the class's; a type drawn is its type.
    assert re.findall(r"\b[45]\d\d\b", line) in ([], [str(cls.status)])
    drawn_type = re.search(r"\d{3}\s+([a-z-]+)", line)
    assert drawn_type is None or PROBLEM_TYPE + drawn_type.group(1) == cls.type


def test_a_storage_failure_tells_its_cause_to_the_log_alone() -> None:
    error = StorageUnavailable("the run could not be read: (psycopg) 10.0.0.7:5432 refused")

    assert error.detail == DATABASE_UNAVAILABLE
    assert "10.0.0.7" in str(error)
    assert error.retry_after_s == 5


def test_a_router_that_failed_closed_names_its_configuration_to_the_log_alone() -> None:
    error = RouterUnavailable(["/etc/toolloop/profiles.yaml: missing"])

    assert error.detail == ROUTER_UNAVAILABLE
    assert "profiles.yaml" in str(error)
    assert error.retry_after_s == 60


def test_a_rejected_plan_names_every_problem() -> None:
    error = PlanRejected([PlanProblem("/calls/0/tool", "unknown"), PlanProblem("", "empty")])

    assert error.status == 422
    assert [(item.pointer, item.message) for item in error.errors] == [
        ("/calls/0/tool", "unknown"),
        ("", "empty"),
    ]
    assert error.detail == "The plan was rejected; nothing ran."
