import Foundation
import IAPKit
import Testing

@Suite("The App Review disclosure: title, length, price, links to the privacy policy and the EULA, in the customer's language")
struct DisclosureTests {
    static let policy = URL(string: "https://example.com/privacy")!
    static let monthly = StoreProduct(productId: "m", type: .autoRenewableSubscription, displayName: "Pro Monthly", price: 4990, currency: "USD",
                                      subscriptionPeriod: "P1M",
                                      introductoryOffer: .init(discountType: "FREE_TRIAL", period: "P1W", numberOfPeriods: 1, price: 0))
    static let quarterly = StoreProduct(productId: "q", type: .autoRenewableSubscription, displayName: "Pro Quarterly", price: 9990, currency: "USD",
                                        subscriptionPeriod: "P3M",
                                        introductoryOffer: .init(discountType: "PAY_AS_YOU_GO", period: "P3M", numberOfPeriods: 2, price: 4990))

    @Test("The title, the length and both links are there: the app's privacy policy, and Apple's standard EULA unless the app names its own")
    func links() throws {
        let disclosure = try #require(SubscriptionDisclosure(Self.monthly, locale: Locale(identifier: "en_US"), privacyPolicy: Self.policy))
        #expect(disclosure.title == "Pro Monthly")
        #expect(disclosure.length == "1 month")
        #expect(disclosure.privacyPolicy == .init(title: "Privacy Policy", url: Self.policy))
        #expect(disclosure.termsOfUse.url.absoluteString == "https://www.apple.com/legal/internet-services/itunes/dev/stdeula/")
        #expect(disclosure.termsOfUse.title == "Terms of Use (EULA)")
        let own = URL(string: "https://example.com/terms")!
        let custom = try #require(SubscriptionDisclosure(Self.monthly, locale: Locale(identifier: "en_US"), privacyPolicy: Self.policy, termsOfUse: own))
        #expect(custom.termsOfUse.url == own)
        #expect(try #require(SubscriptionDisclosure(Self.quarterly, locale: Locale(identifier: "en_US"), privacyPolicy: Self.policy)).length == "3 months")
    }

    @Test("A Chinese locale (zh-Hans, zh_CN, zh-Hans-SG) gets the Simplified Chinese table, with the prices and counts in it", arguments: ["zh-Hans", "zh_CN", "zh-Hans-SG"])
    func simplifiedChinese(_ identifier: String) throws {
        let locale = Locale(identifier: identifier)
        let disclosure = try #require(SubscriptionDisclosure(Self.monthly, locale: locale, privacyPolicy: Self.policy))
        #expect(disclosure.language == "zh-Hans")
        #expect(disclosure.title == "Pro Monthly", "the store's own display name")
        #expect(disclosure.length == "1个月")
        #expect(disclosure.price.hasPrefix("每月 ") && disclosure.price.contains("4.99"), "\(disclosure.price)")
        #expect(disclosure.introductoryTerms == "免费试用1周，之后\(disclosure.price)")
        #expect(disclosure.renewal.contains("自动续订") && disclosure.renewal.contains("4.99") && disclosure.renewal.contains("24 小时"), "\(disclosure.renewal)")
        #expect(disclosure.privacyPolicy.title == "隐私政策" && disclosure.privacyPolicy.url == Self.policy)
        #expect(disclosure.termsOfUse.title == "使用条款 (EULA)" && disclosure.termsOfUse.url == SubscriptionDisclosure.appleStandardEULA)
        let quarterly = try #require(SubscriptionDisclosure(Self.quarterly, locale: locale, privacyPolicy: Self.policy))
        #expect(quarterly.length == "3个月")
        #expect(quarterly.price.hasPrefix("每3个月 ") && quarterly.price.contains("9.99"), "\(quarterly.price)")
        let terms = try #require(quarterly.introductoryTerms)
        #expect(terms.hasPrefix("前6个月每3个月 ") && terms.contains("4.99") && terms.hasSuffix("之后\(quarterly.price)"), "\(terms)")
    }

