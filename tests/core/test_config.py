from __future__ import annotations

import pytest
from pydantic import ValidationError

from core.config import Settings, get_settings


def test_defaults_are_the_embedded_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RUDDER_DATABASE_URL", "RUDDER_STORAGE_URL", "RUDDER_REDIS_URL",
                 "RUDDER_ENVIRONMENT", "RUDDER_SECRET_KEY"):
        monkeypatch.delenv(name, raising=False)
    settings = Settings()
    assert settings.database_url == "sqlite:///./.rudder/rudder.db"
    assert settings.storage_url == "file://./.rudder/objects"
    assert settings.redis_url is None
    assert settings.auth_enabled is True


def test_environment_prefix_and_nested_sections(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUDDER_REDIS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setenv("RUDDER_LR__MAX", "0.5")
    monkeypatch.setenv("RUDDER_LIMITS__MAX_UPLOAD_BYTES", "1234")
    monkeypatch.setenv("RUDDER_STREAM__MAX_CONNECTION_SECONDS", "7")
    get_settings.cache_clear()
    try:
        settings = get_settings()
        assert settings.redis_url == "redis://127.0.0.1:1/0"
        assert settings.lr.max == 0.5
        assert settings.limits.max_upload_bytes == 1234
        assert settings.stream.max_connection_seconds == 7
        assert get_settings() is settings  # cached
    finally:
        get_settings.cache_clear()


@pytest.mark.parametrize("environment", ["test", "production"])
def test_default_secret_is_refused_outside_development(
    monkeypatch: pytest.MonkeyPatch, environment: str
) -> None:
    monkeypatch.delenv("RUDDER_SECRET_KEY", raising=False)
    with pytest.raises(ValidationError, match="RUDDER_SECRET_KEY"):
        Settings(environment=environment)  # type: ignore[arg-type]
    assert Settings(environment=environment, secret_key="s3cret-value")  # type: ignore[arg-type]


def test_secret_is_not_printed() -> None:
    settings = Settings(secret_key="very-secret")  # type: ignore[arg-type]
    assert "very-secret" not in repr(settings)
    assert "very-secret" not in settings.model_dump_json()


def test_lr_bounds_must_be_ordered() -> None:
    with pytest.raises(ValidationError, match="lr.min"):
        Settings(lr={"min": 1.0, "max": 0.5})  # type: ignore[arg-type]
