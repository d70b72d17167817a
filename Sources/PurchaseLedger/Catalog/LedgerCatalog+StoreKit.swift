import AppStoreFormats

extension LedgerCatalog {
    /// The catalog of an Xcode `.storekit` file: every product it sells, typed as the file types it, granting what
    /// `grants` says for it — or, where `grants` is silent, the default a reader would expect: a non-consumable its own
    /// product id, an auto-renewable its subscription group's name (so every plan of a group grants the same thing).
    /// Consumables and non-renewing subscriptions need their grant spelled out (currency and amount; period).
    /// A grant marked ``ProductRule/retired`` keeps its product in the catalog (no longer sold, still honoured), whether
    /// or not the file still lists it; one the file no longer lists needs its whole rule (type and what it grants).
    /// - Throws: ``LedgerError/Code/invalidInput`` naming each product that cannot be resolved, or whose configured
    ///   type differs from the file's.
    public init(storeKit: StoreKitConfiguration, grants: [String: ProductRule] = [:]) throws {
        var products: [String: ProductRule] = [:]
        var problems: [String] = []
        func take(_ product: StoreKitConfiguration.Product, group: StoreKitConfiguration.SubscriptionGroup?) {
            guard let type = product.productType else { problems.append("\(product.productID): unknown type \(product.type)"); return }
            var rule = grants[product.productID] ?? ProductRule(type: type)
            guard rule.type == type else {
                problems.append("\(product.productID): configured as \(rule.type.rawValue), the .storekit file sells it as \(type.rawValue)")
                return
            }
            if type == .autoRenewableSubscription, rule.subscriptionPeriod == nil {
                // Only for MRR (never access): a period this parser does not read is left out, not refused.
                rule.subscriptionPeriod = product.recurringSubscriptionPeriod.flatMap { SubscriptionPeriod(iso8601: $0) }.map(\.description)
            }
            if rule.entitlement == nil {
                switch type {
                case .nonConsumable: rule.entitlement = product.productID
                case .autoRenewableSubscription: rule.entitlement = group?.name ?? group?.id ?? product.productID
                default: break
                }
            }
            if let problem = rule.problem { problems.append("\(product.productID): \(problem)") } else { products[product.productID] = rule }
        }
        for product in storeKit.products + storeKit.nonRenewingSubscriptions { take(product, group: nil) }
        for group in storeKit.subscriptionGroups { for product in group.subscriptions { take(product, group: group) } }
        for (id, rule) in grants where products[id] == nil && !problems.contains(where: { $0.hasPrefix("\(id):") }) {
            // A retired product may have left the file (it is no longer sold); it stays in the catalog, for what was
            // bought of it, with its rule spelled out in full (there is no file entry to take a default from).
            guard rule.isRetired else { problems.append("\(id): configured but not in the .storekit file"); continue }
            if let problem = rule.problem { problems.append("\(id): retired and not in the .storekit file: \(problem)") } else { products[id] = rule }
        }
        guard problems.isEmpty else { throw LedgerError(.invalidInput, "the catalog cannot be built: " + problems.sorted().joined(separator: "; ")) }
        self.init(products: products)
    }
}
