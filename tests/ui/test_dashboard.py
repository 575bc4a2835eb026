"""The dashboard at ``/ui`` in a real headless Chromium, against a real gateway and the simulator:
serving and the nothing-before-sign-in rule, sign-in, providers and masked keys, the chain (buttons,
keyboard, drag and drop), the playground, live requests, charts, graceful degradation, keyboard focus and
a phone-width layout.

The tests are ``async``: Playwright's async API on the suite's session loop (see conftest.py). Plain HTTP
checks go through ``httpx.AsyncClient`` so that the loop Playwright listens on is never blocked waiting
for the gateway."""

from __future__ import annotations

import json
import re
import secrets
import uuid
from pathlib import Path
from typing import Any

import httpx2 as httpx
from playwright.async_api import Locator, Page, Route, expect

from freellm.sim import SimServer
from tests.harness import CLIENT_KEY, GatewayServer, unique
from tests.integration.helpers import MODEL, MakeGateway, directive

ADMIN_KEY = "sk-admin-dashboard-0123456789"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
PHONE = {"width": 390, "height": 844}
VIEWS = [
    ("Overview", "Overview"),
    ("Providers", "Providers"),
    ("Chain", "Chain"),
    ("Requests", "Live requests"),
    ("Playground", "Playground"),
]
"""Each view as (its link in the navigation, its h1)."""


def secret_for(provider: str) -> str:
    return f"sk-live-{provider}-{secrets.token_hex(12)}"


def admin_gateway(make_gateway: MakeGateway, providers: dict[str, list[str]], **kwargs: Any) -> GatewayServer:
    return make_gateway(providers, extra={"auth": {"admin_keys": [ADMIN_KEY]}}, **kwargs)


def three_routes(make_gateway: MakeGateway) -> tuple[GatewayServer, list[str], dict[str, str]]:
    """A gateway with ``alpha-…``, ``beta-…``, ``gamma-…`` serving ``model-x`` in that chain order, one
    key each (the keys are returned by provider name)."""
    names = [unique("alpha"), unique("beta"), unique("gamma")]
    keys = {name: secret_for(name) for name in names}
    gw = admin_gateway(make_gateway, {n: [MODEL] for n in names}, keys={n: [k] for n, k in keys.items()})
    return gw, [f"{n}/{MODEL}" for n in names], keys


async def get(url: str, **kwargs: Any) -> httpx.Response:
    async with httpx.AsyncClient(timeout=15) as client:
        return await client.get(url, **kwargs)


async def chat(
    gw: GatewayServer, text: str = "hi", model: str = "auto", request_id: str | None = None
) -> httpx.Response:
    """One non-streamed chat completion as a client would send it; asserts it was answered."""
    headers = {"Authorization": f"Bearer {CLIENT_KEY}"}
    if request_id is not None:
        headers["X-Request-ID"] = request_id
    body = {"model": model, "messages": [{"role": "user", "content": text}]}
    async with httpx.AsyncClient(timeout=15) as client:
        resp = await client.post(f"{gw.v1}/chat/completions", json=body, headers=headers)
    assert resp.status_code == 200, resp.text
    return resp


async def api_chain(gw: GatewayServer) -> list[str]:
    chain: list[str] = (await get(f"{gw.base_url}/admin/chain", headers=ADMIN)).json()["chain"]
    return chain


async def api_keys(gw: GatewayServer, provider: str) -> list[dict[str, Any]]:
    listed = (await get(f"{gw.base_url}/admin/providers", headers=ADMIN)).json()["data"]
    keys: list[dict[str, Any]] = next(p for p in listed if p["name"] == provider)["keys"]
    return keys


async def shown_chain(page: Page) -> list[str]:
    order: list[str] = await page.locator("#chain-list > li[data-route]").evaluate_all(
        "els => els.map(e => e.dataset.route)"
    )
    return order


