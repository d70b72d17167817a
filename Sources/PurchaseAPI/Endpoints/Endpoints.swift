extension APIEndpoint {
    /// Every operation the purchase server answers outside the dashboard.
    public static let all: [APIEndpoint] = operations + app + appStore + admin

    static let operations: [APIEndpoint] = [
        APIEndpoint(.get, "/health", "Liveness: the ledger answered a read begun after the request arrived (concurrent checks share one)",
                    tag: .ops, credentials: [], replies: [.ok(HealthReply.self)]),
        APIEndpoint(.get, "/metrics", "Prometheus metrics: the metrics key or the admin key as a bearer token, unless the server sets publicMetrics",
                    tag: .ops, credentials: [.metricsKey, .adminKey], replies: [Reply(200, "text exposition", .text(mediaType: "text/plain"))]),
        APIEndpoint(.get, "/openapi.json", "This document", tag: .ops, credentials: [], replies: [Reply(200, "OK", .anyJSONObject)]),
    ]

    static let app: [APIEndpoint] = [
        APIEndpoint(.post, "/v1/orders", "Create an order for a product; pay with its appAccountToken", tag: .app, credentials: [.accountToken],
                    request: OrderRequest.self, replies: [Reply(201, "Created", .json(OrderReply.self))]),
        APIEndpoint(.post, "/v1/orders/{orderId}/abandon", "Say an order's payment ended with nothing charged (it leaves the lost-order list)",
                    tag: .app, credentials: [.accountToken], request: OrderAbandonRequest.self, replies: [.ok(OrderAbandonReply.self)]),
        APIEndpoint(.post, "/v1/purchases", "Submit what the App Store signed: verified, bound to its order and account, granted once",
                    tag: .app, credentials: [.accountToken], request: PurchaseRequest.self,
                    replies: [.ok(PurchaseReply.self),
                              Reply(202, "Apple could not be asked now: the proof is kept and granted later", .json(HeldProofReply.self)),
                              .rateLimited]),
        APIEndpoint(.get, "/v1/entitlements", "What the account owns now", tag: .app, credentials: [.accountToken],
                    replies: [.ok(EntitlementsReply.self)]),
        APIEndpoint(.post, "/v1/consumables/{currency}/spend", "Spend a balance once per idempotency key", tag: .app, credentials: [.accountToken],
                    request: SpendRequest.self, replies: [.ok(SpendReply.self)]),
        APIEndpoint(.post, "/v1/restore", "Bind what the store restored; answer what the account owns", tag: .app, credentials: [.accountToken],
                    request: RestoreRequest.self, replies: [.ok(RestoreReply.self), .rateLimited]),
        APIEndpoint(.post, "/v1/offers/sign", "Signatures StoreKit needs from the app's server (promotional offers, introductory-offer eligibility)",
                    tag: .app, credentials: [.accountToken], request: OfferSignRequest.self, replies: [.ok(OfferSignReply.self)]),
        APIEndpoint(.get, "/v1/consumption-consent", "Whether the customer agreed to send consumption data with refund requests", tag: .app,
                    credentials: [.accountToken], replies: [.ok(ConsentReply.self)]),
        APIEndpoint(.put, "/v1/consumption-consent", "Set the customer's consent", tag: .app, credentials: [.accountToken],
                    request: ConsentRequest.self, replies: [.ok(ConsentReply.self)]),
        APIEndpoint(.get, "/v1/keys/entitlements", "The key entitlement answers are signed with", tag: .app, credentials: [],
                    replies: [Reply(200, "PEM", .text(mediaType: "application/x-pem-file"))]),
    ]

    static let appStore: [APIEndpoint] = [
        APIEndpoint(.post, "/v1/notifications/appstore", "App Store Server Notifications V2 (Apple's signature is the proof)", tag: .apple,
                    credentials: [], request: SignedPayloadRequest.self, replies: [.ok(NotificationReply.self)]),
        // Apple's Retention Messaging answer (`{}`, `{"message"}`, `{"alternateProduct"}` or `{"promotionalOffer"}`) is
        // AppStoreFormats' type, which this module does not depend on.
        APIEndpoint(.post, "/v1/retention/appstore", "Retention Messaging's Get Retention Message (Apple's signature is the proof)", tag: .apple,
                    credentials: [], request: SignedPayloadRequest.self, replies: [Reply(200, "OK", .anyJSONObject)]),
    ]

    static let admin: [APIEndpoint] = [
        // The states are the ledger's `Ledger.OrderFilter`, which is not a contract type.
        APIEndpoint(.get, "/admin/orders", "Orders by state", tag: .admin, credentials: [.adminKey],
                    query: [QueryParameter("state", .oneOf(["paid-unfulfilled", "stuck", "abandoned", "created", "granted", "settled"]))],
                    replies: [.ok(AdminOrdersReply.self)]),
        APIEndpoint(.post, "/admin/orders/{id}/settle", "Settle an order: grant a transaction to it, or close it with a note", tag: .admin,
                    credentials: [.adminKey], request: SettleRequest.self, replies: [.ok(SettleReply.self)]),
        APIEndpoint(.get, "/admin/proofs", "Proofs held while Apple could not be asked", tag: .admin, credentials: [.adminKey],
                    replies: [.ok(HeldProofsReply.self)]),
        APIEndpoint(.post, "/admin/reconcile", "Run the reconciliation job now", tag: .admin, credentials: [.adminKey],
                    replies: [.ok(ReconcileReport.self)]),
        APIEndpoint(.get, "/admin/conflicts", "Transactions another account tried to claim", tag: .admin, credentials: [.adminKey],
                    replies: [.ok(ConflictsReply.self)]),
        APIEndpoint(.get, "/admin/audit", "The audit log", tag: .admin, credentials: [.adminKey], replies: [.ok(AuditReply.self)]),
        APIEndpoint(.get, "/admin/consistency", "The ledger's own checks", tag: .admin, credentials: [.adminKey],
                    replies: [.ok(ConsistencyReply.self)]),
        APIEndpoint(.get, "/admin/transactions", "Transactions, newest first", tag: .admin, credentials: [.adminKey],
                    query: [QueryParameter("unbound", .boolean), .limit], replies: [.ok(TransactionsReply.self)]),
        APIEndpoint(.get, "/admin/transactions/{id}", "One transaction", tag: .admin, credentials: [.adminKey],
                    replies: [.ok(TransactionRecord.self)]),
        APIEndpoint(.get, "/admin/subscriptions/{originalTransactionId}", "A subscription series", tag: .admin, credentials: [.adminKey],
                    replies: [.ok(SeriesReply.self)]),
        APIEndpoint(.get, "/admin/notifications", "The notifications log, newest first", tag: .admin, credentials: [.adminKey],
                    query: [QueryParameter("originalTransactionId", .string), QueryParameter("payload", .boolean), .limit],
                    replies: [.ok(NotificationsReply.self)]),
        APIEndpoint(.get, "/admin/accounts/{id}/timeline", "An account's history and what it owns", tag: .admin, credentials: [.adminKey],
                    query: [.limit], replies: [.ok(TimelineReply.self)]),
        APIEndpoint(.get, "/admin/metrics/overview",
                    "The business now (or at `at`): active subscriptions, trials, grace, billing retry, MRR; revenue over [from, to), all time by default",
                    tag: .admin, credentials: [.adminKey], query: [.millis("at"), .millis("from"), .millis("to")] + MetricsQuery.common,
                    replies: [Reply(200, "OK", .jsonOrCSV(MetricsOverviewReply.self))]),
        APIEndpoint(.get, "/admin/metrics/series", "One metric per day, week or month over [from, to)", tag: .admin, credentials: [.adminKey],
                    query: [QueryParameter("metric", .oneOf(MetricsQuery.metrics)), QueryParameter("interval", .oneOf(["day", "week", "month"])),
                            .millis("from"), .millis("to")] + MetricsQuery.common,
                    replies: [Reply(200, "OK", .jsonOrCSV(MetricSeriesReply.self))]),
        APIEndpoint(.get, "/admin/metrics/cohorts", "Subscription series by month of first purchase, and how many each month kept",
                    tag: .admin, credentials: [.adminKey], query: [QueryParameter("months", .integer(1...60))] + MetricsQuery.common,
                    replies: [Reply(200, "OK", .jsonOrCSV(CohortsReply.self))]),
        APIEndpoint(.get, "/admin/webhooks", "The webhooks' outbox", tag: .admin, credentials: [.adminKey],
                    query: [QueryParameter("state", .oneOf(StoredWebhookEvent.State.allCases.map(\.rawValue))), .limit],
                    replies: [.ok(WebhooksReply.self)]),
        APIEndpoint(.post, "/admin/webhooks/test", "Queue a TEST event (400 webhooks_not_configured without a receiver URL)", tag: .admin,
                    credentials: [.adminKey], replies: [.ok(WebhookTestReply.self)]),
        APIEndpoint(.post, "/admin/webhooks/{id}/replay", "Send an event again from its first attempt", tag: .admin, credentials: [.adminKey],
                    replies: [.ok(WebhookReplayReply.self)]),
    ]
}
