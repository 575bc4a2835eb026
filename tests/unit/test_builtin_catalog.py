"""The embedded default catalog: data validity, env-driven enabling, and the ``auto`` chain rule."""

from __future__ import annotations

import itertools
import json
import logging
from importlib import resources

import pytest

from freellm.config import ModelConfig, ModelLimits, ProviderConfig, Settings
from freellm.routing.builtin import (
    SIZE_TIERS,
    SUPPORTED_WIRES,
    builtin_catalog,
    builtin_chain,
    builtin_providers,
    builtin_settings,
)


def _raw() -> dict[str, object]:
    text = (resources.files("freellm.routing") / "catalog_data" / "builtin_providers.json").read_text("utf-8")
    data = json.loads(text)
    assert isinstance(data, dict)
    return data


def _by_name(providers: list[ProviderConfig]) -> dict[str, ProviderConfig]:
    return {p.name: p for p in providers}


# --- the data file -----------------------------------------------------------------------------------


def test_every_json_entry_validates_as_provider_config() -> None:
    raw = _raw()["providers"]
    assert isinstance(raw, list)
    catalog = builtin_catalog()
    assert [p["id"] for p in raw] == [p.id for p in catalog]
    for entry, provider in zip(raw, catalog, strict=True):
        cfg = ProviderConfig.model_validate(provider.to_config(["k"]).model_dump())
        assert cfg.name == entry["id"]
        assert cfg.kind == entry["wire"]
        assert cfg.timeout_s == entry["timeout_s"]
        assert [m.id for m in cfg.models] == [m["id"] for m in entry["models"]]
        for model_entry, model in zip(entry["models"], cfg.models, strict=True):
            assert model.enabled == model_entry["enabled"]
            assert model.tools == model_entry["tools"]
            assert model.vision == model_entry["vision"]
            assert model.context_window == model_entry["context_window"]
            assert model.limits == ModelLimits(**model_entry["limits"])
            assert model_entry["size"] in SIZE_TIERS


def test_catalog_is_well_formed() -> None:
    catalog = builtin_catalog()
    ids = [p.id for p in catalog]
    assert len(ids) == len(set(ids))
    assert "custom" not in ids
    for p in catalog:
        assert p.models, p.id
        assert p.base_url.startswith("https://"), p.id
        assert p.timeout_s > 0
    # Google AI Studio speaks the native Gemini wire, served by the gemini provider kind.
    google = next(p for p in catalog if p.id == "google")
    assert google.wire == "gemini"
    assert google.auth == "x-goog-api-key"
    assert "gemini" in SUPPORTED_WIRES and "openai" in SUPPORTED_WIRES
    assert builtin_catalog() is builtin_catalog()  # loaded once, immutable


def test_catalog_data_is_immutable() -> None:
    provider = builtin_catalog()[0]
    with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen error type is an implementation detail
        provider.base_url = "https://evil.example"
    assert isinstance(provider.models, tuple)


# --- enabling from the environment -------------------------------------------------------------------


def test_no_env_no_providers() -> None:
    assert builtin_providers({}) == []
    assert builtin_settings({}) == ([], [])


def test_groq_api_key_enables_groq_with_its_models() -> None:
    providers = builtin_providers({"GROQ_API_KEY": "x"})
    assert [p.name for p in providers] == ["groq"]
    groq = providers[0]
    assert groq.kind == "openai"
    assert groq.base_url == "https://api.groq.com/openai/v1"
    assert groq.keys == ["x"]
    assert groq.timeout_s == 60.0
    ids = [m.id for m in groq.models]
    assert "llama-3.3-70b-versatile" in ids
    assert "openai/gpt-oss-120b" in ids
    llama = next(m for m in groq.models if m.id == "llama-3.3-70b-versatile")
    assert llama == ModelConfig(
        id="llama-3.3-70b-versatile",
        display_name="Llama 3.3 70B",
        context_window=131072,
        tools=True,
        vision=False,
        enabled=True,
        limits=ModelLimits(rpm=30, rpd=1000, tpm=12000, tpd=100000),
        tier="medium",
    )


