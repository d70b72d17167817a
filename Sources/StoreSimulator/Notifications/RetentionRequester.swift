import AppStoreFormats
import Foundation
import AsyncHTTPClient
import NIOCore
import NIOHTTP1

/// Calls the developer's Get Retention Message endpoint as the App Store does: `POST {"signedPayload": "<JWS>"}`, an answer
/// within the response-time budget (700 ms, the whole answer — headers and body), HTTP 200 with a ``RealtimeResponseBody``.
/// Redirects are not followed (a 3xx is an unsuccessful response code): an `https://` URL cannot lead to plain HTTP.
public struct RetentionRequester: Sendable {
    /// Apple's budget for an answer.
    public static let budget: Duration = .milliseconds(700)
    /// The largest answer read.
    static let maxAnswer = 64 * 1024

    /// One client for the process, never shut down: it lives as long as the simulator does.
    static let client: HTTPClient = {
        // The budget is enforced per call (the race below); these only bound what a call could leave behind.
        var configuration = HTTPClient.Configuration(redirectConfiguration: .disallow, timeout: .init(connect: .seconds(10), read: .seconds(10)))
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 16
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()

    /// How long an answer may take: Apple's 700 ms unless a test that is not about time gives more (a loaded machine).
    public let budget: Duration

    public init(budget: Duration = RetentionRequester.budget) { self.budget = budget }

    /// One call: how it ended, how long it took, and the answer when it was a usable one.
    public struct Attempt: Sendable {
        public var result: SendAttemptResult
        public var milliseconds: Int
        public var answer: RealtimeResponseBody?
    }

    public func ask(_ url: URL, signedPayload: String) async -> Attempt {
        let budget = self.budget
        let budgetTimeAmount = TimeAmount.nanoseconds(Int64(budget.components.seconds) * 1_000_000_000 + budget.components.attoseconds / 1_000_000_000)
        let clock = ContinuousClock()
        let started = clock.now
        let elapsed: @Sendable () -> Int = {
            let duration = clock.now - started
            return Int(duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000)
        }
        let body = (try? AppStoreJSON.encoder().encode(RealtimeRequestBody(signedPayload: signedPayload))) ?? Data()
        let url = url.absoluteString
        // AsyncHTTPClient's deadline ends with the response head; the body is raced against the budget too, so an
        // endpoint that sends its headers and then trickles the body cannot hold the customer (or a test) waiting.
        let outcome = await withTaskGroup(of: Attempt?.self) { group in
            group.addTask {
                var request = HTTPClientRequest(url: url)
                request.method = .POST
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(bytes: body))
                do {
                    let response = try await Self.client.execute(request, deadline: .now() + budgetTimeAmount)
                    let answerBytes = try await response.body.collect(upTo: Self.maxAnswer)
                    let milliseconds = elapsed()
                    guard response.status == .ok else { return Attempt(result: .unsuccessfulHTTPResponseCode, milliseconds: milliseconds) }
                    guard let answer = try? AppStoreJSON.decoder().decode(RealtimeResponseBody.self, from: Data(answerBytes.readableBytesView)) else {
                        return Attempt(result: .invalidResponse, milliseconds: milliseconds)
                    }
                    return Attempt(result: .success, milliseconds: milliseconds, answer: answer)
                } catch let error as HTTPClientError where [.deadlineExceeded, .readTimeout, .connectTimeout, .cancelled].contains(error) {
                    return Attempt(result: .timedOut, milliseconds: elapsed())
                } catch let error as HTTPClientError where error == .remoteConnectionClosed {
                    return Attempt(result: .prematureClose, milliseconds: elapsed())
                } catch is NIOTooManyBytesError {
                    return Attempt(result: .invalidResponse, milliseconds: elapsed())
                } catch is CancellationError {
                    return Attempt(result: .timedOut, milliseconds: elapsed())
                } catch {
                    return Attempt(result: String(describing: error).contains("SSL") ? .tlsIssue : .noResponse, milliseconds: elapsed())
                }
            }
            group.addTask {
                try? await Task.sleep(for: budget + .milliseconds(20))
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        guard var attempt = outcome else { return Attempt(result: .timedOut, milliseconds: elapsed()) }
        if attempt.result == .success, Duration.milliseconds(attempt.milliseconds) > budget {
            attempt = Attempt(result: .timedOut, milliseconds: attempt.milliseconds)
        }
        return attempt
    }

    /// Runs a performance test: its requests, at most `maxConcurrentRequests` at once, each signed as it is sent and
    /// recorded in the engine. Stops early when the engine no longer counts the test as running.
    public func runPerformanceTest(_ test: StoreEngine.PerformanceTestRun, engine: StoreEngine) async {
        let width = max(1, StoreEngine.performanceTestConfig.maxConcurrentRequests ?? 1)
        await withTaskGroup(of: Void.self) { group in
            var next = 0
            func start() {
                guard next < test.requests else { return }
                next += 1
                group.addTask {
                    guard await engine.isPerformanceTestRunning(test.requestId),
                          let ask = try? await engine.retentionAsk(originalTransactionId: test.originalTransactionId, userLocale: "en-US", environment: .sandbox) else {
                        try? await engine.recordPerformanceTestAttempt(test.requestId, milliseconds: 0, result: .other)
                        return
                    }
                    let attempt = await self.ask(test.target, signedPayload: ask.signedPayload)
                    try? await engine.recordPerformanceTestAttempt(test.requestId, milliseconds: attempt.milliseconds, result: attempt.result)
                }
            }
            for _ in 0..<width { start() }
            while await group.next() != nil { start() }
        }
    }
}
