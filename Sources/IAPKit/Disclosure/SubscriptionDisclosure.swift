import AppStoreFormats
import Foundation

/// What App Review expects in the purchase flow of an auto-renewable subscription (guideline 3.1.2, Schedule 2 §3.8(b)
/// of the Apple Developer Program License Agreement): its title, its length, its price (the billed amount, per
/// period), any introductory terms, that it renews until cancelled, and functional links to the privacy policy and the
/// terms of use (EULA) — in the customer's language.
///
/// The text comes from a ``DisclosureStrings`` table chosen by the locale: English and Simplified Chinese are built in;
/// pass the app's own tables (another language, or other words) in `tables`. A language no table covers falls back to
/// English. Show ``price`` as the most conspicuous pricing element: it is what the customer is billed.
public struct SubscriptionDisclosure: Sendable, Hashable {
    /// A link to show, with its title in the disclosure's language.
    public struct Link: Sendable, Hashable {
        public let title: String
        public let url: URL

        public init(title: String, url: URL) {
            self.title = title
            self.url = url
        }
    }

    /// The subscription's title: the product's display name as the store localizes it.
    public let title: String
    /// The length of one period, e.g. "1 month", "1个月".
    public let length: String
    /// The billed amount per period, e.g. "$4.99 per month", "每月 US$4.99".
    public let price: String
    /// e.g. "1 week free, then $4.99 per month"; nil without an introductory offer.
    public let introductoryTerms: String?
    /// The renewal wording: renews at the price until cancelled, how to cancel, when payment is charged.
    public let renewal: String
    /// The app's privacy policy.
    public let privacyPolicy: Link
    /// The terms of use: Apple's standard EULA (``appleStandardEULA``) unless the app has its own.
    public let termsOfUse: Link
    /// The language of the table used, e.g. `en`, `zh-Hans`.
    public let language: String

    /// Apple's standard licensed application end user license agreement, the terms of use of an app that set no EULA
    /// of its own in App Store Connect.
    public static let appleStandardEULA = URL(string: "https://www.apple.com/legal/internet-services/itunes/dev/stdeula/")!