@pytest.mark.parametrize(
    ("var", "provider"),
    [
        ("GROQ_KEY", "groq"),
        ("OPENROUTER_API_KEY", "openrouter"),
        ("MISTRAL_API_KEY", "mistral"),
        ("CEREBRAS_API_KEY", "cerebras"),
        ("NVIDIA_API_KEY", "nvidia"),
        ("HF_TOKEN", "huggingface"),
        ("HUGGINGFACE_API_KEY", "huggingface"),
        ("GITHUB_TOKEN", "github"),
        ("COHERE_API_KEY", "cohere"),
        ("ZHIPU_API_KEY", "zhipu"),
        ("OLLAMA_API_KEY", "ollama"),
        ("OPENCODE_API_KEY", "opencode"),
    ],
)
def test_conventional_variables(var: str, provider: str) -> None:
    providers = builtin_providers({var: "secret"})
    assert [p.name for p in providers] == [provider]
    assert providers[0].keys == ["secret"]


def test_numbered_keys_are_collected_in_order_and_deduplicated() -> None:
    env = {
        "GROQ_API_KEY_2": "b",
        "GROQ_API_KEY": "a",
        "GROQ_KEY_1": "c",
        "GROQ_API_KEY_10": "d",
        "GROQ_KEY": "  a  ",  # same key via another variable, with stray whitespace
        "GROQ_API_KEY_3": "",  # unset-looking values are ignored
        "GROQ_API_KEY_X": "ignored",  # not a numbered variant
        "GROQ_MODEL": "ignored",  # the data's prefixes are deliberately not matched wholesale
    }
    (groq,) = builtin_providers(env)
    # api_key_env first (GROQ_KEY, GROQ_KEY_1), then GROQ_API_KEY and its numbered variants ascending.
    assert groq.keys == ["a", "c", "b", "d"]


def test_keyless_providers_are_not_enabled() -> None:
    assert builtin_providers({"KILO_API_KEY": "k", "KILO_KEY": "k"}) == []
    kilo = next(p for p in builtin_catalog() if p.id == "kilo")
    assert kilo.auth == "none"
    assert kilo.key_env_names == ()


@pytest.mark.parametrize("var", ["GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_KEY", "GEMINI_API_KEY_2"])
def test_google_ai_studio_is_enabled_by_its_key_variables(var: str) -> None:
    (google,) = builtin_providers({var: " g-key "})
    assert google.name == "google"
    assert google.kind == "gemini"
    assert google.base_url == "https://generativelanguage.googleapis.com/v1beta"
    assert google.keys == ["g-key"]
    assert google.timeout_s == 60.0
    ids = [m.id for m in google.models]
    assert "gemini-2.5-flash" in ids and "gemma-4-31b-it" in ids


def test_google_keys_from_every_variable_are_collected_once() -> None:
    env = {"GOOGLE_KEY": "a", "GOOGLE_API_KEY": "b", "GEMINI_API_KEY": "c", "GEMINI_API_KEY_1": "a"}
    (google,) = builtin_providers(env)
    assert google.keys == ["a", "b", "c"]


def test_google_models_join_the_auto_chain_by_tier() -> None:
    providers, chain = builtin_settings({"GEMINI_API_KEY": "g", "GROQ_API_KEY": "x"})
    assert sorted(p.name for p in providers) == ["google", "groq"]
    google_cfg = next(p for p in providers if p.name == "google")
    google = [label for label in chain if label.startswith("google/")]
    # Enabled tool-capable models only (Gemma is seeded without tools, 2.5 Pro is switched off).
    assert google and all("gemma" not in label and label != "google/gemini-2.5-pro" for label in google)
    assert set(google) == {f"google/{m.id}" for m in google_cfg.models if m.enabled and m.tools}
    # Gemini 3 Flash is a Frontier model: it comes before every groq model (none is Frontier).
    assert chain.index("google/gemini-3-flash-preview") < min(
        i for i, label in enumerate(chain) if label.startswith("groq/")
    )


def test_cloudflare_needs_an_account_id(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="freellm.routing.builtin"):
        assert builtin_providers({"CLOUDFLARE_API_TOKEN": "tok"}) == []
    assert "CLOUDFLARE_ACCOUNT_ID" in caplog.text
    assert "tok" not in caplog.text  # never log a key