async def sign_in(page: Page, gw: GatewayServer, view: str = "") -> None:
    await page.goto(f"{gw.base_url}/ui{'#' + view if view else ''}")
    await page.get_by_label("Admin key").fill(ADMIN_KEY)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("button", name="Sign out")).to_be_visible()


async def open_view(page: Page, link: str, title: str) -> None:
    await page.get_by_role("navigation", name="Dashboard sections").get_by_role("link", name=link).click()
    await expect(page.get_by_role("heading", level=1, name=title)).to_be_visible()


async def tab_to(page: Page, target: Locator, *, backwards: bool = False, limit: int = 30) -> None:
    """Press Tab (or Shift+Tab) until ``target`` has the focus: the keyboard path a user would take."""
    for _ in range(limit):
        if await target.evaluate("el => el === document.activeElement"):
            return
        await page.keyboard.press("Shift+Tab" if backwards else "Tab")
    await expect(target).to_be_focused()


async def focus_ring(page: Page) -> dict[str, str]:
    """The focused element's outline as the browser paints it."""
    ring: dict[str, str] = await page.evaluate(
        """() => { const s = getComputedStyle(document.activeElement);
                   return {style: s.outlineStyle, width: s.outlineWidth, tag: document.activeElement.tagName}; }"""
    )
    return ring


async def assert_no_sideways_scroll(page: Page, where: str) -> None:
    width, inner = await page.evaluate("[document.scrollingElement.scrollWidth, window.innerWidth]")
    assert width <= inner, f"{where}: {width} px wide in a {inner} px viewport"


async def assets_of(base_url: str) -> dict[str, httpx.Response]:
    """Everything the browser loads before sign-in: /ui, then every file it links or imports, followed
    transitively (``href``/``src`` in the HTML, ``import … from './x.js'`` in the modules)."""
    found: dict[str, httpx.Response] = {}
    pending = ["/ui"]
    while pending:
        path = pending.pop()
        if path in found:
            continue
        found[path] = resp = await get(f"{base_url}{path}")
        assert resp.status_code == 200, path
        if path == "/ui":
            pending += re.findall(r"""(?:src|href)="(/ui/[^"#]+)\"""", resp.text)
        elif path.endswith(".js"):
            pending += ["/ui/" + name for name in re.findall(r"""from\s+'\./([a-z0-9_-]+\.js)'""", resp.text)]
    return found


# ---- serving --------------------------------------------------------------------------------------------


async def test_nothing_about_providers_is_served_before_sign_in(
    make_gateway: MakeGateway, page: Page
) -> None:
    gw, routes, keys = three_routes(make_gateway)
    root = await get(f"{gw.base_url}/", follow_redirects=False)
    assert root.status_code == 302 and root.headers["location"] == "/ui"
    assert (await get(f"{gw.base_url}/ui/")).text == (await get(f"{gw.base_url}/ui")).text

    served = await assets_of(gw.base_url)
    modules = {p for p in served if p.endswith(".js")}
    assert {"/ui/style.css", "/ui/favicon.svg", "/ui/app.js", "/ui/charts.js", "/ui/playground.js"} <= set(
        served
    )
    assert len(modules) >= 8  # the crawl followed the imports
    types = {".css": "text/css", ".js": "text/javascript", ".svg": "image/svg+xml"}
    for path, resp in served.items():
        expected = next((t for suffix, t in types.items() if path.endswith(suffix)), "text/html")
        assert resp.headers["content-type"].startswith(expected), path
        policy = resp.headers["content-security-policy"]
        assert "default-src 'self'" in policy and "script-src 'self'" in policy, path
        assert "frame-ancestors 'none'" in policy and "unsafe-inline" not in policy, path
        assert resp.headers["x-content-type-options"] == "nosniff", path
    text = "\n".join(resp.text for resp in served.values())
    base_url = gw.state.settings.providers[0].base_url
    for needle in [*keys, *keys.values(), *routes, base_url, MODEL]:
        assert needle not in text, needle
    # offline: no resource from another origin (no CDN, no web font)
    assert not re.search(r"""(?:src|href)\s*=\s*["'](?:https?:)?//""", text)
    assert not re.search(r"""(?:from\s+|import\s*\(\s*)["'](?:https?:)?//""", text)
    assert "@import" not in text and not re.search(r"url\(\s*['\"]?(?:https?:)?//", text)
    for missing in ("/ui/nope.js", "/ui/..%2fpyproject.toml", "/ui/__init__.py", "/ui/.hidden"):
        assert (await get(f"{gw.base_url}{missing}")).status_code == 404, missing
    # the client-key rule still holds everywhere else
    assert (await get(f"{gw.base_url}/uix")).status_code == 401
    assert (await get(f"{gw.base_url}/v1/models")).status_code == 401

    # the page as the browser builds it, signed out: no admin call made, no provider in the DOM
    admin_calls: list[str] = []
    page.on("request", lambda r: admin_calls.append(r.url) if "/admin/" in r.url else None)
    await page.goto(f"{gw.base_url}/ui")
    await expect(page.get_by_role("heading", level=1, name="Sign in")).to_be_visible()
    html = await page.content()
    for needle in [*keys, *routes, base_url]:
        assert needle not in html, needle
    assert admin_calls == []


