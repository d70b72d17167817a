// SwiftUI as Apple declares it (iOS 26 / macOS 26 SDKs), reduced to what IAPKit and the Swift blocks of README.md and
// docs/SDK.md use: `View`, which StoreKit's view modifiers extend, and the few views, property wrappers and the result
// builder a purchase button is made of. Test support for scripts/typecheck-apple: bodies trap.
import Foundation

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@MainActor @preconcurrency public protocol View {
    associatedtype Body: View
    @ViewBuilder @MainActor @preconcurrency var body: Self.Body { get }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
extension Never: View {
    public typealias Body = Never
    public var body: Never { fatalError() }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public protocol DynamicProperty {
    mutating func update()
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
extension DynamicProperty {
    public mutating func update() {}
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@frozen @propertyWrapper public struct State<Value>: DynamicProperty {
    public init(wrappedValue value: Value) { fatalError() }
    public var wrappedValue: Value { get { fatalError() } nonmutating set { fatalError() } }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
extension State: Sendable where Value: Sendable {
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public struct EnvironmentValues: CustomStringConvertible {
    public init() { fatalError() }
    public var description: String { fatalError() }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@frozen @propertyWrapper public struct Environment<Value>: DynamicProperty {
    nonisolated public init(_ keyPath: KeyPath<EnvironmentValues, Value>) { fatalError() }
    nonisolated public var wrappedValue: Value { fatalError() }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
extension Environment: Sendable where Value: Sendable {
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@frozen public struct EmptyView: View {
    nonisolated public init() {}
    public typealias Body = Never
    public var body: Never { fatalError() }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@frozen public struct TupleView<T>: View {
    public var value: T
    nonisolated public init(_ value: T) { self.value = value }
    public typealias Body = Never
    public var body: Never { fatalError() }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@resultBuilder public struct ViewBuilder {
    public static func buildBlock() -> EmptyView { EmptyView() }
    public static func buildBlock<Content>(_ content: Content) -> Content where Content: View { content }
    public static func buildExpression<Content>(_ content: Content) -> Content where Content: View { content }
}

@available(iOS 17.0, macOS 14.0, tvOS 17.0, watchOS 10.0, *)
extension ViewBuilder {
    public static func buildBlock<each Content>(_ content: repeat each Content) -> TupleView<(repeat each Content)> where repeat each Content: View {
        fatalError()
    }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@frozen public struct LocalizedStringKey: Equatable, ExpressibleByStringLiteral {
    public init(_ value: String) { fatalError() }
    public init(stringLiteral value: String) { fatalError() }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@frozen public struct Text: Equatable, Sendable {
    nonisolated public init(_ key: LocalizedStringKey, tableName: String? = nil, bundle: Bundle? = nil, comment: StaticString? = nil) { fatalError() }
    @_disfavoredOverload nonisolated public init<S>(_ content: S) where S: StringProtocol { fatalError() }
    public static func == (lhs: Text, rhs: Text) -> Bool { fatalError() }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
extension Text: View {
    public typealias Body = Never
    public var body: Never { fatalError() }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@MainActor @preconcurrency public struct Button<Label>: View where Label: View {
    @preconcurrency nonisolated public init(action: @escaping @MainActor () -> Void, @ViewBuilder label: () -> Label) { fatalError() }
    public typealias Body = Never
    public var body: Never { fatalError() }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
extension Button where Label == Text {
    @preconcurrency nonisolated public init(_ titleKey: LocalizedStringKey, action: @escaping @MainActor () -> Void) { fatalError() }
    @_disfavoredOverload @preconcurrency nonisolated public init<S>(_ title: S, action: @escaping @MainActor () -> Void) where S: StringProtocol { fatalError() }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
@frozen public struct VStack<Content>: View where Content: View {
    nonisolated public init(spacing: CGFloat? = nil, @ViewBuilder content: () -> Content) { fatalError() }
    public typealias Body = Never
    public var body: Never { fatalError() }
}