    @Test("A language no table covers (German, Japanese, Traditional Chinese) falls back to English, prices and counts in it", arguments: ["de_DE", "ja_JP", "zh-Hant-TW", "zh_HK"])
    func fallback(_ identifier: String) throws {
        let disclosure = try #require(SubscriptionDisclosure(Self.quarterly, locale: Locale(identifier: identifier), privacyPolicy: Self.policy))
        #expect(disclosure.language == "en")
        #expect(disclosure.length == "3 months")
        #expect(disclosure.price.contains("9,99") || disclosure.price.contains("9.99"), "\(disclosure.price)")
        #expect(disclosure.price.hasSuffix(" per 3 months"), "\(disclosure.price)")
        #expect(disclosure.introductoryTerms?.contains("for the first 6 months, then") == true)
        #expect(disclosure.renewal.hasPrefix("Renews automatically every 3 months at "))
        #expect(disclosure.privacyPolicy.title == "Privacy Policy" && disclosure.termsOfUse.title == "Terms of Use (EULA)")
    }

    @Test("The app's own table: a new language, or its own words for a built-in one, chosen before the built-in tables")
    func appTables() throws {
        var french = DisclosureStrings.english
        french.language = "fr"
        french.month = .init(name: "mois", one: "{n} mois", other: "{n} mois")
        french.week = .init(name: "semaine", one: "{n} semaine", other: "{n} semaines")
        french.pricePerPeriod = "{amount} par {period}"
        french.freeTrial = "{length} gratuite, puis {price}"
        french.privacyPolicy = "Politique de confidentialité"
        let disclosure = try #require(SubscriptionDisclosure(Self.monthly, locale: Locale(identifier: "fr_FR"), privacyPolicy: Self.policy, tables: [french]))
        #expect(disclosure.language == "fr")
        #expect(disclosure.length == "1 mois")
        #expect(disclosure.price.hasSuffix(" par mois") && disclosure.price.contains("4,99"), "\(disclosure.price)")
        #expect(disclosure.introductoryTerms == "1 semaine gratuite, puis \(disclosure.price)")
        #expect(disclosure.privacyPolicy.title == "Politique de confidentialité")

        var terse = DisclosureStrings.simplifiedChinese
        terse.privacyPolicy = "隐私"
        let overridden = try #require(SubscriptionDisclosure(Self.monthly, locale: Locale(identifier: "zh-Hans"), privacyPolicy: Self.policy, tables: [terse]))
        #expect(overridden.privacyPolicy.title == "隐私")
        // A table's own braces that name nothing are kept as written.
        var braces = DisclosureStrings.english
        braces.pricePerPeriod = "{amount} per {period} {not a value}"
        let kept = try #require(SubscriptionDisclosure(Self.monthly, locale: Locale(identifier: "en_US"), privacyPolicy: Self.policy, tables: [braces]))
        #expect(kept.price == "$4.99 per month {not a value}")
    }

    @Test("The table follows the language asked for: the current locale by default, English where nothing matches")
    func tableChoice() {
        #expect(DisclosureStrings.table(for: Locale(identifier: "zh-Hans-CN")).language == "zh-Hans")
        #expect(DisclosureStrings.table(for: Locale(identifier: "en_GB")).language == "en")
        #expect(DisclosureStrings.table(for: Locale(identifier: "pt_BR")).language == "en")
        var brazilian = DisclosureStrings.english
        brazilian.language = "pt_BR"
        #expect(DisclosureStrings.table(for: Locale(identifier: "pt-BR"), in: [brazilian]).language == "pt_BR")
        #expect(DisclosureStrings.table(for: Locale(identifier: "pt-PT"), in: [brazilian]).language == "en", "another region's Portuguese is not pt-BR's")
        #expect(SubscriptionDisclosure(Self.monthly, privacyPolicy: Self.policy) == SubscriptionDisclosure(Self.monthly, locale: .current, privacyPolicy: Self.policy),
                "the current locale by default")
    }
}
