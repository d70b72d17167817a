import Foundation
import IAPKit
import Testing

@Suite("The journal, the subscription disclosure, the integrity signal")
struct JournalAndDisclosureTests {
    func directory() -> URL { FileManager.default.temporaryDirectory.appendingPathComponent("journal-\(UUID().uuidString)") }

    @Test("Entries survive a new journal on the same directory, replace by key, and leave no temporary files")
    func journal() throws {
        let dir = directory()
        let journal = try FileJournal(directory: dir)
        let token = UUID()
        try journal.write(JournalEntry(kind: .intent, orderId: "o1", productId: "p", appAccountToken: token))
        try journal.write(JournalEntry(kind: .paid, orderId: "o1", productId: "p", appAccountToken: token, transactionId: "t1", signedTransaction: "a.b.c"))
        var updated = JournalEntry(kind: .paid, orderId: "o1", productId: "p", appAccountToken: token, transactionId: "t1", signedTransaction: "a.b.c")
        updated.attempts = 3
        try journal.write(updated)
        let reopened = try FileJournal(directory: dir).entries()
        #expect(reopened.map(\.kind) == [.intent, .paid])
        #expect(reopened.last?.attempts == 3)
        try journal.remove(key: "intent-o1")
        try journal.remove(key: "intent-o1")
        #expect(try journal.entries().map(\.key) == ["paid-t1"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).allSatisfy { !$0.hasPrefix(".") })
        // A damaged file is skipped, not fatal.
        try Data("{".utf8).write(to: dir.appendingPathComponent("paid-broken.json"))
        #expect(try journal.entries().map(\.key) == ["paid-t1"])
        // A hostile key cannot leave the directory.
        try journal.write(JournalEntry(kind: .paid, orderId: nil, productId: "p", appAccountToken: nil, transactionId: "../../escape"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).contains("paid-______escape.json"))
    }

    @Test("One entry is read by its key alone, as entries() reads it: present, absent, damaged (skipped), and a key that cannot leave the directory")
    func entryByKey() throws {
        let dir = directory()
        let journal = try FileJournal(directory: dir)
        let paid = JournalEntry(kind: .paid, orderId: "o1", productId: "p", appAccountToken: UUID(), transactionId: "t1", signedTransaction: "a.b.c",
                                accountId: "ann")
        try journal.write(paid)
        #expect(try journal.entry(key: "paid-t1")?.accountId == "ann")
        #expect(try journal.entry(key: "paid-t1")?.createdAt.timeIntervalSince1970 == (try journal.entries().first?.createdAt.timeIntervalSince1970))
        #expect(try journal.entry(key: "paid-t2") == nil)
        try Data("{".utf8).write(to: dir.appendingPathComponent("paid-broken.json"))
        #expect(try journal.entry(key: "paid-broken") == nil)
        #expect(try journal.entry(key: "../../etc/passwd") == nil)
    }

    @Test("A journal it cannot read is an error, never an empty journal: an entry that cannot be read, a directory that cannot be listed")
    func unreadableJournal() throws {
        let dir = directory()
        let journal = try FileJournal(directory: dir)
        try journal.write(JournalEntry(kind: .paid, orderId: "o1", productId: "p", appAccountToken: nil, transactionId: "t1", signedTransaction: "a.b.c"))
        // An entry's path that cannot be read as a file (as a file without permission for the app would be).
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("paid-t2.json"), withIntermediateDirectories: false)
        #expect(throws: JournalError.self) { try journal.entries() }
        try FileManager.default.removeItem(at: dir.appendingPathComponent("paid-t2.json"))
        #expect(try journal.entries().map(\.key) == ["paid-t1"])
        try FileManager.default.removeItem(at: dir)
        #expect(throws: JournalError.self) { try journal.entries() }
    }

    @Test("Disclosure: price per period, introductory terms, renewal wording; none for a non-subscription")
    func disclosure() throws {
        let monthly = StoreProduct(productId: "m", type: .autoRenewableSubscription, displayName: "Pro", price: 4990, currency: "USD",
                                   subscriptionPeriod: "P1M", introductoryOffer: .init(discountType: "FREE_TRIAL", period: "P1W", numberOfPeriods: 1, price: 0))
        let policy = URL(string: "https://example.com/privacy")!
        let english = Locale(identifier: "en_US")
        let disclosure = try #require(SubscriptionDisclosure(monthly, locale: english, privacyPolicy: policy))
        #expect(disclosure.price == "$4.99 per month")
        #expect(disclosure.introductoryTerms == "1 week free, then $4.99 per month")
        #expect(disclosure.renewal.contains("Renews automatically every month at $4.99 until cancelled"))
        let quarterly = StoreProduct(productId: "q", type: .autoRenewableSubscription, displayName: "Q", price: 9990, currency: "USD",
                                     subscriptionPeriod: "P3M", introductoryOffer: .init(discountType: "PAY_AS_YOU_GO", period: "P3M", numberOfPeriods: 2, price: 4990))
        #expect(SubscriptionDisclosure(quarterly, locale: english, privacyPolicy: policy)?.introductoryTerms
                == "$4.99 per 3 months for the first 6 months, then $9.99 per 3 months")
        #expect(SubscriptionDisclosure(StoreProduct(productId: "c", type: .consumable, displayName: "C", price: 990, currency: "USD"),
                                       privacyPolicy: policy) == nil)
    }

    @Test("The integrity check does not apply off iOS devices")
    func integrity() {
        let report = DeviceIntegrity.check()
        #expect(report.applicable == false)
        #expect(report.suspicious == false)
    }
}