# ---- sign-in --------------------------------------------------------------------------------------------


async def test_sign_in_with_the_admin_key_a_wrong_one_is_refused(
    make_gateway: MakeGateway, page: Page
) -> None:
    gw, routes, _ = three_routes(make_gateway)
    names = [route.split("/")[0] for route in routes]
    await page.goto(f"{gw.base_url}/")
    await expect(page).to_have_url(re.compile(r"/ui$"))
    await expect(page.get_by_role("heading", level=1, name="Sign in")).to_be_visible()
    await expect(page.get_by_label("Admin key")).to_be_focused()

    await page.get_by_label("Admin key").fill(CLIENT_KEY)  # a client key is never an admin key
    async with page.expect_response(lambda r: "/admin/providers" in r.url) as refused:
        await page.get_by_role("button", name="Sign in").click()
    assert (await refused.value).status == 401
    await expect(page.get_by_role("alert")).to_contain_text("not accepted")
    await expect(page.get_by_role("navigation", name="Dashboard sections")).to_be_hidden()
    await expect(page.locator("#app")).to_be_hidden()
    html = await page.content()
    for name in names:
        assert name not in html
    assert await page.evaluate("sessionStorage.length") == 0

    await page.get_by_label("Admin key").fill(ADMIN_KEY)
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("heading", level=1, name="Overview")).to_be_visible()
    assert await page.evaluate("sessionStorage.getItem('freellm.adminKey')") == ADMIN_KEY
    assert await page.evaluate("localStorage.length") == 0
    assert await page.evaluate("document.cookie") == ""

    await page.reload()  # the key lives in sessionStorage: still signed in
    await expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    await page.get_by_role("button", name="Sign out").click()
    await expect(page.get_by_role("heading", level=1, name="Sign in")).to_be_visible()
    assert await page.evaluate("sessionStorage.getItem('freellm.adminKey')") is None


async def test_with_no_admin_keys_the_page_says_the_admin_api_is_off(
    make_gateway: MakeGateway, page: Page
) -> None:
    gw = make_gateway({unique("alpha"): [MODEL]})
    await page.goto(f"{gw.base_url}/ui")
    await page.get_by_label("Admin key").fill("anything")
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("alert")).to_contain_text("admin API is off")


# ---- providers and keys ------------------------------------------------------------------------------