def test_cloudflare_account_substitution() -> None:
    (cf,) = builtin_providers({"CLOUDFLARE_API_TOKEN": "tok", "CLOUDFLARE_ACCOUNT_ID": " abc123 "})
    assert cf.base_url == "https://api.cloudflare.com/client/v4/accounts/abc123/ai/v1"
    assert "{" not in cf.base_url
    assert cf.keys == ["tok"]


def test_cloudflare_account_from_export_format_key() -> None:
    (cf,) = builtin_providers({"CLOUDFLARE_KEY": "acct9:tok1", "CLOUDFLARE_KEY_2": "tok2"})
    assert cf.base_url == "https://api.cloudflare.com/client/v4/accounts/acct9/ai/v1"
    assert cf.keys == ["tok1", "tok2"]


def test_cloudflare_keys_of_another_account_are_dropped() -> None:
    env = {"CLOUDFLARE_ACCOUNT_ID": "acct1", "CLOUDFLARE_KEY": "acct1:tok1", "CLOUDFLARE_KEY_2": "acct2:tok2"}
    (cf,) = builtin_providers(env)
    assert cf.base_url == "https://api.cloudflare.com/client/v4/accounts/acct1/ai/v1"
    assert cf.keys == ["tok1"]


def test_cloudflare_global_api_key_variable_is_not_a_workers_ai_token() -> None:
    assert builtin_providers({"CLOUDFLARE_API_KEY": "global", "CLOUDFLARE_ACCOUNT_ID": "a"}) == []


def test_cloudflare_rejects_unsafe_account_id() -> None:
    assert builtin_providers({"CLOUDFLARE_API_TOKEN": "t", "CLOUDFLARE_ACCOUNT_ID": "a/../b"}) == []


def test_models_keep_seeded_enabled_flag() -> None:
    (cerebras,) = builtin_providers({"CEREBRAS_API_KEY": "x"})
    flags = {m.id: m.enabled for m in cerebras.models}
    assert flags["gpt-oss-120b"] is True
    assert flags["llama3.1-8b"] is False


def test_timeout_comes_from_data() -> None:
    (nvidia,) = builtin_providers({"NVIDIA_API_KEY": "x"})
    assert nvidia.timeout_s == 180.0


# --- the auto chain ----------------------------------------------------------------------------------


def _provider(name: str, *models: tuple[str, bool, bool, int | None]) -> ProviderConfig:
    return ProviderConfig(
        name=name,
        base_url="https://example.invalid/v1",
        keys=["k"],
        models=[
            ModelConfig(id=mid, tools=tools, enabled=enabled, limits=ModelLimits(rpd=rpd))
            for mid, tools, enabled, rpd in models
        ],
    )


def test_chain_only_enabled_tool_models() -> None:
    providers = builtin_providers({"GROQ_API_KEY": "x", "CEREBRAS_API_KEY": "y"})
    chain = builtin_chain(providers)
    assert "groq/groq/compound" not in chain  # no tools
    assert "cerebras/llama3.1-8b" not in chain  # seeded disabled
    assert "cerebras/qwen-3-235b-a22b-instruct-2507" not in chain  # seeded disabled
    models = {f"{p.name}/{m.id}": m for p in providers for m in p.models}
    assert all(models[label].tools and models[label].enabled for label in chain)
    assert len(chain) == len(set(chain))


