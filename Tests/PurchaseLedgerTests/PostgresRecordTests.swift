import IAPTestSupport
import NIOCore
@testable import PurchaseLedger
import Testing

/// PostgreSQL's binary record (`record_send`), which the store reads a packed row from (``PostgresExecutor/recordFields(_:column:)``).
@Suite("A PostgreSQL record read field by field: what a row of its columns gives, and a clear error for bytes that are not one")
struct PostgresRecordTests {
    /// A record of `fields`: each a type oid and its bytes, nil for NULL.
    static func record(_ fields: [(oid: UInt32, bytes: [UInt8]?)]) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(Int32(fields.count))
        for field in fields {
            buffer.writeInteger(field.oid)
            guard let bytes = field.bytes else { buffer.writeInteger(Int32(-1)); continue }
            buffer.writeInteger(Int32(bytes.count))
            buffer.writeBytes(bytes)
        }
        return buffer
    }

    static func bigEndian<T: FixedWidthInteger>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }

    static let sample = record([(20, bigEndian(Int64(-5_000_000_000))), (23, bigEndian(Int32(7))), (21, bigEndian(Int16(-2))), (16, [1]),
                                (25, Array("héllo ✓".utf8)), (25, []), (1043, Array("v".utf8)), (20, nil)])

    @Test("Each field as the value its column would give: integers of each width, a boolean, text of any script and empty, NULL")
    func fields() throws {
        let values = try PostgresExecutor.recordFields(Self.sample, column: "row")
        #expect(values == [.int(-5_000_000_000), .int(7), .int(-2), .int(1), .text("héllo ✓"), .text(""), .text("v"), .null])
        #expect(try PostgresExecutor.recordFields(Self.record([]), column: "row") == [])
    }

    @Test("Cut anywhere, a byte changed anywhere, or bytes after its fields: a storage error or the values, never a trap")
    func hostileBytes() throws {
        let bytes = Array(Self.sample.readableBytesView)
        for end in 0..<bytes.count {
            #expect(throws: LedgerError.self, "cut at \(end)") { try PostgresExecutor.recordFields(ByteBuffer(bytes: bytes[..<end]), column: "row") }
        }
        var trailing = Self.sample
        trailing.writeInteger(UInt8(0))
        let after = #expect(throws: LedgerError.self) { try PostgresExecutor.recordFields(trailing, column: "row") }
        #expect(after?.code == .storage && after?.message.contains("after its fields") == true)
        // Seeded, so that a failing change can be made again from its message.
        var generator = SeededGenerator(state: 2026_11_29)
        for round in 0..<5_000 {
            var changed = bytes
            let (index, byte) = (Int.random(in: 0..<changed.count, using: &generator), UInt8.random(in: 0...255, using: &generator))
            changed[index] = byte
            do {
                _ = try PostgresExecutor.recordFields(ByteBuffer(bytes: changed), column: "row")
            } catch let error as LedgerError {
                #expect(error.code == .storage, "round \(round): byte \(index) set to \(byte)")
            } catch {
                Issue.record("round \(round): byte \(index) set to \(byte) threw \(error)")
            }
        }
    }

    @Test("A field of a type the store does not read, or of a length its type cannot have, is refused by name")
    func refusedFields() {
        let double = #expect(throws: LedgerError.self) {
            try PostgresExecutor.recordFields(Self.record([(701, Self.bigEndian(UInt64(1)))]), column: "row")
        }
        #expect(double?.message.contains("does not read") == true, "\(String(describing: double))")
        let short = #expect(throws: LedgerError.self) { try PostgresExecutor.recordFields(Self.record([(20, [0, 1])]), column: "row") }
        #expect(short?.message.contains("of 2 bytes") == true, "\(String(describing: short))")
        // Only -1 is NULL: any other negative length is not a record (PostgreSQL's own reader refuses it too).
        var negative = ByteBuffer()
        negative.writeInteger(Int32(1))
        negative.writeInteger(UInt32(20))
        negative.writeInteger(Int32(-2))
        let below = #expect(throws: LedgerError.self) { try PostgresExecutor.recordFields(negative, column: "row") }
        #expect(below?.message.contains("length -2") == true, "\(String(describing: below))")
        let huge = #expect(throws: LedgerError.self) {
            var buffer = ByteBuffer()
            buffer.writeInteger(Int32.max)
            return try PostgresExecutor.recordFields(buffer, column: "row")
        }
        #expect(huge?.code == .storage)
    }
}

