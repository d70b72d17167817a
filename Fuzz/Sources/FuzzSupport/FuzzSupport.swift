import AppStoreFormats
import Foundation

/// What a harness checks besides "no trap": a value that decoded writes out (as the App Store writes it: whole
/// milliseconds, its field names) to JSON that decodes again and writes out to the very same bytes — a value the
/// writer cannot read back, or that changes each time through, is a finding. A failure stops the run (libFuzzer keeps
/// the input as a crash) with what differed.
public func roundTrip<T: Codable>(_ value: T, _ what: String) {
    let encoder = AppStoreJSON.encoder(sortedKeys: true)
    let first: Data
    let second: Data
    do {
        first = try encoder.encode(value)
        second = try encoder.encode(try AppStoreJSON.decoder().decode(T.self, from: first))
    } catch {
        fatalError("\(what): decoded, but what it writes does not decode again: \(error)")
    }
    guard first == second else {
        fatalError("\(what): written twice, differently:\n\(String(decoding: first, as: UTF8.self))\n\(String(decoding: second, as: UTF8.self))")
    }
}

/// The input as bytes.
public func bytes(_ start: UnsafeRawPointer, _ count: Int) -> [UInt8] {
    Array(UnsafeRawBufferPointer(start: start, count: count))
}
