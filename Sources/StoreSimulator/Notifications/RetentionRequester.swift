import AppStoreFormats
import Foundation
import AsyncHTTPClient
import NIOCore
import NIOHTTP1

/// Calls the developer's Get Retention Message endpoint as the App Store does: `POST {"signedPayload": "<JWS>"}`, an answer
/// within the response-time budget (700 ms), HTTP 200 with a ``RealtimeResponseBody``.
public struct RetentionRequester: Sendable {
    /// Apple's budget for an answer.
    public static let budget: Duration = .milliseconds(700)
    /// The largest answer read.
    static let maxAnswer = 64 * 1024

    public init() {}

    /// One call: how it ended, how long it took, and the answer when it was a usable one.
    public struct Attempt: Sendable {
        public var result: SendAttemptResult
        public var milliseconds: Int
        public var answer: RealtimeResponseBody?
    }

    public func ask(_ url: URL, signedPayload: String) async -> Attempt {
        let clock = ContinuousClock()
        let started = clock.now
        func elapsed() -> Int {
            let duration = clock.now - started
            return Int(duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000)
        }
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: (try? AppStoreJSON.encoder().encode(RealtimeRequestBody(signedPayload: signedPayload))) ?? Data()))
        do {
            let response = try await HTTPClient.shared.execute(request, deadline: .now() + .milliseconds(700))
            let body = try await response.body.collect(upTo: Self.maxAnswer)
            let milliseconds = elapsed()
            guard Duration.milliseconds(milliseconds) <= Self.budget else { return Attempt(result: .timedOut, milliseconds: milliseconds) }
            guard response.status == .ok else { return Attempt(result: .unsuccessfulHTTPResponseCode, milliseconds: milliseconds) }
            guard let answer = try? AppStoreJSON.decoder().decode(RealtimeResponseBody.self, from: Data(body.readableBytesView)) else {
                return Attempt(result: .invalidResponse, milliseconds: milliseconds)
            }
            return Attempt(result: .success, milliseconds: milliseconds, answer: answer)
        } catch let error as HTTPClientError where [.deadlineExceeded, .readTimeout, .connectTimeout].contains(error) {
            return Attempt(result: .timedOut, milliseconds: elapsed())
        } catch let error as HTTPClientError where error == .remoteConnectionClosed {
            return Attempt(result: .prematureClose, milliseconds: elapsed())
        } catch let error as NIOTooManyBytesError {
            _ = error
            return Attempt(result: .invalidResponse, milliseconds: elapsed())
        } catch {
            return Attempt(result: String(describing: error).contains("SSL") ? .tlsIssue : .noResponse, milliseconds: elapsed())
        }
    }

    /// Runs a performance test: every ask, at most `maxConcurrentRequests` at once, each recorded in the engine.
    public func runPerformanceTest(_ requestId: String, target: URL, asks: [StoreEngine.RetentionAsk], engine: StoreEngine,
                                   judge: @escaping @Sendable (RealtimeResponseBody, StoreEngine.RetentionAsk) async -> Bool) async {
        let width = max(1, StoreEngine.performanceTestConfig.maxConcurrentRequests ?? 1)
        await withTaskGroup(of: Void.self) { group in
            var next = 0
            func start() {
                guard next < asks.count else { return }
                let ask = asks[next]
                next += 1
                group.addTask {
                    var attempt = await self.ask(target, signedPayload: ask.signedPayload)
                    // An answer the App Store could not show (an unknown message, a forged offer) is an invalid response.
                    if let answer = attempt.answer, !(await judge(answer, ask)) { attempt.result = .invalidResponse }
                    try? await engine.recordPerformanceTestAttempt(requestId, milliseconds: attempt.milliseconds, result: attempt.result)
                }
            }
            for _ in 0..<width { start() }
            while await group.next() != nil { start() }
        }
    }
}