async def test_providers_show_masked_keys_and_keys_can_be_added_tested_disabled_removed(
    make_gateway: MakeGateway, page: Page
) -> None:
    gw, routes, keys = three_routes(make_gateway)
    first = routes[0].split("/")[0]
    await sign_in(page, gw, "providers")
    card = page.locator(f'article[data-provider="{first}"]')
    await expect(card.get_by_role("heading", name=first)).to_be_visible()
    for name, secret in keys.items():
        await expect(page.locator(f'article[data-provider="{name}"] code.masked')).to_have_text(
            f"…{secret[-4:]}"
        )
    html = await page.content()
    for secret in keys.values():
        assert secret not in html

    # add a key: stored in the vault, shown masked only
    new_secret = secret_for(first)
    await card.get_by_label(f"Add a key to {first}").fill(new_secret)
    async with page.expect_response(
        lambda r: r.request.method == "POST" and r.url.endswith("/keys")
    ) as added:
        await card.get_by_role("button", name="Add key").click()
    response = await added.value
    assert response.status == 201, await response.text()
    await expect(card.get_by_role("status")).to_contain_text(f"Key …{new_secret[-4:]} added")
    await expect(card.locator("code.masked")).to_have_text([f"…{keys[first][-4:]}", f"…{new_secret[-4:]}"])
    await expect(card.get_by_label(f"Add a key to {first}")).to_have_value("")
    assert new_secret not in await page.content()
    assert [k["source"] for k in await api_keys(gw, first)] == ["config", "runtime"]

    # disable the configured key
    await card.get_by_role("button", name=f"Disable key …{keys[first][-4:]} of {first}").click()
    await expect(
        card.get_by_role("button", name=f"Enable key …{keys[first][-4:]} of {first}")
    ).to_be_visible()
    await expect(card.locator("tr", has_text=f"…{keys[first][-4:]}").locator(".badge")).to_have_text(
        "disabled"
    )
    assert [k["enabled"] for k in await api_keys(gw, first)] == [False, True]

    # test the added key (one cheap upstream call on the simulator)
    await card.get_by_role("button", name=f"Test key …{new_secret[-4:]} of {first}").click()
    await expect(card.get_by_role("status")).to_contain_text(f"Key …{new_secret[-4:]} works")

    # remove it: two presses (the first only arms the button)
    remove = card.get_by_role("button", name=f"Remove key …{new_secret[-4:]} of {first}")
    await remove.click()
    await expect(remove).to_have_text("Confirm remove")
    await remove.click()
    await expect(card.locator("code.masked")).to_have_text([f"…{keys[first][-4:]}"])
    assert [k["source"] for k in await api_keys(gw, first)] == ["config"]
    assert new_secret not in await page.content()

    # an API error is shown with the API's own message (the vault answers 503 when it is not there)
    async def vault_down(route: Route) -> None:
        body = {"error": {"message": "The key vault is not available.", "type": "service_unavailable"}}
        await route.fulfill(status=503, content_type="application/json", body=json.dumps(body))

    await page.route("**/admin/providers/*/keys", vault_down)
    await card.get_by_label(f"Add a key to {first}").fill(secret_for(first))
    await card.get_by_role("button", name="Add key").click()
    await expect(card.get_by_role("status")).to_contain_text(
        "Could not add the key: The key vault is not available."
    )


async def test_a_provider_added_from_the_page_serves_requests(
    make_gateway: MakeGateway, sim: SimServer, page: Page
) -> None:
    gw, _, _ = three_routes(make_gateway)
    name, secret = unique("delta"), secret_for("delta")
    await sign_in(page, gw, "providers")
    await page.get_by_text("Add a provider").click()
    await page.get_by_label("Name").fill(name)
    await page.get_by_label("Base URL").fill(f"{sim.base_url}/{name}/v1")
    await page.get_by_label("Models").fill("delta-model, delta-mini")
    await page.get_by_label("API key (optional)").fill(secret)
    async with page.expect_response(
        lambda r: r.request.method == "POST" and r.url.endswith("/admin/providers")
    ) as added:
        await page.get_by_role("button", name="Add provider").click()
    assert (await added.value).status == 201
    await expect(page.locator("#provider-form-msg")).to_contain_text(f"Provider {name} added")
    card = page.locator(f'article[data-provider="{name}"]')
    await expect(card.get_by_role("heading", name=name)).to_be_visible()
    await expect(card.locator("code.masked")).to_have_text(f"…{secret[-4:]}")
    await expect(page.get_by_label("API key (optional)")).to_have_value("")
    assert secret not in await page.content()
    assert [k["source"] for k in await api_keys(gw, name)] == ["runtime"]
    assert (await chat(gw, model=f"{name}/delta-model")).headers["x-routed-via"] == f"{name}/delta-model"

    # a refused provider: the API's reason, nothing added
    await page.get_by_label("Name").fill(name)
    await page.get_by_label("Base URL").fill(f"{sim.base_url}/{name}/v1")
    await page.get_by_role("button", name="Add provider").click()
    await expect(page.locator("#provider-form-msg")).to_contain_text("Could not add the provider:")
    await expect(page.locator(f'article[data-provider="{name}"]')).to_have_count(1)