def test_chain_orders_by_tier_then_rpd_and_interleaves_providers() -> None:
    providers = builtin_providers({"GROQ_API_KEY": "x", "CEREBRAS_API_KEY": "y", "MISTRAL_API_KEY": "z"})
    chain = builtin_chain(providers)
    assert chain == [
        # Large: cerebras (rpd 2400) leads, then groq (1000), then mistral (no figure); round-robin.
        "cerebras/gpt-oss-120b",
        "groq/openai/gpt-oss-120b",
        "mistral/magistral-medium-latest",
        "cerebras/zai-glm-4.7",
        "mistral/mistral-medium-latest",
        # Medium: groq (1000) before mistral (unknown), alternating until only groq is left.
        "groq/llama-3.3-70b-versatile",
        "mistral/devstral-latest",
        "groq/meta-llama/llama-4-scout-17b-16e-instruct",
        "mistral/mistral-large-latest",
        "groq/openai/gpt-oss-20b",
        "mistral/mistral-small-latest",
        "groq/openai/gpt-oss-safeguard-20b",
        "groq/qwen/qwen3-32b",
        # Small: groq's 8B has the larger rpd, but groq ended Medium, so mistral leads this tier.
        "mistral/codestral-latest",
        "groq/llama-3.1-8b-instant",
        "mistral/ministral-8b-latest",
    ]


def test_chain_tiers_are_strict() -> None:
    providers = builtin_providers(
        {"GROQ_API_KEY": "a", "OPENROUTER_API_KEY": "b", "NVIDIA_API_KEY": "c", "HF_TOKEN": "d"}
    )
    sizes = {(p.id, m.id): m.size for p in builtin_catalog() for m in p.models}
    chain = builtin_chain(providers)
    tiers = [SIZE_TIERS.index(sizes[tuple(label.split("/", 1))]) for label in chain]  # type: ignore[index]
    assert tiers == sorted(tiers)


def test_chain_interleaves_so_one_provider_never_leads_twice_in_a_row() -> None:
    # Four providers that all serve Frontier models: the first four attempts hit four providers.
    providers = builtin_providers(
        {"OPENROUTER_API_KEY": "b", "NVIDIA_API_KEY": "c", "CLOUDFLARE_KEY": "acct:t", "HF_TOKEN": "d"}
    )
    chain = builtin_chain(providers)
    heads = [label.split("/", 1)[0] for label in chain[:4]]
    assert heads == ["openrouter", "nvidia", "cloudflare", "huggingface"]  # rpd 200 first, then data order
    for first, second in itertools.pairwise(chain):
        if first.split("/", 1)[0] == second.split("/", 1)[0]:
            assert first.startswith("nvidia/")  # only nvidia has more Frontier models than the others


def test_chain_rule_on_synthetic_providers() -> None:
    # Unknown to the data, so every model lands in the unknown-size tier, after the known tiers.
    a = _provider("a", ("a1", True, True, 100), ("a2", True, True, 5000), ("a3", True, True, None))
    b = _provider(
        "b", ("b1", True, True, 1000), ("b-off", True, False, 9999), ("b-notools", False, True, 9999)
    )
    c = _provider("c", ("c1", True, True, None))
    assert builtin_chain([a, b, c]) == ["a/a2", "b/b1", "c/c1", "a/a1", "a/a3"]
    disabled = b.model_copy(update={"enabled": False})
    assert builtin_chain([a, disabled, c]) == ["a/a2", "c/c1", "a/a1", "a/a3"]
    assert builtin_chain([]) == []


def test_tier_does_not_start_with_the_provider_that_ended_the_previous_tier() -> None:
    # Real names/ids give the data's size tiers; the rpd values are the config's (overrides win).
    groq = _provider(
        "groq", ("openai/gpt-oss-120b", True, True, 1000), ("llama-3.1-8b-instant", True, True, 14400)
    )
    mistral = _provider(
        "mistral", ("magistral-medium-latest", True, True, 5000), ("codestral-latest", True, True, None)
    )
    assert builtin_chain([groq, mistral]) == [
        "mistral/magistral-medium-latest",  # Large: rpd 5000 beats 1000
        "groq/openai/gpt-oss-120b",
        "mistral/codestral-latest",  # Small: groq's 14400 would lead, but groq just ended Large
        "groq/llama-3.1-8b-instant",
    ]


def test_builtin_settings_validate_as_settings() -> None:
    providers, chain = builtin_settings({"GROQ_API_KEY": "x", "OPENROUTER_API_KEY": "y"})
    settings = Settings.model_validate({"providers": [p.model_dump() for p in providers], "chain": chain})
    labels = {f"{p.name}/{m.id}" for p in settings.providers for m in p.models}
    assert chain
    assert set(chain) <= labels
    assert settings.chain == chain
