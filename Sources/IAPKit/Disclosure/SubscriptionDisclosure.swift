import AppStoreFormats
import Foundation

/// What App Review expects next to a subscribe button: the price and what it buys per period, any introductory terms,
/// and that the subscription renews until cancelled.
public struct SubscriptionDisclosure: Sendable, Hashable {
    /// e.g. "$4.99 per month".
    public let price: String
    /// e.g. "1 week free, then $4.99 per month"; nil without an introductory offer.
    public let introductoryTerms: String?
    /// The renewal wording.
    public let renewal: String

    /// The disclosure for an auto-renewable `product`, in English, prices in the product's currency; nil for other
    /// product types.
    public init?(_ product: StoreProduct, locale: Locale = Locale(identifier: "en_US")) {
        guard let period = product.subscriptionPeriod.flatMap(SubscriptionPeriod.init(iso8601:)) else { return nil }
        let regular = Self.money(product.price, product.currency, locale)
        price = "\(regular) per \(period.unitPhrase)"
        if let offer = product.introductoryOffer, let offerPeriod = SubscriptionPeriod(iso8601: offer.period) {
            let count = max(1, offer.numberOfPeriods)
            switch offer.discountType {
            case "FREE_TRIAL":
                introductoryTerms = "\(offerPeriod.lengthPhrase(times: count)) free, then \(price)"
            case "PAY_UP_FRONT":
                introductoryTerms = "\(Self.money(offer.price, product.currency, locale)) for the first \(offerPeriod.lengthPhrase(times: count)), then \(price)"
            default:
                introductoryTerms = "\(Self.money(offer.price, product.currency, locale)) per \(period.unitPhrase) for the first \(period.lengthPhrase(times: count)), then \(price)"
            }
        } else {
            introductoryTerms = nil
        }
        renewal = "Renews automatically every \(period.unitPhrase) at \(regular) until cancelled. Cancel at least 24 hours before the end of the "
            + "current period in your App Store account settings; payment is charged to your Apple Account at confirmation of purchase."
    }

    static func money(_ milliunits: Int64, _ currency: String, _ locale: Locale) -> String {
        let formatter = NumberFormatter()
        formatter.numberStyle = .currency
        formatter.currencyCode = currency
        formatter.locale = locale
        let value = Decimal(milliunits) / 1000
        return formatter.string(from: value as NSDecimalNumber) ?? "\(value) \(currency)"
    }
}

extension SubscriptionPeriod {
    private var unitName: String {
        switch unit {
        case .day: "day"
        case .week: "week"
        case .month: "month"
        case .year: "year"
        }
    }

    /// "month", or "3 months" for a longer period.
    var unitPhrase: String { value == 1 ? unitName : "\(value) \(unitName)s" }

    /// The length of `times` periods: "1 week", "3 months".
    func lengthPhrase(times: Int) -> String {
        let total = value * times
        return "\(total) \(unitName)\(total == 1 ? "" : "s")"
    }
}
