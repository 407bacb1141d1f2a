"""The ``httpx2.Auth`` of wrap's HTTP client (docs/auth.md, "What wrap does with a login").

Each request gets the stored access token (renewed first when it expires); a 401, or a 403
``insufficient_scope``, goes to the :class:`~assay.auth.authorizer.Authorizer`, which answers
with a token to send the request once more with, or raises
:class:`~assay.auth.lines.NeedsLogin`. A request refused again after that is a NeedsLogin too.
Only the public ``httpx2.Auth`` interface is used: ``async_auth_flow`` as an async generator.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

import httpx2

from assay.auth.authorizer import Authorizer
from assay.auth.challenge import Refusal, refusal
from assay.auth.lines import NeedsLogin

__all__ = ["WrapAuth"]


def _refused(response: httpx2.Response) -> Refusal | None:
    return refusal(response.status_code, response.headers.get_list("www-authenticate"))


class WrapAuth(httpx2.Auth):
    def __init__(self, authorizer: Authorizer) -> None:
        self.authorizer = authorizer

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        token = await self.authorizer.token()
        if token is not None:
            request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        first = _refused(response)
        if first is None:
            return
        token = await self.authorizer.answer(first, token)
        request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        again = _refused(response)
        if again is None:
            return
        url = self.authorizer.shown
        if again.step_up:
            raise NeedsLogin(f"{url} asks for more scope ({again.scope or 'unnamed'}) than a new login got")
        raise NeedsLogin(f"{url} refused the new token too (HTTP 401); run: assay mcp auth login {url}")
