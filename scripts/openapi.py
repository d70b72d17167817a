#!/usr/bin/env python3
"""Writes the purchase server's OpenAPI 3.1 document: docs/openapi.json (kept in the repo) and the Swift file that serves
it at GET /openapi.json (Sources/PurchaseServer/HTTP/OpenAPIDocument.swift). Run after changing a route; the suite's
schemathesis run holds the server to it."""
import json, os

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ms = {"type": "integer", "description": "milliseconds since 1970"}
text = {"type": "string"}

def obj(props=None, required=(), extra=True):
    o = {"type": "object", "properties": props or {}, "additionalProperties": extra}
    if required: o["required"] = list(required)
    return o

def ref(name): return {"$ref": f"#/components/schemas/{name}"}
def body(schema, required=True): return {"required": required, "content": {"application/json": {"schema": schema}}}
def ok(schema, status="200", description="OK"):
    return {status: {"description": description, "content": {"application/json": {"schema": schema}}}, "default": {"$ref": "#/components/responses/Refusal"}}
def op(summary, responses, tags, request=None, params=None, security=None):
    o = {"summary": summary, "tags": tags, "responses": responses}
    if request: o["requestBody"] = request
    if params: o["parameters"] = params
    if security is not None: o["security"] = security
    return o
def path_param(name): return {"name": name, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1, "maxLength": 200}}
def query(name, schema, description=""): return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}

entitlements = obj({"accountId": text, "entitlements": {"type": "array", "items": ref("Entitlement")},
                    "balances": {"type": "object", "additionalProperties": {"type": "integer"}}}, ["accountId", "entitlements", "balances"])
