import AppStoreFormats
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Calls the developer's Get Retention Message endpoint as the App Store does: `POST {"signedPayload": "<JWS>"}`, an answer
/// within the response-time budget (700 ms), HTTP 200 with a ``RealtimeResponseBody``.
public struct RetentionRequester: Sendable {
    /// Apple's budget for an answer.
    public static let budget: Duration = .milliseconds(700)
    /// The largest answer read.
    static let maxAnswer = 64 * 1024

    let session: URLSession

    public init() {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 0.7
        configuration.httpMaximumConnectionsPerHost = 16
        session = URLSession(configuration: configuration)
    }

    /// One call: how it ended, how long it took, and the answer when it was a usable one.
    public struct Attempt: Sendable {
        public var result: SendAttemptResult
        public var milliseconds: Int
        public var answer: RealtimeResponseBody?
    }

    public func ask(_ url: URL, signedPayload: String) async -> Attempt {
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try? AppStoreJSON.encoder().encode(RealtimeRequestBody(signedPayload: signedPayload))
        let clock = ContinuousClock()
        let started = clock.now
        func elapsed() -> Int {
            let duration = clock.now - started
            return Int(duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000)
        }
        do {
            let (data, response) = try await session.data(for: request)
            let milliseconds = elapsed()
            guard Duration.milliseconds(milliseconds) <= Self.budget else { return Attempt(result: .timedOut, milliseconds: milliseconds) }
            guard (response as? HTTPURLResponse)?.statusCode == 200 else { return Attempt(result: .unsuccessfulHTTPResponseCode, milliseconds: milliseconds) }
            guard data.count <= Self.maxAnswer, let answer = try? AppStoreJSON.decoder().decode(RealtimeResponseBody.self, from: data) else {
                return Attempt(result: .invalidResponse, milliseconds: milliseconds)
            }
            return Attempt(result: .success, milliseconds: milliseconds, answer: answer)
        } catch let error as URLError where error.code == .timedOut {
            return Attempt(result: .timedOut, milliseconds: elapsed())
        } catch let error as URLError where error.code == .networkConnectionLost {
            return Attempt(result: .prematureClose, milliseconds: elapsed())
        } catch let error as URLError where error.code == .secureConnectionFailed || error.code == .serverCertificateUntrusted {
            return Attempt(result: .tlsIssue, milliseconds: elapsed())
        } catch {
            return Attempt(result: .noResponse, milliseconds: elapsed())
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
