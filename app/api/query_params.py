"""Query parameters a route does not declare are a 422 naming each, not ignored: a
misspelt filter (`?stauts=failed`) would otherwise answer every row as if it matched."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from app.api.body_hazards import escape_token
from app.service.errors import InvalidRequest, ProblemItem


def _query_names(dependant: Dependant) -> list[str]:
    names = [param.alias for param in dependant.query_params]
    for sub in dependant.dependencies:
        names.extend(_query_names(sub))
    return names


async def refuse_unknown_query(request: Request) -> None:
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    # A walk over a handful of parameters: not worth a cache (routes are unhashable).
    declared = frozenset(_query_names(route.dependant))
    unknown = [name for name in dict.fromkeys(request.query_params.keys()) if name not in declared]
    if unknown:
        raise InvalidRequest(
            "The request is invalid.",
            errors=[
                ProblemItem(f"/{escape_token(name)}", "unknown query parameter") for name in unknown
            ],
        )


# Last among an endpoint's parameters: the caller's key is checked before its query.
KnownQueryOnly = Annotated[None, Depends(refuse_unknown_query)]
