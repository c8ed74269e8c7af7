"""OpenAPI links, which the products' operations declare (``openapi_extra``): which answer
gives the id that the next call takes, so that a client (and the contract test's stateful
run) can follow an item from one call to the next."""

from __future__ import annotations


def calls(operations: dict[str, str], parameters: dict[str, str]) -> dict:
    """Links named as ``operations`` says (link name -> operationId), each passing the
    same ``parameters`` (parameter name -> runtime expression)."""
    return {name: {"operationId": operation, "parameters": parameters} for name, operation in operations.items()}


def answered(links: dict, *statuses: int) -> dict:
    """An operation's ``openapi_extra`` that gives ``links`` to each of its answers
    ``statuses``."""
    return {"responses": {status: {"links": links} for status in statuses}}