# ---- the chain --------------------------------------------------------------------------------------


async def test_the_chain_is_reordered_with_the_buttons_and_saved(
    make_gateway: MakeGateway, page: Page
) -> None:
    gw, routes, _ = three_routes(make_gateway)
    a, b, c = routes
    await sign_in(page, gw, "chain")
    await expect(page.locator("#chain-list > li[data-route]")).to_have_count(3)
    assert await shown_chain(page) == routes
    await page.get_by_role("button", name=f"Move {a} down").click()
    await page.get_by_role("button", name=f"Move {c} up").click()
    assert await shown_chain(page) == [b, c, a]
    await expect(page.get_by_role("button", name=f"Move {c} up")).to_be_focused()  # focus follows the route
    assert await api_chain(gw) == routes  # nothing applied before saving
    async with page.expect_response(lambda r: r.request.method == "PUT" and r.url.endswith("/admin/chain")):
        await page.get_by_role("button", name="Save order").click()
    await expect(page.locator("#chain-status")).to_contain_text(f"Saved. auto now tries {b} first")
    assert await api_chain(gw) == [b, c, a]
    assert (await chat(gw)).headers["x-routed-via"] == b

    await page.get_by_role("button", name=f"Move {a} up").click()
    await page.get_by_role("button", name="Revert").click()
    assert await shown_chain(page) == [b, c, a]
    await page.get_by_role("button", name=f"Remove {c} from the chain").click()
    assert await shown_chain(page) == [b, a]
    await page.get_by_label("Add a route").select_option(c)
    await page.get_by_role("button", name="Add", exact=True).click()
    assert await shown_chain(page) == [b, a, c]
    await page.get_by_role("button", name="Save order").click()
    await expect(page.locator("#chain-status")).to_contain_text("Saved")
    assert await api_chain(gw) == [b, a, c]


async def test_the_chain_is_reordered_from_the_keyboard_only(make_gateway: MakeGateway, page: Page) -> None:
    gw, routes, _ = three_routes(make_gateway)
    a, b, c = routes
    await sign_in(page, gw, "chain")
    await expect(page.locator("#chain-list > li[data-route]")).to_have_count(3)
    await expect(page.get_by_role("heading", level=1, name="Chain")).to_be_focused()

    await page.keyboard.press("Tab")
    handle = page.get_by_role("button", name=f"Reorder {a}, position 1 of 3")
    await expect(handle).to_be_focused()
    ring = await focus_ring(page)
    assert ring["style"] != "none" and float(ring["width"].removesuffix("px")) >= 2, ring
    await page.keyboard.press("Space")  # pick it up
    await expect(page.locator(f'li[data-route="{a}"] .handle')).to_have_attribute("aria-pressed", "true")
    await page.keyboard.press("ArrowDown")
    await page.keyboard.press("ArrowDown")
    await page.keyboard.press("Space")  # drop it
    assert await shown_chain(page) == [b, c, a]
    await expect(page.locator("#chain-announce")).to_contain_text(f"{a} dropped at position 3 of 3")
    await expect(page.get_by_role("button", name=f"Reorder {a}, position 3 of 3")).to_be_focused()

    await tab_to(page, page.get_by_role("button", name="Save order"))
    await page.keyboard.press("Enter")
    await expect(page.locator("#chain-status")).to_contain_text("Saved")
    assert await api_chain(gw) == [b, c, a]

    await tab_to(page, page.get_by_role("button", name=f"Reorder {a}, position 3 of 3"), backwards=True)
    await page.keyboard.press("Alt+ArrowUp")  # moves at once
    assert await shown_chain(page) == [b, a, c]
    await page.keyboard.press("Space")
    await page.keyboard.press("ArrowUp")
    assert await shown_chain(page) == [a, b, c]
    await page.keyboard.press("Escape")  # puts it back where it was picked up
    assert await shown_chain(page) == [b, a, c]
    await expect(page.locator("#chain-announce")).to_contain_text("Move cancelled")
    assert await api_chain(gw) == [b, c, a]  # unsaved