owned = {**entitlements, "properties": {**entitlements["properties"], "signedEntitlements": text}}
schemas = {
    "Error": obj({"error": obj({"code": text, "message": text, "class": {"enum": ["final", "operator", "retry"]}}, ["message"])}, ["error"]),
    "Entitlement": obj({"name": text, "productId": text, "transactionId": text, "originalTransactionId": text, "appAccountToken": text, "expiresAt": ms, "state": {"enum": ["active", "gracePeriod"]},
                        "environment": text}, ["name", "productId", "transactionId", "state", "environment"]),
    "Entitlements": entitlements,
    "Order": obj({"orderId": text, "accountId": text, "productId": text, "appAccountToken": text, "state": text, "transactionId": text,
                  "createdAt": ms, "expiresAt": ms}, ["orderId", "productId"]),
    "WebhookEvent": obj({"eventId": text, "type": text, "accountId": text, "body": text, "state": {"enum": ["pending", "delivered", "failed"]},
                         "attempts": {"type": "integer"}, "nextAttemptAt": {"type": "integer", "description": "when the event falls due for its next attempt, milliseconds since 1970 by the senders' wall clock (kept as it was once delivered)"}, "lastError": text, "createdAt": ms, "deliveredAt": ms},
                        ["eventId", "type", "body", "state", "attempts"]),
}
app = ["app"]
admin = ["admin"]
apple = ["apple"]
bearer = [{"accountToken": []}]
adminKey = [{"adminKey": []}]
none = []
paths = {
    "/health": {"get": op("Liveness: the ledger answered a read begun after the request arrived (concurrent checks share one)", ok(obj({"status": text, "store": text}, ["status", "store"])), ["ops"], security=none)},
    "/metrics": {"get": op("Prometheus metrics: the metrics key or the admin key as a bearer token, unless the server sets publicMetrics",
                           {"200": {"description": "text exposition", "content": {"text/plain": {"schema": text}}}, "default": {"$ref": "#/components/responses/Refusal"}},
                           ["ops"], security=[{"metricsKey": []}, {"adminKey": []}])},
    "/openapi.json": {"get": op("This document", ok({"type": "object"}), ["ops"], security=none)},
    "/v1/orders": {"post": op("Create an order for a product; pay with its appAccountToken",
                              ok(obj({"orderId": text, "productId": text, "appAccountToken": text, "expiresAt": ms}, ["orderId", "productId", "appAccountToken", "expiresAt"]), "201", "Created"),
                              app, body(obj({"productId": {"type": "string", "minLength": 1, "maxLength": 200},
                                             "expectedAccountId": {"type": "string", "description": "the account the app orders for; a bearer token of another account is refused (409 account_mismatch) and no order is made"}},
                                            ["productId"])), security=bearer)},
    "/v1/purchases": {"post": op("Submit what the App Store signed: verified, bound to its order and account, granted once",
                                 {**ok(obj({"outcome": text, "transactionId": text, "orderId": text,
                                            "orderRefusal": obj({"orderId": text, "code": text, "message": text}, ["orderId", "code", "message"])
                                                            | {"description": "the transaction was granted (outcome) by its appAccountToken, but not as the order "
                                                                              "the request named: a payment for another product (order_product_mismatch); "
                                                                              "that order stays open. Also on each item of transactions"},
                                            "transactions": {"type": "array"},
                                            "refused": {"type": "array", "description": "lines refused while others were granted: finish only the final ones",
                                                        "items": obj({"transactionId": text, "code": text, "message": text,
                                                                      "class": {"enum": ["final", "operator", "retry"]}},
                                                                     ["transactionId", "code", "message", "class"])},
                                            "entitlements": ref("Entitlements"),
                                            "signedEntitlements": text}, ["transactions", "refused", "entitlements"])),
                                  "202": {"description": "Apple could not be asked now: the proof is kept and granted later",
                                          "content": {"application/json": {"schema": obj({"status": text, "proofId": text, "retryAt": ms}, ["status", "proofId"])}}},
                                  "429": {"$ref": "#/components/responses/RateLimited"}},
                                 app, body(obj({"signedTransaction": text, "receipt": text, "transactionId": text, "appTransaction": text, "orderId": text,
                                                "expectedAccountId": text,
                                                "deviceIntegrity": obj({"signals": {"type": "array", "items": text}, "applicable": {"type": "boolean"}})})), security=bearer)},
    "/v1/entitlements": {"get": op("What the account owns now", ok(owned), app, security=bearer)},
    "/v1/consumables/{currency}/spend": {"post": op("Spend a balance once per idempotency key", ok(obj({"currency": text, "balance": {"type": "integer"}}, ["currency", "balance"])),
                                                    app, body(obj({"amount": {"type": "integer"}, "idempotencyKey": text}, ["amount"])), [path_param("currency")], security=bearer)},
    "/v1/restore": {"post": op("Bind what the store restored; answer what the account owns",
                               {**ok(obj({"restored": {"type": "integer"}, "refused": {"type": "array", "items": text}, "entitlements": ref("Entitlements"), "signedEntitlements": text},
                                         ["restored", "refused", "entitlements"])),
                                "429": {"$ref": "#/components/responses/RateLimited"}},
                               app, body(obj({"signedTransactions": {"type": "array", "items": text}, "receipt": {"type": ["string", "null"]}})), security=bearer)},
    "/v1/offers/sign": {"post": op("Signatures StoreKit needs from the app's server (promotional offers, introductory-offer eligibility)",
                                   ok(obj({"kind": text, "productId": text, "offerIdentifier": text, "signature": text, "legacySignature": {"type": "object"},
                                           "allowIntroductoryOffer": {"type": "boolean"}}, ["kind", "productId"])),
                                   app, body(obj({"kind": {"enum": ["promotionalOffer", "introductoryOfferEligibility"]}, "productId": text, "offerIdentifier": text,
                                                  "format": {"enum": ["jws", "legacy"]}, "appAccountToken": text, "appTransaction": text}, ["kind", "productId"])), security=bearer)},
    "/v1/consumption-consent": {
        "get": op("Whether the customer agreed to send consumption data with refund requests",
                  ok(obj({"consented": {"type": "boolean"}, "changedAt": ms, "source": text}, ["consented"])), app, security=bearer),
        "put": op("Set the customer's consent", ok(obj({"consented": {"type": "boolean"}, "changedAt": ms, "source": text}, ["consented"])), app,
                  body(obj({"consented": {"type": "boolean"}}, ["consented"])), security=bearer)},
    "/v1/keys/entitlements": {"get": op("The key entitlement answers are signed with", {"200": {"description": "PEM", "content": {"application/x-pem-file": {"schema": text}}},
                                                                                          "default": ok({})["default"]}, app, security=none)},
    "/v1/notifications/appstore": {"post": op("App Store Server Notifications V2 (Apple's signature is the proof)", ok(obj({"result": {"enum": ["applied", "duplicate"]}}, ["result"])),
                                              apple, body(obj({"signedPayload": text}, ["signedPayload"])), security=none)},
    "/v1/retention/appstore": {"post": op("Retention Messaging's Get Retention Message (Apple's signature is the proof)",
                                          ok(obj({"message": {"type": "object"}, "alternateProduct": {"type": "object"}, "promotionalOffer": {"type": "object"}})),
                                          apple, body(obj({"signedPayload": text}, ["signedPayload"])), security=none)},
    "/admin/orders": {"get": op("Orders by state", ok(obj({"orders": {"type": "array", "items": ref("Order")}}, ["orders"])), admin,
                                params=[query("state", {"enum": ["paid-unfulfilled", "stuck", "created", "granted", "settled"]})], security=adminKey)},
    "/admin/orders/{id}/settle": {"post": op("Settle an order: grant a transaction to it, or close it with a note", ok(ref("Order")), admin,
                                             body(obj({"transactionId": text, "signedTransaction": text, "note": text}, ["note"])), [path_param("id")], security=adminKey)},
    "/admin/proofs": {"get": op("Proofs held while Apple could not be asked", ok(obj({"proofs": {"type": "array"}}, ["proofs"])), admin, security=adminKey)},
    "/admin/reconcile": {"post": op("Run the reconciliation job now", ok({"type": "object"}), admin, security=adminKey)},
    "/admin/conflicts": {"get": op("Transactions another account tried to claim", ok(obj({"conflicts": {"type": "array"}}, ["conflicts"])), admin, security=adminKey)},
    "/admin/audit": {"get": op("The audit log", ok(obj({"entries": {"type": "array"}}, ["entries"])), admin, security=adminKey)},
    "/admin/consistency": {"get": op("The ledger's own checks", ok(obj({"consistent": {"type": "boolean"}, "inconsistencies": {"type": "array"}}, ["consistent", "inconsistencies"])),
                                     admin, security=adminKey)},
    "/admin/transactions": {"get": op("Transactions, newest first", ok(obj({"transactions": {"type": "array"}}, ["transactions"])), admin,
                                      params=[query("unbound", {"type": "boolean"}), query("limit", {"type": "integer", "minimum": 1, "maximum": 10000})], security=adminKey)},
    "/admin/transactions/{id}": {"get": op("One transaction", ok({"type": "object"}), admin, params=[path_param("id")], security=adminKey)},
    "/admin/subscriptions/{originalTransactionId}": {"get": op("A subscription series", ok({"type": "object"}), admin, params=[path_param("originalTransactionId")], security=adminKey)},
    "/admin/notifications": {"get": op("The notifications log, newest first", ok(obj({"notifications": {"type": "array"}}, ["notifications"])), admin,
                                       params=[query("originalTransactionId", text), query("payload", {"type": "boolean"}), query("limit", {"type": "integer", "minimum": 1, "maximum": 10000})],
                                       security=adminKey)},
    "/admin/accounts/{id}/timeline": {"get": op("An account's history and what it owns", ok(obj({"accountId": text, "timeline": {"type": "array"}, "entitlements": ref("Entitlements")},
                                                                                                  ["accountId", "timeline", "entitlements"])),
                                                admin, params=[path_param("id"), query("limit", {"type": "integer", "minimum": 1, "maximum": 10000})], security=adminKey)},
    "/admin/webhooks": {"get": op("The webhooks' outbox", ok(obj({"configured": {"type": "boolean"}, "events": {"type": "array", "items": ref("WebhookEvent")}}, ["configured", "events"])),
                                  admin, params=[query("state", {"enum": ["pending", "delivered", "failed"]}), query("limit", {"type": "integer", "minimum": 1, "maximum": 10000})],
                                  security=adminKey)},
    "/admin/webhooks/test": {"post": op("Queue a TEST event (400 webhooks_not_configured without a receiver URL)", ok(obj({"queued": text}, ["queued"])), admin, security=adminKey)},
    "/admin/webhooks/{id}/replay": {"post": op("Send an event again from its first attempt", ok(obj({"replayed": text}, ["replayed"])), admin, params=[path_param("id")],
                                               security=adminKey)},
}
document = {
    "openapi": "3.1.0",
    "info": {"title": "IAPKit purchase server", "version": "1",
             "description": "The app API (a bearer JWT from the app's own sign-in), Apple's endpoints (signed by Apple), and the admin API "
                            "(the admin key as a bearer token). Errors answer `{\"error\": {\"code\", \"message\", \"class\"}}`; dates are milliseconds since 1970."},
    "paths": paths,
    "components": {"schemas": schemas,
                   "responses": {"Refusal": {"description": "A refusal: `error.code` is stable",
                                             "content": {"application/json": {"schema": ref("Error")}}},
                                 "RateLimited": {"description": "`rate_limited` (class `retry`): the request would make the server ask Apple more often than "
                                                                "its limits allow (per account, overall, or proofs held per account while Apple is away); "
                                                                "nothing was done, come back after `Retry-After` seconds",
                                                 "headers": {"Retry-After": {"description": "seconds to wait", "schema": {"type": "integer", "minimum": 1}}},
                                                 "content": {"application/json": {"schema": ref("Error")}}}},
                   "securitySchemes": {"accountToken": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
                                       "adminKey": {"type": "http", "scheme": "bearer"},
                                       "metricsKey": {"type": "http", "scheme": "bearer"}}},
}
text_json = json.dumps(document, indent=1, sort_keys=True, separators=(",", ": "))
with open(os.path.join(root, "docs/openapi.json"), "w") as f:
    f.write(text_json + "\n")
with open(os.path.join(root, "Sources/PurchaseServer/HTTP/OpenAPIDocument.swift"), "w") as f:
    f.write("// Written by scripts/openapi.py from the same source as docs/openapi.json: edit that script, not this file.\n")
    f.write("enum OpenAPIDocument {\n    static let json = #\"\"\"\n" + text_json + "\n\"\"\"#\n}\n")
