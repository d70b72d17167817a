import AppStoreFormats
import Foundation

/// What an Advanced Commerce API subscription sells: its names, its items (each with its price, an offer still running,
/// and changes waiting for the next renewal), its period, and the consistency token the next change must quote.
struct AdvancedCommerceTerms: Codable, Sendable {
    var descriptors: AdvancedCommerceDescriptors
    /// Names that take over at the next renewal (`NEXT_BILL_CYCLE`).
    var nextDescriptors: AdvancedCommerceDescriptors?
    var items: [Item]
    var period: String
    var currency: String
    var taxCode: String
    var requestReferenceId: String
    var consistencyToken: String
    /// How many changes the subscription had: the consistency token's sequence number.
    var revision: Int = 1

    struct Item: Codable, Sendable {
        var sku: String
        var description: String
        var displayName: String
        /// Milliunits per period.
        var price: Int64
        /// An offer running, its `periodCount` the periods left including the current one.
        var offer: AdvancedCommerceOffer?
        /// A metadata change waiting for the next renewal (`SKU`, `displayName`, `description`).
        var next: AdvancedCommerceItem?
        /// A price change waiting for the next renewal, and what goes with it if the customer declines an increase.
        var nextPrice: Int64?
        var dependentSKUs: [String]?

        /// What this item costs in the current period.
        var chargedPrice: Int64 { offer.flatMap { ($0.periodCount ?? 0) > 0 ? $0.price : nil } ?? price }

        /// The item as a transaction reports it.
        var transactionItem: AdvancedCommerceItem {
            AdvancedCommerceItem(sku: sku, description: description, displayName: displayName, price: chargedPrice, offer: offer)
        }

        /// The item as it renews: names and price changes applied, one offer period fewer.
        var renewalItem: AdvancedCommerceItem {
            var item = AdvancedCommerceItem(sku: next?.sku ?? sku, description: next?.description ?? description,
                                            displayName: next?.displayName ?? displayName, price: price)
            if var offer, let left = offer.periodCount, left > 1 {
                offer.periodCount = left - 1
                item.offer = offer
                item.price = offer.price
            }
            // A decrease simply renews cheaper; an increase is announced beside the price it replaces.
            if let nextPrice, nextPrice < price, item.offer == nil { item.price = nextPrice }
            if let nextPrice, nextPrice > price {
                item.priceIncreaseInfo = AdvancedCommercePriceIncreaseInfo(dependentSKUs: dependentSKUs, price: nextPrice, status: "SCHEDULED")
            }
            return item
        }
    }

    /// The price of the next renewal: every item at its renewal price (a price change included).
    var renewalPrice: Int64 {
        Self.sum(items.map { item in
            if let offer = item.offer, let left = offer.periodCount, left > 1 { return offer.price ?? 0 }
            return item.nextPrice ?? item.price
        })
    }

    /// What the current period costs.
    var chargedPrice: Int64 { Self.sum(items.map(\.chargedPrice)) }

    /// A sum that cannot trap: the checks keep prices far below overflow, and a state file from before them must not
    /// stop the simulator.
    static func sum(_ prices: [Int64]) -> Int64 {
        prices.reduce(0) { total, price in
            let (sum, overflow) = total.addingReportingOverflow(price)
            return overflow ? .max : sum
        }
    }

    var transactionInfo: AdvancedCommerceTransactionInfo {
        var info = AdvancedCommerceTransactionInfo()
        info.descriptors = descriptors
        info.items = items.map(\.transactionItem)
        info.period = period
        info.requestReferenceId = requestReferenceId
        info.taxCode = taxCode
        // The simulator charges no tax: prices are what the request says.
        info.taxExclusivePrice = chargedPrice
        info.estimatedTax = 0
        info.taxRate = "0"
        return info
    }

    var renewalInfo: AdvancedCommerceRenewalInfo {
        var info = AdvancedCommerceRenewalInfo()
        info.consistencyToken = consistencyToken
        info.descriptors = nextDescriptors.map { next in
            AdvancedCommerceDescriptors(description: next.description ?? descriptors.description, displayName: next.displayName ?? descriptors.displayName)
        } ?? descriptors
        info.items = items.map(\.renewalItem)
        info.period = period
        info.requestReferenceId = requestReferenceId
        info.taxCode = taxCode
        return info
    }

    /// A new change: a new consistency token.
    mutating func changed(by requestReferenceId: String) {
        revision += 1
        self.requestReferenceId = requestReferenceId
        consistencyToken = Self.token(revision)
    }

    static func token(_ revision: Int) -> String { "1.\(revision).\(UUID().lowercasedString)" }

    /// Renewal info changed without a request (a renewal): a new consistency token all the same.
    mutating func newToken() {
        revision += 1
        consistencyToken = Self.token(revision)
    }

    /// Moves the terms to their next period: waiting changes applied, running offers one period shorter.
    mutating func renew() {
        if let next = nextDescriptors {
            descriptors = AdvancedCommerceDescriptors(description: next.description ?? descriptors.description,
                                                      displayName: next.displayName ?? descriptors.displayName)
            nextDescriptors = nil
        }
        for index in items.indices {
            var item = items[index]
            if let next = item.next {
                item.sku = next.sku ?? item.sku
                item.description = next.description ?? item.description
                item.displayName = next.displayName ?? item.displayName
                item.next = nil
            }
            if let price = item.nextPrice { item.price = price; item.nextPrice = nil; item.dependentSKUs = nil }
            if let left = item.offer?.periodCount { item.offer = left > 1 ? item.offer.map { var o = $0; o.periodCount = left - 1; return o } : nil }
            items[index] = item
        }
    }
}