async def test_the_chain_is_reordered_by_drag_and_drop(make_gateway: MakeGateway, page: Page) -> None:
    gw, routes, _ = three_routes(make_gateway)
    a, b, c = routes
    await sign_in(page, gw, "chain")
    await expect(page.locator("#chain-list > li[data-route]")).to_have_count(3)
    target = page.locator(f'li[data-route="{c}"]')
    box = await target.bounding_box()
    assert box is not None
    await page.locator(f'li[data-route="{a}"] .route').drag_to(
        target, target_position={"x": 40, "y": box["height"] - 4}
    )
    assert await shown_chain(page) == [b, c, a]
    await page.get_by_role("button", name="Save order").click()
    await expect(page.locator("#chain-status")).to_contain_text("Saved")
    assert await api_chain(gw) == [b, c, a]


# ---- playground ---------------------------------------------------------------------------------------


async def test_the_playground_sends_a_request_and_shows_its_routing_headers(
    make_gateway: MakeGateway, page: Page
) -> None:
    gw, routes, _ = three_routes(make_gateway)
    first, second = (route.split("/")[0] for route in routes[:2])
    await sign_in(page, gw, "playground")
    headers = page.locator("#pg-headers")
    await page.get_by_label("Client key").fill(CLIENT_KEY)
    await page.get_by_label("Message").fill("Hello there")
    async with page.expect_response(lambda r: r.url.endswith("/v1/chat/completions")) as sent:
        await page.get_by_role("button", name="Send").click()
    response = await sent.value
    assert response.headers["x-routed-via"] == routes[0]
    await expect(page.locator("#pg-status")).to_contain_text("Done")
    await expect(page.locator("#pg-answer")).not_to_be_empty()
    await expect(headers.locator('dd[data-header="X-Routed-Via"]')).to_have_text(routes[0])
    await expect(headers.locator('dd[data-header="X-Request-ID"]')).to_have_text(
        response.headers["x-request-id"]
    )
    await expect(headers.locator('dd[data-header="HTTP status"]')).to_have_text("200")
    assert CLIENT_KEY not in await page.content()  # typed into a password field, never echoed

    # streamed, failing over: the first route answers 500, the second one answers; the page shows both
    text = f"Hello again {directive({first: {'status': 500}, second: {'text': 'Hi from the second route.'}})}"
    await page.get_by_label("Stream").check()
    await page.get_by_label("Message").fill(text)
    await page.get_by_role("button", name="Send").click()
    await expect(page.locator("#pg-status")).to_contain_text("Done")
    await expect(page.locator("#pg-answer")).to_have_text("Hi from the second route.")
    await expect(headers.locator('dd[data-header="X-Routed-Via"]')).to_have_text(routes[1])
    await expect(headers.locator('dd[data-header="X-Fallback-Attempts"]')).to_have_text("1")
    await expect(headers.locator('dd[data-header="X-Fallback-Trail"]')).to_have_text(
        f"{routes[0]} key1=upstream_error"
    )

    # pinned to a model
    await page.get_by_label("Model", exact=True).fill(routes[2])
    await page.get_by_label("Message").fill("Hello, third")
    await page.get_by_role("button", name="Send").click()
    await expect(page.locator("#pg-status")).to_contain_text("Done")
    await expect(headers.locator('dd[data-header="X-Routed-Via"]')).to_have_text(routes[2])

    # a wrong client key: the gateway's answer, shown
    await page.get_by_label("Client key").fill("sk-not-a-client")
    await page.get_by_role("button", name="Send").click()
    await expect(page.locator("#pg-status")).to_contain_text("401")
    await expect(page.locator("#pg-status")).to_contain_text("Invalid API key")


