"""Settings: one YAML file (with ``${ENV_VAR}`` substitution) validated into typed models.

Every limit and duration the engine uses lives here with the reference implementation's value as its
default, so operators can tune any of them without touching code.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from freellm.config_base import ConfigError
from freellm.config_base import ConfigModel as _Model
from freellm.config_providers import ModelConfig, ModelKind, ModelLimits, ModelTier, ProviderConfig
from freellm.config_surfaces import (
    EmbeddingsConfig,
    GeminiSurfaceConfig,
    OllamaConfig,
    SurfacesConfig,
)

__all__ = [
    "AuthConfig",
    "CacheConfig",
    "ClientKeyConfig",
    "CompressionConfig",
    "CompressionEngineConfig",
    "CompressionMode",
    "ConfigError",
    "EmbeddingsConfig",
    "FallbackConfig",
    "FusionConfig",
    "GeminiSurfaceConfig",
    "HealthConfig",
    "ImagesConfig",
    "LimitsConfig",
    "LoggingConfig",
    "ModelConfig",
    "ModelKind",
    "ModelLimits",
    "ModelTier",
    "ProfileConfig",
    "ProviderConfig",
    "SecurityConfig",
    "ServerConfig",
    "SessionsConfig",
    "Settings",
    "StorageConfig",
    "StreamConfig",
    "ToolsConfig",
    "load_settings",
    "substitute_env",
]

_PROFILE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class ServerConfig(_Model):
    host: str = "127.0.0.1"
    port: int = 3001
    workers: int = 1
    body_limit_mb: float = 25.0
    ip_rate_limit_rpm: int = 120
    """Per-client-IP requests per 60 s window on /v1 (0 turns the limiter off)."""
    shutdown_grace_s: float = 10.0
    listen_backlog: int = Field(default=1024, ge=1)
    """Connections the kernel queues for the listening socket before ``accept``; the OS caps it
    (``net.core.somaxconn``). aiohttp's default, 128, overflows when a thousand clients connect within a
    second, and each connection dropped from a full queue waits for a SYN retransmit (1 s, then 3 s)."""
    gc_gen0_threshold: int = 50_000
    """Young-generation GC threshold of a serving process (0 = CPython's default 700); see
    ``freellm.server.runtime.tune_gc``."""
    header_value_max: int = 256
    admin_body_limit_kb: int = Field(default=1024, ge=1)
    """Bodies of ``/admin/`` requests over this many KiB get 413."""
    auth_failure_limit_per_min: int = Field(default=30, ge=0)
    """Failed authentications one client IP may make per minute before it gets 429 (0 = off); counted
    apart from authenticated traffic, so a key-guessing client cannot flood the gateway or its log."""


class SecurityConfig(_Model):
    """What the gateway may be made to reach (docs/security.md)."""

    allow_private_upstreams: bool = False
    """Provider base URLs added at run time (admin API) may point at link-local and cloud-metadata
    addresses only when true; the configuration file itself is trusted."""


class ClientKeyConfig(_Model):
    """A client key bound to a profile (docs/profiles.md)."""

    key: str
    profile: str | None = None


class AuthConfig(_Model):
    api_keys: list[str | ClientKeyConfig] = Field(default_factory=list)
    """Client keys: plain strings, or ``{key, profile}`` objects binding a key to a profile."""
    admin_keys: list[str] = Field(default_factory=list)
    """Keys for the ``/admin/`` routes (never the same as a client key). With none, every ``/admin/``
    route answers 404."""
    metrics_key: str | None = None
    """The only key ``GET /metrics`` accepts (``Authorization: Bearer``), never a client or admin key.
    None (or blank): ``/metrics`` is open."""

    @field_validator("api_keys")
    @classmethod
    def _drop_empty_client_keys(cls, v: list[str | ClientKeyConfig]) -> list[str | ClientKeyConfig]:
        return [k for k in v if (k if isinstance(k, str) else k.key).strip()]

    @field_validator("admin_keys")
    @classmethod
    def _drop_empty(cls, v: list[str]) -> list[str]:
        return [k for k in v if k.strip()]

    @field_validator("metrics_key")
    @classmethod
    def _blank_metrics_key_is_none(cls, v: str | None) -> str | None:
        return v if v is not None and v.strip() else None

    @property
    def client_keys(self) -> list[ClientKeyConfig]:
        """Every client key as ``{key, profile}`` (a plain string is bound to no profile)."""
        return [ClientKeyConfig(key=k) if isinstance(k, str) else k for k in self.api_keys]

    @model_validator(mode="after")
    def _admin_keys_are_not_client_keys(self) -> AuthConfig:
        if {k.key for k in self.client_keys} & set(self.admin_keys):
            raise ValueError("a key cannot be both a client key (api_keys) and an admin key (admin_keys)")
        if self.metrics_key is not None and self.metrics_key in {k.key for k in self.client_keys} | set(self.admin_keys):
            raise ValueError("the metrics key (metrics_key) cannot also be a client key or an admin key")
        return self


class ProfileConfig(_Model):
    """A client profile: its own chain, an enforced system prompt and the models it may ask for."""

    chain: list[str] = Field(default_factory=list)
    """Routes ``auto`` tries for this profile (empty: the global chain)."""
    system_prompt: str | None = None
    system_prompt_mode: Literal["prepend", "replace"] = "prepend"
    models: list[str] | None = None
    """Routes (``provider/model``) or bare model ids a bound key may ask for; None: everything."""


class SessionsConfig(_Model):
    """Sticky sessions, context handoff and reasoning memory (docs/sessions.md)."""

    sticky: bool = True
    context_handoff: Literal["off", "on_model_switch"] = "off"
    ttl_s: float = Field(default=1800.0, gt=0)
    """A session is forgotten this long after its last success."""
    max_sessions: int = Field(default=1000, ge=1)
    handoff_messages: int = Field(default=12, ge=1)
    handoff_message_chars: int = Field(default=500, ge=1)
    handoff_max_chars: int = Field(default=6000, ge=1)
    reasoning_memory: bool = True


class FusionConfig(_Model):
    """The ``fusion`` virtual model: a panel answers in parallel, a judge writes one answer
    (docs/fusion.md). Every member and judge call is an ordinary turn through the engine."""

    enabled: bool = True
    """Off: ``fusion`` is not listed and is an unknown model like any other."""
    default_k: int = Field(default=4, ge=1)
    max_k: int = Field(default=8, ge=1)
    judge: str | None = None
    """A route (``provider/model``) or model id the judge is pinned to; None: routed like ``auto``."""
    strategy: Literal["synthesize", "best_of"] = "synthesize"
    panel: list[str] = Field(default_factory=list)
    """Explicit members (routes or model ids); empty: chosen automatically."""
    panel_timeout_s: float = Field(default=0.0, ge=0)
    """Members still running this long after the panel started are cancelled (0 = no limit)."""
    max_cost_tokens: int = Field(default=0, ge=0)
    """Estimated tokens in and out over every call of one request (0 = no limit)."""

    @model_validator(mode="after")
    def _k_within_cap(self) -> FusionConfig:
        if self.default_k > self.max_k:
            raise ValueError(f"fusion.default_k ({self.default_k}) is over fusion.max_k ({self.max_k})")
        return self


class ImagesConfig(_Model):
    """Image shrink (docs/images.md): ``data:`` images re-encoded before they go upstream."""

    shrink: bool = True
    max_px: int = Field(default=2048, ge=16)
    max_bytes: int = Field(default=1_048_576, ge=1)
    """An image this large (decoded bytes) or larger is re-encoded even within ``max_px``."""
    jpeg_quality: int = Field(default=90, ge=1, le=100)


class LimitsConfig(_Model):
    request_max_tokens_budget: int = Field(default=0, ge=0)
    """Input estimate + requested output above this → 413 ``request_token_budget`` (0 = off)."""
    budget_default_output: int = Field(default=4096, ge=1)
    """Output cap given to a budgeted request that asked for none: min(remaining budget, this)."""


class LoggingConfig(_Model):
    """What the request log keeps (docs/analytics.md)."""

    bodies: bool = False
    """Also keep each request's last user text and the answer's text (``GET /admin/requests`` shows
    them). Off: nothing of a message body is ever stored."""
    body_max_bytes: int = Field(default=4096, ge=1)
    """Each kept text is cut to this many bytes of UTF-8 (on a character boundary)."""


class MetricsConfig(_Model):
    enabled: bool = True
    """Count every request for ``GET /metrics`` (docs/metrics.md). False: nothing is counted and
    ``/metrics`` answers 404 — for a deployment that does not scrape, and for the benchmark's A/B row."""


_NAMESPACE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_STORE_SCHEMES = {"redis_url": ("redis", "rediss", "unix"), "postgres_url": ("postgresql", "postgres")}


def store_url_problem(key: str, url: str) -> str | None:
    """Why ``url`` is not a valid ``storage.<key>`` (None: it is). Never quotes the URL: it may hold a
    password."""
    from urllib.parse import urlsplit

    schemes = _STORE_SCHEMES[key]
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError for a non-numeric or out-of-range port
    except ValueError:
        return "the port must be a number from 1 to 65535"
    if parts.scheme.lower() not in schemes:
        return f"the scheme must be one of {', '.join(s + '://' for s in schemes)}"
    if parts.scheme.lower() == "unix":
        return None if parts.path else "a unix:// URL needs the socket's path"
    if not parts.hostname:
        return "the URL has no host"
    if port == 0:
        return "the port must be a number from 1 to 65535"
    return None


class StorageConfig(_Model):
    path: Path | None = None
    """Data directory; SQLite lives here. Defaults to the user's data directory."""
    request_log_retention_days: int = 30
    redis_url: str | None = None
    """Hot state shared by every replica (docs/deployment.md): ``redis://``, ``rediss://`` or ``unix://``."""
    postgres_url: str | None = None
    """Durable records shared by every replica: ``postgresql://user:password@host:port/database``."""
    namespace: str = "freellm"
    """The Redis key prefix and the PostgreSQL schema, so several gateways (or test runs) share a server."""
    redis_timeout_ms: int = Field(default=250, ge=1, le=60_000)
    """Per Redis operation; past it the replica serves on local hot state until Redis answers again."""

    @field_validator("redis_url", "postgres_url")
    @classmethod
    def _valid_store_url(cls, v: str | None, info: Any) -> str | None:
        if v is None or not v.strip():
            return None  # unset, or an unset ${VAR}
        problem = store_url_problem(info.field_name, v.strip())
        if problem is not None:
            raise ValueError(problem)  # pydantic names the key; the value is never echoed (see Settings)
        return v.strip()

    @field_validator("namespace")
    @classmethod
    def _valid_namespace(cls, v: str) -> str:
        if not _NAMESPACE.match(v):
            raise ValueError("must match ^[a-z_][a-z0-9_]{0,62}$ (lower-case letters, digits and _)")
        return v


class FallbackConfig(_Model):
    max_attempts: int = 20
    time_budget_s: float = 45.0
    """Wall-clock budget, checked before the third attempt on (0 = none)."""
    max_consecutive_upstream_fails: int = 0
    """Breaker: the N-th upstream failure in a row ends the request with 503 (0 = off)."""
    expose_detail_header: bool = False
    cooldown_default_s: float = 90.0
    cooldown_local_s: float = 5.0
    cooldown_auth_s: float = 300.0
    cooldown_credit_s: float = 86400.0
    cooldown_tier_s: float = 86400.0
    cooldown_max_s: float = 86400.0
    cooldown_ladder_s: list[float] = Field(default_factory=lambda: [120.0, 600.0, 3600.0, 86400.0])
    cooldown_null_limit_cap_s: float = 600.0
    model_bench_failures: int = 3
    model_bench_window_s: float = 900.0
    model_bench_cooldown_s: float = 600.0
    empty_length_streak: int = 3
    lease_ttl_s: float = 120.0


class StreamConfig(_Model):
    first_byte_timeout_s: float | None = None
    """Time for an upstream to answer (status + headers; the whole body when not streaming).
    Overrides every provider's ``timeout_s`` when set."""
    stall_timeout_s: float = 90.0
    """Longest silence allowed on a streamed answer once its headers arrived (first read included)."""
    dialect_hold_chars: int = 256
    connect_timeout_s: float = 10.0
    continue_on_failure: bool = False
    """When a committed stream's upstream dies (a cut, or a stall past ``stall_timeout_s``), re-ask the
    next route with the partial answer as a prefill and splice its continuation into the same stream
    (docs/continuation.md). Off by default: it changes what the client receives."""


class ToolsConfig(_Model):
    """Tool calls and output repair (docs/tools.md). Inline dialect rescue is always on when tools are
    requested; these knobs tune the rest."""

    strict_validation: bool = False
    """Validate tool arguments (and ``json_schema`` replies) against their JSON schema; an uncommitted
    turn that fails validation fails over ("invalid tool arguments", model skipped, no cooldown)."""
    repair_arguments: bool = True
    """Repair double-encoded arguments against the declared schemas (never alters valid arguments)."""
    enforce_response_format: bool = True
    """``response_format`` json_object/json_schema: heal fenced or embedded JSON, fail over on prose."""
    hold_json_streams: bool = True
    """Hold a ``response_format`` stream's text until its end so the JSON check can still fail over
    (false: stream it as it comes, unchecked)."""
    think_tags: bool = True
    """Move a leading ``<think>…</think>`` block in content to reasoning."""


class RoutingConfig(_Model):
    output_reserve_default: int = 1000
    output_reserve_cap: int = 2000
    image_token_estimate: int = 1000
    strategy: str = "priority"
    """How ``auto`` and model groups order their routes: ``priority`` (the chain's order), ``balanced``,
    ``fast``, ``smart``, ``reliable`` or ``cheap`` (or an alias; docs/routing.md)."""
    stats_ttl_s: float = Field(default=10.0, gt=0)
    """Scores are recomputed from the request statistics at most this often."""
    exploration: float = Field(default=0.0, ge=0, le=1)
    """Opt-in share of requests that try a model with few samples first (scored strategies only)."""

    @field_validator("strategy")
    @classmethod
    def _known_strategy(cls, v: str) -> str:
        from freellm.routing.scoring import resolve_strategy, strategy_names

        resolved = resolve_strategy(v)
        if resolved is None:
            raise ValueError(f"unknown routing strategy {v!r} (one of: {', '.join(strategy_names())})")
        return resolved


class HealthConfig(_Model):
    """Probes that bring cooled-down keys back and a periodic key health pass (docs/routing.md)."""

    cooldown_probe_s: float = Field(default=60.0, ge=0)
    """How often heuristic cooldowns are probed (0 = off); the jitter and back-off scale with it."""
    key_check_s: float = Field(default=300.0, ge=0)
    """How often every key is checked (0 = off); the skip window and pacing scale with it."""
    concurrency: int = Field(default=8, ge=1)
    """Probes in flight at once during a health pass."""
    disable_after: int = Field(default=3, ge=1)
    """An invalid key (401/403) is disabled after this many failed checks in a row."""


class CacheConfig(_Model):
    """The response cache (docs/cache.md): exact-match, LRU + TTL, stream replay byte for byte."""

    enabled: bool = False
    ttl_s: float = Field(default=3600.0, gt=0)
    max_entries: int = Field(default=5000, ge=1)
    """One LRU budget shared by the stored JSON bodies and the stored streams."""
    max_temperature: float = 1.0
    """A request whose temperature is above this is never served from or stored in the cache."""
    stream_max_bytes: int = Field(default=2_097_152, ge=0)
    """A stream longer than this is served but not stored (its frames are dropped once past it)."""
    max_bytes: int = Field(default=268_435_456, ge=0)
    """Memory bound on everything cached (bodies and streams): the LRU evicts past it as past
    ``max_entries``."""


CompressionMode = Literal["off", "lossless", "standard", "aggressive"]


class CompressionEngineConfig(BaseModel):
    """One engine's switch plus its tunables (named as in docs/compression.md, snake_case); the
    tunables are validated by the engine itself when the compressor is built."""

    model_config = ConfigDict(extra="allow")

    enabled: bool = True


class CompressionConfig(_Model):
    """Prompt compression (docs/compression.md). ``mode: off`` is the operator's master switch."""

    mode: CompressionMode = "off"
    engines: dict[str, CompressionEngineConfig] = Field(default_factory=dict)
    auto_trigger_tokens: int | None = Field(default=None, ge=1)
    """With a mode configured, a request estimated at this many tokens or more is compressed
    ``aggressive`` (the header can still turn it off)."""
    target_tokens: int | None = Field(default=None, ge=1)
    """Stop once the request is under this many tokens (auto-trigger default: 90 % of the trigger)."""
    prefix_freeze: bool = True
    """Never rewrite a system prompt that recurs across requests (keeps provider prompt caches warm)."""
    filters_dir: Path | None = None
    """Custom tool-output filter files (``*.json``); default ``<data dir>/filters``."""


class Settings(_Model):
    server: ServerConfig = Field(default_factory=ServerConfig)
    auth: AuthConfig = Field(default_factory=AuthConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    providers: list[ProviderConfig] = Field(default_factory=list)
    chain: list[str] = Field(default_factory=list)
    fallback: FallbackConfig = Field(default_factory=FallbackConfig)
    stream: StreamConfig = Field(default_factory=StreamConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    routing: RoutingConfig = Field(default_factory=RoutingConfig)
    surfaces: SurfacesConfig = Field(default_factory=SurfacesConfig)
    cache: CacheConfig = Field(default_factory=CacheConfig)
    compression: CompressionConfig = Field(default_factory=CompressionConfig)
    profiles: dict[str, ProfileConfig] = Field(default_factory=dict)
    sessions: SessionsConfig = Field(default_factory=SessionsConfig)
    images: ImagesConfig = Field(default_factory=ImagesConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    ollama: OllamaConfig = Field(default_factory=OllamaConfig)
    embeddings: EmbeddingsConfig = Field(default_factory=EmbeddingsConfig)
    security: SecurityConfig = Field(default_factory=SecurityConfig)
    fusion: FusionConfig = Field(default_factory=FusionConfig)
    health: HealthConfig = Field(default_factory=HealthConfig)

    @model_validator(mode="after")
    def _profiles_exist(self) -> Settings:
        for i, k in enumerate(self.auth.client_keys):
            if k.profile is not None and k.profile not in self.profiles:
                known = ", ".join(sorted(self.profiles)) or "none"
                raise ValueError(f"auth.api_keys.{i}: unknown profile {k.profile!r} (profiles: {known})")
        wanted = self.embeddings.default_family
        if wanted is not None:
            families = {m.embedding_family.lower() for p in self.providers for m in p.models if m.kind == "embedding"}
            if wanted.strip().lower() not in families:
                known = ", ".join(sorted(families)) or "none declared"
                raise ValueError(f"embeddings.default_family: unknown family {wanted!r} (families: {known})")
        labels = {f"{p.name}/{m.id}".lower() for p in self.providers for m in p.models}
        ids = {m.id.lower() for p in self.providers for m in p.models}
        for name, profile in self.profiles.items():
            if not _PROFILE_NAME.fullmatch(name):
                raise ValueError(f"profiles: {name!r} is not a valid profile name (letters, digits, '-', '_')")
            if _is_strategy(name):
                raise ValueError(f"profiles: {name!r} is a routing strategy name (reserved for auto:{name})")
            for entry in profile.chain:
                key = entry.strip().lower()
                if key not in labels and key.replace(":", "/", 1) not in labels and key not in ids:
                    raise ValueError(f"profiles.{name}.chain: unknown route {entry!r} (not a provider/model or model id)")
        return self

    @field_validator("providers")
    @classmethod
    def _unique_names(cls, v: list[ProviderConfig]) -> list[ProviderConfig]:
        seen: set[str] = set()
        for p in v:
            if p.name in seen:
                raise ValueError(f"duplicate provider name {p.name!r}")
            seen.add(p.name)
        return v


def _is_strategy(name: str) -> bool:
    from freellm.routing.scoring import resolve_strategy

    return resolve_strategy(name) is not None


def substitute_env(value: Any, env: dict[str, str] | None = None) -> Any:
    """Replace ``${VAR}`` (or ``${VAR:-default}``) in every string of a parsed YAML tree.

    An unset variable without a default becomes "" so a key list can name optional keys.
    """
    environ = os.environ if env is None else env
    if isinstance(value, str):
        return _ENV_REF.sub(lambda m: environ.get(m.group(1), m.group(2) or ""), value)
    if isinstance(value, list):
        return [substitute_env(v, env) for v in value]
    if isinstance(value, dict):
        return {k: substitute_env(v, env) for k, v in value.items()}
    return value


def load_settings(path: str | os.PathLike[str], env: dict[str, str] | None = None) -> Settings:
    """Read, substitute and validate a YAML config file. Raises :class:`ConfigError` with a clear reason."""
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config {p}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"config {p} is not valid YAML: {exc}") from exc
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"config {p} must be a mapping at the top level")
    try:
        settings = Settings.model_validate(substitute_env(raw, env))
    except ValidationError as exc:
        lines = [f"  {'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors()]
        raise ConfigError(f"config {p} is invalid:\n" + "\n".join(lines)) from exc
    if settings.storage.path is not None and not settings.storage.path.is_absolute():
        settings.storage.path = (p.parent / settings.storage.path).resolve()
    fdir = settings.compression.filters_dir
    if fdir is not None and not fdir.is_absolute():
        settings.compression.filters_dir = (p.parent / fdir).resolve()
    return settings
