"""Schemathesis against the API's own OpenAPI document: generated requests (valid and
invalid) to every operation get no 5xx and no answer the document does not describe.
The examples are bounded so the whole run takes a few seconds."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import positive_data_acceptance

from plait.server import create_app

from .conftest import settings as server_settings

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
EXAMPLES = 8  # per operation

app = create_app("memory://", grace=1.0, events_poll=0.05,
                 settings=server_settings(token=None, webhook_secret="fuzz-hook-secret"))
schema = schemathesis.openapi.from_asgi("/openapi.json", app)


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_api_keeps_to_its_openapi_document(case: schemathesis.Case) -> None:
    # positive_data_acceptance is left out: a definition (a YAML string, a JSON object)
    # and a run's input are checked beyond what the document can say, and a valid-looking
    # one that is not is refused with 422 listing its problems
    case.call_and_validate(excluded_checks=[positive_data_acceptance])