# ---- live requests and charts ------------------------------------------------------------------------


async def test_live_requests_update_without_a_reload(make_gateway: MakeGateway, page: Page) -> None:
    gw, routes, _ = three_routes(make_gateway)
    await sign_in(page, gw, "requests")
    await expect(page.locator("#requests-status")).to_contain_text("updated")
    await page.evaluate("window.__sameDocument = true")  # gone if the page reloads
    request_id = f"ui-live-{uuid.uuid4().hex}"
    await chat(gw, request_id=request_id)
    row = page.locator(f'tr[data-request-id="{request_id}"]')
    await expect(row).to_be_visible()  # picked up by the 2 s poll
    await expect(row).to_contain_text(routes[0])
    await expect(row).to_contain_text("200")
    assert await page.evaluate("window.__sameDocument") is True

    await page.get_by_role("button", name="Pause").click()
    await expect(page.get_by_role("button", name="Resume")).to_have_attribute("aria-pressed", "true")
    await page.get_by_role("button", name="Resume").click()
    await page.get_by_label("Status", exact=True).select_option("5xx")
    await expect(page.locator("#requests-table")).to_contain_text("No requests")


async def test_charts_render_from_the_request_log(make_gateway: MakeGateway, page: Page) -> None:
    gw, routes, _ = three_routes(make_gateway)
    for route in routes:
        await chat(gw, "Tell me something", model=route)
    await sign_in(page, gw)
    await expect(page.locator("#chart-requests svg rect.bar").first).to_be_visible()
    assert await page.locator("#chart-requests svg rect.bar").count() > 0
    await expect(page.locator("#chart-latency svg circle.dot").first).to_be_attached()
    tokens = page.locator("#chart-tokens svg")
    await expect(tokens.locator("rect.bar").first).to_be_visible()
    for route in routes:
        await expect(tokens).to_contain_text(route.split("/")[0][:23])
    await expect(page.locator("#chart-requests svg")).to_have_attribute(
        "aria-label", re.compile(r"^3 requests")
    )
    await expect(page.locator("#routes-table")).to_contain_text(routes[0])
    await expect(page.locator("#cache-stats")).to_contain_text("Hits")
    await expect(page.locator("#compression-stats")).to_contain_text("Requests seen")
    await page.get_by_label("Window").select_option("1h")
    await expect(page.locator("#chart-requests svg rect.bar").first).to_be_visible()


async def test_without_the_request_log_and_analytics_routes_the_page_says_so(
    make_gateway: MakeGateway, page: Page
) -> None:
    gw, _, _ = three_routes(make_gateway)

    async def missing(route: Route) -> None:
        await route.fulfill(
            status=404, content_type="application/json", body='{"error": {"message": "Not Found"}}'
        )

    await page.route(re.compile(r"/admin/(requests|analytics)(\?|$)"), missing)
    await sign_in(page, gw)
    await expect(page.locator("#chart-requests")).to_contain_text("Not available")
    await expect(page.locator("#chart-tokens")).to_contain_text("Not available")
    await expect(page.locator("#routes-table")).to_contain_text("Not available")
    await expect(page.locator("#cache-stats")).to_contain_text("Hits")  # the rest still works
    await open_view(page, "Requests", "Live requests")
    await expect(page.locator("#requests-table")).to_contain_text("Not available")


# ---- keyboard and layout -------------------------------------------------------------------------------