    /// The disclosure for an auto-renewable `product`, in the language of `locale` (prices formatted for it, in the
    /// product's currency); nil for other product types.
    /// - Parameters:
    ///   - product: the product, as `products(_:)` of the client gives it.
    ///   - locale: the language of the text and the format of its prices; the device's by default.
    ///   - privacyPolicy: the app's privacy policy (App Review requires a functional link).
    ///   - termsOfUse: the app's EULA; Apple's standard one by default.
    ///   - tables: the app's own tables, tried before the built-in ones (``DisclosureStrings/table(for:in:)``).
    public init?(_ product: StoreProduct, locale: Locale = .current, privacyPolicy: URL, termsOfUse: URL = Self.appleStandardEULA,
                 tables: [DisclosureStrings] = []) {
        guard let period = product.subscriptionPeriod.flatMap(SubscriptionPeriod.init(iso8601:)) else { return nil }
        let words = DisclosureStrings.table(for: locale, in: tables)
        let amount = Self.money(product.price, product.currency, locale)
        let every = words.period(period)
        title = product.displayName
        length = words.length(period, times: 1)
        price = words.fill(words.pricePerPeriod, ["amount": amount, "period": every])
        if let offer = product.introductoryOffer, let offerPeriod = SubscriptionPeriod(iso8601: offer.period) {
            let count = max(1, offer.numberOfPeriods)
            let offerAmount = Self.money(offer.price, product.currency, locale)
            introductoryTerms = switch offer.discountType {
            case "FREE_TRIAL":
                words.fill(words.freeTrial, ["length": words.length(offerPeriod, times: count), "price": price])
            case "PAY_UP_FRONT":
                words.fill(words.payUpFront, ["offer": offerAmount, "length": words.length(offerPeriod, times: count), "price": price])
            default:
                // Pay as you go: the offer's price each billing period, for `count` of them.
                words.fill(words.payAsYouGo, ["offer": offerAmount, "period": every, "length": words.length(period, times: count), "price": price])
            }
        } else {
            introductoryTerms = nil
        }
        renewal = words.fill(words.renewal, ["period": every, "amount": amount])
        self.privacyPolicy = Link(title: words.privacyPolicy, url: privacyPolicy)
        self.termsOfUse = Link(title: words.termsOfUse, url: termsOfUse)
        language = words.language
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

/// The words of a ``SubscriptionDisclosure`` in one language. Templates name their values in braces: `{amount}` (a
/// price), `{offer}` (an introductory price), `{period}` (one billing period: "month", "3 months"), `{length}` (a
/// duration: "1 week", "6 months"), `{price}` (the filled ``pricePerPeriod``), `{n}` (a count, in ``Unit``).
///
/// An app adds a language, or changes a built-in one's words, by passing its own table:
/// `var mine = DisclosureStrings.english; mine.language = "en-GB"; mine.renewal = "…"`.
public struct DisclosureStrings: Codable, Sendable, Hashable {
    /// One calendar unit's words.
    public struct Unit: Codable, Sendable, Hashable {
        /// The unit alone, as in "per month": `month`, `月`.
        public var name: String
        /// `{n}` of it when n is 1: `{n} month`, `{n}个月`.
        public var one: String
        /// `{n}` of it otherwise: `{n} months`, `{n}个月`.
        public var other: String

        public init(name: String, one: String, other: String) {
            self.name = name
            self.one = one
            self.other = other
        }
    }

    /// A BCP 47 language tag the table is for: `en`, `zh-Hans`, `pt-BR`.
    public var language: String
    public var day: Unit
    public var week: Unit
    public var month: Unit
    public var year: Unit
    /// `{amount} per {period}`.
    public var pricePerPeriod: String
    /// `{length} free, then {price}`.
    public var freeTrial: String
    /// `{offer} for the first {length}, then {price}`.
    public var payUpFront: String
    /// `{offer} per {period} for the first {length}, then {price}`.
    public var payAsYouGo: String
    /// Renews every `{period}` at `{amount}` until cancelled; how to cancel; when payment is charged.
    public var renewal: String
    /// The privacy policy link's title.
    public var privacyPolicy: String
    /// The terms of use link's title.
    public var termsOfUse: String

    public init(language: String, day: Unit, week: Unit, month: Unit, year: Unit, pricePerPeriod: String, freeTrial: String, payUpFront: String,
                payAsYouGo: String, renewal: String, privacyPolicy: String, termsOfUse: String) {
        self.language = language
        self.day = day
        self.week = week
        self.month = month
        self.year = year
        self.pricePerPeriod = pricePerPeriod
        self.freeTrial = freeTrial
        self.payUpFront = payUpFront
        self.payAsYouGo = payAsYouGo
        self.renewal = renewal
        self.privacyPolicy = privacyPolicy
        self.termsOfUse = termsOfUse
    }

    public static let english = DisclosureStrings(
        language: "en",
        day: Unit(name: "day", one: "{n} day", other: "{n} days"),
        week: Unit(name: "week", one: "{n} week", other: "{n} weeks"),
        month: Unit(name: "month", one: "{n} month", other: "{n} months"),
        year: Unit(name: "year", one: "{n} year", other: "{n} years"),
        pricePerPeriod: "{amount} per {period}",
        freeTrial: "{length} free, then {price}",
        payUpFront: "{offer} for the first {length}, then {price}",
        payAsYouGo: "{offer} per {period} for the first {length}, then {price}",
        renewal: "Renews automatically every {period} at {amount} until cancelled. Cancel at least 24 hours before the end of the current "
            + "period in your App Store account settings; payment is charged to your Apple Account at confirmation of purchase.",
        privacyPolicy: "Privacy Policy",
        termsOfUse: "Terms of Use (EULA)")

    public static let simplifiedChinese = DisclosureStrings(
        language: "zh-Hans",
        day: Unit(name: "天", one: "{n}天", other: "{n}天"),
        week: Unit(name: "周", one: "{n}周", other: "{n}周"),
        month: Unit(name: "月", one: "{n}个月", other: "{n}个月"),
        year: Unit(name: "年", one: "{n}年", other: "{n}年"),
        pricePerPeriod: "每{period} {amount}",
        freeTrial: "免费试用{length}，之后{price}",
        payUpFront: "前{length} {offer}，之后{price}",
        payAsYouGo: "前{length}每{period} {offer}，之后{price}",
        renewal: "订阅将每{period}按 {amount} 自动续订，直至取消。如需取消，请在当前周期结束前至少 24 小时在 App Store 账户设置中关闭自动续订；"
            + "确认购买时将从你的 Apple 账户扣款。",
        privacyPolicy: "隐私政策",
        termsOfUse: "使用条款 (EULA)")

    /// The tables built in: English, Simplified Chinese.
    public static let builtIn: [DisclosureStrings] = [.english, .simplifiedChinese]

    /// The table for `locale`: the first of `tables`, then of ``builtIn``, whose language matches it — with its script
    /// and region, with its script, with its region, then the language alone (`zh-Hans-CN`, `zh-Hans`, `zh-CN`, `zh`);
    /// Chinese without a script is Simplified unless its region is Taiwan, Hong Kong or Macao. Else English.
    public static func table(for locale: Locale, in tables: [DisclosureStrings] = []) -> DisclosureStrings {
        let all = tables + builtIn
        for candidate in candidates(locale) {
            if let table = all.first(where: { normalized($0.language) == candidate }) { return table }
        }
        return english
    }

    /// The tags `locale` matches, most specific first, lowercased.
    static func candidates(_ locale: Locale) -> [String] {
        guard let language = locale.language.languageCode?.identifier.lowercased() else { return [] }
        let region = locale.region?.identifier.lowercased()
        var script = locale.language.script?.identifier.lowercased()
        if script == nil, language == "zh" { script = ["tw", "hk", "mo"].contains(region ?? "") ? "hant" : "hans" }
        var tags: [String] = []
        if let script, let region { tags.append("\(language)-\(script)-\(region)") }
        if let script { tags.append("\(language)-\(script)") }
        if let region { tags.append("\(language)-\(region)") }
        tags.append(language)
        return tags
    }

    static func normalized(_ tag: String) -> String { tag.replacingOccurrences(of: "_", with: "-").lowercased() }

    func unit(_ unit: SubscriptionPeriod.Unit) -> Unit {
        switch unit {
        case .day: day
        case .week: week
        case .month: month
        case .year: year
        }
    }

    /// One billing period: the unit's name alone for one ("month"), a count otherwise ("3 months").
    func period(_ period: SubscriptionPeriod) -> String {
        period.value == 1 ? unit(period.unit).name : length(period, times: 1)
    }

    /// The duration of `times` periods: "1 week", "6 months".
    func length(_ period: SubscriptionPeriod, times: Int) -> String {
        let total = period.value * times
        let words = unit(period.unit)
        return fill(total == 1 ? words.one : words.other, ["n": String(total)])
    }

    /// `template` with each `{name}` replaced by its value, in one pass (a value is never read as a template).
    func fill(_ template: String, _ values: [String: String]) -> String {
        var result = ""
        var rest = template[...]
        while let open = rest.firstIndex(of: "{") {
            result += rest[..<open]
            guard let close = rest[open...].firstIndex(of: "}"), let value = values[String(rest[rest.index(after: open)..<close])] else {
                result.append("{")
                rest = rest[rest.index(after: open)...]
                continue
            }
            result += value
            rest = rest[rest.index(after: close)...]
        }
        return result + rest
    }
}
