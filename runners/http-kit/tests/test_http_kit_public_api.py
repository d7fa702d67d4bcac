"""The kit's public surface is curated: this pin changes only on purpose."""

from __future__ import annotations

import agentrunner_http_kit
import agentrunner_http_kit.testing


def test_the_kit_exports_exactly_its_curated_names() -> None:
    assert sorted(agentrunner_http_kit.__all__) == sorted(
        [
            "guarded",
            "HttpSession",
            "HttpStream",
            "RunDeadline",
            "effective_timeout",
            "MAX_BODY_BYTES",
            "ConfigReader",
            "form_field",
            "user_tag",
            "adapter_params",
            "ThinkFilter",
            "ErrorKind",
            "PlatformError",
            "status_error",
            "transport_error",
            "BODY_PREVIEW_CHARS",
            "SecretRedactor",
            "MASK",
            "SECRET_HEADER_NAMES",
            "ReplyText",
            "CumulativeText",
            "JsonObjectStream",
            "ExternalIds",
            "MediaInput",
            "MediaFile",
            "MediaKind",
            "MAX_MEDIA_BYTES",
            "media_inputs",
            "read_media",
            "upload_media",
        ]
    )
    for name in agentrunner_http_kit.__all__:
        assert hasattr(agentrunner_http_kit, name), name


def test_the_testing_module_exports_its_helpers() -> None:
    assert sorted(agentrunner_http_kit.testing.__all__) == sorted(
        [
            "FakePlatform",
            "FakeResponse",
            "Handler",
            "fake_platform_in_thread",
            "HostHarness",
            "MigratedAgent",
            "migrate_legacy",
            "RecordedFile",
            "RecordedForm",
            "RecordedRequest",
            "RunReply",
            "run_context",
            "sse_frame",
        ]
    )