async def test_every_view_is_reached_from_the_keyboard_with_a_visible_focus(
    make_gateway: MakeGateway, page: Page
) -> None:
    gw, _, _ = three_routes(make_gateway)
    await page.goto(f"{gw.base_url}/ui")
    await expect(page.get_by_label("Admin key")).to_be_focused()
    await page.keyboard.press("Shift+Tab")  # the skip link comes first, and shows itself when focused
    skip = page.get_by_role("link", name="Skip to content")
    await expect(skip).to_be_focused()
    await expect(skip).to_be_in_viewport()
    assert (await focus_ring(page))["style"] != "none"
    await page.keyboard.press("Tab")
    await page.keyboard.type(ADMIN_KEY)
    await page.keyboard.press("Enter")  # signed in with the keyboard alone
    await expect(page.get_by_role("heading", level=1, name="Overview")).to_be_focused()
    await page.keyboard.press("Shift+Tab")  # into the navigation, from the keyboard only
    nav = page.get_by_role("navigation", name="Dashboard sections")
    for link, title in VIEWS:
        target = nav.get_by_role("link", name=link)
        await tab_to(page, target, backwards=True, limit=10)
        ring = await focus_ring(page)
        assert (
            ring["tag"] == "A" and ring["style"] != "none" and float(ring["width"].removesuffix("px")) >= 2
        ), ring
        await page.keyboard.press("Enter")
        heading = page.get_by_role("heading", level=1, name=title)
        await expect(heading).to_be_focused()  # the view's title takes the focus, so a reader hears it
        await expect(target).to_have_attribute("aria-current", "page")
        await expect(page).to_have_title(re.compile(f"^{title} ·"))

    # the playground's form is usable with Tab and typing alone
    await tab_to(page, page.get_by_label("Client key"))
    await page.keyboard.type(CLIENT_KEY)
    await tab_to(page, page.get_by_role("button", name="Send"))
    ring = await focus_ring(page)
    assert ring["style"] != "none", ring
    await page.keyboard.press("Enter")
    await expect(page.locator("#pg-status")).to_contain_text("Done")


async def test_a_phone_width_never_scrolls_sideways(
    make_gateway: MakeGateway, page: Page, artifacts: Path
) -> None:
    long_name = unique("a-provider-with-a-rather-long-name")
    long_model = "an-extremely-long-model-identifier-that-keeps-going-and-going-v2"
    beta = unique("beta")
    gw = admin_gateway(
        make_gateway,
        {long_name: [long_model], beta: [MODEL]},
        keys={long_name: [secret_for(long_name)]},
    )
    await chat(gw, "Hello")
    await chat(gw, "Hello", model=f"{beta}/{MODEL}")
    await page.set_viewport_size(PHONE)
    await page.goto(f"{gw.base_url}/ui")
    content = await page.locator('meta[name="viewport"]').get_attribute("content") or ""
    assert "width=device-width" in content
    await expect(page.get_by_label("Admin key")).to_be_visible()
    await assert_no_sideways_scroll(page, "Sign in")
    await sign_in(page, gw)
    for link, title in VIEWS:
        await open_view(page, link, title)
        if link == "Overview":
            await expect(page.locator("#chart-requests svg")).to_be_visible()
            labels = page.locator("#chart-tokens svg text.label")
            await expect(labels).to_have_count(2)
            lefts = await labels.evaluate_all("els => els.map(e => e.getBBox().x)")
            assert min(lefts) >= 0, f"a provider label is cut off at the chart's left edge: {lefts}"
        elif link == "Providers":
            await expect(page.locator("code.masked").first).to_be_visible()
        elif link == "Chain":
            await expect(page.locator("#chain-list > li[data-route]")).to_have_count(2)
        elif link == "Requests":
            await expect(page.locator("#requests-table tr[data-request-id]").first).to_be_visible()
        elif link == "Playground":
            await page.get_by_label("Client key").fill(CLIENT_KEY)
            await page.get_by_role("button", name="Send").click()
            await expect(page.locator("#pg-status")).to_contain_text("Done")
        await assert_no_sideways_scroll(page, link)
        await page.screenshot(path=str(artifacts / f"phone-{link.lower()}.png"), full_page=True)
